/* Direct stride-1 convolution on the padded grid (see conv_direct.h).
 *
 * The register tile is OB output channels x 48 grid positions (3 vectors):
 * for every (input channel, tap) it loads 3 shifted input vectors and
 * broadcasts OB weights, 3*OB fused multiply-adds.  With OB = 8 that is 24
 * accumulators, and the loads stay well below the FMA rate.  Work is cut
 * into panels of tiles; per panel, every block of output channels sweeps
 * the same input panel (kept in L2) with its weights (in L1), input
 * channels taken 64 at a time. */
#include "conv_direct.h"

#include <string.h>

#include "kernels.h"

#define LANES 16
#ifndef QV
#define QV 6                       /* vectors per tile */
#endif
#define TILE (QV * LANES)          /* grid positions per tile */
#define PANEL_TILES 8              /* tiles per panel */
#define IN_BLOCK 64                /* input channels per pass over a tile */
#ifndef MAX_OB
#define MAX_OB 4                   /* output channels per tile */
#endif

static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

bool direct_conv_supports(int k, int stride, int pad)
{
    return stride == 1 && (k == 3 || k == 5) && pad >= 0 && pad < k;
}

bool direct_conv_preferred(int cin, int h, int w, int k, int pad)
{
    direct_grid g;
    direct_grid_init(&g, 1, h, w, k, pad);
    const double useful = (double)g.ho * g.wo / ((double)g.hp * g.wp);
    return useful >= 0.75 || (useful >= 0.6 && cin <= 64) ||
           (useful >= 0.45 && cin * k * k <= 256);
}

