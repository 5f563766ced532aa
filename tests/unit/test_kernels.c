/* Unit tests of the compute kernels (lib/kernels): im2col/col2im against
 * naive references and against each other (adjointness), the layout
 * conversions, copy_or_add, gemm() against a naive triple loop, and the
 * all-to-all's sum of pieces against one float accumulated in order.
 * Prints every failure and returns nonzero if there was one. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/expect.h"
#include "kernels/kernels.h"

/* Deterministic test data: small integers (sums stay exact in float) or
 * uniform floats in [-1, 1). */
static unsigned long long rng_state = 12345;
static unsigned next_u32(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)(rng_state >> 33);
}
static void fill_int(float *a, size_t n)
{
    for (size_t i = 0; i < n; i++) a[i] = (float)((int)(next_u32() % 7) - 3);
}
static void fill_real(float *a, size_t n)
{
    for (size_t i = 0; i < n; i++) a[i] = (float)(next_u32() % 2000000) / 1000000.0f - 1.0f;
}

static float *alloc_floats(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) {
        printf("FAIL: out of memory\n");
        exit(2);
    }
    return p;
}

/* ---- im2col / col2im ---------------------------------------------------- */

typedef struct conv_case {
    int c, n, h, w, k, stride, pad;
} conv_case;

static int out_size(int in, int k, int s, int p) { return (in + 2 * p - k) / s + 1; }

static void im2col_ref(const float *x, const conv_case *t, int ho, int wo, float *col)
{
    size_t ncols = (size_t)t->n * ho * wo;
    for (int c = 0; c < t->c; c++)
        for (int kh = 0; kh < t->k; kh++)
            for (int kw = 0; kw < t->k; kw++) {
                size_t row = ((size_t)c * t->k + kh) * t->k + kw;
                for (int n = 0; n < t->n; n++)
                    for (int oh = 0; oh < ho; oh++)
                        for (int ow = 0; ow < wo; ow++) {
                            int ih = oh * t->stride - t->pad + kh;
                            int iw = ow * t->stride - t->pad + kw;
                            float v = 0.0f;
                            if (ih >= 0 && ih < t->h && iw >= 0 && iw < t->w)
                                v = x[(((size_t)c * t->n + n) * t->h + ih) * t->w + iw];
                            col[row * ncols + ((size_t)n * ho + oh) * wo + ow] = v;
                        }
            }
}

/* Reference adjoint, accumulated in double. */
static void col2im_ref(const float *col, const conv_case *t, int ho, int wo, double *dx)
{
    size_t ncols = (size_t)t->n * ho * wo;
    memset(dx, 0, (size_t)t->c * t->n * t->h * t->w * sizeof *dx);
    for (int c = 0; c < t->c; c++)
        for (int kh = 0; kh < t->k; kh++)
            for (int kw = 0; kw < t->k; kw++) {
                size_t row = ((size_t)c * t->k + kh) * t->k + kw;
                for (int n = 0; n < t->n; n++)
                    for (int oh = 0; oh < ho; oh++)
                        for (int ow = 0; ow < wo; ow++) {
                            int ih = oh * t->stride - t->pad + kh;
                            int iw = ow * t->stride - t->pad + kw;
                            if (ih >= 0 && ih < t->h && iw >= 0 && iw < t->w)
                                dx[(((size_t)c * t->n + n) * t->h + ih) * t->w + iw] +=
                                    col[row * ncols + ((size_t)n * ho + oh) * wo + ow];
                        }
            }
}

