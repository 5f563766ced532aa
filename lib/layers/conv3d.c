/* 3D convolution as torch.nn.Conv3d: cubic kernel, stride and zero padding
 * on every side, optional bias; layout C N D H W (layer.h).
 *
 * vol2col + GEMM over the whole local batch (seed 001 section 3.1), three
 * GEMMs per step: Y = W col (forward), dW = dY col^T, dcol = W^T dY then
 * col2vol (the input gradient).  col is kept from forward to backward in a
 * buffer of the layer's own when PCNN_OPT_KEEP_IM2COL is set; otherwise
 * forward builds it in the shared workspace and backward builds it again.
 * dcol always lives in the workspace.  A 1x1x1 convolution with stride 1
 * and no padding needs no col: the input is its own.
 *
 * Any padding >= 0 is accepted, as in PyTorch; windows that read only
 * padding give the bias.
 *
 * Banded: when the batch's col would exceed the budget (CosmoFlow's conv1
 * at W = 128 needs 0.9 GB per sample), each sample runs in bands of output
 * planes whose col fits it: per band, Y_band = W col_band, dW += dY_band
 * col_band^T, dcol_band = W^T dY_band then col2vol into dx.  The same
 * sums in another order: equal to float rounding.
 *
 * Direct (lib/kernels/vol_direct*.c, AVX-512F): a stride-1 convolution may
 * run any of its three passes without the vol2col matrix -- forward, dW
 * (per-lane sums over the output positions) and dx (a forward convolution
 * of dY with the kernel flipped and transposed) -- each chosen on its own
 * (direct_passes).  A direct dW needs no col at all, banded or not.  A
 * spatial split's twin, whose input is its box staged with the halo and
 * the padding around it, wants dx only inside the sample
 * (conv3d_want_dx_box): the direct dx then computes only that box.
 *
 * bf16 products (PCNN_OPT_PRECISION, pcnn_layer_set_precision): always
 * vol2col + GEMM in bands of output planes of one sample (the budget's,
 * or the whole volume), col written in bf16 (kernels_bf16.h), W copied to
 * bf16 at each forward, dY converted once per backward; gemm_bf16 sums in
 * fp32.  No col is kept: it is half the bytes, and the band is remade for
 * dW.  Activations stay fp32. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../kernels/gemm_bf16.h"
#include "../kernels/kernels.h"
#include "../kernels/kernels_bf16.h"
#include "../kernels/vol_direct.h"
#include "layers.h"

typedef struct conv3d_priv {
    int cout, k, stride, pad;
    bool bias;
    bool pointwise; /* 1x1x1, stride 1, no padding: col == x */
    bool keep_col;  /* decided at finalize from PCNN_OPT_KEEP_IM2COL */
    int cin, d, h, w, od, oh, ow;
    int ck3;        /* Cin * K^3: GEMM inner dimension */
    float *col;     /* the kept col (max_batch columns), or NULL */
    int band;       /* output planes per band; 0: the whole batch at once */
    bool direct;    /* forward by the direct kernel (vol_direct.c) */
    bool direct_dw; /* dW by the direct kernel (vol_direct_wgrad.c) */
    bool direct_dx; /* dx by the direct kernel (vol_direct_backward.c) */
    float *packed;  /* the forward's packed weights */
    float *flipped; /* dx's packed weights, flipped and transposed */
    double budget_share; /* of the col budget (conv3d_share_col_budget); 0: all */
    bool dx_box_set;     /* dx is wanted on this box of the input only */
    int dx_lo[3], dx_ext[3];
    bool dx_on_box;      /* ... and the direct dx computes only it */
    bool bf16;           /* bf16 products (decided at finalize) */
    bf16 *wb;            /* bf16: W's copy, made by each forward */
} conv3d_priv;

/* The network's vol2col budget in floats (layers.h). */
static size_t col_budget(const plan_ctx *pc)
{
    return pc->conv3d_col_budget ? pc->conv3d_col_budget : CONV3D_COL_BUDGET_FLOATS;
}

static vol_shape geometry(const conv3d_priv *p, int n)
{
    vol_shape g = {p->cin, n, p->d, p->h, p->w, p->k, p->stride, p->pad, p->od, p->oh, p->ow};
    return g;
}

static size_t out_volume(const conv3d_priv *p)
{
    return (size_t)p->od * (size_t)p->oh * (size_t)p->ow;
}

