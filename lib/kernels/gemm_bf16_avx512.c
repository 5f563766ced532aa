/* The 8 x 32 vdpbf16ps tile of the bf16 GEMM: 16 zmm accumulators, two B
 * vectors of 16 k-pairs each and one broadcast A pair per row and step.
 * Compiled with a target attribute, chosen at run time (gemm_bf16.c). */
#include "gemm_bf16.h"

#if PCNN_GEMM_BF16_AVX512
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "simd.h" /* transpose16 */
#undef TARGET
#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

TARGET static inline void store_row(float *c, __m512 lo, __m512 hi, float alpha, float beta,
                                    int cols)
{
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    const __mmask16 m_lo = cols >= 16 ? 0xffff : (__mmask16)((1u << cols) - 1u);
    const __mmask16 m_hi = cols >= 32 ? 0xffff : cols <= 16 ? 0 : (__mmask16)((1u << (cols - 16)) - 1u);
    lo = _mm512_mul_ps(va, lo), hi = _mm512_mul_ps(va, hi);
    /* alpha*acc + beta*C, each product rounded: the portable tile's bits. */
    if (beta != 0.0f) {
        lo = _mm512_add_ps(lo, _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(m_lo, c)));
        hi = _mm512_add_ps(hi, _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(m_hi, c + 16)));
    }
    _mm512_mask_storeu_ps(c, m_lo, lo);
    _mm512_mask_storeu_ps(c + 16, m_hi, hi);
}

TARGET void gemm_bf16_tile_avx512(int kq, const bf16 *a, const bf16 *b, float alpha, float beta,
                                  float *c, int ldc, int rows, int cols)
{
    __m512 acc[GEMM_BF16_MR][2];
#pragma GCC unroll 8
    for (int r = 0; r < GEMM_BF16_MR; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int q = 0; q < kq; q++, a += 2 * GEMM_BF16_MR, b += 2 * GEMM_BF16_NR) {
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b);
        const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + 32);
#pragma GCC unroll 8
        for (int r = 0; r < GEMM_BF16_MR; r++) {
            uint32_t pair;
            memcpy(&pair, a + 2 * r, 4);
            const __m512bh x = (__m512bh)_mm512_set1_epi32((int)pair);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], x, b0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], x, b1);
        }
    }
    for (int r = 0; r < rows; r++)
        store_row(c + (size_t)r * ldc, acc[r][0], acc[r][1], alpha, beta, cols);
}

TARGET void gemm_bf16_pack_bt_avx512(const bf16 *src, int ld32, int cols, int pairs, bf16 *dst)
{
    /* A k-pair is 32 bits: the pack is a 32-bit transpose, 16 x 16 at a
     * time (simd.h), the second half of the sliver's columns zero-filled. */
    const float *s = (const float *)(const void *)src;
    float *d = (float *)(void *)dst;
    for (int qb = 0; qb < pairs; qb += 16) {
        const int nq = pairs - qb < 16 ? pairs - qb : 16;
        for (int jb = 0; jb < GEMM_BF16_NR; jb += 16) {
            const int rows = cols - jb < 0 ? 0 : cols - jb > 16 ? 16 : cols - jb;
            transpose16(s + (size_t)jb * ld32 + qb, (size_t)ld32, rows, nq,
                        d + (size_t)qb * GEMM_BF16_NR + jb, GEMM_BF16_NR, 16);
        }
    }
}

TARGET void gemm_bf16_interleave_avx512(const bf16 *r0, const bf16 *r1, int n, bf16 *dst)
{
    static const uint16_t lo_idx[32] = {0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39,
                                        8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
    const __m512i il = _mm512_loadu_si512(lo_idx);
    const __m512i ih = _mm512_add_epi16(il, _mm512_set1_epi16(16));
    const __mmask32 k = n >= 32 ? 0xffffffffu : (__mmask32)((1u << n) - 1u);
    const __m512i x = _mm512_maskz_loadu_epi16(k, r0);
    const __m512i y = r1 ? _mm512_maskz_loadu_epi16(k, r1) : _mm512_setzero_si512();
    _mm512_storeu_si512(dst, _mm512_permutex2var_epi16(x, il, y));
    _mm512_storeu_si512(dst + 32, _mm512_permutex2var_epi16(x, ih, y));
}
#endif
