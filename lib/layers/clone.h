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

#endif
