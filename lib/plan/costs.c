/* Modelled seconds of a layer under a candidate distribution (spec A.10,
 * C.7): its compute scaled to the local box, the exposed part of its halo
 * exchange, its weight-gradient exchange; and the shuffles between
 * distributions (A.8). */
#include <math.h>
#include <string.h>

#include "../core/error.h"
#include "../layers/batchnorm.h"
#include "../layers/clone.h"
#include "../layers/dense.h"
#include "../parallel/halo.h"
#include "../strategy/exchange_choice.h"
#include "plan.h"

static int ceil_div(int a, int b) { return a / b + (a % b != 0); } /* a, b >= 1; no overflow */

bool plan_local_geometry(const plan_env *env, const pcnn_layer *l, const int *parts,
                         plan_geometry *g)
{
    memset(g, 0, sizeof *g);
    const shape out = l->out;
    const shape in = l->num_inputs ? l->inputs[0]->out : l->out;
    const int Y[3] = {out.d, out.h, out.w}, X[3] = {in.d, in.h, in.w};
    int k = 0, s = 1, p = 0;
    bool volume = false;
    const bool windowed = clone_window(l, &k, &s, &p, &volume);
    g->n = ceil_div(env->batch, parts[LAYOUT_N]);
    g->interior = 1;
    for (int dim = 0; dim < 3; dim++) {
        const int G = parts[dim + 1];
        if (G > Y[dim] || G > X[dim]) return false;
        g->out[dim] = ceil_div(Y[dim], G);
        g->in[dim] = ceil_div(X[dim], G);
        const bool spans = windowed && (volume || dim > 0);
        if (G == 1 || !spans) continue;
        int inner = Y[dim];
        for (int q = 0; q < G; q++) {
            int a0, a1, b0, b1, lo, hi, i0, i1, blo, bhi;
            layout_block(X[dim], G, q, &a0, &a1);
            layout_block(Y[dim], G, q, &b0, &b1);
            halo_forward_widths(X[dim], a0, a1, b0, b1, k, s, p, &lo, &hi);
            /* The halo comes from the immediate neighbours only. */
            int n0, n1;
            if (q > 0) {
                layout_block(X[dim], G, q - 1, &n0, &n1);
                if (lo > n1 - n0) return false;
            }
            if (q + 1 < G) {
                layout_block(X[dim], G, q + 1, &n0, &n1);
                if (hi > n1 - n0) return false;
            }
            halo_backward_widths(Y[dim], a0, a1, b0, b1, k, s, p, &blo, &bhi);
            halo_interior(X[dim], a0, a1, b0, b1, k, s, p, &i0, &i1);
            if (lo + hi > g->halo_fwd[dim]) g->halo_fwd[dim] = lo + hi;
            if (blo + bhi > g->halo_bwd[dim]) g->halo_bwd[dim] = blo + bhi;
            const int own = i1 > i0 ? i1 - i0 : 0;
            if (own < inner) inner = own;
        }
        g->interior *= (double)inner / (double)g->out[dim];
    }
    double in_box = 1, out_box = 1;
    for (int dim = 0; dim < 3; dim++) {
        in_box *= g->in[dim] + g->halo_fwd[dim];
        out_box *= g->out[dim];
    }
    g->bytes = 4.0 * g->n * ((double)out.c * out_box * 2 + (double)in.c * in_box) +
               16.0 * (double)l->num_params;
    return true;
}

static double link_beta(const pcnn_perfmodel *m)
{
    return m->knobs.beta > 0 ? m->knobs.beta
           : m->knobs.link_gbits > 0 ? 8e-9 / m->knobs.link_gbits : 0;
}

static double coll(const plan_env *env, pcnn_collective c, int ranks, double bytes)
{
    const pcnn_perfmodel *m = env->model;
    return perf_coll_time(&m->link, c, ranks, bytes, link_beta(m), m->knobs.alpha);
}

static double nonneg(double x) { return x > 0 ? x : 0; }

