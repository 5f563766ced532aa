/* Residual addition y = a + b_scale * b of two same-shaped inputs.
 *
 * a and b may be the same layer: the planner then gives both inputs the
 * same dx buffer with accumulate_dx[1] set, and backward, which writes
 * input 0 before input 1, sums the two contributions.
 *
 * Fused with the ReLU right after it (layer.h, fused_relu), as residual
 * blocks end: forward writes max(0, y) into the ReLU's output and backward
 * reads the ReLU's output gradient where its output is positive. */
#include <math.h>
#include <stdio.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../kernels/kernels.h"
#include "layer.h"
#include "layers.h"

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

/* Forward of an add that computes the ReLU after it: y = max(0, a + s*b),
 * written as the ReLU layer writes it (NaN passes). */
VECTOR_CLONES static void sum_relu_range(void *arg, size_t lo, size_t hi)
{
    const add_args *p = arg;
    const float *restrict a = p->a, *restrict b = p->b;
    float *restrict y = p->out;
    const float s = p->s;
    for (size_t i = lo; i < hi; i++) {
        float v = s == 1.0f ? a[i] + b[i] : a[i] + s * b[i];
        y[i] = v < 0.0f ? 0.0f : v;
    }
}

/* Backward of a fused add, both inputs in one pass: v = relu_mask(dy,
 * relu output); out (+)= v, out2 (+)= s * v (out2 may be NULL). */
typedef struct masked_args {
    const float *dy, *mask;
    float *out, *out2;
    float s;
    bool acc, acc2;
} masked_args;

VECTOR_CLONES static void masked_range(void *arg, size_t lo, size_t hi)
{
    const masked_args *p = arg;
    const float *restrict dy = p->dy, *restrict m = p->mask;
    float *restrict g = p->out, *restrict g2 = p->out2;
    const float s = p->s;
    /* Each combination its own loop: the vectoriser sees no branch. */
#define MASKED_LOOP(BODY)                                    \
    for (size_t i = lo; i < hi; i++) {                       \
        const float v = relu_mask(dy[i], m[i]);              \
        BODY;                                                \
    }
    if (!g2) {
        if (p->acc) MASKED_LOOP(g[i] += v) else MASKED_LOOP(g[i] = v)
    } else if (!g) {
        if (p->acc2) MASKED_LOOP(g2[i] += s * v) else MASKED_LOOP(g2[i] = s * v)
    } else if (p->acc) {
        if (p->acc2) MASKED_LOOP(g[i] += v; g2[i] += s * v)
        else MASKED_LOOP(g[i] += v; g2[i] = s * v)
    } else {
        if (p->acc2) MASKED_LOOP(g[i] = v; g2[i] += s * v)
        else MASKED_LOOP(g[i] = v; g2[i] = s * v)
    }
#undef MASKED_LOOP
}

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
    const bool relu = l->fused_relu != NULL;
    add_args a = {l->inputs[0]->y, l->inputs[1]->y, relu ? l->fused_relu->y : l->y, p->scale};
    parallel_for(total, 16, 2 * total, ctx->threads, relu ? sum_relu_range : sum_range, &a);
}

/* Backward through a fused ReLU: both inputs get the masked gradient.  The
 * same layer as both inputs gets one buffer: then two passes, so that the
 * second adds to what the first wrote. */
static void add_backward_relu(const pcnn_layer *l, const run_ctx *ctx, float *const dx[2])
{
    const add_priv *p = l->priv;
    const size_t total = shape_size(l->out) * (size_t)ctx->n;
    masked_args a = {l->fused_relu->dy, l->fused_relu->y, dx[0], dx[1], p->scale,
                     l->accumulate_dx[0], l->accumulate_dx[1]};
    if (dx[0] && dx[0] == dx[1]) {
        masked_args first = a, second = a;
        first.out2 = NULL;
        second.out = NULL;
        parallel_for(total, 16, 3 * total, ctx->threads, masked_range, &first);
        parallel_for(total, 16, 3 * total, ctx->threads, masked_range, &second);
        return;
    }
    parallel_for(total, 16, 3 * total, ctx->threads, masked_range, &a);
}

static void add_backward(pcnn_layer *l, const run_ctx *ctx, float *const dx[2])
{
    if (l->fused_relu) {
        add_backward_relu(l, ctx, dx);
        return;
    }
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

static pcnn_status add_twin(const pcnn_layer *l, layer_list *list, pcnn_layer *const *in,
                            twin_opts o, pcnn_layer **out, const char *func)
{
    const add_priv *p = l->priv;
    (void)o;
    return residual_add(list, in[0], in[1], p->scale, out, func);
}

static const layer_ops add_ops = {
    .kind = "add",
    .forward = add_forward,
    .backward = add_backward,
    .describe = add_describe,
    .caps = {.split = LAYER_SPLIT_POINTWISE, .cost = LAYER_COST_ADD, .twin = add_twin},
};

bool layer_is_add(const pcnn_layer *l)
{
    return l->ops == &add_ops;
}

pcnn_status residual_add(layer_list *list, pcnn_layer *a, pcnn_layer *b, float b_scale,
                         pcnn_layer **out, const char *func)
{
    pcnn_layer *ins[2] = {a, b};
    TRY(layer_check_new(list, ins, 2, out, func));
    int index = list->count;
    if (!isfinite(b_scale))
        return error_set(PCNN_ERR_INVALID_ARGUMENT, func,
                         "layer %d (add): b_scale %g must be finite", index, (double)b_scale);
    shape sa = a->out, sb = b->out;
    if (sa.c != sb.c || sa.d != sb.d || sa.h != sb.h || sa.w != sb.w) {
        if (sa.d == 1 && sb.d == 1)
            return error_set(PCNN_ERR_SHAPE, func,
                             "layer %d (add): input shapes (%d, %d, %d) of layer %d and "
                             "(%d, %d, %d) of layer %d differ",
                             index, sa.c, sa.h, sa.w, a->index, sb.c, sb.h, sb.w, b->index);
        return error_set(PCNN_ERR_SHAPE, func,
                         "layer %d (add): input shapes (%d, %d, %d, %d) of layer %d and "
                         "(%d, %d, %d, %d) of layer %d differ (channels, depth, height, width)",
                         index, sa.c, sa.d, sa.h, sa.w, a->index, sb.c, sb.d, sb.h, sb.w,
                         b->index);
    }
    add_priv *p = mem_calloc(1, sizeof *p);
    if (!p) return error_set(PCNN_ERR_OUT_OF_MEMORY, func, "layer %d (add): no memory", index);
    p->scale = b_scale;
    pcnn_layer *l;
    pcnn_status st = layer_append(list, &add_ops, ins, 2, sa, 0, p, &l);
    if (st != PCNN_OK) {
        mem_free(p);
        return st;
    }
    *out = l;
    return PCNN_OK;
}
