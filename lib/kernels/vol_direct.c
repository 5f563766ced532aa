/* Direct forward 3D convolution, stride 1, without the vol2col matrix.
 *
 * The input is first copied into a zero-padded batch (C x N x Dp x Hp x Wp,
 * Dp = D + 2p ...), so that every tap of every output is in range.  A tile
 * of two vectors of outputs -- an output row (n, z, y) of up to 32
 * positions, or two rows of up to 16 each, or four rows of up to 8, two
 * to a vector -- times a block of up to 12 output channels is held in
 * registers: for each input channel and each of the k^3 taps, the two
 * vectors of the padded input at that tap are loaded once and multiplied
 * by the 12 broadcast weights.  Nothing is built per position, which
 * matters where vol2col + GEMM is bound by memory: few channels
 * (CosmoFlow's conv1: 4 -> 16 on 128^3, whose vol2col matrix is 108 rows
 * of the whole volume and whose GEMM has 16 rows).
 *
 * The same kernel computes the input gradient (vol_direct_backward.c): a
 * forward convolution of dY with the flipped, transposed kernel, adding
 * into dx when asked (vol_direct_convolve's accumulate).
 *
 * AVX-512F only (simd.h), checked at run time; elsewhere vol_direct_available
 * is false and the layer keeps vol2col + GEMM. */
#include <string.h>

#include "kernels.h"
#include "simd.h"
#include "vol_direct.h"

#define X_VECS 2 /* vectors of outputs per tile, at most */

/* Output channels per tile: 12 (12 x 2 accumulators, 2 loads per 24
 * FMAs) unless that pads cout by more than a tenth; then 8, or 4 for
 * at most 4 channels. */
int vol_direct_block(int cout)
{
    if (cout <= 4) return 4;
    const int waste12 = (cout + 11) / 12 * 12 - cout;
    return waste12 * 10 <= cout ? 12 : 8;
}

size_t vol_direct_pad_floats(const vol_shape *g)
{
    return (size_t)g->c * g->n * (size_t)(g->d + 2 * g->pad) * (size_t)(g->h + 2 * g->pad) *
           (size_t)(g->w + 2 * g->pad);
}

size_t vol_direct_packed_floats(int cout, int cin, int k)
{
    const size_t b = (size_t)vol_direct_block(cout), blocks = ((size_t)cout + b - 1) / b;
    return blocks * (size_t)cin * (size_t)k * k * k * b;
}

#if PCNN_AVX512

bool vol_direct_available(void) { return cpu_has_avx512(); }

/* xp[z][y][x] = x[z + off[0]][y + off[1]][x + off[2]] over xp's dims ext,
 * zero where that leaves x (g's d, h, w). */
typedef struct pad_call {
    const vol_shape *g;
    const float *x;
    float *xp;
    int off[3], ext[3];
} pad_call;

static int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Units: (channel, sample) volumes, each written whole (zeros included). */
static void pad_range(void *arg, size_t u0, size_t u1)
{
    const pad_call *a = arg;
    const vol_shape *g = a->g;
    const int *o = a->off, *e = a->ext;
    const size_t vin = (size_t)g->d * g->h * g->w, vp = (size_t)e[0] * e[1] * e[2];
    /* The window's points that read x, per dimension. */
    const int z0 = clamp_int(-o[0], 0, e[0]), z1 = clamp_int(g->d - o[0], z0, e[0]);
    const int y0 = clamp_int(-o[1], 0, e[1]), y1 = clamp_int(g->h - o[1], y0, e[1]);
    const int x0 = clamp_int(-o[2], 0, e[2]), x1 = clamp_int(g->w - o[2], x0, e[2]);
    for (size_t u = u0; u < u1; u++) {
        const float *src = a->x + u * vin;
        float *dst = a->xp + u * vp;
        memset(dst, 0, vp * sizeof *dst);
        for (int z = z0; z < z1; z++)
            for (int y = y0; y < y1; y++)
                memcpy(dst + ((size_t)z * e[1] + (size_t)y) * e[2] + x0,
                       src + ((size_t)(z + o[0]) * g->h + (size_t)(y + o[1])) * g->w +
                           (x0 + o[2]),
                       (size_t)(x1 - x0) * sizeof *dst);
    }
}

