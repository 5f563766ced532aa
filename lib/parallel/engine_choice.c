#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "engine_choice.h"

#include <sched.h>

#include "../core/error.h"
#include "parallel.h"

/* MPICH's blocking collectives busy-poll: a communication thread without a
 * core of its own steals cycles from compute.  The automatic choice takes
 * the thread only when the ranks on this node, each with its compute
 * threads and one communication thread, fit on the cores we may use. */
static bool spare_core_per_rank(MPI_Comm comm, int threads)
{
    int local = 1;
    MPI_Comm node;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
        MPI_Comm_size(node, &local);
        MPI_Comm_free(&node);
    }
    cpu_set_t set;
    const int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    return (long)local * (threads + 1) <= cores;
}

pcnn_status engine_choose(MPI_Comm comm, int thread_level, int requested, int threads,
                          engine_kind *out)
{
    int thread_ok = requested != 2 && thread_level >= MPI_THREAD_MULTIPLE &&
                    (requested == 1 || spare_core_per_rank(comm, threads));
    MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, &thread_ok, 1, MPI_INT, MPI_MIN, comm),
            "MPI_Allreduce (engine choice)");
    *out = thread_ok ? ENGINE_THREAD : ENGINE_NONBLOCKING;
    if (requested == 1 && *out != ENGINE_THREAD && thread_level >= MPI_THREAD_MULTIPLE)
        return FAIL(PCNN_ERR_UNSUPPORTED, "the thread engine needs MPI_THREAD_MULTIPLE on every "
                    "rank; this rank has it, another rank does not (or chose another engine)");
    if (requested == 1 && *out != ENGINE_THREAD)
        return FAIL(PCNN_ERR_UNSUPPORTED, "the thread engine needs MPI_THREAD_MULTIPLE on every "
                    "rank; this rank has level %d (initialise MPI with MPI_Init_thread)",
                    thread_level);
    return PCNN_OK;
}
