/* ReLU and leaky ReLU, element-wise.  Backward reads the output y: for
 * both, y > 0 exactly when x > 0, and the gradient at x == 0 is the
 * negative side's (0 for ReLU, slope for leaky), as in PyTorch.
 *
 * The loops load unconditionally and select against zero (pos + slope *
 * neg), the only shapes GCC vectorises under the default -ftrapping-math;
 * the results are exact: one side of each sum is zero. */
#include <math.h>
#include <stdio.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../kernels/kernels.h"
#include "layer.h"
#include "layers.h"

typedef struct act_priv {
    float slope; /* 0 for ReLU */
} act_priv;

static float act_slope(const pcnn_layer *l)
{
    const act_priv *a = l->priv;
    return a ? a->slope : 0.0f;
}

/* The element-wise passes, over [lo, hi) of the batch.  Pointers of one
 * call never alias: every layer has its own output, and the planner gives a
 * layer's dy and its input's dy different buffers (their lifetimes overlap). */
typedef struct act_args {
    const float *x;  /* forward: input; backward: this layer's output y */
    const float *dy; /* backward only */
    float *out;      /* forward: y; backward: the input's gradient */
    float slope;
} act_args;

VECTOR_CLONES static void relu_fwd(void *arg, size_t lo, size_t hi)
{
    const act_args *a = arg;
    const float *restrict x = a->x;
    float *restrict y = a->out;
    /* x < 0 ? 0 : x lets NaN through, as torch.relu does. */
    for (size_t i = lo; i < hi; i++) y[i] = x[i] < 0.0f ? 0.0f : x[i];
}

VECTOR_CLONES static void leaky_fwd(void *arg, size_t lo, size_t hi)
{
    const act_args *a = arg;
    const float *restrict x = a->x;
    float *restrict y = a->out;
    const float slope = a->slope;
    for (size_t i = lo; i < hi; i++) {
        float v = x[i], pos = v > 0.0f ? v : 0.0f, neg = v > 0.0f ? 0.0f : v;
        y[i] = pos + neg * slope;
    }
}

VECTOR_CLONES static void relu_bwd(void *arg, size_t lo, size_t hi)
{
    const act_args *a = arg;
    const float *restrict y = a->x, *restrict dy = a->dy;
    float *restrict g = a->out;
    for (size_t i = lo; i < hi; i++) {
        float d = dy[i];
        g[i] = y[i] > 0.0f ? d : 0.0f;
    }
}

VECTOR_CLONES static void relu_bwd_acc(void *arg, size_t lo, size_t hi)
{
    const act_args *a = arg;
    const float *restrict y = a->x, *restrict dy = a->dy;
    float *restrict g = a->out;
    for (size_t i = lo; i < hi; i++) {
        float d = dy[i];
        g[i] += y[i] > 0.0f ? d : 0.0f;
    }
}

VECTOR_CLONES static void leaky_bwd(void *arg, size_t lo, size_t hi)
{
    const act_args *a = arg;
    const float *restrict y = a->x, *restrict dy = a->dy;
    float *restrict g = a->out;
    const float slope = a->slope;
    for (size_t i = lo; i < hi; i++) {
        float d = dy[i], pos = y[i] > 0.0f ? d : 0.0f, neg = y[i] > 0.0f ? 0.0f : d;
        g[i] = pos + neg * slope;
    }
}

VECTOR_CLONES static void leaky_bwd_acc(void *arg, size_t lo, size_t hi)
{
    const act_args *a = arg;
    const float *restrict y = a->x, *restrict dy = a->dy;
    float *restrict g = a->out;
    const float slope = a->slope;
    for (size_t i = lo; i < hi; i++) {
        float d = dy[i], pos = y[i] > 0.0f ? d : 0.0f, neg = y[i] > 0.0f ? 0.0f : d;
        g[i] += pos + neg * slope;
    }
}

static void act_forward(pcnn_layer *l, const run_ctx *ctx)
{
    if (l->fused_into) return;
    const size_t total = shape_size(l->out) * (size_t)ctx->n;
    act_args a = {.x = l->inputs[0]->y, .out = l->y, .slope = act_slope(l)};
    parallel_for(total, 16, total, ctx->threads, l->priv ? leaky_fwd : relu_fwd, &a);
}

static void act_backward(pcnn_layer *l, const run_ctx *ctx, float *const dx[2])
{
    if (!dx[0] || l->fused_into) return;
    const size_t total = shape_size(l->out) * (size_t)ctx->n;
    act_args a = {.x = l->y, .dy = l->dy, .out = dx[0], .slope = act_slope(l)};
    const bool acc = l->accumulate_dx[0];
    range_fn fn = l->priv ? (acc ? leaky_bwd_acc : leaky_bwd) : (acc ? relu_bwd_acc : relu_bwd);
    parallel_for(total, 16, total, ctx->threads, fn, &a);
}

static void leaky_describe(const pcnn_layer *l, char *buf, size_t size)
{
    snprintf(buf, size, "slope=%.9g", (double)act_slope(l));
}

static pcnn_status relu_twin(const pcnn_layer *l, layer_list *list, pcnn_layer *const *in,
                             twin_opts o, pcnn_layer **out, const char *func)
{
    (void)l, (void)o;
    return relu_add(list, in[0], out, func);
}

static pcnn_status leaky_twin(const pcnn_layer *l, layer_list *list, pcnn_layer *const *in,
                              twin_opts o, pcnn_layer **out, const char *func)
{
    (void)o;
    return leaky_relu_add(list, in[0], act_slope(l), out, func);
}

static const layer_ops relu_ops = {
    .kind = "relu",
    .forward = act_forward,
    .backward = act_backward,
    .caps = {.split = LAYER_SPLIT_POINTWISE, .cost = LAYER_COST_STREAM, .twin = relu_twin},
};

static const layer_ops leaky_ops = {
    .kind = "leaky_relu",
    .forward = act_forward,
    .backward = act_backward,
    .describe = leaky_describe,
    .caps = {.split = LAYER_SPLIT_POINTWISE, .cost = LAYER_COST_STREAM, .twin = leaky_twin},
};

bool layer_is_relu(const pcnn_layer *l)
{
    return l->ops == &relu_ops;
}

pcnn_status relu_add(layer_list *list, pcnn_layer *in, pcnn_layer **out, const char *func)
{
    TRY(layer_check_new(list, &in, 1, out, func));
    pcnn_layer *l;
    TRY(layer_append(list, &relu_ops, &in, 1, in->out, 0, NULL, &l));
    *out = l;
    return PCNN_OK;
}

pcnn_status leaky_relu_add(layer_list *list, pcnn_layer *in, float slope, pcnn_layer **out,
                           const char *func)
{
    TRY(layer_check_new(list, &in, 1, out, func));
    ADD_REQUIRE(isfinite(slope) && slope >= 0.0f, PCNN_ERR_INVALID_ARGUMENT,
                "layer %d (leaky_relu): slope %g must be finite and >= 0", list->count,
                (double)slope);
    act_priv *a = mem_calloc(1, sizeof *a);
    if (!a) return ADD_FAIL(PCNN_ERR_OUT_OF_MEMORY, "layer %d (leaky_relu): no memory",
                            list->count);
    a->slope = slope;
    pcnn_layer *l;
    pcnn_status st = layer_append(list, &leaky_ops, &in, 1, in->out, 0, a, &l);
    if (st != PCNN_OK) {
        mem_free(a);
        return st;
    }
    *out = l;
    return PCNN_OK;
}
