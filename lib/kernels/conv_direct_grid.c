/* The grid of the direct convolution (see conv_direct.h), and its kernel
 * with grid positions in the vector lanes.
 *
 * The register tile is OB output channels x 96 grid positions (6 vectors):
 * for every (input channel, tap) it loads 6 shifted input vectors and
 * broadcasts OB weights, 6*OB fused multiply-adds.  With OB = 4 that is 24
 * accumulators, and each broadcast feeds 6 FMAs.  Work is cut into panels
 * of tiles; per panel, every block of output channels sweeps the same
 * input panel (kept in L2) with its weights (in L1), input channels taken
 * 64 at a time.  The last block's sums go straight from a tile-sized
 * scratch to the output's real pixels; the grid's output planes only
 * carry partial sums between blocks. */
#include "conv_direct.h"

#include <stdint.h>
#include <string.h>

#include "kernels.h"
#include "simd.h"

#define QV 6               /* vectors per tile */
#define TILE (QV * LANES)  /* grid positions per tile */
#define PANEL_TILES 8      /* tiles per panel */
#define IN_BLOCK 64        /* input channels per pass over a tile */
#define MAX_OB 4           /* output channels per tile */

bool direct_conv_supports(int k, int stride, int pad)
{
    return stride == 1 && (k == 3 || k == 5) && pad >= 0 && pad < k;
}

void direct_grid_init(direct_grid *g, int n, int h, int w, int k, int stride, int pad)
{
    g->n = n, g->h = h, g->w = w, g->k = k, g->pad = pad, g->stride = stride;
    g->ho = (h + 2 * pad - k) / stride + 1, g->wo = (w + 2 * pad - k) / stride + 1;
    /* Neighbouring rows and images share their padding: the left pad of
     * the next row is the right pad of this one. */
    g->hp = h + pad > g->ho ? h + pad : g->ho;
    g->wp = w + pad > g->wo ? w + pad : g->wo;
    g->q = (size_t)n * g->hp * g->wp;
    g->q_round = round_up(g->q, TILE);
    g->reach = (size_t)(k - 1) * (g->wp + 1);
    g->lead = round_up(g->reach, LANES);
    g->plane = round_up(g->lead + g->q_round + g->reach, LANES);
}

/* Output channels per block: 4 while there are, then the rest (3, 2 or 1). */
static int block_width(int remaining)
{
    return remaining >= MAX_OB ? MAX_OB : remaining;
}

size_t direct_packed_floats(int cout, int cin, int k)
{
    return (size_t)cout * cin * k * k;
}

typedef struct place_args {
    const float *x;
    float *planes;
    int hs, ws, row0, col0;
    const direct_grid *g;
} place_args;

static void zero(float *p, size_t n) { memset(p, 0, n * sizeof(float)); }

/* Rows are short (8 to 96 floats): inline loops, not three libc calls per
 * row. */
VECTOR_CLONES static void place_planes(void *arg, size_t lo, size_t hi)
{
    const place_args *a = arg;
    const direct_grid *g = a->g;
    const size_t image = (size_t)g->hp * g->wp, wp = (size_t)g->wp;
    const size_t right = wp - (size_t)a->col0 - (size_t)a->ws;
    for (size_t c = lo; c < hi; c++) {
        float *plane = a->planes + c * g->plane;
        zero(plane, g->lead);
        for (int n = 0; n < g->n; n++) {
            float *img = plane + g->lead + (size_t)n * image;
            const float *src = a->x + (c * g->n + n) * (size_t)a->hs * a->ws;
            zero(img, (size_t)a->row0 * wp);
            for (int i = 0; i < a->hs; i++) {
                float *restrict row = img + (size_t)(a->row0 + i) * wp;
                const float *restrict s = src + (size_t)i * a->ws;
                for (int j = 0; j < a->col0; j++) row[j] = 0.0f;
                for (int j = 0; j < a->ws; j++) row[a->col0 + j] = s[j];
                for (size_t j = 0; j < right; j++) row[(size_t)(a->col0 + a->ws) + j] = 0.0f;
            }
            const size_t below = (size_t)(a->row0 + a->hs) * wp;
            zero(img + below, image - below);
        }
        zero(plane + g->lead + g->q, g->plane - g->lead - g->q);
    }
}

void direct_place(const float *x, int c, int hs, int ws, int row0, int col0,
                  const direct_grid *g, float *planes, int threads)
{
    place_args a = {x, planes, hs, ws, row0, col0, g};
    parallel_for((size_t)c, 1, (size_t)c * g->plane, threads, place_planes, &a);
}

/* Blocks [lo, hi) of MAX_OB output channels (the last one narrower). */
static void pack_blocks(void *arg, size_t lo, size_t hi)
{
    const direct_weights *a = arg;
    const int kk = a->k * a->k;
    const int nout = a->adjoint ? a->cin : a->cout, nin = a->adjoint ? a->cout : a->cin;
    for (size_t b = lo; b < hi; b++) {
        const int o0 = (int)b * MAX_OB, ob = block_width(nout - o0);
        float *dst = a->packed + (size_t)o0 * nin * kk;
        for (int i = 0; i < nin; i++)
            for (int t = 0; t < kk; t++)
                for (int o = 0; o < ob; o++)
                    dst[((size_t)i * kk + t) * ob + o] =
                        direct_weight(a, (size_t)(o0 + o), (size_t)i, t);
    }
}

