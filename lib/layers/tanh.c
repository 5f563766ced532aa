/* The hyperbolic tangent y = tanh(x), element-wise (outputs in (-1, 1),
 * fields scaled to that range).  Backward reads the output only:
 * dy/dx = 1 - y^2. */
#include <math.h>

#include "../kernels/kernels.h"
#include "layer.h"
#include "layers.h"

typedef struct tanh_args {
    const float *x;  /* forward: input; backward: this layer's output y */
    const float *dy; /* backward only */
    float *out;      /* forward: y; backward: the input's gradient */
    bool acc;        /* backward: add into out */
} tanh_args;

static void tanh_fwd(void *arg, size_t lo, size_t hi)
{
    const tanh_args *a = arg;
    const float *restrict x = a->x;
    float *restrict y = a->out;
    for (size_t i = lo; i < hi; i++) y[i] = tanhf(x[i]);
}

VECTOR_CLONES static void tanh_bwd(void *arg, size_t lo, size_t hi)
{
    const tanh_args *a = arg;
    const float *restrict y = a->x, *restrict dy = a->dy;
    float *restrict g = a->out;
    if (a->acc)
        for (size_t i = lo; i < hi; i++) g[i] += dy[i] * (1.0f - y[i] * y[i]);
    else
        for (size_t i = lo; i < hi; i++) g[i] = dy[i] * (1.0f - y[i] * y[i]);
}

static void tanh_forward(pcnn_layer *l, const run_ctx *ctx)
{
    const size_t total = shape_size(l->out) * (size_t)ctx->n;
    tanh_args a = {.x = l->inputs[0]->y, .out = l->y};
    parallel_for(total, 16, 8 * total, ctx->threads, tanh_fwd, &a);
}

static void tanh_backward(pcnn_layer *l, const run_ctx *ctx, float *const dx[2])
{
    if (!dx[0]) return;
    const size_t total = shape_size(l->out) * (size_t)ctx->n;
    tanh_args a = {.x = l->y, .dy = l->dy, .out = dx[0], .acc = l->accumulate_dx[0]};
    parallel_for(total, 16, total, ctx->threads, tanh_bwd, &a);
}

/* Its twin on a box: the same kind, fed by the box (layer_caps.h). */
static pcnn_status tanh_twin(const pcnn_layer *l, layer_list *list, pcnn_layer *const *in,
                             twin_opts o, pcnn_layer **out, const char *func)
{
    (void)l, (void)o;
    return tanh_add(list, in[0], out, func);
}

static const layer_ops tanh_ops = {
    .kind = "tanh",
    .forward = tanh_forward,
    .backward = tanh_backward,
    .caps = {.split = LAYER_SPLIT_POINTWISE, .cost = LAYER_COST_STREAM, .twin = tanh_twin},
};

pcnn_status tanh_add(layer_list *list, pcnn_layer *in, pcnn_layer **out, const char *func)
{
    TRY(layer_check_new(list, &in, 1, out, func));
    pcnn_layer *l;
    TRY(layer_append(list, &tanh_ops, &in, 1, in->out, 0, NULL, &l));
    *out = l;
    return PCNN_OK;
}
