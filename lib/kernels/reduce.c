/* Sums for batch normalisation (kernels.h): 16 lanes of double, lane k
 * taking the elements k, k+16, ... of the run in order, the tail from lane
 * 0 on, and the lanes added in order at the end.  The AVX-512 version (two
 * vectors of 8 doubles per sum) and the portable one do the same operations
 * in the same order, so they give the same bits. */
#include "kernels.h"
#include "simd.h"

#define SUM_LANES 16

static void finish(const double *s1, const double *s2, double out[2])
{
    double t1 = 0.0, t2 = 0.0;
    for (int k = 0; k < SUM_LANES; k++) {
        t1 += s1[k];
        t2 += s2[k];
    }
    out[0] = t1;
    out[1] = t2;
}

/* Elements [from, n) into their lanes (element i into lane i % 16): the
 * whole run without AVX-512, the tail past the vectors' groups with it. */
static void add_shifted(const float *x, size_t from, size_t n, float shift, double *s1,
                        double *s2)
{
    for (size_t i = from; i < n; i++) {
        double d = (double)x[i] - shift;
        s1[i % SUM_LANES] += d;
        s2[i % SUM_LANES] += d * d;
    }
}

static void add_gradient(const float *x, const float *dy, const float *relu, size_t from,
                         size_t n, float shift, float shift_lo, float scale, double *s1,
                         double *s2)
{
    for (size_t i = from; i < n; i++) {
        float t = x[i] - shift - shift_lo, xh = t * scale;
        float d = relu ? relu_mask(dy[i], t * relu[0] + relu[1]) : dy[i];
        s1[i % SUM_LANES] += d;
        s2[i % SUM_LANES] += (double)d * xh;
    }
}

#if PCNN_AVX512
/* The whole groups of 16 into the lanes; returns how many elements that
 * was. */
TARGET static size_t shifted_avx512(const float *x, size_t n, float shift, double *s1,
                                    double *s2)
{
    const __m512d sh = _mm512_set1_pd(shift);
    __m512d a1[2] = {_mm512_setzero_pd(), _mm512_setzero_pd()}, a2[2] = {a1[0], a1[1]};
    size_t i = 0;
    for (; i + SUM_LANES <= n; i += SUM_LANES)
        for (int h = 0; h < 2; h++) {
            const __m512d d = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8 * h)), sh);
            a1[h] = _mm512_add_pd(a1[h], d);
            a2[h] = _mm512_add_pd(a2[h], _mm512_mul_pd(d, d));
        }
    for (int h = 0; h < 2; h++) {
        _mm512_storeu_pd(s1 + 8 * h, a1[h]);
        _mm512_storeu_pd(s2 + 8 * h, a2[h]);
    }
    return i;
}

TARGET static size_t gradient_avx512(const float *x, const float *dy, const float *relu,
                                     size_t n, float shift, float shift_lo, float scale,
                                     double *s1, double *s2)
{
    const __m256 sh = _mm256_set1_ps(shift), lo = _mm256_set1_ps(shift_lo);
    const __m256 sc = _mm256_set1_ps(scale);
    const __m256 mul = _mm256_set1_ps(relu ? relu[0] : 0.0f);
    const __m256 beta = _mm256_set1_ps(relu ? relu[1] : 0.0f);
    __m512d a1[2] = {_mm512_setzero_pd(), _mm512_setzero_pd()}, a2[2] = {a1[0], a1[1]};
    size_t i = 0;
    for (; i + SUM_LANES <= n; i += SUM_LANES)
        for (int h = 0; h < 2; h++) {
            const size_t at = i + 8 * (size_t)h;
            const __m256 t = _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + at), sh), lo);
            const __m256 xh = _mm256_mul_ps(t, sc);
            __m256 d = _mm256_loadu_ps(dy + at);
            if (relu) /* keep dy where the ReLU's output t * mul + beta is > 0 */
                d = _mm256_and_ps(d, _mm256_cmp_ps(_mm256_add_ps(_mm256_mul_ps(t, mul), beta),
                                                   _mm256_setzero_ps(), _CMP_GT_OQ));
            const __m512d dd = _mm512_cvtps_pd(d);
            a1[h] = _mm512_add_pd(a1[h], dd);
            a2[h] = _mm512_add_pd(a2[h], _mm512_mul_pd(dd, _mm512_cvtps_pd(xh)));
        }
    for (int h = 0; h < 2; h++) {
        _mm512_storeu_pd(s1 + 8 * h, a1[h]);
        _mm512_storeu_pd(s2 + 8 * h, a2[h]);
    }
    return i;
}
#endif

void sums_shifted(const float *x, size_t n, float shift, double out[2])
{
    double s1[SUM_LANES] = {0}, s2[SUM_LANES] = {0};
    size_t done = 0;
#if PCNN_AVX512
    if (cpu_has_avx512()) done = shifted_avx512(x, n, shift, s1, s2);
#endif
    add_shifted(x, done, n, shift, s1, s2);
    finish(s1, s2, out);
}

void sums_gradient(const float *x, const float *dy, const float *relu, size_t n, float shift,
                   float shift_lo, float scale, double out[2])
{
    double s1[SUM_LANES] = {0}, s2[SUM_LANES] = {0};
    size_t done = 0;
#if PCNN_AVX512
    if (cpu_has_avx512()) done = gradient_avx512(x, dy, relu, n, shift, shift_lo, scale, s1, s2);
#endif
    add_gradient(x, dy, relu, done, n, shift, shift_lo, scale, s1, s2);
    finish(s1, s2, out);
}

/* Row sums and fills (kernels.h row_sums / fill_rows). */
typedef struct rows_call {
    const float *src;
    float *dst;
    size_t n;
} rows_call;

/* Sum of n floats in an order fixed by n alone (so any thread count gives
 * the same bits): 8 float lanes over blocks of ROW_BLOCK, which vectorise,
 * and the block sums in double, which keeps long rows accurate. */
#define ROW_BLOCK 1024
static float row_sum(const float *x, size_t n)
{
    double total = 0.0;
    for (size_t j0 = 0; j0 < n; j0 += ROW_BLOCK) {
        const size_t j1 = j0 + ROW_BLOCK < n ? j0 + ROW_BLOCK : n;
        float lane[8] = {0};
        size_t j = j0;
        for (; j + 8 <= j1; j += 8)
            for (int q = 0; q < 8; q++) lane[q] += x[j + q];
        float t = 0.0f;
        for (int q = 0; q < 8; q++) t += lane[q];
        for (; j < j1; j++) t += x[j];
        total += t;
    }
    return (float)total;
}

static void sum_range(void *arg, size_t lo, size_t hi)
{
    const rows_call *a = arg;
    for (size_t r = lo; r < hi; r++) a->dst[r] = row_sum(a->src + r * a->n, a->n);
}

void row_sums(const float *x, size_t rows, size_t n, float *out, int threads)
{
    rows_call a = {x, out, n};
    parallel_for(rows, 1, rows * n, threads, sum_range, &a);
}

static void fill_range(void *arg, size_t lo, size_t hi)
{
    const rows_call *a = arg;
    for (size_t r = lo; r < hi; r++) {
        float *restrict row = a->dst + r * a->n;
        const float v = a->src[r];
        for (size_t j = 0; j < a->n; j++) row[j] = v;
    }
}

void fill_rows(float *x, size_t rows, size_t n, const float *values, int threads)
{
    rows_call a = {values, x, n};
    parallel_for(rows, 1, rows * n, threads, fill_range, &a);
}
