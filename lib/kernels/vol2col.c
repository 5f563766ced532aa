/* vol2col / col2vol over a whole batch in the C N D H W layout (kernels.h).
 *
 * col row (c, kd, kh, kw), column (n, od, oh, ow) holds
 * x[c][n][od*s-p+kd][oh*s-p+kh][ow*s-p+kw] (zero outside the volume): im2col
 * with one more axis (seed 001 section 3.1).  For one (row, sample) the
 * Do*Ho*Wo columns are contiguous, and so is the input volume x[c][n]: that
 * pair is the unit of work of vol2col, a (channel, sample) volume of dx the
 * unit of col2vol, so no two threads write the same floats and the sums
 * come out in the same order on any number of threads.
 *
 * A band restricts both to one sample and a range of output planes
 * [d0, d1): its col is C*K^3 rows of (d1 - d0)*Ho*Wo columns, so that a
 * large volume's convolution runs in slabs with a bounded buffer. */
#include <string.h>

#include "kernels.h"

/* The outputs o in [0, out) whose input index o*s-p+kw lies in [0, n):
 * [*lo, *hi) (empty when none). */
static void valid_span(int kw, int stride, int pad, int n, int out, int *lo, int *hi)
{
    const int first = pad - kw, last = n - 1 + pad - kw;
    int a = first <= 0 ? 0 : first / stride + (first % stride != 0); /* no first + stride */
    int b = last < 0 ? 0 : last / stride + 1;
    if (a > out) a = out;
    if (b > out) b = out;
    *lo = a;
    *hi = b < a ? a : b;
}

/* Samples [s0, s0 + ns) and output planes [d0, d1) of each; col rows of
 * ld floats, a sample's block of (d1 - d0)*Ho*Wo columns after the
 * previous sample's. */
typedef struct vol_call {
    const vol_shape *g;
    const float *src;
    float *dst;
    bool accumulate;
    int s0, ns, d0, d1;
    size_t ld;
} vol_call;

static size_t block_cols(const vol_call *a)
{
    return (size_t)(a->d1 - a->d0) * a->g->oh * a->g->ow;
}

/* Units u = (row r, sample s): one (d1 - d0) x Ho x Wo block of col. */
static void vol2col_range(void *arg, size_t u0, size_t u1)
{
    const vol_call *a = arg;
    const vol_shape *g = a->g;
    const int k = g->k, st = g->stride, pad = g->pad, n = g->n, ns = a->ns;
    const size_t volume = (size_t)g->d * g->h * g->w;
    const size_t block = block_cols(a);
    for (size_t u = u0; u < u1; u++) {
        const int r = (int)(u / (size_t)ns), s = (int)(u % (size_t)ns);
        const int ci = r / (k * k * k), kd = r / (k * k) % k, kh = r / k % k, kw = r % k;
        const float *src = a->src + ((size_t)ci * n + a->s0 + s) * volume;
        float *dst = a->dst + (size_t)r * a->ld + (size_t)s * block;
        int lo, hi;
        valid_span(kw, st, pad, g->w, g->ow, &lo, &hi);
        for (int od = a->d0; od < a->d1; od++) {
            const int id = od * st - pad + kd;
            for (int oh = 0; oh < g->oh; oh++, dst += g->ow) {
                const int ih = oh * st - pad + kh;
                if (id < 0 || id >= g->d || ih < 0 || ih >= g->h || hi <= lo) {
                    memset(dst, 0, (size_t)g->ow * sizeof *dst);
                    continue;
                }
                for (int ow = 0; ow < lo; ow++) dst[ow] = 0.0f;
                /* The input element of output column lo, in range by construction. */
                const float *row = src + ((size_t)id * g->h + ih) * g->w + (lo * st - pad + kw);
                if (st == 1)
                    memcpy(dst + lo, row, (size_t)(hi - lo) * sizeof *dst);
                else
                    for (int ow = lo; ow < hi; ow++) dst[ow] = row[(size_t)(ow - lo) * st];
                for (int ow = hi; ow < g->ow; ow++) dst[ow] = 0.0f;
            }
        }
    }
}

