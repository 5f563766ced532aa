#define PCNN_EXPERIMENTAL /* the 3D calls: pcnn.h section 9 */
#include "models.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static pcnn_layer *conv(builder *b, pcnn_layer *in, int cout, int k, int s, int p, int bias)
{
    int cin, ho, wo;
    pcnn_layer *l;
    CHECK(pcnn_layer_output_shape(in, &cin, NULL, NULL));
    CHECK(pcnn_conv2d(b->net, in, cout, k, s, p, bias, &l));
    CHECK(pcnn_layer_output_shape(l, NULL, &ho, &wo));
    b->flops += 2.0 * cout * ho * wo * (double)cin * k * k;
    return l;
}

static pcnn_layer *dense(builder *b, pcnn_layer *in, int out)
{
    int c, d, h, w;
    pcnn_layer *l;
    CHECK(pcnn_layer_output_shape3d(in, &c, &d, &h, &w));
    CHECK(pcnn_dense(b->net, in, out, 1, &l));
    if (b->dense_exchange)
        CHECK(pcnn_layer_set_exchange(l, (pcnn_exchange)(b->dense_exchange - 1)));
    b->flops += 2.0 * out * (double)c * d * h * w;
    return l;
}

/* 3D convolution, cubic kernel. */
static pcnn_layer *conv3d(builder *b, pcnn_layer *in, int cout, int k, int s, int p)
{
    int cin, d, h, w;
    pcnn_layer *l;
    CHECK(pcnn_layer_output_shape3d(in, &cin, NULL, NULL, NULL));
    CHECK(pcnn_conv3d(b->net, in, cout, k, s, p, 1, &l));
    CHECK(pcnn_layer_output_shape3d(l, NULL, &d, &h, &w));
    b->flops += 2.0 * cout * (double)d * h * w * cin * k * k * k;
    return l;
}

/* nn.LeakyReLU's default slope. */
static pcnn_layer *leaky(builder *b, pcnn_layer *in)
{
    pcnn_layer *l;
    CHECK(pcnn_leaky_relu(b->net, in, 0.01f, &l));
    return l;
}

/* nn.AvgPool3d(2): kernel 2, stride 2. */
static pcnn_layer *avgpool3d(builder *b, pcnn_layer *in)
{
    pcnn_layer *l;
    CHECK(pcnn_avgpool3d(b->net, in, 2, 2, 0, &l));
    return l;
}

static pcnn_layer *relu(builder *b, pcnn_layer *in)
{
    pcnn_layer *l;
    CHECK(pcnn_relu(b->net, in, &l));
    return l;
}

static pcnn_layer *maxpool(builder *b, pcnn_layer *in)
{
    pcnn_layer *l;
    CHECK(pcnn_maxpool2d(b->net, in, 2, 2, 0, &l));
    return l;
}

/* PyTorch's BatchNorm2d defaults. */
static pcnn_layer *bn(builder *b, pcnn_layer *in)
{
    pcnn_layer *l;
    CHECK(pcnn_batchnorm(b->net, in, 1e-5f, 0.1f, &l));
    return l;
}

static pcnn_layer *lenet(builder *b, pcnn_layer *x)
{
    x = maxpool(b, relu(b, conv(b, x, 6, 5, 1, 2, 1)));
    x = maxpool(b, relu(b, conv(b, x, 16, 5, 1, 0, 1)));
    x = relu(b, dense(b, x, 120));
    x = relu(b, dense(b, x, 84));
    return dense(b, x, 10);
}

/* CIFAR basic block; option B: 1x1 conv + BN shortcut when the shape
 * changes, identity otherwise. */
static pcnn_layer *basic_block(builder *b, pcnn_layer *x, int cin, int cout, int stride)
{
    pcnn_layer *y = relu(b, bn(b, conv(b, x, cout, 3, stride, 1, 0)));
    y = bn(b, conv(b, y, cout, 3, 1, 1, 0));
    pcnn_layer *sc = x;
    if (stride != 1 || cin != cout) sc = bn(b, conv(b, x, cout, 1, stride, 0, 0));
    pcnn_layer *sum;
    CHECK(pcnn_add(b->net, y, sc, &sum));
    return relu(b, sum);
}

static pcnn_layer *resnet20(builder *b, pcnn_layer *x)
{
    x = relu(b, bn(b, conv(b, x, 16, 3, 1, 1, 0)));
    int cin = 16;
    static const int stages[3][2] = {{16, 1}, {32, 2}, {64, 2}};
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < 3; i++) {
            x = basic_block(b, x, cin, stages[s][0], i == 0 ? stages[s][1] : 1);
            cin = stages[s][0];
        }
    CHECK(pcnn_global_avgpool(b->net, x, &x));
    return dense(b, x, 10);
}

static pcnn_layer *vgg11(builder *b, pcnn_layer *x)
{
    static const int cfg[] = {64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0};
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++)
        x = cfg[i] ? relu(b, conv(b, x, cfg[i], 3, 1, 1, 1)) : maxpool(b, x);
    x = relu(b, dense(b, x, 512));
    return dense(b, x, 10);
}

/* EDSR-mini: 8 residual blocks x + 0.1 * conv(relu(conv(x))), then x2
 * upsampling by pixel shuffle. */
static pcnn_layer *edsr(builder *b, pcnn_layer *x)
{
    x = conv(b, x, 64, 3, 1, 1, 1);
    for (int i = 0; i < 8; i++) {
        pcnn_layer *r = conv(b, relu(b, conv(b, x, 64, 3, 1, 1, 1)), 64, 3, 1, 1, 1);
        CHECK(pcnn_add_scaled(b->net, x, r, 0.1f, &x));
    }
    x = conv(b, x, 256, 3, 1, 1, 1);
    CHECK(pcnn_pixel_shuffle(b->net, x, 2, &x));
    return conv(b, x, 3, 3, 1, 1, 1);
}

/* CosmoFlow-mini on 4 x 32^3 volumes: three conv3d (3^3, "same") + leaky
 * ReLU + average pooling 2, then dense 4096 -> 256 -> 4, MSE. */
static pcnn_layer *cosmoflow(builder *b, pcnn_layer *x)
{
    x = avgpool3d(b, leaky(b, conv3d(b, x, 16, 3, 1, 1)));
    x = avgpool3d(b, leaky(b, conv3d(b, x, 32, 3, 1, 1)));
    x = avgpool3d(b, leaky(b, conv3d(b, x, 64, 3, 1, 1)));
    x = leaky(b, dense(b, x, 256));
    return dense(b, x, 4);
}

static const model models[] = {
    {"lenet", 1, 1, 28, 28, 64, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY, lenet},
    {"resnet20", 3, 1, 32, 32, 128, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY, resnet20},
    {"vgg11", 3, 1, 32, 32, 64, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY, vgg11},
    {"edsr", 3, 1, 48, 48, 16, PCNN_LOSS_L1, edsr},
    {"cosmoflow", 4, 32, 32, 32, 4, PCNN_LOSS_MSE, cosmoflow},
};

const model *model_find(const char *name)
{
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        if (!strcmp(models[i].name, name)) return &models[i];
    return NULL;
}

/* splitmix64 and Box-Muller: reproducible synthetic data. */
static uint64_t rng = 0x9E3779B97F4A7C15ULL;
uint64_t next_u64(void)
{
    uint64_t z = (rng += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
double uniform(void) { return ((double)(next_u64() >> 11) + 0.5) * 0x1.0p-53; }
void randn(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform()));
}
