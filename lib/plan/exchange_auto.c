/* A performance model attached to a network (pcnn_net_set_perfmodel): the
 * planner the graph calls through its hook (graph.h, net_planner) to
 * choose PCNN_EXCHANGE_AUTO's gradient exchanges at finalize, and to
 * re-plan when a scheduler changes the batch. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../layers/dense.h"
#include "../parallel/exchange.h"
#include "plan.h"

static uint64_t identity(void *ctx)
{
    const uint64_t h = plan_model_hash(ctx);
    return h ? h : 1; /* 0 stands for "no model" */
}

/* The record the network keeps, made if it has none. */
static plan_record *record_of(pcnn_net *net)
{
    plan_record *r = net_plan_record(net);
    if (r) return r;
    r = mem_calloc(1, sizeof *r);
    if (!r) return NULL;
    r->ranks = net_comm(net) ? net_comm(net)->size : 1;
    r->predicted = r->sample_only = INFINITY;
    net_set_plan_record(net, r, plan_record_free);
    return r;
}

/* Every kind's cost for the layers with more than one allowed kind; the
 * cheapest in kinds (the current choice wins ties).  choices has room for
 * one entry per layer; returns how many were written. */
static int choose(const plan_env *env, pcnn_exchange *kinds, const unsigned *allowed,
                  plan_exchange_choice *choices)
{
    int count = 0;
    for (int i = 0; i < env->layers->count; i++) {
        const pcnn_layer *l = env->layers->items[i];
        if (!l->num_params || !(allowed[i] & (allowed[i] - 1))) continue; /* one kind */
        plan_exchange_choice *c = &choices[count++];
        c->layer = i;
        for (int k = 0; k < 3; k++)
            c->cost[k] = (allowed[i] >> k) & 1u ? plan_exchange_cost(env, l, (pcnn_exchange)k)
                                                : INFINITY;
        double best = c->cost[kinds[i]];
        for (int k = 0; k < 3; k++)
            if (c->cost[k] < best) {
                best = c->cost[k];
                kinds[i] = (pcnn_exchange)k;
            }
        c->chosen = kinds[i];
    }
    return count;
}

static void describe_costs(const plan_exchange_choice *c, char *buf, size_t size)
{
    size_t n = 0;
    for (int k = 0; k < 3 && n < size; k++)
        if (isfinite(c->cost[k])) {
            const int w = snprintf(buf + n, size - n, "%s%s %.4f ms", n ? ", " : "",
                                   exchange_kind_name((pcnn_exchange)k, false), 1e3 * c->cost[k]);
            if (w < 0) break;
            n += (size_t)w;
        }
}

/* Rank 0's kinds on every rank, after agreeing on the local status. */
static pcnn_status share_kinds(pcnn_net *net, pcnn_status st, pcnn_exchange *kinds, int L,
                               const char *func)
{
    const pcnn_comm *comm = net_comm(net);
    if (!comm || comm->size == 1) return st;
    const pcnn_status all = net_agree(net, st, func);
    if (st == PCNN_OK && all != PCNN_OK) st = all;
    if (st != PCNN_OK) return st;
    int *k = mem_calloc((size_t)L, sizeof *k);
    st = net_agree(net, k ? PCNN_OK : error_set(PCNN_ERR_OUT_OF_MEMORY, func, "exchange plan"),
                   func);
    if (st != PCNN_OK) {
        mem_free(k);
        return st;
    }
    for (int i = 0; i < L; i++) k[i] = (int)kinds[i];
    MPI_Request req;
    const int code = MPI_Ibcast(k, L, MPI_INT, 0, comm->comm, &req);
    st = net_complete(net, code, &req, func, "MPI_Bcast (exchange plan)");
    if (st != PCNN_OK) return st; /* given up: k stays MPI's */
    for (int i = 0; i < L; i++) kinds[i] = (pcnn_exchange)k[i];
    mem_free(k);
    return st;
}

/* The exchanges of the layers allowed to choose, for the network's batch:
 * kinds and choices (one per layer) in, *count the layers priced. */
static pcnn_status plan_exchanges(pcnn_perfmodel *m, pcnn_net *net, int batch,
                                  pcnn_exchange *kinds, const unsigned *allowed,
                                  plan_exchange_choice *choices, int *count, const char *func)
{
    const layer_list *ll = net_layer_list(net);
    const pcnn_comm *comm = net_comm(net);
    plan_env env = {.layers = ll, .output = net_output(net), .model = m,
                    .ranks = comm ? comm->size : 1, .batch = batch,
                    .value = net_get_plan_options(net).precision == PCNN_PRECISION_BF16 ? 2.0
                                                                                        : 4.0};
    *count = 0;
    pcnn_status st = choices ? PCNN_OK
                             : error_set(PCNN_ERR_OUT_OF_MEMORY, func, "exchange plan");
    if (st == PCNN_OK) *count = choose(&env, kinds, allowed, choices);
    st = share_kinds(net, st, kinds, ll->count, func);
    for (int c = 0; st == PCNN_OK && c < *count; c++) choices[c].chosen = kinds[choices[c].layer];
    return st;
}

