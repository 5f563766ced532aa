/* A training step allocates nothing and touches no new page once the
 * network is warm: 3D networks (conv3d with the vol2col matrix kept and
 * recomputed, 3D pools, batch norm, dropout, leaky ReLU, dense) on 1 and 2
 * threads, at batch 1 (a few output voxels: GEMMs of 8 columns) and 4, 3D
 * networks whose rows of 16 run every conv3d pass by the direct kernels
 * (where AVX-512F is there), and a 2D network with a small batch (a dense
 * layer over 2 samples); the 2D and 3D networks again with bf16
 * products (their bf16 copies and GEMM packs are made at finalize).  Heap allocations are counted by
 * bench/malloc_count.c (every caller of malloc: libpcnn, OpenBLAS,
 * libgomp), page faults by getrusage. */
#define PCNN_EXPERIMENTAL /* the 3D calls, PCNN_OPT_KEEP_IM2COL: pcnn.h section 9 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "../../bench/malloc_count.h"
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

/* volume 1: 4 x 8^3 -> conv3d 8 -> bn -> leaky -> avgpool3d (4^3) -> conv3d
 * 16 s2 (2^3: 8 GEMM columns per sample) -> leaky -> maxpool3d k3 s1 p1 ->
 * dropout -> dense 32 -> leaky -> dense 4, MSE, Adam; volume 2: 4 x 4 x 4 x
 * 16 -> conv3d 8 -> leaky -> conv3d 8 (rows of 16: direct forward, dW and
 * dx) -> the same head; volume 0: (3, 8, 8) -> conv2d -> the same head on
 * images. */
static pcnn_net *build(int volume, int threads, int keep, int batch, int precision)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    if (volume == 2) {
        CK(pcnn_net_input3d(net, 4, 4, 4, 16, &l));
        CK(pcnn_conv3d(net, l, 8, 3, 1, 1, 1, &l));
        CK(pcnn_leaky_relu(net, l, 0.01f, &l));
        CK(pcnn_conv3d(net, l, 8, 3, 1, 1, 0, &l));
    } else if (volume) {
        CK(pcnn_net_input3d(net, 4, 8, 8, 8, &l));
        CK(pcnn_conv3d(net, l, 8, 3, 1, 1, 0, &l));
        CK(pcnn_batchnorm(net, l, 1e-5f, 0.1f, &l));
        CK(pcnn_leaky_relu(net, l, 0.01f, &l));
        CK(pcnn_avgpool3d(net, l, 3, 2, 1, &l));
        CK(pcnn_conv3d(net, l, 16, 3, 2, 1, 1, &l));
        CK(pcnn_leaky_relu(net, l, 0.01f, &l));
        CK(pcnn_maxpool3d(net, l, 3, 1, 1, &l));
    } else {
        CK(pcnn_net_input(net, 3, 8, 8, &l));
        CK(pcnn_conv2d(net, l, 8, 3, 1, 1, 1, &l));
    }
    CK(pcnn_dropout(net, l, 0.2f, &l));
    CK(pcnn_dense(net, l, 32, 1, &l));
    CK(pcnn_leaky_relu(net, l, 0.01f, &l));
    CK(pcnn_dense(net, l, 4, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_MSE));
    CK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_ADAM));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, threads));
    CK(pcnn_net_set_option(net, PCNN_OPT_KEEP_IM2COL, keep));
    CK(pcnn_net_set_option(net, PCNN_OPT_PRECISION, precision));
    CK(pcnn_net_finalize(net, batch));
    return net;
}

static void check_in(int volume, int threads, int keep, int batch, int precision)
{
    pcnn_net *net = build(volume, threads, keep, batch, precision);
    const size_t sample = volume == 2 ? 4 * 4 * 4 * 16 : volume ? 4 * 8 * 8 * 8 : 3 * 8 * 8;
    float *x = malloc(sizeof(float) * sample * batch), t[4 * 4];
    for (size_t i = 0; i < sample * batch; i++) x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    for (int i = 0; i < 4 * batch; i++) t[i] = (float)(i % 3) - 1.0f;
    float loss;
    for (int i = 0; i < 3; i++) CK(pcnn_net_train_step(net, batch, x, NULL, t, &loss));
    /* Three windows of 5 steps: no allocation in any, and no page fault in
     * at least one.  A fault the step itself causes recurs in every window;
     * the kernel's own housekeeping (a page migrated or collapsed into a
     * huge page) once in a while faults in one. */
    unsigned long mallocs = 0;
    long faults = -1;
    for (int window = 0; window < 3; window++) {
        struct rusage r0, r1;
        getrusage(RUSAGE_SELF, &r0);
        const unsigned long a0 = malloc_count();
        for (int i = 0; i < 5; i++) CK(pcnn_net_train_step(net, batch, x, NULL, t, &loss));
        const unsigned long a1 = malloc_count();
        getrusage(RUSAGE_SELF, &r1);
        mallocs += a1 - a0;
        const long f = r1.ru_minflt - r0.ru_minflt + r1.ru_majflt - r0.ru_majflt;
        if (faults < 0 || f < faults) faults = f;
    }
    EXPECT(mallocs == 0 && faults == 0,
           "%s%s, %d thread(s), keep_im2col %d, batch %d: %lu mallocs in 15 steps, %ld page "
           "faults in the best 5", volume == 2 ? "3D rows of 16" : volume ? "3D" : "2D",
           precision ? " bf16" : "", threads, keep, batch, mallocs, faults);
    free(x);
    pcnn_net_destroy(&net);
}

static void check(int volume, int threads, int keep, int batch)
{
    check_in(volume, threads, keep, batch, PCNN_PRECISION_FP32);
}

int main(void)
{
    /* The counter must see allocations, or the test proves nothing. */
    const unsigned long before = malloc_count();
    void *(*volatile alloc)(size_t) = malloc; /* not elided by the compiler */
    void *p = alloc(64);
    EXPECT(malloc_count() == before + 1, "malloc_count does not count");
    free(p);
    for (int threads = 1; threads <= 2; threads++)
        for (int keep = 0; keep <= 1; keep++)
            for (int batch = 1; batch <= 4; batch += 3) check(1, threads, keep, batch);
    for (int threads = 1; threads <= 2; threads++) check(2, threads, 0, 4);
    check(0, 1, 1, 2);
    check(0, 2, 1, 2);
    for (int threads = 1; threads <= 2; threads++)
        for (int keep = 0; keep <= 1; keep++) {
            check_in(0, threads, keep, 2, PCNN_PRECISION_BF16);
            check_in(1, threads, keep, 4, PCNN_PRECISION_BF16);
        }
    check_in(2, 2, 0, 4, PCNN_PRECISION_BF16);
    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf("training steps allocate nothing\n");
    return 0;
}
