/* 2D convolution: one GEMM per kernel tap, direct on the padded grid, or
 * im2col + GEMM over the whole local batch.
 *
 * Stride-1 convolutions on planes so small that many of the kernel's taps
 * read padding (4x4 and below for 3x3) run one GEMM per tap over the
 * output pixels it reaches (kernels/conv_taps.h).  Other stride-1
 * convolutions with kernel 3 or 5 run the direct kernel
 * (kernels/conv_direct.h) when the CPU has it and it is expected to win:
 * no im2col matrix at all, the workspace holds the padded input and output
 * planes.  Strided 3x3 and 5x5 convolutions with few input channels run
 * the direct forward with channels in the lanes and the direct weight
 * gradient, and GEMMs for the input gradient.  The rest:
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
 * The shared workspace holds per-thread bands, or the recomputed col.
 *
 * Padding must be smaller than the kernel, so every window covers at least
 * one input pixel (PyTorch is laxer; a window of pure padding is useless). */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../graph/net.h"
#include "../kernels/conv_direct.h"
#include "../kernels/conv_taps.h"
#include "../kernels/kernels.h"
#include "layer.h"

typedef struct conv_priv {
    int cout, k, stride, pad;
    bool bias;
    bool pointwise; /* 1x1, stride 1, no padding: col == x */
    bool taps;      /* one GEMM per tap (conv_taps.h) */
    bool direct;    /* the direct kernel (conv_direct.h) */
    bool strided; /* stride > 1, direct: channel-lane forward, direct dW, GEMM dx */
    bool forward_channels, dx_channels; /* its kernel with channels in the lanes */
    int cin, h, w, ho, wo, ckk;
    float *col;  /* kept im2col matrix (max_batch columns), or NULL */
    float *wt;   /* taps: the weights repacked by forward for backward */
} conv_priv;

/* Floats of a CKK x (max_batch*Ho*Wo) matrix, saturated so that an absurd
 * size fails as an allocation rather than wrapping. */
static size_t col_floats(const conv_priv *p, int max_batch)
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

/* Direct path: the grid planes of x and y (or dY), then the largest of the
 * weight gradient's scratch, the packed weights with the input gradient's
 * planes, and the channel-lane kernel's scratch either way. */
static size_t direct_workspace(const conv_priv *p, int max_batch, int threads)
{
    direct_grid g;
    direct_grid_init(&g, max_batch, p->h, p->w, p->k, 1, p->pad);
    const size_t packed = direct_packed_floats(p->cout, p->cin, p->k);
    const size_t wgrad =
        direct_wgrad_floats(p->cout, p->cin, p->k, max_batch, p->ho, p->wo, threads);
    const double planes = (double)(p->cin + p->cout) * (double)g.plane;
    const size_t n = (size_t)max_batch;
    double rest = (double)packed + (double)p->cin * (double)g.plane;
    const double variants[] = {
        (double)wgrad,
        (double)direct_channels_floats(p->cout, p->cin, p->k, n * p->ho * p->wo),
        (double)direct_channels_floats(p->cin, p->cout, p->k, n * p->h * p->w)};
    for (int i = 0; i < 3; i++)
        if (variants[i] > rest) rest = variants[i];
    const double total = planes + rest;
    return total >= (double)SIZE_MAX / 2 ? SIZE_MAX : (size_t)total;
}

static pixel_conv pixel_geometry(const conv_priv *p, int n)
{
    pixel_conv s = {n, p->cin, p->cout, p->h, p->w, p->k, p->stride, p->pad, p->ho, p->wo};
    return s;
}

/* Strided direct passes: the grid planes of x, then the channel-lane
 * kernel's scratch (forward) or the weight gradient's (backward); the
 * input gradient's GEMM bands reuse the workspace after both. */