/* Floats of a CK3 x (max_batch*Do*Ho*Wo) matrix, saturated so that an
 * absurd size fails as an allocation rather than wrapping. */
static size_t col_floats(const conv3d_priv *p, int max_batch)
{
    const size_t np = (size_t)max_batch * out_volume(p);
    if (np != 0 && (size_t)p->ck3 > SIZE_MAX / np) return SIZE_MAX;
    return (size_t)p->ck3 * np;
}

/* Output planes per band under the budget (at least one), or 0 when the
 * whole batch's col fits. */
static int band_planes(const conv3d_priv *p, const plan_ctx *pc)
{
    size_t budget = col_budget(pc);
    if (p->budget_share > 0.0) budget = (size_t)((double)budget * p->budget_share);
    if (budget < 1) budget = 1;
    if (p->pointwise || col_floats(p, pc->max_batch) <= budget) return 0;
    const size_t plane = (size_t)p->ck3 * (size_t)p->oh * (size_t)p->ow;
    size_t planes = budget / plane;
    if (planes < 1) planes = 1;
    return planes >= (size_t)p->od ? p->od : (int)planes;
}

/* Which passes run direct.  Stride 1, kernel <= 5, rows of at least 4
 * outputs (rows of up to 8 go two to a vector of 16); dx also needs
 * padding <= k - 1 (a forward convolution of dY) and input rows of at
 * least 4.  Under PCNN_OPT_CONV_ALGORITHM 2 (direct) every pass that can;
 * under 0 (auto) at rows of at least 8, where each direct pass beat
 * vol2col + GEMM on the AVX-512 machine (thread CPU time of each pass on
 * one thread, 4..128 input channels, 8^3..64^3): forward 1.2-4.3x
 * (CosmoFlow-mini's conv1 4 -> 16, conv2 16 -> 32 and conv3 32 -> 64: 4.3x,
 * 2.5x and 1.7x), dx 1.1-2.7x, dW 1.0-2.7x (the least at rows of 12 and
 * at 64-128 channels).  The vol2col matrix, or dcol and col2vol, are
 * whole passes over memory that the direct kernels skip.  Rows of 4 lose
 * (1.3-2.8x).  Not under 1 (GEMM) or 3 (taps: 2D only).  A kept col is
 * still built in forward when dW needs it, so that keeping it or not gives
 * the same bits. */
typedef struct direct_passes {
    bool forward, dw, dx;
} direct_passes;

static direct_passes direct_choice(const conv3d_priv *p, const plan_ctx *pc)
{
    direct_passes d = {false, false, false};
    if (p->bf16 || !vol_direct_available() || p->pointwise || p->stride != 1 || p->k > 5 || p->ow < 4)
        return d;
    const vol_shape g = geometry(p, 1);
    const bool dx_fits = vol_direct_data_supports(&g) && p->w >= 4;
    if (pc->conv_algorithm == 2) {
        d.forward = d.dw = true;
        d.dx = dx_fits;
    } else if (pc->conv_algorithm == 0) {
        d.forward = d.dw = p->ow >= 8;
        d.dx = dx_fits && p->w >= 8;
    }
    return d;
}

/* A direct dx on the wanted box alone, where one is set that leaves out
 * part of the input and has rows the kernel takes (as direct_choice). */
static bool dx_on_box(const conv3d_priv *p, direct_passes d)
{
    if (!d.dx || !p->dx_box_set || p->dx_ext[2] < 4) return false;
    return p->dx_ext[0] < p->d || p->dx_ext[1] < p->h || p->dx_ext[2] < p->w;
}

/* The workspace holds col (when not kept) and dcol, one after the other,
 * or one band's col then dcol; the direct passes' padded x, or padded x
 * and dW's lanes, or padded dY, whichever pass needs most. */
static size_t up64(size_t x) { return (x + 63) / 64 * 64; }

/* bf16: planes per band, and the workspace's parts in bytes: dY in bf16,
 * one band's col (bf16, then its fp32 dcol in the same bytes), then the
 * threaded GEMMs' packing workspaces. */
typedef struct bf16_layout {
    int planes;
    size_t dyb, band, gemm;
} bf16_layout;