void direct_pack(const float *w, int cout, int cin, int k, bool adjoint, float *packed,
                 int threads)
{
    const int nout = adjoint ? cin : cout;
    direct_weights a = {w, packed, cout, cin, k, adjoint};
    parallel_for((size_t)(nout + MAX_OB - 1) / MAX_OB, 1, (size_t)cout * cin * k * k, threads,
                 pack_blocks, &a);
}

typedef void (*tile_fn)(const float *in, size_t plane, int wp, int ic0, int ic1,
                        const float *w, float *out, size_t oplane, bool load);

#if PCNN_AVX512
bool direct_conv_available(void)
{
    return cpu_has_avx512();
}

/* One tile: out[o][0..TILE) (+)= sum over input channels [ic0, ic1) and
 * taps of w[ic][tap][o] * in[ic][tap offset + 0..TILE).  `in` points at
 * tap (0, 0) of the tile's first position in input plane 0. */
TARGET static inline __attribute__((always_inline)) void
tile(const int OB, const int K, const float *in, size_t plane, int wp, int ic0, int ic1,
     const float *w, float *out, size_t oplane, bool load)
{
    __m512 acc[MAX_OB][QV];
#pragma GCC unroll 4
    for (int o = 0; o < OB; o++)
#pragma GCC unroll 8
        for (int v = 0; v < QV; v++)
            acc[o][v] = load ? _mm512_loadu_ps(out + o * oplane + v * LANES) : _mm512_setzero_ps();
    for (int ic = ic0; ic < ic1; ic++) {
        const float *x = in + (size_t)ic * plane;
        const float *wk = w + (size_t)ic * K * K * OB;
#pragma GCC unroll 5
        for (int ky = 0; ky < K; ky++)
#pragma GCC unroll 5
            for (int kx = 0; kx < K; kx++) {
                const float *s = x + (size_t)ky * wp + kx;
                __m512 xv[QV];
#pragma GCC unroll 8
                for (int v = 0; v < QV; v++) xv[v] = _mm512_loadu_ps(s + v * LANES);
                const float *wt = wk + (ky * K + kx) * OB;
#pragma GCC unroll 8
                for (int o = 0; o < OB; o++) {
                    const __m512 b = _mm512_set1_ps(wt[o]);
#pragma GCC unroll 8
                    for (int v = 0; v < QV; v++) acc[o][v] = _mm512_fmadd_ps(b, xv[v], acc[o][v]);
                }
            }
    }
#pragma GCC unroll 4
    for (int o = 0; o < OB; o++)
#pragma GCC unroll 8
        for (int v = 0; v < QV; v++) _mm512_storeu_ps(out + o * oplane + v * LANES, acc[o][v]);
}

#define TILE_FN(OB, K)                                                                       \
    TARGET static void tile_##OB##_##K(const float *in, size_t plane, int wp, int ic0,       \
                                       int ic1, const float *w, float *out, size_t oplane,   \
                                       bool load)                                           \
    {                                                                                        \
        tile(OB, K, in, plane, wp, ic0, ic1, w, out, oplane, load);                          \
    }
TILE_FN(4, 3)
TILE_FN(3, 3)
TILE_FN(2, 3)
TILE_FN(1, 3)
TILE_FN(4, 5)
TILE_FN(3, 5)
TILE_FN(2, 5)
TILE_FN(1, 5)

/* Where the vectors of a panel's tiles land in the output: the lanes on
 * real pixels (at most hs x ws of every image) and the output index of the
 * first of them.  Real pixels in grid order are consecutive in CNHW, rows
 * and images included, so a vector's real lanes are one run. */
typedef struct vector_target {
    uint32_t lanes; /* bit l: lane l is a real pixel */
    size_t at;      /* output index (within a channel) of the first */
} vector_target;

static void panel_targets(const direct_grid *g, const direct_output *o, size_t u0, int vectors,
                          vector_target *targets)
{
    const size_t image = (size_t)g->hp * g->wp, wp = (size_t)g->wp, hp = (size_t)g->hp;
    size_t n = u0 / image, i = u0 % image / wp, j = u0 % wp;
    for (int v = 0; v < vectors; v++) {
        vector_target t = {0, 0};
        for (int l = 0; l < LANES; l++) {
            if (n < (size_t)g->n && i < (size_t)o->hs && j < (size_t)o->ws) {
                if (!t.lanes) t.at = (n * o->hs + i) * o->ws + j;
                t.lanes |= 1u << l;
            }
            if (++j == wp) {
                j = 0;
                if (++i == hp) i = 0, n++;
            }
        }
        targets[v] = t;
    }
}

/* A tile's ob channels (rows splane floats apart in src) to the output:
 * the real lanes of each vector packed together, plus the bias or added
 * to what is there. */
