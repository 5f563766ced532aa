/* Huge but valid layer arguments run correctly on a one-voxel input: the
 * index arithmetic of im2col / vol2col and the pools must not overflow
 * int where the arguments are near INT_MAX.
 *
 *   - stride INT_MAX with padding 2 (conv2d on the GEMM path, conv3d,
 *     avgpool2d, maxpool2d): the first valid output of a kernel column was
 *     computed as (first + stride - 1) / stride, which wrapped;
 *   - average pools whose K^2 (K = 46341) or K^3 (K = 1291) passes INT_MAX:
 *     the 1/K^n scale came out negative.
 *
 * Each net is input -> pointwise layer (a, b) -> the layer under test, MSE
 * loss, with parameters set by hand: the output is checked against the
 * closed form, and the gradients reaching the pointwise layer (which go
 * back through col2im / col2vol or the pool's backward) against the
 * chain rule: dL/da = dL/db * x. */
#define PCNN_EXPERIMENTAL /* PCNN_OPT_CONV_ALGORITHM */
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "pcnn.h"

static int failures, checks;

static void expect(bool ok, const char *what, double got, double want)
{
    checks++;
    if (!ok) failures++;
    printf("%s %s (got %.9g, want %.9g)\n", ok ? "PASS" : "FAIL", what, got, want);
}

static bool close_to(double got, double want) { return fabs(got - want) <= 1e-6 * fabs(want); }

#define OK(call)                                                                          \
    do {                                                                                  \
        pcnn_status s_ = (call);                                                          \
        if (s_ != PCNN_OK) {                                                              \
            printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, pcnn_last_error());  \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

enum layer_kind { CONV2D, CONV3D, AVGPOOL2D, MAXPOOL2D, AVGPOOL3D };

static const float X = 1.5f, A = 2.0f, B = 0.5f; /* input, pointwise weight and bias */

/* Build, run and check one net. */
static void run(const char *name, enum layer_kind kind, int kernel, int stride, int padding)
{
    const bool three = kind == CONV3D || kind == AVGPOOL3D;
    pcnn_net *net;
    pcnn_layer *in, *pw, *l;
    OK(pcnn_net_create(&net));
    if (three) {
        OK(pcnn_net_input3d(net, 1, 1, 1, 1, &in));
        OK(pcnn_conv3d(net, in, 1, 1, 1, 0, 1, &pw));
    } else {
        OK(pcnn_net_input(net, 1, 1, 1, &in));
        OK(pcnn_conv2d(net, in, 1, 1, 1, 0, 1, &pw));
    }
    switch (kind) {
    case CONV2D: OK(pcnn_conv2d(net, pw, 1, kernel, stride, padding, 1, &l)); break;
    case CONV3D: OK(pcnn_conv3d(net, pw, 1, kernel, stride, padding, 1, &l)); break;
    case AVGPOOL2D: OK(pcnn_avgpool2d(net, pw, kernel, stride, padding, &l)); break;
    case MAXPOOL2D: OK(pcnn_maxpool2d(net, pw, kernel, stride, padding, &l)); break;
    case AVGPOOL3D: OK(pcnn_avgpool3d(net, pw, kernel, stride, padding, &l)); break;
    }
    OK(pcnn_net_set_loss(net, l, PCNN_LOSS_MSE));
    OK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    OK(pcnn_net_set_option(net, PCNN_OPT_CONV_ALGORITHM, 1)); /* im2col + GEMM */
    OK(pcnn_net_finalize(net, 1));
    size_t out = 0;
    OK(pcnn_net_output_size(net, &out));
    if (out != 1) {
        printf("FAIL %s: output of %zu values, want 1\n", name, out);
        failures++;
        pcnn_net_destroy(&net);
        return;
    }

    /* Parameters: a, b, then a convolution's taps 0.01, 0.02, ... and
     * bias 0.25.  The one tap that meets the input is the last: padding 2
     * puts the voxel at the far corner of the only window. */
    size_t np = 0;
    OK(pcnn_net_num_params(net, &np));
    float *params = malloc(np * sizeof *params), *grads = malloc(np * sizeof *grads);
    params[0] = A;
    params[1] = B;
    for (size_t i = 2; i + 1 < np; i++) params[i] = 0.01f * (float)(i - 1);
    if (np > 2) params[np - 1] = 0.25f;
    OK(pcnn_net_set_params(net, params, np));
    const double y1 = (double)A * X + B;
    double want;
    switch (kind) {
    case CONV2D:
    case CONV3D: want = (double)params[np - 2] * y1 + 0.25; break;
    case AVGPOOL2D: want = y1 / ((double)kernel * kernel); break;
    case MAXPOOL2D: want = y1; break;
    default: want = y1 / ((double)kernel * kernel * kernel); break;
    }

    float y = 0.0f, loss = 0.0f, target = -1.0f;
    OK(pcnn_net_predict(net, 1, &X, &y, 1));
    char what[160];
    snprintf(what, sizeof what, "%s: forward", name);
    expect(close_to(y, want), what, y, want);

    OK(pcnn_net_compute_gradients(net, 1, &X, NULL, &target, &loss));
    OK(pcnn_net_get_grads(net, grads, np));
    snprintf(what, sizeof what, "%s: dL/da = dL/db * x through the backward", name);
    expect(grads[1] != 0.0f && close_to(grads[0], (double)grads[1] * X), what, grads[0],
           (double)grads[1] * X);
    if (kind == CONV2D || kind == CONV3D) {
        /* Only the last tap saw a value; its gradient is dL/dy * y1. */
        int stray = 0;
        for (size_t i = 2; i + 2 < np; i++) stray += grads[i] != 0.0f;
        snprintf(what, sizeof what, "%s: dW is zero but on the last tap (%d stray)", name, stray);
        expect(stray == 0 && close_to(grads[np - 2], (double)grads[np - 1] * y1), what,
               grads[np - 2], (double)grads[np - 1] * y1);
    }
    free(params);
    free(grads);
    pcnn_net_destroy(&net);
}

int main(void)
{
    run("conv2d k=3 stride INT_MAX padding 2", CONV2D, 3, INT_MAX, 2);
    run("conv3d k=3 stride INT_MAX padding 2", CONV3D, 3, INT_MAX, 2);
    run("avgpool2d k=5 stride INT_MAX padding 2", AVGPOOL2D, 5, INT_MAX, 2);
    run("maxpool2d k=5 stride INT_MAX padding 2", MAXPOOL2D, 5, INT_MAX, 2);
    run("avgpool2d k=46341 (K^2 > INT_MAX)", AVGPOOL2D, 46341, 1, 23170);
    run("avgpool3d k=1291 (K^3 > INT_MAX)", AVGPOOL3D, 1291, 1, 645);
    printf("%d of %d checks failed\n", failures, checks);
    return failures ? 1 : 0;
}
