/* CosmoFlow, the 3D CNN of seed 003 (Oyama et al., Table 2; WAVE2_SPEC
 * B.2-B.3), built through the public API for W = 128, 256 and 512 (built,
 * not run: W = 512 needs tens of GiB): every layer's output shape against
 * the table, the parameter count (9,435,328 without FC biases, 2,308 more
 * with), and the forward convolution GFLOP per sample (18.52, 147.9, 1183)
 * computed from the layer shapes.
 *
 * The network: conv 3^3 "same" (stride 1, conv4 stride 2), no conv bias,
 * leaky ReLU after every conv; average pooling 3^3 stride 2 padding 1 after
 * conv1-5, and after conv6 / conv7 only while their output is larger than
 * 2^3 (pool6 / pool7: conv7's output, hence fc1, does not depend on W);
 * flatten; dropout 0.2 before each FC layer, leaky ReLU after fc1 and fc2,
 * 4 outputs, MSE. */
#define PCNN_EXPERIMENTAL /* the 3D calls: pcnn.h section 9 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/expect.h"
#include "pcnn.h"

#define CK(call)                                                                          \
    do {                                                                                  \
        pcnn_status s_ = (call);                                                          \
        if (s_ != PCNN_OK) {                                                              \
            printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, pcnn_last_error()); \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

typedef struct built {
    pcnn_net *net;
    pcnn_layer *layers[40];
    int count;
    double conv_flops; /* forward, per sample */
    size_t params;
} built;

static void add(built *b, pcnn_layer *l)
{
    size_t n;
    CK(pcnn_layer_num_params(l, &n));
    b->params += n;
    b->layers[b->count++] = l;
}

static int depth_of(pcnn_layer *l)
{
    int d;
    CK(pcnn_layer_output_shape3d(l, NULL, &d, NULL, NULL));
    return d;
}

/* conv (3^3, "same", no bias) + leaky ReLU; FLOPs from the shapes:
 * 2 * Do*Ho*Wo * Cout * Cin * 27. */
static pcnn_layer *conv(built *b, pcnn_layer *in, int cout, int stride)
{
    pcnn_layer *c, *r;
    int cin, d, h, w;
    CK(pcnn_layer_output_shape3d(in, &cin, NULL, NULL, NULL));
    CK(pcnn_conv3d(b->net, in, cout, 3, stride, 1, 0, &c));
    CK(pcnn_layer_output_shape3d(c, NULL, &d, &h, &w));
    b->conv_flops += 2.0 * d * h * w * cout * cin * 27;
    add(b, c);
    CK(pcnn_leaky_relu(b->net, c, 0.01f, &r));
    add(b, r);
    return r;
}

static pcnn_layer *pool(built *b, pcnn_layer *in)
{
    pcnn_layer *p;
    CK(pcnn_avgpool3d(b->net, in, 3, 2, 1, &p));
    add(b, p);
    return p;
}

static pcnn_layer *fc(built *b, pcnn_layer *in, int out, int bias, int activation)
{
    pcnn_layer *d, *f, *r;
    CK(pcnn_dropout(b->net, in, 0.2f, &d));
    add(b, d);
    CK(pcnn_dense(b->net, d, out, bias, &f));
    add(b, f);
    if (!activation) return f;
    CK(pcnn_leaky_relu(b->net, f, 0.01f, &r));
    add(b, r);
    return r;
}

static built cosmoflow(int width, int fc_bias)
{
    built b = {0};
    pcnn_layer *x;
    CK(pcnn_net_create(&b.net));
    CK(pcnn_net_input3d(b.net, 4, width, width, width, &x));
    add(&b, x);
    x = pool(&b, conv(&b, x, 16, 1));
    x = pool(&b, conv(&b, x, 32, 1));
    x = pool(&b, conv(&b, x, 64, 1));
    x = pool(&b, conv(&b, x, 128, 2));
    x = pool(&b, conv(&b, x, 256, 1));
    x = conv(&b, x, 256, 1);
    if (depth_of(x) > 2) x = pool(&b, x); /* pool6 */
    x = conv(&b, x, 256, 1);
    if (depth_of(x) > 2) x = pool(&b, x); /* pool7 */
    pcnn_layer *flat;
    CK(pcnn_flatten(b.net, x, &flat));
    add(&b, flat);
    x = fc(&b, flat, 2048, fc_bias, 1);
    x = fc(&b, x, 256, fc_bias, 1);
    x = fc(&b, x, 4, fc_bias, 0);
    CK(pcnn_net_set_loss(b.net, x, PCNN_LOSS_MSE));
    CK(pcnn_net_set_optimizer(b.net, PCNN_OPTIMIZER_ADAM));
    return b;
}

/* The conv and pool output sizes of Table 2, in order of addition. */
static void check_shapes(const built *b, int width)
{
    /* Edge of each conv and pool output (channels after it): conv1, pool1,
     * conv2, pool2, conv3, pool3, conv4, pool4, conv5, pool5, conv6,
     * [pool6], conv7, [pool7]. */
    int edges[14], channels[14], n = 0;
    const int cout[7] = {16, 32, 64, 128, 256, 256, 256};
    int e = width;
    for (int i = 0; i < 7; i++) {
        if (i == 3) e /= 2; /* conv4: stride 2 */
        edges[n] = e, channels[n++] = cout[i];
        if (i < 5 || e > 2) e /= 2, edges[n] = e, channels[n++] = cout[i];
    }
    int k = 0;
    for (int i = 0; i < b->count && k < n; i++) {
        const char *kind;
        int c, d, h, w;
        CK(pcnn_layer_info(b->layers[i], NULL, &kind));
        if (strcmp(kind, "conv3d") && strcmp(kind, "avgpool3d")) continue;
        CK(pcnn_layer_output_shape3d(b->layers[i], &c, &d, &h, &w));
        EXPECT(c == channels[k] && d == edges[k] && h == edges[k] && w == edges[k],
               "W=%d: %s #%d is (%d, %d, %d, %d), Table 2 says (%d, %d^3)", width, kind, k, c, d,
               h, w, channels[k], edges[k]);
        k++;
    }
    EXPECT(k == n, "W=%d: %d conv/pool layers, Table 2 has %d", width, k, n);
    /* pool6 exists from W = 256 on, pool7 at W = 512. */
    EXPECT(n == (width == 128 ? 12 : width == 256 ? 13 : 14), "W=%d: %d conv/pool layers", width,
           n);
    /* conv7 (or pool7) is 256 x 2^3: fc1 has 2048 inputs whatever W. */
    int c, d, h, w;
    CK(pcnn_layer_output_shape3d(b->layers[b->count - 1], &c, &d, &h, &w));
    EXPECT(c == 4 && d == 1 && h == 1 && w == 1, "W=%d: output (%d, %d, %d, %d)", width, c, d, h,
           w);
}

int main(void)
{
    const int widths[3] = {128, 256, 512};
    const double gflop[3] = {18.52, 147.9, 1183};     /* Table 2, as printed */
    const double half_digit[3] = {0.005, 0.05, 0.5}; /* half a unit of the last digit */
    for (int i = 0; i < 3; i++) {
        built b = cosmoflow(widths[i], 0);
        check_shapes(&b, widths[i]);
        EXPECT(b.params == 9435328, "W=%d: %zu parameters without FC biases, expected 9,435,328",
               widths[i], b.params);
        const double g = b.conv_flops / 1e9;
        EXPECT(fabs(g - gflop[i]) <= half_digit[i],
               "W=%d: %.4f forward conv GFLOP per sample, Table 2 says %g", widths[i], g,
               gflop[i]);
        printf("CosmoFlow W=%d: %zu parameters, %.3f forward conv GFLOP/sample (x3 = %.2f)\n",
               widths[i], b.params, g, 3 * g);
        if (widths[i] == 512) {
            /* conv1's output is 2^31 floats per sample: finalize refuses it
             * on one rank, before allocating anything. */
            const pcnn_status st = pcnn_net_finalize(b.net, 1);
            EXPECT(st == PCNN_ERR_SHAPE && strstr(pcnn_last_error(), "exceeds 2^31"),
                   "W=512: finalize gave %s: %s", pcnn_status_str(st), pcnn_last_error());
        }
        pcnn_net_destroy(&b.net);

        built biased = cosmoflow(widths[i], 1);
        EXPECT(biased.params == 9435328 + 2308,
               "W=%d: %zu parameters with FC biases, expected 9,437,636", widths[i],
               biased.params);
        pcnn_net_destroy(&biased.net);
    }
    /* B.3's exact figures at W = 128: 18.516 forward, 55.55 for the three passes. */
    built b = cosmoflow(128, 0);
    EXPECT(fabs(b.conv_flops / 1e9 - 18.516) < 5e-4 && fabs(3 * b.conv_flops / 1e9 - 55.55) < 5e-3,
           "W=128: %.4f GFLOP", b.conv_flops / 1e9);
    pcnn_net_destroy(&b.net);
    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf("CosmoFlow tests passed\n");
    return 0;
}