static void test_im2col_case(const conv_case *t)
{
    const int ho = out_size(t->h, t->k, t->stride, t->pad);
    const int wo = out_size(t->w, t->k, t->stride, t->pad);
    const size_t nx = (size_t)t->c * t->n * t->h * t->w;
    const size_t ncol = (size_t)t->c * t->k * t->k * t->n * ho * wo;
    char label[128];
    snprintf(label, sizeof label, "C=%d N=%d H=%d W=%d K=%d s=%d p=%d", t->c, t->n, t->h, t->w,
             t->k, t->stride, t->pad);

    float *x = alloc_floats(nx), *col = alloc_floats(ncol), *ref = alloc_floats(ncol);
    float *c = alloc_floats(ncol), *dx = alloc_floats(nx), *dx2 = alloc_floats(nx);
    double *dref = malloc(nx * sizeof *dref);

    /* im2col is a copy: bitwise equal to the reference, for 1 and 2 threads. */
    fill_real(x, nx);
    im2col_ref(x, t, ho, wo, ref);
    for (int threads = 1; threads <= 2; threads++) {
        for (size_t i = 0; i < ncol; i++) col[i] = NAN; /* every element must be written */
        im2col_batch(x, t->c, t->n, t->h, t->w, t->k, t->stride, t->pad, ho, wo, col, threads);
        EXPECT(memcmp(col, ref, ncol * sizeof *col) == 0, "im2col %s threads %d differs",
              label, threads);
    }

    /* col2im against the reference, on integers: exact. */
    fill_int(c, ncol);
    col2im_ref(c, t, ho, wo, dref);
    for (int threads = 1; threads <= 2; threads++) {
        for (size_t i = 0; i < nx; i++) dx[i] = NAN; /* overwrite must not read dx */
        col2im_batch(c, t->c, t->n, t->h, t->w, t->k, t->stride, t->pad, ho, wo, dx, false,
                     threads);
        size_t bad = 0;
        for (size_t i = 0; i < nx; i++) bad += dx[i] != (float)dref[i];
        EXPECT(bad == 0, "col2im %s threads %d: %zu elements differ", label, threads, bad);

        /* accumulate == prior + overwrite */
        fill_int(dx2, nx);
        float *prior = alloc_floats(nx);
        memcpy(prior, dx2, nx * sizeof *dx2);
        col2im_batch(c, t->c, t->n, t->h, t->w, t->k, t->stride, t->pad, ho, wo, dx2, true,
                     threads);
        bad = 0;
        for (size_t i = 0; i < nx; i++) bad += dx2[i] != prior[i] + dx[i];
        EXPECT(bad == 0, "col2im accumulate %s threads %d: %zu elements differ", label, threads,
              bad);
        free(prior);
    }

    /* Adjoint identity <im2col(x), c> == <x, col2im(c)>, real data, in double. */
    fill_real(x, nx);
    fill_real(c, ncol);
    im2col_batch(x, t->c, t->n, t->h, t->w, t->k, t->stride, t->pad, ho, wo, col, 2);
    col2im_batch(c, t->c, t->n, t->h, t->w, t->k, t->stride, t->pad, ho, wo, dx, false, 2);
    double lhs = 0, rhs = 0, mag = 0;
    for (size_t i = 0; i < ncol; i++) {
        lhs += (double)col[i] * c[i];
        mag += fabs((double)col[i] * c[i]);
    }
    for (size_t i = 0; i < nx; i++) rhs += (double)x[i] * dx[i];
    EXPECT(fabs(lhs - rhs) <= 1e-6 * (mag + 1), "adjoint %s: %.10g vs %.10g", label, lhs, rhs);

    /* Thread count must not change a bit of col2im on real data. */
    col2im_batch(c, t->c, t->n, t->h, t->w, t->k, t->stride, t->pad, ho, wo, dx2, false, 1);
    EXPECT(memcmp(dx, dx2, nx * sizeof *dx) == 0, "col2im %s not thread-deterministic", label);

    /* Bands of output rows (im2col_rows / col2im_rows), for every band
     * height: im2col_rows writes exactly the band's columns of the whole
     * col (into a band buffer, and in place with the whole row stride);
     * col2im_rows over the bands in order, overwriting then accumulating,
     * equals the reference on integers. */
    const int grows = t->n * ho;
    const size_t ncols = (size_t)grows * wo, rows = (size_t)t->c * t->k * t->k;
    const conv_shape g = {t->c, t->n, t->h, t->w, t->k, t->stride, t->pad, ho, wo};
    fill_real(x, nx);
    im2col_ref(x, t, ho, wo, ref);
    fill_int(c, ncol);
    col2im_ref(c, t, ho, wo, dref);
    for (int band = 1; band <= grows; band += band < 4 ? 1 : band) {
        size_t bad = 0, bad_place = 0, bad_dx = 0, bad_acc = 0;
        for (size_t i = 0; i < ncol; i++) col[i] = NAN;
        for (size_t i = 0; i < nx; i++) dx[i] = NAN;
        fill_int(dx2, nx);
        float *prior = alloc_floats(nx), *buf = alloc_floats(rows * band * wo);
        memcpy(prior, dx2, nx * sizeof *dx2);
        for (int g0 = 0; g0 < grows; g0 += band) {
            const int g1 = g0 + band < grows ? g0 + band : grows;
            const size_t cols = (size_t)(g1 - g0) * wo;
            im2col_rows(x, &g, g0, g1, buf, cols);
            im2col_rows(x, &g, g0, g1, col + (size_t)g0 * wo, ncols);
            for (size_t r = 0; r < rows; r++)
                bad += memcmp(buf + r * cols, ref + r * ncols + (size_t)g0 * wo,
                              cols * sizeof *buf) != 0;
            for (size_t r = 0; r < rows; r++)
                memcpy(buf + r * cols, c + r * ncols + (size_t)g0 * wo, cols * sizeof *buf);
            col2im_rows(buf, cols, &g, g0, g1, dx, false);
            col2im_rows(buf, cols, &g, g0, g1, dx2, true);
        }
        bad_place = memcmp(col, ref, ncol * sizeof *col) != 0;
        for (size_t i = 0; i < nx; i++) {
            bad_dx += dx[i] != (float)dref[i];
            bad_acc += dx2[i] != prior[i] + (float)dref[i];
        }
        EXPECT(bad == 0 && bad_place == 0, "im2col_rows %s band %d: %zu rows differ%s", label,
              band, bad, bad_place ? ", in place too" : "");
        EXPECT(bad_dx == 0 && bad_acc == 0,
              "col2im_rows %s band %d: %zu overwritten, %zu accumulated elements differ", label,
              band, bad_dx, bad_acc);
        free(prior), free(buf);
    }

    free(x), free(col), free(ref), free(c), free(dx), free(dx2), free(dref);
}

