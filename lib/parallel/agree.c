/* Agreement points: the collectives at which ranks learn of each other's
 * failures, so that an error on one rank never leaves the others blocked. */
#include <stdio.h>
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "engine.h" /* engine_now */
#include "parallel.h"

#define MAX_AGREE_VALUES 8
_Static_assert(AGREE_SCRATCH >= MAX_AGREE_VALUES + 1 + 2, "timed agreement scratch");

/* After a given-up agreement the ranks no longer agree on what comes next
 * on this communicator: refuse rather than mismatch. */
static pcnn_status refuse_failed(const pcnn_comm *c, const char *func)
{
    if (c->failed == PCNN_OK) return PCNN_OK;
    return error_set(PCNN_ERR_INVALID_STATE, func, "an earlier collective on this communicator "
                     "%s and was abandoned; destroy the networks that use it and the "
                     "communicator", c->failed == PCNN_ERR_TIMEOUT ? "timed out" : "failed");
}

pcnn_status comm_complete_within(MPI_Request *req, long timeout_ms, pcnn_status *broke,
                                   const char *func, const char *what)
{
    const double deadline = engine_now() + (double)timeout_ms * 1e-3;
    for (;;) {
        int flag = 0, code = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
        if (code != MPI_SUCCESS) {
            *broke = PCNN_ERR_MPI;
            return mpi_status(code, func, what);
        }
        if (flag) return PCNN_OK;
        if (engine_now() > deadline) {
            *broke = PCNN_ERR_TIMEOUT;
            return error_set(PCNN_ERR_TIMEOUT, func, "%s did not complete within %ld ms "
                             "(another rank may have stopped); the communicator is now "
                             "unusable", what, timeout_ms);
        }
    }
}

/* Timed agreements hand MPI the communicator's own scratch, which outlives
 * a given-up collective; untimed ones use the stack. */
static double *timed_scratch(const pcnn_comm *c) { return c->gather + 2 * (size_t)c->size; }

static pcnn_status sum_core(const pcnn_comm *c, pcnn_status local, double *values, int count,
                            long timeout_ms, pcnn_status *broke, const char *func)
{
    double stack[MAX_AGREE_VALUES + 1];
    if (count > MAX_AGREE_VALUES)
        return error_set(PCNN_ERR_INTERNAL, func, "agree_sum of %d values", count);
    TRY(refuse_failed(c, func));
    double *buf = timeout_ms > 0 ? timed_scratch(c) : stack;
    buf[0] = local != PCNN_OK ? 1.0 : 0.0;
    for (int i = 0; i < count; i++) buf[i + 1] = local == PCNN_OK ? values[i] : 0.0;
    if (timeout_ms > 0) {
        MPI_Request req;
        MPI_TRY(MPI_Iallreduce(MPI_IN_PLACE, buf, count + 1, MPI_DOUBLE, MPI_SUM, c->comm, &req),
                "MPI_Iallreduce (agreement)");
        TRY(comm_complete_within(&req, timeout_ms, broke, func, "MPI_Allreduce (agreement)"));
    } else {
        int code = MPI_Allreduce(MPI_IN_PLACE, buf, count + 1, MPI_DOUBLE, MPI_SUM, c->comm);
        if (code != MPI_SUCCESS) return mpi_status(code, func, "MPI_Allreduce (agreement)");
    }
    if (local != PCNN_OK) return local; /* keep this rank's own message */
    if (buf[0] > 0)
        return error_set(PCNN_ERR_REMOTE, func, "%d other rank(s) failed; this rank (%d) did not",
                         (int)buf[0], c->rank);
    for (int i = 0; i < count; i++) values[i] = buf[i + 1];
    return PCNN_OK;
}

pcnn_status agree_sum(const pcnn_comm *c, pcnn_status local, double *values, int count,
                      const char *func)
{
    pcnn_status broke = PCNN_OK;
    return sum_core(c, local, values, count, 0, &broke, func);
}

pcnn_status agree_sum_within(pcnn_comm *c, pcnn_status local, double *values, int count,
                             long timeout_ms, const char *func)
{
    pcnn_status broke = PCNN_OK;
    pcnn_status st = sum_core(c, local, values, count, timeout_ms, &broke, func);
    if (broke != PCNN_OK) c->failed = broke;
    return st;
}

