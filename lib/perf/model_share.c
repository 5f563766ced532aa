/* One performance model on every rank (pcnn_perfmodel_share): planning
 * and PCNN_EXCHANGE_AUTO require the same model everywhere, and a compute
 * calibration is local.  The root's model travels as its file's bytes
 * (perf_encode: versioned, checksummed) and every other rank decodes and
 * checks them, as loading a file saved by the root would, without needing
 * a file system that every rank sees.  Every decision is agreed, so no
 * rank is left in a broadcast the others skipped. */
#include <limits.h>
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "perf.h"

#define SHARE_TIMEOUT_MS 120000L
#define CHUNK ((size_t)1 << 30)

static pcnn_status agree_root(pcnn_comm *comm, int root, pcnn_status local, const char *func)
{
    const uint64_t word = (uint64_t)(int64_t)root;
    word_difference d;
    const pcnn_status st = agree_words(comm, local, &word, 1, SHARE_TIMEOUT_MS, func, &d);
    if (st != PCNN_ERR_MISMATCH) return st;
    return error_set(PCNN_ERR_MISMATCH, func, "rank %d shares from root %lld, rank 0 from %lld",
                     d.rank, (long long)(int64_t)d.other, (long long)(int64_t)d.first);
}

static pcnn_status broadcast(pcnn_comm *comm, unsigned char *buf, size_t len, int root,
                             const char *func)
{
    for (size_t at = 0; at < len; at += CHUNK) {
        const int count = (int)(len - at < CHUNK ? len - at : CHUNK);
        MPI_Request req;
        const int code = MPI_Ibcast(buf + at, count, MPI_BYTE, root, comm->comm, &req);
        TRY(comm_complete(comm, code, &req, SHARE_TIMEOUT_MS, func, "MPI_Bcast (model)"));
    }
    return PCNN_OK;
}

pcnn_status perf_share(pcnn_perfmodel *m, pcnn_comm *comm, int root, pcnn_status local,
                       const char *func)
{
    TRY(comm_check_usable(comm, func));
    TRY(agree_root(comm, root, local, func));
    if (root < 0 || root >= comm->size)
        return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "root %d is not a rank of the "
                         "communicator (0..%d)", root, comm->size - 1);
    if (comm->size == 1) return PCNN_OK;
    const bool mine = comm->rank == root;
    unsigned char *buf = NULL;
    size_t len = 0;
    pcnn_status st = mine ? perf_encode(m, &buf, &len, func) : PCNN_OK;
    double size = mine ? (double)len : 0;
    TRY(agree_sum(comm, AGREE_ENTRY, st, &size, 1, SHARE_TIMEOUT_MS, func));
    len = (size_t)size;
    if (!mine) {
        buf = mem_alloc(len ? len : 1);
        st = buf ? PCNN_OK
                 : error_set(PCNN_ERR_OUT_OF_MEMORY, func, "a model of %zu bytes", len);
    }
    st = agree(comm, st, SHARE_TIMEOUT_MS, func);
    if (st == PCNN_OK) st = broadcast(comm, buf, len, root, func);
    if (st != PCNN_OK) {
        if (!comm_gave_up(comm)) mem_free(buf); /* else MPI may still write it */
        return st;
    }
    pcnn_perfmodel fresh = {0};
    if (!mine) {
        perf_model_defaults(&fresh);
        st = perf_decode(buf, len, &fresh, "the model shared by the root", func);
    }
    mem_free(buf);
    st = agree(comm, st, SHARE_TIMEOUT_MS, func);
    if (mine) return st;
    if (st != PCNN_OK) {
        perf_model_release(&fresh);
        return st;
    }
    fresh.log = m->log; /* the host's, not the root's */
    fresh.log_user = m->log_user;
    perf_model_release(m);
    *m = fresh;
    return PCNN_OK;
}
