/* A data-parallel step whose forward pass runs while its first agreement
 * travels.
 *
 * After a step the all-gathers of the updated parameters are still on the
 * wire: the next forward pass is meant to wait for them layer by layer
 * (seed 001 section 4.4).  But MPI delivers a pair of ranks' messages in
 * order over a network link, so a step-start agreement posted behind them
 * arrives only after all of them: waiting for it before the forward pass
 * put the whole all-gather after the step (VGG-11 at 1 Gbit/s: 130-160 ms
 * of a 500 ms step).  Here the agreement is posted first and finished
 * before the loss, which is the first thing that needs the global batch.
 *
 * That is sound for the layers whose forward pass posts no collective and
 * changes nothing that a step which does not go ahead must keep: not with
 * a distribution (halos) or synchronised batch norm (reductions), and only
 * up to the first dense layer whose activations the FC gradient sends
 * during the forward pass (it needs the agreed split of the batch; the
 * rest of the forward pass follows the agreement).  Batch norm's running
 * statistics are saved before and put back when the step does not go
 * ahead.  Dropout keys its masks by global sample, whose first index on
 * this rank only the agreement knows: the forward pass assumes the last
 * step's and runs again if it changed. */
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../layers/batchnorm.h"
#include "../layers/clone.h"
#include "net.h"
#include "spatial.h"

bool step_ahead_possible(const pcnn_net *net)
{
    return net->comm && net->exchange && !net_is_spatial(net) && !net->reducer &&
           exchange_first_posting_layer(net->exchange) > 1;
}

static bool reads_sample_base(const pcnn_net *net)
{
    for (int i = 1; i < net->layers.count; i++)
        if (layer_is_dropout(net->layers.items[i])) return true;
    return false;
}

/* Visit every batch norm's running statistics, with their offset in the
 * saved copy. */
typedef void (*stats_fn)(float *stats, size_t count, float *saved);

static size_t each_stats(pcnn_net *net, stats_fn fn)
{
    size_t offset = 0;
    for (int i = 1; i < net->layers.count; i++) {
        size_t count = 0;
        float *stats = batchnorm_running_stats(net->layers.items[i], &count);
        if (stats && fn) fn(stats, count, net->stats_saved + offset);
        offset += count;
    }
    return offset;
}

static void save_stats(float *stats, size_t count, float *saved)
{
    memcpy(saved, stats, count * sizeof *stats);
}

static void restore_stats(float *stats, size_t count, float *saved)
{
    memcpy(stats, saved, count * sizeof *stats);
}

pcnn_status step_ahead_plan(pcnn_net *net)
{
    const size_t count = net->comm ? each_stats(net, NULL) : 0;
    if (!count) return PCNN_OK;
    net->stats_saved = mem_alloc_floats(count);
    if (!net->stats_saved)
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "a copy of %zu running statistics", count);
    net_count_memory(net, PCNN_MEMORY_WORKSPACE, count * sizeof(float));
    return PCNN_OK;
}

void step_ahead_release(pcnn_net *net)
{
    mem_free(net->stats_saved);
    net->stats_saved = NULL;
}

void step_ahead_undo(pcnn_net *net)
{
    if (net->stats_saved) each_stats(net, restore_stats);
}

pcnn_status step_ahead_forward(pcnn_net *net, const char *func, pcnn_status local, int n,
                               const float *x, double *sizes, double lr, int *rest)
{
    const int split = exchange_first_posting_layer(net->exchange);
    agree_ticket ticket;
    TRY(net_agree_batch_post(net, local, sizes, lr, func, &ticket));
    *rest = split;
    if (net->stats_saved) each_stats(net, save_stats);
    /* A rank whose batch is refused meets the exchange all the same. */
    const int run_n = local == PCNN_OK ? n : 0;
    const long assumed_base = net->sample_base;
    if (run_n > 0) net_load_input(net, run_n, x);
    pcnn_status st = net_forward_layers(net, run_n, 1, split);
    if (st != PCNN_OK) {
        /* The exchange gave up (its network is aborted): do not wait a
         * second time for partners that did not answer. */
        net_agree_abandon(net, &ticket);
        step_ahead_undo(net);
        return st;
    }
    st = net_agree_batch_finish(net, &ticket, sizes, func);
    if (st == PCNN_OK && run_n > 0 && (long)sizes[1] != assumed_base && reads_sample_base(net)) {
        step_ahead_undo(net);
        net->sample_base = (long)sizes[1];
        net_load_input(net, run_n, x);
        st = net_forward_layers(net, run_n, 1, split); /* parameters arrived: cannot fail */
    }
    if (st != PCNN_OK) step_ahead_undo(net);
    return st;
}
