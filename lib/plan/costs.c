/* Modelled seconds of a layer under a candidate distribution (spec A.10,
 * C.7): its compute scaled to the local box, the exposed part of its halo
 * exchange, its weight-gradient exchange; and the shuffles between
 * distributions (A.8). */
#include <math.h>
#include <string.h>

#include "../core/error.h"
#include "../layers/batchnorm.h"
#include "../layers/layer.h"
#include "../layers/dense.h"
#include "../parallel/halo.h"
#include "../strategy/exchange_choice.h"
#include "plan.h"

static int ceil_div(int a, int b) { return a / b + (a % b != 0); } /* a, b >= 1; no overflow */

static double coll(const plan_env *env, pcnn_collective c, int ranks, double bytes)
{
    return perf_coll(env->model, c, ranks, bytes);
}

static double nonneg(double x) { return x > 0 ? x : 0; }

/* Forward, weight-gradient and input-gradient seconds of n whole samples
 * scaled to a share `frac` of each sample. */
static pcnn_status compute_times(const plan_env *env, const pcnn_layer *l, int n, double frac,
                                 double t[3], const char *func)
{
    return perf_box_compute(env->model, l, env->table, n, frac, t, func);
}

/* The exchange layer l's gradient takes as finalize would decide it: the
 * user's, the model's cheapest under PCNN_EXCHANGE_AUTO, else the network's
 * default or, for a dense layer where eq. 4.8 prefers it, the FC gradient.
 * The FC gradient only on a path that splits no layer (a spatial network
 * cannot take it: all-to-all + all-gather instead). */
static double gradient_seconds(const plan_env *env, const pcnn_layer *l)
{
    const bool fc_allowed = env->sample_path && layer_is_dense(l);
    pcnn_exchange kind = env->exchange;
    if (l->exchange_chosen) {
        kind = l->exchange;
    } else if (env->exchange == PCNN_EXCHANGE_AUTO) {
        double best = fmin(plan_exchange_cost(env, l, PCNN_EXCHANGE_ALLREDUCE),
                           plan_exchange_cost(env, l, PCNN_EXCHANGE_ALLTOALL_ALLGATHER));
        if (fc_allowed) best = fmin(best, plan_exchange_cost(env, l, PCNN_EXCHANGE_FC_GRADIENT));
        return best;
    } else if (fc_allowed) {
        const dense_shape d = dense_get_shape(l);
        if (exchange_fc_preferred(d.features, d.out, env->batch, env->ranks, env->exchange, NULL,
                                  0))
            kind = PCNN_EXCHANGE_FC_GRADIENT;
    }
    if (kind == PCNN_EXCHANGE_FC_GRADIENT && !fc_allowed) kind = PCNN_EXCHANGE_ALLTOALL_ALLGATHER;
    return plan_exchange_cost(env, l, kind);
}

/* Does finalize run l on its input's block in place (graph/spatial.h)?  A
 * split convolution of stride 1 and padding (k - 1) / 2 (its blocks of
 * input and output then coincide) with an interior on every rank, where
 * that pays (parallel/halo.h). */
static bool runs_in_place(const pcnn_layer *l, const perf_geometry *g, int group)
{
    layer_window w;
    if (group < 2 || !layer_window_of(l, &w) || !l->ops->caps.in_place || g->interior <= 0)
        return false;
    /* H stands for every windowed dimension: the kinds in place have cubic windows. */
    const int k = w.kernel[1], s = w.stride[1], p = w.padding[1];
    const int window = w.kernel[0] * w.kernel[1] * w.kernel[2];
    return s == 1 && 2 * p == k - 1 && halo_in_place_pays(1 - g->interior, l->out.c, window);
}

