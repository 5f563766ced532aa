/* One 3D convolution's three passes, each algorithm side by side.
 *
 *   bench_conv3d [THREADS [ITERS]]                     CosmoFlow-mini's convolutions, batch 4
 *   bench_conv3d N CIN D H W COUT [K [PAD [THREADS [ITERS]]]]
 *
 * For PCNN_OPT_CONV_ALGORITHM 1 (vol2col + GEMM), 2 (direct wherever it
 * applies) and 0 (the automatic choice) prints the milliseconds of the
 * forward, of dW (+ the bias gradient) and of dx, each the best of ITERS
 * steps after 2 warm-up steps (pcnn_net_time), and the nominal GFLOP/s of
 * the three.  dW is the backward of the layer right after the input (which
 * computes no dx); dx is the backward of the same layer behind a 1x1x1
 * convolution minus that.  Stride 1, bias on. */
#define PCNN_EXPERIMENTAL /* the 3D calls, PCNN_OPT_CONV_ALGORITHM: pcnn.h section 9 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pcnn.h"

#define CHECK(call)                                                              \
    do {                                                                         \
        if ((call) != PCNN_OK) {                                                 \
            fprintf(stderr, "bench_conv3d: %s: %s\n", #call, pcnn_last_error()); \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

typedef struct shape {
    int n, cin, d, h, w, cout, k, pad;
} shape;

/* input3d [-> 1x1x1 conv] -> the convolution -> MSE; returns its index. */
static pcnn_net *build(const shape *s, bool behind, int algorithm, int threads, int *index)
{
    pcnn_net *net;
    pcnn_layer *l;
    CHECK(pcnn_net_create(&net));
    CHECK(pcnn_net_input3d(net, s->cin, s->d, s->h, s->w, &l));
    if (behind) CHECK(pcnn_conv3d(net, l, s->cin, 1, 1, 0, 0, &l));
    CHECK(pcnn_conv3d(net, l, s->cout, s->k, 1, s->pad, 1, &l));
    CHECK(pcnn_net_set_loss(net, l, PCNN_LOSS_MSE));
    CHECK(pcnn_net_set_option(net, PCNN_OPT_THREADS, threads));
    CHECK(pcnn_net_set_option(net, PCNN_OPT_CONV_ALGORITHM, algorithm));
    CHECK(pcnn_net_finalize(net, s->n));
    *index = behind ? 2 : 1;
    return net;
}

/* Best forward and backward seconds of layer `index` over `iters` steps. */
static void time_layer(pcnn_net *net, int index, const shape *s, int iters, double best[2])
{
    const size_t nin = (size_t)s->n * s->cin * s->d * s->h * s->w;
    size_t out;
    CHECK(pcnn_net_output_size(net, &out));
    float *x = malloc(nin * sizeof *x), *t = calloc(out * s->n, sizeof *t);
    if (!x || !t) exit(1);
    for (size_t i = 0; i < nin; i++) x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    best[0] = best[1] = 1e30;
    for (int it = 0; it < iters + 2; it++) {
        CHECK(pcnn_net_reset_timing(net));
        CHECK(pcnn_net_train_step(net, s->n, x, NULL, t, NULL));
        double f, b;
        CHECK(pcnn_net_time(net, index, PCNN_TIME_FORWARD, &f));
        CHECK(pcnn_net_time(net, index, PCNN_TIME_BACKWARD, &b));
        if (it >= 2 && f < best[0]) best[0] = f;
        if (it >= 2 && b < best[1]) best[1] = b;
    }
    free(x);
    free(t);
}

static void run(const shape *s, int threads, int iters)
{
    const int od = s->d + 2 * s->pad - s->k + 1, oh = s->h + 2 * s->pad - s->k + 1,
              ow = s->w + 2 * s->pad - s->k + 1;
    const double gflop =
        2.0 * s->n * od * oh * ow * s->cout * s->cin * s->k * s->k * s->k * 1e-9;
    static const int algorithms[3] = {1, 2, 0};
    static const char *names[3] = {"gemm", "direct", "auto"};
    printf("n%d %3d -> %-3d %dx%dx%d k%d p%d", s->n, s->cin, s->cout, s->d, s->h, s->w, s->k,
           s->pad);
    for (int a = 0; a < 3; a++) {
        double first[2], inner[2];
        int index;
        pcnn_net *net = build(s, false, algorithms[a], threads, &index);
        time_layer(net, index, s, iters, first);
        pcnn_net_destroy(&net);
        net = build(s, true, algorithms[a], threads, &index);
        time_layer(net, index, s, iters, inner);
        pcnn_net_destroy(&net);
        const double fwd = first[0] < inner[0] ? first[0] : inner[0], dw = first[1];
        const double dx = inner[1] - first[1];
        printf(" | %s %6.2f %6.2f %6.2f ms %4.0f GF/s", names[a], fwd * 1e3, dw * 1e3,
               dx * 1e3, 3 * gflop / (fwd + inner[1]));
    }
    printf("\n");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (argc <= 3) {
        const int threads = argc > 1 ? atoi(argv[1]) : 2, iters = argc > 2 ? atoi(argv[2]) : 5;
        static const shape mini[] = {
            {4, 4, 32, 32, 32, 16, 3, 1},
            {4, 16, 16, 16, 16, 32, 3, 1},
            {4, 32, 8, 8, 8, 64, 3, 1},
        };
        printf("columns: forward, dW, dx milliseconds (best of %d), GFLOP/s of the three\n",
               iters);
        for (size_t i = 0; i < sizeof mini / sizeof mini[0]; i++) run(&mini[i], threads, iters);
        return 0;
    }
    if (argc < 7) {
        fprintf(stderr, "usage: %s [THREADS [ITERS]]\n"
                        "       %s N CIN D H W COUT [K [PAD [THREADS [ITERS]]]]\n",
                argv[0], argv[0]);
        return 2;
    }
    const shape s = {atoi(argv[1]), atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]),
                     atoi(argv[6]), argc > 7 ? atoi(argv[7]) : 3, argc > 8 ? atoi(argv[8]) : 1};
    run(&s, argc > 9 ? atoi(argv[9]) : 2, argc > 10 ? atoi(argv[10]) : 5);
    return 0;
}
