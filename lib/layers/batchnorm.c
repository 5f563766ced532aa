/* Batch normalisation over (N, H, W) per channel, PyTorch semantics.
 *
 * In CNHW each channel is one contiguous run of m = N*HW values.  The runs
 * are cut into fixed-size chunks (independent of the thread count) that are
 * the units of parallel work; per-chunk sums in double are combined per
 * channel in chunk order, so results are bitwise reproducible for any
 * thread count, and small channel counts still use every thread.
 *
 * Training forward keeps the batch mean and 1/std; backward recomputes
 * x_hat = (x - mean) / std from the input instead of storing it.
 *
 * Fused with the ReLU after it (layer.h, fused_relu): forward writes
 * max(0, y) into the ReLU's output, and backward reads the ReLU's output
 * gradient where the ReLU's output is positive, zero elsewhere, that
 * output recomputed from x with the forward's operations rather than
 * read: the same values, bit for bit, without the ReLU's own passes.
 *
 * Synchronised (PyTorch's SyncBatchNorm; in a parallel training step, when
 * resolved on at finalize): forward gathers each rank's count, mean and
 * sum of squared deviations M2 per channel and combines them in rank
 * order with Chan et al.'s pairwise formula, so that every rank
 * normalises with, and keeps as running statistics, the same global
 * values; backward sums the two per-channel reductions over the ranks
 * before computing dx (the parameter gradients stay this rank's share,
 * which the exchange sums).  A rank without samples runs with n == 0 and
 * contributes a count of 0. */
#include <math.h>
#include <stdio.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../kernels/kernels.h"
#include "batchnorm.h"
#include "layer.h"
#include "layers.h"

#define CHUNK 4096    /* elements per work unit */

typedef struct bn_priv {
    float eps, momentum;
    int sync_setting; /* pcnn_batchnorm_set_sync: -1 the network's default, 0, 1 */
    bool sync;        /* resolved at finalize (decide) */
    double count;     /* values per channel behind the last training forward's
                         statistics: local, or global when synchronised */
    float *running; /* mean[C] then unbiased var[C]: one buffer */
    float *batch;   /* mean[C], inv_std[C], mean_lo[C] of the last training
                       forward: mean + mean_lo is the batch mean to ~2^-48,
                       so x - mean stays exact when |mean| >> std */
} bn_priv;

static size_t bn_chunks(size_t m) { return (m + CHUNK - 1) / CHUNK; }

/* What a rank contributes to a synchronised forward: its count of values
 * per channel, then the C means, then the C sums of squared deviations. */
static size_t sync_doubles(size_t c) { return 1 + 2 * c; }

static size_t bn_workspace(const pcnn_layer *l, const plan_ctx *p)
{
    /* Per unit two double partial sums; per channel two double totals and
     * two floats (mean or shift, multiplier). */
    size_t c = (size_t)l->out.c;
    size_t units = c * bn_chunks((size_t)p->max_batch * shape_spatial(l->out));
    const bn_priv *b = l->priv;
    size_t sync = b->sync ? 2 * sync_doubles(c) : 0; /* this rank's contribution */
    return 2 * (2 * units + 2 * c) + 2 * c + sync;
}

static void bn_decide(pcnn_layer *l, const plan_ctx *p)
{
    bn_priv *b = l->priv;
    b->sync = b->sync_setting < 0 ? p->sync_batchnorm : b->sync_setting == 1;
    snprintf(l->decision.kernel, sizeof l->decision.kernel, "%s",
             b->sync ? "statistics synchronised across ranks" : "");
}

static pcnn_status bn_setup(pcnn_layer *l, const plan_ctx *p)
{
    (void)p;
    bn_priv *b = l->priv;
    size_t c = (size_t)l->out.c;
    b->running = mem_alloc_floats(2 * c);
    b->batch = mem_alloc_floats(3 * c);
    if (!b->running || !b->batch) {
        char name[64];
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "%s: %zu floats of statistics",
                    layer_name(l, name, sizeof name), 5 * c);
    }
    for (size_t i = 0; i < c; i++) b->running[c + i] = 1.0f;
    l->buffer_bytes += 5 * c * sizeof(float);
    return PCNN_OK;
}

