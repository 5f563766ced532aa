/* fp32 <-> bf16 (lib/kernels/bf16.h), the scalar and the vector path,
 * against a reference written differently: the two bf16 neighbours of x
 * by truncation, the nearer one by exact double distance, ties to the even
 * mantissa, and past the largest finite bf16 the value 2^128 standing for
 * infinity (IEEE's unbounded-exponent rule).  Edge cases by bit pattern,
 * then every 16-bit low half under selected high halves, then random bits. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../common/expect.h"
#include "kernels/bf16.h"

static float from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

static double bf16_value(uint32_t h) /* magnitude bits 0..0x7f80 */
{
    if (h == 0x7f80u) return ldexp(1.0, 128);
    return (double)from_bits(h << 16);
}

static uint16_t reference(uint32_t u)
{
    const uint32_t sign = u & 0x80000000u, mag = u & 0x7fffffffu;
    if (mag > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* NaN: quiet, payload top */
    if (mag == 0x7f800000u) return (uint16_t)(u >> 16);
    const uint32_t lo = mag >> 16, hi = lo + 1;
    const double x = (double)from_bits(mag);
    const double dlo = x - bf16_value(lo), dhi = bf16_value(hi) - x;
    uint32_t r;
    if (dlo < dhi) r = lo;
    else if (dhi < dlo) r = hi;
    else r = (lo & 1u) ? hi : lo;
    return (uint16_t)((sign >> 16) | r);
}

static int checked;
static void check_one(uint32_t u)
{
    const uint16_t want = reference(u), got = bf16_from_f32(from_bits(u));
    checked++;
    EXPECT(got == want, "bits 0x%08x: got 0x%04x, want 0x%04x", u, got, want);
}

/* The array paths (vector where the CPU has it) on n values from `bits`,
 * at lengths around the 16-lane width so the masked tail runs. */
static void check_arrays(const uint32_t *bits, size_t n)
{
    float src[64];
    bf16 got[64 + 1], scalar[64];
    float back[64];
    for (size_t len = 0; len <= n && len <= 64; len++) {
        for (size_t i = 0; i < len; i++) src[i] = from_bits(bits[i]);
        got[len] = 0xabcd; /* past the end: must stay */
        bf16_from_f32_array(src, got, len);
        bf16_from_f32_scalar(src, scalar, len);
        EXPECT(got[len] == 0xabcd, "array conversion of %zu wrote past the end", len);
        for (size_t i = 0; i < len; i++)
            EXPECT(got[i] == reference(bits[i]) && scalar[i] == got[i],
                   "array len %zu [%zu] bits 0x%08x: vector 0x%04x scalar 0x%04x", len, i,
                   bits[i], got[i], scalar[i]);
        bf16_to_f32_array(got, back, len);
        for (size_t i = 0; i < len; i++) {
            uint32_t u;
            memcpy(&u, &back[i], 4);
            EXPECT(u == (uint32_t)got[i] << 16, "widening [%zu] 0x%04x gave 0x%08x", i, got[i], u);
        }
    }
}

int main(void)
{
    printf("array conversion path: %s\n", bf16_convert_isa());
    const uint32_t edges[] = {
        0x00000000, 0x80000000,             /* zeros keep their sign */
        0x00000001, 0x80000001,             /* smallest subnormal: rounds to 0 */
        0x00008000, 0x00018000, 0x80018000, /* subnormal ties: to even (0, then up) */
        0x00008001, 0x00007fff,             /* just past / before a tie */
        0x007fffff, 0x00800000,             /* largest subnormal rounds to the smallest normal */
        0x3f800000, 0x3f808000, 0x3f818000, /* 1.0; ties at 1.0 (down) and odd (up) */
        0x3f807fff, 0x3f808001, 0xbf808001,
        0x7f7f0000, 0x7f7f7fff,             /* largest bf16 finite, just below its tie */
        0x7f7f8000, 0x7f7fffff, 0xff7fffff, /* tie and max fp32 finite: overflow to inf */
        0x7f800000, 0xff800000,             /* infinities */
        0x7fc00000, 0xffc00000, 0x7f800001, /* quiet NaN; signalling NaN, payload low */
        0xff800001, 0x7fa00000, 0x7fffffff, 0x7f80ffff,
    };
    const size_t n_edges = sizeof edges / sizeof *edges;
    for (size_t i = 0; i < n_edges; i++) check_one(edges[i]);
    /* Named expectations, so the reference itself is pinned. */
    EXPECT(bf16_from_f32(from_bits(0x00008000)) == 0x0000, "subnormal tie to even");
    EXPECT(bf16_from_f32(from_bits(0x00018000)) == 0x0002, "subnormal tie, odd: up");
    EXPECT(bf16_from_f32(from_bits(0x007fffff)) == 0x0080, "largest subnormal");
    EXPECT(bf16_from_f32(from_bits(0x3f808000)) == 0x3f80, "tie at 1.0 stays");
    EXPECT(bf16_from_f32(from_bits(0x3f818000)) == 0x3f82, "odd tie rounds up");
    EXPECT(bf16_from_f32(from_bits(0x7f7f7fff)) == 0x7f7f, "below max tie");
    EXPECT(bf16_from_f32(from_bits(0x7f7fffff)) == 0x7f80, "fp32 max -> inf");
    EXPECT(bf16_from_f32(from_bits(0xff800000)) == 0xff80, "-inf");
    EXPECT(bf16_from_f32(from_bits(0x7f800001)) == 0x7fc0, "sNaN made quiet");
    EXPECT(bf16_from_f32(from_bits(0xffa00000)) == 0xffe0, "NaN sign and payload kept");
    EXPECT(isnan(bf16_to_f32(bf16_from_f32(NAN))), "NaN round trip");
    check_arrays(edges, n_edges);

    /* Every low half under high halves at each interesting place. */
    const uint32_t highs[] = {0x0000, 0x0001, 0x007f, 0x0080, 0x3f80, 0x3f81,
                              0x7f7e, 0x7f7f, 0x7f80, 0x7fc0, 0x8000, 0xbf81, 0xff7f, 0xff80};
    for (size_t h = 0; h < sizeof highs / sizeof *highs; h++)
        for (uint32_t lo = 0; lo < 0x10000u; lo++) check_one(highs[h] << 16 | lo);
    /* Every bf16 widens exactly and narrows back to itself (NaN: quiet). */
    for (uint32_t h = 0; h < 0x10000u; h++) {
        const bf16 back = bf16_from_f32(bf16_to_f32((bf16)h));
        const int nan = (h & 0x7fffu) > 0x7f80u;
        EXPECT(back == (nan ? (bf16)(h | 0x40u) : (bf16)h), "round trip 0x%04x -> 0x%04x", h, back);
    }
    /* Random bit patterns, through the array path as well. */
    uint64_t s = 40;
    uint32_t batch[64];
    for (int r = 0; r < 20000; r++) {
        for (int i = 0; i < 64; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            batch[i] = (uint32_t)(s >> 32);
            check_one(batch[i]);
        }
        if (r % 100 == 0) check_arrays(batch, 64);
    }
    printf("%d values checked, %d failures\n", checked, failures);
    return failures != 0;
}
