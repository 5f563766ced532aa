/* The layer contract (layers/layer_caps.h): every kind declares its split
 * and cost class; a kind that does not is refused; each kind's window,
 * input box and twin agree: the twin of a layer on the input box its whole
 * output needs has exactly that output (windowed twins run without
 * padding on the box the window reads). */
#define PCNN_EXPERIMENTAL /* the encoder-decoder kinds (section 9.5) */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../common/expect.h"
#include "layers/clone.h"
#include "layers/layers.h"

#define F "test_layer_caps"

/* The twin of l on the input box its whole output needs. */
static void check_twin(const pcnn_layer *l)
{
    if (!l->ops->caps.twin) return;
    const int lo[3] = {0, 0, 0}, hi[3] = {l->out.d, l->out.h, l->out.w};
    shape in[LAYER_MAX_INPUTS];
    for (int j = 0; j < l->num_inputs; j++) {
        int nlo[3], nhi[3];
        layer_need_box(l, j, lo, hi, nlo, nhi);
        in[j] = (shape){l->inputs[j]->out.c, nhi[0] - nlo[0], nhi[1] - nlo[1], nhi[2] - nlo[2]};
    }
    layer_list list = {0};
    pcnn_layer *t = NULL;
    const pcnn_status st = clone_local(&list, l, in, &t, F);
    EXPECT(st == PCNN_OK, "layer %d (%s): twin status %d", l->index, l->ops->kind, (int)st);
    if (st == PCNN_OK) {
        EXPECT(t->ops == l->ops, "layer %d: twin of kind %s", l->index, t->ops->kind);
        EXPECT(memcmp(&t->out, &l->out, sizeof t->out) == 0 && t->num_params == l->num_params,
               "layer %d (%s): twin out %dx%dx%dx%d, %zu params; original %dx%dx%dx%d, %zu",
               l->index, l->ops->kind, t->out.c, t->out.d, t->out.h, t->out.w, t->num_params,
               l->out.c, l->out.d, l->out.h, l->out.w, l->num_params);
    }
    layer_list_destroy(&list);
}

static void check_list(const layer_list *list)
{
    for (int i = 0; i < list->count; i++) {
        const pcnn_layer *l = list->items[i];
        const layer_caps *c = &l->ops->caps;
        EXPECT(c->split != LAYER_SPLIT_UNDECLARED && c->cost != LAYER_COST_UNDECLARED,
               "%s: split %d cost %d", l->ops->kind, (int)c->split, (int)c->cost);
        EXPECT((c->cost == LAYER_COST_NONE) == layer_is_input(l), "%s: cost class %d",
               l->ops->kind, (int)c->cost);
        layer_window w;
        EXPECT(layer_window_of(l, &w) == (c->split == LAYER_SPLIT_WINDOWED), "%s: window",
               l->ops->kind);
        EXPECT(!c->weights_alone || l->num_params > 0, "%s: weights alone without weights",
               l->ops->kind);
        check_twin(l);
    }
}

