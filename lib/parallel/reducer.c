/* Reductions inside a training step, for layers whose statistics span the
 * global batch (synchronised batch norm): a gather and a sum of a few
 * doubles per layer, timed like the step's agreements.
 *
 * Their own duplicate communicator: the step's agreements (on the
 * network's communicator) and the exchange (on its own duplicate, driven
 * by a progress engine) post collectives around them, and each
 * communicator keeps its collectives in one order on every rank, so none
 * can match another's.  A rank that gives up leaves its collective in
 * flight (MPI cannot cancel it); the buffer then stays MPI's, as the
 * agreements' scratch does. */
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "parallel.h"

struct reducer {
    MPI_Comm comm;
    int rank, size;
    int max_count;
    double *buf;           /* size * max_count doubles, handed to MPI */
    const long *timeout_ms;
    pcnn_status failed;    /* the first failure: MPI may still write buf */
};

/* Where a rank that could not allocate its reducer still joins the
 * duplication the others wait in (static: MPI may write it late). */
static MPI_Comm orphan_comm;

pcnn_status reducer_create(pcnn_comm *c, int max_count, const long *timeout_ms,
                           reducer **out)
{
    /* Allocated first, and duplicated into r->comm: a duplication given up
     * on may still write there, so r is then never freed. */
    reducer *r = mem_calloc(1, sizeof *r);
    double *buf = mem_alloc((size_t)c->size * (size_t)max_count * sizeof(double));
    MPI_Comm *comm = r ? &r->comm : &orphan_comm;
    MPI_Request req;
    const int code = MPI_Comm_idup(c->comm, comm, &req);
    const pcnn_status st = comm_complete(c, code, &req, *timeout_ms, __func__,
                                         "MPI_Comm_idup (batch-norm reductions)");
    if (st != PCNN_OK || !r || !buf) {
        if (st == PCNN_OK) MPI_Comm_free(comm);
        if (st == PCNN_OK || code != MPI_SUCCESS) mem_free(r);
        mem_free(buf);
        return st != PCNN_OK ? st
                             : FAIL(PCNN_ERR_OUT_OF_MEMORY, "%d doubles per rank for the "
                                    "batch-norm reductions of %d ranks", max_count, c->size);
    }
    MPI_Comm_set_errhandler(r->comm, MPI_ERRORS_RETURN);
    *r = (reducer){.comm = r->comm, .rank = c->rank, .size = c->size, .max_count = max_count,
                   .buf = buf, .timeout_ms = timeout_ms};
    *out = r;
    return PCNN_OK;
}

/* Complete the posted collective within the timeout (0: wait forever). */
static pcnn_status complete(reducer *r, MPI_Request *req, const char *what)
{
    pcnn_status broke = PCNN_OK;
    const pcnn_status st = request_complete(req, *r->timeout_ms, &broke, __func__, what);
    if (broke != PCNN_OK) r->failed = broke;
    return st;
}

static pcnn_status check(const reducer *r, int count)
{
    if (r->failed != PCNN_OK) return r->failed; /* already reported */
    if (count < 0 || count > r->max_count)
        return FAIL(PCNN_ERR_INTERNAL, "a reduction of %d doubles (planned: %d)", count,
                    r->max_count);
    return PCNN_OK;
}

pcnn_status reducer_gather(reducer *r, const double *mine, int count, const double **all)
{
    TRY(check(r, count));
    memcpy(r->buf + (size_t)r->rank * (size_t)count, mine, (size_t)count * sizeof(double));
    MPI_Request req;
    int code = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r->buf, count, MPI_DOUBLE,
                              r->comm, &req);
    if (code != MPI_SUCCESS) {
        r->failed = PCNN_ERR_MPI;
        return mpi_status(code, __func__, "MPI_Iallgather (batch-norm statistics)");
    }
    TRY(complete(r, &req, "MPI_Allgather (batch-norm statistics)"));
    *all = r->buf;
    return PCNN_OK;
}

pcnn_status reducer_sum(reducer *r, double *values, int count)
{
    TRY(check(r, count));
    memcpy(r->buf, values, (size_t)count * sizeof(double));
    MPI_Request req;
    int code = MPI_Iallreduce(MPI_IN_PLACE, r->buf, count, MPI_DOUBLE, MPI_SUM, r->comm, &req);
    if (code != MPI_SUCCESS) {
        r->failed = PCNN_ERR_MPI;
        return mpi_status(code, __func__, "MPI_Iallreduce (batch-norm gradient sums)");
    }
    TRY(complete(r, &req, "MPI_Allreduce (batch-norm gradient sums)"));
    memcpy(values, r->buf, (size_t)count * sizeof(double));
    return PCNN_OK;
}

pcnn_status reducer_error(const reducer *r) { return r ? r->failed : PCNN_OK; }

int reducer_ranks(const reducer *r) { return r->size; }

size_t reducer_bytes(const reducer *r)
{
    return (size_t)r->size * (size_t)r->max_count * sizeof(double);
}

void reducer_destroy(reducer *r)
{
    if (!r) return;
    /* A communicator with a collective pending may be freed; after the
     * host's MPI_Finalize no MPI call is allowed (pcnn_net_destroy then
     * releases local memory only). */
    if (!mpi_is_finalized()) MPI_Comm_free(&r->comm);
    if (r->failed == PCNN_OK) mem_free(r->buf);
    mem_free(r);
}