typedef struct fwd_call {
    const vol_shape *g;
    const float *xp, *packed, *bias;
    float *y;
    int cout;
    bool accumulate; /* y += conv(x) instead of y = conv(x) + bias */
    int stack;       /* output rows per tile: 4 for rows of at most 8 (two per
                        vector), 2 for rows of at most 16, else 1 */
} fwd_call;

/* One tile of output channels [co0, co0 + nco) (nco <= CO) and VECS
 * vectors: vector v holds outputs x0 + 16 v .. of row (n, z, y), or with
 * rows stacked, the whole row y + v, or when PAIRED (rows of Wo <= 8) rows
 * y + 2v and y + 2v + 1 side by side: adjacent in the output, and in the
 * lanes Wo.. of a second masked load from the padded input (m[v] == 0 past
 * the last row, half of it past the last but one).  CO, VECS and PAIRED
 * are constants of each instantiation, so the accumulators stay in
 * registers. */
TARGET static inline __attribute__((always_inline)) void
tile(const fwd_call *a, int n, int z, int y, int x0, const __mmask16 *m, int co0, int nco,
     const int CO, const int VECS, const bool PAIRED)
{
    const vol_shape *g = a->g;
    const int k = g->k, p = g->pad, cin = g->c;
    const int dp = g->d + 2 * p, hp = g->h + 2 * p, wp = g->w + 2 * p;
    const size_t vp = (size_t)dp * hp * wp, plane = (size_t)hp * wp;
    const size_t ov = (size_t)g->od * g->oh * g->ow;
    const size_t in_step = PAIRED ? 2 * (size_t)wp : a->stack > 1 ? (size_t)wp : 16;
    const size_t out_step = PAIRED ? 2 * (size_t)g->ow : a->stack > 1 ? (size_t)g->ow : 16;
    /* PAIRED: the second row's lanes, and where its load starts. */
    const __mmask16 first =
        PAIRED ? (__mmask16)((1u << (g->ow < 16 ? g->ow : 16)) - 1u) : 0; /* ow <= 8 there */
    const ptrdiff_t second = (ptrdiff_t)wp - g->ow;
    float *out0 = a->y + (size_t)co0 * g->n * ov + (size_t)n * ov +
                  ((size_t)z * g->oh + y) * g->ow + x0;
    const size_t out_channel = (size_t)g->n * ov;
    __m512 acc[12][X_VECS];
#pragma GCC unroll 12
    for (int o = 0; o < CO; o++) {
        if (a->accumulate) {
#pragma GCC unroll 12
            for (int v = 0; v < VECS; v++)
                acc[o][v] = o < nco ? _mm512_maskz_loadu_ps(m[v], out0 + o * out_channel +
                                                                      out_step * v)
                                    : _mm512_setzero_ps();
            continue;
        }
        const __m512 b = _mm512_set1_ps(a->bias && o < nco ? a->bias[co0 + o] : 0.0f);
#pragma GCC unroll 12
        for (int v = 0; v < VECS; v++) acc[o][v] = b;
    }
    const float *w = a->packed + (size_t)(co0 / CO) * cin * k * k * k * CO;
    for (int ci = 0; ci < cin; ci++) {
        const float *base = a->xp + ((size_t)ci * g->n + n) * vp + (size_t)z * plane +
                            (size_t)y * wp + x0;
        for (int kd = 0; kd < k; kd++)
            for (int kh = 0; kh < k; kh++) {
                const float *row = base + (size_t)kd * plane + (size_t)kh * wp;
                for (int kw = 0; kw < k; kw++, w += CO) {
                    __m512 in[X_VECS];
#pragma GCC unroll 12
                    for (int v = 0; v < VECS; v++) {
                        const float *at = row + kw + in_step * v;
                        in[v] = PAIRED ? _mm512_mask_loadu_ps(
                                             _mm512_maskz_loadu_ps(m[v] & first, at),
                                             m[v] & (__mmask16)~first, at + second)
                                       : _mm512_maskz_loadu_ps(m[v], at);
                    }
#pragma GCC unroll 12
                    for (int o = 0; o < CO; o++) {
                        const __m512 wo = _mm512_set1_ps(w[o]);
#pragma GCC unroll 12
                        for (int v = 0; v < VECS; v++)
                            acc[o][v] = _mm512_fmadd_ps(in[v], wo, acc[o][v]);
                    }
                }
            }
    }
#pragma GCC unroll 12
    for (int o = 0; o < CO && o < nco; o++)
#pragma GCC unroll 12
        for (int v = 0; v < VECS; v++)
            if (m[v])
                _mm512_mask_storeu_ps(out0 + o * out_channel + out_step * v, m[v], acc[o][v]);
}

