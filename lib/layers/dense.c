/* Fully connected layer: Y[K x N] = W[K x F] * X[F x N] (+ b), one GEMM over
 * the whole batch.
 *
 * X is the input flattened in PyTorch order (f = c*HW + hw).  In CNHW a
 * (C, 1, 1) input already is that F x N matrix; otherwise it is transposed
 * into a persistent buffer, kept because backward needs X for dW.
 *
 * bf16 products (PCNN_OPT_PRECISION, pcnn_layer_set_precision): forward
 * converts W to a bf16 copy (the parameters change every step) and X to a
 * kept bf16 copy, backward dY once into the workspace; the three GEMMs
 * then multiply bf16 operands with fp32 sums (gemm_bf16.h).  The FC
 * gradient exchange computes dW from gathered fp32 blocks, in fp32. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../kernels/gemm_bf16.h"
#include "../kernels/kernels.h"
#include "../kernels/kernels_bf16.h"
#include "dense.h"
#include "flatten.h"
#include "layer.h"
#include "layers.h"

typedef struct dense_priv {
    int out;         /* K */
    int features;    /* F = C*H*W of the input */
    size_t spatial;  /* H*W of the input; 1: no transpose needed */
    bool bias;
    float *xt;       /* F x max_batch flattened input, when spatial > 1 */
    bool bf16;       /* bf16 products, decided at finalize */
    bf16 *wb;        /* bf16: W's copy, made by each forward */
    bf16 *xb;        /* bf16: the F x n input matrix of the last forward */
} dense_priv;

static size_t up64(size_t x) { return (x + 63) / 64 * 64; }

/* bf16: the workspace's bytes before the GEMMs' packing workspaces: dY
 * in bf16, then dX in fp32 when it is transposed back. */
static size_t bf16_head(const dense_priv *d, int n)
{
    return up64((size_t)d->out * (size_t)n * sizeof(bf16)) +
           (d->spatial > 1 ? up64((size_t)d->features * (size_t)n * sizeof(float)) : 0);
}

/* bf16: the packing workspace bytes of the three GEMMs on `threads`. */
static size_t bf16_gemm_ws(const dense_priv *d, int n, int threads)
{
    const int k = d->out, f = d->features;
    size_t w = gemm_bf16_workspace(k, n, f), dw = gemm_bf16_workspace(k, f, n),
           dx = gemm_bf16_workspace(f, n, k);
    if (dw > w) w = dw;
    if (dx > w) w = dx;
    return (size_t)(threads > 0 ? threads : 1) * w;
}

static size_t dense_workspace(const pcnn_layer *l, const plan_ctx *p)
{
    const dense_priv *d = l->priv;
    if (d->bf16)
        return (bf16_head(d, p->max_batch) + bf16_gemm_ws(d, p->max_batch, p->threads) + 3) / 4;
    /* dX before it is transposed back into the input's CNHW layout. */
    return d->spatial > 1 ? (size_t)d->features * (size_t)p->max_batch : 0;
}

static void dense_decide(pcnn_layer *l, const plan_ctx *p)
{
    dense_priv *d = l->priv;
    d->bf16 = layer_decide_precision(l, p);
}

static pcnn_status dense_setup(pcnn_layer *l, const plan_ctx *p)
{
    dense_priv *d = l->priv;
    if (d->bf16) {
        const size_t nw = (size_t)d->out * (size_t)d->features,
                     nx = (size_t)d->features * (size_t)p->max_batch;
        d->wb = mem_alloc(nw * sizeof(bf16));
        d->xb = mem_alloc(nx * sizeof(bf16));
        if (!d->wb || !d->xb) {
            char name[64];
            return FAIL(PCNN_ERR_OUT_OF_MEMORY, "%s: %zu + %zu bf16 for the weights and input",
                        layer_name(l, name, sizeof name), nw, nx);
        }
        l->buffer_bytes += (nw + nx) * sizeof(bf16);
    }
    if (d->spatial == 1) return PCNN_OK;
    size_t count = (size_t)d->features * (size_t)p->max_batch;
    d->xt = mem_alloc_floats(count);
    if (!d->xt) {
        char name[64];
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "%s: %zu floats for the flattened input",
                    layer_name(l, name, sizeof name), count);
    }
    l->buffer_bytes += count * sizeof(float);
    return PCNN_OK;
}

static void dense_init(pcnn_layer *l, uint64_t seed)
{
    const dense_priv *d = l->priv;
    size_t nw = (size_t)d->out * (size_t)d->features;
    layer_init_weights(l, l->params, nw, (size_t)d->features, (size_t)d->out, seed);
    for (size_t i = nw; i < l->num_params; i++) l->params[i] = 0.0f;
}

/* The F x N input matrix of the current batch (valid after forward). */
static const float *dense_x(const pcnn_layer *l)
{
    const dense_priv *d = l->priv;
    return d->spatial > 1 ? d->xt : l->inputs[0]->y;
}

