/* Helpers shared by the scheduler tests: a small network (356 parameters:
 * uneven slices at P = 3), a seeded dataset, and checks. */
#ifndef PCNN_TESTS_SCHED_UTIL_H
#define PCNN_TESTS_SCHED_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../common/expect.h"
#include "pcnn.h"

/* A library call that must succeed: report and stop the whole job. */
#define CK(call)                                                                      \
    do {                                                                              \
        pcnn_status ck_s_ = (call);                                                   \
        if (ck_s_ != PCNN_OK) {                                                       \
            fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call,       \
                    pcnn_status_str(ck_s_), pcnn_last_error());                       \
            abort_job();                                                              \
        }                                                                             \
    } while (0)

/* A library call that must fail with `want`. */
#define EXPECT_STATUS(call, want)                                                     \
    do {                                                                              \
        pcnn_status ex_s_ = (call);                                                   \
        if (ex_s_ != (want)) {                                                        \
            failures++;                                                               \
            printf("FAIL %s:%d: %s -> %s (%s), expected %s\n", __FILE__, __LINE__, #call, \
                   pcnn_status_str(ex_s_), pcnn_last_error(), pcnn_status_str(want)); \
        }                                                                             \
    } while (0)

static void abort_job(void);

static inline uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [-0.5, 0.5). */
static inline double uniform(uint64_t *s) { return (double)(mix(s) >> 11) * 0x1.0p-53 - 0.5; }

/* conv(2->5, k3, p1) relu maxpool2 conv(5->3, k3) dense(->7) relu dense(->4):
 * 356 parameters in 4 layers.  first_exchange overrides the first conv's
 * exchange (-1: keep the network's). */
static inline pcnn_net *build_net(pcnn_comm *comm, pcnn_exchange exchange, int first_exchange,
                           double bucket_bytes, pcnn_optimizer optimizer, int max_batch)
{
    pcnn_net *net;
    pcnn_layer *l, *conv1;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, 2, 9, 9, &l));
    CK(pcnn_conv2d(net, l, 5, 3, 1, 1, 1, &conv1));
    CK(pcnn_relu(net, conv1, &l));
    CK(pcnn_maxpool2d(net, l, 2, 2, 0, &l));
    CK(pcnn_conv2d(net, l, 3, 3, 1, 0, 1, &l));
    CK(pcnn_dense(net, l, 7, 1, &l));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_dense(net, l, 4, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_optimizer(net, optimizer));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 11));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    CK(pcnn_net_set_option(net, PCNN_OPT_BUCKET_BYTES, bucket_bytes));
    if (comm) {
        CK(pcnn_net_set_comm(net, comm));
        CK(pcnn_net_set_exchange(net, exchange));
        if (first_exchange >= 0) CK(pcnn_layer_set_exchange(conv1, (pcnn_exchange)first_exchange));
        CK(pcnn_net_set_option(net, PCNN_OPT_TIMEOUT_MS, 60000));
    }
    CK(pcnn_net_finalize(net, max_batch));
    return net;
}

/* n samples of (2, 9, 9) from a seed, in 4 learnable classes: the signs of
 * the two channels' sums. */
static inline pcnn_dataset *make_data(int n, uint64_t seed)
{
    float *x = malloc(sizeof(float) * (size_t)n * 162);
    int32_t *y = malloc(sizeof(int32_t) * (size_t)n);
    for (int i = 0; i < n * 162; i++) x[i] = (float)uniform(&seed);
    for (int i = 0; i < n; i++) {
        double sum[2] = {0.0, 0.0};
        for (int k = 0; k < 162; k++) sum[k / 81] += x[(size_t)i * 162 + k];
        y[i] = (int32_t)(2 * (sum[0] > 0) + (sum[1] > 0));
    }
    pcnn_dataset *d;
    CK(pcnn_dataset_create(n, 2, 9, 9, x, y, NULL, 0, &d));
    free(x);
    free(y);
    return d;
}

static inline double max_rel_diff(const float *a, const float *b, size_t n)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / (1e-3 + fabs((double)b[i]));
        if (d > worst || isnan(d)) worst = isnan(d) ? INFINITY : d;
    }
    return worst;
}

/* ||a - b|| in double, straight from the definition. */
static inline double distance(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return sqrt(s);
}

static inline double sched_get(const pcnn_scheduler *s, pcnn_sched_option o)
{
    double v;
    CK(pcnn_scheduler_get_option(s, o, &v));
    return v;
}

#endif
