/* Spatial and hybrid parallelism: resolving the distributions and
 * planning each layer's run on this rank's box (spatial.h). */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "../core/error.h"
#include "../core/hash.h"
#include "../core/memory.h"
#include "../layers/batchnorm.h"
#include "../layers/clone.h"
#include "../layers/dense.h"
#include "../parallel/decomp.h"
#include "../parallel/halo.h"
#include "spatial.h"

#define FINALIZE "pcnn_net_finalize"

static bool same_parts(const int *a, const int *b)
{
    return memcmp(a, b, LAYOUT_DIMS * sizeof(int)) == 0;
}

static bool is_split(const int *parts)
{
    return parts[LAYOUT_D] * parts[LAYOUT_H] * parts[LAYOUT_W] > 1;
}

/* PCNN_OPT_SPATIAL_FALLBACK: a dimension split into more parts than the
 * layer's extent keeps the largest divisor of its parts that fits, and the
 * samples take the rest. */
static void fall_back(const pcnn_layer *l, int *parts)
{
    const int ext[LAYOUT_DIMS] = {0, l->out.d, l->out.h, l->out.w};
    for (int k = 1; k < LAYOUT_DIMS; k++) {
        int d = parts[k];
        while (d > 1 && (ext[k] < d || parts[k] % d)) d--;
        parts[LAYOUT_N] *= parts[k] / d;
        parts[k] = d;
    }
}

/* The distribution of layer i: set on it; the network's for the input;
 * {P, 1, 1, 1} for a kind that cannot split; else its first input's. */
static void resolve_parts(pcnn_net *net, int i, int *parts)
{
    spatial *sp = net->spatial;
    const pcnn_layer *l = net->layers.items[i];
    const int P = sp->ranks;
    if (i < sp->layer_cap && sp->layer_parts[i][0] > 0) {
        memcpy(parts, sp->layer_parts[i], LAYOUT_DIMS * sizeof(int));
        sp->layers[i].set = true;
    } else if (i == 0) {
        memcpy(parts, sp->net_parts, LAYOUT_DIMS * sizeof(int));
    } else if (!layer_splits(l)) {
        parts[0] = P;
        parts[1] = parts[2] = parts[3] = 1;
    } else {
        memcpy(parts, sp->layers[l->inputs[0]->index].parts, LAYOUT_DIMS * sizeof(int));
    }
    if (net->opt.spatial_fallback && i > 0) fall_back(l, parts);
}

static pcnn_status check_layer(const pcnn_net *net, int i)
{
    const spatial *sp = net->spatial;
    const pcnn_layer *l = net->layers.items[i];
    const spatial_layer *sl = &sp->layers[i];
    char name[64];
    layer_name(l, name, sizeof name);
    if (l->num_inputs > 2) /* the boxes, halos and twins know one or two inputs */
        return error_set(PCNN_ERR_UNSUPPORTED, FINALIZE, "%s has %d inputs: a spatially "
                         "distributed network takes layers of at most 2 inputs", name,
                         l->num_inputs);
    const int *parts = sl->parts;
    if (parts[LAYOUT_N] % sp->groups != 0)
        return error_set(PCNN_ERR_INVALID_ARGUMENT, FINALIZE, "%s: %d parts along N are not a "
                         "multiple of the network's %d sample groups", name, parts[LAYOUT_N],
                         sp->groups);
    if (!is_split(parts)) {
        if (l == net->output || !layer_is_batchnorm(l)) return PCNN_OK;
        return PCNN_OK;
    }
    if (!layer_splits(l))
        return error_set(PCNN_ERR_UNSUPPORTED, FINALIZE, "%s cannot be split spatially (its "
                         "parts along D, H, W must be 1)", name);
    if (l == net->output)
        return error_set(PCNN_ERR_UNSUPPORTED, FINALIZE, "%s is the output: it must not be "
                         "split spatially (end with a layer of distribution {%d, 1, 1, 1})",
                         name, sp->ranks);
    const int ext[LAYOUT_DIMS] = {0, l->out.d, l->out.h, l->out.w};
    static const char *const dim[LAYOUT_DIMS] = {"N", "D", "H", "W"};
    for (int k = 1; k < LAYOUT_DIMS; k++)
        if (ext[k] < parts[k])
            return error_set(PCNN_ERR_SHAPE, FINALIZE, "%s is too small for its distribution: "
                             "%d outputs along %s cannot be split into %d parts", name, ext[k],
                             dim[k], parts[k]);
    return PCNN_OK;
}

/* The distributions set are for the communicator's ranks (it may have been
 * set or changed after them); the network's default follows it. */
static pcnn_status check_ranks(pcnn_net *net)
{
    spatial *sp = net->spatial;
    const int *n = sp->net_parts;
    if (!sp->net_set) {
        sp->net_parts[LAYOUT_N] = sp->ranks;
        for (int k = 1; k < LAYOUT_DIMS; k++) sp->net_parts[k] = 1;
    } else if (layout_ranks(n) != sp->ranks) {
        return error_set(PCNN_ERR_INVALID_ARGUMENT, FINALIZE, "the network's distribution {%d, "
                         "%d, %d, %d} is for %d ranks, the communicator has %d: set it again "
                         "after pcnn_net_set_comm", n[0], n[1], n[2], n[3], layout_ranks(n),
                         sp->ranks);
    }
    for (int i = 0; i < sp->layer_cap && i < net->layers.count; i++) {
        const int *p = sp->layer_parts[i];
        if (p[0] > 0 && layout_ranks(p) != sp->ranks) {
            char name[64];
            return error_set(PCNN_ERR_INVALID_ARGUMENT, FINALIZE, "%s: its distribution {%d, %d, "
                             "%d, %d} is for %d ranks, the communicator has %d: set it again "
                             "after pcnn_net_set_comm", layer_name(net->layers.items[i], name,
                             sizeof name), p[0], p[1], p[2], p[3], layout_ranks(p), sp->ranks);
        }
    }
    return PCNN_OK;
}