static void test_im2col(void)
{
    static const conv_case cases[] = {
        {1, 1, 1, 1, 1, 1, 0},    {1, 1, 5, 5, 3, 1, 1},    {3, 2, 7, 5, 3, 1, 1},
        {2, 3, 8, 8, 3, 2, 1},    {4, 2, 9, 11, 5, 2, 2},   {3, 1, 13, 7, 3, 3, 2},
        {2, 2, 6, 6, 1, 1, 0},    {2, 2, 7, 7, 1, 2, 0},    {5, 3, 4, 4, 4, 1, 3},
        {1, 4, 3, 3, 3, 1, 2},    {3, 2, 10, 10, 2, 2, 0},  {2, 5, 17, 19, 7, 3, 3},
        {16, 8, 14, 14, 3, 1, 1}, {8, 32, 28, 28, 5, 1, 2}, {1, 1, 2, 9, 2, 1, 1},
        {3, 2, 5, 5, 5, 1, 0},    {2, 3, 5, 8, 3, 4, 1},    {1, 2, 4, 4, 3, 5, 2},
        {2, 3, 1, 1, 5, 1, 2},    {1, 2, 3, 1, 5, 1, 2},    {2, 2, 1, 3, 3, 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_im2col_case(&cases[i]);
}

/* ---- layout ------------------------------------------------------------- */

static void test_layout(void)
{
    static const int dims[][3] = {{1, 1, 1},  {3, 5, 1},   {7, 2, 4},   {2, 3, 16},
                                  {5, 9, 49}, {33, 65, 1}, {64, 10, 1}, {4, 6, 784}};
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++) {
        const int n = dims[d][0], c = dims[d][1];
        const size_t sp = (size_t)dims[d][2], total = (size_t)n * c * sp;
        float *a = alloc_floats(total), *b = alloc_floats(total), *r = alloc_floats(total);
        fill_real(a, total);
        for (int threads = 1; threads <= 2; threads++) {
            nchw_to_cnhw(a, b, n, c, sp, threads);
            size_t bad = 0;
            for (int in = 0; in < n; in++)
                for (int ic = 0; ic < c; ic++)
                    for (size_t s = 0; s < sp; s++)
                        bad += b[((size_t)ic * n + in) * sp + s] != a[((size_t)in * c + ic) * sp + s];
            EXPECT(bad == 0, "nchw_to_cnhw n=%d c=%d s=%zu threads %d: %zu wrong", n, c, sp,
                  threads, bad);
            cnhw_to_nchw(b, r, n, c, sp, threads);
            EXPECT(memcmp(a, r, total * sizeof *a) == 0,
                  "layout round trip n=%d c=%d s=%zu threads %d", n, c, sp, threads);
        }
        free(a), free(b), free(r);
    }

    const size_t sizes[] = {0, 1, 17, 100000};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        size_t n = sizes[si];
        float *x = alloc_floats(n), *y = alloc_floats(n), *y0 = alloc_floats(n);
        fill_int(x, n);
        fill_int(y0, n);
        for (int threads = 1; threads <= 2; threads++) {
            memcpy(y, y0, n * sizeof *y);
            copy_or_add(x, y, n, false, threads);
            EXPECT(n == 0 || memcmp(x, y, n * sizeof *y) == 0, "copy n=%zu threads %d", n,
                  threads);
            memcpy(y, y0, n * sizeof *y);
            copy_or_add(x, y, n, true, threads);
            size_t bad = 0;
            for (size_t i = 0; i < n; i++) bad += y[i] != y0[i] + x[i];
            EXPECT(bad == 0, "add n=%zu threads %d: %zu wrong", n, threads, bad);
        }
        free(x), free(y), free(y0);
    }
}

