/* The 6 x 16 AVX2 + FMA tile of the own GEMM: 12 accumulators, two B
 * vectors and one broadcast per step, the register budget of 16 ymm.
 * Compiled with a target attribute and chosen at run time (gemm_own_tile),
 * so the library still runs on any x86-64. */
#include "gemm_own.h"

#if PCNN_GEMM_OWN_AVX2
#include <immintrin.h>

#define TARGET __attribute__((target("avx2,fma")))

/* The lanes below `cols` (0..8) of a vector, as a load/store mask. */
TARGET static inline __m256i lanes_below(int cols)
{
    const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), index);
}

TARGET static inline void store_row(float *c, __m256 lo, __m256 hi, float beta, int cols)
{
    const __m256 vbeta = _mm256_set1_ps(beta);
    if (cols == 16) {
        if (beta != 0.0f) {
            lo = _mm256_fmadd_ps(vbeta, _mm256_loadu_ps(c), lo);
            hi = _mm256_fmadd_ps(vbeta, _mm256_loadu_ps(c + 8), hi);
        }
        _mm256_storeu_ps(c, lo);
        _mm256_storeu_ps(c + 8, hi);
        return;
    }
    const __m256i m_lo = lanes_below(cols), m_hi = lanes_below(cols - 8);
    if (beta != 0.0f) {
        lo = _mm256_fmadd_ps(vbeta, _mm256_maskload_ps(c, m_lo), lo);
        hi = _mm256_fmadd_ps(vbeta, _mm256_maskload_ps(c + 8, m_hi), hi);
    }
    _mm256_maskstore_ps(c, m_lo, lo);
    _mm256_maskstore_ps(c + 8, m_hi, hi);
}

TARGET void gemm_own_tile_avx2(int kc, const float *a, const float *b, float beta, float *c,
                               int ldc, int rows, int cols)
{
    __m256 c0l = _mm256_setzero_ps(), c0h = _mm256_setzero_ps();
    __m256 c1l = _mm256_setzero_ps(), c1h = _mm256_setzero_ps();
    __m256 c2l = _mm256_setzero_ps(), c2h = _mm256_setzero_ps();
    __m256 c3l = _mm256_setzero_ps(), c3h = _mm256_setzero_ps();
    __m256 c4l = _mm256_setzero_ps(), c4h = _mm256_setzero_ps();
    __m256 c5l = _mm256_setzero_ps(), c5h = _mm256_setzero_ps();
    for (int p = 0; p < kc; p++, a += GEMM_OWN_MR, b += GEMM_OWN_NR) {
        const __m256 bl = _mm256_load_ps(b), bh = _mm256_load_ps(b + 8);
        __m256 x = _mm256_broadcast_ss(a + 0);
        c0l = _mm256_fmadd_ps(x, bl, c0l), c0h = _mm256_fmadd_ps(x, bh, c0h);
        x = _mm256_broadcast_ss(a + 1);
        c1l = _mm256_fmadd_ps(x, bl, c1l), c1h = _mm256_fmadd_ps(x, bh, c1h);
        x = _mm256_broadcast_ss(a + 2);
        c2l = _mm256_fmadd_ps(x, bl, c2l), c2h = _mm256_fmadd_ps(x, bh, c2h);
        x = _mm256_broadcast_ss(a + 3);
        c3l = _mm256_fmadd_ps(x, bl, c3l), c3h = _mm256_fmadd_ps(x, bh, c3h);
        x = _mm256_broadcast_ss(a + 4);
        c4l = _mm256_fmadd_ps(x, bl, c4l), c4h = _mm256_fmadd_ps(x, bh, c4h);
        x = _mm256_broadcast_ss(a + 5);
        c5l = _mm256_fmadd_ps(x, bl, c5l), c5h = _mm256_fmadd_ps(x, bh, c5h);
    }
    const __m256 lo[GEMM_OWN_MR] = {c0l, c1l, c2l, c3l, c4l, c5l};
    const __m256 hi[GEMM_OWN_MR] = {c0h, c1h, c2h, c3h, c4h, c5h};
    for (int r = 0; r < rows; r++) store_row(c + (size_t)r * ldc, lo[r], hi[r], beta, cols);
}
#endif
