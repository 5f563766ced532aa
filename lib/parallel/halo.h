/* Halo geometry of a windowed layer (convolution, pooling) along one
 * spatial dimension, for any kernel K, stride S and padding P (seed 002
 * section III-A generalised: WAVE2_SPEC A.3).  Output o reads inputs
 * [o*S - P, o*S - P + K); indices outside [0, X) are padding. */
#ifndef PCNN_PARALLEL_HALO_H
#define PCNN_PARALLEL_HALO_H

#include <stdbool.h>

/* The inputs [*lo, *hi) read by outputs [b0, b1) (b1 > b0), padding
 * included (lo may be < 0, hi > X). */
void halo_window(int b0, int b1, int k, int s, int p, int *lo, int *hi);

/* Forward halo of a rank owning inputs [a0, a1) and outputs [b0, b1) of an
 * input of extent X: the inputs it needs below a0 (*low) and at or above
 * a1 (*high), owned by other ranks (padding excluded). */
void halo_forward_widths(int x, int a0, int a1, int b0, int b1, int k, int s, int p, int *low,
                         int *high);

/* Backward (dL/dy) halo of the same rank for an output of extent Y: the
 * outputs outside [b0, b1) whose windows read an input in [a0, a1), as
 * counts below b0 (*low) and at or above b1 (*high). */
void halo_backward_widths(int y, int a0, int a1, int b0, int b1, int k, int s, int p, int *low,
                          int *high);

/* Along a split dimension, the outputs [*i0, *i1) within [b0, b1) whose
 * windows read only inputs in [a0, a1) or padding outside [0, X): the
 * interior that needs no halo. */
void halo_interior(int x, int a0, int a1, int b0, int b1, int k, int s, int p, int *i0, int *i1);

/* Does a convolution gain by running on its block in place (no staged
 * copy of the block; graph/spatial_in_place.c)?  It computes its border
 * cells again instead: border_share of its outputs, each costing
 * out_channels x window multiply-adds per input channel, against three
 * copies of the block (staged forward and backward, the gradient back)
 * of one value per input channel and point.  Measured on one core: the
 * cells' work (small, inefficient shapes) costs as much as the copies at
 * about 4 multiply-adds per value; a 3x3 plane of 1024 rows split in two
 * (share 1/512) gains ~15 ms a layer, a 3x3x3 volume of 16 planes a rank
 * (share 1/8, 64 outputs) loses ~3 ms. */
bool halo_in_place_pays(double border_share, int out_channels, int window);

#endif
