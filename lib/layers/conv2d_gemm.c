/* im2col + GEMM for the convolution layer (conv2d.h).
 *
 * In the CNHW layout the GEMM W[Cout x CKK] * col[CKK x N*Ho*Wo] writes the
 * output directly in the next layer's layout.  Backward is two more GEMMs
 * (dW = dY col^T, dcol = W^T dY) and a col2im.  A 1x1 convolution with
 * stride 1 and no padding needs no im2col at all: the input is its own col.
 *
 * col and dcol are far larger than the activations (K*K times), so they are
 * not streamed through memory whole: forward and the input gradient work in
 * bands of output rows, each thread on its own samples, each band's col (or
 * dcol) made and consumed while it is in the core's cache.  The im2col
 * matrix is still written whole to a persistent buffer when
 * PCNN_OPT_KEEP_IM2COL is set, for dW; otherwise backward recomputes it.
 * The shared workspace holds per-thread bands, or the recomputed col. */
#include <limits.h>

#include "../kernels/kernels.h"
#include "conv2d.h"

/* Floats of a CKK x (max_batch*Ho*Wo) matrix, saturated so that an absurd
 * size fails as an allocation rather than wrapping. */
size_t conv_col_floats(const conv_priv *p, int max_batch)
{
    size_t np = (size_t)max_batch * (size_t)p->ho * (size_t)p->wo;
    if (np != 0 && (size_t)p->ckk > SIZE_MAX / np) return SIZE_MAX;
    return (size_t)p->ckk * np;
}

/* Output rows per band: about BAND_FLOATS of col, enough to stay in a
 * core's L2 next to the GEMM's packed blocks, but at least 4*Cout columns,
 * so that repacking W for every band stays a small part of the work
 * (convolutions with big weights get one band per thread). */
#define BAND_FLOATS (96 * 1024)
static int band_rows(const conv_priv *p)
{
    long long rows = BAND_FLOATS / ((long long)p->ckk * p->wo);
    long long min_rows = (4LL * p->cout + p->wo - 1) / p->wo;
    if (rows < min_rows) rows = min_rows;
    if (rows < 1) rows = 1;
    return rows > INT_MAX ? INT_MAX : (int)rows;
}

/* Floats of one band buffer: a CKK x (rows*Wo) matrix, rows capped by the
 * batch's output rows. */
static size_t band_floats(const conv_priv *p, int max_batch)
{
    long long rows = band_rows(p), all = (long long)max_batch * p->ho;
    if (rows > all) rows = all;
    return (size_t)p->ckk * (size_t)rows * (size_t)p->wo;
}

size_t conv_gemm_workspace(const conv_priv *p, int max_batch, bool keep_col, int threads)
{
    size_t bands = band_floats(p, max_batch), col = conv_col_floats(p, max_batch);
    const size_t parts = (size_t)(threads > 0 ? threads : 1);
    if (bands > SIZE_MAX / parts) return SIZE_MAX;
    bands *= parts;
    return !keep_col && col > bands ? col : bands;
}

/* One pass of a convolution over the bands of samples [s0, s1). */
typedef struct band_args {
    const pcnn_layer *l;
    const run_ctx *ctx;
    float *dx;
    bool acc;
} band_args;

static conv_shape geometry(const conv_priv *p, int n)
{
    conv_shape g = {p->cin, n, p->h, p->w, p->k, p->stride, p->pad, p->ho, p->wo};
    return g;
}

/* Block `part`'s band buffer in the workspace. */
static float *band_buffer(const conv_priv *p, const run_ctx *ctx, int part)
{
    return ctx->workspace + (size_t)part * band_floats(p, ctx->n);
}

/* With a bias, Y starts as the bias and the GEMM adds W col into it
 * (beta 1): no separate pass, and the same bits, as the GEMM forms each dot
 * product before adding it to C. */
static void forward_bands(void *arg, size_t s0, size_t s1, int part)
{
    const band_args *a = arg;
    const pcnn_layer *l = a->l;
    const conv_priv *p = l->priv;
    const conv_shape g = geometry(p, a->ctx->n);
    const int np = a->ctx->n * p->ho * p->wo, rows = band_rows(p);
    float *buf = p->col ? NULL : band_buffer(p, a->ctx, part);
    const float *bias = conv_bias(l);
    for (int g0 = (int)s0 * p->ho; g0 < (int)s1 * p->ho; g0 += rows) {
        const int g1 = g0 + rows < (int)s1 * p->ho ? g0 + rows : (int)s1 * p->ho;
        const int cols = (g1 - g0) * p->wo;
        const size_t at = (size_t)g0 * p->wo;
        float *col = buf ? buf : p->col + at;
        const int ld = buf ? cols : np;
        im2col_rows(l->inputs[0]->y, &g, g0, g1, col, (size_t)ld);
        float *y = l->y + at;
        for (int co = 0; bias && co < p->cout; co++)
            for (int j = 0; j < cols; j++) y[(size_t)co * np + j] = bias[co];
        gemm_serial(false, false, p->cout, cols, p->ckk, 1.0f, l->params, p->ckk, col, ld,
                    bias ? 1.0f : 0.0f, y, np);
    }
}

