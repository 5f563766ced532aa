/* Spatial and hybrid parallelism: moving a layer's inputs in and their
 * gradients back -- halo exchanges (all neighbours at once, or one
 * dimension after the other) and shuffles -- and the overlap of a windowed
 * layer's halo with the computation of its interior (spatial.h). */
#include <string.h>

#include "../core/clock.h"
#include "../core/error.h"
#include "spatial.h"

static int samples_of(const box *b) { return box_extent(b, LAYOUT_N); }

bool spatial_halo_bf16(const pcnn_net *net, int i)
{
    const layer_cost_class cost = net->layers.items[i]->ops->caps.cost;
    /* The layer's own decision: a layer kept fp32 in a bf16 network
     * (pcnn_layer_set_precision) receives its halo in fp32. */
    return net->layers.items[i]->decision.precision == 1 &&
           (cost == LAYER_COST_CONV2D || cost == LAYER_COST_CONV3D);
}

/* Post phase f of layer i's dimension-ordered halo: forward, the box grows
 * along phase_dim[f]; back, its gradient returns to the previous box (to
 * the producer's dy from phase 0). */
static pcnn_status phase_post_deferred(pcnn_net *net, int i, int f, bool back, bool defer)
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
        a.defer_self = defer;
        a.bf16 = spatial_halo_bf16(net, i);
    } else {
        a.src_boxes = sl->phase_box[f];
        a.src = sl->in_dy[0];
        a.src_over = over;
        a.dst_boxes = f == 0 ? si->have : sl->phase_box[f - 1];
        a.dst = f == 0 ? in->dy : sl->in_dy[0];
        a.dst_over = f == 0 ? NULL : over;
        a.overwrite = f == 0 && !net->layers.items[i]->accumulate_dx[0];
    }
    return box_move_post_args(sp->mover, &a);
}

