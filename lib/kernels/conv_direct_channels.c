/* The direct convolution with output channels in the vector lanes (see
 * conv_direct.h): for planes where the grid's border is a large share
 * (4x4 images: 16 of 25 positions are real), this kernel visits only the
 * real output pixels.
 *
 * The register tile is 6 output pixels x OCV vectors of 16 output
 * channels.  For every (tap, input channel) it loads OCV weight vectors
 * and broadcasts the 6 pixels' input values, 6*OCV fused multiply-adds (24
 * accumulators with OCV = 4, each broadcast feeding 4 of them; 64, 128
 * and 256 channels are whole groups of 4).  The pixels may lie anywhere on the grid, so
 * a tile spans rows and images freely.  Results go to a pixel-major
 * buffer, transposed back to CNHW at the end.  Per thread: a share of the
 * tiles; input channels taken 128 at a time, so that a group's weights
 * stay in L2 while it sweeps the share. */
#include "conv_direct.h"
#include "kernels.h"
#include "simd.h"

#define PIXELS 6     /* output pixels per tile */
#define MAX_OCV 4    /* channel vectors per tile */
#define IN_BLOCK 128 /* input channels per pass */

size_t direct_channels_floats(int nout, int nin, int k, size_t pixels)
{
    const size_t lanes = round_up((size_t)nout, LANES);
    return lanes * ((size_t)nin * k * k + 1 + round_up(pixels, PIXELS));
}

/* packed[ob][tap][i][16]: output channel ob*16 + lane, input channel i;
 * zero past nout.  The adjoint flips and transposes w[cout][cin][k*k].
 * Output channels [lo, hi) per thread (VGG's 256 x 256 x 9 weights are
 * repacked twice a step). */
static void pack_range(void *arg, size_t lo, size_t hi)
{
    const direct_weights *a = arg;
    const int kk = a->k * a->k, nout = a->adjoint ? a->cin : a->cout;
    const int nin = a->adjoint ? a->cout : a->cin;
    for (size_t o = lo; o < hi; o++) {
        float *dst = a->packed + (o / LANES) * kk * nin * LANES + o % LANES;
        for (int t = 0; t < kk; t++)
            for (int i = 0; i < nin; i++)
                dst[((size_t)t * nin + i) * LANES] =
                    o < (size_t)nout ? direct_weight(a, o, (size_t)i, t) : 0.0f;
    }
}

static void pack(const float *w, int cout, int cin, int k, bool adjoint, float *packed,
                 int threads)
{
    const size_t lanes = round_up((size_t)(adjoint ? cin : cout), LANES);
    direct_weights a = {w, packed, cout, cin, k, adjoint};
    parallel_for(lanes, LANES, lanes * cin * k * k, threads, pack_range, &a);
}

typedef struct channels_args {
    const float *in, *packed, *bias;
    float *out; /* pixel-major, `lanes` floats per pixel */
    int nin, nout, oh, ow;
    long shift;
    size_t pixels, lanes;
    const direct_grid *g;
} channels_args;

typedef void (*ctile_fn)(const float *const *px, size_t plane, int wp, int nin, int ic0,
                         int ic1, const float *w, size_t wstride, const float *init, float *out,
                         size_t lanes, int valid, bool load);

#if PCNN_AVX512
/* One tile: out[r][0 .. 16*OCV) (+)= sum over taps and input channels
 * [ic0, ic1) of w[tap][ic][..] * in[ic][px[r] + tap offset].  Rows past
 * `valid` (the last tile's) are computed from a repeated pixel, not
 * stored. */