pcnn_status spatial_resolve(pcnn_net *net, int max_batch, int *local)
{
    spatial *sp = net->spatial;
    if (!sp) return PCNN_OK;
    spatial_release(net);
    sp->ranks = net->comm ? net->comm->size : 1;
    sp->rank = net->comm ? net->comm->rank : 0;
    TRY(check_ranks(net));
    sp->count = net->layers.count;
    sp->layers = mem_calloc((size_t)sp->count, sizeof *sp->layers);
    if (!sp->layers) return error_set(PCNN_ERR_OUT_OF_MEMORY, FINALIZE, "distribution plan");
    bool any = false;
    for (int i = 0; i < sp->count; i++) {
        resolve_parts(net, i, sp->layers[i].parts);
        any |= sp->layers[i].parts[LAYOUT_N] != sp->ranks;
    }
    if (!any) { /* all {P, 1, 1, 1}: plain data parallelism */
        mem_free(sp->layers);
        sp->layers = NULL;
        return PCNN_OK;
    }
    sp->groups = sp->layers[0].parts[LAYOUT_N];
    sp->group_size = sp->ranks / sp->groups;
    /* Step-independent boxes: every group holds P samples from 0. */
    sp->fixed_start = mem_calloc((size_t)sp->groups, sizeof(int));
    sp->fixed_count = mem_calloc((size_t)sp->groups, sizeof(int));
    if (!sp->fixed_start || !sp->fixed_count)
        return error_set(PCNN_ERR_OUT_OF_MEMORY, FINALIZE, "sample groups");
    for (int g = 0; g < sp->groups; g++) sp->fixed_count[g] = sp->ranks;
    for (int i = 0; i < sp->count; i++) {
        TRY(check_layer(net, i));
        spatial_layer *sl = &sp->layers[i];
        const pcnn_layer *l = net->layers.items[i];
        sl->windowed = layer_window_of(l, &sl->win);
        /* A batch norm reduces over a sample group of several ranks even
         * where it holds whole samples (plan_twin): its twin does that. */
        sl->direct = i > 0 && !is_split(sl->parts) &&
                     !(layer_is_batchnorm(l) && sp->group_size > 1);
        for (int j = 0; j < l->num_inputs; j++)
            sl->direct &= same_parts(sl->parts, sp->layers[l->inputs[j]->index].parts);
    }
    spatial_plan_box_dense(net);
    sp->active = true;
    *local = decomp_share(max_batch, sp->groups, 0, NULL);
    return PCNN_OK;
}

/* This rank's largest sample count in a layer's distribution. */
static int max_samples(const pcnn_net *net, const spatial_layer *sl)
{
    const spatial *sp = net->spatial;
    return decomp_share(net->max_batch, sl->parts[LAYOUT_N] / sp->groups, 0, NULL);
}

/* A step-independent box of `rank` (samples [0, 1) of every group). */
static box static_box(const pcnn_net *net, const spatial_layer *sl, const pcnn_layer *l,
                      int rank)
{
    const spatial *sp = net->spatial;
    const sample_split split = {sp->groups, sp->fixed_start, sp->fixed_count};
    return layout_box(sl->parts, rank, &split, l->out.d, l->out.h, l->out.w);
}

/* The box of input j that the rank whose output box is `out` reads. */
static box need_box(const pcnn_layer *l, int j, const box *out)
{
    box b = *out; /* the samples: the same */
    layer_need_box(l, j, &out->lo[LAYOUT_D], &out->hi[LAYOUT_D], &b.lo[LAYOUT_D],
                   &b.hi[LAYOUT_D]);
    return b;
}

void spatial_need_boxes(const pcnn_net *net, int i, int j, const box *have, box *need)
{
    const spatial *sp = net->spatial;
    for (int q = 0; q < sp->ranks; q++)
        need[q] = need_box(net->layers.items[i], j, &have[q]);
}

size_t spatial_layer_floats(const pcnn_net *net, const pcnn_layer *l)
{
    if (!net_is_spatial(net)) return (size_t)net->max_batch * shape_size(l->out);
    const spatial_layer *sl = &net->spatial->layers[l->index];
    const box b = static_box(net, sl, l, net->spatial->rank);
    const size_t vol = (size_t)box_extent(&b, LAYOUT_D) * (size_t)box_extent(&b, LAYOUT_H) *
                       (size_t)box_extent(&b, LAYOUT_W);
    return (size_t)max_samples(net, sl) * (size_t)l->out.c * vol;
}

bool spatial_runs_original(const pcnn_net *net, const pcnn_layer *l)
{
    if (!net_is_spatial(net) || l->index == 0 || layer_is_batchnorm(l) || layer_is_dropout(l))
        return true;
    return net->spatial->layers[l->index].direct;
}