static bf16_layout bf16_layout_of(const conv3d_priv *p, int n, int threads)
{
    bf16_layout L;
    L.planes = p->band ? p->band : p->od;
    const int cols = L.planes * p->oh * p->ow;
    L.dyb = up64((size_t)p->cout * (size_t)n * out_volume(p) * sizeof(bf16));
    L.band = up64((size_t)p->ck3 * (size_t)cols * sizeof(float));
    size_t w = gemm_bf16_workspace(p->cout, cols, p->ck3), dw =
        gemm_bf16_workspace(p->cout, p->ck3, cols), dx = gemm_bf16_workspace(p->ck3, cols, p->cout);
    if (dw > w) w = dw;
    if (dx > w) w = dx;
    L.gemm = (size_t)(threads > 0 ? threads : 1) * w;
    return L;
}

static size_t conv3d_workspace(const pcnn_layer *l, const plan_ctx *pc)
{
    const conv3d_priv *p = l->priv;
    if (p->bf16) {
        const bf16_layout L = bf16_layout_of(p, pc->max_batch, pc->threads);
        return (L.dyb + L.band + L.gemm + 3) / 4;
    }
    if (p->pointwise) return 0;
    const direct_passes d = direct_choice(p, pc);
    const int band = band_planes(p, pc);
    const size_t col = band ? (size_t)p->ck3 * (size_t)band * (size_t)p->oh * (size_t)p->ow
                            : col_floats(p, pc->max_batch);
    /* col is needed by a GEMM forward, dW or dx. */
    size_t need = !d.forward || !d.dw || !d.dx ? col : 0;
    const vol_shape g = geometry(p, pc->max_batch);
    const size_t padded = vol_direct_pad_floats(&g);
    if (d.forward && padded > need) need = padded;
    if (d.dw) {
        const size_t dw = padded + vol_direct_wgrad_lane_floats(p->cout, p->cin, p->k);
        if (dw > need) need = dw;
    }
    if (d.dx) {
        const vol_shape t = vol_direct_adjoint(&g, p->cout);
        const size_t dyp = dx_on_box(p, d) ? vol_direct_box_scratch_floats(&g, p->cout, p->dx_ext)
                                           : vol_direct_pad_floats(&t);
        if (dyp > need) need = dyp;
    }
    return need;
}

static void conv3d_decide(pcnn_layer *l, const plan_ctx *pc)
{
    conv3d_priv *p = l->priv;
    p->bf16 = layer_decide_precision(l, pc);
    const direct_passes d = direct_choice(p, pc);
    p->band = band_planes(p, pc);
    p->direct = d.forward;
    p->direct_dw = d.dw;
    p->direct_dx = d.dx;
    p->dx_on_box = dx_on_box(p, d);
    p->keep_col = pc->keep_im2col && !p->pointwise && !p->band && !p->direct_dw && !p->bf16;
    if (p->bf16)
        snprintf(l->decision.kernel, sizeof l->decision.kernel,
                 "vol2col + gemm in bands of %d output planes (bf16 products)",
                 p->band ? p->band : p->od);
    else if (d.forward || d.dw || d.dx)
        snprintf(l->decision.kernel, sizeof l->decision.kernel, "forward %s, dW %s, dx %s%s",
                 d.forward ? "direct" : "vol2col + gemm", d.dw ? "direct" : "vol2col + gemm",
                 d.dx ? "direct" : "gemm + col2vol",
                 p->band && !(d.forward && d.dw && d.dx) ? " (gemm in bands)" : "");
    else if (p->band)
        snprintf(l->decision.kernel, sizeof l->decision.kernel, "vol2col + gemm in bands of %d output planes",
                 p->band);
    else
        snprintf(l->decision.kernel, sizeof l->decision.kernel, "%s",
                 p->pointwise ? "gemm (1x1x1: x is the vol2col matrix)"
                 : p->keep_col ? "vol2col + gemm (col kept for dW)"
                               : "vol2col + gemm (col recomputed for dW)");
}

