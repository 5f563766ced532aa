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
    int a = first <= 0 ? 0 : (first + stride - 1) / stride;
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