#define TILE_FN(CO, VECS, PAIRED, NAME)                                                     \
    TARGET static void NAME(const fwd_call *a, int n, int z, int y, int x0,                 \
                            const __mmask16 *m, int co0, int nco)                           \
    {                                                                                       \
        tile(a, n, z, y, x0, m, co0, nco, CO, VECS, PAIRED);                                \
    }
TILE_FN(4, 1, false, tile_4_1)
TILE_FN(4, 2, false, tile_4_2)
TILE_FN(8, 1, false, tile_8_1)
TILE_FN(8, 2, false, tile_8_2)
TILE_FN(12, 1, false, tile_12_1)
TILE_FN(12, 2, false, tile_12_2)
TILE_FN(4, 1, true, paired_4_1)
TILE_FN(4, 2, true, paired_4_2)
TILE_FN(8, 1, true, paired_8_1)
TILE_FN(8, 2, true, paired_8_2)
TILE_FN(12, 1, true, paired_12_1)
TILE_FN(12, 2, true, paired_12_2)

typedef void (*tile_fn)(const fwd_call *, int, int, int, int, const __mmask16 *, int, int);

static __mmask16 lanes(int count)
{
    return count >= 16 ? 0xffff : count <= 0 ? 0 : (__mmask16)((1u << count) - 1u);
}

/* Units u = (co block, group of `stack` rows of plane (n, z)); each covers
 * its rows whole. */
TARGET static void fwd_range(void *arg, size_t u0, size_t u1)
{
    const fwd_call *a = arg;
    const vol_shape *g = a->g;
    const int co_block = vol_direct_block(a->cout);
    const tile_fn fns[2] = {co_block == 4 ? tile_4_1 : co_block == 8 ? tile_8_1 : tile_12_1,
                            co_block == 4 ? tile_4_2 : co_block == 8 ? tile_8_2 : tile_12_2};
    const tile_fn paired[2] = {
        co_block == 4 ? paired_4_1 : co_block == 8 ? paired_8_1 : paired_12_1,
        co_block == 4 ? paired_4_2 : co_block == 8 ? paired_8_2 : paired_12_2};
    const int groups = (g->oh + a->stack - 1) / a->stack; /* row groups per plane */
    const size_t units_per_block = (size_t)g->n * g->od * groups;
    for (size_t u = u0; u < u1; u++) {
        const int cb = (int)(u / units_per_block);
        const size_t r = u % units_per_block;
        const int y = (int)(r % (size_t)groups) * a->stack;
        const int z = (int)(r / (size_t)groups % (size_t)g->od);
        const int n = (int)(r / ((size_t)groups * g->od));
        const int co0 = cb * co_block;
        const int nco = a->cout - co0 < co_block ? a->cout - co0 : co_block;
        if (a->stack == 4) {
            /* Rows y .. y + 3 (those below Ho), two per vector. */
            const int left = g->oh - y;
            const __mmask16 m[X_VECS] = {lanes(g->ow * (left < 2 ? left : 2)),
                                         lanes(g->ow * (left - 2 < 2 ? left - 2 : 2))};
            paired[m[1] != 0](a, n, z, y, 0, m, co0, nco);
            continue;
        }
        if (a->stack > 1) {
            const __mmask16 m[X_VECS] = {lanes(g->ow), y + 1 < g->oh ? lanes(g->ow) : 0};
            fns[m[1] != 0](a, n, z, y, 0, m, co0, nco);
            continue;
        }
        for (int x0 = 0; x0 < g->ow; x0 += 16 * X_VECS) {
            const int nx = g->ow - x0;
            const __mmask16 m[X_VECS] = {lanes(nx), lanes(nx - 16)};
            fns[nx > 16](a, n, z, y, x0, m, co0, nco);
        }
    }
}

