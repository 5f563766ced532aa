/* fp32 <-> bf16 arrays.  See bf16.h. */
#include "bf16.h"

#include <stdbool.h>

#include "cpu_features.h"

void bf16_from_f32_scalar(const float *src, bf16 *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = bf16_from_f32(src[i]);
}

void bf16_to_f32_scalar(const bf16 *src, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = bf16_to_f32(src[i]);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define BF16_VECTOR 1
#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))

/* bf16_from_f32 on 16 lanes, the same integer steps. */
TARGET static inline __m256i round16(__m512i u)
{
    const __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(abs, _mm512_set1_epi32(0x7f800000));
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
    r = _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x00400000));
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16));
}

TARGET static void from_f32_avx512(const float *src, bf16 *dst, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + i), round16(_mm512_loadu_si512(src + i)));
    if (i < n) {
        const __mmask16 k = (__mmask16)((1u << (n - i)) - 1u);
        const __m256i h = round16(_mm512_maskz_loadu_epi32(k, src + i));
        _mm256_mask_storeu_epi16(dst + i, k, h);
    }
}

TARGET static void to_f32_avx512(const bf16 *src, float *dst, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + i)));
        _mm512_storeu_si512(dst + i, _mm512_slli_epi32(w, 16));
    }
    if (i < n) {
        const __mmask16 k = (__mmask16)((1u << (n - i)) - 1u);
        const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, src + i));
        _mm512_mask_storeu_epi32(dst + i, k, _mm512_slli_epi32(w, 16));
    }
}
#else
#define BF16_VECTOR 0
#endif

static bool vector_ok(void)
{
#if BF16_VECTOR
    const cpu_features *f = cpu_features_get();
    return f->avx512f && f->avx512bw && f->avx512vl;
#else
    return false;
#endif
}

void bf16_from_f32_array(const float *src, bf16 *dst, size_t n)
{
#if BF16_VECTOR
    if (vector_ok()) {
        from_f32_avx512(src, dst, n);
        return;
    }
#endif
    bf16_from_f32_scalar(src, dst, n);
}

void bf16_to_f32_array(const bf16 *src, float *dst, size_t n)
{
#if BF16_VECTOR
    if (vector_ok()) {
        to_f32_avx512(src, dst, n);
        return;
    }
#endif
    bf16_to_f32_scalar(src, dst, n);
}

const char *bf16_convert_isa(void) { return vector_ok() ? "avx512" : "scalar"; }
