/* pcnn_comm_barrier and pcnn_comm_bcast: collectives on the library's
 * duplicate communicator for hosts without an MPI binding of their own.
 * Both go through the agreement (agree.c), so that a rank's bad argument,
 * a rank in another call or a rank that never comes fails every rank
 * alike instead of leaving MPI waiting. */
#include "../core/error.h"
#include "parallel.h"

/* Broadcast pieces: MPI counts are int. */
#define BCAST_PIECE ((size_t)1 << 30)

static pcnn_status check_args(pcnn_comm *comm, long timeout_ms, const char *func)
{
    if (!comm) return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "comm is NULL");
    if (timeout_ms < 0)
        return error_set(PCNN_ERR_INVALID_ARGUMENT, func,
                         "timeout_ms = %ld: must be >= 0 (0: no limit)", timeout_ms);
    return comm_check_usable(comm, func);
}

PCNN_API pcnn_status pcnn_comm_barrier(pcnn_comm *comm, long timeout_ms)
{
    API_ENTRY();
    const pcnn_status st = check_args(comm, timeout_ms, __func__);
    if (!comm || timeout_ms < 0) return st; /* nothing to agree over */
    TRY(st);
    /* The agreement is an all-gather: nobody leaves before all arrived. */
    return agree(comm, PCNN_OK, timeout_ms, __func__);
}

PCNN_API pcnn_status pcnn_comm_bcast(pcnn_comm *comm, void *buf, size_t bytes, int root,
                                     long timeout_ms)
{
    API_ENTRY();
    pcnn_status st = check_args(comm, timeout_ms, __func__);
    if (!comm || timeout_ms < 0) return st;
    TRY(st);
    if (root < 0 || root >= comm->size)
        st = error_set(PCNN_ERR_INVALID_ARGUMENT, __func__,
                       "root %d is not a rank of the communicator (0..%d)", root,
                       comm->size - 1);
    else if (!buf && bytes > 0)
        st = error_set(PCNN_ERR_INVALID_ARGUMENT, __func__, "buf is NULL for %zu bytes", bytes);
    /* Every rank compares its size and root with every other's. */
    const uint64_t words[2] = {(uint64_t)bytes, (uint64_t)(root < 0 ? 0 : root)};
    word_difference diff = {.index = -1};
    st = agree_words(comm, st, words, 2, timeout_ms, __func__, &diff);
    if (st == PCNN_ERR_MISMATCH && diff.index >= 0) /* else: ranks in other calls */
        return error_set(PCNN_ERR_MISMATCH, __func__, "ranks pass different %s: %llu on rank "
                         "0, %llu on rank %d", diff.index == 0 ? "sizes (bytes)" : "roots",
                         (unsigned long long)diff.first, (unsigned long long)diff.other,
                         diff.rank);
    TRY(st);
    for (size_t done = 0; done < bytes; done += BCAST_PIECE) {
        const size_t piece = bytes - done < BCAST_PIECE ? bytes - done : BCAST_PIECE;
        MPI_Request req;
        const int code = MPI_Ibcast((char *)buf + done, (int)piece, MPI_BYTE, root, comm->comm,
                                    &req);
        TRY(comm_complete(comm, code, &req, timeout_ms, __func__, "MPI_Bcast"));
    }
    return PCNN_OK;
}
