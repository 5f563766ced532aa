/* Residual addition y = a + b_scale * b of two same-shaped inputs.
 *
 * a and b may be the same layer: the planner then gives both inputs the
 * same dx buffer with accumulate_dx[1] set, and backward, which writes
 * input 0 before input 1, sums the two contributions. */
#include <math.h>
#include <stdio.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../graph/net.h"
#include "../kernels/kernels.h"
#include "layer.h"

#define PAR_MIN 16384

typedef struct add_priv {
    float scale;
} add_priv;

static void add_forward(pcnn_layer *l, const run_ctx *ctx)
{
    const add_priv *p = l->priv;
    size_t total = shape_size(l->out) * (size_t)ctx->n;
    const float *a = l->inputs[0]->y, *b = l->inputs[1]->y;
    float *y = l->y, s = p->scale;
    if (s == 1.0f) {
#pragma omp parallel for num_threads(ctx->threads) if (total >= PAR_MIN) schedule(static)
        for (size_t i = 0; i < total; i++) y[i] = a[i] + b[i];
    } else {
#pragma omp parallel for num_threads(ctx->threads) if (total >= PAR_MIN) schedule(static)
        for (size_t i = 0; i < total; i++) y[i] = a[i] + s * b[i];
    }
}

static void add_backward(pcnn_layer *l, const run_ctx *ctx, float *const dx[2])
{
    const add_priv *p = l->priv;
    size_t total = shape_size(l->out) * (size_t)ctx->n;
    const float *dy = l->dy;
    float s = p->scale;
    if (dx[0]) copy_or_add(dy, dx[0], total, l->accumulate_dx[0], ctx->threads);
    if (!dx[1]) return;
    float *g = dx[1];
    if (s == 1.0f) {
        copy_or_add(dy, g, total, l->accumulate_dx[1], ctx->threads);
    } else if (l->accumulate_dx[1]) {
#pragma omp parallel for num_threads(ctx->threads) if (total >= PAR_MIN) schedule(static)
        for (size_t i = 0; i < total; i++) g[i] += s * dy[i];
    } else {
#pragma omp parallel for num_threads(ctx->threads) if (total >= PAR_MIN) schedule(static)
        for (size_t i = 0; i < total; i++) g[i] = s * dy[i];
    }
}

static void add_describe(const pcnn_layer *l, char *buf, size_t size)
{
    const add_priv *p = l->priv;
    if (p->scale != 1.0f)
        snprintf(buf, size, "scale=%.9g", (double)p->scale);
    else if (size > 0)
        buf[0] = '\0';
}

static const layer_ops add_ops = {
    .kind = "add",
    .forward = add_forward,
    .backward = add_backward,
    .describe = add_describe,
};

static pcnn_status add_new(pcnn_net *net, pcnn_layer *a, pcnn_layer *b, float b_scale,
                           pcnn_layer **out, const char *func)
{
    pcnn_layer *ins[2] = {a, b};
    TRY(layer_check_new(net, ins, 2, out, func));
    int index = net->num_layers;
    if (!isfinite(b_scale))
        return error_set(PCNN_ERR_INVALID_ARGUMENT, func,
                         "layer %d (add): b_scale %g must be finite", index, (double)b_scale);
    shape sa = a->out, sb = b->out; /* d == 1: 2D layers only so far */
    if (sa.c != sb.c || sa.d != sb.d || sa.h != sb.h || sa.w != sb.w)
        return error_set(PCNN_ERR_SHAPE, func,
                         "layer %d (add): input shapes (%d, %d, %d) of layer %d and "
                         "(%d, %d, %d) of layer %d differ",
                         index, sa.c, sa.h, sa.w, a->index, sb.c, sb.h, sb.w,
                         b->index);
    add_priv *p = mem_calloc(1, sizeof *p);
    if (!p) return error_set(PCNN_ERR_OUT_OF_MEMORY, func, "layer %d (add): no memory", index);
    p->scale = b_scale;
    pcnn_layer *l;
    pcnn_status st = layer_append(net, &add_ops, ins, 2, sa, 0, p, &l);
    if (st != PCNN_OK) {
        mem_free(p);
        return st;
    }
    *out = l;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_add(pcnn_net *net, pcnn_layer *a, pcnn_layer *b, pcnn_layer **out)
{
    return add_new(net, a, b, 1.0f, out, __func__);
}

PCNN_API pcnn_status pcnn_add_scaled(pcnn_net *net, pcnn_layer *a, pcnn_layer *b,
                                     float b_scale, pcnn_layer **out)
{
    return add_new(net, a, b, b_scale, out, __func__);
}
