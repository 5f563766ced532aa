/* One convolution layer, timed with each algorithm side by side.
 *
 *   bench_conv N CIN H W COUT K [STRIDE [PAD [THREADS [ITERS]]]]
 *   bench_conv --models [THREADS [ITERS]]   the 3x3 shapes of the peers' models
 *
 * The layer sits behind a 1x1 convolution, so its backward pass computes
 * the input gradient too.  For each algorithm (PCNN_OPT_CONV_ALGORITHM 2 =
 * direct, 3 = one GEMM per tap, each where it applies, else im2col + GEMM;
 * 1 = im2col + GEMM) prints the forward + backward milliseconds per step
 * (pcnn_net_time, best of ITERS rounds) and the nominal GFLOP/s of both
 * (2 per multiply-add; backward counts twice the forward, padding taps
 * included), then the automatic choice as pcnn_net_summary gives it. */
#define PCNN_EXPERIMENTAL /* PCNN_OPT_CONV_ALGORITHM: pcnn.h section 9 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pcnn.h"

#define CHECK(call)                                                              \
    do {                                                                         \
        if ((call) != PCNN_OK) {                                                 \
            fprintf(stderr, "bench_conv: %s: %s\n", #call, pcnn_last_error());   \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

typedef struct shape {
    int n, cin, h, w, cout, k, stride, pad;
} shape;

static pcnn_net *build(const shape *s, int algorithm, int threads)
{
    pcnn_net *net;
    pcnn_layer *l;
    CHECK(pcnn_net_create(&net));
    CHECK(pcnn_net_input(net, s->cin, s->h, s->w, &l));
    CHECK(pcnn_conv2d(net, l, s->cin, 1, 1, 0, 0, &l));
    CHECK(pcnn_conv2d(net, l, s->cout, s->k, s->stride, s->pad, 1, &l));
    CHECK(pcnn_net_set_loss(net, l, PCNN_LOSS_MSE));
    CHECK(pcnn_net_set_option(net, PCNN_OPT_THREADS, threads));
    CHECK(pcnn_net_set_option(net, PCNN_OPT_CONV_ALGORITHM, algorithm));
    CHECK(pcnn_net_finalize(net, s->n));
    return net;
}

/* Best forward and backward seconds of the measured layer over `iters`
 * steps (after 2 warm-up steps). */
static void time_layer(pcnn_net *net, const shape *s, int iters, double best[2])
{
    size_t nin = (size_t)s->n * s->cin * s->h * s->w, out;
    CHECK(pcnn_net_output_size(net, &out));
    float *x = malloc(nin * sizeof *x), *t = calloc(out * s->n, sizeof *t);
    if (!x || !t) exit(1);
    for (size_t i = 0; i < nin; i++) x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    best[0] = best[1] = 1e30;
    for (int it = 0; it < iters + 2; it++) {
        CHECK(pcnn_net_reset_timing(net));
        CHECK(pcnn_net_train_step(net, s->n, x, NULL, t, NULL));
        double f, b;
        CHECK(pcnn_net_time(net, 2, PCNN_TIME_FORWARD, &f));
        CHECK(pcnn_net_time(net, 2, PCNN_TIME_BACKWARD, &b));
        if (it >= 2 && f < best[0]) best[0] = f;
        if (it >= 2 && b < best[1]) best[1] = b;
    }
    free(x);
    free(t);
}

static void run(const shape *s, int threads, int iters)
{
    const int ho = (s->h + 2 * s->pad - s->k) / s->stride + 1;
    const int wo = (s->w + 2 * s->pad - s->k) / s->stride + 1;
    const double gflop = 2.0 * s->n * ho * wo * s->cout * s->cin * s->k * s->k * 1e-9;
    static const int algorithms[3] = {2, 3, 1};
    static const char *names[3] = {"direct", "taps", "gemm"};
    printf("n%-3d %4d -> %-4d %3dx%-3d k%d s%d p%d", s->n, s->cin, s->cout, s->h, s->w, s->k,
           s->stride, s->pad);
    for (int a = 0; a < 3; a++) {
        double t[2];
        pcnn_net *net = build(s, algorithms[a], threads);
        time_layer(net, s, iters, t);
        pcnn_net_destroy(&net);
        printf(" | %s %6.2f + %6.2f ms %4.0f GF/s", names[a], t[0] * 1e3, t[1] * 1e3,
               3 * gflop / (t[0] + t[1]));
    }
    /* The automatic choice as the summary gives it (measured where the
     * rules are unsure, unless PCNN_CONV_MEASURE=0). */
    pcnn_net *net = build(s, 0, threads);
    static char text[8192];
    CHECK(pcnn_net_summary(net, text, sizeof text, NULL));
    pcnn_net_destroy(&net);
    const char *line = strstr(text, "\n2 "), *mark = line ? strchr(line, '[') : NULL;
    const size_t len = mark ? strcspn(mark + 1, ";]\n") : 0;
    printf(" | auto %.*s\n", (int)len, mark ? mark + 1 : "");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--models")) {
        const int threads = argc > 2 ? atoi(argv[2]) : 2, iters = argc > 3 ? atoi(argv[3]) : 5;
        static const shape models[] = {
            {128, 16, 32, 32, 16, 3, 1, 1},  {128, 32, 16, 16, 32, 3, 1, 1},
            {128, 64, 8, 8, 64, 3, 1, 1},    {64, 64, 16, 16, 128, 3, 1, 1},
            {64, 128, 8, 8, 256, 3, 1, 1},   {64, 256, 8, 8, 256, 3, 1, 1},
            {64, 256, 4, 4, 512, 3, 1, 1},   {64, 512, 4, 4, 512, 3, 1, 1},
            {64, 512, 2, 2, 512, 3, 1, 1},   {16, 64, 48, 48, 64, 3, 1, 1},
            {16, 64, 48, 48, 256, 3, 1, 1},  {16, 64, 96, 96, 3, 3, 1, 1},
            {64, 1, 28, 28, 6, 5, 1, 2},
        };
        for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
            run(&models[i], threads, iters);
        return 0;
    }
    if (argc < 7) {
        fprintf(stderr, "usage: %s N CIN H W COUT K [STRIDE [PAD [THREADS [ITERS]]]]\n"
                        "       %s --models [THREADS [ITERS]]\n", argv[0], argv[0]);
        return 2;
    }
    shape s = {atoi(argv[1]), atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]),
               atoi(argv[6]), argc > 7 ? atoi(argv[7]) : 1, argc > 8 ? atoi(argv[8]) : 1};
    run(&s, argc > 9 ? atoi(argv[9]) : 2, argc > 10 ? atoi(argv[10]) : 5);
    return 0;
}