static void bn_init(pcnn_layer *l, uint64_t seed)
{
    (void)seed;
    size_t c = (size_t)l->out.c;
    for (size_t i = 0; i < c; i++) {
        l->params[i] = 1.0f;     /* gamma */
        l->params[c + i] = 0.0f; /* beta */
    }
}

/* Sums of (a[i] - shift) and (a[i] - shift)^2 over [lo, hi), or, with b, of
 * b[i] and b[i] * (a[i] - shift - shift_lo) * scale: the two reductions BN
 * needs. */
static void bn_sums(const float *a, const float *b, const float *relu, float shift,
                    float shift_lo, float scale, size_t lo, size_t hi, double out[2])
{
    if (!b)
        sums_shifted(a + lo, hi - lo, shift, out);
    else
        sums_gradient(a + lo, b + lo, relu, hi - lo, shift, shift_lo, scale, out);
}

/* Work units u = (channel, chunk) of the c runs of m values. */
typedef struct bn_args {
    const float *a, *b;                 /* x, and dy (reductions over both) */
    float *out;                         /* y or dx */
    const float *shift, *shift_lo, *scale, *beta;
    const double *tot;                  /* backward apply: the reductions */
    double norm;                        /* backward apply: values behind tot */
    double *part;
    size_t m, nch;
    const float *relu_beta;             /* fused ReLU, backward apply: beta */
    const float *relu_mul;              /* fused ReLU, backward: gamma * inv_std per
                                           channel (with beta, the forward's
                                           multiplier and shift); dy counts where
                                           the output recomputed from x is > 0 */
    bool relu;                          /* fused ReLU: apply writes max(0, y) */
} bn_args;

VECTOR_CLONES static void reduce_range(void *arg, size_t u0, size_t u1)
{
    const bn_args *g = arg;
    for (size_t u = u0; u < u1; u++) {
        size_t ch = u / g->nch, lo = u % g->nch * CHUNK;
        size_t hi = lo + CHUNK < g->m ? lo + CHUNK : g->m;
        const float relu[2] = {g->relu_mul ? g->relu_mul[ch] : 0.0f,
                               g->relu_mul ? g->beta[ch] : 0.0f};
        bn_sums(g->a + ch * g->m, g->b ? g->b + ch * g->m : NULL, g->relu_mul ? relu : NULL,
                g->shift[ch], g->shift_lo ? g->shift_lo[ch] : 0.0f,
                g->scale ? g->scale[ch] : 1.0f, lo, hi, g->part + 2 * u);
    }
}

/* Per-channel totals tot[2c], tot[2c+1] of bn_sums over the channel's run. */
static void bn_reduce(const float *a, const float *b, const float *relu_mul, const float *beta,
                      const float *shift, const float *shift_lo, const float *scale, int c,
                      size_t m, double *part, double *tot, int threads)
{
    size_t nch = bn_chunks(m);
    bn_args g = {.a = a, .b = b, .shift = shift, .shift_lo = shift_lo, .scale = scale,
                 .beta = beta, .part = part, .m = m, .nch = nch, .relu_mul = relu_mul};
    parallel_for((size_t)c * nch, 1, (size_t)c * m, threads, reduce_range, &g);
    for (int ch = 0; ch < c; ch++) {
        double t1 = 0.0, t2 = 0.0;
        for (size_t j = 0; j < nch; j++) {
            t1 += part[2 * ((size_t)ch * nch + j)];
            t2 += part[2 * ((size_t)ch * nch + j) + 1];
        }
        tot[2 * ch] = t1;
        tot[2 * ch + 1] = t2;
    }
}

/* y = (x - mean[c] - mean_lo[c]) * mul[c] + beta[c]; mean_lo may be NULL;
 * then max(0, y) for a fused ReLU (y < 0 ? 0 : y, which lets NaN through
 * as the ReLU layer does). */