pcnn_status plan_candidate_costs(const plan_env *env, const pcnn_layer *l, plan_candidate *c,
                                 const char *func)
{
    perf_geometry g;
    c->compute = c->halo = c->gradient = c->bytes = 0;
    if (!perf_split_geometry(l, c->parts, env->batch, &g)) {
        char name[64];
        return func ? error_set(PCNN_ERR_SHAPE, func, "%s does not fit {%d, %d, %d, %d}",
                                layer_name(l, name, sizeof name), c->parts[0], c->parts[1],
                                c->parts[2], c->parts[3])
                    : PCNN_ERR_SHAPE;
    }
    c->bytes = g.bytes;
    if (l->index == 0) return PCNN_OK; /* the input: its copy is in the step's overhead */
    const shape out = l->out;
    double t[3] = {0, 0, 0};
    TRY(compute_times(env, l, g.n, perf_box_share(l, &g), t, func));
    c->compute = t[0] + t[1] + t[2];
    const int group = c->parts[1] * c->parts[2] * c->parts[3];
    if (l->num_inputs && group > 1 && g.interior < 1) {
        /* Staged unless in place; the plan prices the staging kept. */
        const bool in_place = runs_in_place(l, &g, group);
        const perf_halo_how how = {.overlap = env->halo_overlap, .in_place = in_place,
                                   .staged = !in_place, .keeps_input = true,
                                   .bf16_fwd = env->value > 0 && env->value < 4 &&
                                               (l->ops->caps.cost == LAYER_COST_CONV2D ||
                                                l->ops->caps.cost == LAYER_COST_CONV3D)};
        const perf_halo h = perf_halo_terms(env->model, l, &g, t, &how);
        c->halo = h.fwd + h.bwd + h.border_fwd + h.border_bwd;
    }
    if (layer_is_batchnorm(l) && group > 1) /* statistics over the sample group, both passes */
        c->halo += 2 * coll(env, PCNN_COLL_ALLREDUCE, group, 16.0 * out.c);
    if (l->num_params && env->ranks > 1) c->gradient = gradient_seconds(env, l);
    return PCNN_OK;
}

static double update_seconds(const plan_env *env, double count)
{
    const perf_compute *c = &env->model->compute;
    return count > 0 && c->num_layers > 0 ? nonneg(perf_line(c->update, count)) : 0;
}

double plan_exchange_cost(const plan_env *env, const pcnn_layer *l, pcnn_exchange kind)
{
    const int P = env->ranks;
    const double value = env->value > 0 ? env->value : 4.0;
    const double count = (double)l->num_params, bytes = value * count;
    if (P <= 1) return update_seconds(env, count);
    const double own = ceil(count / P);
    switch ((int)kind) {
    case PCNN_EXCHANGE_ALLREDUCE:
        if (value < 4) /* bf16: reduce-scatter by all-to-all, fp32 sums, all-gather */
            return coll(env, PCNN_COLL_ALLTOALL, P, bytes) +
                   (P - 1) * own * 4.0 * env->model->link.gamma +
                   coll(env, PCNN_COLL_ALLGATHER, P, bytes) + update_seconds(env, count);
        return coll(env, PCNN_COLL_ALLREDUCE, P, bytes) + update_seconds(env, count);
    case PCNN_EXCHANGE_ALLTOALL_ALLGATHER:
        /* Each rank sums the P pieces of its slice, updates it, gathers all. */
        return coll(env, PCNN_COLL_ALLTOALL, P, bytes) +
               (P - 1) * own * 4.0 * env->model->link.gamma + update_seconds(env, own) +
               coll(env, PCNN_COLL_ALLGATHER, P, bytes);
    case PCNN_EXCHANGE_FC_GRADIENT: {
        if (!layer_is_dense(l)) return INFINITY;
        /* Seed 001 eqs. 4.2-4.4: the activations' all-to-all (F x b per
         * rank), the errors' all-gather (K x B), the updated weights'
         * all-gather (K x F); the weight gradient's flops only move. */
        const dense_shape d = dense_get_shape(l);
        const double F = d.features, K = d.out;
        const double b = ceil((double)env->batch / P);
        return coll(env, PCNN_COLL_ALLTOALL, P, value * F * b) +
               coll(env, PCNN_COLL_ALLGATHER, P, value * K * env->batch) +
               update_seconds(env, K * ceil(F / P) + (d.bias ? K : 0)) +
               coll(env, PCNN_COLL_ALLGATHER, P, value * K * F);
    }
    default:
        return INFINITY;
    }
}

