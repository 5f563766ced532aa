/* The bf16 GEMM's paths against fp32 SGEMM (OpenBLAS as loaded and the
 * library's own) side by side in one process, one core, on the im2col
 * GEMMs of VGG-11 and ResNet-20 (CIFAR-10 32x32, batch 16): forward
 * W x col, weight gradient dy x col^T, input gradient W^T x dy.  Then the
 * peaks: a vdpbf16ps and an fp32 FMA throughput loop (independent
 * accumulators, registers only).
 *
 *   gemm_bf16 [ITERS]     (default 5; rounds alternate the candidates)
 *
 * One JSON line per shape: GFLOP/s (median; 2 m n k flops) of each, and
 * bf16 over each fp32. */
#include <cblas.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_clock.h"
#include "kernels/bf16.h"
#include "kernels/cpu_features.h"
#include "kernels/gemm_bf16.h"
#include "kernels/gemm_own.h"

typedef struct { const char *what; int ta, tb, m, n, k; } shape;

/* Convolution cout x (N Ho Wo) x (cin 9) at batch 16. */
static const shape shapes[] = {
    {"resnet20 16->16 32x32 fwd", 0, 0, 16, 16384, 144},
    {"resnet20 16->16 32x32 wgrad", 0, 1, 16, 144, 16384},
    {"resnet20 16->16 32x32 dgrad", 1, 0, 144, 16384, 16},
    {"resnet20 32->32 16x16 fwd", 0, 0, 32, 4096, 288},
    {"resnet20 64->64 8x8 fwd", 0, 0, 64, 1024, 576},
    {"resnet20 64->64 8x8 wgrad", 0, 1, 64, 576, 1024},
    {"resnet20 64->64 8x8 dgrad", 1, 0, 576, 1024, 64},
    {"vgg11 3->64 32x32 fwd", 0, 0, 64, 16384, 27},
    {"vgg11 64->128 16x16 fwd", 0, 0, 128, 4096, 576},
    {"vgg11 64->128 16x16 wgrad", 0, 1, 128, 576, 4096},
    {"vgg11 64->128 16x16 dgrad", 1, 0, 576, 4096, 128},
    {"vgg11 128->256 8x8 fwd", 0, 0, 256, 1024, 1152},
    {"vgg11 256->256 8x8 fwd", 0, 0, 256, 1024, 2304},
    {"vgg11 256->512 4x4 fwd", 0, 0, 512, 256, 2304},
    {"vgg11 512->512 2x2 fwd", 0, 0, 512, 64, 4608},
    {"vgg11 512->512 4x4 wgrad", 0, 1, 512, 4608, 256},
    {"vgg11 512->512 4x4 dgrad", 1, 0, 4608, 256, 512},
};

#if PCNN_GEMM_BF16_AVX512
#include <immintrin.h>

/* 24 independent chains: more than latency x throughput on current cores. */
#define CHAINS 24
__attribute__((target("avx512f,avx512bf16"))) static double peak_bf16(long iters)
{
    __m512 acc[CHAINS];
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_ps((float)i);
    const __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), y = (__m512bh)_mm512_set1_epi32(0x00010001);
    double t0 = now();
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 24
        for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_dpbf16_ps(acc[i], x, y);
    }
    double t = now() - t0;
    float sink = 0;
    for (int i = 0; i < CHAINS; i++) sink += _mm512_reduce_add_ps(acc[i]);
    if (sink == 1.2345f) printf(" ");
    return (double)iters * CHAINS * 64 / t / 1e9; /* 16 lanes x 2 pairs x 2 flops */
}

__attribute__((target("avx512f,fma"))) static double peak_fp32(long iters)
{
    __m512 acc[CHAINS];
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_ps((float)i);
    const __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(1e-7f);
    double t0 = now();
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 24
        for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
    }
    double t = now() - t0;
    float sink = 0;
    for (int i = 0; i < CHAINS; i++) sink += _mm512_reduce_add_ps(acc[i]);
    if (sink == 1.2345f) printf(" ");
    return (double)iters * CHAINS * 32 / t / 1e9; /* 16 lanes x 2 flops */
}
#endif

