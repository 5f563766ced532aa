/* Compute kernels: GEMM, im2col/col2im and layout conversions.  No layer
 * knowledge here; everything takes raw pointers and sizes.
 *
 * Threading: libpcnn runs one thread pool, OpenMP's.  GEMMs are partitioned
 * over the OpenMP threads, each block computed by single-threaded OpenBLAS
 * (the graph sets OpenBLAS to one thread for the duration of each call), so
 * the two pools never compete for the cores and results are bitwise
 * reproducible for a given thread count. */
#ifndef PCNN_KERNELS_H
#define PCNN_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Hot element-wise loops are compiled for AVX-512, AVX2 and baseline
 * x86-64, and the loader picks the best for the CPU (GCC target_clones):
 * the library stays portable and still uses wide vectors.  ISO C mode
 * does not contract a*b+c into FMA and the vectoriser keeps the order of
 * float sums, so every clone gives the same bits. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VECTOR_CLONES
#endif

/* Parallel loops (parallel.c).  fn(arg, lo, hi) covers [lo, hi) of [0, n).
 * parallel_for cuts [0, n) into one contiguous block per thread, in whole
 * grains (16 floats = a cache line, so that no two threads write the same
 * line), the same cut for the same (n, grain, threads); loops whose `work`
 * (elements touched) is below PAR_MIN_WORK, or with one thread, run inline
 * on the caller without opening an OpenMP region: libgomp mallocs a new
 * team for every region that runs on one thread. */
#define PAR_MIN_WORK 16384
typedef void (*range_fn)(void *arg, size_t lo, size_t hi);
void parallel_for(size_t n, size_t grain, size_t work, int threads, range_fn fn, void *arg);

/* The same, also telling fn which block it runs (0 .. threads-1), e.g. to
 * pick per-thread scratch.  The block index, not omp_get_thread_num(): a
 * host may call libpcnn from inside its own parallel region. */
typedef void (*part_fn)(void *arg, size_t lo, size_t hi, int part);
void parallel_parts(size_t n, size_t grain, size_t work, int threads, part_fn fn, void *arg);

/* Row-major C[M x N] = alpha * op(A)[M x K] * op(B)[K x N] + beta * C,
 * op(X) = X^T when trans_X.  lda/ldb/ldc are row strides of the stored
 * matrices.  The larger of M and N is split over `threads` threads. */
void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a, int lda,
          const float *b, int ldb, float beta, float *c, int ldc, int threads);

/* The same on the calling thread only, for callers that partition the work
 * themselves (inside a parallel_for). */
void gemm_serial(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc);

/* Make OpenBLAS single-threaded for the duration of a library call and
 * give the host its setting back afterwards. */
int blas_threads_enter(void);
void blas_threads_leave(int saved);

/*
 * im2col over a whole batch in CNHW layout (see layers/layer.h).
 * Input: C x N x H x W.  Output col: (C*K*K) rows x (N*Ho*Wo) columns,
 * row (c, kh, kw), column (n, ho, wo); zero where the window reads padding.
 */
void im2col_batch(const float *x, int c, int n, int h, int w, int k, int stride, int pad,
                  int ho, int wo, float *col, int threads);

/* A convolution's input batch (C x N x H x W, CNHW) and output plane. */
typedef struct conv_shape {
    int c, n, h, w, k, stride, pad, ho, wo;
} conv_shape;

/* im2col of a band of output rows: global output rows [g0, g1), row g
 * being output row g % Ho of sample g / Ho, i.e. columns [g0*Wo, g1*Wo) of
 * the whole batch's col matrix, written as (C*K*K) rows of (g1-g0)*Wo
 * floats with row stride ld.  Single-threaded: for cache-sized bands. */
void im2col_rows(const float *x, const conv_shape *g, int g0, int g1, float *col, size_t ld);

/* The adjoint for the same band: adds dcol's contributions into dx.
 * Without accumulate, the plane (c, n) of a sample whose first output row
 * is in the band is zeroed first, so bands that visit a sample's rows in
 * order, on one thread, overwrite dx.  Samples must not be split between
 * threads.  dcol is scratch: entries that read padding may be zeroed. */
void col2im_rows(float *dcol, size_t ld, const conv_shape *g, int g0, int g1, float *dx,
                 bool accumulate);

/* The adjoint of im2col_batch: dx (C x N x H x W) = or += col2im(dcol).
 * accumulate selects += (the input feeds several layers). */
void col2im_batch(const float *dcol, int c, int n, int h, int w, int k, int stride, int pad,
                  int ho, int wo, float *dx, bool accumulate, int threads);

/* vol2col / col2vol (vol2col.c): im2col with a depth axis, for 3D
 * convolutions over a whole batch in the C x N x D x H x W layout.  col has
 * C*K^3 rows (c, kd, kh, kw) of N*Do*Ho*Wo columns (n, od, oh, ow); zero
 * where the window reads padding.  Any padding >= 0. */