static pcnn_status keep_choices(pcnn_net *net, plan_exchange_choice *choices, int count,
                                int batch, const char *func)
{
    plan_record *r = record_of(net);
    if (!r) {
        mem_free(choices);
        return error_set(PCNN_ERR_OUT_OF_MEMORY, func, "plan record");
    }
    mem_free(r->exchanges);
    r->exchanges = choices;
    r->exchange_count = count;
    r->exchange_batch = batch;
    return PCNN_OK;
}

/* At finalize (net_planner.exchanges). */
static pcnn_status exchanges_hook(void *ctx, pcnn_net *net, pcnn_exchange *kinds,
                                  const unsigned *allowed, char (*why)[NET_WHY_LEN],
                                  const char *func)
{
    const int L = net_layer_list(net)->count;
    const int batch = net_global_max_batch(net);
    plan_exchange_choice *choices = mem_calloc((size_t)L, sizeof *choices);
    int count = 0;
    pcnn_status st = plan_exchanges(ctx, net, batch, kinds, allowed, choices, &count, func);
    /* Every rank reaches here with the same status: keeping the record
     * fails locally only, and is agreed. */
    if (st == PCNN_OK) st = keep_choices(net, choices, count, batch, func);
    else mem_free(choices);
    if (net_comm(net) && net_comm(net)->size > 1) {
        const pcnn_status all = net_agree(net, st, func);
        if (st == PCNN_OK) st = all;
    }
    if (st != PCNN_OK) return st;
    const plan_record *r = net_plan_record(net);
    for (int c = 0; c < r->exchange_count; c++)
        describe_costs(&r->exchanges[c], why[r->exchanges[c].layer], NET_WHY_LEN);
    return PCNN_OK;
}

/* The layers a re-plan may change under PCNN_EXCHANGE_AUTO: those the
 * model chose at finalize, and those the user did not set. */
static void replan_allowed(const pcnn_net *net, const plan_record *old, unsigned *allowed,
                           pcnn_exchange *kinds, bool spatial)
{
    const layer_list *ll = net_layer_list(net);
    const bool automatic = net_get_plan_options(net).exchange_auto;
    for (int i = 0; i < ll->count; i++) {
        const pcnn_layer *l = ll->items[i];
        kinds[i] = l->exchange;
        allowed[i] = 1u << l->exchange;
        bool movable = automatic && !l->exchange_chosen;
        for (int c = 0; old && c < old->exchange_count; c++)
            movable |= automatic && old->exchanges[c].layer == i;
        if (!movable || !l->num_params) continue;
        allowed[i] |= (1u << PCNN_EXCHANGE_ALLREDUCE) | (1u << PCNN_EXCHANGE_ALLTOALL_ALLGATHER);
        if (layer_is_dense(l) && !spatial) allowed[i] |= 1u << PCNN_EXCHANGE_FC_GRADIENT;
    }
}

/* Today's rule at a small batch (seed 001 section 5.2): sample parallelism
 * on min(P, batch) ranks, the others idle. */
static double idle_ranks_step(const plan_env *env, const char *func)
{
    plan_env idle = *env;
    idle.ranks = env->batch < env->ranks ? env->batch : env->ranks;
    idle.max_spatial = 1;
    plan_record *r = NULL;
    const pcnn_status st = plan_compute(&idle, false, &r, func);
    const double t = st == PCNN_OK ? r->sample_only : INFINITY;
    if (st != PCNN_OK) error_clear();
    plan_record_free(r);
    return t;
}

/* A scheduler's batch change (net_planner.batch_changed): the plan for
 * the new batch, decided by rank 0, kept as the network's record and told
 * to the log callback.  Its gradient exchanges replace the network's; the
 * network keeps the distribution it was finalized with (changing that
 * moves every activation buffer: a new network, from a checkpoint). */
