/* im2col / col2im over a whole batch in the CNHW layout.
 *
 * col row (c, kh, kw), column (n, ho, wo) holds x[c][n][ho*s-p+kh][wo*s-p+kw]
 * (zero outside the image).  For one (row, n) the Ho*Wo columns are
 * contiguous, and so is the input plane x[c][n]: that pair is the unit of
 * work, so every loop below streams through memory. */
#include <string.h>

#include "kernels.h"

/* The output columns wo whose input column wo*s-p+kw lies in [0, w):
 * [*lo, *hi), clamped to [0, wo_n). */
static void valid_range(int kw, int stride, int pad, int w, int wo_n, int *lo, int *hi)
{
    int first = pad - kw; /* wo*s >= pad - kw */
    int a = first <= 0 ? 0 : first / stride + (first % stride != 0); /* no first + stride */
    int last = w - 1 + pad - kw; /* wo*s <= w - 1 + pad - kw */
    int b = last < 0 ? 0 : last / stride + 1;
    if (a > wo_n) a = wo_n;
    if (b > wo_n) b = wo_n;
    if (b < a) b = a;
    *lo = a;
    *hi = b;
}

typedef struct conv_geom {
    const float *src;
    float *dst;
    int c, n, h, w, k, stride, pad, ho, wo;
    bool accumulate;
} conv_geom;

/* Units u = (row r, sample s): one Ho x Wo block of col. */
static void im2col_range(void *arg, size_t u0, size_t u1)
{
    const conv_geom *g = arg;
    const int n = g->n, h = g->h, w = g->w, k = g->k, stride = g->stride, pad = g->pad;
    const int ho = g->ho, wo = g->wo;
    const size_t plane = (size_t)h * w, out_plane = (size_t)ho * wo;
    const size_t ncols = (size_t)n * out_plane;
    for (size_t u = u0; u < u1; u++) {
        const int r = (int)(u / (size_t)n), s = (int)(u % (size_t)n);
        const int ci = r / (k * k), kh = r / k % k, kw = r % k;
        const float *src = g->src + ((size_t)ci * n + s) * plane;
        float *dst = g->dst + (size_t)r * ncols + (size_t)s * out_plane;
        int lo, hi;
        valid_range(kw, stride, pad, w, wo, &lo, &hi);
        for (int oh = 0; oh < ho; oh++, dst += wo) {
            const int ih = oh * stride - pad + kh;
            if (ih < 0 || ih >= h) {
                for (int ow = 0; ow < wo; ow++) dst[ow] = 0.0f;
                continue;
            }
            for (int ow = 0; ow < lo; ow++) dst[ow] = 0.0f;
            if (hi > lo) {
                /* The input element of output column lo, in range by construction. */
                const float *row = src + (size_t)ih * w + (lo * stride - pad + kw);
                if (stride == 1) {
                    memcpy(dst + lo, row, (size_t)(hi - lo) * sizeof *dst);
                } else {
                    for (int ow = lo; ow < hi; ow++) dst[ow] = row[(size_t)(ow - lo) * stride];
                }
            }
            for (int ow = hi; ow < wo; ow++) dst[ow] = 0.0f;
        }
    }
}

void im2col_batch(const float *x, int c, int n, int h, int w, int k, int stride, int pad,
                  int ho, int wo, float *col, int threads)
{
    conv_geom g = {x, col, c, n, h, w, k, stride, pad, ho, wo, false};
    const size_t units = (size_t)c * k * k * n;
    parallel_for(units, 1, units * ho * wo, threads, im2col_range, &g);
}

/* Units u = (channel ci, sample s): one dx plane, owned by one thread,
 * which adds the K*K rows into it in a fixed order: no races, and the same
 * bits for any thread count. */
