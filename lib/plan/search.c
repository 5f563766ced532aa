/* The cheapest plan (spec A.11): per layer its fitting candidates and
 * their costs, edges weighted by shuffles, solved exactly by plan_search
 * once per grouping of the input's samples (every layer's P_N must be a
 * multiple of the input's), or once per uniform distribution. */
#include <math.h>
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../strategy/plan_search.h"
#include "plan.h"

#define MAX_CANDIDATES 256

void plan_record_free(void *record)
{
    plan_record *r = record;
    if (!r) return;
    for (int i = 0; r->per && i < r->layers; i++) mem_free(r->per[i].candidates);
    mem_free(r->per);
    mem_free(r->exchanges);
    mem_free(r);
}

typedef struct search_ctx {
    const plan_env *env;
    plan_layer_record *per;
    int groups;
} search_ctx;

static double layer_cost(void *ctx, int layer, int choice)
{
    const search_ctx *s = ctx;
    return plan_candidate_cost(&s->per[layer].candidates[choice]);
}

static double edge_cost(void *ctx, int parent, int parent_choice, int child, int child_choice)
{
    const search_ctx *s = ctx;
    const int *a = s->per[parent].candidates[parent_choice].parts;
    const int *b = s->per[child].candidates[child_choice].parts;
    if (s->per[child].role == PLAN_INHERIT && memcmp(a, b, sizeof(int) * LAYOUT_DIMS))
        return INFINITY;
    return plan_edge_cost(s->env, s->env->layers->items[parent], s->env->layers->items[child], a,
                          b, s->groups);
}

static void free_layers(plan_layer_record *per, int L)
{
    for (int i = 0; per && i < L; i++) mem_free(per[i].candidates);
    mem_free(per);
}

/* The candidates of every layer for one variant: `uniform` NULL (mixed,
 * the input in `groups` sample groups), or one distribution for all.
 * *feasible false when some layer has none. */
static pcnn_status build_layers(const plan_env *env, int groups, const int *uniform,
                                plan_layer_record *per, bool *feasible, const char *func)
{
    const int L = env->layers->count;
    int(*parts)[LAYOUT_DIMS] = mem_calloc(MAX_CANDIDATES, sizeof *parts);
    if (!parts) return error_set(PCNN_ERR_OUT_OF_MEMORY, func, "plan candidates");
    pcnn_status st = PCNN_OK;
    *feasible = true;
    for (int i = 0; i < L && st == PCNN_OK && *feasible; i++) {
        const pcnn_layer *l = env->layers->items[i];
        plan_layer_record *r = &per[i];
        r->role = plan_layer_role(env, l);
        int n = plan_layer_candidates(env, l, groups, parts, MAX_CANDIDATES);
        if (uniform && n > 0) {
            /* The one distribution, or its parent's (inheriting), or
             * {P, 1, 1, 1} for the layers that cannot split. */
            const int *want = r->role == PLAN_SAMPLE ? parts[0]
                              : r->role == PLAN_INHERIT
                                  ? per[l->inputs[0]->index].candidates[0].parts
                                  : uniform;
            int keep = -1;
            for (int c = 0; c < n; c++)
                if (!memcmp(parts[c], want, sizeof parts[c])) keep = c;
            if (keep < 0) n = 0;
            else {
                memmove(parts[0], parts[keep], sizeof parts[0]);
                n = 1;
            }
        }
        if (n == 0) {
            *feasible = false;
            break;
        }
        r->candidates = mem_calloc((size_t)n, sizeof *r->candidates);
        if (!r->candidates) {
            st = error_set(PCNN_ERR_OUT_OF_MEMORY, func, "plan candidates");
            break;
        }
        r->count = n;
        const double folded = plan_box_dense_saving(env, l, groups);
        for (int c = 0; c < n && st == PCNN_OK; c++) {
            memcpy(r->candidates[c].parts, parts[c], sizeof parts[c]);
            st = plan_candidate_costs(env, l, &r->candidates[c], func);
            r->candidates[c].compute -= folded; /* plan_edge_cost adds it back unfolded */
        }
    }
    mem_free(parts);
    return st;
}

