#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "engine_choice.h"

#include <sched.h>
#include <stdio.h>

#include "../core/error.h"
#include "../strategy/exchange_choice.h"
#include "parallel.h"

/* Ranks sharing this node (MPI_Comm_split_type is collective: every rank
 * asks, whatever it will choose). */
static int ranks_on_node(MPI_Comm comm)
{
    int local = 1;
    MPI_Comm node;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
        MPI_Comm_size(node, &local);
        MPI_Comm_free(&node);
    }
    return local;
}

pcnn_status engine_choose(MPI_Comm comm, int thread_level, int requested, int threads,
                          engine_kind *out, char *why, size_t size)
{
    cpu_set_t set;
    const engine_inputs in = {
        .requested = requested,
        .thread_multiple = thread_level >= MPI_THREAD_MULTIPLE,
        .ranks_on_node = ranks_on_node(comm),
        .compute_threads = threads,
        .usable_cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1,
    };
    const int mine = exchange_engine_choose(&in, why, size) == EXCHANGE_ENGINE_THREAD;
    int thread_ok = mine;
    MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, &thread_ok, 1, MPI_INT, MPI_MIN, comm),
            "MPI_Allreduce (engine choice)");
    *out = thread_ok ? ENGINE_THREAD : ENGINE_NONBLOCKING;
    if (mine && !thread_ok) snprintf(why, size, "nonblocking (another rank cannot host the thread)");
    if (requested == 1 && *out != ENGINE_THREAD && thread_level >= MPI_THREAD_MULTIPLE)
        return FAIL(PCNN_ERR_UNSUPPORTED, "the thread engine needs MPI_THREAD_MULTIPLE on every "
                    "rank; this rank has it, another rank does not (or chose another engine)");
    if (requested == 1 && *out != ENGINE_THREAD)
        return FAIL(PCNN_ERR_UNSUPPORTED, "the thread engine needs MPI_THREAD_MULTIPLE on every "
                    "rank; this rank has level %d (initialise MPI with MPI_Init_thread)",
                    thread_level);
    return PCNN_OK;
}
