/* Training-step benchmark of the peers' reference models.
 *
 *   bench_models MODEL [BATCH [THREADS [ITERS]]] [--layers]
 *                [--conv-gemm | --conv-direct | --conv-taps] [--bf16]
 *
 * Builds MODEL of /work/shared/bench/models.py layer for layer through the
 * public API, trains on one synthetic batch (standard-normal inputs, random
 * labels or standard-normal targets) with momentum SGD (lr 0.01, momentum
 * 0.9), exactly as bench_torch.py does, and prints one JSON line: median,
 * min and max step time over ITERS steps after 3 warm-up steps, achieved
 * GFLOP/s (the models.py convention: 2 FLOPs per multiply-add of conv and
 * dense layers, times 3 for a training step), and per steady-state step the
 * minor page faults (getrusage) and heap allocations of the whole process
 * (malloc_count.c), plus the peak RSS.
 *
 * Defaults (also for 0): the batch of the peers' table, THREADS 0 (OMP_NUM_THREADS),
 * ITERS 10.  Models: lenet, resnet20, vgg11, edsr, cosmoflow (CosmoFlow-mini,
 * 4 x 32^3 volumes through conv3d and 3D average pooling).  --layers
 * also prints the library's per-layer timing table of the timed steps to
 * stderr; --conv-gemm, --conv-direct and --conv-taps set
 * PCNN_OPT_CONV_ALGORITHM 1 (im2col + GEMM for every convolution), 2 (direct
 * wherever it applies) or 3 (one GEMM per tap wherever it applies); --bf16
 * (or PCNN_PRECISION=bf16 in the environment) sets PCNN_OPT_PRECISION to
 * bf16, to compare with `bench_torch.py MODEL BATCH THREADS ITERS bf16`
 * (PCNN_BF16_PATH forces a lower bf16 path). */
#define PCNN_EXPERIMENTAL /* PCNN_OPT_CONV_ALGORITHM, pcnn_net_input3d: pcnn.h section 9 */
#include <cblas.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "malloc_count.h"
#include "models.h"
#include "pcnn.h"
#include "bench_clock.h"


static const char *env_or(const char *name, const char *fallback)
{
    const char *v = getenv(name);
    return v ? v : fallback;
}