uint64_t spatial_fingerprint(const pcnn_net *net, int i)
{
    if (!net_is_spatial(net)) return 0;
    uint64_t h = HASH_FNV1A_BASIS;
    for (int k = 0; k < LAYOUT_DIMS; k++)
        h = hash_fnv1a_u64(h, (uint64_t)net->spatial->layers[i].parts[k]);
    /* The batch norms' group reductions depend on PCNN_OPT_BN_SCOPE. */
    if (layer_is_batchnorm(net->layers.items[i])) h = hash_fnv1a_u64(h, net->opt.bn_scope);
    return h;
}

/* Does input j reach layer i without moving (same distribution, and every
 * rank reads exactly the box it holds)? */
static bool needs_move(const pcnn_net *net, int i, int j)
{
    const spatial *sp = net->spatial;
    const pcnn_layer *l = net->layers.items[i];
    const pcnn_layer *in = l->inputs[j];
    const spatial_layer *sl = &sp->layers[i], *si = &sp->layers[in->index];
    if (!same_parts(sl->parts, si->parts)) return true;
    for (int q = 0; q < sp->ranks; q++) {
        const box out = static_box(net, sl, l, q), have = static_box(net, si, in, q);
        const box need = need_box(l, j, &out);
        if (!box_equal(&need, &have)) return true;
    }
    return false;
}

/* The cells of rank q's box of layer i: per split windowed dimension the
 * band below the interior, the interior, the band above (the nonempty
 * ones); seg[k][0..count[k]) their bounds, inner[k] the interior's index
 * per dimension.  False: no border cell, or no interior. */
static bool cells_of(const pcnn_net *net, int i, int q, int seg[LAYOUT_DIMS][4],
                     int count[LAYOUT_DIMS], int inner[LAYOUT_DIMS])
{
    const spatial *sp = net->spatial;
    const pcnn_layer *l = net->layers.items[i], *in = l->inputs[0];
    const spatial_layer *sl = &sp->layers[i];
    const box mine = static_box(net, sl, l, q);
    const box have = static_box(net, &sp->layers[in->index], in, q);
    const int ext[LAYOUT_DIMS] = {0, in->out.d, in->out.h, in->out.w};
    int cells = 1;
    for (int k = 1; k < LAYOUT_DIMS; k++) {
        const layer_window *w = &sl->win;
        int i0 = mine.lo[k], i1 = mine.hi[k];
        if (sl->windowed && sl->parts[k] > 1)
            halo_interior(ext[k], have.lo[k], have.hi[k], mine.lo[k], mine.hi[k],
                          w->kernel[k - 1], w->stride[k - 1], w->padding[k - 1], &i0, &i1);
        if (i1 <= i0) return false;
        count[k] = 0;
        seg[k][0] = mine.lo[k];
        if (i0 > mine.lo[k]) seg[k][++count[k]] = i0;
        inner[k] = count[k];
        seg[k][++count[k]] = i1;
        if (i1 < mine.hi[k]) seg[k][++count[k]] = mine.hi[k];
        cells *= count[k];
    }
    return cells > 1;
}

/* The cells of this rank's box of layer i under overlap (PCNN_OPT_HALO_OVERLAP)
 * or run in place (always); false: none. */
static bool region_cells(const pcnn_net *net, int i, int seg[LAYOUT_DIMS][4],
                         int count[LAYOUT_DIMS], int inner[LAYOUT_DIMS])
{
    const spatial *sp = net->spatial;
    const pcnn_layer *l = net->layers.items[i], *in = l->num_inputs == 1 ? l->inputs[0] : NULL;
    const spatial_layer *sl = &sp->layers[i];
    if (sl->in_place) return cells_of(net, i, sp->rank, seg, count, inner);
    if (!in || !sl->windowed || !net->opt.halo_overlap || !net->comm || sl->direct ||
        !sl->twin || !layer_recomputable(sl->twin) ||
        !same_parts(sl->parts, sp->layers[in->index].parts) || !needs_move(net, i, 0))
        return false;
    return cells_of(net, i, sp->rank, seg, count, inner);
}

/* Does layer i run on its input's block in place (spatial.h)?  A
 * convolution of one input under that input's distribution whose twin,
 * given the layer's padding, maps every rank's block of the input onto
 * its box of the output as in the whole sample (the block starts at its
 * first output times the stride, and yields as many outputs), each box
 * with an interior and border cells, where that pays (halo.h).  Pure,
 * alike on every rank: the halo's messages must match. */
static bool in_place_fits(const pcnn_net *net, int i)
{
    const spatial *sp = net->spatial;
    const pcnn_layer *l = net->layers.items[i];
    const spatial_layer *sl = &sp->layers[i];
    if (l->num_inputs != 1 || !sl->windowed || sl->direct || !net->comm ||
        !l->ops->caps.in_place)
        return false;
    const pcnn_layer *in = l->inputs[0];
    const spatial_layer *si = &sp->layers[in->index];
    if (!same_parts(sl->parts, si->parts) || !needs_move(net, i, 0)) return false;
    double border = 0.0; /* the largest share of a box in border cells */
    for (int q = 0; q < sp->ranks; q++) {
        const box out = static_box(net, sl, l, q), have = static_box(net, si, in, q);
        for (int k = LAYOUT_D; k <= LAYOUT_W; k++) { /* a 2D window is the identity in D */
            const int kk = sl->win.kernel[k - 1], ks = sl->win.stride[k - 1];
            const int a = box_extent(&have, k) + 2 * sl->win.padding[k - 1];
            if (have.lo[k] != out.lo[k] * ks || a < kk || (a - kk) / ks + 1 != box_extent(&out, k))
                return false;
        }
        int seg[LAYOUT_DIMS][4], count[LAYOUT_DIMS], inner[LAYOUT_DIMS];
        if (!cells_of(net, i, q, seg, count, inner)) return false;
        double interior = 1.0;
        for (int k = 1; k < LAYOUT_DIMS; k++)
            interior *= (double)(seg[k][inner[k] + 1] - seg[k][inner[k]]) / box_extent(&out, k);
        if (1.0 - interior > border) border = 1.0 - interior;
    }
    const int window = sl->win.kernel[0] * sl->win.kernel[1] * sl->win.kernel[2];
    return halo_in_place_pays(border, l->out.c, window);
}

