/* Pixel-major rows: activations as [H][W][N][C], one row of C channels per
 * (pixel, image), pixel-major, so that the images of one pixel and the
 * pixels of one image row are consecutive rows; and convolution weights as
 * [K*K][Cin][Cout], one Cin x Cout matrix per kernel tap.  The layout of
 * the GEMM-per-tap convolution (conv_taps.h); the rest of the library is
 * CNHW with [Cout][Cin][K][K] weights.  Each conversion is one parallel pass in which every output
 * element is written by exactly one thread. */
#ifndef PCNN_PIXEL_ROWS_H
#define PCNN_PIXEL_ROWS_H

#include <stdbool.h>
#include <stddef.h>

/* A convolution's geometry, for the pixel-major algorithms. */
typedef struct pixel_conv {
    int n, cin, cout;         /* batch, channels */
    int h, w, k, stride, pad; /* input plane, kernel, stride, padding */
    int ho, wo;               /* output plane */
} pixel_conv;

/* dst [P][N][C] = src [C][N][P]. */
void rows_from_cnhw(const float *src, float *dst, int c, int n, int p, int threads);

/* dst [C][N][P] = src [P][N][C] + bias[c] (bias may be NULL), or
 * += src when accumulating (bias unused). */
void rows_to_cnhw(const float *src, float *dst, const float *bias, int c, int n, int p,
                  bool accumulate, int threads);

/* wt [KK][Cin][Cout] from w [Cout][Cin][KK], and back. */
void taps_pack_weights(const float *w, int cout, int cin, int kk, float *wt, int threads);
void taps_unpack_weights(const float *wt, int cout, int cin, int kk, float *w, int threads);

#endif
