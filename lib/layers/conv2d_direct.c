/* The direct kernels for the convolution layer (conv2d.h): the glue
 * between the layer's buffers and kernels/conv_direct.h, whose grid holds
 * the padded input and output planes in the workspace instead of an im2col
 * matrix. */
#include "../kernels/conv_direct.h"
#include "conv2d.h"

/* Direct path: the grid planes of x and y (or dY), then the largest of the
 * weight gradient's scratch, the packed weights with the input gradient's
 * planes, and the channel-lane kernel's scratch either way. */
size_t conv_direct_workspace(const conv_priv *p, int max_batch, int threads)
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

/* Strided direct passes: the grid planes of x, then the channel-lane
 * kernel's scratch (forward) or the weight gradient's (backward); the
 * input gradient's GEMM bands reuse the workspace after both. */
size_t conv_strided_workspace(const conv_priv *p, int max_batch, int threads)
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

/* Workspace: padded input planes, then padded output planes and the packed
 * weights, or the scratch of the channel-lane kernel. */
void conv_direct_forward(const pcnn_layer *l, const run_ctx *ctx)
{
    const conv_priv *p = l->priv;
    direct_grid g;
    direct_grid_init(&g, ctx->n, p->h, p->w, p->k, 1, p->pad);
    float *xp = ctx->workspace, *out = xp + (size_t)p->cin * g.plane;
    float *packed = out + (size_t)p->cout * g.plane;
    const float *bias = conv_bias(l);
    direct_place(l->inputs[0]->y, p->cin, p->h, p->w, p->pad, p->pad, &g, xp, ctx->threads);
    if (p->choice.forward == CONV_KERNEL_DIRECT_CHANNELS) {
        direct_conv_channels(xp, l->params, p->cout, p->cin, false, &g, bias, l->y, false, out,
                             ctx->threads);
        return;
    }
    direct_pack(l->params, p->cout, p->cin, p->k, false, packed, ctx->threads);
    const direct_output to = {l->y, bias, p->ho, p->wo, false};
    direct_conv(xp, p->cin, packed, p->cout, false, &g, out, &to, ctx->threads);
}

/* Strided passes: x on the strided grid at the start of the workspace;
 * returns the scratch after its planes. */
static float *place_strided(const pcnn_layer *l, const run_ctx *ctx, direct_grid *g)
{
    const conv_priv *p = l->priv;
    direct_grid_init(g, ctx->n, p->h, p->w, p->k, p->stride, p->pad);
    direct_place(l->inputs[0]->y, p->cin, p->h, p->w, p->pad, p->pad, g, ctx->workspace,
                 ctx->threads);
    return ctx->workspace + (size_t)p->cin * g->plane;
}

/* Strided: the channel-lane forward reads the input at the stride from
 * the grid. */
void conv_strided_forward(const pcnn_layer *l, const run_ctx *ctx)
{
    const conv_priv *p = l->priv;
    direct_grid g;
    float *scratch = place_strided(l, ctx, &g);
    direct_conv_channels(ctx->workspace, l->params, p->cout, p->cin, false, &g, conv_bias(l),
                         l->y, false, scratch, ctx->threads);
}

/* Workspace: the grid planes of dY and x, then the weight gradient's
 * scratch, then the adjoint's packed weights and dx planes (or the
 * channel-lane kernel's scratch). */
void conv_direct_backward(const pcnn_layer *l, const run_ctx *ctx, float *dx)
{
    const conv_priv *p = l->priv;
    direct_grid g;
    direct_grid_init(&g, ctx->n, p->h, p->w, p->k, 1, p->pad);
    float *dyp = ctx->workspace, *xp = dyp + (size_t)p->cout * g.plane;
    float *rest = xp + (size_t)p->cin * g.plane;
    direct_place(l->inputs[0]->y, p->cin, p->h, p->w, p->pad, p->pad, &g, xp, ctx->threads);
    const bool few = p->choice.weight_grad == CONV_KERNEL_DIRECT_GRID;
    if (few || dx) direct_place(l->dy, p->cout, p->ho, p->wo, 0, 0, &g, dyp, ctx->threads);
    if (few)
        direct_weight_grad_few(dyp, p->cout, xp, p->cin, &g, l->grads, ctx->threads);
    else
        direct_weight_grad(l->dy, p->cout, xp, p->cin, &g, l->grads, rest, ctx->threads);
    if (!dx) return;
    if (p->choice.input_grad == CONV_KERNEL_DIRECT_CHANNELS) {
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
 * is GEMMs in bands, which need no col). */
void conv_strided_weight_grad(const pcnn_layer *l, const run_ctx *ctx)
{
    const conv_priv *p = l->priv;
    direct_grid g;
    float *scratch = place_strided(l, ctx, &g);
    direct_weight_grad(l->dy, p->cout, ctx->workspace, p->cin, &g, l->grads, scratch,
                       ctx->threads);
}
