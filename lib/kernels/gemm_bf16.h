/* bf16 GEMM with fp32 accumulation:
 *   C (fp32, row-major) = alpha * op(A) * op(B) + beta * C,
 * A and B bf16 (bf16.h), row-major with row strides lda/ldb, op(X) = X^T
 * when trans_X: the products of the convolution and dense layers (W x col,
 * dy x col^T, W^T x dy).  beta 0 does not read C (NaN there stays out).
 *
 * Blocking as the own fp32 GEMM (gemm_own.h) but with op(A) and op(B)
 * packed as pairs along k, the operand layout of vdpbf16ps: a KC x NC
 * panel of op(B), NR-wide slivers of k-pairs, and an MC x KC block of
 * op(A), MR-row panels of k-pairs; an odd k is padded with a zero.  The
 * packs live in a workspace the caller provides (gemm_bf16_workspace, the
 * largest any path needs), so a call allocates nothing.
 *
 * Paths, chosen at run time by cpuid:
 *   amx         tdpbf16ps on 16 x 16 fp32 tiles (Intel Sapphire Rapids and
 *               later; gemm_bf16_amx.c): 32 x 32 blocks of C in four
 *               tiles, op(B) in the same pair slivers padded to whole
 *               tiles of 16 k-pairs, op(A) in 16-row tiles of 32 k, its
 *               own KC/MC/NC below.  Needs Linux's permission for tile
 *               state (arch_prctl, asked once per process, cpu_features.h);
 *               refused, the path is unavailable and the choice falls to
 *               the next one, `why` saying so.  Each call (each OpenMP
 *               thread) loads its own tile configuration and releases the
 *               tiles on return.
 *   avx512bf16  vdpbf16ps (AMD Zen 4/5, Intel Cooper Lake and later)
 *   portable    the same packs, fp32 arithmetic in C, on any CPU.
 * The products of two bf16 are exact in fp32, so the paths differ only in
 * the order of fp32 additions (and vdpbf16ps and tdpbf16ps treat
 * subnormal inputs and results as zero): avx512bf16 gives the portable
 * bits on normal numbers; amx adds C to the tile before the products
 * (alpha 1, beta 0 or 1) and sums inside tdpbf16ps in its own order, so it
 * agrees with the others to fp32 rounding (the unit test's bound).
 *
 * PCNN_BF16_AMX_DENY=1 (tests): behave as if Linux refused tile state. */
#ifndef PCNN_GEMM_BF16_H
#define PCNN_GEMM_BF16_H

#include <stdbool.h>
#include <stddef.h>

#include "bf16.h"

#define GEMM_BF16_MR 8
#define GEMM_BF16_NR 32
#define GEMM_BF16_KC 256  /* even: blocks start on a k-pair */
#define GEMM_BF16_MC 128  /* a multiple of MR */
#define GEMM_BF16_NC 1024 /* a multiple of NR */

typedef enum gemm_bf16_path {
    GEMM_BF16_PORTABLE = 0,
    GEMM_BF16_AVX512BF16 = 1,
    GEMM_BF16_AMX = 2,
    GEMM_BF16_PATHS
} gemm_bf16_path;

/* Bytes of workspace one serial call of this shape needs on any path
 * (64-byte aligned inside it; any pointer will do). */
size_t gemm_bf16_workspace(int m, int n, int k);

/* Whether this CPU (and build) runs a path; the path the library takes:
 * the best available, or the one PCNN_BF16_PATH names (portable,
 * avx512bf16, amx, auto) when available, else the best one below it.
 * Decided once per process; `why` says what and why. */
bool gemm_bf16_path_available(gemm_bf16_path p);
gemm_bf16_path gemm_bf16_path_get(void);
const char *gemm_bf16_path_why(void);
const char *gemm_bf16_path_name(gemm_bf16_path p);

/* One call on the calling thread through path p.  Returns false, leaving
 * C untouched, when p is not available or ws_bytes is below
 * gemm_bf16_workspace(m, n, k). */
bool gemm_bf16_serial_on(gemm_bf16_path p, bool trans_a, bool trans_b, int m, int n, int k,
                         float alpha, const bf16 *a, int lda, const bf16 *b, int ldb, float beta,
                         float *c, int ldc, void *ws, size_t ws_bytes);

/* The same through gemm_bf16_path_get(), the larger of m and n split over
 * `threads` OpenMP threads as gemm() does (kernels.h); ws holds
 * threads * gemm_bf16_workspace(m, n, k) bytes.  Same false cases. */
bool gemm_bf16(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const bf16 *a,
               int lda, const bf16 *b, int ldb, float beta, float *c, int ldc, int threads,
               void *ws, size_t ws_bytes);

/* The MR x NR tile: acc = sum over kq k-pairs of A pairs (x) B pairs, then
 * C = alpha * acc + beta * C on the first rows x cols (beta 0: C unread). */
typedef void (*gemm_bf16_tile_fn)(int kq, const bf16 *a, const bf16 *b, float alpha, float beta,
                                  float *c, int ldc, int rows, int cols);
void gemm_bf16_tile_portable(int kq, const bf16 *a, const bf16 *b, float alpha, float beta,
                             float *c, int ldc, int rows, int cols);
#if defined(__x86_64__) && defined(__GNUC__)
#define PCNN_GEMM_BF16_AVX512 1
void gemm_bf16_tile_avx512(int kq, const bf16 *a, const bf16 *b, float alpha, float beta,
                           float *c, int ldc, int rows, int cols);
/* Rows r0 and r1 (r1 may be NULL: zeros) of n bf16 interleaved into n
 * pairs: dst[2j] = r0[j], dst[2j+1] = r1[j]. */
void gemm_bf16_interleave_avx512(const bf16 *r0, const bf16 *r1, int n, bf16 *dst);
/* k-pairs [0, pairs) of `cols` (<= NR) rows of B, ld32 pairs apart (an
 * even row stride), as pairs x NR pairs, zero past cols: the op(B) = B^T
 * sliver. */
void gemm_bf16_pack_bt_avx512(const bf16 *src, int ld32, int cols, int pairs, bf16 *dst);
#else
#define PCNN_GEMM_BF16_AVX512 0
#endif

/* The AMX path's blocking: KC a multiple of 32 (whole tiles of k), MC and
 * NC multiples of 32 (the 32 x 32 block).  A deep KC writes C once for
 * the convolutions' k = 9 C_in; one 32-row A block against a 256-column
 * B panel keeps both in L2 (2 MiB) at that depth (measured best of KC
 * 512..4096, MC 32..256, NC 128..1024).  Its own workspace need; the
 * product itself (gemm_bf16_amx.c), to be called only when
 * gemm_bf16_path_available(GEMM_BF16_AMX), with m, n, k > 0, alpha != 0
 * and gemm_bf16_amx_workspace(m, n, k) bytes at ws. */
#if PCNN_GEMM_BF16_AVX512 && defined(__linux__)
#define PCNN_GEMM_BF16_AMX 1
#define GEMM_BF16_AMX_KC 2304
#define GEMM_BF16_AMX_MC 32
#define GEMM_BF16_AMX_NC 256
size_t gemm_bf16_amx_workspace(int m, int n, int k);
void gemm_bf16_amx(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const bf16 *a,
                   int lda, const bf16 *b, int ldb, float beta, float *c, int ldc, void *ws);
#else
#define PCNN_GEMM_BF16_AMX 0
#endif

#endif