TARGET static void store_tile(const float *src, size_t splane, int ob, int o0,
                              const vector_target *targets, const direct_output *o,
                              size_t y_plane)
{
    for (int v = 0; v < QV; v++) {
        const vector_target t = targets[v];
        if (!t.lanes) continue;
        const __mmask16 real = (__mmask16)t.lanes;
        const __mmask16 run = (__mmask16)((1u << __builtin_popcount(t.lanes)) - 1u);
        for (int c = 0; c < ob; c++) {
            const __m512 sum = _mm512_loadu_ps(src + c * splane + v * LANES);
            __m512 r = _mm512_maskz_compress_ps(real, sum);
            float *d = o->y + (size_t)(o0 + c) * y_plane + t.at;
            if (o->accumulate)
                r = _mm512_add_ps(_mm512_maskz_loadu_ps(run, d), r);
            else if (o->bias)
                r = _mm512_add_ps(r, _mm512_set1_ps(o->bias[o0 + c]));
            _mm512_mask_storeu_ps(d, run, r);
        }
    }
}

static tile_fn tile_for(int ob, int k)
{
    if (k == 3) return ob == 4 ? tile_4_3 : ob == 3 ? tile_3_3 : ob == 2 ? tile_2_3 : tile_1_3;
    return ob == 4 ? tile_4_5 : ob == 3 ? tile_3_5 : ob == 2 ? tile_2_5 : tile_1_5;
}
#else
bool direct_conv_available(void)
{
    return false;
}

static tile_fn tile_for(int ob, int k)
{
    (void)ob, (void)k;
    return NULL; /* never called: direct_conv_available() is false */
}
#endif

typedef struct conv_args {
    const float *in, *packed;
    float *out;
    int nin, nout;
    long shift; /* added to every input position */
    const direct_grid *g;
    const direct_output *to;
} conv_args;

/* Per panel of tiles and block of output channels: the input channels in
 * blocks, partial sums on the grid planes, the last block's sums straight
 * to the output through a tile-sized scratch. */
static void conv_tiles(void *arg, size_t lo, size_t hi)
{
#if PCNN_AVX512
    const conv_args *a = arg;
    const direct_grid *g = a->g;
    const int kk = g->k * g->k;
    const size_t y_plane = (size_t)g->n * a->to->hs * a->to->ws;
    vector_target targets[PANEL_TILES * QV];
    float scratch[MAX_OB * TILE];
    for (size_t p0 = lo; p0 < hi; p0 += PANEL_TILES) {
        const size_t p1 = p0 + PANEL_TILES < hi ? p0 + PANEL_TILES : hi;
        panel_targets(g, a->to, p0 * TILE, (int)(p1 - p0) * QV, targets);
        for (int o0 = 0; o0 < a->nout;) {
            const int ob = block_width(a->nout - o0);
            const tile_fn fn = tile_for(ob, g->k);
            const float *w = a->packed + (size_t)o0 * a->nin * kk;
            float *out = a->out + (size_t)o0 * g->plane + g->lead;
            for (int ic0 = 0; ic0 < a->nin; ic0 += IN_BLOCK) {
                const int ic1 = ic0 + IN_BLOCK < a->nin ? ic0 + IN_BLOCK : a->nin;
                const bool last = ic1 == a->nin;
                for (size_t t = p0; t < p1; t++) {
                    const size_t u = t * TILE;
                    const float *in = a->in + (long)(g->lead + u) + a->shift;
                    if (!last) {
                        fn(in, g->plane, g->wp, ic0, ic1, w, out + u, g->plane, ic0 > 0);
                        continue;
                    }
                    /* Partial sums (if any) come from the grid; the total
                     * goes to the scratch, then out. */
                    if (ic0 > 0)
                        for (int o = 0; o < ob; o++)
                            memcpy(scratch + o * TILE, out + (size_t)o * g->plane + u,
                                   TILE * sizeof(float));
                    fn(in, g->plane, g->wp, ic0, ic1, w, scratch, TILE, ic0 > 0);
                    store_tile(scratch, TILE, ob, o0, targets + (t - p0) * QV, a->to, y_plane);
                }
            }
            o0 += ob;
        }
    }
#else
    (void)arg, (void)lo, (void)hi; /* never called: direct_conv_available() is false */
#endif
}

void direct_conv(const float *in, int nin, const float *packed, int nout, bool adjoint,
                 const direct_grid *g, float *out, const direct_output *to, int threads)
{
    /* The adjoint reads dY placed at the top-left corner as if it sat
     * (k-1-pad) rows and columns further down and right. */
    const long shift = adjoint ? -(long)(g->k - 1 - g->pad) * (g->wp + 1) : 0;
    conv_args a = {in, packed, out, nin, nout, shift, g, to};
    const size_t tiles = g->q_round / TILE;
    const size_t work = (size_t)nin * nout * g->k * g->k * g->q_round / 64;
    parallel_for(tiles, 1, work, threads, conv_tiles, &a);
}