typedef struct vol_shape {
    int c, n, d, h, w;     /* input batch */
    int k, stride, pad;    /* cubic kernel, stride and padding on every side */
    int od, oh, ow;        /* output volume */
} vol_shape;
void vol2col_batch(const float *x, const vol_shape *g, float *col, int threads);
/* dx (C x N x D x H x W) = or += col2vol(dcol), the adjoint of vol2col_batch. */
void col2vol_batch(const float *dcol, const vol_shape *g, float *dx, bool accumulate,
                   int threads);
/* The same for one band: sample s, output planes [d0, d1); col has C*K^3
 * rows of (d1 - d0)*Ho*Wo columns.  col2vol_band clears dx[., s] at the
 * band d0 == 0 unless accumulate, and adds every other band. */
void vol2col_band(const float *x, const vol_shape *g, int s, int d0, int d1, float *col,
                  int threads);
void col2vol_band(const float *dcol, const vol_shape *g, int s, int d0, int d1, float *dx,
                  bool accumulate, int threads);

/* Direct forward 3D convolution, stride 1 (vol_direct.c): y (Cout x N x
 * Do x Ho x Wo) = conv(x) + bias (bias may be NULL), through xp, a
 * zero-padded copy of x (vol_direct_pad_floats), with the weights
 * [Cout][Cin][k^3] packed by vol_direct_pack (vol_direct_packed_floats).
 * Needs AVX-512F: vol_direct_available(). */
bool vol_direct_available(void);
int vol_direct_block(int cout);
size_t vol_direct_pad_floats(const vol_shape *g);
size_t vol_direct_packed_floats(int cout, int cin, int k);
void vol_direct_pack(const float *w, int cout, int cin, int k, float *packed);
void vol_direct_forward(const float *x, const vol_shape *g, const float *packed, int cout,
                        const float *bias, float *xp, float *y, int threads);

/* dst[i] = pieces[i] + pieces[n + i] + ... over `count` pieces of n floats,
 * added in piece order (the same bits as one float accumulated that way),
 * split over threads (pieces.c).  count 1 copies. */
void sum_pieces(const float *pieces, size_t n, int count, float *dst, int threads);
/* The same for pieces of bfloat16 values (the top halves of binary32,
 * kernels/bf16.h): each widened exactly and added in fp32, in piece order
 * (the receiving side of a bf16 exchange). */
void sum_pieces_bf16(const uint16_t *pieces, size_t n, int count, float *dst, int threads);

/* Per-row sums and fills of a rows x n row-major matrix (a convolution's
 * bias gradient and bias), rows split over threads.  row_sums sums each
 * row in an order fixed by n alone (8 float lanes over blocks of 1024, the
 * blocks in double), so any thread count gives the same bits. */
void row_sums(const float *x, size_t rows, size_t n, float *out, int threads);
void fill_rows(float *x, size_t rows, size_t n, const float *values, int threads);

/* Are all count values finite?  x * 0 is 0 for finite x and NaN for NaN or
 * Inf; eight independent lanes let the compiler vectorise the scan. */
bool floats_finite(const float *x, size_t count);

/* Layout conversions between the public NCHW and the internal CNHW:
 * nchw_to_cnhw: dst[(c*N+n)*S + s] = src[(n*C+c)*S + s]; and back. */
void nchw_to_cnhw(const float *src, float *dst, int n, int c, size_t spatial, int threads);
void cnhw_to_nchw(const float *src, float *dst, int n, int c, size_t spatial, int threads);

/* Sums over a run of n floats for batch normalisation, in an order fixed
 * by n (the same bits on every CPU; reduce.c):
 *   sums_shifted:  out = { sum (x - shift), sum (x - shift)^2 }, in double;
 *   sums_gradient: out = { sum d, sum d * xh } with t = x - shift -
 *                  shift_lo, xh = t * scale and d = dy, or, for a fused
 *                  ReLU (relu = {mul, beta} not NULL), relu_mask(dy, t * mul
 *                  + beta): the ReLU's output recomputed bit for bit as batch
 *                  norm's forward made it. */
void sums_shifted(const float *x, size_t n, float shift, double out[2]);
void sums_gradient(const float *x, const float *dy, const float *relu, size_t n, float shift,
                   float shift_lo, float scale, double out[2]);

/* dy where a ReLU's output is positive, else 0 (also for NaN dy, as the
 * ReLU's own backward), without a branch: the two cases are equally likely. */
static inline float relu_mask(float dy, float relu_out)
{
    uint32_t bits, keep = relu_out > 0.0f ? UINT32_MAX : 0u;
    memcpy(&bits, &dy, sizeof bits);
    bits &= keep;
    memcpy(&dy, &bits, sizeof dy);
    return dy;
}

/* y[i] = x[i] (+ y[i] if accumulate), over n floats. */
void copy_or_add(const float *x, float *y, size_t n, bool accumulate, int threads);

#endif
