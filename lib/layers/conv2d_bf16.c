/* The convolution's bf16 products (conv2d.h): im2col + GEMM as
 * conv2d_gemm.c, with both operands of every product in bf16 and the sums
 * in fp32 (gemm_bf16.h).
 *
 *   forward  wb = bf16(W) (the parameters change every step; the copy is
 *            the same bits on every rank because W is), then band by band
 *            col_b = im2col in bf16 and Y = wb col_b (+ bias, fp32)
 *   dW       dY_b = bf16(dY) once, dW = dY_b col_b^T over the whole batch
 *            (col_b kept from forward or made again in bf16)
 *   dx       band by band dcol = wb^T dY_b (fp32), col2im into dx
 *
 * A 1x1 convolution makes a (bf16) col of x as well: the products need x
 * in bf16, and that copy is the col.  Activations and their gradients stay
 * fp32 in memory; bf16 lives only in the operands.  The workspace layout
 * (bytes, each part 64-byte aligned): dY_b, then either the threads' bands
 * (a col_b or fp32 dcol band and a GEMM packing workspace each) or the
 * batch's col_b and the threaded GEMM's packing workspaces. */
#include <limits.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../kernels/gemm_bf16.h"
#include "../kernels/kernels_bf16.h"
#include "conv2d.h"

/* bf16 values of col per band: as conv2d_gemm.c's bands in bytes, so a
 * band and its GEMM packs stay in a core's L2. */
#define BAND_VALUES (192 * 1024)

static size_t up64(size_t x) { return (x + 63) / 64 * 64; }

static int band_rows(const conv_priv *p)
{
    long long rows = BAND_VALUES / ((long long)p->ckk * p->wo);
    long long min_rows = (4LL * p->cout + p->wo - 1) / p->wo;
    if (rows < min_rows) rows = min_rows;
    if (rows < 1) rows = 1;
    return rows > INT_MAX ? INT_MAX : (int)rows;
}

typedef struct layout {
    int np, band_cols;
    size_t dyb, band, part, col, total;
} layout;

/* Where everything lives for a batch of n samples on `threads` threads. */
static layout layout_of(const conv_priv *p, int n, int threads)
{
    layout L;
    L.np = n * p->ho * p->wo;
    long long rows = band_rows(p), all = (long long)n * p->ho;
    L.band_cols = (int)(rows < all ? rows : all) * p->wo;
    L.dyb = up64((size_t)p->cout * L.np * sizeof(bf16));
    /* A band holds col_b (forward) or the fp32 dcol (dx): the larger. */
    L.band = up64((size_t)p->ckk * L.band_cols * sizeof(float));
    size_t fw = gemm_bf16_workspace(p->cout, L.band_cols, p->ckk);
    size_t dx = gemm_bf16_workspace(p->ckk, L.band_cols, p->cout);
    L.part = L.band + up64(fw > dx ? fw : dx);
    L.col = p->colb ? 0 : up64((size_t)p->ckk * L.np * sizeof(bf16));
    const size_t parts = (size_t)threads * L.part;
    const size_t dw = L.col + (size_t)threads * gemm_bf16_workspace(p->cout, p->ckk, L.np);
    L.total = L.dyb + (parts > dw ? parts : dw);
    return L;
}

size_t conv_bf16_workspace(const conv_priv *p, int max_batch, int threads)
{
    return (layout_of(p, max_batch, threads).total + sizeof(float) - 1) / sizeof(float);
}

pcnn_status conv_bf16_setup(pcnn_layer *l, const plan_ctx *pc)
{
    conv_priv *p = l->priv;
    char name[64];
    const size_t nw = (size_t)p->cout * p->ckk;
    const size_t ncol = p->choice.keep_col ? conv_col_floats(p, pc->max_batch) : 0;
    p->wb = mem_alloc(nw * sizeof(bf16));
    if (ncol) p->colb = ncol > SIZE_MAX / sizeof(bf16) ? NULL : mem_alloc(ncol * sizeof(bf16));
    if (!p->wb || (ncol && !p->colb))
        return error_set(PCNN_ERR_OUT_OF_MEMORY, "pcnn_net_finalize",
                         "%s: cannot allocate the bf16 weights (%zu) and im2col matrix (%zu)",
                         layer_name(l, name, sizeof name), nw, ncol);
    l->buffer_bytes += (nw + ncol) * sizeof(bf16);
    return PCNN_OK;
}

static conv_shape geometry(const conv_priv *p, int n)
{
    conv_shape g = {p->cin, n, p->h, p->w, p->k, p->stride, p->pad, p->ho, p->wo};
    return g;
}

typedef struct band_args {
    const pcnn_layer *l;
    const run_ctx *ctx;
    layout L;
    float *dx;
} band_args;

