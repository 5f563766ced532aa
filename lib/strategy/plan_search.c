/* Exact cheapest plan over a layered DAG by dynamic programming over the
 * open layers' choices, with seed 002's longest-path rule as the fallback
 * for graphs too wide for it (plan_search.h). */
#include "plan_search.h"

#include <math.h>
#include <stdint.h>

#include "core/error.h"
#include "core/memory.h"

enum { DEFAULT_MAX_STATES = 1 << 16 };

static int parents_of(const plan_problem *p, int layer, const int **list)
{
    *list = p->parent_index + p->parent_offset[layer];
    return p->parent_offset[layer + 1] - p->parent_offset[layer];
}

static pcnn_status check_problem(const plan_problem *p)
{
    REQUIRE(p->layers >= 1, PCNN_ERR_INVALID_ARGUMENT, "a plan needs at least one layer");
    REQUIRE(p->choices && p->parent_offset && p->layer_cost, PCNN_ERR_INVALID_ARGUMENT,
            "plan problem without choices, parents or layer costs");
    REQUIRE(p->parent_offset[0] == 0, PCNN_ERR_INVALID_ARGUMENT, "parent offsets must start at 0");
    for (int l = 0; l < p->layers; l++) {
        REQUIRE(p->choices[l] >= 1, PCNN_ERR_INVALID_ARGUMENT, "layer %d has no candidate", l);
        const int *par;
        int n = p->parent_offset[l + 1] - p->parent_offset[l];
        REQUIRE(n >= 0, PCNN_ERR_INVALID_ARGUMENT, "parent offsets of layer %d decrease", l);
        REQUIRE(n == 0 || p->parent_index, PCNN_ERR_INVALID_ARGUMENT, "parent list is NULL");
        n = parents_of(p, l, &par);
        for (int i = 0; i < n; i++)
            REQUIRE(par[i] >= 0 && par[i] < l, PCNN_ERR_INVALID_ARGUMENT,
                    "layer %d has parent %d: layers must be in topological order", l, par[i]);
    }
    return PCNN_OK;
}

static pcnn_status checked_cost(double cost, int layer, double *out)
{
    REQUIRE(!isnan(cost) && cost >= 0, PCNN_ERR_INVALID_ARGUMENT,
            "cost %g at layer %d: costs must be >= 0 (INFINITY rules a candidate out)", cost,
            layer);
    *out = cost;
    return PCNN_OK;
}

static double edge(const plan_problem *p, int parent, int pc, int child, int cc)
{
    return p->edge_cost ? p->edge_cost(p->ctx, parent, pc, child, cc) : 0.0;
}

double plan_cost(const plan_problem *p, const int *choice)
{
    double total = 0;
    for (int l = 0; l < p->layers; l++) {
        total += p->layer_cost(p->ctx, l, choice[l]);
        const int *par;
        int n = parents_of(p, l, &par);
        for (int i = 0; i < n; i++) total += edge(p, par[i], choice[par[i]], l, choice[l]);
    }
    return total;
}

/* ---- exact search over the open layers ---------------------------------- */

/* One step's states: the open layers after placing a layer, and for every
 * assignment of them (mixed radix, first open layer fastest) the best cost
 * and how it was reached. */
typedef struct {
    int open_count;
    int *open;      /* layer indices, ascending */
    size_t states;
    double *cost;
    uint32_t *from; /* previous step's state */
    int *pick;      /* the placed layer's choice */
} dp_step;

static int digit_of(const plan_problem *p, const dp_step *s, size_t state, int layer)
{
    for (int i = 0; i < s->open_count; i++) {
        if (s->open[i] == layer) return (int)(state % (size_t)p->choices[layer]);
        state /= (size_t)p->choices[s->open[i]];
    }
    return -1;
}

static pcnn_status open_layers(const plan_problem *p, const int *last_child, int placed,
                               const dp_step *before, size_t max_states, dp_step *s)
{
    s->open = mem_calloc((size_t)placed + 1, sizeof *s->open);
    if (!s->open) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "out of memory for the plan search");
    s->states = 1;
    int count = before ? before->open_count : 0;
    for (int i = 0; i <= count; i++) {
        int l = i < count ? before->open[i] : placed;
        if (last_child[l] <= placed) continue;
        s->open[s->open_count++] = l;
        if (s->states > max_states / (size_t)p->choices[l]) {
            s->states = max_states + 1;
            return PCNN_OK; /* too wide: the caller falls back */
        }
        s->states *= (size_t)p->choices[l];
    }
    return PCNN_OK;
}

static pcnn_status alloc_states(dp_step *s)
{
    s->cost = mem_calloc(s->states, sizeof *s->cost);
    s->from = mem_calloc(s->states, sizeof *s->from);
    s->pick = mem_calloc(s->states, sizeof *s->pick);
    if (!s->cost || !s->from || !s->pick)
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "out of memory for the plan search");
    for (size_t i = 0; i < s->states; i++) s->cost[i] = INFINITY;
    return PCNN_OK;
}