void vol2col_batch(const float *x, const vol_shape *g, float *col, int threads)
{
    vol_call a = {g, x, col, false, 0, g->n, 0, g->od,
                  (size_t)g->n * g->od * g->oh * g->ow};
    const size_t units = (size_t)g->c * g->k * g->k * g->k * g->n;
    const size_t work = units * g->od * g->oh * g->ow;
    parallel_for(units, 1, work, threads, vol2col_range, &a);
}

void vol2col_band(const float *x, const vol_shape *g, int s, int d0, int d1, float *col,
                  int threads)
{
    vol_call a = {g, x, col, false, s, 1, d0, d1, (size_t)(d1 - d0) * g->oh * g->ow};
    const size_t units = (size_t)g->c * g->k * g->k * g->k;
    parallel_for(units, 1, units * a.ld, threads, vol2col_range, &a);
}

/* Units u = (channel ci, sample s): one dx volume, owned by one thread,
 * which adds the K^3 rows into it in a fixed order.  The band of planes
 * d0 == 0 clears it first unless accumulating. */
static void col2vol_range(void *arg, size_t u0, size_t u1)
{
    const vol_call *a = arg;
    const vol_shape *g = a->g;
    const int k = g->k, st = g->stride, pad = g->pad, n = g->n, ns = a->ns;
    const size_t volume = (size_t)g->d * g->h * g->w;
    const size_t block = block_cols(a);
    for (size_t u = u0; u < u1; u++) {
        const int ci = (int)(u / (size_t)ns), s = (int)(u % (size_t)ns);
        float *dst = a->dst + ((size_t)ci * n + a->s0 + s) * volume;
        if (!a->accumulate && a->d0 == 0) memset(dst, 0, volume * sizeof *dst);
        for (int kd = 0; kd < k; kd++)
            for (int kh = 0; kh < k; kh++)
                for (int kw = 0; kw < k; kw++) {
                    const size_t r = (((size_t)ci * k + kd) * k + kh) * k + kw;
                    const float *src = a->src + r * a->ld + (size_t)s * block;
                    int lo, hi;
                    valid_span(kw, st, pad, g->w, g->ow, &lo, &hi);
                    if (hi <= lo) continue;
                    for (int od = a->d0; od < a->d1; od++) {
                        const int id = od * st - pad + kd;
                        for (int oh = 0; oh < g->oh; oh++, src += g->ow) {
                            const int ih = oh * st - pad + kh;
                            if (id < 0 || id >= g->d || ih < 0 || ih >= g->h) continue;
                            float *row = dst + ((size_t)id * g->h + ih) * g->w +
                                         (lo * st - pad + kw);
                            const float *in = src + lo;
                            if (st == 1)
                                for (int i = 0; i < hi - lo; i++) row[i] += in[i];
                            else
                                for (int i = 0; i < hi - lo; i++) row[(size_t)i * st] += in[i];
                        }
                    }
                }
    }
}

void col2vol_batch(const float *dcol, const vol_shape *g, float *dx, bool accumulate,
                   int threads)
{
    vol_call a = {g, dcol, dx, accumulate, 0, g->n, 0, g->od,
                  (size_t)g->n * g->od * g->oh * g->ow};
    const size_t units = (size_t)g->c * g->n;
    const size_t work = units * g->k * g->k * g->k * g->od * g->oh * g->ow;
    parallel_for(units, 1, work, threads, col2vol_range, &a);
}

void col2vol_band(const float *dcol, const vol_shape *g, int s, int d0, int d1, float *dx,
                  bool accumulate, int threads)
{
    vol_call a = {g, dcol, dx, accumulate, s, 1, d0, d1, (size_t)(d1 - d0) * g->oh * g->ow};
    const size_t units = (size_t)g->c;
    parallel_for(units, 1, units * g->k * g->k * g->k * a.ld, threads, col2vol_range, &a);
}