static size_t strided_workspace(const conv_priv *p, int max_batch, int threads)
{
    direct_grid g;
    direct_grid_init(&g, max_batch, p->h, p->w, p->k, p->stride, p->pad);
    const size_t pixels = (size_t)max_batch * p->ho * p->wo;
    const size_t forward = direct_channels_floats(p->cout, p->cin, p->k, pixels);
    const size_t wgrad =
        direct_wgrad_floats(p->cout, p->cin, p->k, max_batch, p->ho, p->wo, threads);
    const double total =
        (double)p->cin * (double)g.plane + (double)(forward > wgrad ? forward : wgrad);
    return total >= (double)SIZE_MAX / 2 ? SIZE_MAX : (size_t)total;
}

static size_t conv_workspace(const pcnn_layer *l, const plan_ctx *pc)
{
    const conv_priv *p = l->priv;
    if (p->taps) {
        const pixel_conv s = pixel_geometry(p, pc->max_batch);
        return conv_taps_workspace_floats(&s);
    }
    if (p->pointwise) return 0;
    size_t threads = (size_t)(l->net->threads > 0 ? l->net->threads : 1);
    if (p->direct) return direct_workspace(p, pc->max_batch, (int)threads);
    size_t bands = band_floats(p, pc->max_batch), col = col_floats(p, pc->max_batch);
    if (bands > SIZE_MAX / threads) return SIZE_MAX;
    bands *= threads;
    if (p->strided) {
        const size_t direct = strided_workspace(p, pc->max_batch, (int)threads);
        return direct > bands ? direct : bands;
    }
    return !pc->keep_im2col && col > bands ? col : bands;
}

/* Does skipping the taps that read padding pay?  It saves the padding's
 * share of the work and runs OpenBLAS GEMMs one per core; below 32
 * channels their dot products and rows are too short (bench/bench_conv). */
static bool taps_preferred(int cin, int cout, int h, int w, int k, int pad)
{
    return cin >= 32 && cout >= 32 && conv_taps_useful(h, w, k, pad) <= 0.75;
}

/* Strided 3x3 and 5x5 convolutions with short windows: the channel-lane
 * kernel reads the input at the stride straight from the grid, where
 * CNHW im2col gathers single floats for GEMMs with short dot products
 * (bench/bench_conv: 16 -> 32 channels 1.3x faster, 32 -> 64 even).  Its
 * register tile needs 32 or more output channels. */
static bool strided_preferred(int cin, int cout, int k)
{
    return cout >= 32 && cin * k * k <= 160;
}

/* A buffer the layer keeps from finalize to destroy, counted as its own. */
static pcnn_status conv_buffer(pcnn_layer *l, size_t n, const char *what, float **out)
{
    char name[64];
    *out = n == SIZE_MAX ? NULL : mem_alloc_floats(n);
    if (*out == NULL)
        return error_set(PCNN_ERR_OUT_OF_MEMORY, "pcnn_net_finalize",
                         "%s: cannot allocate the %zu-float %s", layer_name(l, name, sizeof name),
                         n, what);
    l->buffer_bytes += n * sizeof(float);
    return PCNN_OK;
}

