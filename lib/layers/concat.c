/* Concatenation by channels of any number of inputs of equal (D, H, W),
 * as torch.cat(dim=1): U-Net's skip connections.  In the channel-major
 * layout (layer.h) input j's whole batch, channels after channel, is one
 * contiguous run of the output starting at its first channel's offset:
 * forward copies each input there, backward copies (or adds, for a layer
 * that feeds this one twice or feeds others too) each run back. */
#include <stdio.h>

#include "../core/error.h"
#include "../kernels/kernels.h"
#include "layer.h"
#include "layers.h"

static void concat_forward(pcnn_layer *l, const run_ctx *ctx)
{
    const size_t per_channel = (size_t)ctx->n * shape_spatial(l->out);
    size_t at = 0;
    for (int j = 0; j < l->num_inputs; j++) {
        const size_t count = (size_t)l->inputs[j]->out.c * per_channel;
        copy_or_add(l->inputs[j]->y, l->y + at, count, false, ctx->threads);
        at += count;
    }
}

static void concat_backward(pcnn_layer *l, const run_ctx *ctx, float *const dx[])
{
    const size_t per_channel = (size_t)ctx->n * shape_spatial(l->out);
    size_t at = 0;
    for (int j = 0; j < l->num_inputs; j++) {
        const size_t count = (size_t)l->inputs[j]->out.c * per_channel;
        if (dx[j]) copy_or_add(l->dy + at, dx[j], count, l->accumulate_dx[j], ctx->threads);
        at += count;
    }
}

static void concat_describe(const pcnn_layer *l, char *buf, size_t size)
{
    snprintf(buf, size, "%d inputs", l->num_inputs);
}

/* Its twin on a box: a concat of the inputs' twins (layer_caps.h). */
static pcnn_status concat_twin(const pcnn_layer *l, layer_list *list, pcnn_layer *const *in,
                               twin_opts o, pcnn_layer **out, const char *func)
{
    (void)o;
    return concat_add(list, in, l->num_inputs, out, func);
}

static const layer_ops concat_ops = {
    .kind = "concat",
    .forward = concat_forward,
    .backward = concat_backward,
    .describe = concat_describe,
    /* reads and writes each value once: priced as a stream of its output */
    .caps = {.split = LAYER_SPLIT_POINTWISE, .cost = LAYER_COST_STREAM, .twin = concat_twin},
};

pcnn_status concat_add(layer_list *list, pcnn_layer *const *inputs, int count,
                       pcnn_layer **out, const char *func)
{
    const int idx = list->count;
    ADD_REQUIRE(inputs != NULL, PCNN_ERR_INVALID_ARGUMENT, "layer %d (concat): inputs is NULL",
                idx);
    ADD_REQUIRE(count >= 1 && count <= LAYER_MAX_INPUTS, PCNN_ERR_INVALID_ARGUMENT,
                "layer %d (concat): count %d must be in [1, %d]", idx, count, LAYER_MAX_INPUTS);
    TRY(layer_check_new(list, inputs, count, out, func));
    const shape s0 = inputs[0]->out;
    long long channels = 0;
    for (int j = 0; j < count; j++) {
        const shape s = inputs[j]->out;
        if (s.d != s0.d || s.h != s0.h || s.w != s0.w)
            return ADD_FAIL(PCNN_ERR_SHAPE,
                            "layer %d (concat): input %d (layer %d) is %dx%dx%d (depth, height, "
                            "width), input 0 (layer %d) %dx%dx%d: only channels may differ",
                            idx, j, inputs[j]->index, s.d, s.h, s.w, inputs[0]->index, s0.d,
                            s0.h, s0.w);
        channels += s.c;
    }
    ADD_REQUIRE(channels * (long long)shape_spatial(s0) <= (1LL << 40), PCNN_ERR_SHAPE,
                "layer %d (concat): %lld channels of %zu values is too large", idx, channels,
                shape_spatial(s0));
    const shape o = {(int)channels, s0.d, s0.h, s0.w};
    pcnn_layer *l = NULL;
    TRY(layer_append(list, &concat_ops, inputs, count, o, 0, NULL, &l));
    *out = l;
    return PCNN_OK;
}
