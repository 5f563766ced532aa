/* The client planner's hook (graph.h, net_planner): the graph cannot call
 * the plan room above it, so the plan room leaves functions in the network
 * (pcnn_net_set_perfmodel) and the graph calls them at finalize under
 * PCNN_EXCHANGE_AUTO and when a scheduler changes the batch. */
#include <stdio.h>
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../layers/dense.h"
#include "net.h"
#include "spatial.h"

void net_set_planner(pcnn_net *net, const net_planner *p)
{
    net->planner = p ? *p : (net_planner){0};
}

bool net_has_planner(const pcnn_net *net) { return net->planner.ctx != NULL; }

static bool parallel(const pcnn_net *net) { return net->comm && net->comm->size > 1; }

/* Every rank holds the same planner, or none: else no rank calls it (a
 * rank calling a collective the others skip would wait for ever). */
static pcnn_status agree_planner(pcnn_net *net, const char *func)
{
    const uint64_t word = net->planner.ctx ? net->planner.identity(net->planner.ctx) : 0;
    word_difference d;
    const pcnn_status st = net_agree_words(net, &word, 1, func, &d);
    if (st != PCNN_ERR_MISMATCH) return st;
    if (d.first && d.other)
        return error_set(PCNN_ERR_MISMATCH, func, "the performance model attached "
                         "(pcnn_net_set_perfmodel) on rank %d differs from rank 0's", d.rank);
    return error_set(PCNN_ERR_MISMATCH, func, "rank %d has %s performance model attached "
                     "(pcnn_net_set_perfmodel) and rank 0 %s", d.rank,
                     d.other ? "a" : "no", d.other ? "none" : "has one");
}

pcnn_status net_plan_exchanges(pcnn_net *net, const char *func)
{
    if (net->opt.exchange != PCNN_EXCHANGE_AUTO || !parallel(net)) return PCNN_OK;
    TRY(agree_planner(net, func));
    if (!net->planner.ctx) return PCNN_OK; /* the heuristics' choice stands */
    const int L = net->layers.count;
    pcnn_exchange *kinds = mem_calloc((size_t)L, sizeof *kinds);
    unsigned *allowed = mem_calloc((size_t)L, sizeof *allowed);
    char(*why)[NET_WHY_LEN] = mem_calloc((size_t)L, sizeof *why);
    pcnn_status st = net_agree(net, kinds && allowed && why ? PCNN_OK
                                    : error_set(PCNN_ERR_OUT_OF_MEMORY, func, "exchange plan"),
                               func);
    for (int i = 0; st == PCNN_OK && i < L; i++) {
        const pcnn_layer *l = net->layers.items[i];
        kinds[i] = l->exchange;
        if (l->exchange_chosen || l->num_params == 0) {
            allowed[i] = 1u << l->exchange;
            continue;
        }
        if (l->exchange_by_columns) { /* its columns' all-gather: less than either */
            kinds[i] = PCNN_EXCHANGE_ALLTOALL_ALLGATHER;
            allowed[i] = 1u << kinds[i];
            continue;
        }
        allowed[i] = (1u << PCNN_EXCHANGE_ALLREDUCE) | (1u << PCNN_EXCHANGE_ALLTOALL_ALLGATHER);
        if (layer_is_dense(l) && !net_is_spatial(net))
            allowed[i] |= 1u << PCNN_EXCHANGE_FC_GRADIENT;
    }
    if (st == PCNN_OK) st = net->planner.exchanges(net->planner.ctx, net, kinds, allowed, why, func);
    for (int i = 0; st == PCNN_OK && i < L; i++) {
        pcnn_layer *l = net->layers.items[i];
        if (!((allowed[i] >> kinds[i]) & 1u) || !why[i][0] || l->exchange_chosen) continue;
        l->exchange = kinds[i];
        /* Decided: the network's default no longer applies to it (the
         * performance model's predictions read it as they read the user's). */
        l->exchange_chosen = true;
        net_note_exchange(l, " (performance model)", why[i]);
        char decided[512];
        net_decision_text(l, decided, sizeof decided);
        net_log(net, PCNN_LOG_INFO, "layer %d (%s): %s", i, l->ops->kind, decided);
    }
    mem_free(kinds);
    mem_free(allowed);
    mem_free(why);
    return st;
}

pcnn_status net_planner_batch(pcnn_net *net, int global_batch, const char *func)
{
    if (parallel(net)) TRY(agree_planner(net, func));
    if (!net->planner.ctx) return PCNN_OK;
    return net->planner.batch_changed(net->planner.ctx, net, global_batch, func);
}