static pcnn_status conv_setup(pcnn_layer *l, const plan_ctx *pc)
{
    conv_priv *p = l->priv;
    char name[64];
    /* GEMM sizes are ints: the batch's column count must fit. */
    long long np = (long long)pc->max_batch * p->ho * p->wo;
    if (np > INT_MAX)
        return error_set(PCNN_ERR_INVALID_ARGUMENT, "pcnn_net_finalize",
                         "%s: max_batch %d x %dx%d outputs exceeds %d columns",
                         layer_name(l, name, sizeof name), pc->max_batch, p->ho, p->wo,
                         INT_MAX);
    p->taps = p->stride == 1 && !p->pointwise &&
              (pc->conv_algorithm == 3 ||
               (pc->conv_algorithm == 0 && taps_preferred(p->cin, p->cout, p->h, p->w, p->k,
                                                          p->pad)));
    if (p->taps) {
        const pixel_conv s = pixel_geometry(p, pc->max_batch);
        return conv_buffer(l, conv_taps_weight_floats(&s), "repacked weights", &p->wt);
    }
    p->direct = (pc->conv_algorithm == 0 || pc->conv_algorithm == 2) &&
                direct_conv_supports(p->k, p->stride, p->pad) &&
                (pc->conv_algorithm == 2 ||
                 direct_conv_preferred(p->cin, p->h, p->w, p->k, p->pad)) &&
                direct_conv_available();
    if (p->direct) {
        direct_grid g;
        direct_grid_init(&g, 1, p->h, p->w, p->k, 1, p->pad);
        p->forward_channels = direct_channels_preferred(p->cout, p->ho, p->wo, &g);
        p->dx_channels = direct_channels_preferred(p->cin, p->h, p->w, &g);
    }
    p->strided = p->stride > 1 && (p->k == 3 || p->k == 5) &&
                 (pc->conv_algorithm == 2 ||
                  (pc->conv_algorithm == 0 && strided_preferred(p->cin, p->cout, p->k))) &&
                 direct_conv_available();
    /* The strided direct passes need no col. */
    if (!pc->keep_im2col || p->pointwise || p->direct || p->strided) return PCNN_OK;
    return conv_buffer(l, col_floats(p, pc->max_batch), "im2col buffer", &p->col);
}

static void conv_init(pcnn_layer *l, uint64_t seed)
{
    const conv_priv *p = l->priv;
    size_t nw = (size_t)p->cout * p->ckk;
    size_t kk = (size_t)p->k * p->k;
    layer_init_weights(l, l->params, nw, (size_t)p->cin * kk, (size_t)p->cout * kk, seed);
    if (p->bias) memset(l->params + nw, 0, (size_t)p->cout * sizeof(float));
}

/* Rows [lo, hi) of Y[Cout x NP] set to the bias (forward), or db of rows
 * [lo, hi) of dY (backward). */
typedef struct bias_args {
    const float *src;
    float *dst;
    size_t np;
} bias_args;

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
    const float *bias = p->bias ? l->params + (size_t)p->cout * p->ckk : NULL;
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

static void bias_fill(void *arg, size_t lo, size_t hi)
{
    const bias_args *a = arg;
    for (size_t co = lo; co < hi; co++) {
        float *restrict row = a->dst + co * a->np;
        const float b = a->src[co];
        for (size_t j = 0; j < a->np; j++) row[j] = b;
    }
}

/* Workspace: padded input planes, then padded output planes and the packed
 * weights, or the scratch of the channel-lane kernel. */
static void direct_forward(const pcnn_layer *l, const run_ctx *ctx)
{
    const conv_priv *p = l->priv;
    direct_grid g;
    direct_grid_init(&g, ctx->n, p->h, p->w, p->k, 1, p->pad);
    float *xp = ctx->workspace, *out = xp + (size_t)p->cin * g.plane;
    float *packed = out + (size_t)p->cout * g.plane;
    const float *bias = p->bias ? l->params + (size_t)p->cout * p->ckk : NULL;
    direct_place(l->inputs[0]->y, p->cin, p->h, p->w, p->pad, p->pad, &g, xp, ctx->threads);
    if (p->forward_channels) {
        direct_conv_channels(xp, l->params, p->cout, p->cin, false, &g, bias, l->y, false, out,
                             ctx->threads);
        return;
    }
    direct_pack(l->params, p->cout, p->cin, p->k, false, packed, ctx->threads);
    const direct_output to = {l->y, bias, p->ho, p->wo, false};
    direct_conv(xp, p->cin, packed, p->cout, false, &g, out, &to, ctx->threads);
}

