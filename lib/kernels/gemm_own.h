/* The library's own single-precision GEMM, for machines where OpenBLAS
 * runs a kernel narrower than the CPU (0.3.21 does not know recent Intel
 * cores and falls to its generic "Prescott" SSE3 kernel, up to 12x slower).
 *
 * Classic blocking: a KC-deep slice of op(A) is packed MC rows at a time
 * (alpha folded in), op(B) one NR-wide sliver at a time, and a register
 * micro-kernel computes MR x NR tiles of C.  Packing buffers live on the
 * stack (about 110 KiB): no allocation, so steps stay free of heap calls.
 * Same contract as gemm_serial (kernels.h). */
#ifndef PCNN_GEMM_OWN_H
#define PCNN_GEMM_OWN_H

#include <stdbool.h>

#define GEMM_OWN_MR 6
#define GEMM_OWN_NR 16
#define GEMM_OWN_KC 256
#define GEMM_OWN_MC 96 /* a multiple of MR */

void gemm_own(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a,
              int lda, const float *b, int ldb, float beta, float *c, int ldc);

/* One MR x NR tile: acc = sum_p a[p][0..MR) (x) b[p][0..NR) over kc, then
 * C = acc + beta * C on the first `rows` x `cols` (beta 0: C is not read,
 * so NaN in an unset C does not leak in). */
typedef void (*gemm_own_tile_fn)(int kc, const float *a, const float *b, float beta, float *c,
                                 int ldc, int rows, int cols);

void gemm_own_tile_portable(int kc, const float *a, const float *b, float beta, float *c,
                            int ldc, int rows, int cols);
#if defined(__x86_64__) && defined(__GNUC__)
#define PCNN_GEMM_OWN_AVX2 1
void gemm_own_tile_avx2(int kc, const float *a, const float *b, float beta, float *c, int ldc,
                        int rows, int cols);
#else
#define PCNN_GEMM_OWN_AVX2 0
#endif

/* The widest tile kernel this CPU runs, and its ISA ("avx2", "portable"). */
gemm_own_tile_fn gemm_own_tile(void);
const char *gemm_own_isa(void);

#endif
