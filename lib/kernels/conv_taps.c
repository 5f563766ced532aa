/* Convolution as one GEMM per kernel tap (see conv_taps.h). */
#include "conv_taps.h"

#include <string.h>

#include "kernels.h"
#include "pixel_rows.h"

/* Output rows i0..i1 and columns j0..j1 where tap (ky, kx) reads inside
 * the input, for stride 1. */
typedef struct tap_range {
    int dy, dx;
    int i0, i1, j0, j1;
} tap_range;

static int max_int(int a, int b) { return a > b ? a : b; }
static int min_int(int a, int b) { return a < b ? a : b; }

static tap_range tap_range_of(const pixel_conv *s, int ky, int kx)
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

size_t conv_taps_weight_floats(const pixel_conv *s)
{
    return (size_t)s->k * s->k * s->cin * s->cout;
}

static size_t in_floats(const pixel_conv *s) { return (size_t)s->h * s->w * s->n * s->cin; }
static size_t out_floats(const pixel_conv *s) { return (size_t)s->ho * s->wo * s->n * s->cout; }

/* The weight gradient's sums of one tap: float GEMMs over at most DW_ROWS
 * pixel-rows in all (a short float32 sum), combined in double.  A float
 * sum over all the batch's pixels loses digits when the sum cancels, as
 * under batch norm. */
#define DW_ROWS 1024

/* Backward: x and dY as rows, then either the weight gradient by tap
 * [KK][Cin][Cout] and (at a multiple of 16 floats) one tap's double sums,
 * or, after them, the input gradient's rows. */
static size_t rest_offset(const pixel_conv *s) { return (in_floats(s) + out_floats(s) + 15) / 16 * 16; }
static size_t sums_offset(const pixel_conv *s)
{
    return (conv_taps_weight_floats(s) + 15) / 16 * 16;
}
static size_t dw_floats(const pixel_conv *s)
{
    return sums_offset(s) + (size_t)s->cin * s->cout * (sizeof(double) / sizeof(float));
}

size_t conv_taps_workspace_floats(const pixel_conv *s)
{
    const size_t dw = dw_floats(s), dx = in_floats(s);
    return rest_offset(s) + (dw > dx ? dw : dx);
}

typedef struct zero_args {
    float *p;
} zero_args;

static void zero_range(void *arg, size_t lo, size_t hi)
{
    const zero_args *a = arg;
    memset(a->p + lo, 0, (hi - lo) * sizeof(float));
}

/* p[0 .. n) = 0, on all threads: the GEMMs then only add. */
static void zero_floats(float *p, size_t n, int threads)
{
    zero_args a = {p};
    parallel_for(n, 4096, n, threads, zero_range, &a);
}

/* ---- the GEMMs ----------------------------------------------------------- */

typedef enum { PASS_FORWARD, PASS_DX, PASS_DW } pass_kind;

typedef struct pass_args {
    const pixel_conv *s;
    pass_kind kind;
    const float *x_rows;  /* [P][N][Cin] */
    const float *y_rows;  /* forward: unused; else dY [Po][N][Cout] */
    const float *wt;      /* [KK][Cin][Cout] */
    float *out;           /* Y rows, dX rows, or dW as [KK][Cin][Cout] */
    double *sums;         /* dW: one tap's [Cin][Cout] sums */
} pass_args;

/* One tap's weight gradient on columns [lo, hi): float GEMMs accumulate
 * in the tap's block of dW until the next would take it past DW_ROWS
 * rows; then the block goes into the double sums (stored by the first
 * flush, added after), which in the end are written back to the block. */
typedef struct dw_tap {
    float *block; /* dW_t [Cin][Cout] */
    int pending;  /* rows summed in block since the last flush */
    int flushes;
} dw_tap;

static void dw_flush(const pass_args *a, dw_tap *st, int lo, int hi)
{
    const int cout = a->s->cout;
    for (int ci = 0; ci < a->s->cin; ci++) {
        double *restrict sum = a->sums + (size_t)ci * cout;
        const float *restrict b = st->block + (size_t)ci * cout;
        if (st->flushes)
            for (int co = lo; co < hi; co++) sum[co] += b[co];
        else
            for (int co = lo; co < hi; co++) sum[co] = b[co];
    }
    st->flushes++, st->pending = 0;
}

/* block += X[irow..]^T dY[orow..] over m rows, DW_ROWS at most at a time. */
static void block_dw(const pass_args *a, dw_tap *st, size_t orow, size_t irow, int m, int lo,
                     int hi)
{
    const pixel_conv *s = a->s;
    const int cin = s->cin, cout = s->cout, cols = hi - lo;
    for (int r0 = 0; r0 < m;) {
        if (st->pending == DW_ROWS) dw_flush(a, st, lo, hi);
        int rows = m - r0 < DW_ROWS - st->pending ? m - r0 : DW_ROWS - st->pending;
        if (st->pending && m - r0 > rows) { /* a whole piece rather than a sliver */
            dw_flush(a, st, lo, hi);
            rows = m - r0 < DW_ROWS ? m - r0 : DW_ROWS;
        }
        gemm_serial(true, false, cin, cols, rows, 1.0f, a->x_rows + (irow + r0) * cin, cin,
                    a->y_rows + (orow + r0) * cout + lo, cout, st->pending ? 1.0f : 0.0f,
                    st->block + lo, cout);
        st->pending += rows, r0 += rows;
    }
}

