/* The direct 3D convolution's passes beyond the forward (kernels.h has
 * the forward, its packing and sizes): the padded copy and the convolution
 * on it separately, and the two backward passes of a stride-1 convolution.
 * All need AVX-512F (vol_direct_available); elsewhere they do nothing and
 * the layer keeps vol2col + GEMM.  Layouts are C x N x D x H x W. */
#ifndef PCNN_KERNELS_VOL_DIRECT_H
#define PCNN_KERNELS_VOL_DIRECT_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels.h"

/* xp (vol_direct_pad_floats(g)) = x zero-padded by g->pad on every side. */
void vol_direct_pad(const float *x, const vol_shape *g, float *xp, int threads);

/* A window of x padded with zeros: xp[z][y][x] = x[z + off[0]][y + off[1]]
 * [x + off[2]] (0 outside x's d, h, w) for the ext[0] x ext[1] x ext[2]
 * points of each (channel, sample) volume. */
void vol_direct_pad_window(const float *x, const vol_shape *g, const int off[3],
                           const int ext[3], float *xp, int threads);

/* y = conv(xp) + bias (bias may be NULL), or y += conv(xp) when accumulate
 * (bias unused), for xp made by vol_direct_pad and weights packed by
 * vol_direct_pack (or vol_direct_pack_flipped) for cout outputs. */
void vol_direct_convolve(const float *xp, const vol_shape *g, const float *packed, int cout,
                         const float *bias, bool accumulate, float *y, int threads);

/* ---- input gradient (vol_direct_backward.c) ------------------------------
 * dx = conv(dY) with the kernel flipped and transposed, padded by
 * k - 1 - pad: a forward convolution of dY, so it needs pad <= k - 1. */
bool vol_direct_data_supports(const vol_shape *g);

/* The forward geometry g's adjoint: input dY (cout channels, Do x Ho x Wo),
 * output dx (D x H x W). */
vol_shape vol_direct_adjoint(const vol_shape *g, int cout);

/* w[cout][cin][k^3] flipped and transposed, packed for cin outputs of cout
 * inputs: vol_direct_packed_floats(cin, cout, k) floats. */
void vol_direct_pack_flipped(const float *w, int cout, int cin, int k, float *packed);

/* dx = or += the input gradient of dy, through dyp, the padded dY
 * (vol_direct_pad_floats of the adjoint geometry). */
void vol_direct_backward_data(const float *dy, const vol_shape *g, const float *packed_flipped,
                              int cout, float *dyp, float *dx, bool accumulate, int threads);

/* dx = or += the input gradient on a box of the input only (lo, ext over D,
 * H, W); dx outside the box is left as it is.  Through scratch
 * (vol_direct_box_scratch_floats): a spatial split's twin needs no
 * gradient on the padding staged around its box. */
size_t vol_direct_box_scratch_floats(const vol_shape *g, int cout, const int ext[3]);
void vol_direct_backward_data_box(const float *dy, const vol_shape *g,
                                  const float *packed_flipped, int cout, const int lo[3],
                                  const int ext[3], float *scratch, float *dx, bool accumulate,
                                  int threads);

/* ---- weight gradient (vol_direct_wgrad.c) --------------------------------
 * dW[co][ci][t] = sum over the batch's output positions of dY[co] times x
 * at tap t, through xp (x padded, vol_direct_pad_floats(g)) and lanes
 * (vol_direct_wgrad_lane_floats): one partial sum per lane of 16 output
 * positions, reduced once at the end.  Units of work are (block of output
 * channels, group of input channels), each owning its dW entries: no
 * atomics, and the same bits for any thread count. */
size_t vol_direct_wgrad_lane_floats(int cout, int cin, int k);
void vol_direct_backward_weights(const float *x, const vol_shape *g, const float *dy, int cout,
                                 float *xp, float *lanes, float *dw, int threads);

#endif
