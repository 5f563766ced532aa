#include "optim.h"

#include <math.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../kernels/kernels.h"

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

typedef struct update_args {
    float *params, *m, *v;
    const float *grads;
    float lr, wd, mu, b1, b2, eps, step, inv_bc2;
} update_args;

VECTOR_CLONES static void sgd_range(void *arg, size_t lo, size_t hi)
{
    const update_args *a = arg;
    for (size_t i = lo; i < hi; i++) a->params[i] -= a->lr * (a->grads[i] + a->wd * a->params[i]);
}

VECTOR_CLONES static void momentum_range(void *arg, size_t lo, size_t hi)
{
    const update_args *a = arg;
    for (size_t i = lo; i < hi; i++) {
        float g = a->grads[i] + a->wd * a->params[i];
        a->m[i] = a->mu * a->m[i] + g;
        a->params[i] -= a->lr * a->m[i];
    }
}

VECTOR_CLONES static void adam_range(void *arg, size_t lo, size_t hi)
{
    const update_args *a = arg;
    for (size_t i = lo; i < hi; i++) {
        float g = a->grads[i] + a->wd * a->params[i];
        a->m[i] = a->b1 * a->m[i] + (1.0f - a->b1) * g;
        a->v[i] = a->b2 * a->v[i] + (1.0f - a->b2) * g * g;
        a->params[i] -= a->step * a->m[i] / (sqrtf(a->v[i]) * a->inv_bc2 + a->eps);
    }
}

static range_fn range_of(pcnn_optimizer kind)
{
    return kind == PCNN_OPTIMIZER_SGD        ? sgd_range
           : kind == PCNN_OPTIMIZER_MOMENTUM ? momentum_range
                                             : adam_range;
}

static update_args args_of(const optim_hyper *h, double lr, double weight_decay, uint64_t t,
                           float *params, const float *grads, float *m, float *v)
{
    return (update_args){
        .params = params, .m = m, .v = v, .grads = grads,
        .lr = (float)lr, .wd = (float)weight_decay, .mu = (float)h->momentum,
        .b1 = (float)h->beta1, .b2 = (float)h->beta2, .eps = (float)h->epsilon,
        /* torch.optim.Adam: step = lr / (1 - b1^t); denom = sqrt(v)/sqrt(1 - b2^t) + eps */
        .step = (float)(lr / (1.0 - pow(h->beta1, (double)t))),
        .inv_bc2 = (float)(1.0 / sqrt(1.0 - pow(h->beta2, (double)t))),
    };
}

void optim_update(pcnn_optimizer kind, const optim_hyper *h, double lr, double weight_decay,
                  uint64_t t, float *params, const float *grads, float *m, float *v,
                  size_t count, int threads)
{
    update_args a = args_of(h, lr, weight_decay, t, params, grads, m, v);
    parallel_for(count, 16, 2 * count, threads, range_of(kind), &a);
}

typedef struct strided_args {
    update_args first; /* of run 0 */
    range_fn fn;
    size_t len, stride;
} strided_args;

/* Software prefetch of a run's gradients: the hardware prefetcher starts
 * over at each run (a gap between runs), which made short runs (1 KiB at a
 * 2 KiB stride) 2.7 times slower per parameter than one long one;
 * prefetching the run after next brings that to 2.2, and the parameters
 * packed (they and the state stream) further (bench/strided_update.c). */
static void prefetch_run(const float *grads, size_t len)
{
    for (size_t i = 0; i < len; i += 16) __builtin_prefetch(grads + i, 0); /* 64-byte lines */
}

#define PREFETCH_AHEAD 2 /* runs: 1 already helps; 2-4 measured alike */
static void strided_range(void *arg, size_t lo, size_t hi)
{
    const strided_args *s = arg;
    for (size_t j = lo; j < hi; j++) {
        if (j + PREFETCH_AHEAD < hi)
            prefetch_run(s->first.grads + (j + PREFETCH_AHEAD) * s->stride, s->len);
        update_args a = s->first;
        a.params += j * s->len;
        a.grads += j * s->stride;
        if (a.m) a.m += j * s->len;
        if (a.v) a.v += j * s->len;
        s->fn(&a, 0, s->len);
    }
}

void optim_update_strided(pcnn_optimizer kind, const optim_hyper *h, double lr,
                          double weight_decay, uint64_t t, float *params, const float *grads,
                          float *m, float *v, size_t len, size_t stride, size_t runs, int threads)
{
    strided_args s = {args_of(h, lr, weight_decay, t, params, grads, m, v), range_of(kind), len,
                      stride};
    parallel_for(runs, 1, 2 * len * runs, threads, strided_range, &s);
}
