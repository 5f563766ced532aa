/* Halo geometry of a windowed layer (convolution, pooling) along one
 * spatial dimension, for any kernel K, stride S and padding P (seed 002
 * section III-A generalised: WAVE2_SPEC A.3).  Output o reads inputs
 * [o*S - P, o*S - P + K); indices outside [0, X) are padding. */
#ifndef PCNN_PARALLEL_HALO_H
#define PCNN_PARALLEL_HALO_H

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

#endif
