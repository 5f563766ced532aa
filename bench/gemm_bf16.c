/* The bf16 GEMM's paths against fp32 SGEMM (OpenBLAS as loaded and the
 * library's own) side by side in one process, one core: the im2col GEMMs
 * of VGG-11 and ResNet-20 (CIFAR-10 32x32, batch 16; forward W x col,
 * weight gradient dy x col^T, input gradient W^T x dy), then larger
 * convolution-shaped products (64..256 channels, 3x3, batch x pixels
 * 8192..32768) and squares 1024, 2048.  First the peaks: tdpbf16ps on
 * resident tiles (AMX), vdpbf16ps and fp32 FMA on independent registers.
 *
 *   gemm_bf16 [ITERS [layers|conv|all]]   (default 5 all; rounds alternate
 *                                          the candidates)
 *
 * One JSON line per shape: GFLOP/s (median; 2 m n k flops) of each path
 * (0: absent; the portable path one round, and none past 4 GFLOP), bf16
 * (the best path) over each fp32, and the AMX path's fraction of the AMX
 * peak.  Everything is timed in the thread's CPU time (one thread), so a
 * shared machine's other processes do not count, only their effect on
 * the caches; the peak loop multiplies random bf16 (the tile unit is
 * faster on small or zero-heavy data, 10-15 % here, which GEMMs on real
 * data do not see). */
#include <cblas.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_clock.h"
#include "kernels/bf16.h"
#include "kernels/cpu_features.h"
#include "kernels/gemm_bf16.h"
#include "kernels/gemm_own.h"

typedef struct { const char *what; int ta, tb, m, n, k; } shape;

/* Convolution cout x (N Ho Wo) x (cin 9) at batch 16. */
static const shape layers[] = {
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

/* The conv-heavy layers the AMX target is about (issue 40: >= 40 % of the
 * AMX peak): C -> C channels, 3x3, batch x pixels columns; and squares. */
static const shape conv[] = {
    {"conv 64->64 b32 16x16 fwd", 0, 0, 64, 8192, 576},
    {"conv 64->64 b32 16x16 wgrad", 0, 1, 64, 576, 8192},
    {"conv 64->64 b32 16x16 dgrad", 1, 0, 576, 8192, 64},
    {"conv 128->128 b32 16x16 fwd", 0, 0, 128, 8192, 1152},
    {"conv 128->128 b32 16x16 wgrad", 0, 1, 128, 1152, 8192},
    {"conv 128->128 b32 16x16 dgrad", 1, 0, 1152, 8192, 128},
    {"conv 256->256 b32 8x8 fwd", 0, 0, 256, 2048, 2304},
    {"conv 256->256 b128 8x8 fwd", 0, 0, 256, 8192, 2304},
    {"conv 256->256 b32 8x8 wgrad", 0, 1, 256, 2304, 2048},
    {"conv 256->256 b32 8x8 dgrad", 1, 0, 2304, 2048, 256},
    {"conv 64->64 b32 32x32 fwd", 0, 0, 64, 32768, 576},
    {"square 1024", 0, 0, 1024, 1024, 1024},
    {"square 2048", 0, 0, 2048, 2048, 2048},
};

/* Thread CPU time, seconds. */
static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}
#define now cpu_now

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

#if PCNN_GEMM_BF16_AMX
/* tdpbf16ps on resident tiles, no loads in the loop: six independent
 * accumulators (tmm0-5) from two sources (tmm6-7), or the GEMM's 2 x 2
 * (tmm0-3 from tmm4-7); the better of the two.  16 x 16 x 32 x 2 flops a
 * tdpbf16ps.  Needs the tile permission (gemm_bf16_path_available). */
