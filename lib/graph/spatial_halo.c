/* Spatial and hybrid parallelism: moving a layer's inputs in and their
 * gradients back -- halo exchanges (all neighbours at once, or one
 * dimension after the other) and shuffles -- and the overlap of a windowed
 * layer's halo with the computation of its interior (spatial.h). */
#include <string.h>

#include "../core/clock.h"
#include "../core/error.h"
#include "spatial.h"

static int samples_of(const box *b) { return box_extent(b, LAYOUT_N); }

/* Post phase f of layer i's dimension-ordered halo: forward, the box grows
 * along phase_dim[f]; back, its gradient returns to the previous box (to
 * the producer's dy from phase 0). */
static pcnn_status phase_post(pcnn_net *net, int i, int f, bool back)
{
    spatial *sp = net->spatial;
    spatial_layer *sl = &sp->layers[i];
    pcnn_layer *in = net->layers.items[i]->inputs[0];
    const spatial_layer *si = &sp->layers[in->index];
    const box *over = &sl->need[0][sp->rank];
    const int tag = 4 * i + (back ? 1 : 0) + 4 * net->layers.count * (f + 1);
    box_move_args a = {.tag = tag, .c = in->out.c, .threads = net->threads,
                       .peers = sl->peers[f], .add = back};
    if (!back) {
        a.src_boxes = f == 0 ? si->have : sl->phase_box[f - 1];
        a.src = f == 0 ? in->y : sl->in_y[0];
        a.src_over = f == 0 ? NULL : over;
        a.dst_boxes = sl->phase_box[f];
        a.dst = sl->in_y[0];
        a.dst_over = over;
    } else {
        a.src_boxes = sl->phase_box[f];
        a.src = sl->in_dy[0];
        a.src_over = over;
        a.dst_boxes = f == 0 ? si->have : sl->phase_box[f - 1];
        a.dst = f == 0 ? in->dy : sl->in_dy[0];
        a.dst_over = f == 0 ? NULL : over;
    }
    return box_move_post_args(sp->mover, &a);
}

/* The phases after the first (forward) or before the last (back). */
static pcnn_status phases_rest(pcnn_net *net, int i, bool back)
{
    const spatial_layer *sl = &net->spatial->layers[i];
    if (!back) {
        for (int f = 1; f < sl->num_phases; f++) {
            TRY(phase_post(net, i, f, false));
            TRY(box_move_finish(net->spatial->mover));
        }
        return PCNN_OK;
    }
    for (int f = sl->num_phases - 2; f >= 0; f--) {
        TRY(phase_post(net, i, f, true));
        TRY(box_move_finish(net->spatial->mover));
    }
    return PCNN_OK;
}

/* A move of layer i's input j took [t0, t1]: a halo exchange when both
 * layers share a distribution (the caller waited all of it: nothing
 * overlaps it yet), else a shuffle. */
static double timed_halo(pcnn_net *net, int i, double t0, double t1, double exposed)
{
    timing_layer(&net->profile, i, TIMING_HALO, t1 - t0);
    timing_layer(&net->profile, i, TIMING_HALO_EXPOSED, exposed);
    trace_span(&net->profile, i, TRACE_HALO, t0, t1);
    return exposed;
}

static void timed_move(pcnn_net *net, int i, int j, double t0, double t1)
{
    const spatial *sp = net->spatial;
    const pcnn_layer *in = net->layers.items[i]->inputs[j];
    const bool halo = memcmp(sp->layers[i].parts, sp->layers[in->index].parts,
                             sizeof sp->layers[i].parts) == 0;
    timing_layer(&net->profile, i, halo ? TIMING_HALO : TIMING_SHUFFLE, t1 - t0);
    if (halo) timing_layer(&net->profile, i, TIMING_HALO_EXPOSED, t1 - t0);
    trace_span(&net->profile, i, halo ? TRACE_HALO : TRACE_SHUFFLE, t0, t1);
}