/* Rows [lo, hi) of the K x N output set to the bias (forward), or the
 * bias gradient db[r] = sum_j dY[r][j] in double (backward). */
typedef struct rows_args {
    const float *src;
    float *dst;
    size_t n;
} rows_args;

static void bias_rows(void *arg, size_t lo, size_t hi)
{
    const rows_args *a = arg;
    for (size_t r = lo; r < hi; r++)
        for (size_t j = 0; j < a->n; j++) a->dst[r * a->n + j] = a->src[r];
}

static void sum_rows(void *arg, size_t lo, size_t hi)
{
    const rows_args *a = arg;
    for (size_t r = lo; r < hi; r++) {
        double s = 0.0;
        for (size_t j = 0; j < a->n; j++) s += a->src[r * a->n + j];
        a->dst[r] = (float)s;
    }
}

static void dense_forward(pcnn_layer *l, const run_ctx *ctx)
{
    dense_priv *d = l->priv;
    const pcnn_layer *in = l->inputs[0];
    int n = ctx->n, k = d->out, f = d->features;
    if (d->spatial > 1) flatten_cnhw(in->y, d->xt, in->out.c, n, d->spatial, ctx->threads);
    float beta = 0.0f;
    if (d->bias) {
        rows_args a = {l->params + (size_t)k * (size_t)f, l->y, (size_t)n};
        parallel_for((size_t)k, 1, (size_t)k * n, ctx->threads, bias_rows, &a);
        beta = 1.0f;
    }
    if (d->bf16) {
        bf16_from_f32_parallel(l->params, d->wb, (size_t)k * (size_t)f, ctx->threads);
        bf16_from_f32_parallel(dense_x(l), d->xb, (size_t)f * (size_t)n, ctx->threads);
        gemm_bf16(false, false, k, n, f, 1.0f, d->wb, f, d->xb, n, beta, l->y, n, ctx->threads,
                  ctx->workspace, bf16_gemm_ws(d, n, ctx->threads));
        return;
    }
    gemm(false, false, k, n, f, 1.0f, l->params, f, dense_x(l), n, beta, l->y, n, ctx->threads);
}

/* The bf16 backward: dY_b = bf16(dY) once, dW = dY_b X_b^T, dX = W_b^T dY_b. */
static void dense_backward_bf16(pcnn_layer *l, const run_ctx *ctx, float *dx, bool dw)
{
    dense_priv *d = l->priv;
    const int n = ctx->n, k = d->out, f = d->features;
    bf16 *dyb = (bf16 *)ctx->workspace;
    char *ws = (char *)ctx->workspace + bf16_head(d, n);
    const size_t wsb = bf16_gemm_ws(d, n, ctx->threads);
    bf16_from_f32_parallel(l->dy, dyb, (size_t)k * (size_t)n, ctx->threads);
    if (dw)
        gemm_bf16(false, true, k, f, n, 1.0f, dyb, n, d->xb, n, 0.0f, l->grads, f, ctx->threads,
                  ws, wsb);
    if (!dx) return;
    const bool acc = l->accumulate_dx[0];
    if (d->spatial == 1) {
        gemm_bf16(true, false, f, n, k, 1.0f, d->wb, f, dyb, n, acc ? 1.0f : 0.0f, dx, n,
                  ctx->threads, ws, wsb);
        return;
    }
    float *dxt = (float *)((char *)ctx->workspace + up64((size_t)k * (size_t)n * sizeof(bf16)));
    gemm_bf16(true, false, f, n, k, 1.0f, d->wb, f, dyb, n, 0.0f, dxt, n, ctx->threads, ws, wsb);
    unflatten_cnhw(dxt, dx, l->inputs[0]->out.c, n, d->spatial, acc, ctx->threads);
}

static void dense_backward(pcnn_layer *l, const run_ctx *ctx, float *const dx[2])
{
    dense_priv *d = l->priv;
    const pcnn_layer *in = l->inputs[0];
    int n = ctx->n, k = d->out, f = d->features;
    const float *dy = l->dy;
    /* dW = dY X^T, unless the FC exchange computes it from the whole batch
     * (dense_slice_gradient). */
    const bool exchange_owns_dw = ctx->exchange_step && l->exchange == PCNN_EXCHANGE_FC_GRADIENT;
    if (d->bf16) {
        dense_backward_bf16(l, ctx, dx[0], !exchange_owns_dw);
        if (d->bias && !exchange_owns_dw) {
            rows_args a = {dy, l->grads + (size_t)k * (size_t)f, (size_t)n};
            parallel_for((size_t)k, 1, (size_t)k * n, ctx->threads, sum_rows, &a);
        }
        return;
    }
    if (!exchange_owns_dw)
        gemm(false, true, k, f, n, 1.0f, dy, n, dense_x(l), n, 0.0f, l->grads, f, ctx->threads);
    if (d->bias && !exchange_owns_dw) {
        rows_args a = {dy, l->grads + (size_t)k * (size_t)f, (size_t)n};
        parallel_for((size_t)k, 1, (size_t)k * n, ctx->threads, sum_rows, &a);
    }
    if (!dx[0]) return;
    /* dX = W^T dY */
    bool acc = l->accumulate_dx[0];
    if (d->spatial == 1) {
        gemm(true, false, f, n, k, 1.0f, l->params, f, dy, n, acc ? 1.0f : 0.0f, dx[0], n,
             ctx->threads);
    } else {
        gemm(true, false, f, n, k, 1.0f, l->params, f, dy, n, 0.0f, ctx->workspace, n,
             ctx->threads);
        unflatten_cnhw(ctx->workspace, dx[0], in->out.c, n, d->spatial, acc, ctx->threads);
    }
}