static double peak_amx(long iters, int shape)
{
    struct { uint8_t palette, start, res[14]; uint16_t colsb[16]; uint8_t rows[16]; } cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.rows[t] = 16, cfg.colsb[t] = 64;
    static bf16 src[512] __attribute__((aligned(64)));
    unsigned long long r = 40;
    for (int i = 0; i < 512; i++) {
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        src[i] = bf16_from_f32((float)((r >> 33) % 2000001) / 1e6f - 1.0f); /* [-1, 1] */
    }
    __asm__ volatile("ldtilecfg %0" ::"m"(cfg) : "memory");
    __asm__ volatile("tilezero %%tmm0\n\ttilezero %%tmm1\n\ttilezero %%tmm2\n\ttilezero %%tmm3\n\t"
                     "tilezero %%tmm4\n\ttilezero %%tmm5" ::);
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm6\n\ttileloadd (%0,%1,1), %%tmm7" ::"r"(src),
                     "r"(64L) : "memory");
    if (shape == 1)
        __asm__ volatile("tileloadd (%0,%1,1), %%tmm4\n\ttileloadd (%0,%1,1), %%tmm5" ::"r"(src),
                         "r"(64L) : "memory");
    const double t0 = now();
    if (shape == 0)
        for (long it = 0; it < iters; it++)
            __asm__ volatile("tdpbf16ps %%tmm6, %%tmm7, %%tmm0\n\ttdpbf16ps %%tmm7, %%tmm6, %%tmm1\n\t"
                             "tdpbf16ps %%tmm6, %%tmm7, %%tmm2\n\ttdpbf16ps %%tmm7, %%tmm6, %%tmm3\n\t"
                             "tdpbf16ps %%tmm6, %%tmm7, %%tmm4\n\ttdpbf16ps %%tmm7, %%tmm6, %%tmm5" ::);
    else
        for (long it = 0; it < iters; it++)
            __asm__ volatile("tdpbf16ps %%tmm6, %%tmm4, %%tmm0\n\ttdpbf16ps %%tmm7, %%tmm4, %%tmm1\n\t"
                             "tdpbf16ps %%tmm6, %%tmm5, %%tmm2\n\ttdpbf16ps %%tmm7, %%tmm5, %%tmm3" ::);
    const double t = now() - t0;
    __asm__ volatile("tilerelease" ::: "memory");
    return (double)iters * (shape == 0 ? 6 : 4) * 16384 / t / 1e9;
}
#endif

static double amx_peak; /* GFLOP/s, 0 without AMX */

static void peaks(void)
{
#if PCNN_GEMM_BF16_AMX
    if (gemm_bf16_path_available(GEMM_BF16_AMX)) {
        double p6 = 0, p4 = 0; /* best of 7 rounds each: the cores are shared */
        for (int r = 0; r < 7; r++) {
            const double x6 = peak_amx(200000, 0), x4 = peak_amx(300000, 1);
            p6 = x6 > p6 ? x6 : p6, p4 = x4 > p4 ? x4 : p4;
        }
        amx_peak = p6 > p4 ? p6 : p4;
        printf("{\"peak_tdpbf16ps_gflops\": %.1f, \"six_accumulators\": %.1f, "
               "\"two_by_two\": %.1f}\n", amx_peak, p6, p4);
    }
#endif
#if PCNN_GEMM_BF16_AVX512
    if (gemm_bf16_path_available(GEMM_BF16_AVX512BF16)) {
        double pb = 0, pf = 0;
        for (int r = 0; r < 7; r++) {
            const double xb = peak_bf16(3000000), xf = peak_fp32(3000000);
            pb = xb > pb ? xb : pb, pf = xf > pf ? xf : pf;
        }
        printf("{\"peak_vdpbf16ps_gflops\": %.1f, \"peak_fp32_fma_gflops\": %.1f, \"ratio\": %.2f}\n",
               pb, pf, pb / pf);
    }
#endif
}

typedef struct { double over_blas, over_own, amx_frac; int n, n_amx; } summary;