/* Padding values where input j's box of layer i leaves the sample. */
static void fill_padding(pcnn_net *net, int i, int j)
{
    spatial *sp = net->spatial;
    spatial_layer *sl = &sp->layers[i];
    const pcnn_layer *l = net->layers.items[i], *in = l->inputs[j];
    const box *need = &sl->need[j][sp->rank];
    if (sl->windowed && samples_of(need) > 0) {
        const int ext[LAYOUT_DIMS] = {0, in->out.d, in->out.h, in->out.w};
        bool padded = false;
        for (int k = 1; k < LAYOUT_DIMS; k++)
            padded |= need->lo[k] < 0 || need->hi[k] > ext[k];
        if (padded) {
            const size_t count = (size_t)in->out.c * box_volume(need);
            for (size_t e = 0; e < count; e++) sl->in_y[j][e] = sl->pad;
        }
    }
}

/* Input j of layer i in its box, halo included: padding first where the
 * box leaves the sample, then the points of every rank that holds them. */
pcnn_status spatial_move_in(pcnn_net *net, int i, int j)
{
    spatial *sp = net->spatial;
    spatial_layer *sl = &sp->layers[i];
    const pcnn_layer *in = net->layers.items[i]->inputs[j];
    fill_padding(net, i, j);
    const double t0 = clock_now();
    pcnn_status st;
    if (j == 0 && sl->num_phases > 0) {
        st = phase_post(net, i, 0, false);
        if (st == PCNN_OK) st = box_move_finish(sp->mover);
        if (st == PCNN_OK) st = phases_rest(net, i, false);
    } else {
        st = box_move(sp->mover, 4 * i + 2 * j, in->out.c, sp->layers[in->index].have,
                      sl->need[j], in->y, sl->in_y[j], false, net->threads);
    }
    timed_move(net, i, j, t0, clock_now());
    return st;
}

/* The gradient of input j's halo back to its owners, added to theirs. */
pcnn_status spatial_move_back(pcnn_net *net, int i, int j)
{
    spatial *sp = net->spatial;
    spatial_layer *sl = &sp->layers[i];
    const pcnn_layer *l = net->layers.items[i];
    pcnn_layer *in = l->inputs[j];
    const spatial_layer *si = &sp->layers[in->index];
    if (!l->accumulate_dx[j])
        memset(in->dy, 0, (size_t)in->out.c * box_volume(&si->mine) * sizeof(float));
    const double t0 = clock_now();
    pcnn_status st;
    if (j == 0 && sl->num_phases > 0) {
        st = phase_post(net, i, sl->num_phases - 1, true);
        if (st == PCNN_OK) st = box_move_finish(sp->mover);
        if (st == PCNN_OK) st = phases_rest(net, i, true);
    } else {
        st = box_move(sp->mover, 4 * i + 2 * j + 1, in->out.c, sl->need[j], si->have,
                      sl->in_dy[j], in->dy, true, net->threads);
    }
    timed_move(net, i, j, t0, clock_now());
    return st;
}

/* One region of an overlapped layer, forward: its inputs from the halo
 * buffer, its outputs into the layer's. */
static void region_forward(pcnn_net *net, int i, const spatial_region *g, const run_ctx *ctx)
{
    const spatial *sp = net->spatial;
    const spatial_layer *sl = &sp->layers[i];
    const pcnn_layer *l = net->layers.items[i];
    box in = g->in, out = g->out;
    in.lo[LAYOUT_N] = out.lo[LAYOUT_N] = sl->mine.lo[LAYOUT_N];
    in.hi[LAYOUT_N] = out.hi[LAYOUT_N] = sl->mine.hi[LAYOUT_N];
    box_copy(l->inputs[0]->out.c, &in, sl->in_y[0], &sl->need[0][sp->rank], sp->region_x, &in,
             false, ctx->threads);
    g->twin->ops->forward(g->twin, ctx);
    box_copy(l->out.c, &out, sp->region_y, &out, l->y, &sl->mine, false, ctx->threads);
}

/* Backward: its output gradient from the layer's, its input gradient
 * added into the halo buffer's. */
static void region_backward(pcnn_net *net, int i, const spatial_region *g, const run_ctx *ctx,
                            bool want_dx)
{
    const spatial *sp = net->spatial;
    const spatial_layer *sl = &sp->layers[i];
    const pcnn_layer *l = net->layers.items[i];
    box in = g->in, out = g->out;
    in.lo[LAYOUT_N] = out.lo[LAYOUT_N] = sl->mine.lo[LAYOUT_N];
    in.hi[LAYOUT_N] = out.hi[LAYOUT_N] = sl->mine.hi[LAYOUT_N];
    const int c = l->inputs[0]->out.c;
    box_copy(c, &in, sl->in_y[0], &sl->need[0][sp->rank], sp->region_x, &in, false, ctx->threads);
    box_copy(l->out.c, &out, l->dy, &sl->mine, sp->region_dy, &out, false, ctx->threads);
    float *dx[2] = {want_dx ? sp->region_dx : NULL, NULL};
    g->twin->ops->backward(g->twin, ctx, dx);
    if (want_dx)
        box_copy(c, &in, sp->region_dx, &in, sl->in_dy[0], &sl->need[0][sp->rank], true,
                 ctx->threads);
}

