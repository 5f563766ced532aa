/* The adders: each appends one layer of its kind to a layer list after
 * checking its configuration against its input.  The public constructors
 * (pcnn_conv2d, ... in graph/layer_api.c) check the network handle and
 * call them with their own name as `func`, which every message of the
 * adder names (as if the public function had failed itself).  On failure
 * *out is untouched. */
#ifndef PCNN_LAYERS_LAYERS_H
#define PCNN_LAYERS_LAYERS_H

#include "../core/error.h"
#include "layer.h"

/* FAIL and REQUIRE for adders: the message names `func`, not the adder. */
#define ADD_FAIL(status, ...) error_set((status), func, __VA_ARGS__)
#define ADD_REQUIRE(cond, status, ...)                                                \
    do {                                                                              \
        if (!(cond)) return ADD_FAIL((status), __VA_ARGS__);                          \
    } while (0)

/* The network's input: (channels, depth, height, width) samples, depth 1
 * for 2D networks; only as layer 0. */
pcnn_status input_add(layer_list *list, int channels, int depth, int height, int width,
                      pcnn_layer **out, const char *func);

/* Convolution: kernel x kernel, stride, zero padding >= 0, optional bias;
 * 2D inputs only. */
pcnn_status conv2d_add(layer_list *list, pcnn_layer *in, int out_channels, int kernel,
                       int stride, int padding, int bias, pcnn_layer **out, const char *func);

/* Max and average pooling (padding <= kernel / 2). */
pcnn_status maxpool2d_add(layer_list *list, pcnn_layer *in, int kernel, int stride, int padding,
                          pcnn_layer **out, const char *func);
pcnn_status avgpool2d_add(layer_list *list, pcnn_layer *in, int kernel, int stride, int padding,
                          pcnn_layer **out, const char *func);

/* 3D convolution: kernel^3, stride, zero padding >= 0, optional bias, on
 * (C, D, H, W) inputs (any depth, 1 included). */
pcnn_status conv3d_add(layer_list *list, pcnn_layer *in, int out_channels, int kernel,
                       int stride, int padding, int bias, pcnn_layer **out, const char *func);
/* Largest vol2col matrix, in floats, a 3D convolution builds at once
 * (CONV3D_COL_BUDGET_FLOATS: 64 MiB); above it, it runs in bands of output
 * planes of one sample.  plan_ctx.conv3d_col_budget overrides it per
 * network (tests lower it to compare banded with whole-batch results). */
#define CONV3D_COL_BUDGET_FLOATS ((size_t)16 << 20)

/* Max and average 3D pooling over kernel^3 windows (padding <= kernel / 2). */
pcnn_status maxpool3d_add(layer_list *list, pcnn_layer *in, int kernel, int stride, int padding,
                          pcnn_layer **out, const char *func);
pcnn_status avgpool3d_add(layer_list *list, pcnn_layer *in, int kernel, int stride, int padding,
                          pcnn_layer **out, const char *func);

/* The mean of each channel: (C, D, H, W) -> (C, 1, 1, 1). */
pcnn_status global_avgpool_add(layer_list *list, pcnn_layer *in, pcnn_layer **out,
                               const char *func);

/* Fully connected: out_features outputs, optional bias. */
pcnn_status dense_add(layer_list *list, pcnn_layer *in, int out_features, int bias,
                      pcnn_layer **out, const char *func);

/* (C, D, H, W) -> (C * D * H * W, 1, 1, 1), PyTorch's flatten order. */
pcnn_status flatten_add(layer_list *list, pcnn_layer *in, pcnn_layer **out, const char *func);

/* ReLU, and the leaky ReLU with slope >= 0 for negative inputs. */
pcnn_status relu_add(layer_list *list, pcnn_layer *in, pcnn_layer **out, const char *func);
pcnn_status leaky_relu_add(layer_list *list, pcnn_layer *in, float slope, pcnn_layer **out,
                           const char *func);

/* The logistic sigmoid and the hyperbolic tangent, element-wise. */
pcnn_status sigmoid_add(layer_list *list, pcnn_layer *in, pcnn_layer **out, const char *func);
pcnn_status tanh_add(layer_list *list, pcnn_layer *in, pcnn_layer **out, const char *func);

/* Batch normalisation with learned scale and shift. */
pcnn_status batchnorm_add(layer_list *list, pcnn_layer *in, float eps, float momentum,
                          pcnn_layer **out, const char *func);

/* Inverted dropout with drop probability p in [0, 1). */
pcnn_status dropout_add(layer_list *list, pcnn_layer *in, float p, pcnn_layer **out,
                        const char *func);

/* The residual sum a + b_scale * b of two layers of equal shape. */
pcnn_status residual_add(layer_list *list, pcnn_layer *a, pcnn_layer *b, float b_scale,
                         pcnn_layer **out, const char *func);

/* Sub-pixel upscaling: (C * r^2, H, W) -> (C, H * r, W * r); 2D inputs only. */
pcnn_status pixel_shuffle_add(layer_list *list, pcnn_layer *in, int upscale, pcnn_layer **out,
                              const char *func);

/* Upsampling by an integer factor along H, W (2D) or D, H, W (3D); mode
 * PCNN_UPSAMPLE_NEAREST or PCNN_UPSAMPLE_LINEAR (align_corners=False). */
pcnn_status upsample2d_add(layer_list *list, pcnn_layer *in, int factor, int mode,
                           pcnn_layer **out, const char *func);
pcnn_status upsample3d_add(layer_list *list, pcnn_layer *in, int factor, int mode,
                           pcnn_layer **out, const char *func);

/* Transposed convolutions (square / cubic kernel, stride, padding,
 * 0 <= output_padding < stride, optional bias). */
pcnn_status conv_transpose2d_add(layer_list *list, pcnn_layer *in, int out_channels,
                                 int kernel, int stride, int padding, int output_padding,
                                 int bias, pcnn_layer **out, const char *func);
pcnn_status conv_transpose3d_add(layer_list *list, pcnn_layer *in, int out_channels,
                                 int kernel, int stride, int padding, int output_padding,
                                 int bias, pcnn_layer **out, const char *func);

/* Concatenation by channels of count (1..LAYER_MAX_INPUTS) layers whose
 * (D, H, W) agree, in the order given. */
pcnn_status concat_add(layer_list *list, pcnn_layer *const *inputs, int count,
                       pcnn_layer **out, const char *func);

#endif