/* Place layer v: every previous state x every choice of v. */
static pcnn_status place_layer(const plan_problem *p, int v, const dp_step *before, dp_step *s)
{
    const int *par;
    int n_par = parents_of(p, v, &par);
    size_t before_states = before ? before->states : 1;
    for (size_t prev = 0; prev < before_states; prev++) {
        double base = before ? before->cost[prev] : 0.0;
        if (isinf(base)) continue;
        for (int c = 0; c < p->choices[v]; c++) {
            double cost = 0;
            TRY(checked_cost(p->layer_cost(p->ctx, v, c), v, &cost));
            for (int i = 0; i < n_par; i++) {
                double e = 0;
                TRY(checked_cost(edge(p, par[i], digit_of(p, before, prev, par[i]), v, c), v, &e));
                cost += e;
            }
            cost += base;
            size_t state = 0, stride = 1;
            for (int i = 0; i < s->open_count; i++) {
                int l = s->open[i];
                int d = l == v ? c : digit_of(p, before, prev, l);
                state += (size_t)d * stride;
                stride *= (size_t)p->choices[l];
            }
            if (cost < s->cost[state]) {
                s->cost[state] = cost;
                s->from[state] = (uint32_t)prev;
                s->pick[state] = c;
            }
        }
    }
    return PCNN_OK;
}

static void free_steps(dp_step *steps, int count)
{
    for (int i = 0; i < count; i++) {
        mem_free(steps[i].open);
        mem_free(steps[i].cost);
        mem_free(steps[i].from);
        mem_free(steps[i].pick);
    }
    mem_free(steps);
}

/* PCNN_OK with *too_wide set when the states would exceed max_states. */
static pcnn_status search_exact(const plan_problem *p, const int *last_child, size_t max_states,
                                int *choice, int *too_wide)
{
    dp_step *steps = mem_calloc((size_t)p->layers, sizeof *steps);
    if (!steps) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "out of memory for the plan search");
    pcnn_status st = PCNN_OK;
    *too_wide = 0;
    for (int v = 0; v < p->layers && st == PCNN_OK; v++) {
        const dp_step *before = v ? &steps[v - 1] : NULL;
        st = open_layers(p, last_child, v, before, max_states, &steps[v]);
        if (st == PCNN_OK && steps[v].states > max_states) {
            *too_wide = 1;
            break;
        }
        if (st == PCNN_OK) st = alloc_states(&steps[v]);
        if (st == PCNN_OK) st = place_layer(p, v, before, &steps[v]);
    }
    if (st == PCNN_OK && !*too_wide) {
        /* The last step has no open layer left: one state. */
        size_t state = 0;
        for (int v = p->layers - 1; v >= 0; v--) {
            choice[v] = steps[v].pick[state];
            state = steps[v].from[state];
        }
    }
    free_steps(steps, p->layers);
    return st;
}

/* ---- seed 002's longest-path rule --------------------------------------- */

/* Weight of a layer for "longest": its cheapest finite candidate. */
static pcnn_status layer_weight(const plan_problem *p, int l, double *w)
{
    *w = INFINITY;
    for (int c = 0; c < p->choices[l]; c++) {
        double cost = 0;
        TRY(checked_cost(p->layer_cost(p->ctx, l, c), l, &cost));
        if (cost < *w) *w = cost;
    }
    if (isinf(*w)) *w = 0; /* no feasible candidate: the final cost says so */
    return PCNN_OK;
}

/* The source-to-sink path with the most unfixed weight (then the most
 * unfixed layers); returns its length, layers in path[] from the source. */
static int longest_unfixed_path(const plan_problem *p, const double *weight, const int *fixed,
                                const int *last_child, double *sum, int *count, int *back,
                                int *path)
{
    int best = -1;
    for (int l = 0; l < p->layers; l++) {
        const int *par;
        int n = parents_of(p, l, &par);
        int from = -1;
        for (int i = 0; i < n; i++) {
            int q = par[i];
            if (from < 0 || sum[q] > sum[from] || (sum[q] == sum[from] && count[q] > count[from]))
                from = q;
        }
        back[l] = from;
        int open = fixed[l] < 0;
        sum[l] = (from >= 0 ? sum[from] : 0) + (open ? weight[l] : 0);
        count[l] = (from >= 0 ? count[from] : 0) + open;
        if (last_child[l] < 0 &&
            (best < 0 || sum[l] > sum[best] || (sum[l] == sum[best] && count[l] > count[best])))
            best = l;
    }
    int len = 0;
    for (int l = best; l >= 0; l = back[l]) path[len++] = l;
    for (int i = 0; i < len / 2; i++) {
        int t = path[i];
        path[i] = path[len - 1 - i];
        path[len - 1 - i] = t;
    }
    return len;
}

/* A path layer's own cost under choice c, with the edges to already fixed
 * neighbours off the path. */
