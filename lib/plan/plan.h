/* The automatic parallel strategy (seed 002 section V-C; spec A.11, WP4):
 * candidates per layer, their modelled costs, the cheapest plan by
 * strategy/plan_search.h, and its application and report.  The room sits
 * above perf: it reads the model's tables (perf/perf.h) and the network
 * through graph/graph.h. */
#ifndef PCNN_PLAN_PLAN_H
#define PCNN_PLAN_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../parallel/layout.h"
#include "../perf/perf.h"

#define PLAN_MAX_UNIFORM 256 /* factorisations of the ranks considered */

/* One candidate distribution of a layer and its modelled seconds per
 * training step on one rank. */
typedef struct plan_candidate {
    int parts[LAYOUT_DIMS];
    double compute;  /* forward + backward at the local box */
    double halo;     /* exposed halo exchange, staging copies, spatial batch-norm reductions */
    double gradient; /* the layer's weight-gradient exchange (the same for every candidate) */
    double bytes;    /* activations, gradients and parameter state on one rank */
} plan_candidate;

static inline double plan_candidate_cost(const plan_candidate *c)
{
    return c->compute + c->halo + c->gradient;
}

/* What planning reads: the network, the model, the options. */
typedef struct plan_env {
    const layer_list *layers;
    const pcnn_layer *output;
    pcnn_perfmodel *model;
    int ranks, batch;
    int max_spatial;     /* largest spatial group */
    int dims;            /* mask: 1 D, 2 H, 4 W */
    double memory_cap;   /* bytes; 0: none */
    bool halo_overlap;
    bool table;          /* the model's compute table is this network's */
    pcnn_exchange exchange; /* the network's default gradient exchange */
    double value;           /* bytes of an exchanged gradient or parameter: 2 bf16, else 4 */
    bool sample_path;       /* pricing a path that splits no layer (search.c) */
} plan_env;

/* How a layer chooses (candidates.c). */
typedef enum {
    PLAN_FREE,     /* the input, convolutions and pools: any fitting candidate */
    PLAN_INHERIT,  /* element-wise and batch norm: its inputs' distribution */
    PLAN_SAMPLE    /* cannot be split, or the output: {P, 1, 1, 1} */
} plan_role;

plan_role plan_layer_role(const plan_env *env, const pcnn_layer *l);

/* The distributions of layer l that fit (spec A.11): P = P_N P_D P_H P_W
 * with P_N a multiple of `groups` (the input's sample groups), P_N <= the
 * batch, a spatial group within the mask and max_spatial, every split
 * dimension's blocks non-empty and at least the layer's halo, and memory
 * within the cap; sample parallelism first (it wins ties).  PLAN_SAMPLE
 * layers get {P, 1, 1, 1} only.  Writes at most `max` into parts, returns
 * how many fit. */
int plan_layer_candidates(const plan_env *env, const pcnn_layer *l, int groups,
                          int (*parts)[LAYOUT_DIMS], int max);

/* Every factorisation of P into 4 parts (in the order candidates take
 * them); returns the count, at most max. */
int plan_factorisations(int P, int (*parts)[LAYOUT_DIMS], int max);

/* Fill a candidate's costs and bytes (costs.c).  INVALID_STATE when the
 * model has no compute estimate for the layer. */
pcnn_status plan_candidate_costs(const plan_env *env, const pcnn_layer *l, plan_candidate *c,
                                 const char *func);

/* Seconds of the shuffle of layer l's output (forward) and its gradient
 * (backward) from distribution a to b, on `groups` sample groups: the
 * all-to-all of the rank that sends most.  0 when a equals b. */
double plan_shuffle_cost(const plan_env *env, const pcnn_layer *l, const int *a, const int *b,
                         int groups);
/* A dense layer after a flatten may fold it in (graph/spatial_dense.c:
 * with one sample group, a split input is multiplied on each rank's box,
 * no shuffle).  Its candidates are priced folded, at its compute on 1/P of
 * W for the whole batch, its weights exchanged by columns where the
 * all-to-all would take them; plan_box_dense_saving is what that takes off
 * the head's compute and exchange (0 where it cannot fold).
 * plan_edge_cost, from layer `parent` under parts a into `child` under b:
 * the shuffle of parent's output; into a flatten that folds, its two sums
 * over the ranks, and where it would fold but its input is not split, the
 * saving back. */
