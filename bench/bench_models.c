/* Training-step benchmark of the peers' reference models.
 *
 *   bench_models MODEL [BATCH [THREADS [ITERS]]] [--layers]
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
 * ITERS 10.  Models: lenet, resnet20, vgg11, edsr; cosmoflow (3D) is not
 * supported by libpcnn yet and prints an "unsupported" line.  --layers
 * also prints the library's per-layer timing table of the timed steps to
 * stderr. */
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
#include "pcnn.h"

#define CHECK(call)                                                                         \
    do {                                                                                    \
        pcnn_status s_ = (call);                                                            \
        if (s_ != PCNN_OK) {                                                                \
            fprintf(stderr, "bench_models: %s: %s (%s)\n", #call, pcnn_last_error(),       \
                    pcnn_status_str(s_));                                                   \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

/* The network under construction and its forward FLOPs per sample. */
typedef struct builder {
    pcnn_net *net;
    double flops;
} builder;

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
    int c, h, w;
    pcnn_layer *l;
    CHECK(pcnn_layer_output_shape(in, &c, &h, &w));
    CHECK(pcnn_dense(b->net, in, out, 1, &l));
    b->flops += 2.0 * out * (double)c * h * w;
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

typedef struct model {
    const char *name;
    int c, h, w, default_batch;
    pcnn_loss loss;
    pcnn_layer *(*build)(builder *, pcnn_layer *);
} model;

static const model models[] = {
    {"lenet", 1, 28, 28, 64, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY, lenet},
    {"resnet20", 3, 32, 32, 128, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY, resnet20},
    {"vgg11", 3, 32, 32, 64, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY, vgg11},
    {"edsr", 3, 48, 48, 16, PCNN_LOSS_L1, edsr},
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* splitmix64 and Box-Muller: reproducible synthetic data. */
static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static uint64_t next_u64(void)
{
    uint64_t z = (rng += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static double uniform(void) { return ((double)(next_u64() >> 11) + 0.5) * 0x1.0p-53; }
static void randn(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform()));
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static const char *env_or(const char *name, const char *fallback)
{
    const char *v = getenv(name);
    return v ? v : fallback;
}

int main(int argc, char **argv)
{
    bool layers = false;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--layers")) {
            layers = true;
            for (int j = i; j + 1 < argc; j++) argv[j] = argv[j + 1];
            argc--;
            i--;
        }
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL [BATCH [THREADS [ITERS]]]\n"
                        "MODEL: lenet resnet20 vgg11 edsr (cosmoflow: unsupported)\n", argv[0]);
        return 2;
    }
    const char *name = argv[1];
    if (!strcmp(name, "cosmoflow")) {
        printf("{\"model\": \"cosmoflow\", \"unsupported\": \"3D convolution and pooling are "
               "not implemented in libpcnn yet\"}\n");
        return 3;
    }
    const model *m = NULL;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        if (!strcmp(models[i].name, name)) m = &models[i];
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
    CHECK(pcnn_net_input(b.net, m->c, m->h, m->w, &in));
    pcnn_layer *out = m->build(&b, in);
    CHECK(pcnn_net_set_loss(b.net, out, m->loss));
    CHECK(pcnn_net_set_optimizer(b.net, PCNN_OPTIMIZER_MOMENTUM));
    CHECK(pcnn_net_set_option(b.net, PCNN_OPT_LEARNING_RATE, 0.01));
    CHECK(pcnn_net_set_option(b.net, PCNN_OPT_MOMENTUM, 0.9));
    CHECK(pcnn_net_set_option(b.net, PCNN_OPT_THREADS, threads));
    CHECK(pcnn_net_finalize(b.net, batch));

    size_t in_count = (size_t)batch * m->c * m->h * m->w, out_size, params;
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
           "\"blas_core\": \"%s\", \"openblas_coretype\": \"%s\", \"glibc_tunables\": \"%s\"}\n",
           m->name, batch, (int)used_threads, iters, med * 1e3, times[0] * 1e3,
           times[iters - 1] * 1e3, batch / med, b.flops / 1e6, train_flop / 1e9,
           train_flop / med / 1e9, params, (double)loss,
           (double)(r1.ru_minflt - r0.ru_minflt) / iters, (double)(a1 - a0) / iters,
           r1.ru_maxrss / 1024.0, openblas_get_corename(), env_or("OPENBLAS_CORETYPE", ""),
           env_or("GLIBC_TUNABLES", ""));
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
