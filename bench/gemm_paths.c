/* The library's own GEMM against OpenBLAS as loaded, side by side in one
 * process, on the GEMM shapes the bench models run (convolutions as
 * im2col x weights, their two backward products, dense layers), one core.
 *
 *   gemm_paths [ITERS]        (default 5; rounds alternate own / OpenBLAS)
 *
 * Run it twice to see the trap: as is, and with OPENBLAS_CORETYPE=Prescott
 * (OpenBLAS's generic kernel, what 0.3.21 picks on CPUs it does not know).
 * One JSON line per shape: GFLOP/s of each (median), and their ratio. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kernels/gemm_own.h"
#include "kernels/gemm_path.h"
#include "bench_clock.h"

typedef struct { const char *what; int ta, tb, m, n, k; } shape;

static const shape shapes[] = {
    {"resnet20 conv 16x16 3x3, 32x32 b16 fwd", 0, 0, 16, 16384, 144},
    {"resnet20 conv wgrad", 0, 1, 16, 144, 16384},
    {"resnet20 conv dgrad", 1, 0, 144, 16384, 16},
    {"vgg11 conv 128x64 3x3, 16x16 b16 fwd", 0, 0, 128, 4096, 576},
    {"vgg11 conv wgrad", 0, 1, 128, 576, 4096},
    {"vgg11 conv dgrad", 1, 0, 576, 4096, 128},
    {"conv 1x1 256x64, 8x8 b16", 0, 0, 256, 1024, 64},
    {"dense 4096x512 b64", 0, 0, 512, 64, 4096},
    {"dense wgrad", 0, 1, 512, 4096, 64},
    {"square 1024", 0, 0, 1024, 1024, 1024},
};

int main(int argc, char **argv)
{
    const int iters = argc > 1 ? atoi(argv[1]) : 5;
    if (iters < 1) return 2;
    openblas_set_num_threads(1);
    printf("{\"blas_core\": \"%s\", \"own_tile\": \"%s\", \"library_path\": \"%s\"}\n",
           openblas_get_corename(), gemm_own_isa(), gemm_path_get()->why);
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const shape *x = &shapes[s];
        const int lda = x->ta ? x->m : x->k, ldb = x->tb ? x->k : x->n;
        const size_t na = (size_t)x->m * x->k, nb = (size_t)x->k * x->n, nc = (size_t)x->m * x->n;
        float *a = malloc(na * 4), *b = malloc(nb * 4), *c = malloc(nc * 4);
        double *t_own = malloc(sizeof(double) * iters), *t_blas = malloc(sizeof(double) * iters);
        if (!a || !b || !c || !t_own || !t_blas) return 1;
        for (size_t i = 0; i < na; i++) a[i] = (float)(i % 17) * 0.01f - 0.08f;
        for (size_t i = 0; i < nb; i++) b[i] = (float)(i % 13) * 0.02f - 0.12f;
        for (int i = -1; i < iters; i++) {
            double t0 = now();
            gemm_own(x->ta, x->tb, x->m, x->n, x->k, 1.0f, a, lda, b, ldb, 0.0f, c, x->n);
            double t1 = now();
            cblas_sgemm(CblasRowMajor, x->ta ? CblasTrans : CblasNoTrans,
                        x->tb ? CblasTrans : CblasNoTrans, x->m, x->n, x->k, 1.0f, a, lda, b, ldb,
                        0.0f, c, x->n);
            double t2 = now();
            if (i >= 0) t_own[i] = t1 - t0, t_blas[i] = t2 - t1;
        }
        qsort(t_own, (size_t)iters, sizeof(double), cmp_double);
        qsort(t_blas, (size_t)iters, sizeof(double), cmp_double);
        const double flop = 2.0 * x->m * (double)x->n * x->k;
        const double own = flop / t_own[iters / 2] / 1e9, blas = flop / t_blas[iters / 2] / 1e9;
        printf("{\"shape\": \"%s\", \"m\": %d, \"n\": %d, \"k\": %d, \"own_gflops\": %.1f, "
               "\"openblas_gflops\": %.1f, \"own_over_openblas\": %.2f}\n",
               x->what, x->m, x->n, x->k, own, blas, own / blas);
        free(a), free(b), free(c), free(t_own), free(t_blas);
    }
    return 0;
}
