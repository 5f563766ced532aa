/* Weight gradient of the direct convolution (see conv_direct.h). */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "conv_direct.h"
#include "kernels.h"
#include "simd.h"

/* Weight gradient.  dW[co][ci][tap] = sum over output pixels of
 * dY[co][pixel] * x[ci][pixel + tap offset].  The output channels go in
 * the vector lanes: dY is transposed to pixel-major rows of 16-channel
 * blocks (dt), and every pixel contributes one dY vector times R input
 * channels x K*K taps of broadcast x values, R*K*K accumulators (27 for
 * k3, 25 for k5) that never need a horizontal sum.  Only real output
 * pixels are visited, so the border of the grid costs nothing here.
 *
 * Sums are blocked, so that no float32 sum runs long (a float running
 * sum over batch x pixels loses digits when the sum cancels, as under
 * batch norm): the accumulators start at zero for every chunk of
 * CHUNK_PIXELS output pixels and are added to the thread's float partial
 * [ci][tap][co] after it; every CHUNK_GROUP chunks of a channel block, and
 * after its last, the float partial goes into the thread's double partial.
 * (Adding every chunk in double straight away doubles the partials' memory
 * traffic, which shows on wide layers.)  Each thread takes a share of the
 * chunks in order; the first chunk of a group stores rather than adds, so
 * no partial is cleared beforehand.  The double partials are summed in
 * thread order: the same bits for the same thread count. */
#define CHUNK_GROUP 8

static size_t lanes_of(int cout) { return round_up((size_t)cout, LANES); }

size_t direct_wgrad_floats(int cout, int cin, int k, int n, int ho, int wo, int threads)
{
    const size_t parts = (size_t)(threads > 0 ? threads : 1), co = lanes_of(cout);
    const size_t entries = parts * (size_t)cin * k * k * co;
    return (size_t)n * ho * wo * co + entries * (1 + sizeof(double) / sizeof(float));
}

/* Input channels per tile: 3 (27 accumulators) for k3, 1 (25) for k5. */
static int wtile_width(int k, int remaining)
{
    return k == 5 ? 1 : remaining >= 3 ? 3 : remaining;
}

typedef void (*wtile_fn)(const float *dt, size_t co_pad, const float *x, size_t plane, int wp,
                         const size_t *off, int count, bool first, float *sums);

#if PCNN_AVX512
/* `count` output pixels of one 16-channel block of dY (dt rows, co_pad
 * floats apart) against input channels ci0 .. ci0+R-1: pixel p's window
 * starts off[p] floats into x's planes.  The chunk's sums are added to
 * (first: stored in) sums, the float partial at entry (ci0, tap 0) of the
 * block, entries co_pad floats apart. */
TARGET static inline __attribute__((always_inline)) void
wtile(const int R, const int K, const float *dt, size_t co_pad, const float *x, size_t plane,
      int wp, const size_t *off, int count, bool first, float *sums)
{
    __m512 acc[3][25];
#pragma GCC unroll 3
    for (int r = 0; r < R; r++)
#pragma GCC unroll 25
        for (int t = 0; t < K * K; t++) acc[r][t] = _mm512_setzero_ps();
    /* One pointer per (channel, kernel row): each x value is then a base +
     * index load that folds into its FMA as a broadcast. */
    const float *src[3][5];
#pragma GCC unroll 3
    for (int r = 0; r < R; r++)
#pragma GCC unroll 5
        for (int ky = 0; ky < K; ky++) src[r][ky] = x + (size_t)r * plane + (size_t)ky * wp;
    for (int p = 0; p < count; p++) {
        const __m512 d = _mm512_loadu_ps(dt + (size_t)p * co_pad);
        const size_t o = off[p];
#pragma GCC unroll 3
        for (int r = 0; r < R; r++)
#pragma GCC unroll 5
            for (int ky = 0; ky < K; ky++)
#pragma GCC unroll 5
                for (int kx = 0; kx < K; kx++)
                    acc[r][ky * K + kx] = _mm512_fmadd_ps(_mm512_set1_ps(src[r][ky][o + kx]), d,
                                                          acc[r][ky * K + kx]);
    }
#pragma GCC unroll 3
    for (int r = 0; r < R; r++)
#pragma GCC unroll 25
        for (int t = 0; t < K * K; t++) {
            float *s = sums + (size_t)(r * K * K + t) * co_pad;
            _mm512_storeu_ps(s, first ? acc[r][t] : _mm512_add_ps(_mm512_loadu_ps(s), acc[r][t]));
        }
}

/* Without GCC's predictive commoning, which would carry the broadcasts of
 * one pixel over to the next (x[j + 1] is the next pixel's x[j]) and spill
 * them: each x value must stay a memory operand of its FMA. */
#if defined(__clang__)
#define KEEP_MEMORY_OPERANDS
#else
#define KEEP_MEMORY_OPERANDS __attribute__((optimize("no-predictive-commoning")))
#endif
#define WTILE_FN(R, K)                                                                       \
    TARGET KEEP_MEMORY_OPERANDS static void wtile_##R##_##K(                                 \
        const float *dt, size_t co_pad, const float *x, size_t plane, int wp,                \
        const size_t *off, int count, bool first, float *sums)                               \
    {                                                                                        \
        wtile(R, K, dt, co_pad, x, plane, wp, off, count, first, sums);                      \
    }
WTILE_FN(3, 3)
WTILE_FN(2, 3)
WTILE_FN(1, 3)
WTILE_FN(1, 5)

