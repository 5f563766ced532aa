/* Global average pooling (C, H, W) -> (C, 1, 1).  In CNHW each (c, n) plane
 * is contiguous and becomes the single output element y[c*N + n]. */
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../graph/net.h"
#include "layer.h"

#define PAR_MIN 16384

static void gap_forward(pcnn_layer *l, const run_ctx *ctx)
{
    const pcnn_layer *in = l->inputs[0];
    const int planes = in->out.c * ctx->n;
    const size_t plane = shape_spatial(in->out);
    const float *x = in->y;
    float *y = l->y;
    const double scale = 1.0 / (double)plane;
    const int par = (size_t)planes * plane >= PAR_MIN && ctx->threads > 1;

    /* Each plane summed by one thread in double: deterministic and accurate. */
#pragma omp parallel for schedule(static) num_threads(ctx->threads) if (par)
    for (int pl = 0; pl < planes; pl++) {
        const float *xp = x + (size_t)pl * plane;
        double s = 0.0;
        for (size_t i = 0; i < plane; i++) s += xp[i];
        y[pl] = (float)(s * scale);
    }
}

static void gap_backward(pcnn_layer *l, const run_ctx *ctx, float *const dx[2])
{
    if (dx[0] == NULL) return;
    const pcnn_layer *in = l->inputs[0];
    const int planes = in->out.c * ctx->n;
    const size_t plane = shape_spatial(in->out);
    const float *dy = l->dy;
    float *d = dx[0];
    const bool acc = l->accumulate_dx[0];
    const float scale = 1.0f / (float)plane;
    const int par = (size_t)planes * plane >= PAR_MIN && ctx->threads > 1;

#pragma omp parallel for schedule(static) num_threads(ctx->threads) if (par)
    for (int pl = 0; pl < planes; pl++) {
        float *dp = d + (size_t)pl * plane;
        const float g = dy[pl] * scale;
        if (acc) {
            for (size_t i = 0; i < plane; i++) dp[i] += g;
        } else {
            for (size_t i = 0; i < plane; i++) dp[i] = g;
        }
    }
}

static const layer_ops gap_ops = {
    .kind = "global_avgpool",
    .forward = gap_forward,
    .backward = gap_backward,
};

PCNN_API pcnn_status pcnn_global_avgpool(pcnn_net *net, pcnn_layer *in, pcnn_layer **out)
{
    TRY(layer_check_new(net, &in, 1, out, __func__));
    REQUIRE(in->out.d == 1, PCNN_ERR_SHAPE, "layer %d (global_avgpool): input is 3D (depth %d)",
            net->num_layers, in->out.d);
    pcnn_layer *l = NULL;
    TRY(layer_append(net, &gap_ops, &in, 1, shape_2d(in->out.c, 1, 1), 0, NULL, &l));
    *out = l;
    return PCNN_OK;
}