static pcnn_status batch_hook(void *ctx, pcnn_net *net, int batch, const char *func)
{
    pcnn_perfmodel *m = ctx;
    const layer_list *ll = net_layer_list(net);
    const int L = ll->count;
    TRY(plan_agree_inputs(net, m, batch, func));
    plan_env env;
    bool mixed = true;
    plan_record *r = NULL;
    pcnn_status st = plan_make_env(net, m, batch, &env, &mixed);
    if (st == PCNN_OK) st = plan_compute(&env, mixed, &r, func);
    int(*parts)[LAYOUT_DIMS] = mem_calloc((size_t)L, sizeof *parts);
    pcnn_exchange *kinds = mem_calloc((size_t)L, sizeof *kinds);
    unsigned *allowed = mem_calloc((size_t)L, sizeof *allowed);
    plan_exchange_choice *choices = mem_calloc((size_t)L, sizeof *choices);
    char(*why)[NET_WHY_LEN] = mem_calloc((size_t)L, sizeof *why);
    if (st == PCNN_OK && (!parts || !kinds || !allowed || !choices || !why))
        st = error_set(PCNN_ERR_OUT_OF_MEMORY, func, "re-plan");
    st = plan_share(net, st, r, parts, func);
    if (st == PCNN_ERR_INVALID_STATE) {
        /* The model cannot price this network's layers (a link-only model
         * for PCNN_EXCHANGE_AUTO): the same on every rank, which all skip. */
        net_log(net, PCNN_LOG_WARNING, "re-plan for batch %d skipped: %s", batch,
                pcnn_last_error());
        error_clear();
        st = PCNN_OK;
        plan_record_free(r);
        r = NULL;
        goto done;
    }
    /* The FC gradient only where neither the plan nor the network splits
     * samples (the network keeps its distribution). */
    bool spatial = false;
    for (int i = 0; st == PCNN_OK && i < L; i++) {
        int current[LAYOUT_DIMS];
        spatial |= parts[i][1] * parts[i][2] * parts[i][3] > 1;
        if (pcnn_layer_get_distribution(ll->items[i], current) == PCNN_OK)
            spatial |= current[1] * current[2] * current[3] > 1;
    }
    int count = 0;
    if (st == PCNN_OK) {
        replan_allowed(net, net_plan_record(net), allowed, kinds, spatial);
        st = plan_exchanges(m, net, batch, kinds, allowed, choices, &count, func);
    }
    /* The new exchanges replace the network's (the distribution stays). */
    int exchanges = 0;
    for (int c = 0; st == PCNN_OK && c < count; c++)
        exchanges += choices[c].chosen != ll->items[choices[c].layer]->exchange;
    if (st == PCNN_OK) {
        char how[48];
        snprintf(how, sizeof how, " (re-planned for batch %d)", batch);
        for (int c = 0; c < count; c++)
            describe_costs(&choices[c], why[choices[c].layer], NET_WHY_LEN);
        st = net_switch_exchanges(net, kinds, how, (const char(*)[NET_WHY_LEN])why, func);
    }
    if (st == PCNN_OK) {
        r->replan = true;
        r->idle = idle_ranks_step(&env, func);
        r->exchanges = choices;
        r->exchange_count = count;
        r->exchange_batch = batch;
        choices = NULL;
        net_set_plan_record(net, r, plan_record_free);
        int current[LAYOUT_DIMS], changed = 0;
        for (int i = 0; i < L; i++)
            if (pcnn_layer_get_distribution(ll->items[i], current) == PCNN_OK &&
                memcmp(current, parts[i], sizeof current))
                changed++;
        net_log(net, PCNN_LOG_INFO,
                "re-plan for batch %d: %d layer distribution%s differ%s from the network's "
                "(kept) and %d gradient exchange%s changed; predicted %.3f ms per step, "
                "sample-parallel on %d ranks with the others idle %.3f ms "
                "(pcnn_net_plan_report)",
                batch, changed, changed == 1 ? "" : "s", changed == 1 ? "s" : "", exchanges,
                exchanges == 1 ? "" : "s",
                1e3 * r->predicted, batch < env.ranks ? batch : env.ranks, 1e3 * r->idle);
        r = NULL;
    } else {
        plan_record_free(r);
    }
done:
    mem_free(parts);
    mem_free(kinds);
    mem_free(allowed);
    mem_free(choices);
    mem_free(why);
    return st;
}

PCNN_API pcnn_status pcnn_net_set_perfmodel(pcnn_net *net, pcnn_perfmodel *model)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    if (!model) {
        net_set_planner(net, NULL);
        return PCNN_OK;
    }
    const net_planner p = {.ctx = model, .identity = identity, .exchanges = exchanges_hook,
                           .batch_changed = batch_hook};
    net_set_planner(net, &p);
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_layer_get_exchange(const pcnn_layer *layer, pcnn_exchange *exchange)
{
    API_ENTRY();
    REQUIRE_PTR(layer);
    REQUIRE_PTR(exchange);
    char name[64];
    REQUIRE(layer->list->frozen, PCNN_ERR_INVALID_STATE,
            "the exchange is decided at pcnn_net_finalize");
    REQUIRE(layer->num_params > 0, PCNN_ERR_INVALID_ARGUMENT,
            "%s has no parameters to exchange", layer_name(layer, name, sizeof name));
    *exchange = layer->exchange;
    return PCNN_OK;
}
