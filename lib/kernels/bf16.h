/* bfloat16 storage: the top 16 bits of an IEEE binary32.  fp32 -> bf16
 * rounds to nearest, ties to even; NaN stays NaN (made quiet, sign kept),
 * infinities stay infinite, finite values past the largest bf16 round to
 * infinity as IEEE says, and subnormals are kept (never flushed), so the
 * vector and scalar paths give the same bits.  bf16 -> fp32 is exact.
 *
 * The array conversions pick AVX-512 integer arithmetic at run time where
 * the CPU has it (not vcvtneps2bf16: that flushes subnormals), else the
 * scalar loop. */
#ifndef PCNN_BF16_H
#define PCNN_BF16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef uint16_t bf16;

static inline bf16 bf16_from_f32(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (bf16)((u >> 16) | 0x0040u); /* quiet NaN */
    /* Adding 0x7fff plus the kept lowest bit rounds ties to the even side;
     * a carry into the exponent is the right rounding (up to infinity). */
    return (bf16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static inline float bf16_to_f32(bf16 h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* dst[i] = bf16_from_f32(src[i]) / bf16_to_f32(src[i]), i < n. */
void bf16_from_f32_array(const float *src, bf16 *dst, size_t n);
void bf16_to_f32_array(const bf16 *src, float *dst, size_t n);

/* The scalar loops, always built (the tests compare both paths). */
void bf16_from_f32_scalar(const float *src, bf16 *dst, size_t n);
void bf16_to_f32_scalar(const bf16 *src, float *dst, size_t n);

/* The name of the path the array conversions take: "avx512" or "scalar". */
const char *bf16_convert_isa(void);

#endif
