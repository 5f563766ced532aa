/* The parallel room: communicators, agreement between ranks, and the
 * gradient exchange strategies.  The graph calls in through this header. */
#ifndef PCNN_PARALLEL_H
#define PCNN_PARALLEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pcnn.h"

/* Doubles every rank contributes to an agreement: where it is (the call
 * and which of its agreements), its status, and up to AGREE_MAX_VALUES
 * values. */
#define AGREE_MAX_VALUES 8
#define AGREE_RECORD (2 + AGREE_MAX_VALUES)

struct pcnn_comm {
    MPI_Comm comm;     /* our duplicate, errors returned, never the host's */
    int rank, size;
    int thread_level;  /* MPI_Query_thread */
    int ranks_on_node; /* ranks sharing this node (MPI_COMM_TYPE_SHARED), at creation */
    bool owns_mpi;     /* pcnn_comm_create_world initialised MPI */
    int users;         /* networks attached */
    double *records;   /* this rank's agreement record, then every rank's:
                        * (size + 1) * AGREE_RECORD doubles, allocated once */
    int *batches;      /* every rank's batch of the last step agreement */
    pcnn_status failed; /* a collective on it was given up (TIMEOUT) or failed
                        * (MPI): MPI may still write `records`, which destroy
                        * then leaks; every later collective is refused */
    pcnn_status peer_failed; /* the last agreement saw another rank whose
                        * network had failed (its TIMEOUT or MPI status) */
};

/* Turn an MPI return code into a status with the MPI error string. */
pcnn_status mpi_status(int code, const char *func, const char *what);
#define MPI_TRY(call, what)                                                      \
    do {                                                                         \
        int mpi_code_ = (call);                                                  \
        if (mpi_code_ != MPI_SUCCESS) return mpi_status(mpi_code_, __func__, what); \
    } while (0)

/* v as text that reads back exactly, as short as it can be (messages). */
void format_double(double v, char *out, size_t size);

/* Has the host finalised MPI?  Then pcnn makes no MPI call at all. */
bool mpi_is_finalized(void);

/* The host's communicator handle checked without touching MPI_COMM_WORLD
 * (comm_handle.c): INVALID_ARGUMENT for MPI_COMM_NULL, a handle that names
 * no communicator, or an intercommunicator.  The Fortran form gives the C
 * handle in *out. */
pcnn_status comm_check_handle(MPI_Comm comm, const char *func);
pcnn_status comm_check_fortran_handle(MPI_Fint f, MPI_Comm *out, const char *func);

/* This step's batch on rank q, from the last agree_batch. */
static inline int comm_batch_of(const pcnn_comm *c, int q) { return c->batches[q]; }

/*
 * Every collective of pcnn goes through comm_complete: the caller posts a
 * nonblocking MPI call on c->comm and hands its return code and request
 * over; comm_complete tests it until it completes or timeout_ms passes
 * (0: no limit).  Giving up (PCNN_ERR_TIMEOUT), or MPI failing, marks the
 * communicator failed: MPI cannot cancel a collective, so the ranks no
 * longer agree on what comes next, and the buffers handed to MPI must
 * never be freed (comm_gave_up says so).  Every later collective on a
 * failed communicator is refused with PCNN_ERR_INVALID_STATE
 * (comm_check_usable) before anything is posted.
 */
pcnn_status comm_check_usable(const pcnn_comm *c, const char *func);
pcnn_status comm_complete(pcnn_comm *c, int post_code, MPI_Request *req, long timeout_ms,
                          const char *func, const char *what);
/* The same for a request on a communicator of one's own: *broke receives
 * the status that makes that communicator unusable (PCNN_ERR_TIMEOUT, or
 * PCNN_ERR_MPI), and `what` names the collective in the message. */
pcnn_status request_complete(MPI_Request *req, long timeout_ms, pcnn_status *broke,
                             const char *func, const char *what);
static inline bool comm_gave_up(const pcnn_comm *c) { return c->failed != PCNN_OK; }

/*
 * Agreements: the points at which ranks learn of each other's failures.
 * Every rank contributes one record (an all-gather of AGREE_RECORD doubles,
 * timed as above): the call it is in (func) and which of that call's
 * agreements (stage), its status, and values.  On every rank alike:
 *   - ranks in different calls or stages: PCNN_ERR_MISMATCH naming them
 *     (e.g. one rank saves while another trains).  Nothing is left in
 *     flight, so the ranks may carry on;
 *   - a rank that failed keeps its own status and message, the others
 *     return PCNN_ERR_REMOTE; a peer whose status is TIMEOUT or MPI had its
 *     network fail, which c->peer_failed reports to the caller;
 *   - else values are combined in rank order (the same bits everywhere).
 */
