/* Convolution as one GEMM per kernel tap, on pixel-major activations, over
 * only the output pixels where the tap lands inside the input.
 *
 * On small planes most taps of a padded kernel read padding: a 3x3 "same"
 * convolution of a 4x4 plane multiplies zeros in 31% of its products, of
 * a 2x2 plane in 56%.  im2col + GEMM and the direct kernels do that work;
 * this path skips it.  Activations are turned from CNHW into pixel-major
 * [H][W][N][C] rows, where for a tap (dy, dx) and an output row i the
 * pixels (i, j0..j1) of all N images are one block of consecutive rows, and
 * so are the input pixels (i+dy, j0+dx..j1+dx) they read:
 *
 *   forward   Y[rows] += X[rows shifted by the tap] * W_tap     (Cin x Cout)
 *   dx        dX[rows shifted] += dY[rows] * W_tap^T
 *   dW        dW_tap = sum over the blocks of X[rows shifted]^T * dY[rows]
 *
 * When a tap covers whole rows (dx = 0 and Wo = W) the rows of all its
 * output lines are merged into one block.  Every pass is one parallel
 * region in which each thread owns a slice of the GEMMs' output columns
 * and runs its GEMMs on one core, tap after tap: no two threads touch the
 * same element and no thread waits for another.  Stride 1 only. */
#ifndef PCNN_CONV_TAPS_H
#define PCNN_CONV_TAPS_H

#include <stdbool.h>
#include <stddef.h>

#include "pixel_rows.h"

/* Share of the kernel's products that read input pixels rather than
 * padding, for an h x w plane: the work this path does relative to the
 * others. */
double conv_taps_useful(int h, int w, int k, int pad);

/* Floats of the repacked weights [K*K][Cin][Cout], kept by the layer from
 * forward to backward. */
size_t conv_taps_weight_floats(const pixel_conv *s);

/* Floats of workspace either pass needs (the backward's, the larger). */
size_t conv_taps_workspace_floats(const pixel_conv *s);

/* y (CNHW) = conv(x) + bias (bias may be NULL).  Repacks w
 * [Cout][Cin][K][K] into wt, which conv_taps_backward reads. */
void conv_taps_forward(const pixel_conv *s, const float *x, const float *w, const float *bias,
                       float *wt, float *y, float *workspace, int threads);

/* dw [Cout][Cin][K][K] = the weight gradient (overwritten); dx (CNHW, may
 * be NULL) = or += (accumulate) the input gradient.  wt is the forward's
 * repacked weights. */
void conv_taps_backward(const pixel_conv *s, const float *x, const float *dy, const float *wt,
                        float *dw, float *dx, bool accumulate, float *workspace, int threads);

#endif