/* The border cells of layer i under overlap (the interior is not one of
 * them: the whole box's twin computes it). */
static pcnn_status plan_regions(pcnn_net *net, int i, const plan_ctx *tp, size_t *workspace)
{
    spatial *sp = net->spatial;
    pcnn_layer *l = net->layers.items[i];
    spatial_layer *sl = &sp->layers[i];
    int seg[LAYOUT_DIMS][4], count[LAYOUT_DIMS], inner[LAYOUT_DIMS];
    if (!region_cells(net, i, seg, count, inner)) return PCNN_OK;
    const int cells = count[1] * count[2] * count[3];
    sl->regions = mem_calloc((size_t)cells, sizeof *sl->regions);
    if (!sl->regions) return error_set(PCNN_ERR_OUT_OF_MEMORY, FINALIZE, "overlap regions");
    sl->num_regions = 0;
    const box mine = static_box(net, sl, l, sp->rank);
    char name[64];
    for (int r = 0; r < cells; r++) {
        int idx[LAYOUT_DIMS] = {0, r / (count[2] * count[3]), (r / count[3]) % count[2],
                                r % count[3]};
        spatial_region *g = &sl->regions[sl->num_regions];
        g->out = mine;
        bool interior = true;
        for (int k = 1; k < LAYOUT_DIMS; k++) {
            g->out.lo[k] = seg[k][idx[k]];
            g->out.hi[k] = seg[k][idx[k] + 1];
            interior &= idx[k] == inner[k];
        }
        if (interior) continue;
        sl->num_regions++;
        g->in = need_box(l, 0, &g->out);
        const shape in = {l->inputs[0]->out.c, box_extent(&g->in, LAYOUT_D),
                          box_extent(&g->in, LAYOUT_H), box_extent(&g->in, LAYOUT_W)};
        TRY(clone_local_with(&g->list, l, &in, (twin_opts){.no_bias = sl->in_place}, &g->twin,
                             FINALIZE));
        pcnn_layer *t = g->twin;
        if (t->out.d != box_extent(&g->out, LAYOUT_D) || t->out.h != box_extent(&g->out, LAYOUT_H) ||
            t->out.w != box_extent(&g->out, LAYOUT_W))
            return error_set(PCNN_ERR_SHAPE, FINALIZE, "%s: a region of its box does not "
                             "match its twin", layer_name(l, name, sizeof name));
        for (int k = 0; k < g->list.count; k++) {
            pcnn_layer *x = g->list.items[k];
            if (x->ops->decide) x->ops->decide(x, tp);
        }
        g->grads = mem_alloc_floats(l->num_params);
        if (!g->grads) return error_set(PCNN_ERR_OUT_OF_MEMORY, FINALIZE, "region gradients");
        sp->bytes[PCNN_MEMORY_PARAMETERS] += l->num_params * sizeof(float);
        t->params = l->params;
        t->grads = g->grads;
        if (t->ops->setup) TRY(t->ops->setup(t, tp));
        sp->bytes[PCNN_MEMORY_WORKSPACE] += t->buffer_bytes;
        if (t->ops->workspace_floats) {
            const size_t w = t->ops->workspace_floats(t, tp);
            if (w > *workspace) *workspace = w;
        }
        const size_t fin = (size_t)tp->max_batch * shape_size(in);
        const size_t fout = (size_t)tp->max_batch * shape_size(t->out);
        if (fin > sp->region_in_floats) sp->region_in_floats = fin;
        if (fout > sp->region_out_floats) sp->region_out_floats = fout;
    }
    sl->overlap = sl->num_regions > 0 && !sl->in_place; /* in place: no trials */
    sl->overlap_on = sl->overlap;
    return PCNN_OK;
}

/* The input gradient of a 3D twin is wanted only where its input box
 * (need, in the sample's coordinates) lies inside the sample: the rest is
 * the padding staged around it, whose gradient nobody reads. */
static void want_dx_in_sample(pcnn_layer *t, const pcnn_layer *l, const box *need)
{
    const shape s = l->inputs[0]->out;
    const int dims[3] = {LAYOUT_D, LAYOUT_H, LAYOUT_W}, size[3] = {s.d, s.h, s.w};
    int lo[3], ext[3];
    for (int k = 0; k < 3; k++) {
        const int a = need->lo[dims[k]], b = need->hi[dims[k]];
        const int first = a > 0 ? a : 0, end = b < size[k] ? b : size[k];
        lo[k] = first - a;
        ext[k] = end - first;
    }
    t->ops->caps.twin_want_dx_box(t, lo, ext);
}

