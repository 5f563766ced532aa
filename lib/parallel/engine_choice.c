#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "engine_choice.h"

#include <sched.h>
#include <stdio.h>

#include "../core/error.h"
#include "../strategy/exchange_choice.h"

bool engine_vote_thread(const pcnn_comm *c, int requested, int threads, bool *shares_core,
                        char *why, size_t size)
{
    cpu_set_t set;
    const engine_inputs in = {
        .requested = requested,
        .thread_multiple = c->thread_level >= MPI_THREAD_MULTIPLE,
        .ranks_on_node = c->ranks_on_node,
        .compute_threads = threads,
        .usable_cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1,
        .partners_off_node = c->size > c->ranks_on_node,
    };
    *shares_core = exchange_engine_shares_core(&in);
    return exchange_engine_choose(&in, why, size) == EXCHANGE_ENGINE_THREAD;
}

pcnn_status engine_decide(const pcnn_comm *c, int requested, bool mine, int thread_votes,
                          engine_kind *out, char *why, size_t size)
{
    const bool all = thread_votes == c->size;
    *out = all ? ENGINE_THREAD : ENGINE_NONBLOCKING;
    if (mine && !all)
        snprintf(why, size, "nonblocking (%d of %d ranks cannot host the thread)",
                 c->size - thread_votes, c->size);
    if (requested == 1 && !all)
        return FAIL(PCNN_ERR_UNSUPPORTED, "the thread engine (PCNN_OPT_ENGINE 1) needs "
                    "MPI_THREAD_MULTIPLE on every rank: %d of %d ranks cannot host it (this "
                    "rank has thread level %d)", c->size - thread_votes, c->size,
                    c->thread_level);
    return PCNN_OK;
}