static pcnn_status phase_post(pcnn_net *net, int i, int f, bool back)
{
    return phase_post_deferred(net, i, f, back, false);
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

double spatial_timed_halo(pcnn_net *net, int i, double t0, double t1, double exposed)
{
    timing_layer(&net->profile, i, TIMING_HALO, t1 - t0);
    timing_layer(&net->profile, i, TIMING_HALO_EXPOSED, exposed);
    trace_span(&net->profile, i, TRACE_HALO, t0, t1);
    return exposed;
}

/* A move of layer i's input j took [t0, t1]: a halo exchange when both
 * layers share a distribution (the caller waited all of it: nothing
 * overlaps it yet), else a shuffle. */
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

/* Padding values where input j's box of layer i leaves the sample: only
 * those points (the move writes every other one). */
void spatial_fill_padding(pcnn_net *net, int i, int j)
{
    spatial *sp = net->spatial;
    spatial_layer *sl = &sp->layers[i];
    const pcnn_layer *l = net->layers.items[i], *in = l->inputs[j];
    const box *need = &sl->need[j][sp->rank];
    if (!sl->windowed || samples_of(need) == 0) return;
    const int ext[LAYOUT_DIMS] = {0, in->out.d, in->out.h, in->out.w};
    bool padded = false;
    for (int k = 1; k < LAYOUT_DIMS; k++)
        padded |= need->lo[k] < 0 || need->hi[k] > ext[k];
    if (!padded) return;
    const int nd = box_extent(need, LAYOUT_D), nh = box_extent(need, LAYOUT_H),
              nw = box_extent(need, LAYOUT_W);
    const int d0 = need->lo[LAYOUT_D], h0 = need->lo[LAYOUT_H], w0 = need->lo[LAYOUT_W];
    int left = -w0, right = need->hi[LAYOUT_W] - ext[LAYOUT_W];
    left = left < 0 ? 0 : left > nw ? nw : left;
    right = right < 0 ? 0 : right > nw ? nw : right;
    const long rows = (long)in->out.c * samples_of(need) * nd * nh;
    float *y = sl->in_y[j];
    const float pad = sl->win.pad_value;
#pragma omp parallel for num_threads(net->threads) if (rows * nw > 262144) schedule(static)
    for (long r = 0; r < rows; r++) {
        const int h = (int)(r % nh) + h0, d = (int)((r / nh) % nd) + d0;
        float *row = y + (size_t)r * (size_t)nw;
        const bool whole = d < 0 || d >= ext[LAYOUT_D] || h < 0 || h >= ext[LAYOUT_H];
        for (int w = 0; w < (whole ? nw : left); w++) row[w] = pad;
        for (int w = whole ? nw : nw - right; w < nw; w++) row[w] = pad;
    }
}

void spatial_note_staged(spatial *sp, int i, int j, pcnn_status st)
{
    if (!sp->layers[i].keeps_input) sp->in_y_owner[j] = st == PCNN_OK ? i : -1;
}

/* Input j of layer i in its box, halo included: padding first where the
 * box leaves the sample, then the points of every rank that holds them. */
pcnn_status spatial_move_in(pcnn_net *net, int i, int j)
{
    spatial *sp = net->spatial;
    spatial_layer *sl = &sp->layers[i];
    const pcnn_layer *in = net->layers.items[i]->inputs[j];
    spatial_fill_padding(net, i, j);
    const double t0 = clock_now();
    pcnn_status st;
    if (j == 0 && sl->num_phases > 0) {
        st = phase_post(net, i, 0, false);
        if (st == PCNN_OK) st = box_move_finish(sp->mover);
        if (st == PCNN_OK) st = phases_rest(net, i, false);
    } else {
        st = box_move_post_args(sp->mover, &(box_move_args){
            .tag = 4 * i + 2 * j, .c = in->out.c, .threads = net->threads,
            .src_boxes = sp->layers[in->index].have, .dst_boxes = sl->need[j], .src = in->y,
            .dst = sl->in_y[j], .bf16 = spatial_halo_bf16(net, i)});
        if (st == PCNN_OK) st = box_move_finish(sp->mover);
    }
    timed_move(net, i, j, t0, clock_now());
    spatial_note_staged(sp, i, j, st);
    return st;
}

/* Input j of layer i again, for its backward (the staging is shared,
 * spatial.h): its own points copied while the halo travels, which is all
 * that is timed as exposed. */
pcnn_status spatial_restage(pcnn_net *net, int i, int j)
{
    spatial *sp = net->spatial;
    spatial_layer *sl = &sp->layers[i];
    const pcnn_layer *in = net->layers.items[i]->inputs[j];
    spatial_fill_padding(net, i, j);
    const double t0 = clock_now();
    pcnn_status st;
    if (j == 0 && sl->num_phases > 0)
        st = phase_post_deferred(net, i, 0, false, true);
    else
        st = box_move_post_args(sp->mover, &(box_move_args){
            .tag = 4 * i + 2 * j, .c = in->out.c, .threads = net->threads,
            .src_boxes = sp->layers[in->index].have, .dst_boxes = sl->need[j], .src = in->y,
            .dst = sl->in_y[j], .defer_self = true, .bf16 = spatial_halo_bf16(net, i)});
    const double t1 = clock_now();
    box_move_copy_self(sp->mover);
    const double t2 = clock_now();
    if (st == PCNN_OK) st = box_move_finish(sp->mover);
    if (st == PCNN_OK && j == 0 && sl->num_phases > 0) st = phases_rest(net, i, false);
    const double t3 = clock_now();
    const bool halo = memcmp(sl->parts, sp->layers[in->index].parts, sizeof sl->parts) == 0;
    if (halo) {
        spatial_timed_halo(net, i, t0, t3, (t1 - t0) + (t3 - t2));
    } else {
        timing_layer(&net->profile, i, TIMING_SHUFFLE, t3 - t0);
        trace_span(&net->profile, i, TRACE_SHUFFLE, t0, t3);
    }
    spatial_note_staged(sp, i, j, st);
    return st;
}

/* The gradient of input j's halo back to its owners, added to theirs. */
pcnn_status spatial_move_back(pcnn_net *net, int i, int j)
{
    spatial *sp = net->spatial;
    spatial_layer *sl = &sp->layers[i];
    const pcnn_layer *l = net->layers.items[i];
    pcnn_layer *in = l->inputs[j];
    const double t0 = clock_now();
    pcnn_status st;
    if (j == 0 && sl->num_phases > 0) {
        st = phase_post(net, i, sl->num_phases - 1, true);
        if (st == PCNN_OK) st = box_move_finish(sp->mover);
        if (st == PCNN_OK) st = phases_rest(net, i, true);
    } else {
        st = box_move_post_args(sp->mover, &(box_move_args){
            .tag = 4 * i + 2 * j + 1, .c = in->out.c, .threads = net->threads,
            .src_boxes = sl->need[j], .dst_boxes = sp->layers[in->index].have,
            .src = sl->in_dy[j], .dst = in->dy, .add = true, .overwrite = !l->accumulate_dx[j]});
        if (st == PCNN_OK) st = box_move_finish(sp->mover);
    }
    timed_move(net, i, j, t0, clock_now());
    return st;
}

/* A cell's boxes with this step's samples. */
static void cell_boxes(const spatial_layer *sl, const spatial_region *g, box *in, box *out)
{
    *in = g->in;
    *out = g->out;
    in->lo[LAYOUT_N] = out->lo[LAYOUT_N] = sl->mine.lo[LAYOUT_N];
    in->hi[LAYOUT_N] = out->hi[LAYOUT_N] = sl->mine.hi[LAYOUT_N];
}

/* A cell's input box from the halo buffer into the region's; halo_only:
 * this rank's own points (its block of the input) read as zeros. */
static void cell_input(const pcnn_net *net, int i, const box *in, bool halo_only, int threads)
{
    const spatial *sp = net->spatial;
    const spatial_layer *sl = &sp->layers[i];
    const pcnn_layer *src = net->layers.items[i]->inputs[0];
    const int c = src->out.c;
    box_copy(c, in, sl->in_y[0], &sl->need[0][sp->rank], sp->region_x, in, false, threads);
    box own;
    if (halo_only && box_intersect(in, &sp->layers[src->index].have[sp->rank], &own))
        box_fill(c, &own, sp->region_x, in, 0.0f, threads);
}

/* A border cell, forward, once the halo is in: its inputs from the halo
 * buffer, its outputs over the layer's (which the whole box's twin
 * computed from a stale halo), or added to them (halo_only: the twin read
 * zeros there). */
void spatial_cell_forward(pcnn_net *net, int i, const spatial_region *g, const run_ctx *ctx,
                          bool halo_only)
{
    const spatial *sp = net->spatial;
    const spatial_layer *sl = &sp->layers[i];
    const pcnn_layer *l = net->layers.items[i];
    box in, out;
    cell_boxes(sl, g, &in, &out);
    cell_input(net, i, &in, halo_only, ctx->threads);
    g->twin->ops->forward(g->twin, ctx);
    box_copy(l->out.c, &out, sp->region_y, &out, l->y, &sl->mine, halo_only, ctx->threads);
}

/* Backward of a border cell, before the halo's gradient leaves: its input
 * gradient on the halo (`halo`, the slabs of the input box this rank does
 * not hold) added into the halo buffer's, which holds zeros there.  Only
 * border cells read the halo, so that part is then complete.  Its weight
 * gradient stays in the cell's grads (halo_only: the halo's share). */
void spatial_cell_backward(pcnn_net *net, int i, const spatial_region *g, const run_ctx *ctx,
                           const box *halo, int slabs, bool halo_only)
{
    const spatial *sp = net->spatial;
    const spatial_layer *sl = &sp->layers[i];
    const pcnn_layer *l = net->layers.items[i];
    box in, out;
    cell_boxes(sl, g, &in, &out);
    const int c = l->inputs[0]->out.c;
    cell_input(net, i, &in, halo_only, ctx->threads);
    box_copy(l->out.c, &out, l->dy, &sl->mine, sp->region_dy, &out, false, ctx->threads);
    float *dx[2] = {slabs > 0 ? sp->region_dx : NULL, NULL};
    g->twin->ops->backward(g->twin, ctx, dx);
    for (int k = 0; k < slabs; k++) {
        box part;
        if (box_intersect(&halo[k], &in, &part))
            box_copy(c, &part, sp->region_dx, &in, sl->in_dy[0], &sl->need[0][sp->rank], true,
                     ctx->threads);
    }
}

/* Layer i with overlap: post the halo; the whole box's twin meanwhile, on
 * whatever the halo buffer held (only the border cells' outputs read the
 * halo, and every output point is computed from its own window alone);
 * finish the halo; the border cells again, over the layer's output.  No
 * copy of the box: the price is the border cells computed twice. */
pcnn_status spatial_overlapped_forward(pcnn_net *net, int i, const run_ctx *ctx, double *exposed)
{
    spatial *sp = net->spatial;
    spatial_layer *sl = &sp->layers[i];
    const pcnn_layer *l = net->layers.items[i], *in = l->inputs[0];
    spatial_fill_padding(net, i, 0);
    const double t0 = clock_now();
    if (sl->num_phases > 0)
        TRY(phase_post_deferred(net, i, 0, false, true));
    else
        TRY(box_move_post_args(sp->mover, &(box_move_args){
            .tag = 4 * i, .c = in->out.c, .threads = net->threads,
            .src_boxes = sp->layers[in->index].have, .dst_boxes = sl->need[0], .src = in->y,
            .dst = sl->in_y[0], .defer_self = true, .bf16 = spatial_halo_bf16(net, i)}));
    const double t1 = clock_now();
    box_move_copy_self(sp->mover); /* this rank's own points while the halo travels */
    if (ctx->n > 0) sl->twin->ops->forward(sl->twin, ctx);
    const double t2 = clock_now();
    pcnn_status st = box_move_finish(sp->mover);
    if (st == PCNN_OK && sl->num_phases > 0) st = phases_rest(net, i, false);
    const double t3 = clock_now();
    *exposed = spatial_timed_halo(net, i, t0, t3, (t1 - t0) + (t3 - t2));
    spatial_note_staged(sp, i, 0, st);
    TRY(st);
    for (int r = 0; r < sl->num_regions && ctx->n > 0; r++)
        spatial_cell_forward(net, i, &sl->regions[r], ctx, false);
    return PCNN_OK;
}

/* Backward with overlap: the border cells' input gradients on the halo
 * first, post them back, the whole box's twin meanwhile (the weight
 * gradient, and the input gradient of every point this rank holds, which
 * finish adds to its owner's), then finish. */
pcnn_status spatial_overlapped_backward(pcnn_net *net, int i, const run_ctx *ctx,
                                       double *exposed)
{
    spatial *sp = net->spatial;
    spatial_layer *sl = &sp->layers[i];
    pcnn_layer *l = net->layers.items[i], *in = l->inputs[0];
    const bool want_dx = !layer_is_input(in);
    const spatial_layer *si = &sp->layers[in->index];
    const box *need = &sl->need[0][sp->rank];
    box halo[2 * LAYOUT_DIMS];
    const int slabs = want_dx ? box_subtract(need, &si->have[sp->rank], halo) : 0;
    for (int k = 0; k < slabs; k++)
        box_fill(in->out.c, &halo[k], sl->in_dy[0], need, 0.0f, ctx->threads);
    for (int r = 0; r < sl->num_regions && ctx->n > 0 && want_dx; r++)
        spatial_cell_backward(net, i, &sl->regions[r], ctx, halo, slabs, false);
    pcnn_status st = PCNN_OK;
    double t0 = 0, t1 = 0;
    if (want_dx) {
        t0 = clock_now();
        if (sl->num_phases > 0)
            st = phase_post(net, i, sl->num_phases - 1, true);
        else
            st = box_move_post_args(sp->mover, &(box_move_args){
                .tag = 4 * i + 1, .c = in->out.c, .threads = net->threads,
                .src_boxes = sl->need[0], .dst_boxes = si->have, .src = sl->in_dy[0],
                .dst = in->dy, .add = true, .overwrite = !l->accumulate_dx[0]});
        t1 = clock_now();
    }
    if (ctx->n > 0) {
        float *dx[2] = {want_dx ? sl->in_dy[0] : NULL, NULL};
        sl->twin->ops->backward(sl->twin, ctx, dx);
    } else {
        for (size_t k = 0; k < l->num_params; k++) l->grads[k] = 0.0f;
    }
    if (want_dx && st == PCNN_OK) {
        const double t2 = clock_now();
        st = box_move_finish(sp->mover);
        if (st == PCNN_OK && sl->num_phases > 0) st = phases_rest(net, i, true);
        const double t3 = clock_now();
        *exposed = spatial_timed_halo(net, i, t0, t3, (t1 - t0) + (t3 - t2));
    }
    return st;
}
