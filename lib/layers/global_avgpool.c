/* Global average pooling (C, H, W) -> (C, 1, 1).  In CNHW each (c, n) plane
 * is contiguous and becomes the single output element y[c*N + n]. */
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../kernels/kernels.h"
#include "layer.h"
#include "layers.h"

typedef struct gap_args {
    const float *src;
    float *dst;
    size_t plane;
    bool acc;
} gap_args;

/* Each plane summed by one thread in double: deterministic and accurate. */
VECTOR_CLONES static void sum_planes(void *arg, size_t u0, size_t u1)
{
    const gap_args *a = arg;
    const double scale = 1.0 / (double)a->plane;
    for (size_t pl = u0; pl < u1; pl++) {
        const float *xp = a->src + pl * a->plane;
        double s = 0.0;
        for (size_t i = 0; i < a->plane; i++) s += xp[i];
        a->dst[pl] = (float)(s * scale);
    }
}

VECTOR_CLONES static void spread_planes(void *arg, size_t u0, size_t u1)
{
    const gap_args *a = arg;
    const float scale = 1.0f / (float)a->plane;
    for (size_t pl = u0; pl < u1; pl++) {
        float *dp = a->dst + pl * a->plane;
        const float g = a->src[pl] * scale;
        if (a->acc) {
            for (size_t i = 0; i < a->plane; i++) dp[i] += g;
        } else {
            for (size_t i = 0; i < a->plane; i++) dp[i] = g;
        }
    }
}

static void gap_forward(pcnn_layer *l, const run_ctx *ctx)
{
    const pcnn_layer *in = l->inputs[0];
    const size_t planes = (size_t)in->out.c * ctx->n, plane = shape_spatial(in->out);
    gap_args a = {in->y, l->y, plane, false};
    parallel_for(planes, 1, planes * plane, ctx->threads, sum_planes, &a);
}

static void gap_backward(pcnn_layer *l, const run_ctx *ctx, float *const dx[2])
{
    if (dx[0] == NULL) return;
    const pcnn_layer *in = l->inputs[0];
    const size_t planes = (size_t)in->out.c * ctx->n, plane = shape_spatial(in->out);
    gap_args a = {l->dy, dx[0], plane, l->accumulate_dx[0]};
    parallel_for(planes, 1, planes * plane, ctx->threads, spread_planes, &a);
}

static pcnn_status gap_twin(const pcnn_layer *l, layer_list *list, pcnn_layer *const *in,
                            twin_opts o, pcnn_layer **out, const char *func)
{
    (void)l, (void)o;
    return global_avgpool_add(list, in[0], out, func);
}

static const layer_ops gap_ops = {
    .kind = "global_avgpool",
    .forward = gap_forward,
    .backward = gap_backward,
    .caps = {.split = LAYER_SPLIT_WHOLE, .cost = LAYER_COST_GLOBAL_AVGPOOL, .twin = gap_twin},
};

pcnn_status global_avgpool_add(layer_list *list, pcnn_layer *in, pcnn_layer **out,
                               const char *func)
{
    TRY(layer_check_new(list, &in, 1, out, func));
    pcnn_layer *l = NULL;
    TRY(layer_append(list, &gap_ops, &in, 1, shape_2d(in->out.c, 1, 1), 0, NULL, &l));
    *out = l;
    return PCNN_OK;
}