static pcnn_status conv3d_setup(pcnn_layer *l, const plan_ctx *pc)
{
    conv3d_priv *p = l->priv;
    char name[64];
    /* GEMM sizes are ints: the batch's column count must fit. */
    const long long np = (long long)pc->max_batch * (long long)out_volume(p);
    if (np > INT_MAX)
        return error_set(PCNN_ERR_INVALID_ARGUMENT, "pcnn_net_finalize",
                         "%s: max_batch %d x %dx%dx%d outputs exceeds %d columns",
                         layer_name(l, name, sizeof name), pc->max_batch, p->od, p->oh, p->ow,
                         INT_MAX);
    if (p->bf16) {
        const size_t n = (size_t)p->cout * p->ck3;
        p->wb = mem_alloc(n * sizeof(bf16));
        if (!p->wb)
            return error_set(PCNN_ERR_OUT_OF_MEMORY, "pcnn_net_finalize",
                             "%s: cannot allocate %zu bf16 weights",
                             layer_name(l, name, sizeof name), n);
        l->buffer_bytes += n * sizeof(bf16);
    }
    if (p->direct) {
        const size_t n = vol_direct_packed_floats(p->cout, p->cin, p->k);
        p->packed = mem_alloc_floats(n);
        if (!p->packed)
            return error_set(PCNN_ERR_OUT_OF_MEMORY, "pcnn_net_finalize",
                             "%s: cannot allocate %zu floats of packed weights",
                             layer_name(l, name, sizeof name), n);
        l->buffer_bytes += n * sizeof(float);
    }
    if (p->direct_dx) {
        const size_t n = vol_direct_packed_floats(p->cin, p->cout, p->k);
        p->flipped = mem_alloc_floats(n);
        if (!p->flipped)
            return error_set(PCNN_ERR_OUT_OF_MEMORY, "pcnn_net_finalize",
                             "%s: cannot allocate %zu floats of flipped weights",
                             layer_name(l, name, sizeof name), n);
        l->buffer_bytes += n * sizeof(float);
    }
    if (!p->keep_col) return PCNN_OK;
    const size_t n = col_floats(p, pc->max_batch);
    p->col = n == SIZE_MAX ? NULL : mem_alloc_floats(n);
    if (p->col == NULL)
        return error_set(PCNN_ERR_OUT_OF_MEMORY, "pcnn_net_finalize",
                         "%s: cannot allocate the %zu-float vol2col buffer",
                         layer_name(l, name, sizeof name), n);
    l->buffer_bytes += n * sizeof(float);
    return PCNN_OK;
}

static void conv3d_init(pcnn_layer *l, uint64_t seed)
{
    const conv3d_priv *p = l->priv;
    const size_t nw = (size_t)p->cout * p->ck3, k3 = (size_t)p->k * p->k * p->k;
    layer_init_weights(l, l->params, nw, (size_t)p->cin * k3, (size_t)p->cout * k3, seed);
    if (p->bias) memset(l->params + nw, 0, (size_t)p->cout * sizeof(float));
}

static const float *conv3d_bias(const pcnn_layer *l)
{
    const conv3d_priv *p = l->priv;
    return p->bias ? l->params + (size_t)p->cout * p->ck3 : NULL;
}

/* One band: sample s, output planes [d0, d1), its first column in Y and
 * its column count. */
typedef struct band {
    int s, d0, d1, first, cols;
} band;

static band band_at(const conv3d_priv *p, int s, int d0)
{
    /* od may be near INT_MAX: compare what is left rather than d0 + band. */
    band b = {s, d0, p->od - d0 > p->band ? d0 + p->band : p->od, 0, 0};
    b.first = (int)((size_t)s * out_volume(p) + (size_t)d0 * p->oh * p->ow);
    b.cols = (b.d1 - d0) * p->oh * p->ow;
    return b;
}

static void conv3d_forward_banded(pcnn_layer *l, const run_ctx *ctx, int np)
{
    const conv3d_priv *p = l->priv;
    const vol_shape g = geometry(p, ctx->n);
    const float *x = l->inputs[0]->y;
    for (int s = 0; s < ctx->n; s++)
        for (band b = band_at(p, s, 0); b.d0 < p->od; b = band_at(p, s, b.d1)) {
            vol2col_band(x, &g, s, b.d0, b.d1, ctx->workspace, ctx->threads);
            gemm(false, false, p->cout, b.cols, p->ck3, 1.0f, l->params, p->ck3,
                 ctx->workspace, b.cols, p->bias ? 1.0f : 0.0f, l->y + b.first, np,
                 ctx->threads);
        }
}

/* The GEMM backward in bands: dW when `weights`, dx when `data` (and
 * dx[0] is asked for). */
