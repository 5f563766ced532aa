#include <cblas.h>
#include <omp.h>

#include "gemm_own.h"
#include "gemm_path.h"
#include "kernels.h"

/* Blocks smaller than this many output columns (or rows) are not worth a
 * thread: the packing overhead of OpenBLAS dominates. */
#define MIN_BLOCK 32
/* Nor are GEMMs below this many multiply-adds (about 10 us on one core):
 * forking and joining the threads would cost more than they save. */
#define MIN_PARALLEL_MACS (1 << 20)

int blas_threads_enter(void)
{
    int saved = openblas_get_num_threads();
    if (saved != 1) openblas_set_num_threads(1);
    return saved;
}

void blas_threads_leave(int saved)
{
    if (saved != 1) openblas_set_num_threads(saved);
}

/* OpenBLAS 0.3.21's small-matrix kernel for row-major A B (no transposes;
 * AVX-512 CPUs, m*n*k up to about 10^6) mallocs a buffer on every call for
 * most n below 64 once k >= 32: a dense layer over a batch of a few
 * samples, a 3D convolution over a few output voxels.  Such products go
 * through sgemv, one output column at a time, which allocates nothing:
 * steps stay free of heap allocations. */
#define SMALL_NN_MAX_N 64
#define SMALL_NN_MAX_MACS (1 << 20)

void gemm_serial(bool ta, bool tb, int m, int n, int k, float alpha, const float *a, int lda,
                 const float *b, int ldb, float beta, float *c, int ldc)
{
    if (m <= 0 || n <= 0) return;
    /* k = 0 too: OpenBLAS 0.3.21 then leaves C unscaled for beta != 0. */
    if (gemm_path_get()->own || k <= 0) {
        gemm_own(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    if (!ta && !tb && n < SMALL_NN_MAX_N && (double)m * n * k <= SMALL_NN_MAX_MACS) {
        for (int j = 0; j < n; j++)
            cblas_sgemv(CblasRowMajor, CblasNoTrans, m, k, alpha, a, lda, b + j, ldb, beta,
                        c + j, ldc);
        return;
    }
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float *a, int lda,
          const float *b, int ldb, float beta, float *c, int ldc, int threads)
{
    if (m <= 0 || n <= 0) return;
    bool split_cols = n >= m;
    int extent = split_cols ? n : m;
    int parts = threads;
    if (parts > extent / MIN_BLOCK) parts = extent / MIN_BLOCK;
    if ((double)m * n * k < MIN_PARALLEL_MACS) parts = 1;
    if (parts <= 1) { /* no one-thread region: libgomp would malloc a team */
        gemm_serial(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
#pragma omp parallel num_threads(parts)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        /* Blocks of whole 16-float vectors, the last one takes the rest. */
        int chunk = (extent + nt - 1) / nt;
        chunk = (chunk + 15) / 16 * 16;
        int lo = t * chunk, hi = lo + chunk < extent ? lo + chunk : extent;
        if (lo < hi) {
            if (split_cols) {
                const float *bb = tb ? b + (size_t)lo * ldb : b + lo;
                gemm_serial(ta, tb, m, hi - lo, k, alpha, a, lda, bb, ldb, beta, c + lo, ldc);
            } else {
                const float *aa = ta ? a + lo : a + (size_t)lo * lda;
                gemm_serial(ta, tb, hi - lo, n, k, alpha, aa, lda, b, ldb, beta,
                           c + (size_t)lo * ldc, ldc);
            }
        }
    }
}
