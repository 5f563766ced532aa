/* Spatial and hybrid parallelism: a convolution run on its input's block
 * in place (spatial.h, in_place).
 *
 * A convolution is linear in its input: its output is the twin's on the
 * block alone (the halo read as zeros, through the layer's own padding)
 * plus, on the border cells, the cells' on the halo alone (this rank's
 * points read as zeros, no bias).  The weight gradient splits the same
 * way, and the input gradient of this rank's block is the twin's, plus
 * what the neighbours' cells send back.  So only the halo is staged and
 * moved: the block is never copied, forward or back, which on a large
 * plane costs as much as a layer (a copy of 30 MB in each direction). */
#include "../core/clock.h"
#include "../core/error.h"
#include "spatial.h"

/* The halo of layer i's input into the staging, this rank's points left
 * where they are (the cells read them as zeros). */
static pcnn_status post_halo(pcnn_net *net, int i)
{
    spatial *sp = net->spatial;
    spatial_layer *sl = &sp->layers[i];
    const pcnn_layer *in = net->layers.items[i]->inputs[0];
    spatial_fill_padding(net, i, 0);
    return box_move_post_args(sp->mover, &(box_move_args){
        .tag = 4 * i, .c = in->out.c, .threads = net->threads,
        .src_boxes = sp->layers[in->index].have, .dst_boxes = sl->need[0], .src = in->y,
        .dst = sl->in_y[0], .skip_self = true, .bf16 = spatial_halo_bf16(net, i)});
}

/* The halo's input gradient back to its owners, added to theirs. */
static pcnn_status post_back(pcnn_net *net, int i)
{
    spatial *sp = net->spatial;
    spatial_layer *sl = &sp->layers[i];
    pcnn_layer *in = net->layers.items[i]->inputs[0];
    return box_move_post_args(sp->mover, &(box_move_args){
        .tag = 4 * i + 1, .c = in->out.c, .threads = net->threads, .src_boxes = sl->need[0],
        .dst_boxes = sp->layers[in->index].have, .src = sl->in_dy[0], .dst = in->dy,
        .add = true, .skip_self = true});
}

pcnn_status spatial_in_place_forward(pcnn_net *net, int i, const run_ctx *ctx, double *exposed)
{
    spatial *sp = net->spatial;
    spatial_layer *sl = &sp->layers[i];
    const bool overlap = net->opt.halo_overlap;
    const double t0 = clock_now();
    pcnn_status st = post_halo(net, i);
    if (st == PCNN_OK && !overlap) st = box_move_finish(sp->mover);
    const double t1 = clock_now();
    if (st == PCNN_OK && ctx->n > 0) sl->twin->ops->forward(sl->twin, ctx);
    const double t2 = clock_now();
    if (st == PCNN_OK && overlap) st = box_move_finish(sp->mover);
    const double t3 = clock_now();
    *exposed = (t1 - t0) + (t3 - t2);
    spatial_timed_halo(net, i, t0, overlap ? t3 : t1, *exposed);
    sp->in_y_owner[0] = st == PCNN_OK ? i : -1;
    TRY(st);
    for (int r = 0; r < sl->num_regions && ctx->n > 0; r++)
        spatial_cell_forward(net, i, &sl->regions[r], ctx, true);
    return PCNN_OK;
}

/* Backward: the halo again if a later layer took the staging; the cells
 * (the halo's share of the weight gradient, and the halo's input
 * gradient, posted back); the twin meanwhile, writing this rank's input
 * gradient in place; then the neighbours' shares are added to it. */
pcnn_status spatial_in_place_backward(pcnn_net *net, int i, const run_ctx *ctx, double *exposed)
{
    spatial *sp = net->spatial;
    spatial_layer *sl = &sp->layers[i];
    pcnn_layer *l = net->layers.items[i], *in = l->inputs[0];
    const bool want_dx = !layer_is_input(in), overlap = net->opt.halo_overlap;
    const spatial_layer *si = &sp->layers[in->index];
    const box *need = &sl->need[0][sp->rank];
    *exposed = 0.0;
    pcnn_status st = PCNN_OK;
    if (sp->in_y_owner[0] != i) {
        const double t0 = clock_now();
        st = post_halo(net, i);
        if (st == PCNN_OK) st = box_move_finish(sp->mover);
        const double t1 = clock_now();
        spatial_timed_halo(net, i, t0, t1, t1 - t0);
        *exposed += t1 - t0;
        sp->in_y_owner[0] = st == PCNN_OK ? i : -1;
        TRY(st);
    }
    box halo[2 * LAYOUT_DIMS];
    const int slabs = want_dx ? box_subtract(need, &si->have[sp->rank], halo) : 0;
    for (int k = 0; k < slabs; k++)
        box_fill(in->out.c, &halo[k], sl->in_dy[0], need, 0.0f, ctx->threads);
    for (int r = 0; r < sl->num_regions && ctx->n > 0; r++)
        spatial_cell_backward(net, i, &sl->regions[r], ctx, halo, slabs, true);
    /* Overlapped: posted before the twin computes; else after (the twin
     * writes this rank's points of dx, the neighbours' shares are added). */
    double t0 = 0.0, t1 = 0.0;
    if (want_dx && overlap) {
        t0 = clock_now();
        TRY(post_back(net, i));
        t1 = clock_now();
    }
    if (ctx->n > 0) {
        float *dx[2] = {want_dx ? in->dy : NULL, NULL};
        sl->twin->ops->backward(sl->twin, ctx, dx);
        const size_t weights = sl->num_regions > 0 ? sl->regions[0].twin->num_params : 0;
        for (int r = 0; r < sl->num_regions; r++) {
            const float *g = sl->regions[r].grads;
            for (size_t k = 0; k < weights; k++) l->grads[k] += g[k];
        }
    } else {
        for (size_t k = 0; k < l->num_params; k++) l->grads[k] = 0.0f;
    }
    if (want_dx) {
        const double t2 = clock_now();
        if (!overlap) {
            t0 = t2;
            TRY(post_back(net, i));
        }
        st = box_move_finish(sp->mover);
        const double t3 = clock_now();
        const double waited = overlap ? (t1 - t0) + (t3 - t2) : t3 - t2;
        spatial_timed_halo(net, i, t0, t3, waited);
        *exposed += waited;
    }
    return st;
}