static void dense_destroy(pcnn_layer *l)
{
    dense_priv *d = l->priv;
    if (d) mem_free(d->xt), mem_free(d->wb), mem_free(d->xb);
    mem_free(d);
    l->priv = NULL;
}

static void dense_describe(const pcnn_layer *l, char *buf, size_t size)
{
    const dense_priv *d = l->priv;
    snprintf(buf, size, "out=%d%s", d->out, d->bias ? " bias" : "");
}

static pcnn_status dense_twin(const pcnn_layer *l, layer_list *list, pcnn_layer *const *in,
                              twin_opts o, pcnn_layer **out, const char *func)
{
    const dense_priv *d = l->priv;
    (void)o;
    return dense_add(list, in[0], d->out, d->bias, out, func);
}

static const layer_ops dense_ops = {
    .kind = "dense",
    .workspace_floats = dense_workspace,
    .decide = dense_decide,
    .setup = dense_setup,
    .init_params = dense_init,
    .forward = dense_forward,
    .backward = dense_backward,
    .destroy = dense_destroy,
    .describe = dense_describe,
    .caps = {.split = LAYER_SPLIT_WHOLE,
             .cost = LAYER_COST_DENSE,
             .twin = dense_twin,
             .weights_alone = true,
             .bf16 = true},
};

bool layer_is_dense(const pcnn_layer *l) { return l->ops == &dense_ops; }

dense_shape dense_get_shape(const pcnn_layer *l)
{
    const dense_priv *d = l->priv;
    dense_shape s = {d->out, d->features, d->bias};
    return s;
}

const float *dense_input_matrix(const pcnn_layer *l) { return dense_x(l); }

void dense_slice_gradient(const pcnn_layer *l, const dense_blocks *b, float *dw_slice, float *db,
                          int threads)
{
    const dense_priv *d = l->priv;
    const int k = d->out, fr = b->features;
    bool first = true;
    for (int q = 0; q < b->ranks; q++) {
        const int bq = b->batch[q];
        if (bq == 0) continue;
        gemm(false, true, k, fr, bq, 1.0f, b->errors + b->err_displs[q], bq,
             b->acts + b->act_displs[q], bq, first ? 0.0f : 1.0f, dw_slice, fr, threads);
        first = false;
    }
    if (!db) return;
    for (int row = 0; row < k; row++) {
        double s = 0.0;
        for (int q = 0; q < b->ranks; q++) {
            const float *e = b->errors + b->err_displs[q] + (size_t)row * b->batch[q];
            for (int j = 0; j < b->batch[q]; j++) s += e[j];
        }
        db[row] = (float)s;
    }
}

pcnn_status dense_add(layer_list *list, pcnn_layer *in, int out_features, int bias,
                      pcnn_layer **out, const char *func)
{
    TRY(layer_check_new(list, &in, 1, out, func));
    int index = list->count;
    ADD_REQUIRE(out_features >= 1, PCNN_ERR_INVALID_ARGUMENT,
                "layer %d (dense): out_features %d must be >= 1", index, out_features);
    size_t f = shape_size(in->out), k = (size_t)out_features;
    ADD_REQUIRE(f <= INT_MAX, PCNN_ERR_SHAPE, "layer %d (dense): %zu input features exceed %d",
                index, f, INT_MAX);
    ADD_REQUIRE(f <= (SIZE_MAX / sizeof(float) - 1) / k - 1, PCNN_ERR_SHAPE,
                "layer %d (dense): %zu x %zu weights do not fit in memory", index, k, f);
    dense_priv *d = mem_calloc(1, sizeof *d);
    if (!d) return ADD_FAIL(PCNN_ERR_OUT_OF_MEMORY, "layer %d (dense): no memory", index);
    d->out = out_features;
    d->features = (int)f;
    d->spatial = shape_spatial(in->out);
    d->bias = bias != 0;
    size_t num_params = k * f + (d->bias ? k : 0);
    pcnn_layer *l;
    pcnn_status st = layer_append(list, &dense_ops, &in, 1, shape_2d(out_features, 1, 1),
                                  num_params, d, &l);
    if (st != PCNN_OK) {
        mem_free(d);
        return st;
    }
    l->has_weights = true;
    *out = l;
    return PCNN_OK;
}
