/* Convolution as one GEMM per kernel tap (see conv_taps.h). */
#include "conv_taps.h"

#include <string.h>

#include "kernels.h"
#include "simd.h"

/* Output rows i0..i1 and columns j0..j1 where tap (ky, kx) reads inside
 * the input, for stride 1. */
typedef struct tap_range {
    int dy, dx;
    int i0, i1, j0, j1;
} tap_range;

static int max_int(int a, int b) { return a > b ? a : b; }
static int min_int(int a, int b) { return a < b ? a : b; }

static tap_range tap_range_of(const taps_shape *s, int ky, int kx)
{
    tap_range r;
    r.dy = ky - s->pad, r.dx = kx - s->pad;
    r.i0 = max_int(0, -r.dy), r.i1 = min_int(s->ho, s->h - r.dy);
    r.j0 = max_int(0, -r.dx), r.j1 = min_int(s->wo, s->w - r.dx);
    return r;
}

/* Valid (output, tap) pairs along one axis of n outputs over an input of
 * `in` pixels. */
static long valid_pairs(int n, int in, int k, int pad)
{
    long pairs = 0;
    for (int t = 0; t < k; t++) {
        const int d = t - pad, lo = max_int(0, -d), hi = min_int(n, in - d);
        if (hi > lo) pairs += hi - lo;
    }
    return pairs;
}

double conv_taps_useful(int h, int w, int k, int pad)
{
    const int ho = h + 2 * pad - k + 1, wo = w + 2 * pad - k + 1;
    if (ho <= 0 || wo <= 0) return 0.0;
    return (double)valid_pairs(ho, h, k, pad) / ((double)ho * k) *
           ((double)valid_pairs(wo, w, k, pad) / ((double)wo * k));
}

size_t conv_taps_weight_floats(const taps_shape *s)
{
    return (size_t)s->k * s->k * s->cin * s->cout;
}

static size_t in_floats(const taps_shape *s) { return (size_t)s->h * s->w * s->n * s->cin; }
static size_t out_floats(const taps_shape *s) { return (size_t)s->ho * s->wo * s->n * s->cout; }

size_t conv_taps_workspace_floats(const taps_shape *s)
{
    return 2 * in_floats(s) + out_floats(s) + conv_taps_weight_floats(s);
}

/* ---- layouts ----------------------------------------------------------- */

/* CNHW [C][N][P] <-> pixel-major rows [P][N][C], image by image, 16
 * channels at a time so that both sides move whole cache lines. */
typedef struct relayout_args {
    const float *src;
    float *dst;
    const float *bias; /* into CNHW: added unless accumulating */
    int c, n, p;
    bool into_rows, accumulate;
} relayout_args;

#define CH_BLOCK 16

static void relayout_images(void *arg, size_t lo, size_t hi)
{
    const relayout_args *a = arg;
    const size_t c_all = (size_t)a->c, n_all = (size_t)a->n, p_all = (size_t)a->p;
    for (size_t n = lo; n < hi; n++)
        for (size_t c0 = 0; c0 < c_all; c0 += CH_BLOCK) {
            const size_t c1 = c0 + CH_BLOCK < c_all ? c0 + CH_BLOCK : c_all;
            for (size_t p = 0; p < p_all; p++) {
                const size_t row = (p * n_all + n) * c_all;
                for (size_t c = c0; c < c1; c++) {
                    const size_t at = (c * n_all + n) * p_all + p;
                    if (a->into_rows)
                        a->dst[row + c] = a->src[at];
                    else if (a->accumulate)
                        a->dst[at] += a->src[row + c];
                    else
                        a->dst[at] = a->src[row + c] + (a->bias ? a->bias[c] : 0.0f);
                }
            }
        }
}

static void to_rows(const float *src, float *dst, int c, int n, int p, int threads)
{
    relayout_args a = {src, dst, NULL, c, n, p, true, false};
    parallel_for((size_t)n, 1, (size_t)c * n * p, threads, relayout_images, &a);
}