double plan_shuffle_cost(const plan_env *env, const pcnn_layer *l, const int *a, const int *b,
                         int groups)
{
    /* The output forward, its gradient backward. */
    return 2 * perf_shuffle_seconds(env->model, l, a, b, env->batch, groups, env->ranks);
}

static bool split_parts(const int *p) { return p[LAYOUT_D] * p[LAYOUT_H] * p[LAYOUT_W] > 1; }

static double sum3(const double t[3]) { return t[0] + t[1] + t[2]; }

/* The dense layer that may fold flatten l in (graph/spatial_dense.c), with
 * every rank holding every sample (one group), or NULL. */
static const pcnn_layer *folding_dense(const plan_env *env, const pcnn_layer *l, int groups)
{
    if (groups != 1 || !l->ops->caps.folds_into_dense || l->num_consumers != 1 ||
        l == env->output || l->inputs[0]->index == 0)
        return NULL;
    for (int i = l->index + 1; i < env->layers->count; i++) {
        const pcnn_layer *d = env->layers->items[i];
        if (d->inputs[0] == l) return layer_is_dense(d) && d->num_inputs == 1 ? d : NULL;
    }
    return NULL;
}

/* A box dense layer's weights go by columns where its gradient would take
 * all-to-all + all-gather, which PCNN_EXCHANGE_AUTO keeps for it
 * (parallel/exchange_columns.c): each rank's columns all-gathered, the
 * biases allreduced, no all-to-all nor sum. */
static double columns_saving(const plan_env *env, const pcnn_layer *l)
{
    const pcnn_exchange kind = l->exchange_chosen ? l->exchange : env->exchange;
    if ((kind != PCNN_EXCHANGE_ALLTOALL_ALLGATHER && kind != PCNN_EXCHANGE_AUTO) ||
        env->ranks <= 1)
        return 0;
    const dense_shape d = dense_get_shape(l);
    const int P = env->ranks;
    const double K = d.out, F = d.features, biases = d.bias ? K : 0;
    const double columns = coll(env, PCNN_COLL_ALLGATHER, P, 4.0 * K * F) +
                           update_seconds(env, K * ceil(F / P) + biases) +
                           (biases > 0 ? coll(env, PCNN_COLL_ALLREDUCE, P, 4.0 * biases) : 0);
    return nonneg(gradient_seconds(env, l) - columns);
}

double plan_box_dense_saving(const plan_env *env, const pcnn_layer *l, int groups)
{
    if (!layer_is_dense(l) || l->num_inputs != 1 || !folding_dense(env, l->inputs[0], groups))
        return 0;
    double box[3], head[3];
    if (compute_times(env, l, env->batch, 1.0 / env->ranks, box, NULL) != PCNN_OK ||
        compute_times(env, l, ceil_div(env->batch, env->ranks), 1.0, head, NULL) != PCNN_OK)
        return 0;
    return nonneg(sum3(head) - sum3(box)) + columns_saving(env, l);
}

double plan_edge_cost(const plan_env *env, const pcnn_layer *parent, const pcnn_layer *child,
                      const int *a, const int *b, int groups)
{
    const double shuffle = plan_shuffle_cost(env, parent, a, b, groups);
    const pcnn_layer *dense = folding_dense(env, child, groups);
    if (!dense) return shuffle;
    if (a[LAYOUT_N] == 1 && split_parts(a) && !split_parts(b)) /* folded: two sums */
        return 2 * coll(env, PCNN_COLL_ALLREDUCE, env->ranks,
                        8.0 * dense_get_shape(dense).out * env->batch);
    return shuffle + plan_box_dense_saving(env, dense, groups); /* the head after all */
}
