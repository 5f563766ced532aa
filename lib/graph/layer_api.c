/* The public layer constructors: each checks the network handle and lets
 * its kind's adder (layers/layers.h) append the layer to the network's
 * list, under the constructor's own name in messages. */
#include "../core/error.h"
#include "../layers/layers.h"
#include "net.h"

PCNN_API pcnn_status pcnn_net_input(pcnn_net *net, int channels, int height, int width,
                                    pcnn_layer **out)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    return input_add(&net->layers, channels, 1, height, width, out, __func__);
}

PCNN_API pcnn_status pcnn_net_input3d(pcnn_net *net, int channels, int depth, int height,
                                      int width, pcnn_layer **out)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    return input_add(&net->layers, channels, depth, height, width, out, __func__);
}

PCNN_API pcnn_status pcnn_conv2d(pcnn_net *net, pcnn_layer *in, int out_channels, int kernel,
                                 int stride, int padding, int bias, pcnn_layer **out)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    return conv2d_add(&net->layers, in, out_channels, kernel, stride, padding, bias, out,
                      __func__);
}

PCNN_API pcnn_status pcnn_maxpool2d(pcnn_net *net, pcnn_layer *in, int kernel, int stride,
                                    int padding, pcnn_layer **out)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    return maxpool2d_add(&net->layers, in, kernel, stride, padding, out, __func__);
}

PCNN_API pcnn_status pcnn_avgpool2d(pcnn_net *net, pcnn_layer *in, int kernel, int stride,
                                    int padding, pcnn_layer **out)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    return avgpool2d_add(&net->layers, in, kernel, stride, padding, out, __func__);
}

PCNN_API pcnn_status pcnn_conv3d(pcnn_net *net, pcnn_layer *in, int out_channels, int kernel,
                                 int stride, int padding, int bias, pcnn_layer **out)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    return conv3d_add(&net->layers, in, out_channels, kernel, stride, padding, bias, out,
                      __func__);
}

PCNN_API pcnn_status pcnn_maxpool3d(pcnn_net *net, pcnn_layer *in, int kernel, int stride,
                                    int padding, pcnn_layer **out)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    return maxpool3d_add(&net->layers, in, kernel, stride, padding, out, __func__);
}

PCNN_API pcnn_status pcnn_avgpool3d(pcnn_net *net, pcnn_layer *in, int kernel, int stride,
                                    int padding, pcnn_layer **out)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    return avgpool3d_add(&net->layers, in, kernel, stride, padding, out, __func__);
}

PCNN_API pcnn_status pcnn_global_avgpool(pcnn_net *net, pcnn_layer *in, pcnn_layer **out)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    return global_avgpool_add(&net->layers, in, out, __func__);
}

PCNN_API pcnn_status pcnn_dense(pcnn_net *net, pcnn_layer *in, int out_features, int bias,
                                pcnn_layer **out)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    return dense_add(&net->layers, in, out_features, bias, out, __func__);
}

PCNN_API pcnn_status pcnn_flatten(pcnn_net *net, pcnn_layer *in, pcnn_layer **out)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    return flatten_add(&net->layers, in, out, __func__);
}

PCNN_API pcnn_status pcnn_relu(pcnn_net *net, pcnn_layer *in, pcnn_layer **out)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    return relu_add(&net->layers, in, out, __func__);
}

PCNN_API pcnn_status pcnn_leaky_relu(pcnn_net *net, pcnn_layer *in, float slope,
                                     pcnn_layer **out)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    return leaky_relu_add(&net->layers, in, slope, out, __func__);
}

PCNN_API pcnn_status pcnn_batchnorm(pcnn_net *net, pcnn_layer *in, float eps, float momentum,
                                    pcnn_layer **out)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    return batchnorm_add(&net->layers, in, eps, momentum, out, __func__);
}

PCNN_API pcnn_status pcnn_dropout(pcnn_net *net, pcnn_layer *in, float p, pcnn_layer **out)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    return dropout_add(&net->layers, in, p, out, __func__);
}

PCNN_API pcnn_status pcnn_add(pcnn_net *net, pcnn_layer *a, pcnn_layer *b, pcnn_layer **out)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    return residual_add(&net->layers, a, b, 1.0f, out, __func__);
}

PCNN_API pcnn_status pcnn_add_scaled(pcnn_net *net, pcnn_layer *a, pcnn_layer *b,
                                     float b_scale, pcnn_layer **out)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    return residual_add(&net->layers, a, b, b_scale, out, __func__);
}

PCNN_API pcnn_status pcnn_pixel_shuffle(pcnn_net *net, pcnn_layer *in, int upscale,
                                        pcnn_layer **out)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    return pixel_shuffle_add(&net->layers, in, upscale, out, __func__);
}

PCNN_API pcnn_status pcnn_sigmoid(pcnn_net *net, pcnn_layer *in, pcnn_layer **out)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    return sigmoid_add(&net->layers, in, out, __func__);
}

PCNN_API pcnn_status pcnn_tanh(pcnn_net *net, pcnn_layer *in, pcnn_layer **out)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    return tanh_add(&net->layers, in, out, __func__);
}

PCNN_API pcnn_status pcnn_upsample2d(pcnn_net *net, pcnn_layer *in, int factor,
                                     pcnn_upsample_mode mode, pcnn_layer **out)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    return upsample2d_add(&net->layers, in, factor, (int)mode, out, __func__);
}

PCNN_API pcnn_status pcnn_upsample3d(pcnn_net *net, pcnn_layer *in, int factor,
                                     pcnn_upsample_mode mode, pcnn_layer **out)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    return upsample3d_add(&net->layers, in, factor, (int)mode, out, __func__);
}

PCNN_API pcnn_status pcnn_conv_transpose2d(pcnn_net *net, pcnn_layer *in, int out_channels,
                                           int kernel, int stride, int padding,
                                           int output_padding, int bias, pcnn_layer **out)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    return conv_transpose2d_add(&net->layers, in, out_channels, kernel, stride, padding,
                                output_padding, bias, out, __func__);
}

PCNN_API pcnn_status pcnn_conv_transpose3d(pcnn_net *net, pcnn_layer *in, int out_channels,
                                           int kernel, int stride, int padding,
                                           int output_padding, int bias, pcnn_layer **out)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    return conv_transpose3d_add(&net->layers, in, out_channels, kernel, stride, padding,
                                output_padding, bias, out, __func__);
}

PCNN_API pcnn_status pcnn_concat(pcnn_net *net, pcnn_layer *const *inputs, int count,
                                 pcnn_layer **out)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    return concat_add(&net->layers, inputs, count, out, __func__);
}
