/* What a layer kind declares about itself for the machinery around it:
 * the spatial engine (graph/spatial_*.c), the automatic planner (plan/),
 * the performance model and its kernel regressors (perf/), the timing
 * and the summary.  Each kind answers in its own file (layers/<kind>.c),
 * in its layer_ops (layer.h) `.caps`; code elsewhere asks these questions
 * and never compares a layer's kind name (tests/api/check_layering.py
 * fails on that).  Included by layer.h. */
#ifndef PCNN_LAYERS_LAYER_CAPS_H
#define PCNN_LAYERS_LAYER_CAPS_H

#include <stdbool.h>

#include "pcnn.h"

struct layer_list;

/* How a layer runs on a box (a block of D, H, W) of each sample when the
 * network is split spatially.  0 is not a value: layer_append refuses a
 * kind that does not declare. */
typedef enum layer_split {
    LAYER_SPLIT_UNDECLARED = 0,
    LAYER_SPLIT_POINTWISE, /* output point p reads point p of each input (ReLU, add, dropout,
                              the input): a box needs the same box of its inputs */
    LAYER_SPLIT_REDUCTION, /* pointwise, with statistics reduced over the batch (batch norm):
                              its ranks reduce together */
    LAYER_SPLIT_WINDOWED,  /* output point reads a window of its input (convolution,
                              pooling): caps.window describes it */
    LAYER_SPLIT_WHOLE,     /* needs whole samples: never split (flatten, dense, global
                              pooling, pixel shuffle) */
} layer_split;

/* The window of a windowed layer, per dimension D, H, W (index 0, 1, 2).
 * A 2D layer's D entry is kernel 1, stride 1, padding 0: the identity. */
typedef struct layer_window {
    int kernel[3], stride[3], padding[3];
    float pad_value; /* what the padding reads: -inf for max pooling, else 0 */
} layer_window;

/* A window of the same kernel, stride and padding in H and W, and in D
 * too when volume (3D layers). */
static inline layer_window layer_window_cube(int kernel, int stride, int padding, bool volume,
                                             float pad_value)
{
    const int k0 = volume ? kernel : 1, s0 = volume ? stride : 1, p0 = volume ? padding : 0;
    return (layer_window){.kernel = {k0, kernel, kernel},
                          .stride = {s0, stride, stride},
                          .padding = {p0, padding, padding},
                          .pad_value = pad_value};
}

/* Which kernel family prices the layer in the performance model's
 * regressors (perf/regressor_source.c maps each to its regressor; that
 * switch has no default, so a new class does not compile until priced).
 * 0 is not a value: layer_append refuses a kind that does not declare. */
typedef enum layer_cost_class {
    LAYER_COST_UNDECLARED = 0,
    LAYER_COST_NONE,           /* no kernel of its own (the input): no regressor, the
                                  model's timings alone */
    LAYER_COST_CONV2D,         /* geometry from caps.window */
    LAYER_COST_CONV3D,
    LAYER_COST_CONV_TRANSPOSE2D, /* the adjoint of the convolution of caps.window: its
                                    passes are that convolution's, roles swapped */
    LAYER_COST_CONV_TRANSPOSE3D,
    LAYER_COST_MAXPOOL2D,
    LAYER_COST_AVGPOOL2D,
    LAYER_COST_MAXPOOL3D,
    LAYER_COST_AVGPOOL3D,
    LAYER_COST_DENSE,          /* features = the input's size, outputs = out.c */
    LAYER_COST_STREAM,         /* reads its input and writes its output once per pass:
                                  priced as a ReLU of the larger of the two */
    LAYER_COST_BATCHNORM,
    LAYER_COST_ADD,
    LAYER_COST_GLOBAL_AVGPOOL,
    LAYER_COST_DROPOUT,
} layer_cost_class;

/* How a twin may differ from its original (layers/clone.h).  keep_padding:
 * a convolution keeps its original's padding (run on a rank's block in
 * place, it reads zeros where the halo lies; other kinds ignore it).
 * no_bias: a convolution without its bias (its output is a part added to
 * another; its parameters are the original's weights, which come first). */
typedef struct twin_opts {
    bool keep_padding, no_bias;
} twin_opts;

typedef struct layer_caps {
    layer_split split;     /* required */
    layer_cost_class cost; /* required */

    /* The window of l; required for LAYER_SPLIT_WINDOWED and the
     * transposed convolutions' cost classes, unused otherwise. */
    void (*window)(const pcnn_layer *l, layer_window *w);

    /* The box of input j (need_lo..need_hi, over D, H, W) that the output
     * box lo..hi needs.  NULL: by the split (layer_need_box in
     * layer_caps.c: the same box, the box's window, or the whole input). */
    void (*need_box)(const pcnn_layer *l, int j, const int lo[3], const int hi[3],
                     int need_lo[3], int need_hi[3]);

    /* Add to `list` a layer of l's kind and configuration fed by in[0..
     * l->num_inputs) (stand-ins of the box's shapes, clone.c makes them):
     * l's twin on a box.  A windowed twin has no padding unless
     * o.keep_padding.  NULL: l cannot run on a box (UNSUPPORTED). */
    pcnn_status (*twin)(const pcnn_layer *l, struct layer_list *list, pcnn_layer *const *in,
                        twin_opts o, pcnn_layer **out, const char *func);

    /* May l (a set-up twin) run forward again on part of its box, its
     * backward reading nothing forward kept but the input (halo overlap)?
     * NULL: no (max pooling keeps its argmax). */
    bool (*recomputable)(const pcnn_layer *l);

    /* Twin tuning, before the twin decides: it holds `share` (0, 1] of
     * its original's outputs (a memory budget follows); its input
     * gradient is wanted on the box lo, ext (D, H, W) of its input only.
     * NULL: nothing to tune. */
    void (*twin_share)(pcnn_layer *twin, double share);
    void (*twin_want_dx_box)(pcnn_layer *twin, const int lo[3], const int ext[3]);

    bool in_place;         /* may run on its input's block in place, reading zeros where
                              the halo lies (a windowed layer with weights: convolutions) */
    bool weights_alone;    /* its backward may compute the weight gradient without any
                              input gradient (as when the input feeds it) */
    bool bf16;             /* its products (forward, dx, dW) can run as bf16 x bf16 with
                              fp32 sums (PCNN_OPT_PRECISION, pcnn_layer_set_precision) */
    bool folds_into_dense; /* a flatten: a dense layer right after it may take its input's
                              box as is (graph/spatial_dense.c) */
} layer_caps;

/* The questions, asked of any layer (layer_caps.c). */

/* Can l run on a box of a spatially split sample (split not WHOLE)? */
bool layer_splits(const pcnn_layer *l);

/* The window of a windowed layer into *w; false (and *w the identity, pad
 * value 0) for any other. */
bool layer_window_of(const pcnn_layer *l, layer_window *w);

/* caps.need_box, or its default by the split. */
void layer_need_box(const pcnn_layer *l, int j, const int lo[3], const int hi[3], int need_lo[3],
                    int need_hi[3]);

/* caps.recomputable, false where NULL. */
bool layer_recomputable(const pcnn_layer *l);

#endif
