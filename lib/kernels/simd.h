/* AVX-512 building blocks shared by the direct convolution kernels.
 *
 * The kernels are compiled for AVX-512F with a target attribute and chosen
 * at run time (direct_conv_available), so the library itself still runs on
 * any x86-64.  Elsewhere PCNN_AVX512 is 0 and the kernels are not built. */
#ifndef PCNN_SIMD_H
#define PCNN_SIMD_H

#include <stdbool.h>
#include <stddef.h>

#define LANES 16 /* floats per vector */

static inline size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

#if defined(__x86_64__) && defined(__GNUC__)
#define PCNN_AVX512 1
#include <immintrin.h>

#define TARGET __attribute__((target("avx512f,fma")))

/* CPUID and the OS both allow AVX-512F (GCC's check covers XGETBV). */
static inline bool cpu_has_avx512(void) { return __builtin_cpu_supports("avx512f"); }

/* dst[c][r] = src[r][c] for a block of `rows` rows (ld floats apart) of
 * `cols` floats, both at most 16, as a 16x16 register transpose; rows past
 * `rows` read as zero.  Writes `cols` rows of `width` floats (ld_dst
 * apart), width >= rows: the zeros past `rows` too when width is 16. */
TARGET static inline void transpose16(const float *src, size_t ld, int rows, int cols,
                                      float *dst, size_t ld_dst, int width)
{
    const __mmask16 in = (__mmask16)((1u << cols) - 1u), out = (__mmask16)((1u << width) - 1u);
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++)
        r[i] = i < rows ? _mm512_maskz_loadu_ps(in, src + (size_t)i * ld) : _mm512_setzero_ps();
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4)
        for (int j = 0; j < 2; j++) {
            const __m512d a = _mm512_castps_pd(t[i + j]), b = _mm512_castps_pd(t[i + j + 2]);
            r[i + 2 * j] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
            r[i + 2 * j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
        }
    for (int i = 0; i < 16; i += 8)
        for (int j = 0; j < 4; j++) {
            t[i + j] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0x88);
            t[i + j + 4] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0xdd);
        }
    for (int j = 0; j < 8; j++) {
        r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
        r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd);
    }
    for (int i = 0; i < cols; i++) _mm512_mask_storeu_ps(dst + (size_t)i * ld_dst, out, r[i]);
}
#else
#define PCNN_AVX512 0
#endif

#endif