static void conv3d_backward_banded(pcnn_layer *l, const run_ctx *ctx, float *const dx[2],
                                   int np, bool weights, bool data)
{
    const conv3d_priv *p = l->priv;
    const vol_shape g = geometry(p, ctx->n);
    const float *x = l->inputs[0]->y;
    data = data && dx[0];
    float beta = 0.0f;
    for (int s = 0; s < ctx->n; s++)
        for (band b = band_at(p, s, 0); b.d0 < p->od; b = band_at(p, s, b.d1)) {
            if (weights) {
                vol2col_band(x, &g, s, b.d0, b.d1, ctx->workspace, ctx->threads);
                gemm(false, true, p->cout, p->ck3, b.cols, 1.0f, l->dy + b.first, np,
                     ctx->workspace, b.cols, beta, l->grads, p->ck3, ctx->threads);
                beta = 1.0f;
            }
            if (!data) continue;
            /* dcol_band overwrites col_band, which dW is done with. */
            gemm(true, false, p->ck3, b.cols, p->cout, 1.0f, l->params, p->ck3,
                 l->dy + b.first, np, 0.0f, ctx->workspace, b.cols, ctx->threads);
            col2vol_band(ctx->workspace, &g, s, b.d0, b.d1, dx[0], l->accumulate_dx[0],
                         ctx->threads);
        }
}

/* bf16 forward: band by band, Y_band = W_b col_b (+ bias, set first). */
static void conv3d_forward_bf16(pcnn_layer *l, const run_ctx *ctx, int np)
{
    const conv3d_priv *p = l->priv;
    const vol_shape g = geometry(p, ctx->n);
    const bf16_layout L = bf16_layout_of(p, ctx->n, ctx->threads);
    bf16 *col = (bf16 *)((char *)ctx->workspace + L.dyb);
    char *ws = (char *)ctx->workspace + L.dyb + L.band;
    bf16_from_f32_parallel(l->params, p->wb, (size_t)p->cout * p->ck3, ctx->threads);
    if (p->bias) fill_rows(l->y, (size_t)p->cout, (size_t)np, conv3d_bias(l), ctx->threads);
    for (int s = 0; s < ctx->n; s++)
        for (int d0 = 0; d0 < p->od; d0 += L.planes) {
            const int d1 = p->od - d0 > L.planes ? d0 + L.planes : p->od;
            const int cols = (d1 - d0) * p->oh * p->ow;
            const size_t first = (size_t)s * out_volume(p) + (size_t)d0 * p->oh * p->ow;
            vol2col_band_bf16(l->inputs[0]->y, &g, s, d0, d1, col, ctx->threads);
            gemm_bf16(false, false, p->cout, cols, p->ck3, 1.0f, p->wb, p->ck3, col, cols,
                      p->bias ? 1.0f : 0.0f, l->y + first, np, ctx->threads, ws, L.gemm);
        }
}

/* bf16 backward: dY_b once, then band by band dW += dY_b col_b^T and
 * dcol = W_b^T dY_b (fp32, over col_b's bytes) folded into dx. */
static void conv3d_backward_bf16(pcnn_layer *l, const run_ctx *ctx, float *dx, int np)
{
    const conv3d_priv *p = l->priv;
    const vol_shape g = geometry(p, ctx->n);
    const bf16_layout L = bf16_layout_of(p, ctx->n, ctx->threads);
    bf16 *dyb = (bf16 *)ctx->workspace;
    bf16 *col = (bf16 *)((char *)ctx->workspace + L.dyb);
    char *ws = (char *)ctx->workspace + L.dyb + L.band;
    bf16_from_f32_parallel(l->dy, dyb, (size_t)p->cout * np, ctx->threads);
    float beta = 0.0f;
    for (int s = 0; s < ctx->n; s++)
        for (int d0 = 0; d0 < p->od; d0 += L.planes) {
            const int d1 = p->od - d0 > L.planes ? d0 + L.planes : p->od;
            const int cols = (d1 - d0) * p->oh * p->ow;
            const size_t first = (size_t)s * out_volume(p) + (size_t)d0 * p->oh * p->ow;
            vol2col_band_bf16(l->inputs[0]->y, &g, s, d0, d1, col, ctx->threads);
            gemm_bf16(false, true, p->cout, p->ck3, cols, 1.0f, dyb + first, np, col, cols, beta,
                      l->grads, p->ck3, ctx->threads, ws, L.gemm);
            beta = 1.0f;
            if (!dx) continue;
            gemm_bf16(true, false, p->ck3, cols, p->cout, 1.0f, p->wb, p->ck3, dyb + first, np,
                      0.0f, (float *)col, cols, ctx->threads, ws, L.gemm);
            col2vol_band((float *)col, &g, s, d0, d1, dx, l->accumulate_dx[0], ctx->threads);
        }
}