/* The tap's block, columns [lo, hi): as summed if it never flushed (a
 * short sum, float is enough), else its double sums; zero for a tap that
 * never reads the input. */
static void dw_finish(const pass_args *a, dw_tap *st, int lo, int hi)
{
    const int cout = a->s->cout;
    if (st->flushes && st->pending) dw_flush(a, st, lo, hi);
    if (!st->flushes && st->pending) return;
    for (int ci = 0; ci < a->s->cin; ci++) {
        float *restrict b = st->block + (size_t)ci * cout;
        const double *restrict sum = a->sums + (size_t)ci * cout;
        for (int co = lo; co < hi; co++) b[co] = st->flushes ? (float)sum[co] : 0.0f;
    }
}

/* One block of `m` rows: output pixel-rows from `orow`, input from
 * `irow`, on output columns [lo, hi) of this pass. */
static void block_gemm(const pass_args *a, dw_tap *st, int t, size_t orow, size_t irow, int m,
                       int lo, int hi)
{
    const pixel_conv *s = a->s;
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
    case PASS_DW: /* dW_t += X[irow..]^T dY[orow..] */
        block_dw(a, st, orow, irow, m, lo, hi);
        break;
    }
}

static void pass_columns(void *arg, size_t lo_, size_t hi_, int part)
{
    const pass_args *a = arg;
    const pixel_conv *s = a->s;
    const int lo = (int)lo_, hi = (int)hi_;
    const size_t n = (size_t)s->n;
    (void)part;
    for (int ky = 0; ky < s->k; ky++)
        for (int kx = 0; kx < s->k; kx++) {
            const int t = ky * s->k + kx;
            const tap_range r = tap_range_of(s, ky, kx);
            dw_tap st = {a->out + (size_t)t * s->cin * s->cout, 0, 0};
            if (r.i0 < r.i1 && r.j0 < r.j1) {
                const bool whole_rows = r.j0 == 0 && r.j1 == s->wo && s->wo == s->w;
                const int lines = whole_rows ? 1 : r.i1 - r.i0;
                const int m = whole_rows ? (r.i1 - r.i0) * s->wo : r.j1 - r.j0;
                for (int b = 0; b < lines; b++) {
                    const int i = r.i0 + b;
                    const size_t orow = ((size_t)i * s->wo + (size_t)r.j0) * n;
                    const size_t irow = ((size_t)(i + r.dy) * s->w + (size_t)(r.j0 + r.dx)) * n;
                    block_gemm(a, &st, t, orow, irow, m * s->n, lo, hi);
                }
            }
            if (a->kind == PASS_DW) dw_finish(a, &st, lo, hi);
        }
}

static void run_pass(pass_args *a, int columns, int threads)
{
    const pixel_conv *s = a->s;
    const size_t work = (size_t)s->k * s->k * s->cin * s->cout * s->n * s->ho * s->wo;
    parallel_parts((size_t)columns, 16, work, threads, pass_columns, a);
}

/* ---- the passes ---------------------------------------------------------- */

void conv_taps_forward(const pixel_conv *s, const float *x, const float *w, const float *bias,
                       float *wt, float *y, float *workspace, int threads)
{
    float *x_rows = workspace, *y_rows = x_rows + in_floats(s);
    rows_from_cnhw(x, x_rows, s->cin, s->n, s->h * s->w, threads);
    taps_pack_weights(w, s->cout, s->cin, s->k * s->k, wt, threads);
    zero_floats(y_rows, out_floats(s), threads);
    pass_args a = {s, PASS_FORWARD, x_rows, NULL, wt, y_rows, NULL};
    run_pass(&a, s->cout, threads);
    rows_to_cnhw(y_rows, y, bias, s->cout, s->n, s->ho * s->wo, false, threads);
}

void conv_taps_backward(const pixel_conv *s, const float *x, const float *dy, const float *wt,
                        float *dw, float *dx, bool accumulate, float *workspace, int threads)
{
    float *x_rows = workspace, *dy_rows = x_rows + in_floats(s);
    float *rest = workspace + rest_offset(s), *dx_rows = rest, *dw_taps = rest;
    double *sums = (double *)(rest + sums_offset(s));
    rows_from_cnhw(x, x_rows, s->cin, s->n, s->h * s->w, threads);
    rows_from_cnhw(dy, dy_rows, s->cout, s->n, s->ho * s->wo, threads);
    pass_args a = {s, PASS_DW, x_rows, dy_rows, wt, dw_taps, sums};
    run_pass(&a, s->cout, threads);
    taps_unpack_weights(dw_taps, s->cout, s->cin, s->k * s->k, dw, threads);
    if (!dx) return;
    zero_floats(dx_rows, in_floats(s), threads);
    a = (pass_args){s, PASS_DX, x_rows, dy_rows, wt, dx_rows, NULL};
    run_pass(&a, s->cin, threads);
    rows_to_cnhw(dx_rows, dx, NULL, s->cin, s->n, s->h * s->w, accumulate, threads);
}
