/* Direct convolution for convolutions with kernel 3 or 5 and any padding
 * below the kernel, without im2col: stride 1, and for the channel-lane
 * forward and the weight gradient any stride.
 *
 * Every channel plane of a batch is laid out on a grid of N images of
 * Hp x Wp floats, flattened, with zero margins on both sides: each row is
 * p zeros and W pixels, each image p zero rows and H rows (Hp = H + p,
 * Wp = W + p, or the output's size if that is larger), so that a row's
 * right padding is the next row's left padding.  On that grid tap
 * (ky, kx) of the kernel is the constant offset ky*Wp + kx,
 * so one output position is a dot product over (channel, tap) of shifted
 * loads, and 16 neighbouring positions are one vector.  Output pixel (i, j)
 * of an image sits at the image's grid position (i, j); the positions past
 * Ho or Wo are computed and dropped (the wasted share is the border).
 *
 *   forward   x placed at (p, p) of each image; out = conv(x)
 *   dx        dY placed at (0, 0) is read as if at (k-1-p, k-1-p) and
 *             convolved with the kernel flipped and transposed
 *   dW        over the output pixels only: a vector of 16 output channels
 *             of dY times broadcast x values at every tap; for few output
 *             channels, dY placed at (0, 0) times x shifted by the tap,
 *             grid positions in the lanes
 *
 * Which kernel runs for which layer is decided in strategy/conv_choice.h.
 * The vector kernels need AVX-512F, checked at run time
 * (direct_conv_available); elsewhere the layer keeps im2col + GEMM. */
#ifndef PCNN_CONV_DIRECT_H
#define PCNN_CONV_DIRECT_H

#include <stdbool.h>
#include <stddef.h>

typedef struct direct_grid {
    int n, h, w, k, pad; /* batch, input plane, kernel, padding */
    int stride;          /* 1, or more for the channel-lane forward only */
    int hp, wp;          /* one image of the grid */
    int ho, wo;          /* output plane */
    size_t q;            /* grid positions: n * hp * wp */
    size_t q_round;      /* q rounded up to whole vector tiles */
    size_t reach;        /* the furthest tap offset: (k-1)*(wp+1) */
    size_t lead;         /* where the grid starts in a plane (>= reach) */
    size_t plane;        /* floats per channel plane, a multiple of 16 */
} direct_grid;

/* Can this CPU run the direct kernel, and does it handle kernel k, stride,
 * padding? */
bool direct_conv_available(void);
bool direct_conv_supports(int k, int stride, int pad);

/* The grid of x placed at (pad, pad) for a convolution with this kernel,
 * stride and padding. */
void direct_grid_init(direct_grid *g, int n, int h, int w, int k, int stride, int pad);

/* Floats of the packed weights (either direction), and of the scratch of
 * direct_weight_grad for a batch of n with ho x wo outputs. */
size_t direct_packed_floats(int cout, int cin, int k);
size_t direct_wgrad_floats(int cout, int cin, int k, int n, int ho, int wo, int threads);

/* c planes of hs x ws images (C x N x hs x ws, CNHW) onto the grid, pixel
 * (0, 0) at (row0, col0) of each image, zeros everywhere else. */
void direct_place(const float *x, int c, int hs, int ws, int row0, int col0,
                  const direct_grid *g, float *planes, int threads);

/* Where a convolution's results go: the hs x ws top-left corner of every
 * image of the grid, as C x N x hs x ws (CNHW): y = result + bias[c]
 * (bias may be NULL), or y += result when accumulate. */
typedef struct direct_output {
    float *y;
    const float *bias;
    int hs, ws;
    bool accumulate;
} direct_output;

/* The layer's weights w[cout][cin][k*k] as a pass reads them, for the
 * kernels' repacking: as they are (forward: output o, input i) or flipped
 * and transposed (adjoint: output o is an input channel of w). */
typedef struct direct_weights {
    const float *w;
    float *packed;
    int cout, cin, k;
    bool adjoint;
} direct_weights;

static inline float direct_weight(const direct_weights *a, size_t o, size_t i, int tap)
{
    const int kk = a->k * a->k;
    return a->adjoint ? a->w[(i * (size_t)a->cin + o) * kk + (kk - 1 - tap)]
                      : a->w[(o * (size_t)a->cin + i) * kk + tap];
}

/* Pack weights w[cout][cin][k*k] for direct_conv: as they are (forward,
 * nout = cout) or flipped and transposed (adjoint, nout = cin: the input
 * gradient). */
void direct_pack(const float *w, int cout, int cin, int k, bool adjoint, float *packed,
                 int threads);

/* to = convolution of in planes (nin) with packed weights (nout output
 * channels), computed at every grid position and stored for the real
 * ones; adjoint as in direct_pack (in = dY at (0, 0)).  out (nout grid
 * planes) holds partial sums over blocks of input channels. */
void direct_conv(const float *in, int nin, const float *packed, int nout, bool adjoint,
                 const direct_grid *g, float *out, const direct_output *to, int threads);

/* The same convolution (or its adjoint) with output channels in the
 * vector lanes, over the real output pixels only, straight into y (nout x
 * N x Ho x Wo for the forward, nout = cout; nout x N x H x W for the
 * adjoint, nout = cin): y = conv + bias (bias may be NULL), or y += conv
 * when accumulate.  The forward also serves strided convolutions (a grid
 * with stride > 1): each output pixel's window starts stride positions
 * after its neighbour's.  w is the layer's w[cout][cin][k*k]; scratch holds
 * direct_channels_floats(nout, nin, k, output pixels). */
size_t direct_channels_floats(int nout, int nin, int k, size_t pixels);
void direct_conv_channels(const float *in, const float *w, int cout, int cin, bool adjoint,
                          const direct_grid *g, const float *bias, float *y, bool accumulate,
                          float *scratch, int threads);

/* The same weight gradient for few output channels, which would leave
 * most vector lanes of direct_weight_grad empty: from dY placed on the
 * grid at (0, 0) (dyp) and x placed at (p, p) (xp), stride 1, no
 * scratch. */
void direct_weight_grad_few(const float *dyp, int cout, const float *xp, int cin,
                            const direct_grid *g, float *dw, int threads);

/* dw[cout][cin][k*k] = sum over output pixels of dY[co] * x[ci] at the
 * pixel's window (stride positions apart) shifted by the tap; dy is C x N
 * x Ho x Wo (CNHW), xp the grid planes of x placed at (p, p).  scratch
 * holds direct_wgrad_floats (float and double parts, 64-byte aligned when
 * scratch is).  Both weight gradients sum short runs of pixels in float and
 * combine them in double, in an order fixed by the thread count. */
void direct_weight_grad(const float *dy, int cout, const float *xp, int cin,
                        const direct_grid *g, float *dw, float *scratch, int threads);

#endif