static wtile_fn wtile_for(int r, int k)
{
    if (k == 5) return wtile_1_5;
    return r == 3 ? wtile_3_3 : r == 2 ? wtile_2_3 : wtile_1_3;
}
#else
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
            transpose16(a->dy + cb * a->pixels + p0, a->pixels, chans, pixels,
                        a->dt + p0 * a->co_pad + cb, a->co_pad, LANES);
        }
    }
}

#define CHUNK_PIXELS 256 /* output pixels per chunk: one float sum, then double */

typedef struct wgrad_args {
    const float *dt, *xp;
    float *partials;   /* per part: the chunk group's sums */
    double *totals;    /* per part: the groups' sums */
    int cout, cin;
    size_t pixels;
    const direct_grid *g;
    atomic_int *parts_run; /* the parts that ran: always 0 .. count-1 */
} wgrad_args;

/* Work items [lo, hi): item = (chunk of CHUNK_PIXELS output pixels, block
 * of 16 output channels), chunk-major, so that small planes with few
 * chunks still give every thread work.  Per item the window offsets of
 * the chunk's pixels are tabled once, then every input-channel tile sweeps
 * the chunk.  A part visits each channel block every `blocks` items;
 * blocks a short share never reaches get zero totals. */
static void wgrad_part(void *arg, size_t lo, size_t hi, int part)
{
    const wgrad_args *a = arg;
    const direct_grid *g = a->g;
    const int kk = g->k * g->k;
    const size_t co_pad = lanes_of(a->cout), blocks = co_pad / LANES;
    const size_t image = (size_t)g->hp * g->wp, per_image = (size_t)g->ho * g->wo;
    const size_t entries = (size_t)a->cin * kk;
    float *acc = a->partials + (size_t)part * entries * co_pad;
    double *total = a->totals + (size_t)part * entries * co_pad;
    size_t off[CHUNK_PIXELS], tabled = SIZE_MAX;
    atomic_fetch_add(a->parts_run, 1);
    for (size_t item = lo; item < hi; item++) {
        const size_t p0 = item / blocks * CHUNK_PIXELS, cb = item % blocks * LANES;
        const size_t visit = (item - lo) / blocks; /* of this block by this part */
        const int count = (int)(a->pixels - p0 < CHUNK_PIXELS ? a->pixels - p0 : CHUNK_PIXELS);
        if (tabled != p0) {
            for (int q = 0; q < count; q++) {
                const size_t p = p0 + (size_t)q, n = p / per_image, i = p % per_image / g->wo;
                off[q] = n * image + (i * g->wp + p % g->wo) * (size_t)g->stride;
            }
            tabled = p0;
        }
        for (int ci = 0; ci < a->cin;) {
            const int r = wtile_width(g->k, a->cin - ci);
            wtile_for(r, g->k)(a->dt + p0 * co_pad + cb, co_pad,
                               a->xp + g->lead + (size_t)ci * g->plane, g->plane, g->wp, off,
                               count, visit % CHUNK_GROUP == 0,
                               acc + (size_t)ci * kk * co_pad + cb);
            ci += r;
        }
        if (visit % CHUNK_GROUP == CHUNK_GROUP - 1 || item + blocks >= hi)
            for (size_t e = 0; e < entries; e++) {
                const float *restrict f = acc + e * co_pad + cb;
                double *restrict d = total + e * co_pad + cb;
                if (visit < CHUNK_GROUP)
                    for (int l = 0; l < LANES; l++) d[l] = f[l];
                else
                    for (int l = 0; l < LANES; l++) d[l] += f[l];
            }
    }
    for (size_t j = hi - lo; j < blocks; j++) {
        const size_t cb = (lo + j) % blocks * LANES;
        for (size_t e = 0; e < entries; e++)
            memset(total + e * co_pad + cb, 0, LANES * sizeof(double));
    }
}

typedef struct wsum_args {
    const double *partials;
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
                double s = a->partials[at];
                for (int q = 1; q < a->parts; q++) s += a->partials[q * per_part + at];
                a->dw[((size_t)co * a->cin + ci) * a->kk + t] = (float)s;
            }
}

void direct_weight_grad(const float *dy, int cout, const float *xp, int cin,
                        const direct_grid *g, float *dw, float *scratch, int threads)
{
    const int parts = threads > 0 ? threads : 1, kk = g->k * g->k;
    const size_t co_pad = lanes_of(cout), rows = (size_t)g->n * g->ho;
    const size_t pixels = rows * g->wo;
    /* dt and the float partials hold multiples of 16 floats: the double
     * totals stay 64-byte aligned. */
    float *dt = scratch, *partials = dt + pixels * co_pad;
    double *totals = (double *)(partials + (size_t)parts * cin * kk * co_pad);
    transpose_args t = {dy, dt, cout, pixels, co_pad};
    parallel_for((pixels + LANES - 1) / LANES, 1, pixels * co_pad, threads, transpose_pixels, &t);
    atomic_int parts_run = 0;
    wgrad_args a = {dt, xp, partials, totals, cout, cin, pixels, g, &parts_run};
    const size_t items = (pixels + CHUNK_PIXELS - 1) / CHUNK_PIXELS * (co_pad / LANES);
    parallel_parts(items, 1, (size_t)cout * cin * kk * pixels / 64, parts, wgrad_part, &a);
    wsum_args s = {totals, dw, cout, cin, kk, atomic_load(&parts_run)};
    parallel_for((size_t)cin, 1, (size_t)parts * cin * kk * co_pad, threads, wgrad_sum, &s);
}