TARGET static inline __attribute__((always_inline)) void
ctile(const int OCV, const int K, const float *const *px, size_t plane, int wp, int nin,
      int ic0, int ic1, const float *w, size_t wstride, const float *init, float *out,
      size_t lanes, int valid, bool load)
{
    __m512 acc[PIXELS][MAX_OCV];
#pragma GCC unroll 8
    for (int r = 0; r < PIXELS; r++)
#pragma GCC unroll 4
        for (int v = 0; v < OCV; v++)
            acc[r][v] = load && r < valid ? _mm512_loadu_ps(out + (size_t)r * lanes + v * LANES)
                        : init        ? _mm512_loadu_ps(init + v * LANES)
                                      : _mm512_setzero_ps();
#pragma GCC unroll 5
    for (int ky = 0; ky < K; ky++)
#pragma GCC unroll 5
        for (int kx = 0; kx < K; kx++) {
            const size_t off = (size_t)ky * wp + kx;
            const float *q[PIXELS];
#pragma GCC unroll 8
            for (int r = 0; r < PIXELS; r++) q[r] = px[r] + off;
            const float *wt = w + ((size_t)(ky * K + kx) * nin + ic0) * LANES;
            size_t o = (size_t)ic0 * plane;
            for (int ic = ic0; ic < ic1; ic++, o += plane, wt += LANES) {
                __m512 wv[MAX_OCV];
#pragma GCC unroll 4
                for (int v = 0; v < OCV; v++) wv[v] = _mm512_loadu_ps(wt + v * wstride);
#pragma GCC unroll 8
                for (int r = 0; r < PIXELS; r++) {
                    const __m512 b = _mm512_set1_ps(q[r][o]);
#pragma GCC unroll 4
                    for (int v = 0; v < OCV; v++) acc[r][v] = _mm512_fmadd_ps(b, wv[v], acc[r][v]);
                }
            }
        }
#pragma GCC unroll 8
    for (int r = 0; r < PIXELS; r++)
#pragma GCC unroll 4
        for (int v = 0; v < OCV; v++)
            if (r < valid) _mm512_storeu_ps(out + (size_t)r * lanes + v * LANES, acc[r][v]);
}

#define CTILE_FN(OCV, K)                                                                       \
    TARGET static void ctile_##OCV##_##K(const float *const *px, size_t plane, int wp, int nin, \
                                         int ic0, int ic1, const float *w, size_t wstride,     \
                                         const float *init, float *out, size_t lanes,          \
                                         int valid, bool load)                                 \
    {                                                                                          \
        ctile(OCV, K, px, plane, wp, nin, ic0, ic1, w, wstride, init, out, lanes, valid, load); \
    }
CTILE_FN(4, 3)
CTILE_FN(3, 3)
CTILE_FN(2, 3)
CTILE_FN(1, 3)
CTILE_FN(4, 5)
CTILE_FN(3, 5)
CTILE_FN(2, 5)
CTILE_FN(1, 5)

static ctile_fn ctile_for(int ocv, int k)
{
    if (k == 3)
        return ocv == 4 ? ctile_4_3 : ocv == 3 ? ctile_3_3 : ocv == 2 ? ctile_2_3 : ctile_1_3;
    return ocv == 4 ? ctile_4_5 : ocv == 3 ? ctile_3_5 : ocv == 2 ? ctile_2_5 : ctile_1_5;
}

/* y[c][p] (+)= buf[p][c] for up to 16 pixels from p0 and the 16 channels
 * from cb. */
static void scatter_block(const channels_args *a, float *y, size_t p0, int rows, size_t cb,
                          bool accumulate)
{
    float block[LANES * LANES];
    const int cols = (int)((size_t)a->nout - cb < LANES ? (size_t)a->nout - cb : LANES);
    transpose16(a->out + p0 * a->lanes + cb, a->lanes, rows, cols, block, LANES, LANES);
    for (int c = 0; c < cols; c++) {
        float *restrict d = y + (cb + c) * a->pixels + p0;
        const float *restrict s = block + c * LANES;
        if (accumulate)
            for (int r = 0; r < rows; r++) d[r] += s[r];
        else
            for (int r = 0; r < rows; r++) d[r] = s[r];
    }
}
#else
static ctile_fn ctile_for(int ocv, int k)
{
    (void)ocv, (void)k;
    return NULL; /* never called: direct_conv_available() is false */
}

static void scatter_block(const channels_args *a, float *y, size_t p0, int rows, size_t cb,
                          bool accumulate)
{
    (void)a, (void)y, (void)p0, (void)rows, (void)cb, (void)accumulate;
}
#endif

/* Vectors in the group starting at vector `at` of `total`: groups of at
 * most MAX_OCV, as even as possible (80 channels: 3 + 2, not 4 + 1). */