/* Search one variant; *total INFINITY when it has no plan. */
static pcnn_status search_variant(const plan_env *env, int groups, const int *uniform,
                                  plan_layer_record **per_out, double *total, int *method,
                                  const char *func)
{
    const int L = env->layers->count;
    *total = INFINITY;
    plan_layer_record *per = mem_calloc((size_t)L, sizeof *per);
    int *choices = mem_calloc((size_t)L, sizeof *choices);
    int *offset = mem_calloc((size_t)L + 1, sizeof *offset);
    size_t edges = 1;
    for (int i = 0; i < L; i++) edges += (size_t)env->layers->items[i]->num_inputs;
    int *parents = mem_calloc(edges, sizeof *parents);
    int *choice = mem_calloc((size_t)L, sizeof *choice);
    pcnn_status st = PCNN_OK;
    bool feasible = false;
    if (!per || !choices || !offset || !parents || !choice)
        st = error_set(PCNN_ERR_OUT_OF_MEMORY, func, "plan search");
    if (st == PCNN_OK) st = build_layers(env, groups, uniform, per, &feasible, func);
    if (st == PCNN_OK && feasible) {
        int e = 0;
        for (int i = 0; i < L; i++) {
            const pcnn_layer *l = env->layers->items[i];
            choices[i] = per[i].count;
            offset[i] = e;
            for (int j = 0; j < l->num_inputs; j++) parents[e++] = l->inputs[j]->index;
        }
        offset[L] = e;
        search_ctx ctx = {.env = env, .per = per, .groups = groups};
        const plan_problem problem = {.layers = L, .choices = choices, .parent_offset = offset,
                                      .parent_index = parents, .layer_cost = layer_cost,
                                      .edge_cost = edge_cost, .ctx = &ctx};
        plan_method how = PLAN_EXACT;
        double best = INFINITY;
        const pcnn_status found = plan_search(&problem, 0, choice, &best, &how);
        if (found == PCNN_OK) {
            *total = best;
            *method = (int)how;
            for (int i = 0; i < L; i++) {
                const pcnn_layer *l = env->layers->items[i];
                per[i].chosen = choice[i];
                per[i].shuffle_in = 0;
                for (int j = 0; j < l->num_inputs; j++) {
                    const int q = l->inputs[j]->index;
                    per[i].shuffle_in += edge_cost(&ctx, q, choice[q], i, choice[i]);
                }
            }
        } else if (found == PCNN_ERR_SHAPE) {
            error_clear(); /* this variant has no plan: another may */
        } else {
            st = found;
        }
    }
    mem_free(choices);
    mem_free(offset);
    mem_free(parents);
    mem_free(choice);
    if (st == PCNN_OK && isfinite(*total)) *per_out = per;
    else free_layers(per, L);
    return st;
}

/* Keep the cheaper of the record's plan and a variant's (the first wins ties). */
static void keep_best(plan_record *r, plan_layer_record *per, double total, int method,
                      int groups)
{
    if (per && total < r->predicted) {
        free_layers(r->per, r->layers);
        r->per = per;
        r->predicted = total;
        r->method = method;
        r->groups = groups;
    } else {
        free_layers(per, r->layers);
    }
}

pcnn_status plan_compute(const plan_env *env, bool mixed, plan_record **out, const char *func)
{
    const int L = env->layers->count, P = env->ranks;
    plan_record *r = mem_calloc(1, sizeof *r);
    if (!r) return error_set(PCNN_ERR_OUT_OF_MEMORY, func, "plan");
    *r = (plan_record){.layers = L, .ranks = P, .batch = env->batch, .mixed = mixed,
                       .predicted = INFINITY, .sample_only = INFINITY};
    int variants[PLAN_MAX_UNIFORM][LAYOUT_DIMS];
    const int nv = plan_factorisations(P, variants, PLAN_MAX_UNIFORM);
    pcnn_status st = PCNN_OK;
    /* Every uniform distribution (the report lists them; sample
     * parallelism first), then, mixed, one search per grouping of the
     * input (P_N of the factorisations).  The first cheapest wins ties. */
    for (int v = 0; v < nv && st == PCNN_OK; v++) {
        plan_layer_record *per = NULL;
        double total = INFINITY;
        int method = 0;
        /* Sample parallelism alone may take the FC gradient (costs.c). */
        plan_env uniform = *env;
        uniform.sample_path = variants[v][LAYOUT_N] == P;
        st = search_variant(&uniform, variants[v][LAYOUT_N], variants[v], &per, &total, &method,
                            func);
        if (st != PCNN_OK) break;
        memcpy(r->uniform_parts[v], variants[v], sizeof variants[v]);
        r->uniform_total[v] = total;
        r->uniform_count = v + 1;
        if (v == 0) r->sample_only = total;
        /* Mixed plans come from the searches below, but sample parallelism
         * (the first variant) is one too, priced there with the FC gradient
         * the searches' split-or-not candidates cannot assume. */
        if (mixed && v > 0) free_layers(per, L);
        else keep_best(r, per, total, method, variants[v][LAYOUT_N]);
        r->variants++;
    }
    int last_groups = 0;
    for (int v = 0; mixed && v < nv && st == PCNN_OK; v++) {
        const int groups = variants[v][LAYOUT_N];
        if (groups == last_groups) continue;
        last_groups = groups;
        plan_layer_record *per = NULL;
        double total = INFINITY;
        int method = 0;
        st = search_variant(env, groups, NULL, &per, &total, &method, func);
        if (st == PCNN_OK) keep_best(r, per, total, method, groups);
        r->variants++;
    }
    if (st == PCNN_OK && !r->per)
        st = error_set(PCNN_ERR_SHAPE, func, "no distribution fits every layer (memory limit "
                       "%.0f MiB, spatial dimensions mask %d, largest spatial group %d)",
                       env->memory_cap / 1048576.0, env->dims, env->max_spatial);
    if (st != PCNN_OK) {
        plan_record_free(r);
        return st;
    }
    *out = r;
    return PCNN_OK;
}
