/* Local twins of layers (clone.h). */
#include "clone.h"

#include <math.h>
#include <string.h>

#include "batchnorm.h"
#include "conv2d.h"
#include "dense.h"
#include "layers.h"

static bool kind_is(const pcnn_layer *l, const char *kind) { return strcmp(l->ops->kind, kind) == 0; }

bool clone_window(const pcnn_layer *l, int *kernel, int *stride, int *padding, bool *volume)
{
    *volume = false;
    if (kind_is(l, "conv3d")) {
        int cout;
        bool bias;
        conv3d_config(l, &cout, kernel, stride, padding, &bias);
        *volume = true;
        return true;
    }
    if (kind_is(l, "maxpool3d") || kind_is(l, "avgpool3d")) {
        pool3d_config(l, kernel, stride, padding);
        *volume = true;
        return true;
    }
    if (kind_is(l, "conv2d")) {
        const conv_priv *p = l->priv;
        *kernel = p->k;
        *stride = p->stride;
        *padding = p->pad;
        return true;
    }
    if (kind_is(l, "maxpool2d") || kind_is(l, "avgpool2d")) {
        pool2d_config(l, kernel, stride, padding);
        return true;
    }
    return false;
}

float clone_pad_value(const pcnn_layer *l)
{
    return kind_is(l, "maxpool2d") || kind_is(l, "maxpool3d") ? -INFINITY : 0.0f;
}

bool clone_splittable(const pcnn_layer *l)
{
    static const char *const kinds[] = {"input",     "conv2d",    "maxpool2d", "avgpool2d",
                                        "conv3d",    "maxpool3d", "avgpool3d", "relu",
                                        "leaky_relu", "batchnorm", "add",       "dropout"};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (kind_is(l, kinds[i])) return true;
    return false;
}

pcnn_status clone_local(layer_list *list, const pcnn_layer *l, const shape *in,
                        pcnn_layer **out, const char *func)
{
    return clone_local_with(list, l, in, (clone_opts){0}, out, func);
}

pcnn_status clone_local_with(layer_list *list, const pcnn_layer *l, const shape *in,
                             clone_opts o, pcnn_layer **out, const char *func)
{
    char name[64];
    pcnn_layer *a = NULL, *b = NULL;
    TRY(input_add(list, in[0].c, in[0].d, in[0].h, in[0].w, &a, func));
    if (l->num_inputs == 2) {
        /* A stand-in for the second input: a layer of the same shape whose
         * buffers the caller replaces (it never runs). */
        TRY(relu_add(list, a, &b, func));
    }
    int k, s, p;
    if (kind_is(l, "conv2d")) {
        const conv_priv *c = l->priv;
        return conv2d_add(list, a, c->cout, c->k, c->stride, o.keep_padding ? c->pad : 0,
                          c->bias && !o.no_bias, out, func);
    }
    if (kind_is(l, "maxpool2d") || kind_is(l, "avgpool2d")) {
        pool2d_config(l, &k, &s, &p);
        return kind_is(l, "maxpool2d") ? maxpool2d_add(list, a, k, s, 0, out, func)
                                       : avgpool2d_add(list, a, k, s, 0, out, func);
    }
    if (kind_is(l, "conv3d")) {
        int cout;
        bool bias;
        conv3d_config(l, &cout, &k, &s, &p, &bias);
        return conv3d_add(list, a, cout, k, s, o.keep_padding ? p : 0, bias && !o.no_bias, out,
                          func);
    }
    if (kind_is(l, "maxpool3d") || kind_is(l, "avgpool3d")) {
        pool3d_config(l, &k, &s, &p);
        return kind_is(l, "maxpool3d") ? maxpool3d_add(list, a, k, s, 0, out, func)
                                       : avgpool3d_add(list, a, k, s, 0, out, func);
    }
    if (kind_is(l, "relu")) return relu_add(list, a, out, func);
    if (kind_is(l, "leaky_relu")) return leaky_relu_add(list, a, activation_slope(l), out, func);
    if (kind_is(l, "batchnorm")) {
        float eps, momentum;
        batchnorm_config(l, &eps, &momentum);
        return batchnorm_add(list, a, eps, momentum, out, func);
    }
    if (kind_is(l, "add")) return residual_add(list, a, b, residual_add_scale(l), out, func);
    if (kind_is(l, "flatten")) return flatten_add(list, a, out, func);
    if (kind_is(l, "global_avgpool")) return global_avgpool_add(list, a, out, func);
    if (kind_is(l, "dense")) {
        const dense_shape d = dense_get_shape(l);
        return dense_add(list, a, d.out, d.bias, out, func);
    }
    return error_set(PCNN_ERR_UNSUPPORTED, func,
                     "%s cannot run on a box of a spatial distribution, nor right after a "
                     "change of distribution (put it after a layer of its own distribution, "
                     "e.g. after flatten)", layer_name(l, name, sizeof name));
}