static void conv_forward(pcnn_layer *l, const run_ctx *ctx)
{
    const conv_priv *p = l->priv;
    const int np = ctx->n * p->ho * p->wo;
    if (p->taps) {
        const pixel_conv s = pixel_geometry(p, ctx->n);
        const float *bias = p->bias ? l->params + (size_t)p->cout * p->ckk : NULL;
        conv_taps_forward(&s, l->inputs[0]->y, l->params, bias, p->wt, l->y, ctx->workspace,
                          ctx->threads);
        return;
    }
    if (p->direct) {
        direct_forward(l, ctx);
        return;
    }
    if (p->strided) {
        direct_grid g;
        direct_grid_init(&g, ctx->n, p->h, p->w, p->k, p->stride, p->pad);
        float *xp = ctx->workspace, *scratch = xp + (size_t)p->cin * g.plane;
        direct_place(l->inputs[0]->y, p->cin, p->h, p->w, p->pad, p->pad, &g, xp,
                     ctx->threads);
        direct_conv_channels(xp, l->params, p->cout, p->cin, false, &g,
                             p->bias ? l->params + (size_t)p->cout * p->ckk : NULL, l->y, false,
                             scratch, ctx->threads);
        return;
    }
    if (!p->pointwise) {
        band_args a = {l, ctx, NULL, false};
        parallel_parts((size_t)ctx->n, 1, (size_t)p->ckk * np, ctx->threads, forward_bands, &a);
        return;
    }
    if (p->bias) {
        bias_args a = {l->params + (size_t)p->cout * p->ckk, l->y, (size_t)np};
        parallel_for((size_t)p->cout, 1, (size_t)p->cout * np, ctx->threads, bias_fill, &a);
    }
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

/* Sum of n floats in an order fixed by n alone (so any thread count gives
 * the same bits): 8 float lanes over blocks of SUM_BLOCK, which vectorise,
 * and the block sums in double, which keeps long rows accurate. */
#define SUM_BLOCK 1024
static float row_sum(const float *x, int n)
{
    double total = 0.0;
    for (int j0 = 0; j0 < n; j0 += SUM_BLOCK) {
        const int j1 = j0 + SUM_BLOCK < n ? j0 + SUM_BLOCK : n;
        float lane[8] = {0};
        int j = j0;
        for (; j + 8 <= j1; j += 8)
            for (int q = 0; q < 8; q++) lane[q] += x[j + q];
        float t = 0.0f;
        for (int q = 0; q < 8; q++) t += lane[q];
        for (; j < j1; j++) t += x[j];
        total += t;
    }
    return (float)total;
}

static void bias_sum(void *arg, size_t lo, size_t hi)
{
    const bias_args *a = arg;
    for (size_t co = lo; co < hi; co++) a->dst[co] = row_sum(a->src + co * a->np, (int)a->np);
}

static void bias_grad(const pcnn_layer *l, const run_ctx *ctx)
{
    const conv_priv *p = l->priv;
    const size_t np = (size_t)ctx->n * p->ho * p->wo;
    bias_args a = {l->dy, l->grads + (size_t)p->cout * p->ckk, np};
    parallel_for((size_t)p->cout, 1, (size_t)p->cout * np, ctx->threads, bias_sum, &a);
}

/* Workspace: the grid planes of dY and x, then the weight gradient's
 * scratch, then the adjoint's packed weights and dx planes (or the
 * channel-lane kernel's scratch). */
static void direct_backward(const pcnn_layer *l, const run_ctx *ctx, float *dx)
{
    const conv_priv *p = l->priv;
    direct_grid g;
    direct_grid_init(&g, ctx->n, p->h, p->w, p->k, 1, p->pad);
    float *dyp = ctx->workspace, *xp = dyp + (size_t)p->cout * g.plane;
    float *rest = xp + (size_t)p->cin * g.plane;
    direct_place(l->inputs[0]->y, p->cin, p->h, p->w, p->pad, p->pad, &g, xp, ctx->threads);
    const bool few = direct_wgrad_few_preferred(p->cout);
    if (few || dx) direct_place(l->dy, p->cout, p->ho, p->wo, 0, 0, &g, dyp, ctx->threads);
    if (few)
        direct_weight_grad_few(dyp, p->cout, xp, p->cin, &g, l->grads, ctx->threads);
    else
        direct_weight_grad(l->dy, p->cout, xp, p->cin, &g, l->grads, rest, ctx->threads);
    if (p->bias) bias_grad(l, ctx);
    if (!dx) return;
    if (p->dx_channels) {
        direct_conv_channels(dyp, l->params, p->cout, p->cin, true, &g, NULL, dx,
                             l->accumulate_dx[0], rest, ctx->threads);
        return;
    }
    float *packed = rest, *dxp = rest + direct_packed_floats(p->cout, p->cin, p->k);
    direct_pack(l->params, p->cout, p->cin, p->k, true, packed, ctx->threads);
    const direct_output to = {dx, NULL, p->h, p->w, l->accumulate_dx[0]};
    direct_conv(dyp, p->cout, packed, p->cin, true, &g, dxp, &to, ctx->threads);
}

/* Strided: dW by the direct kernel on the grid of x (the input gradient
 * is GEMMs in bands, which need no col).  Workspace as the forward's, the
 * weight gradient's scratch after the planes. */
static void strided_weight_grad(const pcnn_layer *l, const run_ctx *ctx)
{
    const conv_priv *p = l->priv;
    direct_grid g;
    direct_grid_init(&g, ctx->n, p->h, p->w, p->k, p->stride, p->pad);
    float *xp = ctx->workspace, *scratch = xp + (size_t)p->cin * g.plane;
    direct_place(l->inputs[0]->y, p->cin, p->h, p->w, p->pad, p->pad, &g, xp, ctx->threads);
    direct_weight_grad(l->dy, p->cout, xp, p->cin, &g, l->grads, scratch, ctx->threads);
}

static void conv_backward(pcnn_layer *l, const run_ctx *ctx, float *const dx[2])
{
    const conv_priv *p = l->priv;
    const int np = ctx->n * p->ho * p->wo;
    const float *dy = l->dy;
    if (p->taps) {
        const pixel_conv s = pixel_geometry(p, ctx->n);
        conv_taps_backward(&s, l->inputs[0]->y, dy, p->wt, l->grads, dx[0],
                           l->accumulate_dx[0], ctx->workspace, ctx->threads);
        if (p->bias) bias_grad(l, ctx);
        return;
    }
    if (p->direct) {
        direct_backward(l, ctx, dx[0]);
        return;
    }

    if (p->strided) {
        strided_weight_grad(l, ctx);
        if (p->bias) bias_grad(l, ctx);
        if (dx[0] == NULL) return;
        band_args a = {l, ctx, dx[0], l->accumulate_dx[0]};
        parallel_parts((size_t)ctx->n, 1, (size_t)p->ckk * np, ctx->threads, dx_bands, &a);
        return;
    }

    /* dW = dY[Cout x NP] * col^T: x itself, the kept col (still the
     * forward's), or col recomputed whole into the workspace. */
    const float *col = p->pointwise ? l->inputs[0]->y : p->col;
    if (!col) {
        im2col_batch(l->inputs[0]->y, p->cin, ctx->n, p->h, p->w, p->k, p->stride, p->pad,
                     p->ho, p->wo, ctx->workspace, ctx->threads);
        col = ctx->workspace;
    }
    gemm(false, true, p->cout, p->ckk, np, 1.0f, dy, np, col, np, 0.0f, l->grads, p->ckk,
         ctx->threads);

    if (p->bias) bias_grad(l, ctx);

    if (dx[0] == NULL) return;
    const bool acc = l->accumulate_dx[0];
    if (p->pointwise) {
        /* dx = W^T dY straight into the input's gradient. */
        gemm(true, false, p->ckk, np, p->cout, 1.0f, l->params, p->ckk, dy, np,
             acc ? 1.0f : 0.0f, dx[0], np, ctx->threads);
        return;
    }
    /* The bands overwrite the workspace: a recomputed col is done with. */
    band_args a = {l, ctx, dx[0], acc};
    parallel_parts((size_t)ctx->n, 1, (size_t)p->ckk * np, ctx->threads, dx_bands, &a);
}

static void conv_destroy(pcnn_layer *l)
{
    conv_priv *p = l->priv;
    if (p) mem_free(p->col), mem_free(p->wt);
    mem_free(p);
    l->priv = NULL;
}

static void conv_describe(const pcnn_layer *l, char *buf, size_t size)
{
    const conv_priv *p = l->priv;
    snprintf(buf, size, "k=%d s=%d p=%d%s", p->k, p->stride, p->pad, p->bias ? " bias" : "");
}

static const layer_ops conv_ops = {
    .kind = "conv2d",
    .workspace_floats = conv_workspace,
    .setup = conv_setup,
    .init_params = conv_init,
    .forward = conv_forward,
    .backward = conv_backward,
    .destroy = conv_destroy,
    .describe = conv_describe,
};

PCNN_API pcnn_status pcnn_conv2d(pcnn_net *net, pcnn_layer *in, int out_channels, int kernel,
                                 int stride, int padding, int bias, pcnn_layer **out)
{
    TRY(layer_check_new(net, &in, 1, out, __func__));
    const int idx = net->num_layers;
    const char *me = "conv2d";
    REQUIRE(out_channels >= 1, PCNN_ERR_INVALID_ARGUMENT,
            "layer %d (%s): out_channels %d must be >= 1", idx, me, out_channels);
    REQUIRE(kernel >= 1, PCNN_ERR_INVALID_ARGUMENT, "layer %d (%s): kernel %d must be >= 1",
            idx, me, kernel);
    REQUIRE(stride >= 1, PCNN_ERR_INVALID_ARGUMENT, "layer %d (%s): stride %d must be >= 1",
            idx, me, stride);
    REQUIRE(padding >= 0 && padding < kernel, PCNN_ERR_INVALID_ARGUMENT,
            "layer %d (%s): padding %d must be in [0, kernel %d)", idx, me, padding, kernel);

    const shape s = in->out;
    REQUIRE(s.d == 1, PCNN_ERR_SHAPE, "layer %d (%s): input is 3D (depth %d)", idx, me, s.d);
    const long long ph = (long long)s.h + 2LL * padding, pw = (long long)s.w + 2LL * padding;
    REQUIRE(kernel <= ph && kernel <= pw, PCNN_ERR_SHAPE,
            "layer %d (%s): kernel %d larger than padded input %lldx%lld", idx, me, kernel, ph,
            pw);
    const long long ho = (ph - kernel) / stride + 1, wo = (pw - kernel) / stride + 1;
    const long long ckk = (long long)s.c * kernel * kernel;
    /* Index arithmetic is int: padded extents, CKK and one output plane must fit. */
    REQUIRE(ph <= INT_MAX && pw <= INT_MAX && ckk <= INT_MAX && ho * wo <= INT_MAX &&
                out_channels * ho * wo <= INT_MAX,
            PCNN_ERR_SHAPE,
            "layer %d (%s): sizes overflow (%d channels x kernel %d, output %d x %lldx%lld)",
            idx, me, s.c, kernel, out_channels, ho, wo);
    const long long nparams = out_channels * ckk + (bias ? out_channels : 0);
    REQUIRE(nparams <= INT_MAX, PCNN_ERR_SHAPE,
            "layer %d (%s): %lld parameters is too many", idx, me, nparams);

    conv_priv *p = mem_calloc(1, sizeof *p);
    REQUIRE(p != NULL, PCNN_ERR_OUT_OF_MEMORY, "layer %d (%s): out of memory", idx, me);
    *p = (conv_priv){.cout = out_channels, .k = kernel, .stride = stride, .pad = padding,
                     .bias = bias != 0, .cin = s.c, .h = s.h, .w = s.w, .ho = (int)ho,
                     .wo = (int)wo, .ckk = (int)ckk};
    p->pointwise = kernel == 1 && stride == 1 && padding == 0;

    pcnn_layer *l = NULL;
    pcnn_status st = layer_append(net, &conv_ops, &in, 1, shape_2d(out_channels, (int)ho, (int)wo),
                                  (size_t)nparams, p, &l);
    if (st != PCNN_OK) {
        mem_free(p);
        return st;
    }
    l->has_weights = true;
    *out = l;
    return PCNN_OK;
}