static void col2im_range(void *arg, size_t u0, size_t u1)
{
    const conv_geom *g = arg;
    const int n = g->n, h = g->h, w = g->w, k = g->k, stride = g->stride, pad = g->pad;
    const int ho = g->ho, wo = g->wo;
    const size_t plane = (size_t)h * w, out_plane = (size_t)ho * wo;
    const size_t ncols = (size_t)n * out_plane;
    for (size_t u = u0; u < u1; u++) {
        const int ci = (int)(u / (size_t)n), s = (int)(u % (size_t)n);
        float *dst = g->dst + ((size_t)ci * n + s) * plane;
        if (!g->accumulate) memset(dst, 0, plane * sizeof *dst);
        for (int kh = 0; kh < k; kh++) {
            for (int kw = 0; kw < k; kw++) {
                const size_t r = ((size_t)ci * k + kh) * k + kw;
                const float *src = g->src + r * ncols + (size_t)s * out_plane;
                int lo, hi;
                valid_range(kw, stride, pad, w, wo, &lo, &hi);
                for (int oh = 0; oh < ho; oh++, src += wo) {
                    const int ih = oh * stride - pad + kh;
                    if (ih < 0 || ih >= h || hi <= lo) continue;
                    float *row = dst + (size_t)ih * w + (lo * stride - pad + kw);
                    const float *in = src + lo;
                    if (stride == 1) {
                        for (int i = 0; i < hi - lo; i++) row[i] += in[i];
                    } else {
                        for (int i = 0; i < hi - lo; i++) row[(size_t)i * stride] += in[i];
                    }
                }
            }
        }
    }
}

void col2im_batch(const float *dcol, int c, int n, int h, int w, int k, int stride, int pad,
                  int ho, int wo, float *dx, bool accumulate, int threads)
{
    conv_geom g = {dcol, dx, c, n, h, w, k, stride, pad, ho, wo, accumulate};
    const size_t units = (size_t)c * n;
    parallel_for(units, 1, units * k * k * ho * wo, threads, col2im_range, &g);
}

/* Output rows [oh0, oh1) of sample s, for one col row (ci, kh, kw). */
static void im2col_band(const float *src, const conv_shape *g, int kh, int kw, int oh0, int oh1,
                        float *dst)
{
    const int h = g->h, w = g->w, wo = g->wo, stride = g->stride, pad = g->pad;
    int lo, hi;
    valid_range(kw, stride, pad, w, wo, &lo, &hi);
    if (stride == 1 && wo == w) {
        /* "Same" convolutions: the rows whose input row exists are the
         * input plane shifted by (kh - pad) * w + kw - pad, one contiguous
         * copy, except for the lo and wo - hi fringe columns, which the
         * shift wraps into the neighbouring row and which are zeroed after. */
        int a = pad - kh > oh0 ? pad - kh : oh0, b = h + pad - kh < oh1 ? h + pad - kh : oh1;
        if (b < a) b = a;
        for (float *z = dst; z < dst + (size_t)(a - oh0) * wo; z++) *z = 0.0f;
        for (float *z = dst + (size_t)(b - oh0) * wo; z < dst + (size_t)(oh1 - oh0) * wo; z++)
            *z = 0.0f;
        if (a == b) return;
        /* Fringe elements may fall before or after the plane: clamp. */
        const long first = (long)(a + kh - pad) * w + (kw - pad);
        const long from = first > 0 ? first : 0;
        long end = first + (long)(b - a) * wo;
        if (end > (long)h * w) end = (long)h * w;
        float *d = dst + (size_t)(a - oh0) * wo;
        if (end > from) memcpy(d + (from - first), src + from, (size_t)(end - from) * sizeof *d);
        for (int oh = a; oh < b; oh++, d += wo) {
            for (int ow = 0; ow < lo; ow++) d[ow] = 0.0f;
            for (int ow = hi; ow < wo; ow++) d[ow] = 0.0f;
        }
        return;
    }
    for (int oh = oh0; oh < oh1; oh++, dst += wo) {
        const int ih = oh * stride - pad + kh;
        if (ih < 0 || ih >= h || hi <= lo) {
            for (int ow = 0; ow < wo; ow++) dst[ow] = 0.0f;
            continue;
        }
        for (int ow = 0; ow < lo; ow++) dst[ow] = 0.0f;
        const float *row = src + (size_t)ih * w + (lo * stride - pad + kw);
        if (stride == 1) {
            for (int ow = lo; ow < hi; ow++) dst[ow] = row[ow - lo];
        } else {
            for (int ow = lo; ow < hi; ow++) dst[ow] = row[(size_t)(ow - lo) * stride];
        }
        for (int ow = hi; ow < wo; ow++) dst[ow] = 0.0f;
    }
}

