/* The input layer: holds the batch in CNHW, converted from the caller's
 * NCHW by the graph.  Its dy is the gradient w.r.t. the network input. */
#include <stdio.h>

#include "../core/error.h"
#include "layer.h"
#include "layers.h"

static void input_forward(pcnn_layer *l, const run_ctx *ctx)
{
    (void)l;
    (void)ctx; /* the graph writes y directly */
}

static void input_backward(pcnn_layer *l, const run_ctx *ctx, float *const dx[2])
{
    (void)l;
    (void)ctx;
    (void)dx;
}

static const layer_ops input_ops = {
    .kind = "input",
    .forward = input_forward,
    .backward = input_backward,
    .caps = {.split = LAYER_SPLIT_POINTWISE, .cost = LAYER_COST_NONE},
};

bool layer_is_input(const pcnn_layer *l) { return l->ops == &input_ops; }

pcnn_status input_add(layer_list *list, int channels, int depth, int height, int width,
                      pcnn_layer **out, const char *func)
{
    TRY(layer_check_new(list, NULL, 0, out, func));
    ADD_REQUIRE(list->count == 0, PCNN_ERR_INVALID_STATE, "the network already has an input");
    char txt[64];
    if (depth == 1)
        snprintf(txt, sizeof txt, "(%d, %d, %d)", channels, height, width);
    else
        snprintf(txt, sizeof txt, "(%d, %d, %d, %d)", channels, depth, height, width);
    ADD_REQUIRE(channels > 0 && depth > 0 && height > 0 && width > 0, PCNN_ERR_INVALID_ARGUMENT,
                "input shape %s must be positive", txt);
    ADD_REQUIRE((double)channels * depth * height * width < 2147483647.0,
                PCNN_ERR_INVALID_ARGUMENT, "input shape %s has more than 2^31 elements", txt);
    const shape s = {channels, depth, height, width};
    return layer_append(list, &input_ops, NULL, 0, s, 0, NULL, out);
}
