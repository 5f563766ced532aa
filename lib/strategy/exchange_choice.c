/* The exchange's rules (exchange_choice.h). */
#include "exchange_choice.h"

#include <stdio.h>

#include "thresholds.h"

bool exchange_fc_preferred(int features, int outputs, int global_batch, int ranks,
                           pcnn_exchange network_default, char *reason, size_t size)
{
    if (network_default != PCNN_EXCHANGE_ALLTOALL_ALLGATHER) {
        if (reason) snprintf(reason, size, "network default is not all-to-all + all-gather");
        return false;
    }
    const double B = global_batch, P = ranks;
    const double fc = (double)features * B / P + (double)outputs * B;
    const double reduce = (double)outputs * features;
    if (reason)
        snprintf(reason, size, "eq. 4.8: F*B/P + K*B = %.0f %s K*F = %.0f floats", fc,
                 fc < reduce ? "<" : ">=", reduce);
    return fc < reduce;
}

static long cores_needed(const engine_inputs *in)
{
    return (long)in->ranks_on_node * (in->compute_threads + strategy_table.engine_thread_cores);
}

bool exchange_engine_shares_core(const engine_inputs *in)
{
    return cores_needed(in) > in->usable_cores;
}

exchange_engine exchange_engine_choose(const engine_inputs *in, char *reason, size_t size)
{
    const int comm = strategy_table.engine_thread_cores;
    const long needed = cores_needed(in);
    const char *why = NULL;
    exchange_engine e = EXCHANGE_ENGINE_NONBLOCKING;
    bool sharing = false;
    if (in->requested == 2)
        why = "nonblocking (requested)";
    else if (!in->thread_multiple)
        why = "nonblocking (no MPI_THREAD_MULTIPLE)";
    else if (in->requested == 1)
        e = EXCHANGE_ENGINE_THREAD, why = "thread (requested)";
    else if (needed <= in->usable_cores)
        e = EXCHANGE_ENGINE_THREAD;
    else if (in->partners_off_node)
        e = EXCHANGE_ENGINE_THREAD, sharing = true;
    if (!reason) return e;
    if (why)
        snprintf(reason, size, "%s", why);
    else if (sharing)
        snprintf(reason, size, "thread sharing the cores, polling every %d us (partners on "
                 "other nodes; %d ranks x (%d + %d) threads > %d cores)",
                 strategy_table.engine_poll_pause_us, in->ranks_on_node, in->compute_threads,
                 comm, in->usable_cores);
    else
        snprintf(reason, size, "%s (%d ranks x (%d + %d) threads %s %d cores)",
                 e == EXCHANGE_ENGINE_THREAD ? "thread" : "nonblocking", in->ranks_on_node,
                 in->compute_threads, comm, e == EXCHANGE_ENGINE_THREAD ? "<=" : ">",
                 in->usable_cores);
    return e;
}

int exchange_group_buckets(const size_t *num_params, const pcnn_exchange *kinds,
                           const bool *alone, int num_layers, size_t bucket_bytes, bool parallel,
                           bucket_span *spans)
{
    const size_t bucket_floats = bucket_bytes / sizeof(float);
    int count = 0;
    bucket_span *open = NULL;
    for (int i = 0; i < num_layers; i++) {
        if (num_params[i] == 0) continue;
        const pcnn_exchange kind = parallel ? kinds[i] : PCNN_EXCHANGE_ALLREDUCE;
        const bool apart = alone && (alone[i] || (open && alone[open->first_layer]));
        const bool single = parallel && (kind == PCNN_EXCHANGE_FC_GRADIENT || apart);
        const bool fits = open && open->kind == kind && !single &&
                          (open->count + num_params[i] <= bucket_floats || !parallel);
        if (!fits) {
            open = &spans[count++];
            *open = (bucket_span){.first_layer = i, .kind = kind};
        }
        open->count += num_params[i];
        open->last_layer = i;
    }
    return count;
}