static pcnn_status plan_twin(pcnn_net *net, int i, const plan_ctx *p, size_t *workspace)
{
    spatial *sp = net->spatial;
    pcnn_layer *l = net->layers.items[i];
    spatial_layer *sl = &sp->layers[i];
    char name[64];
    const box mine = static_box(net, sl, l, sp->rank);
    shape in[2];
    size_t need_vol[2] = {0, 0};
    box need0 = mine;
    sl->in_place = in_place_fits(net, i);
    for (int j = 0; j < l->num_inputs; j++) {
        const box nb = need_box(l, j, &mine);
        if (j == 0) need0 = nb;
        in[j] = (shape){l->inputs[j]->out.c, box_extent(&nb, LAYOUT_D), box_extent(&nb, LAYOUT_H),
                        box_extent(&nb, LAYOUT_W)};
        need_vol[j] = shape_size(in[j]); /* in place: the halo's staging, for the cells */
    }
    if (sl->in_place) { /* on the producer's block, padded */
        const pcnn_layer *src = l->inputs[0];
        const box b = static_box(net, &sp->layers[src->index], src, sp->rank);
        in[0] = (shape){src->out.c, box_extent(&b, LAYOUT_D), box_extent(&b, LAYOUT_H),
                        box_extent(&b, LAYOUT_W)};
    }
    TRY(clone_local_with(&sl->twin_list, l, in, (twin_opts){.keep_padding = sl->in_place},
                         &sl->twin, FINALIZE));
    pcnn_layer *t = sl->twin;
    if (t->out.d != box_extent(&mine, LAYOUT_D) || t->out.h != box_extent(&mine, LAYOUT_H) ||
        t->out.w != box_extent(&mine, LAYOUT_W) || t->num_params != l->num_params)
        return error_set(PCNN_ERR_SHAPE, FINALIZE, "%s: its box does not match its local "
                         "twin", layer_name(l, name, sizeof name));
    if (layer_is_batchnorm(l)) {
        const bool global = batchnorm_synchronised(l) && net->comm;
        /* Over the sample group: its ranks together hold each point of its
         * samples once, whatever the layer's distribution (sub-groups of a
         * fallback, or whole samples shared among the group's ranks), so
         * the statistics are those of the group's samples as on one rank. */
        sl->group_bn = !global && net->opt.bn_scope && sp->group_size > 1;
        TRY(batchnorm_set_sync(t, global || sl->group_bn, FINALIZE));
    }
    plan_ctx tp = *p;
    tp.max_batch = max_samples(net, sl);
    if (t->ops->caps.twin_share) /* a memory budget: tuned where the original is */
        t->ops->caps.twin_share(t, (double)tp.max_batch * (double)shape_size(t->out) /
                                       ((double)net->max_batch * (double)shape_size(l->out)));
    if (t->ops->caps.twin_want_dx_box && !sl->in_place) want_dx_in_sample(t, l, &need0);
    for (int k = 0; k < sl->twin_list.count; k++) {
        pcnn_layer *x = sl->twin_list.items[k];
        if (x->ops->decide) x->ops->decide(x, &tp);
    }
    t->params = l->params;
    t->grads = l->grads;
    if (t->ops->setup) TRY(t->ops->setup(t, &tp));
    TRY(plan_regions(net, i, &tp, workspace)); /* the border cells under overlap */
    sp->bytes[PCNN_MEMORY_WORKSPACE] += t->buffer_bytes;
    if (t->ops->workspace_floats) {
        const size_t w = t->ops->workspace_floats(t, &tp);
        if (w > *workspace) *workspace = w;
    }
    t->y = l->y;
    t->dy = l->dy;
    for (int j = 0; j < l->num_inputs; j++) {
        pcnn_layer *producer = l->inputs[j], *stand_in = t->inputs[j];
        sl->moves[j] = needs_move(net, i, j);
        if (!sl->moves[j] || sl->in_place) {
            stand_in->y = producer->y;
            stand_in->dy = producer->dy;
            t->accumulate_dx[j] = l->accumulate_dx[j];
            if (!sl->moves[j]) continue;
        }
        /* Its staging of input slot j (plan_staging allocates it). */
        const size_t floats = (size_t)tp.max_batch * need_vol[j];
        sl->staged_floats[j] = floats;
        /* An input layer's gradient is never computed. */
        if (!layer_is_input(producer) && floats > sp->dy_scratch_floats[j])
            sp->dy_scratch_floats[j] = floats;
        if (!sl->in_place) t->accumulate_dx[j] = false;
    }
    l->decision.halo_in_place = sl->in_place;
    return PCNN_OK;
}

/* Does a dimension-ordered halo of layer i deliver every point?  After
 * the first phase a rank q passes on only the part of its block it reads
 * itself (the box it grew to); a stride may skip a point of q's block that
 * a neighbour along a later phase's dimension reads.  Uses the boxes'
 * step buffers (filled again at each step) for the step-independent boxes. */
static bool phases_deliver(const pcnn_net *net, int i, const int *dims, int count)
{
    const spatial *sp = net->spatial;
    const spatial_layer *sl = &sp->layers[i];
    const pcnn_layer *l = net->layers.items[i], *in = l->inputs[0];
    const spatial_layer *si = &sp->layers[in->index];
    for (int q = 0; q < sp->ranks; q++) {
        si->have[q] = static_box(net, si, in, q);
        sl->have[q] = static_box(net, sl, l, q);
    }
    spatial_need_boxes(net, i, 0, sl->have, sl->need[0]);
    for (int f = 1; f < count; f++) {
        const int k = dims[f];
        for (int r = 0; r < sp->ranks; r++)
            for (int q = 0; q < sp->ranks; q++) {
                const box *need = &sl->need[0][r], *owner = &sl->need[0][q];
                const int lo = need->lo[k] > si->have[q].lo[k] ? need->lo[k] : si->have[q].lo[k];
                const int hi = need->hi[k] < si->have[q].hi[k] ? need->hi[k] : si->have[q].hi[k];
                if (lo < hi && (lo < owner->lo[k] || hi > owner->hi[k])) return false;
            }
    }
    return true;
}