/* Forward, weight-gradient and input-gradient seconds of n whole samples
 * scaled to a share `frac` of each sample. */
static pcnn_status compute_times(const plan_env *env, const pcnn_layer *l, int n, double frac,
                                 double t[3], const char *func)
{
    pcnn_perfmodel *m = env->model;
    if (env->table) {
        const perf_layer *p = &m->compute.layers[l->index];
        const double x = n * frac;
        t[0] = nonneg(perf_line(p->fwd, x));
        t[1] = nonneg(perf_line(p->bwd_w, x));
        t[2] = nonneg(perf_line(p->bwd_x, x));
        return PCNN_OK;
    }
    const bool dx = l->num_inputs && !layer_is_input(l->inputs[0]);
    const double f = perf_regressor_time(m, l, n, 0, dx);
    const double w = perf_regressor_time(m, l, n, 1, false);
    const double full = perf_regressor_time(m, l, n, 1, dx);
    if (isnan(f) || isnan(w) || isnan(full)) {
        char name[64];
        return func ? error_set(PCNN_ERR_INVALID_STATE, func,
                                "%s: the model has no compute calibration of this network "
                                "(pcnn_perfmodel_calibrate_compute on a finalized twin) and no "
                                "regressor for it", layer_name(l, name, sizeof name))
                    : PCNN_ERR_INVALID_STATE;
    }
    t[0] = nonneg(f) * frac;
    t[1] = nonneg(w) * frac;
    t[2] = nonneg(full - w) * frac;
    return PCNN_OK;
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

/* One dimension's halo after another (PCNN_OPT_HALO_SCHEDULE 0): two
 * messages per split dimension, each a face of the local box. */
static double halo_seconds(const plan_env *env, const plan_geometry *g, const int *widths,
                           const int *box, int channels)
{
    double t = 0;
    for (int dim = 0; dim < 3; dim++) {
        if (!widths[dim]) continue;
        double face = 4.0 * g->n * channels;
        for (int o = 0; o < 3; o++)
            if (o != dim) face *= box[o];
        t += 2 * coll(env, PCNN_COLL_SENDRECV, 2, face * widths[dim] / 2.0);
    }
    return t;
}

/* Does finalize run l on its input's block in place (graph/spatial.h)?  A
 * split convolution of stride 1 and padding (k - 1) / 2 (its blocks of
 * input and output then coincide) with an interior on every rank, where
 * that pays (parallel/halo.h). */
static bool runs_in_place(const pcnn_layer *l, const plan_geometry *g, int group)
{
    int k, s, p;
    bool volume;
    if (group < 2 || !clone_window(l, &k, &s, &p, &volume) || g->interior <= 0) return false;
    const char *kind = l->ops->kind;
    const int window = k * k * (volume ? k : 1);
    return (strcmp(kind, "conv2d") == 0 || strcmp(kind, "conv3d") == 0) && s == 1 &&
           2 * p == k - 1 && halo_in_place_pays(1 - g->interior, l->out.c, window);
}

pcnn_status plan_candidate_costs(const plan_env *env, const pcnn_layer *l, plan_candidate *c,
                                 const char *func)
{
    plan_geometry g;
    c->compute = c->halo = c->gradient = c->bytes = 0;
    if (!plan_local_geometry(env, l, c->parts, &g)) {
        char name[64];
        return func ? error_set(PCNN_ERR_SHAPE, func, "%s does not fit {%d, %d, %d, %d}",
                                layer_name(l, name, sizeof name), c->parts[0], c->parts[1],
                                c->parts[2], c->parts[3])
                    : PCNN_ERR_SHAPE;
    }
    c->bytes = g.bytes;
    if (l->index == 0) return PCNN_OK; /* the input: its copy is in the step's overhead */
    const shape out = l->out;
    const shape in = l->num_inputs ? l->inputs[0]->out : l->out;
    double frac = 1;
    frac *= (double)g.out[0] / out.d * g.out[1] / out.h * g.out[2] / out.w;
    double t[3] = {0, 0, 0};
    TRY(compute_times(env, l, g.n, frac, t, func));
    c->compute = t[0] + t[1] + t[2];
    const double hf = halo_seconds(env, &g, g.halo_fwd, g.in, in.c);
    const double hb = halo_seconds(env, &g, g.halo_bwd, g.out, out.c);
    const int group = c->parts[1] * c->parts[2] * c->parts[3];
    const bool in_place = runs_in_place(l, &g, group);
    /* Seed 002's overlap (spec A.10): the forward halo hides behind the
     * interior (in place: the whole block), the backward one behind the
     * weight gradient. */
    const double hidden = in_place ? t[0] : g.interior * t[0];
    c->halo = env->halo_overlap ? nonneg(hf - hidden) + nonneg(hb - t[1]) : hf + hb;
    if (in_place) {
        /* No copy: the border cells are computed again, on the halo. */
        c->halo += (1 - g.interior) * (t[0] + t[1] + t[2]);
    } else if (group > 1 && g.interior < 1) {
        /* A split windowed layer stages its halo-extended input box, and
         * its gradient back: copies at about the summation's speed. */
        double box = 4.0 * g.n * in.c;
        for (int dim = 0; dim < 3; dim++) box *= g.in[dim] + g.halo_fwd[dim];
        c->halo += 2 * env->model->link.gamma * box;
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
    const double count = (double)l->num_params, bytes = 4.0 * count;
    if (P <= 1) return update_seconds(env, count);
    const double own = ceil(count / P);
    switch ((int)kind) {
    case PCNN_EXCHANGE_ALLREDUCE:
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
        return coll(env, PCNN_COLL_ALLTOALL, P, 4.0 * F * b) +
               coll(env, PCNN_COLL_ALLGATHER, P, 4.0 * K * env->batch) +
               update_seconds(env, K * ceil(F / P) + (d.bias ? K : 0)) +
               coll(env, PCNN_COLL_ALLGATHER, P, 4.0 * K * F);
    }
    default:
        return INFINITY;
    }
}

double plan_shuffle_cost(const plan_env *env, const pcnn_layer *l, const int *a, const int *b,
                         int groups)
{
    if (memcmp(a, b, LAYOUT_DIMS * sizeof(int)) == 0) return 0;
    const int P = env->ranks;
    int start[PLAN_MAX_GROUPS], count[PLAN_MAX_GROUPS];
    if (groups > PLAN_MAX_GROUPS) return INFINITY;
    for (int q = 0; q < groups; q++) {
        int lo, hi;
        layout_block(env->batch, groups, q, &lo, &hi);
        start[q] = lo;
        count[q] = hi - lo;
    }
    const sample_split split = {.groups = groups, .start = start, .count = count};
    double worst = 0;
    for (int r = 0; r < P; r++) {
        const box x = layout_box(a, r, &split, l->out.d, l->out.h, l->out.w);
        const box y = layout_box(b, r, &split, l->out.d, l->out.h, l->out.w);
        box both;
        const double kept = box_intersect(&x, &y, &both) ? (double)box_volume(&both) : 0;
        const double sent = (double)box_volume(&x) - kept, got = (double)box_volume(&y) - kept;
        if (sent > worst) worst = sent;
        if (got > worst) worst = got;
    }
    /* The output forward, its gradient backward. */
    return 2 * coll(env, PCNN_COLL_ALLTOALL, P, 4.0 * l->out.c * worst);
}

static bool split_parts(const int *p) { return p[LAYOUT_D] * p[LAYOUT_H] * p[LAYOUT_W] > 1; }

static double sum3(const double t[3]) { return t[0] + t[1] + t[2]; }

/* The dense layer that may fold flatten l in (graph/spatial_dense.c), with
 * every rank holding every sample (one group), or NULL. */
static const pcnn_layer *folding_dense(const plan_env *env, const pcnn_layer *l, int groups)
{
    if (groups != 1 || strcmp(l->ops->kind, "flatten") != 0 || l->num_consumers != 1 ||
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