VECTOR_CLONES static void apply_range(void *arg, size_t u0, size_t u1)
{
    const bn_args *g = arg;
    for (size_t u = u0; u < u1; u++) {
        size_t ch = u / g->nch, lo = u % g->nch * CHUNK;
        size_t hi = lo + CHUNK < g->m ? lo + CHUNK : g->m;
        const float *restrict xc = g->a + ch * g->m;
        float *restrict yc = g->out + ch * g->m;
        float mu = g->shift[ch], mu_lo = g->shift_lo ? g->shift_lo[ch] : 0.0f;
        float a = g->scale[ch], b = g->beta[ch];
        if (g->relu)
            for (size_t i = lo; i < hi; i++) {
                float v = (xc[i] - mu - mu_lo) * a + b;
                yc[i] = v < 0.0f ? 0.0f : v;
            }
        else
            for (size_t i = lo; i < hi; i++) yc[i] = (xc[i] - mu - mu_lo) * a + b;
    }
}

static void bn_apply(const float *x, float *y, bool relu, const float *mean,
                     const float *mean_lo, const float *mul, const float *beta, int c, size_t m,
                     int threads)
{
    size_t nch = bn_chunks(m);
    bn_args g = {.a = x, .out = y, .shift = mean, .shift_lo = mean_lo, .scale = mul,
                 .beta = beta, .m = m, .nch = nch, .relu = relu};
    parallel_for((size_t)c * nch, 1, (size_t)c * m, threads, apply_range, &g);
}

/* Keep a training forward's statistics of channel ch (mean mu, biased
 * variance var) for the output and the backward pass, and with `update`
 * fold them into the running statistics (unbias: the factor to the
 * unbiased variance). */
static inline void bn_keep(bn_priv *b, size_t C, size_t ch, double mu, double var,
                           double unbias, bool update)
{
    const double mom = b->momentum;
    b->batch[ch] = (float)mu;
    b->batch[2 * C + ch] = (float)(mu - (double)b->batch[ch]);
    b->batch[C + ch] = (float)(1.0 / sqrt(var + b->eps));
    if (update) {
        b->running[ch] = (float)((1.0 - mom) * b->running[ch] + mom * mu);
        b->running[C + ch] = (float)((1.0 - mom) * b->running[C + ch] + mom * var * unbias);
    }
}

/* The statistics of the global batch, from this rank's sums tot over its m
 * values per channel (shifted by shift): every rank's count, mean and M2
 * are gathered and combined pairwise in rank order (Chan, Golub and
 * LeVeque), the same arithmetic on every rank.  False when the gather
 * failed (nothing kept). */
static bool bn_sync_stats(bn_priv *b, const run_ctx *ctx, size_t C, const float *shift,
                          const double *tot, double *mine, const float *gamma, float *mul,
                          size_t m)
{
    const size_t stride = sync_doubles(C);
    mine[0] = (double)m;
    for (size_t ch = 0; ch < C; ch++) {
        const double dm = m > 0 ? tot[2 * ch] / (double)m : 0.0;
        const double m2 = m > 0 ? tot[2 * ch + 1] - tot[2 * ch] * dm : 0.0;
        mine[1 + ch] = m > 0 ? shift[ch] + dm : 0.0;
        mine[1 + C + ch] = m2 > 0.0 ? m2 : 0.0;
    }
    const double *all = ctx->reduce->gather(ctx->reduce->arg, mine, (int)stride);
    if (!all) return false;
    double total = 0.0;
    for (int q = 0; q < ctx->reduce->ranks; q++) total += all[(size_t)q * stride];
    const double unbias = total > 1.0 ? total / (total - 1.0) : 1.0;
    for (size_t ch = 0; ch < C; ch++) {
        double n = 0.0, mu = 0.0, m2 = 0.0;
        for (int q = 0; q < ctx->reduce->ranks; q++) {
            const double *r = all + (size_t)q * stride;
            if (r[0] == 0.0) continue;
            const double nn = n + r[0], d = r[1 + ch] - mu;
            mu += d * (r[0] / nn);
            m2 += r[1 + C + ch] + d * d * (n * r[0] / nn);
            n = nn;
        }
        bn_keep(b, C, ch, mu, n > 0.0 ? m2 / n : 0.0, unbias, ctx->update_stats);
        mul[ch] = gamma[ch] * b->batch[C + ch];
    }
    b->count = total;
    return true;
}

