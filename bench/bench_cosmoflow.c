/* CosmoFlow at full size (seed 003 Table 2, WAVE2_SPEC B.2): training-step
 * throughput and memory per sample on one rank.
 *
 *   bench_cosmoflow [--width 128] [--batch 1] [--threads 0] [--iters 3]
 *
 * Builds the Table 2 network for W (3^3 "same" convolutions without bias,
 * conv4 stride 2, leaky ReLU 0.01, 3^3 stride-2 average pooling while the
 * output is larger than 2^3, dropout 0.2 before fc1-fc3, 4 outputs, MSE,
 * Adam), trains on one synthetic batch (standard-normal volumes and
 * targets) and prints one JSON line: median / min step time over ITERS
 * steps after 2 warm-up steps, samples/s, the forward and training conv
 * GFLOP per sample and the achieved GFLOP/s, the network's planned memory
 * (pcnn_net_memory_bytes) in total and per sample, the peak RSS, and per
 * steady-state step the minor page faults and heap allocations of the
 * process (malloc_count.c).  Seed 003 reports 0.824 GiB/sample on a V100
 * at W = 128; expect about 0.3 s/sample at the 2-core machine's SGEMM peak
 * (55.6 GFLOP of conv per training sample). */
#define PCNN_EXPERIMENTAL /* 3D layers: pcnn.h section 9 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "malloc_count.h"
#include "pcnn.h"
#include "bench_clock.h"

#define CK(call)                                                                          \
    do {                                                                                  \
        pcnn_status s_ = (call);                                                          \
        if (s_ != PCNN_OK) {                                                              \
            fprintf(stderr, "bench_cosmoflow: %s: %s\n", #call, pcnn_last_error());       \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

static uint64_t state = 0x2545f4914f6cdd1dull;
static float randn(void)
{
    double u[2];
    for (int i = 0; i < 2; i++) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        u[i] = ((double)(state >> 11) + 0.5) / 9007199254740992.0;
    }
    return (float)(sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]));
}

static double conv_flops; /* forward conv FLOP per sample */

static pcnn_layer *conv(pcnn_net *net, pcnn_layer *in, int out, int stride)
{
    pcnn_layer *c, *r;
    int cin, d, h, w;
    CK(pcnn_layer_output_shape3d(in, &cin, NULL, NULL, NULL));
    CK(pcnn_conv3d(net, in, out, 3, stride, 1, 0, &c));
    CK(pcnn_layer_output_shape3d(c, NULL, &d, &h, &w));
    conv_flops += 2.0 * d * h * w * out * cin * 27;
    CK(pcnn_leaky_relu(net, c, 0.01f, &r));
    int od;
    CK(pcnn_layer_output_shape3d(r, NULL, &od, NULL, NULL));
    if (od <= 2) return r;
    pcnn_layer *p;
    CK(pcnn_avgpool3d(net, r, 3, 2, 1, &p));
    return p;
}

static pcnn_layer *fc(pcnn_net *net, pcnn_layer *in, int out, int activation)
{
    pcnn_layer *l;
    CK(pcnn_dropout(net, in, 0.2f, &l));
    CK(pcnn_dense(net, l, out, 1, &l));
    if (activation) CK(pcnn_leaky_relu(net, l, 0.01f, &l));
    return l;
}

static int arg(int argc, char **argv, const char *name, int def)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name)) return atoi(argv[i + 1]);
    return def;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help")) {
            printf("usage: %s [--width 128] [--batch 1] [--threads 0] [--iters 3]\n", argv[0]);
            return 0;
        }
    const int w = arg(argc, argv, "--width", 128), batch = arg(argc, argv, "--batch", 1);
    const int threads = arg(argc, argv, "--threads", 0), iters = arg(argc, argv, "--iters", 3);
    if (w < 8 || batch < 1 || threads < 0 || iters < 1) {
        fprintf(stderr, "bench_cosmoflow: bad arguments\n");
        return 2;
    }
    static const int channels[7] = {16, 32, 64, 128, 256, 256, 256};
    pcnn_net *net;
    pcnn_layer *x;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input3d(net, 4, w, w, w, &x));
    for (int i = 0; i < 7; i++) x = conv(net, x, channels[i], i == 3 ? 2 : 1);
    CK(pcnn_flatten(net, x, &x));
    x = fc(net, x, 2048, 1);
    x = fc(net, x, 256, 1);
    x = fc(net, x, 4, 0);
    CK(pcnn_net_set_loss(net, x, PCNN_LOSS_MSE));
    CK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_ADAM));
    CK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 1e-4));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, threads));
    const double t_fin = now();
    CK(pcnn_net_finalize(net, batch));
    const double finalize_s = now() - t_fin;
    size_t params, memory;
    CK(pcnn_net_num_params(net, &params));
    CK(pcnn_net_memory_bytes(net, &memory));
    const size_t in_count = (size_t)batch * 4 * w * w * w;
    float *xs = malloc(in_count * sizeof *xs), targets[4 * 64];
    double *times = malloc((size_t)iters * sizeof *times);
    if (!xs || !times || batch > 64) return 1;
    for (size_t i = 0; i < in_count; i++) xs[i] = randn();
    for (int i = 0; i < 4 * batch; i++) targets[i] = randn();
    float loss = 0.0f;
    for (int i = 0; i < 2; i++) CK(pcnn_net_train_step(net, batch, xs, NULL, targets, &loss));
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    const unsigned long a0 = malloc_count();
    for (int i = 0; i < iters; i++) {
        const double t0 = now();
        CK(pcnn_net_train_step(net, batch, xs, NULL, targets, &loss));
        times[i] = now() - t0;
    }
    const unsigned long a1 = malloc_count();
    getrusage(RUSAGE_SELF, &r1);
    double used_threads;
    CK(pcnn_net_get_option(net, PCNN_OPT_THREADS, &used_threads));
    qsort(times, (size_t)iters, sizeof *times, cmp_double);
    const double med = iters % 2 ? times[iters / 2]
                                 : 0.5 * (times[iters / 2 - 1] + times[iters / 2]);
    const double gib = 1024.0 * 1024.0 * 1024.0;
    printf("{\"model\": \"cosmoflow\", \"width\": %d, \"batch\": %d, \"threads\": %d, "
           "\"iters\": %d, \"median_ms\": %.1f, \"min_ms\": %.1f, \"samples_per_s\": %.3f, "
           "\"conv_gflop_fwd_per_sample\": %.3f, \"conv_gflop_train_per_sample\": %.3f, "
           "\"achieved_conv_gflops\": %.1f, \"params\": %zu, \"planned_gib\": %.3f, "
           "\"planned_gib_per_sample\": %.3f, \"peak_rss_gib\": %.3f, "
           "\"faults_per_step\": %.1f, \"mallocs_per_step\": %.1f, \"finalize_s\": %.2f, "
           "\"loss\": %.4f}\n",
           w, batch, (int)used_threads, iters, med * 1e3, times[0] * 1e3, batch / med,
           conv_flops / 1e9, 3 * conv_flops / 1e9, 3 * conv_flops * batch / med / 1e9, params,
           memory / gib, memory / gib / batch, r1.ru_maxrss / 1024.0 / 1024.0,
           (double)(r1.ru_minflt - r0.ru_minflt) / iters, (double)(a1 - a0) / iters,
           finalize_s, (double)loss);
    pcnn_net_destroy(&net);
    free(xs);
    free(times);
    return 0;
}