/* Layer i with overlap: post the halo, compute the interior, finish the
 * halo, compute the bands. */
pcnn_status spatial_overlapped_forward(pcnn_net *net, int i, const run_ctx *ctx, double *exposed)
{
    spatial *sp = net->spatial;
    spatial_layer *sl = &sp->layers[i];
    const pcnn_layer *l = net->layers.items[i], *in = l->inputs[0];
    fill_padding(net, i, 0);
    const double t0 = clock_now();
    if (sl->num_phases > 0)
        TRY(phase_post(net, i, 0, false));
    else
        TRY(box_move_post(sp->mover, 4 * i, in->out.c, sp->layers[in->index].have, sl->need[0],
                          in->y, sl->in_y[0], false, net->threads));
    const double t1 = clock_now();
    if (ctx->n > 0) region_forward(net, i, &sl->regions[sl->interior], ctx);
    const double t2 = clock_now();
    pcnn_status st = box_move_finish(sp->mover);
    if (st == PCNN_OK && sl->num_phases > 0) st = phases_rest(net, i, false);
    const double t3 = clock_now();
    *exposed = timed_halo(net, i, t0, t3, (t1 - t0) + (t3 - t2));
    TRY(st);
    for (int r = 0; r < sl->num_regions && ctx->n > 0; r++)
        if (r != sl->interior) region_forward(net, i, &sl->regions[r], ctx);
    return PCNN_OK;
}

/* Backward with overlap: the bands first (the halo's gradients come from
 * them only), post their way back, the interior meanwhile, then finish. */
pcnn_status spatial_overlapped_backward(pcnn_net *net, int i, const run_ctx *ctx,
                                       double *exposed)
{
    spatial *sp = net->spatial;
    spatial_layer *sl = &sp->layers[i];
    pcnn_layer *l = net->layers.items[i], *in = l->inputs[0];
    const bool want_dx = !layer_is_input(in);
    const spatial_layer *si = &sp->layers[in->index];
    if (want_dx)
        memset(sl->in_dy[0], 0,
               (size_t)in->out.c * box_volume(&sl->need[0][sp->rank]) * sizeof(float));
    for (int r = 0; r < sl->num_regions && ctx->n > 0; r++)
        if (r != sl->interior) region_backward(net, i, &sl->regions[r], ctx, want_dx);
    pcnn_status st = PCNN_OK;
    double t0 = 0, t1 = 0;
    if (want_dx) {
        if (!l->accumulate_dx[0])
            memset(in->dy, 0, (size_t)in->out.c * box_volume(&si->mine) * sizeof(float));
        t0 = clock_now();
        if (sl->num_phases > 0)
            st = phase_post(net, i, sl->num_phases - 1, true);
        else
            st = box_move_post(sp->mover, 4 * i + 1, in->out.c, sl->need[0], si->have,
                               sl->in_dy[0], in->dy, true, net->threads);
        t1 = clock_now();
    }
    if (ctx->n > 0) region_backward(net, i, &sl->regions[sl->interior], ctx, want_dx);
    /* The weight gradient: the regions' in a fixed order. */
    for (size_t k = 0; k < l->num_params; k++) {
        float sum = 0.0f;
        for (int r = 0; r < sl->num_regions; r++) sum += ctx->n > 0 ? sl->regions[r].grads[k] : 0.0f;
        l->grads[k] = sum;
    }
    if (want_dx && st == PCNN_OK) {
        const double t2 = clock_now();
        st = box_move_finish(sp->mover);
        if (st == PCNN_OK && sl->num_phases > 0) st = phases_rest(net, i, true);
        const double t3 = clock_now();
        *exposed = timed_halo(net, i, t0, t3, (t1 - t0) + (t3 - t2));
    }
    return st;
}