static void bn_forward(pcnn_layer *l, const run_ctx *ctx)
{
    bn_priv *b = l->priv;
    int c = l->out.c;
    size_t C = (size_t)c, m = (size_t)ctx->n * shape_spatial(l->out);
    const float *x = l->inputs[0]->y, *gamma = l->params, *beta = l->params + C;
    const bool relu = l->fused_relu != NULL;
    float *out = relu ? l->fused_relu->y : l->y;
    double *part = (double *)ctx->workspace;
    double *tot = part + 2 * C * bn_chunks(m);
    /* Per-channel mean and multiplier, kept in the workspace after tot. */
    float *mean = (float *)(tot + 2 * C), *mul = mean + C;
    if (!ctx->train) {
        for (size_t ch = 0; ch < C; ch++) {
            mean[ch] = b->running[ch];
            mul[ch] = (float)(gamma[ch] / sqrt((double)b->running[C + ch] + b->eps));
        }
        bn_apply(x, out, relu, mean, NULL, mul, beta, c, m, ctx->threads);
        return;
    }
    /* Shifting by each channel's first value keeps the one-pass variance
     * accurate when |mean| >> std. */
    float *shift = mean;
    if (m > 0) { /* m == 0: a rank without samples joining a synchronised step */
        for (size_t ch = 0; ch < C; ch++) shift[ch] = x[ch * m];
        bn_reduce(x, NULL, NULL, NULL, shift, NULL, NULL, c, m, part, tot, ctx->threads);
    }
    const bool sync = b->sync && ctx->reduce;
    double *mine = (double *)(mul + C); /* workspace after mean and mul (bn_workspace) */
    /* A failed reduction leaves the running statistics alone and
     * normalises with the local ones: the graph fails the step. */
    if (!sync || !bn_sync_stats(b, ctx, C, shift, tot, mine, gamma, mul, m)) {
        double unbias = m > 1 ? (double)m / (double)(m - 1) : 1.0;
        for (size_t ch = 0; ch < C && m > 0; ch++) {
            double dm = tot[2 * ch] / (double)m;
            double var = tot[2 * ch + 1] / (double)m - dm * dm;
            if (var < 0.0) var = 0.0;
            bn_keep(b, C, ch, shift[ch] + dm, var, unbias, ctx->update_stats && !sync);
            mul[ch] = gamma[ch] * b->batch[C + ch];
        }
        b->count = (double)m;
    }
    if (m > 0)
        bn_apply(x, out, relu, b->batch, b->batch + 2 * C, mul, beta, c, m, ctx->threads);
}

/* dx = gamma*inv_std * (dy - mean(dy) - x_hat * mean(dy * x_hat)), over
 * units of bn_args (beta holds gamma, scale inv_std). */
