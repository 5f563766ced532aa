/* Weight gradient of the direct convolution for few output channels (see
 * conv_direct.h): grid positions in the vector lanes.
 *
 * With output channels in the lanes (conv_direct_wgrad.c), 3 output
 * channels fill 3 of 16 lanes.  Here dY is on the grid too (placed at
 * (0, 0), zero off the real pixels), so dW[co][ci][tap] is a dot product
 * of two grid planes, one shifted by the tap: per 16 positions, CB dY
 * vectors and K*K shifted x vectors make CB*K*K fused multiply-adds (27
 * accumulators for 3 channels and k3).  The border of the grid is wasted
 * work, small for the large planes that have few channels.  Threads take
 * input channels; sums run in float over chunks of positions and in
 * double across them, in a fixed order. */
#include "conv_direct.h"
#include "kernels.h"
#include "simd.h"

#define FEW_CB 3         /* output channels per register tile */
#define FEW_CHUNK 4096   /* grid positions per float partial sum */

typedef struct few_args {
    const float *dyp, *xp;
    float *dw;
    int cout, cin;
    const direct_grid *g;
} few_args;

#if PCNN_AVX512
/* dW of output channels co0 .. co0+CB-1 and input channel ci. */
TARGET static inline __attribute__((always_inline)) void
few_tile(const int CB, const int K, const few_args *a, int co0, int ci)
{
    const direct_grid *g = a->g;
    const int kk = K * K;
    const float *x = a->xp + (size_t)ci * g->plane + g->lead;
    const float *dy[FEW_CB];
    for (int c = 0; c < CB; c++) dy[c] = a->dyp + (size_t)(co0 + c) * g->plane + g->lead;
    double total[FEW_CB][25] = {{0}};
    for (size_t q0 = 0; q0 < g->q_round; q0 += FEW_CHUNK) {
        const size_t q1 = q0 + FEW_CHUNK < g->q_round ? q0 + FEW_CHUNK : g->q_round;
        __m512 acc[FEW_CB][25];
#pragma GCC unroll 3
        for (int c = 0; c < CB; c++)
#pragma GCC unroll 25
            for (int t = 0; t < kk; t++) acc[c][t] = _mm512_setzero_ps();
        for (size_t q = q0; q < q1; q += LANES) {
            __m512 d[FEW_CB];
#pragma GCC unroll 3
            for (int c = 0; c < CB; c++) d[c] = _mm512_loadu_ps(dy[c] + q);
#pragma GCC unroll 5
            for (int ky = 0; ky < K; ky++)
#pragma GCC unroll 5
                for (int kx = 0; kx < K; kx++) {
                    const __m512 xv = _mm512_loadu_ps(x + q + (size_t)ky * g->wp + kx);
#pragma GCC unroll 3
                    for (int c = 0; c < CB; c++)
                        acc[c][ky * K + kx] = _mm512_fmadd_ps(d[c], xv, acc[c][ky * K + kx]);
                }
        }
#pragma GCC unroll 3
        for (int c = 0; c < CB; c++)
#pragma GCC unroll 25
            for (int t = 0; t < kk; t++) total[c][t] += (double)_mm512_reduce_add_ps(acc[c][t]);
    }
    for (int c = 0; c < CB; c++)
        for (int t = 0; t < kk; t++)
            a->dw[((size_t)(co0 + c) * a->cin + ci) * kk + t] = (float)total[c][t];
}

#define FEW_FN(CB, K)                                                                          \
    TARGET static void few_##CB##_##K(const few_args *a, int co0, int ci)                      \
    {                                                                                          \
        few_tile(CB, K, a, co0, ci);                                                           \
    }
FEW_FN(3, 3)
FEW_FN(2, 3)
FEW_FN(1, 3)
FEW_FN(1, 5)

/* Input channels [lo, hi), every output channel: blocks of 3 for k3, of 1
 * for k5 (25 accumulators). */
static void few_channels(void *arg, size_t lo, size_t hi)
{
    const few_args *a = arg;
    for (size_t ci = lo; ci < hi; ci++)
        for (int co0 = 0; co0 < a->cout;) {
            const int left = a->cout - co0;
            const int cb = a->g->k == 5 ? 1 : left >= 3 ? 3 : left;
            if (a->g->k == 5)
                few_1_5(a, co0, (int)ci);
            else if (cb == 3)
                few_3_3(a, co0, (int)ci);
            else if (cb == 2)
                few_2_3(a, co0, (int)ci);
            else
                few_1_3(a, co0, (int)ci);
            co0 += cb;
        }
}
#else
static void few_channels(void *arg, size_t lo, size_t hi)
{
    (void)arg, (void)lo, (void)hi; /* never called: direct_conv_available() is false */
}
#endif

void direct_weight_grad_few(const float *dyp, int cout, const float *xp, int cin,
                            const direct_grid *g, float *dw, int threads)
{
    few_args a = {dyp, xp, dw, cout, cin, g};
    const size_t work = (size_t)cout * cin * g->k * g->k * g->q_round / 64;
    parallel_for((size_t)cin, 1, work, threads, few_channels, &a);
}
