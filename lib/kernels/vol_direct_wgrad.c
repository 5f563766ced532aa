/* The weight gradient of a stride-1 3D convolution without the vol2col
 * matrix.
 *
 * dW[co][ci][kd][kh][kw] = sum over (n, z, y, x) of dY[co][n][z][y][x] times
 * xp[ci][n][z + kd][y + kh][x + kw] (xp: x zero-padded, vol_direct.c).  A
 * vector of 16 outputs along x of a row, for a block of 8 output channels
 * and 3 taps along kw, is 8 loads of dY and 3 of xp for 24 FMAs into 24
 * register accumulators, one partial sum per lane.  The accumulators of
 * one (ci, kd, kh, kw group) live in `lanes` between chunks of rows; a
 * chunk (rows of one plane, at most 512 positions: 16 KB of dY for 8
 * channels) stays in L1 while every (ci, kd, kh) of the unit sweeps it.
 * Each lane adds its terms in the order of the positions whatever the
 * chunking, and the lanes are summed once at the end, so the result does
 * not depend on the thread count.  This replaces a 16 x 108 x 4*32^3 GEMM
 * over a 56 MB vol2col matrix for CosmoFlow-mini's conv1, and the
 * 432-row matrix of conv2. */
#include <string.h>

#include "simd.h"
#include "vol_direct.h"

#define KW_GROUP 3       /* taps along kw per pass */
#define CHUNK_POSITIONS 512 /* rows of a chunk, across planes: 16 KB of dY for 8 channels */

/* Output channels per block: 8, or 4 for at most 4. */
static int wgrad_block(int cout) { return cout <= 4 ? 4 : 8; }

size_t vol_direct_wgrad_lane_floats(int cout, int cin, int k)
{
    const size_t b = (size_t)wgrad_block(cout), blocks = ((size_t)cout + b - 1) / b;
    return blocks * b * (size_t)cin * (size_t)k * k * k * LANES;
}

#if PCNN_AVX512

typedef struct wgrad_call {
    const vol_shape *g;
    const float *xp, *dy;
    float *lanes, *dw;
    int cout, groups; /* input-channel groups per block of output channels */
} wgrad_call;

/* One chunk of rows [r0, r1) of sample n (row r = z * Ho + y) for input
 * channel ci, taps
 * (kd, kh, kw0 .. kw0 + NKW) and output channels co0 .. co0 + CO (rows past
 * cout read channel co0 again; their sums are never used).  acc points at
 * the CO x NKW lane vectors of these taps (stride k between channels).
 * PAIRED (rows of Wo <= 8): two rows per vector, adjacent in dY, and in the
 * lanes Wo.. of a second masked load of x. */