int main(int argc, char **argv)
{
    bool layers = false;
    int conv_algorithm = 0;
    bool bf16 = strcmp(env_or("PCNN_PRECISION", "fp32"), "bf16") == 0;
    for (int i = 1; i < argc; i++) {
        static const char *const algorithms[] = {"--conv-gemm", "--conv-direct", "--conv-taps"};
        int algorithm = 0;
        for (int a = 0; a < 3; a++)
            if (!strcmp(argv[i], algorithms[a])) algorithm = a + 1;
        const bool want_bf16 = !strcmp(argv[i], "--bf16");
        if (!strcmp(argv[i], "--layers") || algorithm || want_bf16) {
            if (algorithm) conv_algorithm = algorithm;
            else if (want_bf16) bf16 = true;
            else layers = true;
            for (int j = i; j + 1 < argc; j++) argv[j] = argv[j + 1];
            argc--;
            i--;
        }
    }
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL [BATCH [THREADS [ITERS]]]\n"
                        "MODEL: lenet resnet20 vgg11 edsr cosmoflow\n", argv[0]);
        return 2;
    }
    const char *name = argv[1];
    const model *m = model_find(name);
    if (!m) {
        fprintf(stderr, "bench_models: unknown model %s\n", name);
        return 2;
    }
    const int batch = argc > 2 && atoi(argv[2]) > 0 ? atoi(argv[2]) : m->default_batch;
    const int threads = argc > 3 ? atoi(argv[3]) : 0;
    const int iters = argc > 4 ? atoi(argv[4]) : 10;
    if (batch < 1 || threads < 0 || iters < 1) {
        fprintf(stderr, "bench_models: bad batch %d, threads %d or iters %d\n", batch, threads,
                iters);
        return 2;
    }

    builder b = {0};
    pcnn_layer *in;
    CHECK(pcnn_net_create(&b.net));
    if (m->d > 1) CHECK(pcnn_net_input3d(b.net, m->c, m->d, m->h, m->w, &in));
    else CHECK(pcnn_net_input(b.net, m->c, m->h, m->w, &in));
    pcnn_layer *out = m->build(&b, in);
    CHECK(pcnn_net_set_loss(b.net, out, m->loss));
    CHECK(pcnn_net_set_optimizer(b.net, PCNN_OPTIMIZER_MOMENTUM));
    CHECK(pcnn_net_set_option(b.net, PCNN_OPT_LEARNING_RATE, 0.01));
    CHECK(pcnn_net_set_option(b.net, PCNN_OPT_MOMENTUM, 0.9));
    CHECK(pcnn_net_set_option(b.net, PCNN_OPT_THREADS, threads));
    CHECK(pcnn_net_set_option(b.net, PCNN_OPT_CONV_ALGORITHM, conv_algorithm));
    CHECK(pcnn_net_set_option(b.net, PCNN_OPT_PRECISION, bf16));
    CHECK(pcnn_net_finalize(b.net, batch));

    size_t in_count = (size_t)batch * m->c * m->d * m->h * m->w, out_size, params;
    CHECK(pcnn_net_output_size(b.net, &out_size));
    CHECK(pcnn_net_num_params(b.net, &params));
    float *x = malloc(in_count * sizeof *x);
    int32_t *labels = malloc((size_t)batch * sizeof *labels);
    float *targets = NULL;
    double *times = malloc((size_t)iters * sizeof *times);
    if (!x || !labels || !times) return 1;
    randn(x, in_count);
    if (m->loss == PCNN_LOSS_SOFTMAX_CROSS_ENTROPY) {
        for (int j = 0; j < batch; j++) labels[j] = (int32_t)(next_u64() % out_size);
    } else {
        targets = malloc((size_t)batch * out_size * sizeof *targets);
        if (!targets) return 1;
        randn(targets, (size_t)batch * out_size);
    }

    float loss = 0.0f;
    for (int i = 0; i < 3; i++)
        CHECK(pcnn_net_train_step(b.net, batch, x, labels, targets, &loss));
    CHECK(pcnn_net_reset_timing(b.net));
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    const unsigned long a0 = malloc_count();
    for (int i = 0; i < iters; i++) {
        const double t0 = now();
        CHECK(pcnn_net_train_step(b.net, batch, x, labels, targets, &loss));
        times[i] = now() - t0;
    }
    const unsigned long a1 = malloc_count();
    getrusage(RUSAGE_SELF, &r1);

    double used_threads;
    CHECK(pcnn_net_get_option(b.net, PCNN_OPT_THREADS, &used_threads));
    qsort(times, (size_t)iters, sizeof *times, cmp_double);
    const double med = iters % 2 ? times[iters / 2]
                                 : 0.5 * (times[iters / 2 - 1] + times[iters / 2]);
    const double train_flop = 3.0 * b.flops * batch;
    printf("{\"model\": \"%s\", \"batch\": %d, \"threads\": %d, \"iters\": %d, "
           "\"median_ms\": %.2f, \"min_ms\": %.2f, \"max_ms\": %.2f, \"samples_per_s\": %.1f, "
           "\"fwd_mflop_per_sample\": %.2f, \"train_gflop_per_step\": %.3f, "
           "\"achieved_gflops\": %.1f, \"params\": %zu, \"loss\": %.4f, "
           "\"faults_per_step\": %.1f, \"mallocs_per_step\": %.1f, \"peak_rss_mb\": %.1f, "
           "\"blas_core\": \"%s\", \"openblas_coretype\": \"%s\", \"glibc_tunables\": \"%s\", "
           "\"precision\": \"%s\"}\n",
           m->name, batch, (int)used_threads, iters, med * 1e3, times[0] * 1e3,
           times[iters - 1] * 1e3, batch / med, b.flops / 1e6, train_flop / 1e9,
           train_flop / med / 1e9, params, (double)loss,
           (double)(r1.ru_minflt - r0.ru_minflt) / iters, (double)(a1 - a0) / iters,
           r1.ru_maxrss / 1024.0, openblas_get_corename(), env_or("OPENBLAS_CORETYPE", ""),
           env_or("GLIBC_TUNABLES", ""), bf16 ? "bf16" : "fp32");
    fflush(stdout);
    if (layers) {
        static char report[1 << 16];
        CHECK(pcnn_net_timing_report(b.net, report, sizeof report, NULL));
        fputs(report, stderr);
    }
    pcnn_net_destroy(&b.net);
    free(x);
    free(labels);
    free(targets);
    free(times);
    return 0;
}