/* The phases of layer i's dimension-ordered halo (spatial.h): one per
 * split windowed dimension, when there are two or more and they deliver
 * every point (else one round, as PCNN_OPT_HALO_SCHEDULE 1). */
static pcnn_status plan_phases(pcnn_net *net, int i)
{
    spatial *sp = net->spatial;
    spatial_layer *sl = &sp->layers[i];
    const pcnn_layer *l = net->layers.items[i];
    /* In place, a relay would need this rank's own points staged. */
    if (net->opt.halo_schedule != 0 || !sl->windowed || l->num_inputs != 1 || !sl->moves[0] ||
        sl->in_place ||
        !same_parts(sl->parts, sp->layers[l->inputs[0]->index].parts))
        return PCNN_OK;
    int dims[3], count = 0;
    for (int k = LAYOUT_D; k <= LAYOUT_W; k++) /* a 2D layer's D is never split */
        if (sl->parts[k] > 1) dims[count++] = k;
    if (count < 2) return PCNN_OK; /* one dimension: every message is a face already */
    if (!phases_deliver(net, i, dims, count)) return PCNN_OK;
    int mine[LAYOUT_DIMS];
    layout_coords(sl->parts, sp->rank, mine);
    for (int f = 0; f < count; f++) {
        sl->phase_dim[f] = dims[f];
        sl->phase_box[f] = mem_calloc((size_t)sp->ranks, sizeof(box));
        sl->peers[f] = mem_calloc((size_t)sp->ranks, sizeof(bool));
        if (!sl->phase_box[f] || !sl->peers[f])
            return error_set(PCNN_ERR_OUT_OF_MEMORY, FINALIZE, "halo phases");
        for (int q = 0; q < sp->ranks; q++) {
            int c[LAYOUT_DIMS];
            layout_coords(sl->parts, q, c);
            bool same = true;
            for (int k = 0; k < LAYOUT_DIMS; k++) same &= k == dims[f] || c[k] == mine[k];
            sl->peers[f][q] = same && q != sp->rank;
        }
    }
    sl->num_phases = count;
    return PCNN_OK;
}

/* spatial_gather_output's boxes and staging (the group's outputs). */
static pcnn_status plan_gather(pcnn_net *net)
{
    spatial *sp = net->spatial;
    const size_t floats = (size_t)net->max_batch * shape_size(net->output->out);
    sp->gather_boxes = mem_calloc((size_t)sp->ranks, sizeof(box));
    sp->gather_staged = mem_alloc_floats(floats);
    if (!sp->gather_boxes || !sp->gather_staged)
        return error_set(PCNN_ERR_OUT_OF_MEMORY, FINALIZE, "outputs of %d samples",
                         net->max_batch);
    sp->bytes[PCNN_MEMORY_COMMUNICATION] +=
        floats * sizeof(float) + (size_t)sp->ranks * sizeof(box);
    return PCNN_OK;
}

/* A buffer for staged inputs, zeroed: points that no move writes (a stride
 * may skip them) stay finite. */
static float *staging(spatial *sp, size_t floats)
{
    float *y = mem_alloc_floats(floats ? floats : 1);
    if (y) memset(y, 0, floats * sizeof(float));
    if (y) sp->bytes[PCNN_MEMORY_COMMUNICATION] += floats * sizeof(float);
    return y;
}

/* Moved inputs: where all staged layers' own inputs together take at most
 * a KEEP_SHARE of this rank's activations, each layer keeps its own from
 * its forward pass to its backward (CosmoFlow: 3.7 of 42 MB); otherwise,
 * and for layers in place (their halo alone), one buffer per input slot
 * serves all: a layer's only during its forward, and again during its
 * backward (moved in again first, spatial_backward), so staging costs the
 * largest input box, not a second copy of every windowed layer's input. */
enum { KEEP_SHARE = 8 }; /* 1/8 */

static pcnn_status plan_staging(pcnn_net *net)
{
    spatial *sp = net->spatial;
    size_t own = 0;
    for (int i = 1; i < sp->count; i++)
        for (int j = 0; j < 2; j++)
            if (sp->layers[i].moves[j] && !sp->layers[i].in_place)
                own += sp->layers[i].staged_floats[j];
    const bool keep =
        sp->keep_inputs > 0 ||
        (sp->keep_inputs == 0 &&
         own * sizeof(float) <= net->memory_part[PCNN_MEMORY_ACTIVATIONS] / KEEP_SHARE);
    for (int i = 1; i < sp->count; i++) {
        spatial_layer *sl = &sp->layers[i];
        sl->keeps_input = keep && !sl->in_place && (sl->moves[0] || sl->moves[1]);
        for (int j = 0; j < 2 && !sl->keeps_input; j++)
            if (sl->moves[j] && sl->staged_floats[j] > sp->in_y_floats[j])
                sp->in_y_floats[j] = sl->staged_floats[j];
    }
    for (int j = 0; j < 2; j++) {
        sp->in_y_shared[j] = staging(sp, sp->in_y_floats[j]);
        if (!sp->in_y_shared[j])
            return error_set(PCNN_ERR_OUT_OF_MEMORY, FINALIZE, "halo buffers of %zu floats",
                             sp->in_y_floats[j]);
        sp->in_y_owner[j] = -1;
    }
    for (int i = 1; i < sp->count; i++)
        for (int j = 0; j < 2; j++) {
            spatial_layer *sl = &sp->layers[i];
            if (!sl->moves[j]) continue;
            sl->in_dy[j] = sp->dy_scratch[j];
            sl->in_y[j] = sl->keeps_input ? staging(sp, sl->staged_floats[j])
                                          : sp->in_y_shared[j];
            if (!sl->in_y[j])
                return error_set(PCNN_ERR_OUT_OF_MEMORY, FINALIZE, "staging of %zu floats",
                                 sl->staged_floats[j]);
            if (sl->in_place) continue; /* the twin reads the producer's */
            sl->twin->inputs[j]->dy = sp->dy_scratch[j];
            sl->twin->inputs[j]->y = sl->in_y[j];
        }
    return PCNN_OK;
}

