/* Transposed convolution, 2D and 3D, as torch.nn.ConvTranspose2d / 3d:
 * the adjoint of a convolution with the same kernel, stride and padding,
 * plus output_padding extra rows (planes, columns) at the far edges that
 * make the output size (in - 1) * stride - 2 * padding + kernel +
 * output_padding.  Weights [Cin][Cout][k...] then the bias, as PyTorch.
 *
 * The same machinery as convolution, run the other way (layout C N D H W,
 * layer.h): with x the Cin x N*D*H*W matrix of the input,
 *   forward   col = W^T x (one GEMM, Cout k^dims rows), then col2im (or
 *             col2vol) scatters col into y, on top of the bias;
 *   backward  col = im2col(dy) (the convolution's own gather), then
 *             dx = W col and dW = x col^T (two GEMMs), db = row sums of dy.
 * col lives in the shared workspace (no allocation per step).
 *
 * bf16 products (PCNN_OPT_PRECISION, pcnn_layer_set_precision): forward
 * copies W and x to bf16 (x kept for dW) and the GEMM sums in fp32
 * (gemm_bf16.h) into the fp32 col; backward writes im2col(dy) straight in
 * bf16, which is dY's only conversion, for both dx and dW. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../kernels/gemm_bf16.h"
#include "../kernels/kernels.h"
#include "../kernels/kernels_bf16.h"
#include "layer.h"
#include "layers.h"

typedef struct convt_priv {
    int cin, cout, k, stride, pad, out_pad;
    bool bias, volume;
    int ckk; /* Cout * k^dims: col rows */
    bool bf16; /* bf16 products, decided at finalize */
    bf16 *wb;  /* bf16: W's copy, made by each forward */
    bf16 *xb;  /* bf16: the input matrix of the last forward (Cin x N*D*H*W) */
} convt_priv;

static size_t up64(size_t x) { return (x + 63) / 64 * 64; }

static size_t kernel_taps(const convt_priv *p)
{
    return (size_t)p->k * p->k * (p->volume ? p->k : 1);
}

/* The convolution this layer is the adjoint of: from the output (its
 * input) back to the input (its output), over n samples. */
static conv_shape conv_of(const pcnn_layer *l, int n)
{
    const convt_priv *p = l->priv;
    const shape i = l->inputs[0]->out, o = l->out;
    return (conv_shape){p->cout, n, o.h, o.w, p->k, p->stride, p->pad, i.h, i.w};
}

static vol_shape vol_of(const pcnn_layer *l, int n)
{
    const convt_priv *p = l->priv;
    const shape i = l->inputs[0]->out, o = l->out;
    return (vol_shape){p->cout, n, o.d, o.h, o.w, p->k, p->stride, p->pad, i.d, i.h, i.w};
}

/* bf16: the col's bytes (fp32 forward, bf16 backward), then the GEMMs'
 * packing workspaces on `threads`. */
static size_t col_bytes(const pcnn_layer *l, int n)
{
    const convt_priv *p = l->priv;
    return up64((size_t)p->ckk * (size_t)n * shape_spatial(l->inputs[0]->out) * sizeof(float));
}

static size_t gemm_bytes(const pcnn_layer *l, int n, int threads)
{
    const convt_priv *p = l->priv;
    const int np_in = n * (int)shape_spatial(l->inputs[0]->out);
    size_t w = gemm_bf16_workspace(p->ckk, np_in, p->cin),
           dw = gemm_bf16_workspace(p->cin, p->ckk, np_in),
           dx = gemm_bf16_workspace(p->cin, np_in, p->ckk);
    if (dw > w) w = dw;
    if (dx > w) w = dx;
    return (size_t)(threads > 0 ? threads : 1) * w;
}

static size_t convt_workspace(const pcnn_layer *l, const plan_ctx *pc)
{
    const convt_priv *p = l->priv;
    if (p->bf16)
        return (col_bytes(l, pc->max_batch) + gemm_bytes(l, pc->max_batch, pc->threads) + 3) / 4;
    return (size_t)p->ckk * (size_t)pc->max_batch * shape_spatial(l->inputs[0]->out);
}