TARGET static inline __attribute__((always_inline)) void
chunk(const wgrad_call *a, int n, int r0, int r1, int ci, int kd, int kh, int kw0, int co0,
      float *acc_mem, const int CO, const int NKW, const bool PAIRED)
{
    const vol_shape *g = a->g;
    const int k = g->k, p = g->pad;
    const int hp = g->h + 2 * p, wp = g->w + 2 * p, dp = g->d + 2 * p;
    const size_t ov = (size_t)g->od * g->oh * g->ow;
    const float *dyr[8];
#pragma GCC unroll 12
    for (int o = 0; o < CO; o++) {
        const int co = co0 + o < a->cout ? co0 + o : co0;
        dyr[o] = a->dy + ((size_t)co * g->n + n) * ov;
    }
    const float *xr = a->xp + ((size_t)ci * g->n + n) * dp * hp * wp +
                      ((size_t)kd * hp + kh) * wp + kw0;
    __m512 acc[8][KW_GROUP];
#pragma GCC unroll 12
    for (int o = 0; o < CO; o++)
#pragma GCC unroll 12
        for (int j = 0; j < NKW; j++)
            acc[o][j] = _mm512_loadu_ps(acc_mem + ((size_t)o * k + j) * LANES);
    const __mmask16 first = (__mmask16)((1u << (g->ow < LANES ? g->ow : LANES)) - 1u);
    for (int r = r0; PAIRED && r < r1; r += 2) {
        const bool two = r + 1 < r1;
        const __mmask16 m = two ? (__mmask16)((1u << 2 * g->ow) - 1u) : first;
        const float *x0 = xr + ((size_t)(r / g->oh) * hp + r % g->oh) * wp;
        const float *x1 = two ? xr + ((size_t)((r + 1) / g->oh) * hp + (r + 1) % g->oh) * wp -
                                    g->ow
                              : x0;
        __m512 xv[KW_GROUP];
#pragma GCC unroll 12
        for (int j = 0; j < NKW; j++)
            xv[j] = _mm512_mask_loadu_ps(_mm512_maskz_loadu_ps(first, x0 + j),
                                         m & (__mmask16)~first, x1 + j);
#pragma GCC unroll 12
        for (int o = 0; o < CO; o++) {
            const __m512 d = _mm512_maskz_loadu_ps(m, dyr[o] + (size_t)r * g->ow);
#pragma GCC unroll 12
            for (int j = 0; j < NKW; j++) acc[o][j] = _mm512_fmadd_ps(d, xv[j], acc[o][j]);
        }
    }
    for (int r = r0; !PAIRED && r < r1; r++) {
        const int z = r / g->oh, y = r % g->oh;
        const float *xrow = xr + ((size_t)z * hp + y) * wp;
        for (int x0 = 0; x0 < g->ow; x0 += LANES) {
            const int left = g->ow - x0;
            const __mmask16 m = left >= LANES ? 0xffff : (__mmask16)((1u << left) - 1u);
            const size_t at = (size_t)r * g->ow + x0;
            const float *xs = xrow + x0;
            __m512 xv[KW_GROUP];
#pragma GCC unroll 12
            for (int j = 0; j < NKW; j++) xv[j] = _mm512_maskz_loadu_ps(m, xs + j);
#pragma GCC unroll 12
            for (int o = 0; o < CO; o++) {
                const __m512 d = _mm512_maskz_loadu_ps(m, dyr[o] + at);
#pragma GCC unroll 12
                for (int j = 0; j < NKW; j++) acc[o][j] = _mm512_fmadd_ps(d, xv[j], acc[o][j]);
            }
        }
    }
#pragma GCC unroll 12
    for (int o = 0; o < CO; o++)
#pragma GCC unroll 12
        for (int j = 0; j < NKW; j++)
            _mm512_storeu_ps(acc_mem + ((size_t)o * k + j) * LANES, acc[o][j]);
}

#define CHUNK_FN(CO, NKW, PAIRED, NAME)                                                      \
    TARGET static void NAME(const wgrad_call *a, int n, int r0, int r1, int ci, int kd, int kh, \
                            int kw0, int co0, float *acc_mem)                                \
    {                                                                                        \
        chunk(a, n, r0, r1, ci, kd, kh, kw0, co0, acc_mem, CO, NKW, PAIRED);                 \
    }
CHUNK_FN(4, 1, false, chunk_4_1)
CHUNK_FN(4, 2, false, chunk_4_2)
CHUNK_FN(4, 3, false, chunk_4_3)
CHUNK_FN(8, 1, false, chunk_8_1)
CHUNK_FN(8, 2, false, chunk_8_2)
CHUNK_FN(8, 3, false, chunk_8_3)
CHUNK_FN(4, 1, true, paired_4_1)
CHUNK_FN(4, 2, true, paired_4_2)
CHUNK_FN(4, 3, true, paired_4_3)
CHUNK_FN(8, 1, true, paired_8_1)
CHUNK_FN(8, 2, true, paired_8_2)
CHUNK_FN(8, 3, true, paired_8_3)

typedef void (*chunk_fn)(const wgrad_call *, int, int, int, int, int, int, int, int, float *);