static int group_vectors(size_t total, size_t at)
{
    const size_t groups = (total + MAX_OCV - 1) / MAX_OCV, small = total / groups;
    const size_t big = total % groups; /* the first `big` groups have small + 1 */
    return (int)(at < big * (small + 1) ? small + 1 : small);
}

static void channel_tiles(void *arg, size_t lo, size_t hi)
{
    const channels_args *a = arg;
    const direct_grid *g = a->g;
    const size_t image = (size_t)g->hp * g->wp, per_image = (size_t)a->oh * a->ow;
    const size_t wstride = (size_t)g->k * g->k * a->nin * LANES;
    for (int ic0 = 0; ic0 < a->nin; ic0 += IN_BLOCK) {
        const int ic1 = ic0 + IN_BLOCK < a->nin ? ic0 + IN_BLOCK : a->nin;
        for (size_t cb = 0; cb < a->lanes;) {
            const int ocv = group_vectors(a->lanes / LANES, cb / LANES);
            const ctile_fn fn = ctile_for(ocv, g->k);
            const float *w = a->packed + cb / LANES * wstride;
            for (size_t t = lo; t < hi; t++) {
                const size_t p0 = t * PIXELS;
                const int valid = (int)(a->pixels - p0 < PIXELS ? a->pixels - p0 : PIXELS);
                const float *px[PIXELS];
                for (int r = 0; r < PIXELS; r++) {
                    const size_t p = p0 + (size_t)(r < valid ? r : valid - 1);
                    const size_t n = p / per_image, i = p % per_image / a->ow, j = p % a->ow;
                    const size_t s = (size_t)g->stride;
                    px[r] = a->in + (long)(g->lead + n * image + (i * g->wp + j) * s) + a->shift;
                }
                fn(px, g->plane, g->wp, a->nin, ic0, ic1, w, wstride,
                   a->bias ? a->bias + cb : NULL, a->out + p0 * a->lanes + cb, a->lanes, valid,
                   ic0 > 0);
            }
            cb += (size_t)ocv * LANES;
        }
    }
}

typedef struct scatter_args {
    const channels_args *a;
    float *y;
    bool accumulate;
} scatter_args;

static void scatter_range(void *arg, size_t lo, size_t hi)
{
    const scatter_args *s = arg;
    for (size_t b = lo; b < hi; b++) {
        const size_t p0 = b * LANES;
        const int rows = (int)(s->a->pixels - p0 < LANES ? s->a->pixels - p0 : LANES);
        for (size_t cb = 0; cb < (size_t)s->a->nout; cb += LANES)
            scatter_block(s->a, s->y, p0, rows, cb, s->accumulate);
    }
}

void direct_conv_channels(const float *in, const float *w, int cout, int cin, bool adjoint,
                          const direct_grid *g, const float *bias, float *y, bool accumulate,
                          float *scratch, int threads)
{
    const int nout = adjoint ? cin : cout, nin = adjoint ? cout : cin;
    const int oh = adjoint ? g->h : g->ho, ow = adjoint ? g->w : g->wo;
    const size_t lanes = round_up((size_t)nout, LANES), pixels = (size_t)g->n * oh * ow;
    float *packed = scratch, *bias_lanes = packed + lanes * nin * g->k * g->k;
    float *out = bias_lanes + lanes;
    pack(w, cout, cin, g->k, adjoint, packed, threads);
    /* The accumulators start from the bias, padded to whole vectors. */
    for (size_t o = 0; o < lanes; o++) bias_lanes[o] = bias && o < (size_t)nout ? bias[o] : 0.0f;
    const long shift = adjoint ? -(long)(g->k - 1 - g->pad) * (g->wp + 1) : 0;
    channels_args a = {in,   packed, bias ? bias_lanes : NULL, out, nin, nout, oh, ow, shift,
                       pixels, lanes, g};
    const size_t tiles = (pixels + PIXELS - 1) / PIXELS;
    parallel_for(tiles, 1, (size_t)nin * nout * g->k * g->k * pixels / 64, threads,
                 channel_tiles, &a);
    scatter_args s = {&a, y, accumulate};
    parallel_for((pixels + LANES - 1) / LANES, 1, pixels * lanes, threads, scatter_range, &s);
}