/* What this rank plans alone (buffers, twins: failures of one rank);
 * *bn_doubles: the largest group reduction of a batch norm. */
static pcnn_status plan_local(pcnn_net *net, const plan_ctx *p, size_t *bn_doubles)
{
    spatial *sp = net->spatial;
    const int P = sp->ranks;
    sp->group_start = mem_calloc((size_t)sp->groups, sizeof(int));
    sp->group_count = mem_calloc((size_t)sp->groups, sizeof(int));
    if (!sp->group_start || !sp->group_count)
        return error_set(PCNN_ERR_OUT_OF_MEMORY, FINALIZE, "sample groups");
    size_t workspace = 0, most_bn = 0;
    for (int i = 0; i < sp->count; i++) {
        spatial_layer *sl = &sp->layers[i];
        const pcnn_layer *l = net->layers.items[i];
        sl->have = mem_calloc((size_t)P, sizeof(box));
        for (int j = 0; j < l->num_inputs; j++) sl->need[j] = mem_calloc((size_t)P, sizeof(box));
        if (!sl->have || (l->num_inputs > 0 && !sl->need[0]) || (l->num_inputs > 1 && !sl->need[1]))
            return error_set(PCNN_ERR_OUT_OF_MEMORY, FINALIZE, "boxes of %d ranks", P);
        if (sl->box_dense) {
            const size_t n = (size_t)dense_get_shape(l).out * (size_t)net->max_batch;
            if (n > sp->box_dense_count) sp->box_dense_count = n;
        }
        if (i == 0 || sl->direct || sl->folded) continue;
        if (layer_is_dropout(l)) {
            char name[64];
            if (needs_move(net, i, 0))
                return error_set(PCNN_ERR_UNSUPPORTED, FINALIZE, "%s must keep the distribution "
                                 "of its input", layer_name(l, name, sizeof name));
            sl->box_dropout = true;
            continue;
        }
        TRY(plan_twin(net, i, p, &workspace));
        TRY(plan_phases(net, i));
        if (sl->group_bn) {
            const size_t d = batchnorm_sync_doubles(sl->twin);
            if (d > most_bn) most_bn = d;
        }
    }
    for (int j = 0; j < 2; j++) {
        sp->dy_scratch[j] = mem_alloc_floats(sp->dy_scratch_floats[j]);
        if (!sp->dy_scratch[j])
            return error_set(PCNN_ERR_OUT_OF_MEMORY, FINALIZE, "halo gradients of %zu floats",
                             sp->dy_scratch_floats[j]);
        sp->bytes[PCNN_MEMORY_COMMUNICATION] += sp->dy_scratch_floats[j] * sizeof(float);
    }
    TRY(plan_staging(net));
    sp->region_x = mem_alloc_floats(sp->region_in_floats);
    sp->region_dx = mem_alloc_floats(sp->region_in_floats);
    sp->region_y = mem_alloc_floats(sp->region_out_floats);
    sp->region_dy = mem_alloc_floats(sp->region_out_floats);
    if (!sp->region_x || !sp->region_dx || !sp->region_y || !sp->region_dy)
        return error_set(PCNN_ERR_OUT_OF_MEMORY, FINALIZE, "overlap buffers");
    sp->bytes[PCNN_MEMORY_COMMUNICATION] +=
        2 * (sp->region_in_floats + sp->region_out_floats) * sizeof(float);
    for (int i = 1; i < sp->count; i++)
        for (int r = 0; r < sp->layers[i].num_regions; r++) {
            pcnn_layer *t = sp->layers[i].regions[r].twin;
            t->inputs[0]->y = sp->region_x;
            t->inputs[0]->dy = sp->region_dx;
            t->y = sp->region_y;
            t->dy = sp->region_dy;
            t->accumulate_dx[0] = false;
        }
    sp->workspace = mem_alloc_floats(workspace);
    if (!sp->workspace)
        return error_set(PCNN_ERR_OUT_OF_MEMORY, FINALIZE, "workspace of %zu floats", workspace);
    sp->workspace_floats = workspace;
    sp->bytes[PCNN_MEMORY_WORKSPACE] += workspace * sizeof(float);
    TRY(plan_gather(net));
    if (sp->box_dense_count > 0) {
        sp->box_dense_rows = mem_alloc_floats(sp->box_dense_count);
        sp->box_dense_sums = mem_calloc(sp->box_dense_count, sizeof(double));
        if (!sp->box_dense_rows || !sp->box_dense_sums)
            return error_set(PCNN_ERR_OUT_OF_MEMORY, FINALIZE, "dense rows of %zu floats",
                             sp->box_dense_count);
        sp->bytes[PCNN_MEMORY_WORKSPACE] += sp->box_dense_count * (sizeof(float) + sizeof(double));
    }
    /* The group reducer serves batch norms and box dense layers alike. */
    if (sp->box_dense_count > most_bn) most_bn = sp->box_dense_count;
    if (most_bn > (size_t)INT_MAX / (size_t)sp->group_size)
        return error_set(PCNN_ERR_UNSUPPORTED, FINALIZE, "batch-norm statistics too large");
    *bn_doubles = most_bn;
    return PCNN_OK;
}