/* Y[Cout x NP] = W[Cout x CK3] col[CK3 x NP] (+ bias: Y starts as the bias
 * and the GEMM adds into it). */
static void conv3d_forward(pcnn_layer *l, const run_ctx *ctx)
{
    const conv3d_priv *p = l->priv;
    const int np = (int)((size_t)ctx->n * out_volume(p));
    if (p->bf16) {
        conv3d_forward_bf16(l, ctx, np);
        return;
    }
    if (p->direct) {
        const vol_shape g = geometry(p, ctx->n);
        vol_direct_pack(l->params, p->cout, p->cin, p->k, p->packed);
        vol_direct_forward(l->inputs[0]->y, &g, p->packed, p->cout, conv3d_bias(l),
                           ctx->workspace, l->y, ctx->threads);
        if (p->col) vol2col_batch(l->inputs[0]->y, &g, p->col, ctx->threads);
        return;
    }
    if (p->band) {
        if (p->bias) fill_rows(l->y, (size_t)p->cout, (size_t)np, conv3d_bias(l), ctx->threads);
        conv3d_forward_banded(l, ctx, np);
        return;
    }
    const float *x = l->inputs[0]->y;
    const float *col = x;
    if (!p->pointwise) {
        const vol_shape g = geometry(p, ctx->n);
        float *buf = p->col ? p->col : ctx->workspace;
        vol2col_batch(x, &g, buf, ctx->threads);
        col = buf;
    }
    if (p->bias) fill_rows(l->y, (size_t)p->cout, (size_t)np, conv3d_bias(l), ctx->threads);
    gemm(false, false, p->cout, np, p->ck3, 1.0f, l->params, p->ck3, col, np,
         p->bias ? 1.0f : 0.0f, l->y, np, ctx->threads);
}

/* dW by GEMM: dW = dY[Cout x NP] col^T, col kept or rebuilt in the workspace. */
static void conv3d_weights_gemm(pcnn_layer *l, const run_ctx *ctx, int np)
{
    const conv3d_priv *p = l->priv;
    const vol_shape g = geometry(p, ctx->n);
    const float *x = l->inputs[0]->y;
    const float *col = p->pointwise ? x : p->col;
    if (!col) {
        vol2col_batch(x, &g, ctx->workspace, ctx->threads);
        col = ctx->workspace;
    }
    gemm(false, true, p->cout, p->ck3, np, 1.0f, l->dy, np, col, np, 0.0f, l->grads, p->ck3,
         ctx->threads);
}

/* dx by GEMM: dcol = W^T dY in the workspace (a recomputed col is done
 * with), then col2vol; a 1x1x1 convolution's dcol is dx itself. */
static void conv3d_data_gemm(pcnn_layer *l, const run_ctx *ctx, float *dx, int np)
{
    const conv3d_priv *p = l->priv;
    const bool acc = l->accumulate_dx[0];
    if (p->pointwise) {
        gemm(true, false, p->ck3, np, p->cout, 1.0f, l->params, p->ck3, l->dy, np,
             acc ? 1.0f : 0.0f, dx, np, ctx->threads);
        return;
    }
    const vol_shape g = geometry(p, ctx->n);
    gemm(true, false, p->ck3, np, p->cout, 1.0f, l->params, p->ck3, l->dy, np, 0.0f,
         ctx->workspace, np, ctx->threads);
    col2vol_batch(ctx->workspace, &g, dx, acc, ctx->threads);
}

