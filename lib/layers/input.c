/* The input layer: holds the batch in CNHW, converted from the caller's
 * NCHW by the graph.  Its dy is the gradient w.r.t. the network input. */
#include "../core/error.h"
#include "../graph/net.h"
#include "layer.h"

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
};

bool layer_is_input(const pcnn_layer *l) { return l->ops == &input_ops; }

PCNN_API pcnn_status pcnn_net_input(pcnn_net *net, int channels, int height, int width,
                                    pcnn_layer **out)
{
    TRY(layer_check_new(net, NULL, 0, out, __func__));
    REQUIRE(net->num_layers == 0, PCNN_ERR_INVALID_STATE, "the network already has an input");
    REQUIRE(channels > 0 && height > 0 && width > 0, PCNN_ERR_INVALID_ARGUMENT,
            "input shape (%d, %d, %d) must be positive", channels, height, width);
    REQUIRE((double)channels * height * width < 2147483647.0, PCNN_ERR_INVALID_ARGUMENT,
            "input shape (%d, %d, %d) has more than 2^31 elements", channels, height, width);
    return layer_append(net, &input_ops, NULL, 0, shape_2d(channels, height, width), 0, NULL,
                        out);
}