int main(void)
{
    /* 2D: every 2D kind once. */
    layer_list a = {0};
    pcnn_layer *x, *c, *mp, *ap, *r, *lr, *bn, *sum, *dr, *ps, *gap;
    EXPECT(input_add(&a, 4, 1, 12, 10, &x, F) == PCNN_OK, "input");
    EXPECT(conv2d_add(&a, x, 8, 3, 1, 1, 1, &c, F) == PCNN_OK, "conv2d");
    EXPECT(maxpool2d_add(&a, c, 3, 2, 1, &mp, F) == PCNN_OK, "maxpool2d");
    EXPECT(avgpool2d_add(&a, mp, 3, 1, 1, &ap, F) == PCNN_OK, "avgpool2d");
    EXPECT(relu_add(&a, ap, &r, F) == PCNN_OK, "relu");
    EXPECT(leaky_relu_add(&a, r, 0.25f, &lr, F) == PCNN_OK, "leaky_relu");
    EXPECT(batchnorm_add(&a, lr, 1e-5f, 0.1f, &bn, F) == PCNN_OK, "batchnorm");
    EXPECT(residual_add(&a, bn, r, 0.5f, &sum, F) == PCNN_OK, "add");
    EXPECT(dropout_add(&a, sum, 0.5f, &dr, F) == PCNN_OK, "dropout");
    EXPECT(pixel_shuffle_add(&a, dr, 2, &ps, F) == PCNN_OK, "pixel_shuffle");
    EXPECT(global_avgpool_add(&a, ps, &gap, F) == PCNN_OK, "global_avgpool");
    check_list(&a);

    /* The answers of a few kinds, as configured. */
    layer_window w;
    EXPECT(layer_window_of(c, &w) && w.kernel[0] == 1 && w.kernel[1] == 3 && w.kernel[2] == 3 &&
               w.padding[0] == 0 && w.padding[1] == 1 && w.stride[2] == 1 && w.pad_value == 0.0f,
           "conv2d window");
    EXPECT(layer_window_of(mp, &w) && w.stride[1] == 2 && isinf(w.pad_value) && w.pad_value < 0,
           "maxpool2d window");
    EXPECT(!layer_window_of(r, &w) && layer_splits(r) && !layer_splits(gap), "relu, gap");
    EXPECT(c->ops->caps.in_place && c->ops->caps.weights_alone && !mp->ops->caps.in_place,
           "conv2d in place, weights alone");
    EXPECT(layer_recomputable(ap) && !layer_recomputable(mp), "pooling recomputable");
    int lo[3] = {0, 2, 3}, hi[3] = {1, 4, 5}, nlo[3], nhi[3];
    layer_need_box(mp, 0, lo, hi, nlo, nhi); /* k 3 s 2 p 1: [2 * 2 - 1, 3 * 2 - 1 + 3) */
    EXPECT(nlo[0] == 0 && nhi[0] == 1 && nlo[1] == 3 && nhi[1] == 8 && nlo[2] == 5 && nhi[2] == 10,
           "maxpool2d need box %d..%d %d..%d %d..%d", nlo[0], nhi[0], nlo[1], nhi[1], nlo[2],
           nhi[2]);
    layer_need_box(gap, 0, lo, hi, nlo, nhi); /* whole samples */
    EXPECT(nlo[1] == 0 && nhi[1] == ps->out.h && nhi[2] == ps->out.w, "gap need box");
    layer_need_box(sum, 1, lo, hi, nlo, nhi); /* pointwise */
    EXPECT(nlo[1] == 2 && nhi[1] == 4 && nlo[2] == 3 && nhi[2] == 5, "add need box");

    /* 3D, flatten and dense. */
    layer_list b = {0};
    pcnn_layer *v, *c3, *m3, *a3, *fl, *d;
    EXPECT(input_add(&b, 2, 6, 7, 8, &v, F) == PCNN_OK, "input 3D");
    EXPECT(conv3d_add(&b, v, 3, 3, 1, 1, 1, &c3, F) == PCNN_OK, "conv3d");
    EXPECT(maxpool3d_add(&b, c3, 2, 2, 0, &m3, F) == PCNN_OK, "maxpool3d");
    EXPECT(avgpool3d_add(&b, m3, 3, 1, 1, &a3, F) == PCNN_OK, "avgpool3d");
    EXPECT(flatten_add(&b, a3, &fl, F) == PCNN_OK, "flatten");
    EXPECT(dense_add(&b, fl, 5, 1, &d, F) == PCNN_OK, "dense");
    check_list(&b);
    EXPECT(layer_window_of(c3, &w) && w.kernel[0] == 3 && w.padding[0] == 1, "conv3d window");
    EXPECT(fl->ops->caps.folds_into_dense && !d->ops->caps.folds_into_dense, "flatten folds");

    /* The encoder-decoder kinds: a concat of three, sigmoid and tanh
     * (pointwise, with twins), upsampling and transposed convolutions
     * (whole samples, priced by their adjoint's window). */
    layer_list e = {0};
    pcnn_layer *ex, *ec, *sg, *th, *cat, *up, *ct, *ev, *up3, *ct3;
    EXPECT(input_add(&e, 2, 1, 6, 5, &ex, F) == PCNN_OK, "input");
    EXPECT(conv2d_add(&e, ex, 3, 3, 1, 1, 1, &ec, F) == PCNN_OK, "conv2d");
    EXPECT(sigmoid_add(&e, ec, &sg, F) == PCNN_OK, "sigmoid");
    EXPECT(tanh_add(&e, ec, &th, F) == PCNN_OK, "tanh");
    pcnn_layer *const three[3] = {sg, th, ec};
    EXPECT(concat_add(&e, three, 3, &cat, F) == PCNN_OK, "concat");
    EXPECT(upsample2d_add(&e, cat, 2, PCNN_UPSAMPLE_LINEAR, &up, F) == PCNN_OK, "upsample2d");
    EXPECT(conv_transpose2d_add(&e, up, 4, 3, 2, 1, 1, 1, &ct, F) == PCNN_OK, "convt2d");
    layer_list e3 = {0};
    EXPECT(input_add(&e3, 1, 3, 4, 5, &ev, F) == PCNN_OK, "input 3D");
    EXPECT(upsample3d_add(&e3, ev, 2, PCNN_UPSAMPLE_NEAREST, &up3, F) == PCNN_OK, "upsample3d");
    EXPECT(conv_transpose3d_add(&e3, up3, 2, 2, 2, 0, 0, 0, &ct3, F) == PCNN_OK, "convt3d");
    check_list(&e);
    check_list(&e3);
    EXPECT(layer_splits(cat) && layer_splits(sg) && !layer_splits(up) && !layer_splits(ct),
           "encoder-decoder splits");
    EXPECT(cat->out.c == 9 && ct->out.h == 24 && ct->out.w == 20 && ct3->out.d == 12,
           "concat channels %d, convt2d %dx%d, convt3d depth %d", cat->out.c, ct->out.h,
           ct->out.w, ct3->out.d);
    ct->ops->caps.window(ct, &w);
    EXPECT(w.kernel[0] == 1 && w.kernel[1] == 3 && w.stride[2] == 2 && w.padding[1] == 1,
           "convt2d's adjoint window");
    layer_need_box(cat, 2, lo, hi, nlo, nhi); /* pointwise, input 2 of 3 */
    EXPECT(nlo[1] == 2 && nhi[1] == 4 && nlo[2] == 3 && nhi[2] == 5, "concat need box");
    layer_list_destroy(&e);
    layer_list_destroy(&e3);

    /* A kind that declares nothing is refused before anything asks it. */
    static const layer_ops undeclared = {.kind = "undeclared"};
    pcnn_layer *u = NULL;
    EXPECT(layer_append(&b, &undeclared, &d, 1, d->out, 0, NULL, &u) == PCNN_ERR_INTERNAL &&
               u == NULL,
           "an undeclared kind is refused");
    static const layer_ops windowless = {
        .kind = "windowless",
        .caps = {.split = LAYER_SPLIT_WINDOWED, .cost = LAYER_COST_STREAM}};
    EXPECT(layer_append(&b, &windowless, &d, 1, d->out, 0, NULL, &u) == PCNN_ERR_INTERNAL,
           "a windowed kind without its window is refused");

    layer_list_destroy(&a);
    layer_list_destroy(&b);
    if (failures) printf("%d failures\n", failures);
    else printf("layer caps: every kind declares, windows, boxes and twins agree\n");
    return failures != 0;
}
