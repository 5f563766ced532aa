/* The logistic sigmoid y = 1 / (1 + exp(-x)), element-wise (segmentation
 * and bounded-field outputs).  Backward reads the output only:
 * dy/dx = y (1 - y).  The two-sided form never overflows exp: for x < 0
 * it computes e / (1 + e) with e = exp(x) <= 1. */
#include <math.h>

#include "../kernels/kernels.h"
#include "layer.h"
#include "layers.h"

typedef struct sig_args {
    const float *x;  /* forward: input; backward: this layer's output y */
    const float *dy; /* backward only */
    float *out;      /* forward: y; backward: the input's gradient */
    bool acc;        /* backward: add into out */
} sig_args;

static void sigmoid_fwd(void *arg, size_t lo, size_t hi)
{
    const sig_args *a = arg;
    const float *restrict x = a->x;
    float *restrict y = a->out;
    for (size_t i = lo; i < hi; i++) {
        const float v = x[i];
        if (v >= 0.0f) {
            y[i] = 1.0f / (1.0f + expf(-v));
        } else {
            const float e = expf(v);
            y[i] = e / (1.0f + e);
        }
    }
}

VECTOR_CLONES static void sigmoid_bwd(void *arg, size_t lo, size_t hi)
{
    const sig_args *a = arg;
    const float *restrict y = a->x, *restrict dy = a->dy;
    float *restrict g = a->out;
    if (a->acc)
        for (size_t i = lo; i < hi; i++) g[i] += dy[i] * (y[i] * (1.0f - y[i]));
    else
        for (size_t i = lo; i < hi; i++) g[i] = dy[i] * (y[i] * (1.0f - y[i]));
}

static void sigmoid_forward(pcnn_layer *l, const run_ctx *ctx)
{
    const size_t total = shape_size(l->out) * (size_t)ctx->n;
    sig_args a = {.x = l->inputs[0]->y, .out = l->y};
    parallel_for(total, 16, 8 * total, ctx->threads, sigmoid_fwd, &a);
}

static void sigmoid_backward(pcnn_layer *l, const run_ctx *ctx, float *const dx[2])
{
    if (!dx[0]) return;
    const size_t total = shape_size(l->out) * (size_t)ctx->n;
    sig_args a = {.x = l->y, .dy = l->dy, .out = dx[0], .acc = l->accumulate_dx[0]};
    parallel_for(total, 16, total, ctx->threads, sigmoid_bwd, &a);
}

/* Its twin on a box: the same kind, fed by the box (layer_caps.h). */
static pcnn_status sigmoid_twin(const pcnn_layer *l, layer_list *list, pcnn_layer *const *in,
                                twin_opts o, pcnn_layer **out, const char *func)
{
    (void)l, (void)o;
    return sigmoid_add(list, in[0], out, func);
}

static const layer_ops sigmoid_ops = {
    .kind = "sigmoid",
    .forward = sigmoid_forward,
    .backward = sigmoid_backward,
    .caps = {.split = LAYER_SPLIT_POINTWISE, .cost = LAYER_COST_STREAM, .twin = sigmoid_twin},
};

pcnn_status sigmoid_add(layer_list *list, pcnn_layer *in, pcnn_layer **out, const char *func)
{
    TRY(layer_check_new(list, &in, 1, out, func));
    pcnn_layer *l;
    TRY(layer_append(list, &sigmoid_ops, &in, 1, in->out, 0, NULL, &l));
    *out = l;
    return PCNN_OK;
}