void conv_gemm_forward(const pcnn_layer *l, const run_ctx *ctx)
{
    const conv_priv *p = l->priv;
    const int np = ctx->n * p->ho * p->wo;
    if (!p->pointwise) {
        band_args a = {l, ctx, NULL, false};
        parallel_parts((size_t)ctx->n, 1, (size_t)p->ckk * np, ctx->threads, forward_bands, &a);
        return;
    }
    if (p->bias) fill_rows(l->y, (size_t)p->cout, (size_t)np, conv_bias(l), ctx->threads);
    gemm(false, false, p->cout, np, p->ckk, 1.0f, l->params, p->ckk, l->inputs[0]->y, np,
         p->bias ? 1.0f : 0.0f, l->y, np, ctx->threads);
}

/* dcol = W^T dY band by band, each folded into dx by col2im while it is in
 * cache.  Samples are never split between threads (col2im_rows). */
static void dx_bands(void *arg, size_t s0, size_t s1, int part)
{
    const band_args *a = arg;
    const pcnn_layer *l = a->l;
    const conv_priv *p = l->priv;
    const conv_shape g = geometry(p, a->ctx->n);
    const int np = a->ctx->n * p->ho * p->wo, rows = band_rows(p);
    float *dcol = band_buffer(p, a->ctx, part);
    for (int g0 = (int)s0 * p->ho; g0 < (int)s1 * p->ho; g0 += rows) {
        const int g1 = g0 + rows < (int)s1 * p->ho ? g0 + rows : (int)s1 * p->ho;
        const int cols = (g1 - g0) * p->wo;
        gemm_serial(true, false, p->ckk, cols, p->cout, 1.0f, l->params, p->ckk,
                    l->dy + (size_t)g0 * p->wo, np, 0.0f, dcol, cols);
        col2im_rows(dcol, (size_t)cols, &g, g0, g1, a->dx, a->acc);
    }
}

/* dW = dY[Cout x NP] * col^T: x itself, the kept col (still the
 * forward's), or col recomputed whole into the workspace. */
void conv_gemm_weight_grad(const pcnn_layer *l, const run_ctx *ctx)
{
    const conv_priv *p = l->priv;
    const int np = ctx->n * p->ho * p->wo;
    const float *col = p->pointwise ? l->inputs[0]->y : p->col;
    if (!col) {
        im2col_batch(l->inputs[0]->y, p->cin, ctx->n, p->h, p->w, p->k, p->stride, p->pad,
                     p->ho, p->wo, ctx->workspace, ctx->threads);
        col = ctx->workspace;
    }
    gemm(false, true, p->cout, p->ckk, np, 1.0f, l->dy, np, col, np, 0.0f, l->grads, p->ckk,
         ctx->threads);
}

void conv_gemm_input_grad(const pcnn_layer *l, const run_ctx *ctx, float *dx)
{
    const conv_priv *p = l->priv;
    const int np = ctx->n * p->ho * p->wo;
    const bool acc = l->accumulate_dx[0];
    if (p->pointwise) {
        /* dx = W^T dY straight into the input's gradient. */
        gemm(true, false, p->ckk, np, p->cout, 1.0f, l->params, p->ckk, l->dy, np,
             acc ? 1.0f : 0.0f, dx, np, ctx->threads);
        return;
    }
    /* The bands overwrite the workspace: a recomputed col is done with. */
    band_args a = {l, ctx, dx, acc};
    parallel_parts((size_t)ctx->n, 1, (size_t)p->ckk * np, ctx->threads, dx_bands, &a);
}

void conv_bias_grad(const pcnn_layer *l, const run_ctx *ctx)
{
    const conv_priv *p = l->priv;
    const size_t np = (size_t)ctx->n * p->ho * p->wo;
    row_sums(l->dy, (size_t)p->cout, np, l->grads + (size_t)p->cout * p->ckk, ctx->threads);
}