static pcnn_status convt_setup(pcnn_layer *l, const plan_ctx *pc)
{
    convt_priv *p = l->priv;
    if (!p->bf16) return PCNN_OK;
    const size_t nw = (size_t)p->cin * p->ckk,
                 nx = (size_t)p->cin * pc->max_batch * shape_spatial(l->inputs[0]->out);
    p->wb = mem_alloc(nw * sizeof(bf16));
    p->xb = mem_alloc(nx * sizeof(bf16));
    if (!p->wb || !p->xb) {
        char name[64];
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "%s: %zu + %zu bf16 for the weights and input",
                    layer_name(l, name, sizeof name), nw, nx);
    }
    l->buffer_bytes += (nw + nx) * sizeof(bf16);
    return PCNN_OK;
}

static void convt_destroy(pcnn_layer *l)
{
    convt_priv *p = l->priv;
    if (p) mem_free(p->wb), mem_free(p->xb);
    mem_free(p);
    l->priv = NULL;
}

static void convt_decide(pcnn_layer *l, const plan_ctx *pc)
{
    convt_priv *p = l->priv;
    p->bf16 = layer_decide_precision(l, pc);
    snprintf(l->decision.kernel, sizeof l->decision.kernel, "GEMM + %s (the adjoint of a convolution)",
             p->volume ? "col2vol" : "col2im");
}

static void convt_init(pcnn_layer *l, uint64_t seed)
{
    const convt_priv *p = l->priv;
    const size_t nw = (size_t)p->cin * p->ckk, taps = kernel_taps(p);
    /* PyTorch's fans of a transposed convolution's weight [Cin][Cout][k..]. */
    layer_init_weights(l, l->params, nw, (size_t)p->cout * taps, (size_t)p->cin * taps, seed);
    if (p->bias) memset(l->params + nw, 0, (size_t)p->cout * sizeof(float));
}

static void convt_forward(pcnn_layer *l, const run_ctx *ctx)
{
    const convt_priv *p = l->priv;
    const int n = ctx->n;
    const int np_in = n * (int)shape_spatial(l->inputs[0]->out);
    const size_t np_out = (size_t)n * shape_spatial(l->out);
    float *col = ctx->workspace;
    if (p->bf16) {
        bf16_from_f32_parallel(l->params, p->wb, (size_t)p->cin * p->ckk, ctx->threads);
        bf16_from_f32_parallel(l->inputs[0]->y, p->xb, (size_t)p->cin * np_in, ctx->threads);
        gemm_bf16(true, false, p->ckk, np_in, p->cin, 1.0f, p->wb, p->ckk, p->xb, np_in, 0.0f,
                  col, np_in, ctx->threads, (char *)ctx->workspace + col_bytes(l, n),
                  gemm_bytes(l, n, ctx->threads));
    } else {
        gemm(true, false, p->ckk, np_in, p->cin, 1.0f, l->params, p->ckk, l->inputs[0]->y,
             np_in, 0.0f, col, np_in, ctx->threads);
    }
    if (p->bias) fill_rows(l->y, (size_t)p->cout, np_out, l->params + (size_t)p->cin * p->ckk,
                           ctx->threads);
    if (p->volume) {
        const vol_shape g = vol_of(l, n);
        col2vol_batch(col, &g, l->y, p->bias, ctx->threads);
    } else {
        const conv_shape g = conv_of(l, n);
        col2im_batch(col, g.c, g.n, g.h, g.w, g.k, g.stride, g.pad, g.ho, g.wo, l->y, p->bias,
                     ctx->threads);
    }
}

