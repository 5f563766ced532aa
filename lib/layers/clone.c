/* Local twins of layers (clone.h): the stand-in inputs here, the twin
 * itself by its kind (layer_caps.twin, in the kind's own file). */
#include "clone.h"

#include "layers.h"

/* A stand-in for a twin's input after the first: a layer of the input's
 * shape whose buffers the caller replaces; it never runs. */
static const layer_ops stand_in_ops = {
    .kind = "stand_in",
    .caps = {.split = LAYER_SPLIT_POINTWISE, .cost = LAYER_COST_STREAM},
};

pcnn_status clone_local(layer_list *list, const pcnn_layer *l, const shape *in,
                        pcnn_layer **out, const char *func)
{
    return clone_local_with(list, l, in, (twin_opts){0}, out, func);
}

pcnn_status clone_local_with(layer_list *list, const pcnn_layer *l, const shape *in,
                             twin_opts o, pcnn_layer **out, const char *func)
{
    char name[64];
    if (!l->ops->caps.twin)
        return error_set(PCNN_ERR_UNSUPPORTED, func,
                         "%s cannot run on a box of a spatial distribution, nor right after a "
                         "change of distribution (put it after a layer of its own "
                         "distribution, e.g. after flatten)",
                         layer_name(l, name, sizeof name));
    pcnn_layer *ins[LAYER_MAX_INPUTS] = {NULL};
    TRY(input_add(list, in[0].c, in[0].d, in[0].h, in[0].w, &ins[0], func));
    for (int j = 1; j < l->num_inputs; j++)
        TRY(layer_append(list, &stand_in_ops, &ins[0], 1, in[j], 0, NULL, &ins[j]));
    TRY(l->ops->caps.twin(l, list, ins, o, out, func));
    (*out)->precision = l->precision; /* a twin computes as its original */
    return PCNN_OK;
}