void direct_grid_init(direct_grid *g, int n, int h, int w, int k, int pad)
{
    g->n = n, g->h = h, g->w = w, g->k = k, g->pad = pad;
    g->ho = h + 2 * pad - k + 1, g->wo = w + 2 * pad - k + 1;
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

/* Output channels per block: MAX_OB while there are, then 4, 2, 1. */
static int block_width(int remaining)
{
    return remaining >= MAX_OB ? MAX_OB : remaining >= 4 ? 4 : remaining >= 2 ? 2 : 1;
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

static void place_planes(void *arg, size_t lo, size_t hi)
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
                float *row = img + (size_t)(a->row0 + i) * wp;
                zero(row, (size_t)a->col0);
                memcpy(row + a->col0, src + (size_t)i * a->ws, (size_t)a->ws * sizeof(float));
                zero(row + a->col0 + a->ws, right);
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

typedef struct take_args {
    const float *planes;
    const float *bias;
    float *y;
    int hs, ws;
    const direct_grid *g;
    bool accumulate;
} take_args;

static void take_planes(void *arg, size_t lo, size_t hi)
{
    const take_args *a = arg;
    const direct_grid *g = a->g;
    const int ws = a->ws;
    const size_t image = (size_t)g->hp * g->wp;
    for (size_t c = lo; c < hi; c++) {
        const float b = a->bias ? a->bias[c] : 0.0f;
        for (int n = 0; n < g->n; n++) {
            const float *img = a->planes + c * g->plane + g->lead + (size_t)n * image;
            float *dst = a->y + (c * g->n + n) * (size_t)a->hs * ws;
            for (int i = 0; i < a->hs; i++) {
                const float *restrict s = img + (size_t)i * g->wp;
                float *restrict d = dst + (size_t)i * ws;
                if (a->accumulate)
                    for (int j = 0; j < ws; j++) d[j] += s[j];
                else
                    for (int j = 0; j < ws; j++) d[j] = s[j] + b;
            }
        }
    }
}

void direct_take(const float *planes, int c, int hs, int ws, const direct_grid *g,
                 const float *bias, float *y, bool accumulate, int threads)
{
    take_args a = {planes, bias, y, hs, ws, g, accumulate};
    parallel_for((size_t)c, 1, (size_t)c * g->q, threads, take_planes, &a);
}

void direct_pack(const float *w, int cout, int cin, int k, bool adjoint, float *packed)
{
    const int kk = k * k, nout = adjoint ? cin : cout, nin = adjoint ? cout : cin;
    for (int o0 = 0; o0 < nout;) {
        const int ob = block_width(nout - o0);
        float *dst = packed + (size_t)o0 * nin * kk;
        for (int i = 0; i < nin; i++)
            for (int t = 0; t < kk; t++)
                for (int o = 0; o < ob; o++)
                    dst[((size_t)i * kk + t) * ob + o] =
                        adjoint ? w[((size_t)i * cin + o0 + o) * kk + (kk - 1 - t)]
                                : w[((size_t)(o0 + o) * cin + i) * kk + t];
        o0 += ob;
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define TARGET __attribute__((target("avx512f,fma")))

bool direct_conv_available(void)
{
    return __builtin_cpu_supports("avx512f");
}

/* One tile: out[o][0..TILE) (+)= sum over input channels [ic0, ic1) and
 * taps of w[ic][tap][o] * in[ic][tap offset + 0..TILE).  `in` points at
 * tap (0, 0) of the tile's first position in input plane 0. */
TARGET static inline __attribute__((always_inline)) void
tile(const int OB, const int K, const float *in, size_t plane, int wp, int ic0, int ic1,
     const float *w, float *out, size_t oplane, bool load)
{
    __m512 acc[8][QV];
#pragma GCC unroll 8
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
#pragma GCC unroll 8
    for (int o = 0; o < OB; o++)
#pragma GCC unroll 8
        for (int v = 0; v < QV; v++) _mm512_storeu_ps(out + o * oplane + v * LANES, acc[o][v]);
}

typedef void (*tile_fn)(const float *in, size_t plane, int wp, int ic0, int ic1,
                        const float *w, float *out, size_t oplane, bool load);

#define TILE_FN(OB, K)                                                                       \
    TARGET static void tile_##OB##_##K(const float *in, size_t plane, int wp, int ic0,       \
                                       int ic1, const float *w, float *out, size_t oplane,   \
                                       bool load)                                           \
    {                                                                                        \
        tile(OB, K, in, plane, wp, ic0, ic1, w, out, oplane, load);                          \
    }
TILE_FN(8, 3)
TILE_FN(4, 3)
TILE_FN(2, 3)
TILE_FN(1, 3)
TILE_FN(8, 5)
TILE_FN(4, 5)
TILE_FN(2, 5)
TILE_FN(1, 5)

static tile_fn tile_for(int ob, int k)
{
    if (k == 3) return ob == 8 ? tile_8_3 : ob == 4 ? tile_4_3 : ob == 2 ? tile_2_3 : tile_1_3;
    return ob == 8 ? tile_8_5 : ob == 4 ? tile_4_5 : ob == 2 ? tile_2_5 : tile_1_5;
}
#else
bool direct_conv_available(void)
{
    return false;
}

typedef void (*tile_fn)(const float *in, size_t plane, int wp, int ic0, int ic1,
                        const float *w, float *out, size_t oplane, bool load);
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
} conv_args;

static void conv_tiles(void *arg, size_t lo, size_t hi)
{
    const conv_args *a = arg;
    const direct_grid *g = a->g;
    const int kk = g->k * g->k;
    for (size_t p0 = lo; p0 < hi; p0 += PANEL_TILES) {
        const size_t p1 = p0 + PANEL_TILES < hi ? p0 + PANEL_TILES : hi;
        for (int o0 = 0; o0 < a->nout;) {
            const int ob = block_width(a->nout - o0);
            const tile_fn fn = tile_for(ob, g->k);
            const float *w = a->packed + (size_t)o0 * a->nin * kk;
            float *out = a->out + (size_t)o0 * g->plane + g->lead;
            for (int ic0 = 0; ic0 < a->nin; ic0 += IN_BLOCK) {
                const int ic1 = ic0 + IN_BLOCK < a->nin ? ic0 + IN_BLOCK : a->nin;
                for (size_t t = p0; t < p1; t++) {
                    const size_t u = t * TILE;
                    fn(a->in + (long)(g->lead + u) + a->shift, g->plane, g->wp, ic0, ic1, w,
                       out + u, g->plane, ic0 > 0);
                }
            }
            o0 += ob;
        }
    }
}

void direct_conv(const float *in, int nin, const float *packed, int nout, bool adjoint,
                 const direct_grid *g, float *out, int threads)
{
    /* The adjoint reads dY placed at the top-left corner as if it sat
     * (k-1-pad) rows and columns further down and right. */
    const long shift = adjoint ? -(long)(g->k - 1 - g->pad) * (g->wp + 1) : 0;
    conv_args a = {in, packed, out, nin, nout, shift, g};
    const size_t tiles = g->q_round / TILE;
    const size_t work = (size_t)nin * nout * g->k * g->k * g->q_round / 64;
    parallel_for(tiles, 1, work, threads, conv_tiles, &a);
}

/* Weight gradient.  dW[co][ci][tap] = sum over output pixels of
 * dY[co][pixel] * x[ci][pixel + tap offset].  The output channels go in
 * the vector lanes: dY is transposed to pixel-major rows of 16-channel
 * blocks (dt), and every pixel contributes one dY vector times R input
 * channels x K*K taps of broadcast x values, R*K*K accumulators (27 for
 * k3, 25 for k5) that never need a horizontal sum.  Only real output
 * pixels are visited, so the border of the grid costs nothing here.  Each
 * thread takes a share of the output rows, in chunks, and accumulates into
 * its own partial [ci][tap][co]; the partials are summed in thread order. */
static size_t lanes_of(int cout) { return round_up((size_t)cout, LANES); }

size_t direct_wgrad_floats(int cout, int cin, int k, int n, int ho, int wo, int threads)
{
    const size_t parts = (size_t)(threads > 0 ? threads : 1), co = lanes_of(cout);
    return (size_t)n * ho * wo * co + parts * (size_t)cin * k * k * co;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* Output rows [r0, r1) (row = sample * ho + i) of one 16-channel block of
 * dY against input channels ci0 .. ci0+R-1; acc at the partial's entry
 * (ci0, tap 0) of the block, entries co_pad floats apart. */
TARGET static inline __attribute__((always_inline)) void
wtile(const int R, const int K, const float *dt, size_t co_pad, const float *x, size_t plane,
      const direct_grid *g, long r0, long r1, float *acc_mem)
{
    __m512 acc[3][25];
#pragma GCC unroll 3
    for (int r = 0; r < R; r++)
#pragma GCC unroll 25
        for (int t = 0; t < K * K; t++)
            acc[r][t] = _mm512_loadu_ps(acc_mem + (size_t)(r * K * K + t) * co_pad);
    const size_t image = (size_t)g->hp * g->wp;
    for (long row = r0; row < r1; row++) {
        const float *xr = x + (size_t)(row / g->ho) * image + (size_t)(row % g->ho) * g->wp;
        const float *dr = dt + (size_t)row * g->wo * co_pad;
        /* One pointer per (channel, kernel row): each x value is then a
         * base + index load that folds into its FMA as a broadcast. */
        const float *src[3][5];
#pragma GCC unroll 3
        for (int r = 0; r < R; r++)
#pragma GCC unroll 5
            for (int ky = 0; ky < K; ky++) src[r][ky] = xr + (size_t)r * plane + (size_t)ky * g->wp;
        for (int j = 0; j < g->wo; j++) {
            const __m512 d = _mm512_loadu_ps(dr + (size_t)j * co_pad);
#pragma GCC unroll 3
            for (int r = 0; r < R; r++)
#pragma GCC unroll 5
                for (int ky = 0; ky < K; ky++)
#pragma GCC unroll 5
                    for (int kx = 0; kx < K; kx++)
                        acc[r][ky * K + kx] = _mm512_fmadd_ps(
                            _mm512_set1_ps(src[r][ky][j + kx]), d, acc[r][ky * K + kx]);
        }
    }
#pragma GCC unroll 3
    for (int r = 0; r < R; r++)
#pragma GCC unroll 25
        for (int t = 0; t < K * K; t++)
            _mm512_storeu_ps(acc_mem + (size_t)(r * K * K + t) * co_pad, acc[r][t]);
}

typedef void (*wtile_fn)(const float *dt, size_t co_pad, const float *x, size_t plane,
                         const direct_grid *g, long r0, long r1, float *acc_mem);

/* dst[p][c] = src[c][p] for a block of up to 16 channels (rows of src, ld
 * floats apart; channels >= chans read as zero) and up to 16 pixels, as a
 * 16x16 register transpose. */
TARGET static void transpose_block(const float *src, size_t ld, int chans, int pixels,
                                   float *dst, size_t ld_dst)
{
    const __mmask16 m = (__mmask16)((1u << pixels) - 1u);
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++)
        r[i] = i < chans ? _mm512_maskz_loadu_ps(m, src + (size_t)i * ld) : _mm512_setzero_ps();
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
    for (int i = 0; i < pixels; i++) _mm512_storeu_ps(dst + (size_t)i * ld_dst, r[i]);
}

/* Without predictive commoning, which would carry the broadcasts of one
 * pixel over to the next (x[j + 1] is the next pixel's x[j]) and spill
 * them: each x value must stay a memory operand of its FMA. */
#define WTILE_FN(R, K)                                                                       \
    TARGET __attribute__((optimize("no-predictive-commoning"))) static void wtile_##R##_##K(const float *dt, size_t co_pad, const float *x,       \
                                       size_t plane, const direct_grid *g, long r0, long r1, \
                                       float *acc_mem)                                      \
    {                                                                                        \
        wtile(R, K, dt, co_pad, x, plane, g, r0, r1, acc_mem);                               \
    }
WTILE_FN(3, 3)
WTILE_FN(2, 3)
WTILE_FN(1, 3)
WTILE_FN(1, 5)

/* Input channels per tile and its function. */
static int wtile_width(int k, int remaining)
{
    return k == 5 ? 1 : remaining >= 3 ? 3 : remaining;
}

static wtile_fn wtile_for(int r, int k)
{
    if (k == 5) return wtile_1_5;
    return r == 3 ? wtile_3_3 : r == 2 ? wtile_2_3 : wtile_1_3;
}
#else
static void transpose_block(const float *src, size_t ld, int chans, int pixels, float *dst,
                            size_t ld_dst)
{
    for (int i = 0; i < pixels; i++)
        for (int c = 0; c < 16; c++) dst[(size_t)i * ld_dst + c] = c < chans ? src[c * ld + i] : 0;
}

static int wtile_width(int k, int remaining)
{
    (void)k;
    return remaining;
}

typedef void (*wtile_fn)(const float *dt, size_t co_pad, const float *x, size_t plane,
                         const direct_grid *g, long r0, long r1, float *acc_mem);
static wtile_fn wtile_for(int r, int k)
{
    (void)r, (void)k;
    return NULL; /* never called: direct_conv_available() is false */
}
#endif

typedef struct transpose_args {
    const float *dy;
    float *dt;
    int cout;
    size_t pixels, co_pad;
} transpose_args;

/* dt[p * co_pad + co] = dy[co][p] over pixel blocks [lo, hi) of 16. */
static void transpose_pixels(void *arg, size_t lo, size_t hi)
{
    const transpose_args *a = arg;
    for (size_t b = lo; b < hi; b++) {
        const size_t p0 = b * LANES;
        const int pixels = (int)(a->pixels - p0 < LANES ? a->pixels - p0 : LANES);
        for (size_t cb = 0; cb < a->co_pad; cb += LANES) {
            const int chans = (int)((size_t)a->cout - cb < LANES ? (size_t)a->cout - cb : LANES);
            transpose_block(a->dy + cb * a->pixels + p0, a->pixels, chans, pixels,
                            a->dt + p0 * a->co_pad + cb, a->co_pad);
        }
    }
}

typedef struct wgrad_args {
    const float *dt, *xp;
    float *partials;
    int cout, cin;
    long chunk_rows;
    const direct_grid *g;
} wgrad_args;

static void wgrad_part(void *arg, size_t lo, size_t hi, int part)
{
    const wgrad_args *a = arg;
    const direct_grid *g = a->g;
    const int kk = g->k * g->k;
    const size_t co_pad = lanes_of(a->cout);
    float *acc = a->partials + (size_t)part * a->cin * kk * co_pad;
    for (long r0 = (long)lo; r0 < (long)hi; r0 += a->chunk_rows) {
        const long r1 = r0 + a->chunk_rows < (long)hi ? r0 + a->chunk_rows : (long)hi;
        for (size_t cb = 0; cb < co_pad; cb += LANES)
            for (int ci = 0; ci < a->cin;) {
                const int r = wtile_width(g->k, a->cin - ci);
                wtile_for(r, g->k)(a->dt + cb, co_pad, a->xp + g->lead + (size_t)ci * g->plane,
                                   g->plane, g, r0, r1, acc + (size_t)ci * kk * co_pad + cb);
                ci += r;
            }
    }
}

typedef struct wsum_args {
    const float *partials;
    float *dw;
    int cout, cin, kk, parts;
} wsum_args;

static void wgrad_sum(void *arg, size_t lo, size_t hi)
{
    const wsum_args *a = arg;
    const size_t co_pad = lanes_of(a->cout), per_part = (size_t)a->cin * a->kk * co_pad;
    for (size_t ci = lo; ci < hi; ci++)
        for (int t = 0; t < a->kk; t++)
            for (int co = 0; co < a->cout; co++) {
                const size_t at = (ci * a->kk + t) * co_pad + co;
                float s = a->partials[at];
                for (int q = 1; q < a->parts; q++) s += a->partials[q * per_part + at];
                a->dw[((size_t)co * a->cin + ci) * a->kk + t] = s;
            }
}

void direct_weight_grad(const float *dy, int cout, const float *xp, int cin,
                        const direct_grid *g, float *dw, float *scratch, int threads)
{
    const int parts = threads > 0 ? threads : 1, kk = g->k * g->k;
    const size_t co_pad = lanes_of(cout), rows = (size_t)g->n * g->ho;
    float *dt = scratch, *partials = dt + rows * g->wo * co_pad;
    const size_t pixels = rows * g->wo;
    transpose_args t = {dy, dt, cout, pixels, co_pad};
    parallel_for((pixels + LANES - 1) / LANES, 1, pixels * co_pad, threads, transpose_pixels, &t);
    memset(partials, 0, (size_t)parts * cin * kk * co_pad * sizeof(float));
    /* About 256 output pixels per chunk: the accumulators are loaded and
     * stored once per chunk. */
    long chunk_rows = 256 / g->wo;
    if (chunk_rows < 1) chunk_rows = 1;
    wgrad_args a = {dt, xp, partials, cout, cin, chunk_rows, g};
    parallel_parts(rows, (size_t)chunk_rows, (size_t)cout * cin * kk * rows * g->wo / 64, parts,
                   wgrad_part, &a);
    wsum_args s = {partials, dw, cout, cin, kk, parts};
    parallel_for((size_t)cin, 1, (size_t)parts * cin * kk * co_pad, threads, wgrad_sum, &s);
}
