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

/* Dropout on one rank's box of a spatial split (the original layer runs:
 * its masks are keyed by each point's index in the whole sample, so they
 * do not depend on the split).  Box: lo and ext over D, H, W of l->out;
 * ctx->sample_base is the first sample's global index.  Backward over
 * count values of l->dy into dx (NULL: nothing). */
bool layer_is_dropout(const pcnn_layer *l);
void dropout_forward_box(pcnn_layer *l, const run_ctx *ctx, const int lo[3], const int ext[3]);
void dropout_backward_box(pcnn_layer *l, const run_ctx *ctx, size_t count, float *dx);

/* Build the twin of l in `list` (empty, its own) on inputs of shapes
 * in[0..l->num_inputs): *out receives it, and its stand-in inputs are
 * out->inputs[].  UNSUPPORTED for a kind that has no twin. */
pcnn_status clone_local(layer_list *list, const pcnn_layer *l, const shape *in,
                        pcnn_layer **out, const char *func);

/* The same, the twin differing as o says (layer_caps.h). */
pcnn_status clone_local_with(layer_list *list, const pcnn_layer *l, const shape *in,
                             twin_opts o, pcnn_layer **out, const char *func);

#endif
