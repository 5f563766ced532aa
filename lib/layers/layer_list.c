/* The layer list: appending, ownership, the checks every adder shares, the
 * layer label for messages, and the public queries of a single layer. */
#include <stdio.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "layer.h"

const char *layer_name(const pcnn_layer *l, char *buf, size_t size)
{
    snprintf(buf, size, "layer %d (%s)", l->index, l->ops->kind);
    return buf;
}

bool layer_list_owns(const layer_list *list, const pcnn_layer *l)
{
    return l && l->index >= 0 && l->index < list->count && list->items[l->index] == l;
}

pcnn_status layer_check_new(const layer_list *list, pcnn_layer *const *inputs, int num_inputs,
                            pcnn_layer **out, const char *func)
{
    if (!out) return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "out is NULL");
    if (list->frozen)
        return error_set(PCNN_ERR_INVALID_STATE, func,
                         "the network is finalized; layers must be added before");
    for (int i = 0; i < num_inputs; i++) {
        if (!inputs[i])
            return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "input layer %d is NULL", i);
        if (!layer_list_owns(list, inputs[i]))
            return error_set(PCNN_ERR_INVALID_ARGUMENT, func,
                             "input layer %d belongs to another network", i);
    }
    return PCNN_OK;
}

pcnn_status layer_append(layer_list *list, const layer_ops *ops, pcnn_layer *const *inputs,
                         int num_inputs, shape out, size_t num_params, void *priv,
                         pcnn_layer **out_layer)
{
    /* Every kind answers the questions of layer_caps.h: one that does not
     * is a bug here, refused before anything could ask it. */
    const layer_caps *caps = &ops->caps;
    if (caps->split == LAYER_SPLIT_UNDECLARED || caps->cost == LAYER_COST_UNDECLARED ||
        (caps->split == LAYER_SPLIT_WINDOWED && !caps->window))
        return FAIL(PCNN_ERR_INTERNAL, "layer kind %s declares no split, cost class or window "
                    "(layers/layer_caps.h)", ops->kind);
    if (list->count == list->cap) {
        int cap = list->cap ? 2 * list->cap : 16;
        pcnn_layer **grown = mem_realloc(list->items, (size_t)cap * sizeof *grown);
        if (!grown) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "growing the layer list to %d", cap);
        list->items = grown;
        list->cap = cap;
    }
    pcnn_layer *l = mem_calloc(1, sizeof *l);
    if (!l) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "layer %d", list->count);
    l->ops = ops;
    l->list = list;
    l->index = list->count;
    l->num_inputs = num_inputs;
    for (int i = 0; i < num_inputs; i++) {
        l->inputs[i] = inputs[i];
        inputs[i]->num_consumers++;
    }
    l->out = out;
    l->num_params = num_params;
    l->init = PCNN_INIT_HE_NORMAL;
    l->precision = -1;
    l->decision.precision = -1;
    l->priv = priv;
    list->items[list->count++] = l;
    *out_layer = l;
    return PCNN_OK;
}

void layer_list_destroy(layer_list *list)
{
    for (int i = 0; i < list->count; i++) {
        pcnn_layer *l = list->items[i];
        if (l->ops->destroy) l->ops->destroy(l);
        else mem_free(l->priv);
        mem_free(l);
    }
    mem_free(list->items);
    list->items = NULL;
    list->count = list->cap = 0;
}

PCNN_API pcnn_status pcnn_layer_output_shape(const pcnn_layer *layer, int *channels,
                                             int *height, int *width)
{
    API_ENTRY();
    REQUIRE_PTR(layer);
    /* A (C, H, W) answer for a volume would silently lose its depth. */
    REQUIRE(layer->out.d == 1, PCNN_ERR_SHAPE,
            "layer %d (%s) has a 3D output (depth %d): use pcnn_layer_output_shape3d",
            layer->index, layer->ops->kind, layer->out.d);
    if (channels) *channels = layer->out.c;
    if (height) *height = layer->out.h;
    if (width) *width = layer->out.w;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_layer_output_shape3d(const pcnn_layer *layer, int *channels,
                                               int *depth, int *height, int *width)
{
    API_ENTRY();
    REQUIRE_PTR(layer);
    if (channels) *channels = layer->out.c;
    if (depth) *depth = layer->out.d;
    if (height) *height = layer->out.h;
    if (width) *width = layer->out.w;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_layer_info(const pcnn_layer *layer, int *index, const char **kind)
{
    API_ENTRY();
    REQUIRE_PTR(layer);
    if (index) *index = layer->index;
    if (kind) *kind = layer->ops->kind;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_layer_num_params(const pcnn_layer *layer, size_t *count)
{
    API_ENTRY();
    REQUIRE_PTR(layer);
    REQUIRE_PTR(count);
    *count = layer->num_params;
    return PCNN_OK;
}