/* Each pass by its own algorithm, one after the other in the workspace. */
static void conv3d_backward(pcnn_layer *l, const run_ctx *ctx, float *const dx[2])
{
    const conv3d_priv *p = l->priv;
    const int np = (int)((size_t)ctx->n * out_volume(p));
    const vol_shape g = geometry(p, ctx->n);
    if (p->bias)
        row_sums(l->dy, (size_t)p->cout, (size_t)np, l->grads + (size_t)p->cout * p->ck3,
                 ctx->threads);
    if (p->bf16) {
        conv3d_backward_bf16(l, ctx, dx[0], np);
        return;
    }
    if (p->direct_dw) {
        float *xp = ctx->workspace;
        vol_direct_backward_weights(l->inputs[0]->y, &g, l->dy, p->cout, xp,
                                    xp + vol_direct_pad_floats(&g), l->grads, ctx->threads);
    }
    const bool gemm_dx = dx[0] && !p->direct_dx;
    if (p->band) {
        if (!p->direct_dw || gemm_dx)
            conv3d_backward_banded(l, ctx, dx, np, !p->direct_dw, gemm_dx);
    } else {
        if (!p->direct_dw) conv3d_weights_gemm(l, ctx, np);
        if (gemm_dx) conv3d_data_gemm(l, ctx, dx[0], np);
    }
    if (dx[0] && p->direct_dx) {
        vol_direct_pack_flipped(l->params, p->cout, p->cin, p->k, p->flipped);
        if (p->dx_on_box)
            vol_direct_backward_data_box(l->dy, &g, p->flipped, p->cout, p->dx_lo, p->dx_ext,
                                         ctx->workspace, dx[0], l->accumulate_dx[0],
                                         ctx->threads);
        else
            vol_direct_backward_data(l->dy, &g, p->flipped, p->cout, ctx->workspace, dx[0],
                                     l->accumulate_dx[0], ctx->threads);
    }
}

static void conv3d_destroy(pcnn_layer *l)
{
    conv3d_priv *p = l->priv;
    if (p) {
        mem_free(p->col);
        mem_free(p->packed);
        mem_free(p->flipped);
        mem_free(p->wb);
    }
    mem_free(p);
    l->priv = NULL;
}

static void conv3d_describe(const pcnn_layer *l, char *buf, size_t size)
{
    const conv3d_priv *p = l->priv;
    snprintf(buf, size, "k=%d s=%d p=%d%s", p->k, p->stride, p->pad, p->bias ? " bias" : "");
}

static void conv3d_window(const pcnn_layer *l, layer_window *w)
{
    const conv3d_priv *p = l->priv;
    *w = layer_window_cube(p->k, p->stride, p->pad, true, 0.0f);
}

static pcnn_status conv3d_twin(const pcnn_layer *l, layer_list *list, pcnn_layer *const *in,
                               twin_opts o, pcnn_layer **out, const char *func)
{
    const conv3d_priv *p = l->priv;
    return conv3d_add(list, in[0], p->cout, p->k, p->stride, o.keep_padding ? p->pad : 0,
                      p->bias && !o.no_bias, out, func);
}

/* Backward reads a kept vol2col matrix that forward made, if any. */
static bool conv3d_recomputable(const pcnn_layer *l)
{
    const conv3d_priv *p = l->priv;
    return p->col == NULL;
}

/* A twin on a share of the outputs takes that share of the vol2col
 * budget: it bands (and keeps no col) where the original does. */
static void conv3d_share_col_budget(pcnn_layer *l, double share)
{
    conv3d_priv *p = l->priv;
    p->budget_share = share > 0.0 && share < 1.0 ? share : 0.0;
}

/* The direct dx then computes that box alone and leaves the rest of dx
 * as it was; a box outside the input is ignored. */
static void conv3d_want_dx_box(pcnn_layer *l, const int lo[3], const int ext[3])
{
    conv3d_priv *p = l->priv;
    const int dims[3] = {p->d, p->h, p->w};
    bool inside = true;
    for (int k = 0; k < 3; k++)
        inside = inside && lo[k] >= 0 && ext[k] >= 1 && lo[k] + ext[k] <= dims[k];
    p->dx_box_set = inside;
    for (int k = 0; k < 3 && inside; k++) {
        p->dx_lo[k] = lo[k];
        p->dx_ext[k] = ext[k];
    }
}

static const layer_ops conv3d_ops = {
    .kind = "conv3d",
    .workspace_floats = conv3d_workspace,
    .decide = conv3d_decide,
    .setup = conv3d_setup,
    .init_params = conv3d_init,
    .forward = conv3d_forward,
    .backward = conv3d_backward,
    .destroy = conv3d_destroy,
    .describe = conv3d_describe,
    .caps = {.split = LAYER_SPLIT_WINDOWED,
             .cost = LAYER_COST_CONV3D,
             .window = conv3d_window,
             .twin = conv3d_twin,
             .recomputable = conv3d_recomputable,
             .twin_share = conv3d_share_col_budget,
             .twin_want_dx_box = conv3d_want_dx_box,
             .in_place = true,
             .weights_alone = true,
             .bf16 = true},
};

