/* The questions of layer_caps.h, asked of any layer: each kind's answers
 * live in its own file; here only the defaults. */
#include "layer.h"

bool layer_splits(const pcnn_layer *l) { return l->ops->caps.split != LAYER_SPLIT_WHOLE; }

bool layer_window_of(const pcnn_layer *l, layer_window *w)
{
    *w = (layer_window){.kernel = {1, 1, 1}, .stride = {1, 1, 1}, .padding = {0, 0, 0}};
    if (l->ops->caps.split != LAYER_SPLIT_WINDOWED) return false;
    l->ops->caps.window(l, w);
    return true;
}

void layer_need_box(const pcnn_layer *l, int j, const int lo[3], const int hi[3], int need_lo[3],
                    int need_hi[3])
{
    if (l->ops->caps.need_box) {
        l->ops->caps.need_box(l, j, lo, hi, need_lo, need_hi);
        return;
    }
    const shape in = l->inputs[j]->out;
    const int ext[3] = {in.d, in.h, in.w};
    layer_window w;
    const bool windowed = layer_window_of(l, &w);
    for (int k = 0; k < 3; k++) {
        if (windowed) { /* the inputs its first and last outputs read (parallel/halo.h) */
            need_lo[k] = lo[k] * w.stride[k] - w.padding[k];
            need_hi[k] = (hi[k] - 1) * w.stride[k] - w.padding[k] + w.kernel[k];
        } else if (l->ops->caps.split == LAYER_SPLIT_WHOLE) {
            need_lo[k] = 0;
            need_hi[k] = ext[k];
        } else {
            need_lo[k] = lo[k];
            need_hi[k] = hi[k];
        }
    }
}

bool layer_recomputable(const pcnn_layer *l)
{
    return l->ops->caps.recomputable && l->ops->caps.recomputable(l);
}