/* ---- gemm --------------------------------------------------------------- */

static void test_gemm_case(bool ta, bool tb, int m, int n, int k, float alpha, float beta,
                           int threads)
{
    /* Stored shapes: A is m x k (k x m if ta), B k x n (n x k if tb); leading
     * dimensions padded by 3 to exercise lda/ldb/ldc. */
    const int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    const int lda = ac + 3, ldb = bc + 3, ldc = n + 3;
    float *a = alloc_floats((size_t)ar * lda), *b = alloc_floats((size_t)br * ldb);
    float *c = alloc_floats((size_t)m * ldc), *c0 = alloc_floats((size_t)m * ldc);
    fill_real(a, (size_t)ar * lda);
    fill_real(b, (size_t)br * ldb);
    fill_real(c0, (size_t)m * ldc);
    memcpy(c, c0, (size_t)m * ldc * sizeof *c);
    /* beta 0 must overwrite, never read, C (layers rely on it). */
    if (beta == 0)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) c[(size_t)i * ldc + j] = NAN;

    gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, threads);

    double worst = 0;
    size_t pad_bad = 0;
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            double s = 0, mag = 0;
            for (int p = 0; p < k; p++) {
                double av = ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
                double bv = tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
                s += av * bv;
                mag += fabs(av * bv);
            }
            double ref = alpha * s + (beta != 0 ? beta * c0[(size_t)i * ldc + j] : 0.0);
            double err = fabs(c[(size_t)i * ldc + j] - ref) / (fabs(alpha) * mag + 1.0);
            if (err > worst) worst = err;
        }
        for (int j = n; j < ldc; j++) pad_bad += c[(size_t)i * ldc + j] != c0[(size_t)i * ldc + j];
    }
    EXPECT(worst <= 1e-5, "gemm ta=%d tb=%d m=%d n=%d k=%d alpha=%g beta=%g threads=%d: error %g",
          ta, tb, m, n, k, alpha, beta, threads, worst);
    EXPECT(pad_bad == 0, "gemm ta=%d tb=%d m=%d n=%d k=%d threads=%d wrote past n", ta, tb, m, n,
          k, threads);
    free(a), free(b), free(c), free(c0);
}

static void test_gemm(void)
{
    static const int sizes[][3] = {{1, 1, 1},   {3, 5, 7},    {37, 53, 29}, {100, 7, 65},
                                   {7, 100, 3}, {64, 97, 33}, {33, 200, 1}, {129, 65, 130}};
    for (int t = 0; t < 4; t++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (int threads = 1; threads <= 2; threads++)
                for (int beta = 0; beta <= 1; beta++)
                    test_gemm_case(t & 1, t & 2, sizes[s][0], sizes[s][1], sizes[s][2],
                                   beta ? 0.5f : 1.0f, (float)beta, threads);
}

/* sum_pieces: bit for bit one float per element accumulated over the
 * pieces in order, for counts 1..5, sizes around its block (2048) and
 * thread teams (16384 elements touched open one), 1 and 2 threads; dst
 * outside [0, n) untouched. */
static void test_sum_pieces(void)
{
    static const size_t sizes[] = {1, 17, 2047, 2049, 9000, 40001};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int count = 1; count <= 5; count++)
            for (int threads = 1; threads <= 2; threads++) {
                const size_t n = sizes[s];
                float *pieces = malloc(sizeof(float) * n * (size_t)count);
                float *dst = malloc(sizeof(float) * (n + 1));
                for (size_t i = 0; i < n * (size_t)count; i++)
                    pieces[i] = (float)((i * 7919) % 1013) * 0.37f - 150.0f + 1e-3f * (float)i;
                dst[n] = 42.0f;
                sum_pieces(pieces, n, count, dst, threads);
                size_t wrong = 0;
                for (size_t i = 0; i < n; i++) {
                    float want = pieces[i];
                    for (int p = 1; p < count; p++) want += pieces[(size_t)p * n + i];
                    wrong += memcmp(&want, &dst[i], sizeof want) != 0;
                }
                EXPECT(wrong == 0 && dst[n] == 42.0f,
                       "sum_pieces n=%zu count=%d threads=%d: %zu element(s) differ from the "
                       "ordered sum%s", n, count, threads, wrong,
                       dst[n] == 42.0f ? "" : ", wrote past n");
                free(pieces);
                free(dst);
            }
}

int main(void)
{
    int saved = blas_threads_enter();
    test_im2col();
    test_layout();
    test_gemm();
    test_sum_pieces();
    blas_threads_leave(saved);
    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf("all kernel tests passed\n");
    return 0;
}