void vol_direct_pad_window(const float *x, const vol_shape *g, const int off[3],
                           const int ext[3], float *xp, int threads)
{
    pad_call pc = {g, x, xp, {off[0], off[1], off[2]}, {ext[0], ext[1], ext[2]}};
    const size_t vols = (size_t)g->c * g->n;
    parallel_for(vols, 1, vols * (size_t)ext[0] * ext[1] * ext[2], threads, pad_range, &pc);
}

void vol_direct_pad(const float *x, const vol_shape *g, float *xp, int threads)
{
    const int p = g->pad;
    const int off[3] = {-p, -p, -p}, ext[3] = {g->d + 2 * p, g->h + 2 * p, g->w + 2 * p};
    vol_direct_pad_window(x, g, off, ext, xp, threads);
}

void vol_direct_convolve(const float *xp, const vol_shape *g, const float *packed, int cout,
                         const float *bias, bool accumulate, float *y, int threads)
{
    fwd_call a = {g, xp, packed, bias, y, cout, accumulate,
                  g->ow <= 8 ? 4 : g->ow <= 16 ? 2 : 1};
    const int groups = (g->oh + a.stack - 1) / a.stack;
    const size_t rows = (size_t)g->n * g->od * groups;
    const int bs = vol_direct_block(cout);
    const size_t units = (size_t)((cout + bs - 1) / bs) * rows;
    const size_t work = (size_t)cout * g->n * g->od * g->oh * g->ow * g->c * g->k * g->k * g->k;
    parallel_for(units, 1, work, threads, fwd_range, &a);
}

void vol_direct_pack(const float *w, int cout, int cin, int k, float *packed)
{
    const int k3 = k * k * k, bs = vol_direct_block(cout);
    const int blocks = (cout + bs - 1) / bs;
    for (int b = 0; b < blocks; b++)
        for (int ci = 0; ci < cin; ci++)
            for (int t = 0; t < k3; t++)
                for (int o = 0; o < bs; o++) {
                    const int co = b * bs + o;
                    packed[(((size_t)b * cin + ci) * k3 + t) * bs + o] =
                        co < cout ? w[((size_t)co * cin + ci) * k3 + t] : 0.0f;
                }
}

void vol_direct_forward(const float *x, const vol_shape *g, const float *packed, int cout,
                        const float *bias, float *xp, float *y, int threads)
{
    vol_direct_pad(x, g, xp, threads);
    vol_direct_convolve(xp, g, packed, cout, bias, false, y, threads);
}

#else

bool vol_direct_available(void) { return false; }

void vol_direct_pack(const float *w, int cout, int cin, int k, float *packed)
{
    (void)w, (void)cout, (void)cin, (void)k, (void)packed;
}

void vol_direct_forward(const float *x, const vol_shape *g, const float *packed, int cout,
                        const float *bias, float *xp, float *y, int threads)
{
    (void)x, (void)g, (void)packed, (void)cout, (void)bias, (void)xp, (void)y, (void)threads;
}

void vol_direct_pad(const float *x, const vol_shape *g, float *xp, int threads)
{
    (void)x, (void)g, (void)xp, (void)threads;
}

void vol_direct_pad_window(const float *x, const vol_shape *g, const int off[3],
                           const int ext[3], float *xp, int threads)
{
    (void)x, (void)g, (void)off, (void)ext, (void)xp, (void)threads;
}

void vol_direct_convolve(const float *xp, const vol_shape *g, const float *packed, int cout,
                         const float *bias, bool accumulate, float *y, int threads)
{
    (void)xp, (void)g, (void)packed, (void)cout, (void)bias, (void)accumulate, (void)y,
        (void)threads;
}

#endif