/* Units u = (block of output channels, group of input channels). */
TARGET static void wgrad_range(void *arg, size_t u0, size_t u1)
{
    const wgrad_call *a = arg;
    const vol_shape *g = a->g;
    const int k = g->k, k3 = k * k * k, cin = g->c, bs = wgrad_block(a->cout);
    const chunk_fn fns[2][2][KW_GROUP] = {
        {{chunk_4_1, chunk_4_2, chunk_4_3}, {chunk_8_1, chunk_8_2, chunk_8_3}},
        {{paired_4_1, paired_4_2, paired_4_3}, {paired_8_1, paired_8_2, paired_8_3}}};
    const chunk_fn *fn = fns[g->ow <= LANES / 2][bs == 8];
    const int rows = g->ow >= CHUNK_POSITIONS ? 1 : CHUNK_POSITIONS / g->ow;
    const size_t tap_floats = (size_t)bs * k * LANES; /* one (ci, kd, kh) */
    for (size_t u = u0; u < u1; u++) {
        const int b = (int)(u / (size_t)a->groups), grp = (int)(u % (size_t)a->groups);
        const int ci0 = grp * cin / a->groups, ci1 = (grp + 1) * cin / a->groups;
        const int co0 = b * bs;
        float *lanes = a->lanes + (size_t)b * bs * cin * k3 * LANES;
        memset(lanes + (size_t)ci0 * k * k * tap_floats, 0,
               (size_t)(ci1 - ci0) * k * k * tap_floats * sizeof *lanes);
        const int sample_rows = g->od * g->oh;
        for (int n = 0; n < g->n; n++)
            for (int r0 = 0; r0 < sample_rows; r0 += rows) {
                const int r1 = r0 + rows < sample_rows ? r0 + rows : sample_rows;
                for (int ci = ci0; ci < ci1; ci++)
                    for (int kd = 0; kd < k; kd++)
                        for (int kh = 0; kh < k; kh++) {
                            float *tap = lanes + ((size_t)(ci * k + kd) * k + kh) * tap_floats;
                            for (int kw0 = 0; kw0 < k; kw0 += KW_GROUP) {
                                const int nkw = k - kw0 < KW_GROUP ? k - kw0 : KW_GROUP;
                                fn[nkw - 1](a, n, r0, r1, ci, kd, kh, kw0, co0,
                                            tap + (size_t)kw0 * LANES);
                            }
                        }
            }
        /* Lanes -> dW for the unit's real channels. */
        for (int o = 0; o < bs && co0 + o < a->cout; o++)
            for (int ci = ci0; ci < ci1; ci++)
                for (int kd = 0; kd < k; kd++)
                    for (int kh = 0; kh < k; kh++) {
                        const float *tap = lanes + ((size_t)(ci * k + kd) * k + kh) * tap_floats;
                        float *out = a->dw + ((size_t)(co0 + o) * cin + ci) * k3 +
                                     (size_t)(kd * k + kh) * k;
                        for (int kw = 0; kw < k; kw++)
                            out[kw] = _mm512_reduce_add_ps(
                                _mm512_loadu_ps(tap + ((size_t)o * k + kw) * LANES));
                    }
    }
}

/* Input-channel groups per block: a unit's lanes (every chunk sweeps them
 * all) within LANE_BYTES, so that they stay in L2 beside the chunk; enough
 * units for every thread, and a multiple of the thread count where a few
 * more units allow it (a contiguous cut of units per thread, parallel.c).
 * More groups read dY once more each. */
#define LANE_BYTES (256 << 10)
static int channel_groups(int blocks, int bs, int cin, int k, int threads)
{
    const size_t per_channel = (size_t)bs * k * k * k * LANES * sizeof(float);
    int groups = 1;
    while (groups < cin &&
           (per_channel * (size_t)((cin + groups - 1) / groups) > LANE_BYTES ||
            blocks * groups < threads ||
            ((blocks * groups) % threads != 0 && blocks * groups < 4 * threads)))
        groups++;
    return groups;
}

void vol_direct_backward_weights(const float *x, const vol_shape *g, const float *dy, int cout,
                                 float *xp, float *lanes, float *dw, int threads)
{
    vol_direct_pad(x, g, xp, threads);
    const int bs = wgrad_block(cout), blocks = (cout + bs - 1) / bs;
    const int t = threads > 0 ? threads : 1;
    wgrad_call a = {g, xp, dy, lanes, dw, cout, channel_groups(blocks, bs, g->c, g->k, t)};
    const size_t work = (size_t)cout * g->n * g->od * g->oh * g->ow * g->c * g->k * g->k * g->k;
    parallel_for((size_t)blocks * a.groups, 1, work, threads, wgrad_range, &a);
}

#else

void vol_direct_backward_weights(const float *x, const vol_shape *g, const float *dy, int cout,
                                 float *xp, float *lanes, float *dw, int threads)
{
    (void)x, (void)g, (void)dy, (void)cout, (void)xp, (void)lanes, (void)dw, (void)threads;
}

#endif
