/* Checkpoints and bf16: the file holds the fp32 master weights whatever
 * the precision, so a network saved in bf16 loads bit for bit into an
 * fp32 one and the other way round, and each resumes training: the
 * resumed network's next steps equal those of the network that saved,
 * continuing in its own precision, to bf16 tolerance (and bitwise when
 * the precision is the same). */
#define PCNN_EXPERIMENTAL /* pcnn_tanh: pcnn.h section 9 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

#define N 8
#define SAMPLE (3 * 10 * 10)

static pcnn_net *build(int precision)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, 3, 10, 10, &l));
    CK(pcnn_conv2d(net, l, 6, 3, 1, 1, 1, &l));
    CK(pcnn_tanh(net, l, &l));
    CK(pcnn_avgpool2d(net, l, 2, 2, 0, &l));
    CK(pcnn_conv2d(net, l, 8, 3, 1, 1, 1, &l));
    CK(pcnn_tanh(net, l, &l));
    CK(pcnn_flatten(net, l, &l));
    CK(pcnn_dense(net, l, 4, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_MOMENTUM));
    CK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 0.05));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 5));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 2));
    CK(pcnn_net_set_option(net, PCNN_OPT_PRECISION, precision));
    CK(pcnn_net_finalize(net, N));
    return net;
}

static void batch(int step, float *x, int32_t *y)
{
    unsigned s = 99u + 31u * (unsigned)step;
    for (int i = 0; i < N * SAMPLE; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)((s >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
    for (int i = 0; i < N; i++) y[i] = (i + step) % 4;
}

static float *params_of(pcnn_net *net, size_t *n)
{
    CK(pcnn_net_num_params(net, n));
    float *p = malloc(*n * sizeof *p);
    CK(pcnn_net_get_params(net, p, *n));
    return p;
}

/* Save from precision `from` after 3 steps, load into `to`, 3 more steps
 * each. */
static void check(int from, int to, const char *path)
{
    static float x[N * SAMPLE];
    int32_t y[N];
    pcnn_net *a = build(from), *b = build(to);
    for (int step = 0; step < 3; step++) {
        batch(step, x, y);
        CK(pcnn_net_train_step(a, N, x, y, NULL, NULL));
    }
    CK(pcnn_net_save(a, path));
    CK(pcnn_net_load(b, path));
    size_t n;
    float *pa = params_of(a, &n), *pb = params_of(b, &n);
    EXPECT(memcmp(pa, pb, n * sizeof *pa) == 0,
           "%s -> %s: the loaded parameters are not the saved fp32 masters", from ? "bf16" : "fp32",
           to ? "bf16" : "fp32");
    free(pb);
    float la = 0, lb = 0;
    for (int step = 3; step < 6; step++) {
        batch(step, x, y);
        CK(pcnn_net_train_step(a, N, x, y, NULL, &la));
        CK(pcnn_net_train_step(b, N, x, y, NULL, &lb));
    }
    float *saved = pa;
    pa = params_of(a, &n), pb = params_of(b, &n);
    /* The resumed steps' difference relative to the steps themselves
     * (max |b - a| / max |a - saved|).  Same precision: the same bits;
     * across: the gradients differ by bf16 rounding (2^-8 relative per
     * product; tanh and average pooling, so that no ReLU or max pool
     * decides differently), so the updates by a few 2^-8. */
    for (size_t i = 0; i < n; i++) saved[i] = pa[i] - saved[i];
    double step = 0.0, diff = 0.0;
    for (size_t i = 0; i < n; i++) {
        step = fmax(step, fabs((double)saved[i]));
        diff = fmax(diff, fabs((double)pb[i] - pa[i]));
    }
    free(saved);
    const double d = diff / step;
    const double tol = from == to ? 0.0 : 0x1p-5;
    printf("%s -> %s: 3 resumed steps differ by %.2e of their size (tol %.2e), loss %.5f vs "
           "%.5f\n", from ? "bf16" : "fp32", to ? "bf16" : "fp32", d, tol, lb, la);
    EXPECT(d <= tol && isfinite(lb), "%s -> %s: the resumed training departs (%.2e)",
           from ? "bf16" : "fp32", to ? "bf16" : "fp32", d);
    free(pa), free(pb);
    pcnn_net_destroy(&a);
    pcnn_net_destroy(&b);
}

int main(void)
{
    char path[] = "/tmp/pcnn_ckpt_bf16_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        printf("FAIL: mkstemp\n");
        return 1;
    }
    close(fd);
    for (int from = 0; from <= 1; from++)
        for (int to = 0; to <= 1; to++) check(from, to, path);
    unlink(path);
    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf("checkpoints hold fp32 masters and resume in either precision\n");
    return 0;
}
