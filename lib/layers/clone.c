/* Local twins of layers (clone.h): the stand-in inputs here, the twin
 * itself by its kind (layer_caps.twin, in the kind's own file). */
#include "clone.h"

#include "layers.h"

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
    pcnn_layer *ins[2] = {NULL, NULL};
    TRY(input_add(list, in[0].c, in[0].d, in[0].h, in[0].w, &ins[0], func));
    if (l->num_inputs == 2) {
        /* A stand-in for the second input: a layer of the same shape whose
         * buffers the caller replaces (it never runs). */
        TRY(relu_add(list, ins[0], &ins[1], func));
    }
    return l->ops->caps.twin(l, list, ins, o, out, func);
}