/* The mover, with room for the largest move, and the sample groups'
 * reducer (collective: every rank comes here after agreeing). */
static pcnn_status plan_collectives(pcnn_net *net, size_t most_bn, size_t move_floats)
{
    spatial *sp = net->spatial;
    pcnn_status ready = box_mover_create(net->comm, &net->opt.timeout_ms, &sp->mover);
    if (ready == PCNN_OK) ready = box_mover_reserve(sp->mover, move_floats);
    if (ready == PCNN_OK)
        sp->bytes[PCNN_MEMORY_COMMUNICATION] += move_floats * sizeof(float);
    TRY(net_agree_sum(net, AGREE_LATER, ready, NULL, 0, FINALIZE));
    if (most_bn > 0) {
        MPI_Comm group;
        TRY(box_mover_split(sp->mover, sp->rank / sp->group_size, &group));
        pcnn_comm tmp = {.comm = group, .rank = sp->rank % sp->group_size,
                         .size = sp->group_size};
        const pcnn_status st = reducer_create(&tmp, (int)most_bn, &net->opt.timeout_ms,
                                              &sp->group_reducer);
        MPI_Comm_free(&group);
        TRY(st);
        sp->bytes[PCNN_MEMORY_COMMUNICATION] += reducer_bytes(sp->group_reducer);
    }
    for (int k = 0; k < PCNN_MEMORY_PARTS; k++)
        net_count_memory(net, (pcnn_memory_part)k, sp->bytes[k]);
    return PCNN_OK;
}

pcnn_status spatial_plan(pcnn_net *net, const plan_ctx *p)
{
    if (!net_is_spatial(net)) return PCNN_OK;
    size_t most_bn = 0, move_floats = 0;
    pcnn_status st = plan_local(net, p, &most_bn);
    /* Each box's D, H, W before the first step sets its samples: the
     * input is staged before the step's agreement (run.c). */
    for (int i = 0; st == PCNN_OK && i < net->spatial->count; i++)
        net->spatial->layers[i].mine =
            static_box(net, &net->spatial->layers[i], net->layers.items[i], net->spatial->rank);
    if (st == PCNN_OK && net->comm) st = spatial_move_floats(net, &move_floats);
    if (!net->comm) return st;
    /* No rank goes on to the collectives unless every rank planned. */
    TRY(net_agree_sum(net, AGREE_LATER, st, NULL, 0, FINALIZE));
    return plan_collectives(net, most_bn, move_floats);
}

void spatial_release(pcnn_net *net)
{
    spatial *sp = net->spatial;
    if (!sp) return;
    for (int i = 0; sp->layers && i < sp->count; i++) {
        spatial_layer *sl = &sp->layers[i];
        layer_list_destroy(&sl->twin_list); /* its stand-ins' buffers are not its own */
        for (int f = 0; f < 3; f++) {
            mem_free(sl->phase_box[f]);
            mem_free(sl->peers[f]);
        }
        for (int r = 0; r < sl->num_regions; r++) {
            layer_list_destroy(&sl->regions[r].list);
            mem_free(sl->regions[r].grads);
        }
        mem_free(sl->regions);
        for (int j = 0; j < 2; j++) {
            mem_free(sl->need[j]);
            if (sl->keeps_input) mem_free(sl->in_y[j]);
        }
        mem_free(sl->have);
    }
    mem_free(sp->layers);
    sp->layers = NULL;
    box_mover_destroy(sp->mover);
    sp->mover = NULL;
    reducer_destroy(sp->group_reducer);
    sp->group_reducer = NULL;
    mem_free(sp->workspace);
    sp->workspace = NULL;
    mem_free(sp->box_dense_rows);
    mem_free(sp->box_dense_sums);
    sp->box_dense_rows = NULL;
    sp->box_dense_sums = NULL;
    sp->box_dense_count = 0;
    mem_free(sp->gather_boxes);
    mem_free(sp->gather_staged);
    sp->gather_boxes = NULL;
    sp->gather_staged = NULL;
    mem_free(sp->region_x);
    mem_free(sp->region_dx);
    mem_free(sp->region_y);
    mem_free(sp->region_dy);
    sp->region_x = sp->region_dx = sp->region_y = sp->region_dy = NULL;
    sp->region_in_floats = sp->region_out_floats = 0;
    for (int j = 0; j < 2; j++) {
        mem_free(sp->dy_scratch[j]);
        sp->dy_scratch[j] = NULL;
        sp->dy_scratch_floats[j] = 0;
        mem_free(sp->in_y_shared[j]);
        sp->in_y_shared[j] = NULL;
        sp->in_y_floats[j] = 0;
        sp->in_y_owner[j] = -1;
    }
    mem_free(sp->group_start);
    mem_free(sp->group_count);
    mem_free(sp->fixed_start);
    mem_free(sp->fixed_count);
    sp->group_start = sp->group_count = sp->fixed_start = sp->fixed_count = NULL;
    sp->active = false;
    for (int k = 0; k < PCNN_MEMORY_PARTS; k++) sp->bytes[k] = 0;
    sp->passes = 0;
    sp->overlap_decided = false;
}
