/* The parallel room: communicators, agreement between ranks, and the
 * gradient exchange strategies.  The graph calls in through this header. */
#ifndef PCNN_PARALLEL_H
#define PCNN_PARALLEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pcnn.h"

struct pcnn_comm {
    MPI_Comm comm;     /* our duplicate, errors returned, never the host's */
    int rank, size;
    int thread_level;  /* MPI_Query_thread */
    bool owns_mpi;     /* pcnn_comm_create_world initialised MPI */
    int users;         /* networks attached */
    double *gather;    /* 2 * size doubles for agree_batch (no malloc per step),
                        * then AGREE_SCRATCH for timed agreements */
    pcnn_status failed; /* a timed agreement was given up: MPI may still
                        * write `gather`, which destroy then leaks */
};

/* Doubles after the gather table that timed agreements hand to MPI. */
#define AGREE_SCRATCH 11

/* Turn an MPI return code into a status with the MPI error string. */
pcnn_status mpi_status(int code, const char *func, const char *what);
#define MPI_TRY(call, what)                                                      \
    do {                                                                         \
        int mpi_code_ = (call);                                                  \
        if (mpi_code_ != MPI_SUCCESS) return mpi_status(mpi_code_, __func__, what); \
    } while (0)

/* This step's batch on rank q, from the last agree_batch. */
static inline int comm_batch_of(const pcnn_comm *c, int q) { return (int)c->gather[2 * q + 1]; }

/* Agreement: every rank contributes its local status; if any rank failed,
 * the ranks that did not return PCNN_ERR_REMOTE (naming the failed ranks'
 * count) and the others keep their own.  One small allreduce. */
pcnn_status agree(const pcnn_comm *c, pcnn_status local, const char *func);

/* Agreement that also sums a few doubles (batch sizes, losses) across
 * ranks in the same collective.  values[0..count) are replaced by sums. */
pcnn_status agree_sum(const pcnn_comm *c, pcnn_status local, double *values, int count,
                      const char *func);

/* The step-start agreement of a data-parallel step: sizes[0] holds this
 * rank's sample count and receives the global count; sizes[1] receives the
 * number of samples on lower ranks (this rank's first global sample). */
pcnn_status agree_batch(const pcnn_comm *c, pcnn_status local, double *sizes, const char *func);

/* agree_sum and agree_batch that give up after timeout_ms (0: wait
 * forever) with PCNN_ERR_TIMEOUT: a rank that stopped taking part must not
 * hold the others forever.  Giving up marks the communicator failed: its
 * collective is left in flight (MPI cannot cancel it), so every later
 * agreement on it fails at once and pcnn_comm_destroy leaks its buffers. */
pcnn_status agree_sum_within(pcnn_comm *c, pcnn_status local, double *values, int count,
                             long timeout_ms, const char *func);
pcnn_status agree_batch_within(pcnn_comm *c, pcnn_status local, double *sizes, long timeout_ms,
                               const char *func);

/* Complete a nonblocking collective, or give it up after timeout_ms (> 0):
 * then *broke receives the status that makes its communicator unusable
 * (PCNN_ERR_TIMEOUT, or PCNN_ERR_MPI when MPI_Test failed); `what` names
 * the collective in the message. */
pcnn_status comm_complete_within(MPI_Request *req, long timeout_ms, pcnn_status *broke,
                                 const char *func, const char *what);

/* Reductions inside a training step (synchronised batch norm), on a
 * duplicate of the network's communicator of their own, so that they never
 * mix with the step's agreements or the exchange.  reducer_create is
 * collective (MPI_Comm_dup) and sizes the buffer for counts up to
 * max_count; *timeout_ms (the network's PCNN_OPT_TIMEOUT_MS, read at each
 * call; 0 waits forever) bounds every call.  reducer_gather returns every
 * rank's count doubles, rank after rank, in the reducer's buffer (valid
 * until the next call); reducer_sum replaces values by their sums over the
 * ranks.  A call that fails or times out marks the reducer failed: MPI may
 * still write its buffer, every later call fails at once with the same
 * status (reducer_error), and reducer_destroy then keeps the buffer for
 * good.  NULL reducer: reducer_error is OK, reducer_destroy a no-op. */
typedef struct reducer reducer;
pcnn_status reducer_create(const pcnn_comm *c, int max_count, const long *timeout_ms,
                           reducer **out);
pcnn_status reducer_gather(reducer *r, const double *mine, int count, const double **all);
pcnn_status reducer_sum(reducer *r, double *values, int count);
pcnn_status reducer_error(const reducer *r);
int reducer_ranks(const reducer *r);
size_t reducer_bytes(const reducer *r);
void reducer_destroy(reducer *r);

/* Per-layer structural hashes of a network must agree across ranks: a
 * mismatch returns PCNN_ERR_MISMATCH on every rank, naming the first layer
 * that differs and the ranks that disagree.  Collective. */
pcnn_status agree_structure(const pcnn_comm *c, const uint64_t *layer_hashes, int num_layers,
                            const char *func);

#endif