typedef enum agree_stage {
    AGREE_ENTRY = 0,     /* the first (or only) agreement of a call */
    AGREE_STEP_BATCH,    /* a training step: the batch, step counter, learning rate */
    AGREE_STEP_LOSS,     /* the loss, before any parameter changes */
    AGREE_STEP_END,      /* every rank applied the whole update */
    AGREE_LATER          /* a later agreement of the same call (finalize's phases, ...) */
} agree_stage;

pcnn_status agree(pcnn_comm *c, pcnn_status local, long timeout_ms, const char *func);

/* values[0..count) (count <= AGREE_MAX_VALUES) are replaced by their sums. */
pcnn_status agree_sum(pcnn_comm *c, agree_stage stage, pcnn_status local, double *values,
                      int count, long timeout_ms, const char *func);

/* The step-start agreement of a data-parallel step: sizes[0] holds this
 * rank's sample count and receives the global count; sizes[1] receives the
 * number of samples on lower ranks (this rank's first global sample);
 * sizes[2] holds this rank's vote to stop training here (0 or 1: a step
 * callback's, graph/train.c) and receives the number of votes;
 * every rank's count goes to comm_batch_of.  step and lr (the step counter
 * and the learning rate this step will use) must be equal on every rank,
 * else PCNN_ERR_MISMATCH names them and their values. */
pcnn_status agree_batch(pcnn_comm *c, pcnn_status local, double *sizes, uint64_t step,
                        double lr, long timeout_ms, const char *func);

/* The same agreement in two halves, so that a step can compute while the
 * records travel (graph/step_ahead.c): agree_batch_post posts this rank's
 * record (it fails only without posting: a communicator already unusable),
 * agree_batch_finish waits for every rank's and returns what agree_batch
 * returns.  Nothing else may use c between the two.  agree_abandon gives
 * up on a posted ticket without waiting (its network failed meanwhile):
 * the communicator is then marked failed with `why`, as a timeout marks it. */
typedef struct agree_ticket {
    MPI_Request req;
    int code;          /* what posting returned */
    pcnn_status local; /* this rank's status, kept for its own message */
    bool posted;
} agree_ticket;
pcnn_status agree_batch_post(pcnn_comm *c, pcnn_status local, const double *sizes, uint64_t step,
                             double lr, const char *func, agree_ticket *t);
pcnn_status agree_batch_finish(pcnn_comm *c, agree_ticket *t, double *sizes, long timeout_ms,
                               const char *func);
void agree_abandon(pcnn_comm *c, agree_ticket *t, pcnn_status why);

/* Where two ranks' words first differ (agree_words). */
typedef struct word_difference {
    int index;          /* the first word that is not equal on every rank */
    int rank;           /* the first rank whose word differs from rank 0's */
    uint64_t first, other; /* the word on rank 0 and on that rank */
} word_difference;

/* Compare count words (count equal on every rank: agree on it first) with
 * every rank: PCNN_ERR_MISMATCH, without a message, when they differ
 * (*diff says where; the caller names it).  local (this rank's failure to
 * prepare its words) and the allocation of a table of size * count words
 * are agreed first.  Collective, timed. */
pcnn_status agree_words(pcnn_comm *c, pcnn_status local, const uint64_t *words, int count,
                        long timeout_ms, const char *func, word_difference *diff);

/* Reductions inside a training step (synchronised batch norm), on a
 * duplicate of the network's communicator of their own, so that they never
 * mix with the step's agreements or the exchange.  reducer_create is
 * collective (MPI_Comm_idup, timed) and sizes the buffer for counts up to
 * max_count; *timeout_ms (the network's PCNN_OPT_TIMEOUT_MS, read at each
 * call; 0 waits forever) bounds every call.  reducer_gather returns every
 * rank's count doubles, rank after rank, in the reducer's buffer (valid
 * until the next call); reducer_sum replaces values by their sums over the
 * ranks.  A call that fails or times out marks the reducer failed: MPI may
 * still write its buffer, every later call fails at once with the same
 * status (reducer_error), and reducer_destroy then keeps the buffer for
 * good.  NULL reducer: reducer_error is OK, reducer_destroy a no-op. */
typedef struct reducer reducer;
pcnn_status reducer_create(pcnn_comm *c, int max_count, const long *timeout_ms,
                           reducer **out);
pcnn_status reducer_gather(reducer *r, const double *mine, int count, const double **all);
pcnn_status reducer_sum(reducer *r, double *values, int count);
pcnn_status reducer_error(const reducer *r);
int reducer_ranks(const reducer *r);
size_t reducer_bytes(const reducer *r);
void reducer_destroy(reducer *r);

#endif
