/* A spatial network's layers for the simulator (spec A.10, C.7; seed 002
 * section V): each layer's computation at its box, and the calling
 * thread's time in its halo exchanges and shuffles, as the network runs
 * them (graph's net_layer_split_of: in place, overlapped, staged, kept).
 * On other numbers of ranks (what-if) the spatial groups stay and the
 * sample groups scale. */
#include <math.h>
#include <string.h>

#include "../core/error.h"
#include "../layers/dense.h"
#include "perf.h"

/* A distribution of the network's ranks on `ranks`: its spatial group
 * kept, P_N scaled; false where the group does not divide them. */
static bool scaled(const int *parts, int net_ranks, int ranks, int *out)
{
    const int group = net_ranks / parts[LAYOUT_N];
    if (group < 1 || ranks % group) return false;
    memcpy(out, parts, LAYOUT_DIMS * sizeof(int));
    out[LAYOUT_N] = ranks / group;
    return true;
}

typedef struct split_env {
    pcnn_perfmodel *m;
    const pcnn_net *net;
    bool table;
    int batch, ranks, net_ranks, groups;
    bool halo_overlap;
    bool bf16;          /* PCNN_OPT_PRECISION bf16: convolutions' forward halos in bf16 */
    const char *func;
} split_env;

/* A dense layer multiplying each rank's box (graph/spatial_dense.c): the
 * whole batch on 1/P of its columns; the two sums over the ranks (K x
 * batch values in double) timed as its shuffles. */
static pcnn_status box_dense(const split_env *e, const pcnn_layer *l, sim_layer *y)
{
    double t[3];
    TRY(perf_box_compute(e->m, l, e->table, e->batch, 1.0 / e->ranks, t, e->func));
    y->fwd = t[0];
    y->bwd = t[1] + t[2];
    const double sums = perf_coll(e->m, PCNN_COLL_ALLREDUCE, e->ranks,
                                  8.0 * dense_get_shape(l).out * e->batch);
    y->shuffle_fwd = y->shuffle_bwd = sums;
    return PCNN_OK;
}

static pcnn_status split_layer(const split_env *e, const pcnn_layer *l, sim_layer *y,
                               bool *columns)
{
    net_layer_split s;
    net_layer_split_of(e->net, l->index, &s);
    int parts[LAYOUT_DIMS];
    char name[64];
    if (!scaled(s.parts, e->net_ranks, e->ranks, parts))
        return error_set(PCNN_ERR_INVALID_ARGUMENT, e->func,
                         "ranks %d: %s runs on spatial groups of %d ranks, which must divide "
                         "them", e->ranks, layer_name(l, name, sizeof name),
                         e->net_ranks / s.parts[LAYOUT_N]);
    /* Folding needs every rank to hold every sample (one group). */
    if (s.folded && e->groups == 1) return PCNN_OK;
    if (s.box_dense && e->groups == 1) {
        *columns = true;
        return box_dense(e, l, y);
    }
    perf_geometry g;
    if (!perf_split_geometry(l, parts, e->batch, &g))
        return error_set(PCNN_ERR_SHAPE, e->func, "%s does not fit {%d, %d, %d, %d}",
                         layer_name(l, name, sizeof name), parts[0], parts[1], parts[2],
                         parts[3]);
    const double share = perf_box_share(l, &g);
    double t[3];
    /* An unsplit layer costs as under data parallelism. */
    if (share >= 1)
        TRY(perf_layer_compute(e->m, l, e->table, g.n, t, e->func));
    else
        TRY(perf_box_compute(e->m, l, e->table, g.n, share, t, e->func));
    y->fwd = t[0];
    y->bwd = t[1] + t[2];
    const int group = parts[LAYOUT_D] * parts[LAYOUT_H] * parts[LAYOUT_W];
    if (s.windowed && group > 1 && g.interior < 1) {
        const perf_halo_how how = {.overlap = s.overlap && e->halo_overlap,
                                   .in_place = s.in_place, .staged = s.staged,
                                   .keeps_input = s.keeps_input,
                                   .bf16_fwd = e->bf16 && (l->ops->caps.cost == LAYER_COST_CONV2D ||
                                                           l->ops->caps.cost == LAYER_COST_CONV3D)};
        const perf_halo h = perf_halo_terms(e->m, l, &g, t, &how);
        y->fwd += h.border_fwd;
        y->bwd += h.border_bwd;
        y->halo_fwd = h.fwd;
        y->halo_bwd = h.bwd;
        y->halo = h.duration;
    }
    if (s.group_bn && group > 1) { /* statistics over the sample group, both passes */
        const double r = perf_coll(e->m, PCNN_COLL_ALLREDUCE, group, 16.0 * l->out.c);
        y->fwd += r;
        y->bwd += r;
    }
    for (int j = 0; j < l->num_inputs && j < 2; j++) {
        int from[LAYOUT_DIMS];
        if (!scaled(s.input_parts[j], e->net_ranks, e->ranks, from)) continue;
        const double sh = perf_shuffle_seconds(e->m, l->inputs[j], from, parts, e->batch,
                                               e->groups, e->ranks);
        y->shuffle_fwd += sh;
        y->shuffle_bwd += sh;
    }
    return PCNN_OK;
}

pcnn_status perf_split_layers(pcnn_perfmodel *m, const pcnn_net *net, bool table, int batch,
                              int ranks, sim_layer *layers, bool *columns, double *input_samples,
                              bool *spatial, const char *func)
{
    net_layer_split s0;
    *spatial = net_layer_split_of(net, 0, &s0);
    if (!*spatial) return PCNN_OK;
    const pcnn_comm *comm = net_comm(net);
    const int net_ranks = comm ? comm->size : 1;
    const int group = net_ranks / s0.groups;
    if (ranks % group)
        return error_set(PCNN_ERR_INVALID_ARGUMENT, func,
                         "ranks %d: the network's sample groups of %d ranks must divide them",
                         ranks, group);
    const split_env e = {.m = m, .net = net, .table = table, .batch = batch, .ranks = ranks,
                         .net_ranks = net_ranks, .groups = ranks / group,
                         .halo_overlap = net_get_plan_options(net).halo_overlap, .func = func,
                         .bf16 = net_get_plan_options(net).precision == PCNN_PRECISION_BF16};
    if (e.groups > batch)
        return error_set(PCNN_ERR_INVALID_ARGUMENT, func,
                         "global_batch %d: fewer samples than the %d sample groups of %d ranks",
                         batch, e.groups, ranks);
    const layer_list *ll = net_layer_list(net);
    /* The step's input copy: this rank's box of its group's samples. */
    int parts[LAYOUT_DIMS];
    perf_geometry g;
    if (scaled(s0.parts, net_ranks, ranks, parts) &&
        perf_split_geometry(ll->items[0], parts, batch, &g))
        *input_samples = g.n * perf_box_share(ll->items[0], &g);
    for (int i = 1; i < ll->count; i++) {
        layers[i] = (sim_layer){.weight = (double)ll->items[i]->num_params};
        columns[i] = false;
        TRY(split_layer(&e, ll->items[i], &layers[i], &columns[i]));
    }
    return PCNN_OK;
}