int main(int argc, char **argv)
{
    const int iters = argc > 1 ? atoi(argv[1]) : 5;
    if (iters < 1) return 2;
    openblas_set_num_threads(1);
    printf("{\"blas_core\": \"%s\", \"own_tile\": \"%s\", \"bf16_path\": \"%s\"}\n",
           openblas_get_corename(), gemm_own_isa(), gemm_bf16_path_why());
    const bool vec = gemm_bf16_path_available(GEMM_BF16_AVX512BF16);
    double geo_blas = 0, geo_own = 0;
    int counted = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const shape *x = &shapes[s];
        const int lda = x->ta ? x->m : x->k, ldb = x->tb ? x->k : x->n;
        const size_t na = (size_t)x->m * x->k, nb = (size_t)x->k * x->n, nc = (size_t)x->m * x->n;
        float *a = malloc(na * 4), *b = malloc(nb * 4), *c = malloc(nc * 4);
        bf16 *ah = malloc(na * 2), *bh = malloc(nb * 2);
        const size_t ws_bytes = gemm_bf16_workspace(x->m, x->n, x->k);
        void *ws = malloc(ws_bytes);
        double *t[4];
        for (int i = 0; i < 4; i++) t[i] = malloc(sizeof(double) * iters);
        if (!a || !b || !c || !ah || !bh || !ws || !t[3]) return 1;
        for (size_t i = 0; i < na; i++) a[i] = (float)(i % 17) * 0.01f - 0.08f;
        for (size_t i = 0; i < nb; i++) b[i] = (float)(i % 13) * 0.02f - 0.12f;
        bf16_from_f32_array(a, ah, na);
        bf16_from_f32_array(b, bh, nb);
        for (int i = -1; i < iters; i++) {
            double t0 = now();
            if (vec)
                gemm_bf16_serial_on(GEMM_BF16_AVX512BF16, x->ta, x->tb, x->m, x->n, x->k, 1.0f,
                                    ah, lda, bh, ldb, 0.0f, c, x->n, ws, ws_bytes);
            double t1 = now();
            if (i <= 0) /* the portable path: slow, one timed round */
                gemm_bf16_serial_on(GEMM_BF16_PORTABLE, x->ta, x->tb, x->m, x->n, x->k, 1.0f, ah,
                                    lda, bh, ldb, 0.0f, c, x->n, ws, ws_bytes);
            double t2 = now();
            gemm_own(x->ta, x->tb, x->m, x->n, x->k, 1.0f, a, lda, b, ldb, 0.0f, c, x->n);
            double t3 = now();
            cblas_sgemm(CblasRowMajor, x->ta ? CblasTrans : CblasNoTrans,
                        x->tb ? CblasTrans : CblasNoTrans, x->m, x->n, x->k, 1.0f, a, lda, b, ldb,
                        0.0f, c, x->n);
            double t4 = now();
            if (i >= 0) {
                t[0][i] = t1 - t0, t[1][i] = i == 0 ? t2 - t1 : t[1][0];
                t[2][i] = t3 - t2, t[3][i] = t4 - t3;
            }
        }
        double g[4];
        const double flop = 2.0 * x->m * (double)x->n * x->k;
        for (int i = 0; i < 4; i++) {
            qsort(t[i], (size_t)iters, sizeof(double), cmp_double);
            g[i] = flop / t[i][iters / 2] / 1e9;
        }
        const double best = vec ? g[0] : g[1];
        printf("{\"shape\": \"%s\", \"m\": %d, \"n\": %d, \"k\": %d, \"bf16_avx512bf16\": %.1f, "
               "\"bf16_portable\": %.1f, \"fp32_own\": %.1f, \"fp32_openblas\": %.1f, "
               "\"bf16_over_openblas\": %.2f, \"bf16_over_own\": %.2f}\n",
               x->what, x->m, x->n, x->k, vec ? g[0] : 0.0, g[1], g[2], g[3], best / g[3],
               best / g[2]);
        geo_blas += log(best / g[3]), geo_own += log(best / g[2]), counted++;
        free(a), free(b), free(c), free(ah), free(bh), free(ws);
        for (int i = 0; i < 4; i++) free(t[i]);
    }
    printf("{\"geomean_bf16_over_openblas\": %.2f, \"geomean_bf16_over_own\": %.2f}\n",
           exp(geo_blas / counted), exp(geo_own / counted));
#if PCNN_GEMM_BF16_AVX512
    if (vec) {
        /* Alternating rounds, the best of each: the cores are shared. */
        double pb = 0, pf = 0;
        for (int r = 0; r < 7; r++) {
            const double xb = peak_bf16(3000000), xf = peak_fp32(3000000);
            pb = xb > pb ? xb : pb, pf = xf > pf ? xf : pf;
        }
        printf("{\"peak_vdpbf16ps_gflops\": %.1f, \"peak_fp32_fma_gflops\": %.1f, \"ratio\": %.2f}\n",
               pb, pf, pb / pf);
    }
#endif
    return 0;
}