double plan_box_dense_saving(const plan_env *env, const pcnn_layer *l, int groups);
double plan_edge_cost(const plan_env *env, const pcnn_layer *parent, const pcnn_layer *child,
                      const int *a, const int *b, int groups);

/* One layer of a plan. */
typedef struct plan_layer_record {
    plan_role role;
    int count;
    plan_candidate *candidates;
    int chosen;
    double shuffle_in; /* seconds of the shuffles into the chosen candidate */
} plan_layer_record;

/* The gradient exchange of a parameterised layer, chosen by the model
 * (exchange_auto.c): every kind's modelled seconds per step, INFINITY
 * where the layer cannot take it. */
typedef struct plan_exchange_choice {
    int layer;
    pcnn_exchange chosen;
    double cost[3]; /* by pcnn_exchange: allreduce, all-to-all + all-gather, FC gradient */
} plan_exchange_choice;

/* Modelled seconds per step of layer l's weight-gradient exchange as
 * `kind` on env->ranks ranks at the global batch env->batch: its
 * collectives and the optimizer's update it implies (costs.c). */
double plan_exchange_cost(const plan_env *env, const pcnn_layer *l, pcnn_exchange kind);

/* A computed plan (apply.c): per layer its candidates and choice. */
typedef struct plan_record {
    int layers, ranks, batch, groups;
    bool mixed;
    int method;         /* plan_method */
    double predicted;   /* the plan's total */
    double sample_only; /* all {P, 1, 1, 1} */
    int variants;       /* searches run (one per input grouping / uniform candidate) */
    plan_layer_record *per;
    /* Every uniform distribution (one for all layers that can split, as
     * PCNN_OPT_PLAN_MIXED 0 plans) and its total (INFINITY: does not fit). */
    int uniform_count;
    int uniform_parts[PLAN_MAX_UNIFORM][LAYOUT_DIMS];
    double uniform_total[PLAN_MAX_UNIFORM];
    /* The exchanges PCNN_EXCHANGE_AUTO chose at finalize, or would choose
     * at a scheduler's batch (exchange_auto.c); per NULL: no distribution
     * planned yet. */
    int exchange_count, exchange_batch;
    plan_exchange_choice *exchanges;
    /* A re-plan for a scheduler's batch: its exchanges are applied, its
     * distribution is not (the network keeps the one it was finalized
     * with); idle is the
     * modelled step of today's rule, the batch on min(P, batch) ranks
     * sample-parallel, the others idle. */
    bool replan;
    double idle;
} plan_record;

void plan_record_free(void *record);

/* A hash of everything in the model that a plan depends on (apply.c). */
uint64_t plan_model_hash(const pcnn_perfmodel *m);

/* The planning environment of net for the model and a global batch
 * (apply.c); *mixed receives PCNN_OPT_PLAN_MIXED. */
pcnn_status plan_make_env(pcnn_net *net, pcnn_perfmodel *m, int batch, plan_env *env,
                          bool *mixed);

/* Collective: the model, the layers, the batch and the planning options
 * are rank 0's on every rank, else MISMATCH naming the first that
 * differs and the rank. */
pcnn_status plan_agree_inputs(pcnn_net *net, pcnn_perfmodel *model, int global_batch,
                              const char *func);

/* Rank 0's plan on every rank: the local status agreed, rank 0's chosen
 * distributions broadcast and marked chosen in r (timed). */
pcnn_status plan_share(pcnn_net *net, pcnn_status st, plan_record *r, int (*parts)[LAYOUT_DIMS],
                       const char *func);

/* Compute the plan (apply.c), locally. */
pcnn_status plan_compute(const plan_env *env, bool mixed, plan_record **out, const char *func);

/* The report's text (report.c); snprintf-style, returns the length. */
size_t plan_describe(const plan_record *r, const layer_list *layers, char *buf, size_t size);

#endif
