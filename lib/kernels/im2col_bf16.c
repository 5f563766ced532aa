/* im2col and vol2col written in bf16 (kernels_bf16.h).  The copies of the
 * fp32 versions become conversions: contiguous runs through
 * bf16_from_f32_array (AVX-512 where the CPU has it), strided ones
 * element by element; padding is bf16 zero (0x0000). */
#include <string.h>

#include "kernels_bf16.h"

/* The output columns whose input column o*s-p+kw lies in [0, w):
 * [*lo, *hi), clamped to [0, out). */
static void valid_range(int kw, int stride, int pad, int w, int out, int *lo, int *hi)
{
    const int first = pad - kw, last = w - 1 + pad - kw;
    int a = first <= 0 ? 0 : first / stride + (first % stride != 0);
    int b = last < 0 ? 0 : last / stride + 1;
    if (a > out) a = out;
    if (b > out) b = out;
    *lo = a;
    *hi = b < a ? a : b;
}

static void zero(bf16 *dst, size_t n) { memset(dst, 0, n * sizeof *dst); }

/* One output row of wo values from input row `row` (the element of
 * output column lo), columns [lo, hi) valid. */
static void convert_row(const float *row, int stride, int lo, int hi, int wo, bf16 *dst)
{
    zero(dst, (size_t)lo);
    if (hi > lo) {
        if (stride == 1)
            bf16_from_f32_array(row, dst + lo, (size_t)(hi - lo));
        else
            for (int o = lo; o < hi; o++) dst[o] = bf16_from_f32(row[(size_t)(o - lo) * stride]);
    }
    zero(dst + hi, (size_t)(wo - hi));
}

typedef struct blocks {
    size_t n, per;
    const float *src;
    bf16 *dst;
} blocks;

static void convert_blocks(void *arg, size_t b0, size_t b1)
{
    const blocks *a = arg;
    const size_t lo = b0 * a->per, hi = b1 * a->per < a->n ? b1 * a->per : a->n;
    if (hi > lo) bf16_from_f32_array(a->src + lo, a->dst + lo, hi - lo);
}

void bf16_from_f32_parallel(const float *src, bf16 *dst, size_t n, int threads)
{
    /* Blocks of 32 values: whole cache lines of bf16 per thread. */
    blocks a = {n, 32, src, dst};
    parallel_for((n + 31) / 32, 1, n, threads, convert_blocks, &a);
}

/* Output rows [oh0, oh1) of one sample for col row (ci, kh, kw); src is
 * the sample's input plane of channel ci. */
static void im2col_band_bf16(const float *src, const conv_shape *g, int kh, int kw, int oh0,
                             int oh1, bf16 *dst)
{
    const int h = g->h, w = g->w, wo = g->wo, stride = g->stride, pad = g->pad;
    int lo, hi;
    valid_range(kw, stride, pad, w, wo, &lo, &hi);
    if (stride == 1 && wo == w) {
        /* As im2col_band: the rows with an input row are the plane shifted
         * by (kh - pad) * w + kw - pad, one contiguous conversion, then the
         * fringe columns the shift wraps are zeroed. */
        int a = pad - kh > oh0 ? pad - kh : oh0, b = h + pad - kh < oh1 ? h + pad - kh : oh1;
        if (b < a) b = a;
        zero(dst, (size_t)(a - oh0) * wo);
        zero(dst + (size_t)(b - oh0) * wo, (size_t)(oh1 - b) * wo);
        if (a == b) return;
        const long first = (long)(a + kh - pad) * w + (kw - pad);
        const long from = first > 0 ? first : 0;
        long end = first + (long)(b - a) * wo;
        if (end > (long)h * w) end = (long)h * w;
        bf16 *d = dst + (size_t)(a - oh0) * wo;
        /* Clamped ends: the fringe zeroing below covers what they skip. */
        if (first < 0) zero(d, (size_t)(from - first));
        if (end > from) bf16_from_f32_array(src + from, d + (from - first), (size_t)(end - from));
        if (end < first + (long)(b - a) * wo)
            zero(d + (end - first), (size_t)(first + (long)(b - a) * wo - end));
        for (int oh = a; oh < b; oh++, d += wo) {
            zero(d, (size_t)lo);
            zero(d + hi, (size_t)(wo - hi));
        }
        return;
    }
    for (int oh = oh0; oh < oh1; oh++, dst += wo) {
        const int ih = oh * stride - pad + kh;
        if (ih < 0 || ih >= h || hi <= lo) {
            zero(dst, (size_t)wo);
            continue;
        }
        convert_row(src + (size_t)ih * w + (lo * stride - pad + kw), stride, lo, hi, wo, dst);
    }
}

