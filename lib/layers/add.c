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

typedef struct add_priv {
    float scale;
} add_priv;

/* Over [lo, hi) of the batch: out = a + s * b (forward, b may be NULL for
 * out = s * a), or out += s * a.  out never aliases the inputs: each layer
 * has its own output, and gradients of different layers live in different
 * buffers while both are needed. */
typedef struct add_args {
    const float *a, *b;
    float *out;
    float s;
} add_args;

VECTOR_CLONES static void sum_range(void *arg, size_t lo, size_t hi)
{
    const add_args *p = arg;
    const float *restrict a = p->a, *restrict b = p->b;
    float *restrict y = p->out;
    const float s = p->s;
    if (s == 1.0f)
        for (size_t i = lo; i < hi; i++) y[i] = a[i] + b[i];
    else
        for (size_t i = lo; i < hi; i++) y[i] = a[i] + s * b[i];
}

VECTOR_CLONES static void scale_range(void *arg, size_t lo, size_t hi)
{
    const add_args *p = arg;
    const float *restrict a = p->a;
    float *restrict y = p->out;
    const float s = p->s;
    for (size_t i = lo; i < hi; i++) y[i] = s * a[i];
}

VECTOR_CLONES static void scale_acc_range(void *arg, size_t lo, size_t hi)
{
    const add_args *p = arg;
    const float *restrict a = p->a;
    float *restrict y = p->out;
    const float s = p->s;
    for (size_t i = lo; i < hi; i++) y[i] += s * a[i];
}

static void add_forward(pcnn_layer *l, const run_ctx *ctx)
{
    const add_priv *p = l->priv;
    const size_t total = shape_size(l->out) * (size_t)ctx->n;
    add_args a = {l->inputs[0]->y, l->inputs[1]->y, l->y, p->scale};
    parallel_for(total, 16, 2 * total, ctx->threads, sum_range, &a);
}

static void add_backward(pcnn_layer *l, const run_ctx *ctx, float *const dx[2])
{
    const add_priv *p = l->priv;
    const size_t total = shape_size(l->out) * (size_t)ctx->n;
    const float s = p->scale;
    if (dx[0]) copy_or_add(l->dy, dx[0], total, l->accumulate_dx[0], ctx->threads);
    if (!dx[1]) return;
    if (s == 1.0f) {
        copy_or_add(l->dy, dx[1], total, l->accumulate_dx[1], ctx->threads);
        return;
    }
    add_args a = {l->dy, NULL, dx[1], s};
    parallel_for(total, 16, total, ctx->threads,
                 l->accumulate_dx[1] ? scale_acc_range : scale_range, &a);
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