static void convt_backward(pcnn_layer *l, const run_ctx *ctx, float *const dx[2])
{
    const convt_priv *p = l->priv;
    const int n = ctx->n;
    const int np_in = n * (int)shape_spatial(l->inputs[0]->out);
    const size_t np_out = (size_t)n * shape_spatial(l->out);
    float *col = ctx->workspace;
    if (p->bias)
        row_sums(l->dy, (size_t)p->cout, np_out, l->grads + (size_t)p->cin * p->ckk,
                 ctx->threads);
    if (p->bf16) {
        bf16 *colb = (bf16 *)ctx->workspace;
        void *ws = (char *)ctx->workspace + col_bytes(l, n);
        const size_t wsb = gemm_bytes(l, n, ctx->threads);
        if (p->volume) {
            const vol_shape g = vol_of(l, n);
            vol2col_batch_bf16(l->dy, &g, colb, ctx->threads);
        } else {
            const conv_shape g = conv_of(l, n);
            im2col_batch_bf16(l->dy, &g, colb, ctx->threads);
        }
        gemm_bf16(false, true, p->cin, p->ckk, np_in, 1.0f, p->xb, np_in, colb, np_in, 0.0f,
                  l->grads, p->ckk, ctx->threads, ws, wsb);
        if (dx[0])
            gemm_bf16(false, false, p->cin, np_in, p->ckk, 1.0f, p->wb, p->ckk, colb, np_in,
                      l->accumulate_dx[0] ? 1.0f : 0.0f, dx[0], np_in, ctx->threads, ws, wsb);
        return;
    }
    if (p->volume) {
        const vol_shape g = vol_of(l, n);
        vol2col_batch(l->dy, &g, col, ctx->threads);
    } else {
        const conv_shape g = conv_of(l, n);
        im2col_batch(l->dy, g.c, g.n, g.h, g.w, g.k, g.stride, g.pad, g.ho, g.wo, col,
                     ctx->threads);
    }
    gemm(false, true, p->cin, p->ckk, np_in, 1.0f, l->inputs[0]->y, np_in, col, np_in, 0.0f,
         l->grads, p->ckk, ctx->threads);
    if (dx[0])
        gemm(false, false, p->cin, np_in, p->ckk, 1.0f, l->params, p->ckk, col, np_in,
             l->accumulate_dx[0] ? 1.0f : 0.0f, dx[0], np_in, ctx->threads);
}

static void convt_describe(const pcnn_layer *l, char *buf, size_t size)
{
    const convt_priv *p = l->priv;
    snprintf(buf, size, "k=%d s=%d p=%d op=%d%s", p->k, p->stride, p->pad, p->out_pad,
             p->bias ? " bias" : "");
}

/* The window of the convolution this layer is the adjoint of, which
 * prices it (perf/regressor_source.c); it does not split spatially yet. */
static void convt_window(const pcnn_layer *l, layer_window *w)
{
    const convt_priv *p = l->priv;
    *w = layer_window_cube(p->k, p->stride, p->pad, p->volume, 0.0f);
}

static const layer_ops convt2d_ops = {
    .kind = "conv_transpose2d",
    .workspace_floats = convt_workspace,
    .decide = convt_decide,
    .setup = convt_setup,
    .init_params = convt_init,
    .forward = convt_forward,
    .backward = convt_backward,
    .destroy = convt_destroy,
    .describe = convt_describe,
    .caps = {.split = LAYER_SPLIT_WHOLE,
             .cost = LAYER_COST_CONV_TRANSPOSE2D,
             .window = convt_window,
             .bf16 = true},
};

static const layer_ops convt3d_ops = {
    .kind = "conv_transpose3d",
    .workspace_floats = convt_workspace,
    .decide = convt_decide,
    .setup = convt_setup,
    .init_params = convt_init,
    .forward = convt_forward,
    .backward = convt_backward,
    .destroy = convt_destroy,
    .describe = convt_describe,
    .caps = {.split = LAYER_SPLIT_WHOLE,
             .cost = LAYER_COST_CONV_TRANSPOSE3D,
             .window = convt_window,
             .bf16 = true},
};

/* One output extent, or -1 when it is below 1. */
static long long out_extent(int in, int k, int s, int p, int op)
{
    const long long e = ((long long)in - 1) * s - 2LL * p + k + op;
    return e >= 1 ? e : -1;
}

