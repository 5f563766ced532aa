#include "optim.h"

#include <math.h>

#include "../core/error.h"
#include "../core/memory.h"

pcnn_status optim_state_alloc(optim_state *s, pcnn_optimizer kind, size_t count)
{
    s->m = s->v = NULL;
    s->count = count;
    if (kind == PCNN_OPTIMIZER_SGD) return PCNN_OK;
    s->m = mem_alloc_floats(count);
    if (kind == PCNN_OPTIMIZER_ADAM) s->v = mem_alloc_floats(count);
    if (!s->m || (kind == PCNN_OPTIMIZER_ADAM && !s->v)) {
        optim_state_free(s);
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "optimizer state for %zu parameters", count);
    }
    return PCNN_OK;
}

void optim_state_free(optim_state *s)
{
    mem_free(s->m);
    mem_free(s->v);
    s->m = s->v = NULL;
}

size_t optim_state_bytes(const optim_state *s)
{
    return ((s->m ? s->count : 0) + (s->v ? s->count : 0)) * sizeof(float);
}

void optim_update(pcnn_optimizer kind, const optim_hyper *h, double lr, double weight_decay,
                  uint64_t t, float *params, const float *grads, float *m, float *v,
                  size_t count, int threads)
{
    const float flr = (float)lr, wd = (float)weight_decay;
    const long len = (long)count;
    switch (kind) {
    case PCNN_OPTIMIZER_SGD:
#pragma omp parallel for num_threads(threads) schedule(static) if (len > 32768)
        for (long i = 0; i < len; i++) params[i] -= flr * (grads[i] + wd * params[i]);
        break;
    case PCNN_OPTIMIZER_MOMENTUM: {
        const float mu = (float)h->momentum;
#pragma omp parallel for num_threads(threads) schedule(static) if (len > 32768)
        for (long i = 0; i < len; i++) {
            float g = grads[i] + wd * params[i];
            m[i] = mu * m[i] + g;
            params[i] -= flr * m[i];
        }
        break;
    }
    case PCNN_OPTIMIZER_ADAM: {
        const float b1 = (float)h->beta1, b2 = (float)h->beta2, eps = (float)h->epsilon;
        /* torch.optim.Adam: step = lr / (1 - b1^t); denom = sqrt(v)/sqrt(1 - b2^t) + eps */
        const float step = (float)(lr / (1.0 - pow(h->beta1, (double)t)));
        const float inv_bc2 = (float)(1.0 / sqrt(1.0 - pow(h->beta2, (double)t)));
#pragma omp parallel for num_threads(threads) schedule(static) if (len > 32768)
        for (long i = 0; i < len; i++) {
            float g = grads[i] + wd * params[i];
            m[i] = b1 * m[i] + (1.0f - b1) * g;
            v[i] = b2 * v[i] + (1.0f - b2) * g * g;
            params[i] -= step * m[i] / (sqrtf(v[i]) * inv_bc2 + eps);
        }
        break;
    }
    }
}