/* Thread `part`'s band and GEMM workspace. */
static char *part_base(const band_args *a, int part)
{
    return (char *)a->ctx->workspace + a->L.dyb + (size_t)part * a->L.part;
}

static void forward_bands(void *arg, size_t s0, size_t s1, int part)
{
    const band_args *a = arg;
    const pcnn_layer *l = a->l;
    const conv_priv *p = l->priv;
    const conv_shape g = geometry(p, a->ctx->n);
    const int np = a->L.np, rows = band_rows(p);
    char *base = part_base(a, part);
    bf16 *buf = p->colb ? NULL : (bf16 *)base;
    const float *bias = conv_bias(l);
    const gemm_bf16_path path = gemm_bf16_path_get();
    for (int g0 = (int)s0 * p->ho; g0 < (int)s1 * p->ho; g0 += rows) {
        const int g1 = g0 + rows < (int)s1 * p->ho ? g0 + rows : (int)s1 * p->ho;
        const int cols = (g1 - g0) * p->wo;
        const size_t at = (size_t)g0 * p->wo;
        bf16 *col = buf ? buf : p->colb + at;
        const int ld = buf ? cols : np;
        im2col_rows_bf16(l->inputs[0]->y, &g, g0, g1, col, (size_t)ld);
        float *y = l->y + at;
        for (int co = 0; bias && co < p->cout; co++)
            for (int j = 0; j < cols; j++) y[(size_t)co * np + j] = bias[co];
        gemm_bf16_serial_on(path, false, false, p->cout, cols, p->ckk, 1.0f, p->wb, p->ckk, col,
                            ld, bias ? 1.0f : 0.0f, y, np, base + a->L.band,
                            a->L.part - a->L.band);
    }
}

void conv_bf16_forward(const pcnn_layer *l, const run_ctx *ctx)
{
    const conv_priv *p = l->priv;
    bf16_from_f32_parallel(l->params, p->wb, (size_t)p->cout * p->ckk, ctx->threads);
    band_args a = {l, ctx, layout_of(p, ctx->n, ctx->threads), NULL};
    parallel_parts((size_t)ctx->n, 1, (size_t)p->ckk * a.L.np, ctx->threads, forward_bands, &a);
}

/* dcol = wb^T dY_b band by band, each folded into dx while in cache. */
static void dx_bands(void *arg, size_t s0, size_t s1, int part)
{
    const band_args *a = arg;
    const pcnn_layer *l = a->l;
    const conv_priv *p = l->priv;
    const conv_shape g = geometry(p, a->ctx->n);
    const int np = a->L.np, rows = band_rows(p);
    const bf16 *dyb = (const bf16 *)a->ctx->workspace;
    char *base = part_base(a, part);
    float *dcol = (float *)base;
    const gemm_bf16_path path = gemm_bf16_path_get();
    for (int g0 = (int)s0 * p->ho; g0 < (int)s1 * p->ho; g0 += rows) {
        const int g1 = g0 + rows < (int)s1 * p->ho ? g0 + rows : (int)s1 * p->ho;
        const int cols = (g1 - g0) * p->wo;
        gemm_bf16_serial_on(path, true, false, p->ckk, cols, p->cout, 1.0f, p->wb, p->ckk,
                            dyb + (size_t)g0 * p->wo, np, 0.0f, dcol, cols, base + a->L.band,
                            a->L.part - a->L.band);
        col2im_rows(dcol, (size_t)cols, &g, g0, g1, a->dx, l->accumulate_dx[0]);
    }
}

void conv_bf16_backward(const pcnn_layer *l, const run_ctx *ctx, float *dx)
{
    const conv_priv *p = l->priv;
    band_args a = {l, ctx, layout_of(p, ctx->n, ctx->threads), dx};
    const int np = a.L.np;
    bf16 *dyb = (bf16 *)ctx->workspace;
    bf16_from_f32_parallel(l->dy, dyb, (size_t)p->cout * np, ctx->threads);
    char *rest = (char *)ctx->workspace + a.L.dyb;
    const bf16 *col = p->colb;
    if (!col) {
        const conv_shape g = geometry(p, ctx->n);
        im2col_batch_bf16(l->inputs[0]->y, &g, (bf16 *)rest, ctx->threads);
        col = (const bf16 *)rest;
    }
    gemm_bf16(false, true, p->cout, p->ckk, np, 1.0f, dyb, np, col, np, 0.0f, l->grads, p->ckk,
              ctx->threads, rest + a.L.col, a.L.total - a.L.dyb - a.L.col);
    /* The bands overwrite the batch's col_b, which dW is done with. */
    if (dx) parallel_parts((size_t)ctx->n, 1, (size_t)p->ckk * np, ctx->threads, dx_bands, &a);
}