pcnn_status conv3d_add(layer_list *list, pcnn_layer *in, int out_channels, int kernel,
                       int stride, int padding, int bias, pcnn_layer **out, const char *func)
{
    TRY(layer_check_new(list, &in, 1, out, func));
    const int idx = list->count;
    const char *me = "conv3d";
    ADD_REQUIRE(out_channels >= 1, PCNN_ERR_INVALID_ARGUMENT,
                "layer %d (%s): out_channels %d must be >= 1", idx, me, out_channels);
    ADD_REQUIRE(kernel >= 1, PCNN_ERR_INVALID_ARGUMENT, "layer %d (%s): kernel %d must be >= 1",
                idx, me, kernel);
    ADD_REQUIRE(stride >= 1, PCNN_ERR_INVALID_ARGUMENT, "layer %d (%s): stride %d must be >= 1",
                idx, me, stride);
    ADD_REQUIRE(padding >= 0, PCNN_ERR_INVALID_ARGUMENT,
                "layer %d (%s): padding %d must be >= 0", idx, me, padding);

    const shape s = in->out;
    const long long pd = (long long)s.d + 2LL * padding, ph = (long long)s.h + 2LL * padding,
                    pw = (long long)s.w + 2LL * padding;
    ADD_REQUIRE(kernel <= pd && kernel <= ph && kernel <= pw, PCNN_ERR_SHAPE,
                "layer %d (%s): kernel %d larger than padded input %lldx%lldx%lld", idx, me,
                kernel, pd, ph, pw);
    const long long od = (pd - kernel) / stride + 1, oh = (ph - kernel) / stride + 1,
                    ow = (pw - kernel) / stride + 1;
    /* Index arithmetic is int: padded extents, CK^3 and one sample's GEMM
     * columns must fit.  A whole batch's output is checked at finalize
     * (CosmoFlow's conv1 at W = 512 is 2^31 floats per sample: it can be
     * built, and trained once a sample is split over ranks).  Products are
     * bounded factor by factor: each factor may be near 2^31 (or 2^33 for
     * od), so a product taken first could wrap past 2^63. */
    const long long ck = (long long)s.c * kernel;
    const bool ck3_fits = ck <= INT_MAX / kernel && ck * kernel <= INT_MAX / kernel;
    const bool out_fits = od <= INT_MAX && oh <= INT_MAX && ow <= INT_MAX &&
                          od * oh <= INT_MAX / ow;
    ADD_REQUIRE(pd <= INT_MAX && ph <= INT_MAX && pw <= INT_MAX && ck3_fits && out_fits,
                PCNN_ERR_SHAPE,
                "layer %d (%s): sizes overflow (%d channels x kernel %d^3, output %d x "
                "%lldx%lldx%lld)",
                idx, me, s.c, kernel, out_channels, od, oh, ow);
    const long long ck3 = ck * kernel * kernel;
    const long long nparams = out_channels * ck3 + (bias ? out_channels : 0);
    ADD_REQUIRE(nparams <= INT_MAX, PCNN_ERR_SHAPE,
                "layer %d (%s): %lld parameters is too many", idx, me, nparams);

    conv3d_priv *p = mem_calloc(1, sizeof *p);
    ADD_REQUIRE(p != NULL, PCNN_ERR_OUT_OF_MEMORY, "layer %d (%s): out of memory", idx, me);
    *p = (conv3d_priv){.cout = out_channels, .k = kernel, .stride = stride, .pad = padding,
                       .bias = bias != 0, .cin = s.c, .d = s.d, .h = s.h, .w = s.w,
                       .od = (int)od, .oh = (int)oh, .ow = (int)ow, .ck3 = (int)ck3};
    p->pointwise = kernel == 1 && stride == 1 && padding == 0;

    const shape o = {out_channels, (int)od, (int)oh, (int)ow};
    pcnn_layer *l = NULL;
    pcnn_status st = layer_append(list, &conv3d_ops, &in, 1, o, (size_t)nparams, p, &l);
    if (st != PCNN_OK) {
        mem_free(p);
        return st;
    }
    l->has_weights = true;
    *out = l;
    return PCNN_OK;
}