static inline void grad_units(const bn_args *g, size_t u0, size_t u1, bool acc)
{
    for (size_t u = u0; u < u1; u++) {
        size_t ch = u / g->nch, lo = u % g->nch * CHUNK;
        size_t hi = lo + CHUNK < g->m ? lo + CHUNK : g->m;
        const float *restrict xc = g->a + ch * g->m, *restrict dyc = g->b + ch * g->m;
        float *restrict gc = g->out + ch * g->m;
        float mu = g->shift[ch], mu_lo = g->shift_lo[ch], is = g->scale[ch];
        float k = g->beta[ch] * is;
        float mdy = (float)(g->tot[2 * ch] / g->norm);
        float mdx = (float)(g->tot[2 * ch + 1] / g->norm);
        if (g->relu_mul) { /* fused ReLU: dy where its output, recomputed, is positive */
            const float a = g->relu_mul[ch], b = g->relu_beta[ch];
            if (acc)
                for (size_t i = lo; i < hi; i++) {
                    const float t = xc[i] - mu - mu_lo;
                    gc[i] += k * (relu_mask(dyc[i], t * a + b) - mdy - t * is * mdx);
                }
            else
                for (size_t i = lo; i < hi; i++) {
                    const float t = xc[i] - mu - mu_lo;
                    gc[i] = k * (relu_mask(dyc[i], t * a + b) - mdy - t * is * mdx);
                }
        } else if (acc)
            for (size_t i = lo; i < hi; i++)
                gc[i] += k * (dyc[i] - mdy - (xc[i] - mu - mu_lo) * is * mdx);
        else
            for (size_t i = lo; i < hi; i++)
                gc[i] = k * (dyc[i] - mdy - (xc[i] - mu - mu_lo) * is * mdx);
    }
}

VECTOR_CLONES static void grad_range(void *arg, size_t u0, size_t u1)
{
    grad_units(arg, u0, u1, false);
}

VECTOR_CLONES static void grad_range_acc(void *arg, size_t u0, size_t u1)
{
    grad_units(arg, u0, u1, true);
}

/* dx = gamma*inv_std * (dy - mean(dy) - x_hat * mean(dy * x_hat)). */
static void bn_backward(pcnn_layer *l, const run_ctx *ctx, float *const dx[2])
{
    bn_priv *b = l->priv;
    int c = l->out.c;
    size_t C = (size_t)c, m = (size_t)ctx->n * shape_spatial(l->out);
    const float *x = l->inputs[0]->y, *gamma = l->params, *beta = l->params + C;
    const float *dy = l->fused_relu ? l->fused_relu->dy : l->dy;
    const float *mean = b->batch, *istd = b->batch + C, *mean_lo = b->batch + 2 * C;
    double *part = (double *)ctx->workspace;
    double *tot = part + 2 * C * bn_chunks(m);
    /* A fused ReLU's mask comes from x and the forward's multiplier, made
     * the same way (reading x anyway is cheaper than reading its output). */
    float *relu_mul = NULL;
    if (l->fused_relu) {
        relu_mul = (float *)(tot + 2 * C);
        for (size_t ch = 0; ch < C; ch++) relu_mul[ch] = gamma[ch] * istd[ch];
    }
    if (m > 0)
        bn_reduce(x, dy, relu_mul, beta, mean, mean_lo, istd, c, m, part, tot, ctx->threads);
    else /* a rank without samples joining a synchronised step */
        for (size_t i = 0; i < 2 * C; i++) tot[i] = 0.0;
    for (size_t ch = 0; ch < C; ch++) {
        l->grads[ch] = (float)tot[2 * ch + 1]; /* dgamma = sum dy * x_hat */
        l->grads[C + ch] = (float)tot[2 * ch]; /* dbeta = sum dy */
    }
    /* Synchronised: dx needs the sums of the global batch, whose mean the
     * forward took (the parameter gradients above stay this rank's share:
     * the exchange sums them).  A failed sum fails the step. */
    const bool sync = b->sync && ctx->reduce;
    if (sync) ctx->reduce->sum(ctx->reduce->arg, tot, (int)(2 * C));
    if (!dx[0] || m == 0) return;
    bn_args g = {.a = x, .b = dy, .out = dx[0], .shift = mean, .shift_lo = mean_lo,
                 .scale = istd, .beta = gamma, .tot = tot, .m = m, .nch = bn_chunks(m),
                 .norm = sync ? b->count : (double)m, .relu_beta = beta, .relu_mul = relu_mul};
    parallel_for(C * g.nch, 1, C * m, ctx->threads,
                 l->accumulate_dx[0] ? grad_range_acc : grad_range, &g);
}