void im2col_rows(const float *x, const conv_shape *g, int g0, int g1, float *col, size_t ld)
{
    const int k = g->k, ho = g->ho, wo = g->wo;
    const size_t plane = (size_t)g->h * g->w;
    const int rows = g->c * k * k;
    for (int r = 0; r < rows; r++) {
        const int ci = r / (k * k), kh = r / k % k, kw = r % k;
        float *dst = col + (size_t)r * ld;
        /* The band, sample by sample. */
        for (int at = g0; at < g1;) {
            const int s = at / ho, oh0 = at % ho;
            const int oh1 = g1 - s * ho < ho ? g1 - s * ho : ho;
            const float *src = x + ((size_t)ci * g->n + s) * plane;
            im2col_band(src, g, kh, kw, oh0, oh1, dst + (size_t)(at - g0) * wo);
            at += oh1 - oh0;
        }
    }
}

/* dst[i] += src[i] over n floats (distinct buffers). */
static void add_to(float *restrict dst, const float *restrict src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] += src[i];
}

void col2im_rows(float *dcol, size_t ld, const conv_shape *g, int g0, int g1, float *dx,
                 bool accumulate)
{
    const int k = g->k, h = g->h, w = g->w, ho = g->ho, wo = g->wo;
    const int stride = g->stride, pad = g->pad;
    const size_t plane = (size_t)h * w;
    for (int at = g0; at < g1;) {
        const int s = at / ho, oh0 = at % ho;
        const int oh1 = g1 - s * ho < ho ? g1 - s * ho : ho;
        const size_t off = (size_t)(at - g0) * wo;
        for (int ci = 0; ci < g->c; ci++) {
            float *dst = dx + ((size_t)ci * g->n + s) * plane;
            if (!accumulate && oh0 == 0) memset(dst, 0, plane * sizeof *dst);
            for (int kh = 0; kh < k; kh++) {
                for (int kw = 0; kw < k; kw++) {
                    const size_t r = ((size_t)ci * k + kh) * k + kw;
                    float *src = dcol + r * ld + off;
                    int lo, hi;
                    valid_range(kw, stride, pad, w, wo, &lo, &hi);
                    if (stride == 1 && wo == w) {
                        /* The adjoint of im2col_band's shifted copy: zero
                         * the fringe columns, which would wrap into the
                         * neighbouring rows (adding +0 changes nothing),
                         * then one contiguous add. */
                        int a = pad - kh > oh0 ? pad - kh : oh0;
                        int b = h + pad - kh < oh1 ? h + pad - kh : oh1;
                        if (b <= a) continue;
                        float *d = src + (size_t)(a - oh0) * wo;
                        for (int oh = a; oh < b; oh++, d += wo) {
                            for (int ow = 0; ow < lo; ow++) d[ow] = 0.0f;
                            for (int ow = hi; ow < wo; ow++) d[ow] = 0.0f;
                        }
                        const long first = (long)(a + kh - pad) * w + (kw - pad);
                        const long from = first > 0 ? first : 0;
                        long end = first + (long)(b - a) * wo;
                        if (end > (long)h * w) end = (long)h * w;
                        if (end > from)
                            add_to(dst + from, src + (size_t)(a - oh0) * wo + (from - first),
                                   (size_t)(end - from));
                        continue;
                    }
                    for (int oh = oh0; oh < oh1; oh++, src += wo) {
                        const int ih = oh * stride - pad + kh;
                        if (ih < 0 || ih >= h || hi <= lo) continue;
                        float *row = dst + (size_t)ih * w + (lo * stride - pad + kw);
                        const float *in = src + lo;
                        if (stride == 1) {
                            for (int i = 0; i < hi - lo; i++) row[i] += in[i];
                        } else {
                            for (int i = 0; i < hi - lo; i++) row[(size_t)i * stride] += in[i];
                        }
                    }
                }
            }
        }
        at += oh1 - oh0;
    }
}