/* Col row r over output rows [g0, g1) of the batch. */
static void im2col_row_bf16(const float *x, const conv_shape *g, int r, int g0, int g1,
                            bf16 *dst)
{
    const int k = g->k, ho = g->ho, wo = g->wo;
    const size_t plane = (size_t)g->h * g->w;
    const int ci = r / (k * k), kh = r / k % k, kw = r % k;
    for (int at = g0; at < g1;) {
        const int s = at / ho, oh0 = at % ho;
        const int oh1 = g1 - s * ho < ho ? g1 - s * ho : ho;
        im2col_band_bf16(x + ((size_t)ci * g->n + s) * plane, g, kh, kw, oh0, oh1,
                         dst + (size_t)(at - g0) * wo);
        at += oh1 - oh0;
    }
}

void im2col_rows_bf16(const float *x, const conv_shape *g, int g0, int g1, bf16 *col, size_t ld)
{
    const int rows = g->c * g->k * g->k;
    for (int r = 0; r < rows; r++) im2col_row_bf16(x, g, r, g0, g1, col + (size_t)r * ld);
}

typedef struct batch_call {
    const float *x;
    const conv_shape *g;
    bf16 *col;
} batch_call;

static void batch_rows(void *arg, size_t r0, size_t r1)
{
    const batch_call *a = arg;
    const size_t ld = (size_t)a->g->n * a->g->ho * a->g->wo;
    for (size_t r = r0; r < r1; r++)
        im2col_row_bf16(a->x, a->g, (int)r, 0, a->g->n * a->g->ho, a->col + r * ld);
}

void im2col_batch_bf16(const float *x, const conv_shape *g, bf16 *col, int threads)
{
    batch_call a = {x, g, col};
    const size_t rows = (size_t)g->c * g->k * g->k;
    parallel_for(rows, 1, rows * g->n * g->ho * g->wo, threads, batch_rows, &a);
}

/* Samples [s0, s0 + ns), output planes [d0, d1) of each; rows of ld
 * values, a sample's block after the previous one's. */
typedef struct vol_call {
    const float *x;
    const vol_shape *g;
    bf16 *col;
    int s0, ns, d0, d1;
    size_t ld;
} vol_call;

/* Col rows r = (ci, kd, kh, kw), each ns blocks of (d1 - d0) x Ho x Wo. */
static void vol_rows(void *arg, size_t r0, size_t r1)
{
    const vol_call *a = arg;
    const vol_shape *g = a->g;
    const int k = g->k, st = g->stride, pad = g->pad;
    const size_t volume = (size_t)g->d * g->h * g->w;
    const size_t block = (size_t)(a->d1 - a->d0) * g->oh * g->ow;
    for (size_t u = r0 * a->ns; u < r1 * a->ns; u++) {
        const size_t r = u / (size_t)a->ns;
        const int s = (int)(u % (size_t)a->ns);
        const int ci = (int)r / (k * k * k), kd = (int)r / (k * k) % k, kh = (int)r / k % k,
                  kw = (int)r % k;
        const float *src = a->x + ((size_t)ci * g->n + a->s0 + s) * volume;
        bf16 *dst = a->col + r * a->ld + (size_t)s * block;
        int lo, hi;
        valid_range(kw, st, pad, g->w, g->ow, &lo, &hi);
        for (int od = a->d0; od < a->d1; od++) {
            const int id = od * st - pad + kd;
            for (int oh = 0; oh < g->oh; oh++, dst += g->ow) {
                const int ih = oh * st - pad + kh;
                if (id < 0 || id >= g->d || ih < 0 || ih >= g->h || hi <= lo) {
                    zero(dst, (size_t)g->ow);
                    continue;
                }
                convert_row(src + ((size_t)id * g->h + ih) * g->w + (lo * st - pad + kw), st, lo,
                            hi, g->ow, dst);
            }
        }
    }
}

void vol2col_band_bf16(const float *x, const vol_shape *g, int s, int d0, int d1, bf16 *col,
                       int threads)
{
    vol_call a = {x, g, col, s, 1, d0, d1, (size_t)(d1 - d0) * g->oh * g->ow};
    const size_t rows = (size_t)g->c * g->k * g->k * g->k;
    parallel_for(rows, 1, rows * a.ld, threads, vol_rows, &a);
}

void vol2col_batch_bf16(const float *x, const vol_shape *g, bf16 *col, int threads)
{
    vol_call a = {x, g, col, 0, g->n, 0, g->od, (size_t)g->n * g->od * g->oh * g->ow};
    const size_t rows = (size_t)g->c * g->k * g->k * g->k;
    parallel_for(rows, 1, rows * a.ld, threads, vol_rows, &a);
}
