/* The search behind the automatic parallel strategy (seed 002 §V-C): every
 * layer picks one of its candidates (a distribution, an exchange, ...);
 * a plan costs the sum of the chosen candidates' costs plus, on every edge
 * of the network graph, the cost of moving data between the parent's and
 * the child's choices (a shuffle).  The cheapest plan is searched exactly.
 *
 * Seed 002 solves a line network by one shortest-path pass over a layered
 * graph, and a branching one by fixing its longest paths one after another
 * (a heuristic).  plan_search does the same pass but carries, instead of
 * one vertex per candidate, one state per assignment of the "open" layers
 * (already placed, with a child still to come): a ResNet keeps two open
 * layers (the skip and the main path), so the exact search stays a few
 * candidates squared per layer.  Only when the open states would exceed
 * `max_states` does it fall back to the seed's longest-path rule, which
 * is exact on line networks and a heuristic elsewhere. */
#ifndef PCNN_STRATEGY_PLAN_SEARCH_H
#define PCNN_STRATEGY_PLAN_SEARCH_H

#include <stddef.h>

#include "pcnn.h"

typedef struct plan_problem {
    int layers;               /* vertices, in topological order */
    const int *choices;       /* choices[l] >= 1 candidates of layer l */
    /* Parents of layer l: parent_index[parent_offset[l] .. parent_offset[l+1]),
     * each < l (topological order).  parent_offset has layers + 1 entries. */
    const int *parent_offset;
    const int *parent_index;
    /* Cost of layer l under candidate c; INFINITY rules a candidate out
     * (e.g. over the memory cap).  Finite costs must be >= 0. */
    double (*layer_cost)(void *ctx, int layer, int choice);
    /* Cost of the edge parent -> child under both choices (a shuffle; 0
     * when the distributions agree); INFINITY forbids the pair.  May be
     * NULL: edges then cost nothing. */
    double (*edge_cost)(void *ctx, int parent, int parent_choice, int child, int child_choice);
    void *ctx;
} plan_problem;

/* How plan_search found its plan. */
typedef enum { PLAN_EXACT = 0, PLAN_LONGEST_PATHS = 1 } plan_method;

/* Cheapest plan: choice[l] for every layer, *total its cost, *method how
 * it was found.  Ties go to the lower candidate index, so candidates listed
 * cheapest-method-first (sample before spatial) win ties, and every rank
 * computes the same plan from the same costs.  max_states bounds the exact
 * search's states per layer (0: a default of 1 << 16).  Errors:
 * INVALID_ARGUMENT (malformed problem, NaN or negative costs), SHAPE (every
 * plan has infinite cost), OUT_OF_MEMORY. */
pcnn_status plan_search(const plan_problem *problem, size_t max_states, int *choice,
                        double *total, plan_method *method);

/* Cost of a given plan (the objective plan_search minimises). */
double plan_cost(const plan_problem *problem, const int *choice);

#endif