static void to_cnhw(const float *src, float *dst, const float *bias, int c, int n, int p,
                    bool accumulate, int threads)
{
    relayout_args a = {src, dst, bias, c, n, p, false, accumulate};
    parallel_for((size_t)n, 1, (size_t)c * n * p, threads, relayout_images, &a);
}

/* w [Cout][Cin*KK] <-> wt [KK*Cin][Cout]: a transpose whose rows are
 * renumbered (column ci*KK + t of w is row t*Cin + ci of wt), by 16 x 16
 * tiles through a scratch tile, in vector registers where the CPU has
 * AVX-512; threads take columns of w. */
typedef struct weights_args {
    const float *src;
    float *dst;
    int cin, cout, kk;
    bool vector;
} weights_args;

#define TILE_SIDE 16

/* Rows of wt for the columns j0, j0+1, ... of w (ci*KK + t -> t*Cin + ci),
 * one division per tile. */
static void taps_rows(size_t j0, int n, size_t cin, size_t kk, size_t *rows)
{
    size_t ci = j0 / kk, t = j0 % kk;
    for (int j = 0; j < n; j++) {
        rows[j] = t * cin + ci;
        if (++t == kk) t = 0, ci++;
    }
}

/* Column tiles [lo, hi) of w, row tiles of w outermost so that the rows of
 * w are read (pack) or written (unpack) front to back; full tiles with
 * constant sizes, which the vector transpose unrolls. */