static double cost_with_fixed(const plan_problem *p, const int *fixed, const int *on_path, int v,
                              int c)
{
    if (fixed[v] >= 0 && fixed[v] != c) return INFINITY;
    double cost = p->layer_cost(p->ctx, v, c);
    const int *par;
    int n = parents_of(p, v, &par);
    for (int i = 0; i < n; i++)
        if (!on_path[par[i]] && fixed[par[i]] >= 0) cost += edge(p, par[i], fixed[par[i]], v, c);
    for (int child = v + 1; child < p->layers; child++) {
        if (on_path[child] || fixed[child] < 0) continue;
        n = parents_of(p, child, &par);
        for (int i = 0; i < n; i++)
            if (par[i] == v) cost += edge(p, v, c, child, fixed[child]);
    }
    return cost;
}

/* Shortest path along one line of layers (seed 002's layered graph). */
static pcnn_status fix_path(const plan_problem *p, const int *path, int len, int *fixed,
                            int *on_path, int max_choices)
{
    double *best = mem_calloc((size_t)len * (size_t)max_choices, sizeof *best);
    int *from = mem_calloc((size_t)len * (size_t)max_choices, sizeof *from);
    if (!best || !from) {
        mem_free(best);
        mem_free(from);
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "out of memory for the plan search");
    }
    for (int i = 0; i < len; i++) on_path[path[i]] = 1;
    for (int i = 0; i < len; i++) {
        int v = path[i];
        for (int c = 0; c < p->choices[v]; c++) {
            double own = cost_with_fixed(p, fixed, on_path, v, c), b = INFINITY;
            int arg = 0;
            if (i == 0) b = 0;
            for (int q = 0; i > 0 && q < p->choices[path[i - 1]]; q++) {
                double t = best[(size_t)(i - 1) * max_choices + q] + edge(p, path[i - 1], q, v, c);
                if (t < b) b = t, arg = q;
            }
            best[(size_t)i * max_choices + c] = b + own;
            from[(size_t)i * max_choices + c] = arg;
        }
    }
    int c = 0;
    for (int q = 1; q < p->choices[path[len - 1]]; q++)
        if (best[(size_t)(len - 1) * max_choices + q] < best[(size_t)(len - 1) * max_choices + c])
            c = q;
    for (int i = len - 1; i >= 0; i--) {
        fixed[path[i]] = c;
        c = from[(size_t)i * max_choices + c];
    }
    for (int i = 0; i < len; i++) on_path[path[i]] = 0;
    mem_free(best);
    mem_free(from);
    return PCNN_OK;
}

static pcnn_status search_longest_paths(const plan_problem *p, const int *last_child, int *choice)
{
    size_t n = (size_t)p->layers;
    double *weight = mem_calloc(n, sizeof *weight), *sum = mem_calloc(n, sizeof *sum);
    int *count = mem_calloc(n, sizeof *count), *back = mem_calloc(n, sizeof *back);
    int *path = mem_calloc(n, sizeof *path), *on_path = mem_calloc(n, sizeof *on_path);
    pcnn_status st = PCNN_OK;
    if (!weight || !sum || !count || !back || !path || !on_path)
        st = FAIL(PCNN_ERR_OUT_OF_MEMORY, "out of memory for the plan search");
    int max_choices = 1;
    for (int l = 0; st == PCNN_OK && l < p->layers; l++) {
        choice[l] = -1;
        if (p->choices[l] > max_choices) max_choices = p->choices[l];
        st = layer_weight(p, l, &weight[l]);
    }
    for (int left = p->layers; st == PCNN_OK && left > 0;) {
        int len = longest_unfixed_path(p, weight, choice, last_child, sum, count, back, path);
        st = fix_path(p, path, len, choice, on_path, max_choices);
        left = 0;
        for (int l = 0; l < p->layers; l++) left += choice[l] < 0;
    }
    mem_free(weight);
    mem_free(sum);
    mem_free(count);
    mem_free(back);
    mem_free(path);
    mem_free(on_path);
    return st;
}

pcnn_status plan_search(const plan_problem *p, size_t max_states, int *choice, double *total,
                        plan_method *method)
{
    REQUIRE(p && choice && total && method, PCNN_ERR_INVALID_ARGUMENT,
            "plan_search needs a problem and outputs");
    TRY(check_problem(p));
    if (max_states == 0) max_states = DEFAULT_MAX_STATES;
    if (max_states > UINT32_MAX) max_states = UINT32_MAX;
    int *last_child = mem_calloc((size_t)p->layers, sizeof *last_child);
    if (!last_child) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "out of memory for the plan search");
    for (int l = 0; l < p->layers; l++) last_child[l] = -1;
    for (int l = 0; l < p->layers; l++) {
        const int *par;
        int n = parents_of(p, l, &par);
        for (int i = 0; i < n; i++) last_child[par[i]] = l;
    }
    int too_wide = 0;
    pcnn_status st = search_exact(p, last_child, max_states, choice, &too_wide);
    *method = PLAN_EXACT;
    if (st == PCNN_OK && too_wide) {
        *method = PLAN_LONGEST_PATHS;
        st = search_longest_paths(p, last_child, choice);
    }
    mem_free(last_child);
    TRY(st);
    *total = plan_cost(p, choice);
    REQUIRE(!isinf(*total), PCNN_ERR_SHAPE,
            "no plan fits: every choice of some layer is ruled out");
    return PCNN_OK;
}