static void bn_destroy(pcnn_layer *l)
{
    bn_priv *b = l->priv;
    if (b) {
        mem_free(b->running);
        mem_free(b->batch);
    }
    mem_free(b);
    l->priv = NULL;
}

static void bn_describe(const pcnn_layer *l, char *buf, size_t size)
{
    const bn_priv *b = l->priv;
    snprintf(buf, size, "eps=%.9g momentum=%.9g", (double)b->eps, (double)b->momentum);
}

static pcnn_status bn_twin(const pcnn_layer *l, layer_list *list, pcnn_layer *const *in,
                           twin_opts o, pcnn_layer **out, const char *func)
{
    const bn_priv *b = l->priv;
    (void)o;
    return batchnorm_add(list, in[0], b->eps, b->momentum, out, func);
}

static const layer_ops bn_ops = {
    .kind = "batchnorm",
    .workspace_floats = bn_workspace,
    .decide = bn_decide,
    .setup = bn_setup,
    .init_params = bn_init,
    .forward = bn_forward,
    .backward = bn_backward,
    .destroy = bn_destroy,
    .describe = bn_describe,
    .caps = {.split = LAYER_SPLIT_REDUCTION, .cost = LAYER_COST_BATCHNORM, .twin = bn_twin},
};

bool layer_is_batchnorm(const pcnn_layer *l)
{
    return l->ops == &bn_ops;
}

float *batchnorm_running_stats(pcnn_layer *l, size_t *count)
{
    const bn_priv *b = l && l->ops == &bn_ops ? l->priv : NULL;
    bool ready = b && b->running;
    if (count) *count = ready ? 2 * (size_t)l->out.c : 0;
    return ready ? b->running : NULL;
}

bool batchnorm_synchronised(const pcnn_layer *l)
{
    const bn_priv *b = l && l->ops == &bn_ops ? l->priv : NULL;
    return b && b->sync;
}

size_t batchnorm_sync_doubles(const pcnn_layer *l)
{
    return batchnorm_synchronised(l) ? sync_doubles((size_t)l->out.c) : 0;
}

pcnn_status batchnorm_set_sync(pcnn_layer *l, int sync, const char *func)
{
    char name[64];
    if (l->ops != &bn_ops)
        return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "%s is not a batch norm",
                         layer_name(l, name, sizeof name));
    if (l->list->frozen)
        return error_set(PCNN_ERR_INVALID_STATE, func,
                         "the network is finalized: synchronisation is set before finalize");
    if (sync < -1 || sync > 1)
        return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "%s: sync %d must be -1 (the "
                         "network's PCNN_OPT_SYNC_BATCHNORM), 0 or 1",
                         layer_name(l, name, sizeof name), sync);
    ((bn_priv *)l->priv)->sync_setting = sync;
    return PCNN_OK;
}

pcnn_status batchnorm_add(layer_list *list, pcnn_layer *in, float eps, float momentum,
                          pcnn_layer **out, const char *func)
{
    TRY(layer_check_new(list, &in, 1, out, func));
    int index = list->count;
    ADD_REQUIRE(isfinite(eps) && eps > 0.0f, PCNN_ERR_INVALID_ARGUMENT,
                "layer %d (batchnorm): eps %g must be finite and > 0", index, (double)eps);
    ADD_REQUIRE(momentum >= 0.0f && momentum <= 1.0f, PCNN_ERR_INVALID_ARGUMENT,
                "layer %d (batchnorm): momentum %g must be in [0, 1]", index, (double)momentum);
    bn_priv *b = mem_calloc(1, sizeof *b);
    if (!b) return ADD_FAIL(PCNN_ERR_OUT_OF_MEMORY, "layer %d (batchnorm): no memory", index);
    b->eps = eps;
    b->momentum = momentum;
    b->sync_setting = -1;
    pcnn_layer *l;
    pcnn_status st =
        layer_append(list, &bn_ops, &in, 1, in->out, 2 * (size_t)in->out.c, b, &l);
    if (st != PCNN_OK) {
        mem_free(b);
        return st;
    }
    *out = l;
    return PCNN_OK;
}
