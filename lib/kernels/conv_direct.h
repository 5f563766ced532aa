/* Direct convolution for stride-1 "same" convolutions (k = 3 or 5,
 * pad = (k-1)/2), without im2col.
 *
 * Every channel plane of a batch is laid out on the zero-padded grid
 * (N x (H+2p) x (W+2p), flattened, with a margin of p*(Wp+1) zeros on each
 * side).  On that grid tap (ky, kx) of the kernel is a constant offset, so
 * one output position is a dot product over (channel, tap) of shifted
 * loads, and 16 neighbouring positions are one vector.  The output is
 * computed on the same grid (its border positions are garbage, dropped by
 * direct_unpad).  The input gradient is the same convolution with the
 * kernel flipped and transposed, on the zero-padded output gradient; the
 * weight gradient is one GEMM per tap between the padded output gradient
 * and the shifted padded input, over cache-sized chunks of the grid.
 *
 * The vector kernel needs AVX-512F, checked at run time
 * (direct_conv_available); elsewhere the layer keeps im2col + GEMM. */
#ifndef PCNN_CONV_DIRECT_H
#define PCNN_CONV_DIRECT_H

#include <stdbool.h>
#include <stddef.h>

typedef struct direct_grid {
    int n, h, w, k, pad; /* batch, input plane, kernel, padding (k-1)/2 */
    int hp, wp;          /* padded plane */
    size_t q;            /* grid positions: n * hp * wp */
    size_t q_round;      /* q rounded up to whole vector tiles */
    size_t margin;       /* zeros before (and after) the grid: pad*(wp+1) */
    size_t plane;        /* floats per channel plane, a multiple of 16 */
} direct_grid;

/* Can this CPU run the direct kernel, and does it handle kernel k, stride,
 * padding? */
bool direct_conv_available(void);
bool direct_conv_supports(int k, int stride, int pad);

/* Is the direct kernel expected to beat im2col + GEMM here?  It runs near
 * the FMA peak on every grid position, but the padded border is wasted
 * work: (H*W)/((H+2p)(W+2p)) of it is useful (0.64 for 8x8, 0.44 for 4x4),
 * while OpenBLAS's GEMM only falls below that rate for few channels
 * (bench/bench_conv measures both). */
bool direct_conv_preferred(int cin, int h, int w, int k);

void direct_grid_init(direct_grid *g, int n, int h, int w, int k);

/* Floats of the packed weights (either direction) and of the per-thread
 * weight-gradient partials. */
size_t direct_packed_floats(int cout, int cin, int k);
size_t direct_wgrad_floats(int cout, int cin, int k, int threads);

/* x (C x N x H x W, CNHW) onto the padded grid: xp holds c planes. */
void direct_pad(const float *x, int c, const direct_grid *g, float *xp, int threads);

/* The interior of c grid planes back to C x N x H x W: y = out + bias[c]
 * (bias may be NULL), or y += out when accumulate. */
void direct_unpad(const float *out, int c, const direct_grid *g, const float *bias, float *y,
                  bool accumulate, int threads);

/* Pack weights w[cout][cin][k*k] for direct_conv: as they are (forward,
 * nout = cout) or flipped and transposed (adjoint, nout = cin: the input
 * gradient). */
void direct_pack(const float *w, int cout, int cin, int k, bool adjoint, float *packed);

/* out planes (nout) = convolution of in planes (nin) with packed weights,
 * at every grid position. */
void direct_conv(const float *in, int nin, const float *packed, int nout, const direct_grid *g,
                 float *out, int threads);

/* dw[cout][cin][k*k] = sum over the grid of dyp[co] * shifted xp[ci]; dyp
 * must be zero off the interior (direct_pad makes it so).  scratch holds
 * direct_wgrad_floats. */
void direct_weight_grad(const float *dyp, int cout, const float *xp, int cin,
                        const direct_grid *g, float *dw, float *scratch, int threads);

#endif