static void run_shape(const shape *x, int iters, summary *sum)
{
    const int lda = x->ta ? x->m : x->k, ldb = x->tb ? x->k : x->n;
    const size_t na = (size_t)x->m * x->k, nb = (size_t)x->k * x->n, nc = (size_t)x->m * x->n;
    float *a = malloc(na * 4), *b = malloc(nb * 4), *c = malloc(nc * 4);
    bf16 *ah = malloc(na * 2), *bh = malloc(nb * 2);
    const size_t ws_bytes = gemm_bf16_workspace(x->m, x->n, x->k);
    void *ws = malloc(ws_bytes);
    double *t[5];
    for (int i = 0; i < 5; i++) t[i] = malloc(sizeof(double) * iters);
    if (!a || !b || !c || !ah || !bh || !ws || !t[4]) exit(1);
    for (size_t i = 0; i < na; i++) a[i] = (float)(i % 17) * 0.01f - 0.08f;
    for (size_t i = 0; i < nb; i++) b[i] = (float)(i % 13) * 0.02f - 0.12f;
    for (size_t i = 0; i < nc; i++) c[i] = 0.0f;
    bf16_from_f32_array(a, ah, na);
    bf16_from_f32_array(b, bh, nb);
    const double flop = 2.0 * x->m * (double)x->n * x->k;
    const bool has[3] = {flop <= 4e9, gemm_bf16_path_available(GEMM_BF16_AVX512BF16),
                         gemm_bf16_path_available(GEMM_BF16_AMX)};
    for (int i = -1; i < iters; i++) {
        double tt[5] = {0};
        for (int p = 2; p >= 0; p--) { /* amx, avx512bf16, portable */
            if (!has[p] || (p == 0 && i > 0)) continue; /* the portable path: one timed round */
            const double t0 = now();
            gemm_bf16_serial_on((gemm_bf16_path)p, x->ta, x->tb, x->m, x->n, x->k, 1.0f, ah, lda,
                                bh, ldb, 0.0f, c, x->n, ws, ws_bytes);
            tt[p] = now() - t0;
        }
        double t0 = now();
        gemm_own(x->ta, x->tb, x->m, x->n, x->k, 1.0f, a, lda, b, ldb, 0.0f, c, x->n);
        tt[3] = now() - t0;
        t0 = now();
        cblas_sgemm(CblasRowMajor, x->ta ? CblasTrans : CblasNoTrans,
                    x->tb ? CblasTrans : CblasNoTrans, x->m, x->n, x->k, 1.0f, a, lda, b, ldb,
                    0.0f, c, x->n);
        tt[4] = now() - t0;
        if (i >= 0)
            for (int j = 0; j < 5; j++) t[j][i] = j == 0 && i > 0 ? t[0][0] : tt[j];
    }
    double g[5];
    for (int i = 0; i < 5; i++) {
        qsort(t[i], (size_t)iters, sizeof(double), cmp_double);
        g[i] = t[i][iters / 2] > 0 ? flop / t[i][iters / 2] / 1e9 : 0.0;
        if (i < 3 && !has[i]) g[i] = 0.0;
    }
    const double best = g[2] > 0 ? g[2] : g[1] > 0 ? g[1] : g[0];
    printf("{\"shape\": \"%s\", \"m\": %d, \"n\": %d, \"k\": %d, \"bf16_amx\": %.1f, "
           "\"bf16_avx512bf16\": %.1f, \"bf16_portable\": %.1f, \"fp32_own\": %.1f, "
           "\"fp32_openblas\": %.1f, \"bf16_over_openblas\": %.2f, \"bf16_over_own\": %.2f, "
           "\"amx_of_peak\": %.3f}\n",
           x->what, x->m, x->n, x->k, g[2], g[1], g[0], g[3], g[4], best / g[4], best / g[3],
           amx_peak > 0 ? g[2] / amx_peak : 0.0);
    fflush(stdout);
    sum->over_blas += log(best / g[4]), sum->over_own += log(best / g[3]), sum->n++;
    if (amx_peak > 0) sum->amx_frac += log(g[2] / amx_peak), sum->n_amx++;
    free(a), free(b), free(c), free(ah), free(bh), free(ws);
    for (int i = 0; i < 5; i++) free(t[i]);
}

static void run_table(const char *name, const shape *xs, size_t count, int iters)
{
    summary s = {0};
    for (size_t i = 0; i < count; i++) run_shape(&xs[i], iters, &s);
    printf("{\"table\": \"%s\", \"geomean_bf16_over_openblas\": %.2f, "
           "\"geomean_bf16_over_own\": %.2f, \"geomean_amx_of_peak\": %.3f}\n",
           name, exp(s.over_blas / s.n), exp(s.over_own / s.n),
           s.n_amx ? exp(s.amx_frac / s.n_amx) : 0.0);
}

int main(int argc, char **argv)
{
    const int iters = argc > 1 ? atoi(argv[1]) : 5;
    const char *which = argc > 2 ? argv[2] : "all";
    if (iters < 1 || (strcmp(which, "all") && strcmp(which, "layers") && strcmp(which, "conv"))) {
        fprintf(stderr, "usage: %s [ITERS [layers|conv|all]]\n", argv[0]);
        return 2;
    }
    openblas_set_num_threads(1);
    printf("{\"blas_core\": \"%s\", \"own_tile\": \"%s\", \"bf16_path\": \"%s\"}\n",
           openblas_get_corename(), gemm_own_isa(), gemm_bf16_path_why());
    peaks();
    if (strcmp(which, "conv") != 0)
        run_table("layers", layers, sizeof layers / sizeof *layers, iters);
    if (strcmp(which, "layers") != 0) run_table("conv", conv, sizeof conv / sizeof *conv, iters);
    return 0;
}
