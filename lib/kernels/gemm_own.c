#include "gemm_own.h"

#include <string.h>

#include "cpu_features.h"

enum { MR = GEMM_OWN_MR, NR = GEMM_OWN_NR, KC = GEMM_OWN_KC, MC = GEMM_OWN_MC };

/* op(X)(i, j) of a row-major X with row stride ld. */
static inline float element(const float *x, int ld, bool trans, int i, int j)
{
    return trans ? x[(size_t)j * ld + i] : x[(size_t)i * ld + j];
}

/* Rows [i0, i0 + mc) and depths [p0, p0 + kc) of alpha * op(A), as
 * consecutive MR-row panels, each kc steps of MR floats; rows past mc are
 * zero so the tile kernel never branches. */
static void pack_a(bool ta, const float *a, int lda, float alpha, int i0, int mc, int p0, int kc,
                   float *dst)
{
    for (int ir = 0; ir < mc; ir += MR) {
        int rows = mc - ir < MR ? mc - ir : MR;
        for (int p = 0; p < kc; p++) {
            float *d = dst + (size_t)ir * kc + (size_t)p * MR;
            int r = 0;
            for (; r < rows; r++) d[r] = alpha * element(a, lda, ta, i0 + ir + r, p0 + p);
            for (; r < MR; r++) d[r] = 0.0f;
        }
    }
}

/* Columns [j0, j0 + cols) and depths [p0, p0 + kc) of op(B): kc steps of NR
 * floats, zero past cols. */
static void pack_b(bool tb, const float *b, int ldb, int j0, int cols, int p0, int kc,
                   float *dst)
{
    for (int p = 0; p < kc; p++) {
        float *d = dst + (size_t)p * NR;
        if (!tb) {
            memcpy(d, b + (size_t)(p0 + p) * ldb + j0, (size_t)cols * sizeof(float));
        } else {
            for (int j = 0; j < cols; j++) d[j] = b[(size_t)(j0 + j) * ldb + p0 + p];
        }
        for (int j = cols; j < NR; j++) d[j] = 0.0f;
    }
}

/* C = beta * C (beta 0: zeros, without reading C), for k == 0. */
static void scale_c(int m, int n, float beta, float *c, int ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float *x = c + (size_t)i * ldc + j;
            *x = beta == 0.0f ? 0.0f : beta * *x;
        }
}

void gemm_own(bool ta, bool tb, int m, int n, int k, float alpha, const float *a, int lda,
              const float *b, int ldb, float beta, float *c, int ldc)
{
    if (m <= 0 || n <= 0) return;
    if (k <= 0 || alpha == 0.0f) {
        scale_c(m, n, beta, c, ldc);
        return;
    }
    gemm_own_tile_fn tile = gemm_own_tile();
    /* 96 KiB + 16 KiB: within any thread's stack, in L2 and L1. */
    float a_pack[MC * KC] __attribute__((aligned(64)));
    float b_pack[KC * NR] __attribute__((aligned(64)));
    for (int p0 = 0; p0 < k; p0 += KC) {
        int kc = k - p0 < KC ? k - p0 : KC;
        float beta_here = p0 == 0 ? beta : 1.0f; /* later slices add to C */
        for (int i0 = 0; i0 < m; i0 += MC) {
            int mc = m - i0 < MC ? m - i0 : MC;
            pack_a(ta, a, lda, alpha, i0, mc, p0, kc, a_pack);
            for (int j0 = 0; j0 < n; j0 += NR) {
                int cols = n - j0 < NR ? n - j0 : NR;
                pack_b(tb, b, ldb, j0, cols, p0, kc, b_pack);
                for (int ir = 0; ir < mc; ir += MR) {
                    int rows = mc - ir < MR ? mc - ir : MR;
                    tile(kc, a_pack + (size_t)ir * kc, b_pack, beta_here,
                         c + (size_t)(i0 + ir) * ldc + j0, ldc, rows, cols);
                }
            }
        }
    }
}

void gemm_own_tile_portable(int kc, const float *a, const float *b, float beta, float *c,
                            int ldc, int rows, int cols)
{
    float acc[MR][NR] = {{0}};
    for (int p = 0; p < kc; p++)
        for (int r = 0; r < MR; r++)
            for (int j = 0; j < NR; j++) acc[r][j] += a[p * MR + r] * b[p * NR + j];
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) {
            float *x = c + (size_t)r * ldc + j;
            *x = beta == 0.0f ? acc[r][j] : acc[r][j] + beta * *x;
        }
}

gemm_own_tile_fn gemm_own_tile(void)
{
#if PCNN_GEMM_OWN_AVX2
    const cpu_features *f = cpu_features_get();
    if (f->avx2 && f->fma) return gemm_own_tile_avx2;
#endif
    return gemm_own_tile_portable;
}

const char *gemm_own_isa(void)
{
    return gemm_own_tile() == gemm_own_tile_portable ? "portable" : "avx2";
}