#define WEIGHT_TILES(NAME, ATTR, TRANSPOSE, COPY)                                               \
    ATTR static void NAME(const weights_args *a, size_t lo, size_t hi, bool pack)                 \
    {                                                                                            \
        const size_t cin = (size_t)a->cin, cout = (size_t)a->cout, kk = (size_t)a->kk;           \
        const size_t cols = cin * kk;                                                            \
        float tile[TILE_SIDE * TILE_SIDE];                                                       \
        size_t rows[TILE_SIDE];                                                                  \
        for (size_t i0 = 0; i0 < cout; i0 += TILE_SIDE) {                                        \
            const int ni = (int)(cout - i0 < TILE_SIDE ? cout - i0 : TILE_SIDE);                 \
            for (size_t jt = lo; jt < hi; jt++) {                                                \
                const size_t j0 = jt * TILE_SIDE;                                                \
                const int nj = (int)(cols - j0 < TILE_SIDE ? cols - j0 : TILE_SIDE);             \
                const bool full = ni == TILE_SIDE && nj == TILE_SIDE;                            \
                taps_rows(j0, nj, cin, kk, rows);                                                \
                if (pack) {                                                                      \
                    if (full)                                                                    \
                        TRANSPOSE(a->src + i0 * cols + j0, cols, TILE_SIDE, TILE_SIDE, tile,     \
                                  TILE_SIDE);                                                    \
                    else                                                                         \
                        TRANSPOSE(a->src + i0 * cols + j0, cols, ni, nj, tile, TILE_SIDE);       \
                    for (int j = 0; j < nj; j++)                                                 \
                        COPY(a->dst + rows[j] * cout + i0, tile + j * TILE_SIDE, ni);            \
                } else {                                                                         \
                    for (int j = 0; j < nj; j++)                                                 \
                        COPY(tile + j * TILE_SIDE, a->src + rows[j] * cout + i0, ni);            \
                    if (full)                                                                    \
                        TRANSPOSE(tile, TILE_SIDE, TILE_SIDE, TILE_SIDE, a->dst + i0 * cols + j0, \
                                  cols);                                                         \
                    else                                                                         \
                        TRANSPOSE(tile, TILE_SIDE, nj, ni, a->dst + i0 * cols + j0, cols);       \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
    }

/* dst[c * ld_dst + r] = src[r * ld + c] for r < rows, c < cols. */
static inline void transpose_scalar(const float *src, size_t ld, int rows, int cols, float *dst,
                                    size_t ld_dst)
{
    for (int c = 0; c < cols; c++)
        for (int r = 0; r < rows; r++)
            dst[(size_t)c * ld_dst + (size_t)r] = src[(size_t)r * ld + (size_t)c];
}

static inline void copy_scalar(float *dst, const float *src, int n)
{
    memcpy(dst, src, (size_t)n * sizeof(float));
}

WEIGHT_TILES(weight_tiles_scalar, , transpose_scalar, copy_scalar)

#if PCNN_AVX512
#define TRANSPOSE_VECTOR(src, ld, rows, cols, dst, ld_dst)                                       \
    transpose16(src, ld, rows, cols, dst, ld_dst, rows)

TARGET static inline void copy_vector(float *dst, const float *src, int n)
{
    const __mmask16 m = (__mmask16)((1u << n) - 1u);
    _mm512_mask_storeu_ps(dst, m, _mm512_maskz_loadu_ps(m, src));
}

WEIGHT_TILES(weight_tiles_vector, TARGET, TRANSPOSE_VECTOR, copy_vector)
#endif

static void weight_tiles(void *arg, size_t lo, size_t hi, bool pack)
{
    const weights_args *a = arg;
#if PCNN_AVX512
    if (a->vector) {
        weight_tiles_vector(a, lo, hi, pack);
        return;
    }
#endif
    weight_tiles_scalar(a, lo, hi, pack);
}

static void pack_weights(void *arg, size_t lo, size_t hi) { weight_tiles(arg, lo, hi, true); }
static void unpack_weights(void *arg, size_t lo, size_t hi) { weight_tiles(arg, lo, hi, false); }

static void weights(range_fn fn, const taps_shape *s, const float *src, float *dst, int threads)
{
    weights_args a = {src, dst, s->cin, s->cout, s->k * s->k, false};
#if PCNN_AVX512
    a.vector = cpu_has_avx512();
#endif
    const size_t tiles = ((size_t)s->cin * a.kk + TILE_SIDE - 1) / TILE_SIDE;
    parallel_for(tiles, 1, conv_taps_weight_floats(s), threads, fn, &a);
}

typedef struct zero_args {
    float *p;
} zero_args;

static void zero_range(void *arg, size_t lo, size_t hi)
{
    const zero_args *a = arg;
    memset(a->p + lo, 0, (hi - lo) * sizeof(float));
}

static void zero(float *p, size_t n, int threads)
{
    zero_args a = {p};
    parallel_for(n, 4096, n, threads, zero_range, &a);
}

/* ---- the GEMMs ----------------------------------------------------------- */

typedef enum { PASS_FORWARD, PASS_DX, PASS_DW } pass_kind;

typedef struct pass_args {
    const taps_shape *s;
    pass_kind kind;
    const float *x_rows;  /* [P][N][Cin] */
    const float *y_rows;  /* forward: unused; else dY [Po][N][Cout] */
    const float *wt;      /* [KK][Cin][Cout] */
    float *out;           /* Y rows, dX rows, or dW as [KK][Cin][Cout] */
} pass_args;

/* One block of `m` rows: output pixel-rows from `orow`, input from
 * `irow`, on output columns [lo, hi) of this pass. */
static void block_gemm(const pass_args *a, int t, size_t orow, size_t irow, int m, int lo,
                       int hi, bool first)
{
    const taps_shape *s = a->s;
    const int cin = s->cin, cout = s->cout, cols = hi - lo;
    const float *w = a->wt + (size_t)t * cin * cout;
    switch (a->kind) {
    case PASS_FORWARD: /* Y[orow..] += X[irow..] W_t */
        gemm_serial(false, false, m, cols, cin, 1.0f, a->x_rows + irow * cin, cin, w + lo, cout,
                    1.0f, a->out + orow * cout + lo, cout);
        break;
    case PASS_DX: /* dX[irow..] += dY[orow..] W_t^T */
        gemm_serial(false, true, m, cols, cout, 1.0f, a->y_rows + orow * cout, cout,
                    w + (size_t)lo * cout, cout, 1.0f, a->out + irow * cin + lo, cin);
        break;
    case PASS_DW: /* dW_t (+)= X[irow..]^T dY[orow..] */
        gemm_serial(true, false, cin, cols, m, 1.0f, a->x_rows + irow * cin, cin,
                    a->y_rows + orow * cout + lo, cout, first ? 0.0f : 1.0f,
                    a->out + (size_t)t * cin * cout + lo, cout);
        break;
    }
}

static void pass_columns(void *arg, size_t lo_, size_t hi_, int part)
{
    const pass_args *a = arg;
    const taps_shape *s = a->s;
    const int lo = (int)lo_, hi = (int)hi_;
    const size_t n = (size_t)s->n;
    (void)part;
    for (int ky = 0; ky < s->k; ky++)
        for (int kx = 0; kx < s->k; kx++) {
            const int t = ky * s->k + kx;
            const tap_range r = tap_range_of(s, ky, kx);
            bool first = true;
            if (r.i0 < r.i1 && r.j0 < r.j1) {
                const bool whole_rows = r.j0 == 0 && r.j1 == s->wo && s->wo == s->w;
                const int lines = whole_rows ? 1 : r.i1 - r.i0;
                const int m = whole_rows ? (r.i1 - r.i0) * s->wo : r.j1 - r.j0;
                for (int b = 0; b < lines; b++) {
                    const int i = r.i0 + b;
                    const size_t orow = ((size_t)i * s->wo + (size_t)r.j0) * n;
                    const size_t irow = ((size_t)(i + r.dy) * s->w + (size_t)(r.j0 + r.dx)) * n;
                    block_gemm(a, t, orow, irow, m * s->n, lo, hi, first);
                    first = false;
                }
            }
            if (first && a->kind == PASS_DW) /* a tap that never reads the input */
                for (int ci = 0; ci < s->cin; ci++)
                    memset(a->out + ((size_t)t * s->cin + ci) * s->cout + lo, 0,
                           (size_t)(hi - lo) * sizeof(float));
        }
}

static void run_pass(pass_args *a, int columns, int threads)
{
    const taps_shape *s = a->s;
    const size_t work = (size_t)s->k * s->k * s->cin * s->cout * s->n * s->ho * s->wo;
    parallel_parts((size_t)columns, 16, work, threads, pass_columns, a);
}

/* ---- the passes ---------------------------------------------------------- */

void conv_taps_forward(const taps_shape *s, const float *x, const float *w, const float *bias,
                       float *wt, float *y, float *workspace, int threads)
{
    float *x_rows = workspace, *y_rows = x_rows + in_floats(s);
    to_rows(x, x_rows, s->cin, s->n, s->h * s->w, threads);
    weights(pack_weights, s, w, wt, threads);
    zero(y_rows, out_floats(s), threads);
    pass_args a = {s, PASS_FORWARD, x_rows, NULL, wt, y_rows};
    run_pass(&a, s->cout, threads);
    to_cnhw(y_rows, y, bias, s->cout, s->n, s->ho * s->wo, false, threads);
}

void conv_taps_backward(const taps_shape *s, const float *x, const float *dy, const float *wt,
                        float *dw, float *dx, bool accumulate, float *workspace, int threads)
{
    float *x_rows = workspace, *dy_rows = x_rows + in_floats(s);
    float *dx_rows = dy_rows + out_floats(s), *dw_taps = dx_rows + in_floats(s);
    to_rows(x, x_rows, s->cin, s->n, s->h * s->w, threads);
    to_rows(dy, dy_rows, s->cout, s->n, s->ho * s->wo, threads);
    pass_args a = {s, PASS_DW, x_rows, dy_rows, wt, dw_taps};
    run_pass(&a, s->cout, threads);
    weights(unpack_weights, s, dw_taps, dw, threads);
    if (!dx) return;
    zero(dx_rows, in_floats(s), threads);
    a = (pass_args){s, PASS_DX, x_rows, dy_rows, wt, dx_rows};
    run_pass(&a, s->cin, threads);
    to_cnhw(dx_rows, dx, NULL, s->cin, s->n, s->h * s->w, accumulate, threads);
}