static pcnn_status batch_core(const pcnn_comm *c, pcnn_status local, double *sizes,
                              long timeout_ms, pcnn_status *broke, const char *func)
{
    TRY(refuse_failed(c, func));
    double stack[2];
    double *mine = timeout_ms > 0 ? timed_scratch(c) : stack;
    mine[0] = local != PCNN_OK ? 1.0 : 0.0;
    mine[1] = local == PCNN_OK ? sizes[0] : 0.0;
    if (timeout_ms > 0) {
        MPI_Request req;
        MPI_TRY(MPI_Iallgather(mine, 2, MPI_DOUBLE, c->gather, 2, MPI_DOUBLE, c->comm, &req),
                "MPI_Iallgather (batch agreement)");
        TRY(comm_complete_within(&req, timeout_ms, broke, func,
                                 "MPI_Allgather (batch agreement)"));
    } else {
        int code = MPI_Allgather(mine, 2, MPI_DOUBLE, c->gather, 2, MPI_DOUBLE, c->comm);
        if (code != MPI_SUCCESS) return mpi_status(code, func, "MPI_Allgather (batch agreement)");
    }
    int failed = 0;
    double total = 0.0, below = 0.0;
    for (int p = 0; p < c->size; p++) {
        failed += c->gather[2 * p] > 0;
        total += c->gather[2 * p + 1];
        if (p < c->rank) below += c->gather[2 * p + 1];
    }
    if (local != PCNN_OK) return local;
    if (failed)
        return error_set(PCNN_ERR_REMOTE, func, "%d other rank(s) failed; this rank (%d) did not",
                         failed, c->rank);
    sizes[0] = total;
    sizes[1] = below;
    return PCNN_OK;
}

pcnn_status agree_batch(const pcnn_comm *c, pcnn_status local, double *sizes, const char *func)
{
    pcnn_status broke = PCNN_OK;
    return batch_core(c, local, sizes, 0, &broke, func);
}

pcnn_status agree_batch_within(pcnn_comm *c, pcnn_status local, double *sizes, long timeout_ms,
                               const char *func)
{
    pcnn_status broke = PCNN_OK;
    pcnn_status st = batch_core(c, local, sizes, timeout_ms, &broke, func);
    if (broke != PCNN_OK) c->failed = broke;
    return st;
}

pcnn_status agree(const pcnn_comm *c, pcnn_status local, const char *func)
{
    return agree_sum(c, local, NULL, 0, func);
}

pcnn_status agree_structure(const pcnn_comm *c, const uint64_t *layer_hashes, int num_layers,
                            const char *func)
{
    TRY(refuse_failed(c, func));
    /* First agree on the layer count, then compare hashes layer by layer. */
    int counts[2] = {num_layers, -num_layers};
    int code = MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_INT, MPI_MAX, c->comm);
    if (code != MPI_SUCCESS) return mpi_status(code, func, "MPI_Allreduce (structure)");
    const int most = counts[0], fewest = -counts[1];
    uint64_t *all = mem_calloc((size_t)c->size * (size_t)most, sizeof *all);
    uint64_t *mine = mem_calloc((size_t)most, sizeof *mine);
    pcnn_status st = (all && mine) ? PCNN_OK : FAIL(PCNN_ERR_OUT_OF_MEMORY, "structure check");
    /* Even a rank out of memory must take part, or the others would hang. */
    if (mine) memcpy(mine, layer_hashes, (size_t)num_layers * sizeof *mine);
    st = agree(c, st, func);
    if (st == PCNN_OK) {
        code = MPI_Allgather(mine, most, MPI_UINT64_T, all, most, MPI_UINT64_T, c->comm);
        if (code != MPI_SUCCESS) st = mpi_status(code, func, "MPI_Allgather (structure)");
    }
    for (int l = 0; st == PCNN_OK && l < most; l++) {
        for (int r = 1; r < c->size; r++) {
            uint64_t a = all[l], b = all[(size_t)r * most + l];
            if (a == b && l < fewest) continue;
            if (l >= fewest)
                st = error_set(PCNN_ERR_MISMATCH, func,
                               "ranks built different networks: layer counts differ "
                               "(%d to %d layers)", fewest, most);
            else
                st = error_set(PCNN_ERR_MISMATCH, func,
                               "ranks built different networks: layer %d differs between "
                               "rank 0 and rank %d (kind, shape or configuration)", l, r);
            break;
        }
    }
    mem_free(all);
    mem_free(mine);
    return st;
}
