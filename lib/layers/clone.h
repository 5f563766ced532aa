/* A layer's local twin: the same layer kind and configuration on other
 * input shapes, for running a layer on a rank's box of a spatially
 * distributed network (graph/spatial_plan.c).  A windowed layer
 * (convolution, pooling) is cloned without padding: its input is the box
 * extended by the halo, with padding values written only where the box
 * leaves the sample.  The twin lives in a layer list of its own, fed by
 * stand-in layers of the given shapes whose buffers the caller points at
 * the real data; its parameters are the original's (the caller points
 * them there too). */
#ifndef PCNN_LAYERS_CLONE_H
#define PCNN_LAYERS_CLONE_H

#include "layer.h"

/* The configuration getters behind the clone, one per kind that has one. */
void pool2d_config(const pcnn_layer *l, int *kernel, int *stride, int *padding);
float activation_slope(const pcnn_layer *l);
float residual_add_scale(const pcnn_layer *l);
void batchnorm_config(const pcnn_layer *l, float *eps, float *momentum);
void conv3d_config(const pcnn_layer *l, int *out_channels, int *kernel, int *stride,
                   int *padding, bool *bias);
void pool3d_config(const pcnn_layer *l, int *kernel, int *stride, int *padding);
/* Does a set-up convolution keep its im2col / vol2col matrix from forward
 * to backward (PCNN_OPT_KEEP_IM2COL and its algorithm)? */
bool conv2d_keeps_col(const pcnn_layer *l);
bool conv3d_keeps_col(const pcnn_layer *l);
/* A 3D convolution's twin on a share (0, 1) of its original's outputs
 * takes that share of the vol2col budget, before it decides: so it bands
 * (and keeps no col) where the original does, on share of its memory. */
void conv3d_share_col_budget(pcnn_layer *l, double share);
/* A 3D convolution's twin whose input gradient is wanted on a box of its
 * input only (lo, ext over D, H, W; the rest is padding staged around the
 * rank's box): set before it decides; a direct dx then computes that box
 * alone and leaves the rest of dx as it was.  A box outside the input is
 * ignored. */
void conv3d_want_dx_box(pcnn_layer *l, const int lo[3], const int ext[3]);

/* Dropout on one rank's box of a spatial split (the original layer runs:
 * its masks are keyed by each point's index in the whole sample, so they
 * do not depend on the split).  Box: lo and ext over D, H, W of l->out;
 * ctx->sample_base is the first sample's global index.  Backward over
 * count values of l->dy into dx (NULL: nothing). */
bool layer_is_dropout(const pcnn_layer *l);
void dropout_forward_box(pcnn_layer *l, const run_ctx *ctx, const int lo[3], const int ext[3]);
void dropout_backward_box(pcnn_layer *l, const run_ctx *ctx, size_t count, float *dx);

/* Windowed layers: the kernel, stride and padding of l (false: not
 * windowed), and whether the window spans D too (3D) or only H and W. */
bool clone_window(const pcnn_layer *l, int *kernel, int *stride, int *padding, bool *volume);

/* The value of the padding l reads: -inf for max pooling, else 0. */
float clone_pad_value(const pcnn_layer *l);

/* Can a layer of this kind be split spatially? */
bool clone_splittable(const pcnn_layer *l);

/* Build the twin of l in `list` (empty, its own) on inputs of shapes
 * in[0..l->num_inputs): *out receives it, and its stand-in inputs are
 * out->inputs[].  UNSUPPORTED for a kind that has no twin. */
pcnn_status clone_local(layer_list *list, const pcnn_layer *l, const shape *in,
                        pcnn_layer **out, const char *func);

/* How a convolution's twin may differ from the above.  keep_padding: it
 * keeps its original's padding (a convolution run on a rank's block in
 * place reads zeros where the halo lies).  no_bias: a convolution without
 * its bias (its output is a part added to another; its parameters are
 * the original's weights, which come first). */
typedef struct clone_opts {
    bool keep_padding, no_bias;
} clone_opts;
pcnn_status clone_local_with(layer_list *list, const pcnn_layer *l, const shape *in,
                             clone_opts o, pcnn_layer **out, const char *func);

#endif
