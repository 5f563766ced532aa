/* Square SGEMM throughput of OpenBLAS with its own threading: the ceiling
 * that convolution-heavy models (VGG-11, EDSR) are measured against.
 *
 *   sgemm_peak [THREADS [N [ITERS]]]      (defaults 2, 2048, 10)
 *
 * Times C = A * B (N x N, row-major, beta 0) ITERS times after one warm-up
 * and prints one JSON line with the median and best GFLOP/s and the
 * kernel set OpenBLAS chose (OPENBLAS_CORETYPE). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_clock.h"

int main(int argc, char **argv)
{
    const int threads = argc > 1 ? atoi(argv[1]) : 2;
    const int n = argc > 2 ? atoi(argv[2]) : 2048;
    const int iters = argc > 3 ? atoi(argv[3]) : 10;
    if (threads < 1 || n < 1 || iters < 1) {
        fprintf(stderr, "usage: %s [THREADS [N [ITERS]]]\n", argv[0]);
        return 2;
    }
    openblas_set_num_threads(threads);
    const size_t nn = (size_t)n * n;
    float *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b), *c = malloc(nn * sizeof *c);
    double *t = malloc((size_t)iters * sizeof *t);
    if (!a || !b || !c || !t) return 1;
    for (size_t i = 0; i < nn; i++) {
        a[i] = (float)(i % 17) * 0.01f - 0.08f;
        b[i] = (float)(i % 13) * 0.02f - 0.12f;
        c[i] = 0.0f;
    }
    for (int i = -1; i < iters; i++) {
        const double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f,
                    c, n);
        if (i >= 0) t[i] = now() - t0;
    }
    qsort(t, (size_t)iters, sizeof *t, cmp_double);
    const double flop = 2.0 * n * (double)n * n;
    printf("{\"sgemm_n\": %d, \"threads\": %d, \"iters\": %d, \"median_gflops\": %.1f, "
           "\"best_gflops\": %.1f, \"blas_core\": \"%s\", \"check\": %.3f}\n",
           n, threads, iters, flop / t[iters / 2] / 1e9, flop / t[0] / 1e9,
           openblas_get_corename(), (double)c[nn / 2]);
    free(a);
    free(b);
    free(c);
    free(t);
    return 0;
}