static pcnn_status convt_add(layer_list *list, pcnn_layer *in, int out_channels, int kernel,
                             int stride, int padding, int output_padding, int bias, bool volume,
                             pcnn_layer **out, const char *func)
{
    TRY(layer_check_new(list, &in, 1, out, func));
    const int idx = list->count;
    const char *me = volume ? "conv_transpose3d" : "conv_transpose2d";
    ADD_REQUIRE(out_channels >= 1, PCNN_ERR_INVALID_ARGUMENT,
                "layer %d (%s): out_channels %d must be >= 1", idx, me, out_channels);
    ADD_REQUIRE(kernel >= 1, PCNN_ERR_INVALID_ARGUMENT, "layer %d (%s): kernel %d must be >= 1",
                idx, me, kernel);
    ADD_REQUIRE(stride >= 1, PCNN_ERR_INVALID_ARGUMENT, "layer %d (%s): stride %d must be >= 1",
                idx, me, stride);
    ADD_REQUIRE(padding >= 0, PCNN_ERR_INVALID_ARGUMENT,
                "layer %d (%s): padding %d must be >= 0", idx, me, padding);
    ADD_REQUIRE(output_padding >= 0 && output_padding < stride, PCNN_ERR_INVALID_ARGUMENT,
                "layer %d (%s): output_padding %d must be >= 0 and smaller than the stride %d",
                idx, me, output_padding, stride);
    const shape s = in->out;
    ADD_REQUIRE(volume || s.d == 1, PCNN_ERR_SHAPE,
                "layer %d (%s): the input is a volume (depth %d): use pcnn_conv_transpose3d",
                idx, me, s.d);
    ADD_REQUIRE(kernel <= 1024 && stride <= 1024 && padding <= INT_MAX / 4, PCNN_ERR_SHAPE,
                "layer %d (%s): kernel %d, stride %d, padding %d: too large", idx, me, kernel,
                stride, padding);
    const long long od = volume ? out_extent(s.d, kernel, stride, padding, output_padding) : 1,
                    oh = out_extent(s.h, kernel, stride, padding, output_padding),
                    ow = out_extent(s.w, kernel, stride, padding, output_padding);
    ADD_REQUIRE(od > 0 && oh > 0 && ow > 0, PCNN_ERR_SHAPE,
                "layer %d (%s): kernel %d, stride %d, padding %d, output_padding %d give no "
                "output on a %dx%dx%d input", idx, me, kernel, stride, padding, output_padding,
                s.d, s.h, s.w);
    const long long taps = (long long)kernel * kernel * (volume ? kernel : 1);
    const long long ckk = (long long)out_channels * taps;
    const long long cols = (long long)s.d * s.h * s.w;
    ADD_REQUIRE(od <= INT_MAX && oh <= INT_MAX && ow <= INT_MAX && od * oh <= INT_MAX / ow &&
                    ckk <= INT_MAX && cols <= INT_MAX,
                PCNN_ERR_SHAPE, "layer %d (%s): sizes overflow (%d x kernel %d, output %lldx"
                "%lldx%lld)", idx, me, out_channels, kernel, od, oh, ow);
    const long long nparams = (long long)s.c * ckk + (bias ? out_channels : 0);
    ADD_REQUIRE(nparams <= INT_MAX, PCNN_ERR_SHAPE,
                "layer %d (%s): %lld parameters is too many", idx, me, nparams);

    convt_priv *p = mem_calloc(1, sizeof *p);
    ADD_REQUIRE(p != NULL, PCNN_ERR_OUT_OF_MEMORY, "layer %d (%s): out of memory", idx, me);
    *p = (convt_priv){.cin = s.c, .cout = out_channels, .k = kernel, .stride = stride,
                      .pad = padding, .out_pad = output_padding, .bias = bias != 0,
                      .volume = volume, .ckk = (int)ckk};
    const shape o = {out_channels, (int)od, (int)oh, (int)ow};
    pcnn_layer *l = NULL;
    pcnn_status st = layer_append(list, volume ? &convt3d_ops : &convt2d_ops, &in, 1, o,
                                  (size_t)nparams, p, &l);
    if (st != PCNN_OK) {
        mem_free(p);
        return st;
    }
    l->has_weights = true;
    *out = l;
    return PCNN_OK;
}

pcnn_status conv_transpose2d_add(layer_list *list, pcnn_layer *in, int out_channels,
                                 int kernel, int stride, int padding, int output_padding,
                                 int bias, pcnn_layer **out, const char *func)
{
    return convt_add(list, in, out_channels, kernel, stride, padding, output_padding, bias,
                     false, out, func);
}

pcnn_status conv_transpose3d_add(layer_list *list, pcnn_layer *in, int out_channels,
                                 int kernel, int stride, int padding, int output_padding,
                                 int bias, pcnn_layer **out, const char *func)
{
    return convt_add(list, in, out_channels, kernel, stride, padding, output_padding, bias,
                     true, out, func);
}
