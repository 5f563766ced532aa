/* The progress engine: executes the exchange's collectives in the order
 * they are posted, so that communication proceeds while the main thread
 * computes (seed 001 sections 3.3.4 and 5.2.3).
 *
 * Two kinds:
 *   - thread: a dedicated POSIX thread, fed through a mutex/condition
 *     variable queue, runs the collectives one after the other on the
 *     network's own exchange communicator.  Needs MPI_THREAD_MULTIPLE,
 *     because the main thread keeps calling MPI (agreements) on another
 *     communicator.
 *   - nonblocking: the main thread posts MPI_Iallreduce / MPI_Ialltoallv /
 *     MPI_Iallgatherv and drives progress with MPI_Test between layers.
 *     Works at any thread level.
 * Requests are posted in the same order on every rank (the schedule is
 * deterministic); completion order does not matter.
 *
 * Both kinds start nonblocking collectives and poll them (the thread as
 * well), so that nothing ever sits inside MPI for good: MPI cannot cancel a
 * collective, and a thread blocked in one when the host calls MPI_Finalize
 * crashes the process (MPICH 4.0.2).  Abort therefore only stops polling;
 * collectives left in flight keep their buffers, which the owner must then
 * leak (engine_destroy says so). */
#ifndef PCNN_PARALLEL_ENGINE_H
#define PCNN_PARALLEL_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "pcnn.h"

typedef enum request_kind { REQ_ALLREDUCE, REQ_ALLTOALLV, REQ_ALLGATHERV } request_kind;

/* A bfloat16 allreduce (REQ_ALLREDUCE with bf16 set) is no MPI reduction:
 * a custom operation would round every partial sum to bf16 at each hop,
 * and MPI may combine in any order.  The engine runs it as two
 * collectives of 2-byte values, one after the other:
 *   1. the rank's fp32 vector (send, count floats, in place) rounded into
 *      wire_send, and an all-to-all of slices: rank p receives slice p
 *      (scounts[p] values at sdispls[p]) from every rank into wire_pieces
 *      (rcounts, rdispls: the P pieces of its slice, in rank order);
 *   2. each rank sums its pieces in fp32 in rank order into its slice of
 *      send, rounds the sums into its slice of wire_gather, and an
 *      all-gather of the slices (scounts, sdispls) brings every rank every
 *      slice's sums, which it converts into send.
 * Every rank ends with the same bits: the owner's sums, rounded once. */
typedef struct request {
    request_kind kind;
    /* Arguments of the collective (pointers stay valid: planned buffers). */
    void *send, *recv;
    int count;                  /* allreduce */
    const int *scounts, *sdispls, *rcounts, *rdispls;
    int tag;                    /* the bucket, for timing and traces */
    /* The values on the wire are bfloat16 (MPI_UINT16_T): send and recv
     * hold uint16_t, except for an allreduce (above). */
    bool bf16;
    uint16_t *wire_send, *wire_pieces, *wire_gather; /* bf16 allreduce */
    int rank, ranks;            /* bf16 allreduce: this rank's slice */
    int phase;                  /* bf16 allreduce: the collective running (0, 1) */
    bool in_mpi;                /* nonblocking engine: started (not held back) */

    /* Filled by the engine. */
    bool posted, done;
    int mpi_code;
    long seq;                   /* its number among the collectives started on the comm */
    double t_start, t_end;      /* when the communication ran */
    MPI_Request handle;         /* nonblocking engine */
} request;

typedef enum engine_kind { ENGINE_THREAD = 1, ENGINE_NONBLOCKING = 2 } engine_kind;

typedef struct engine engine;

/* Start an engine on `comm` (which it does not own).  core >= 0 pins the
 * communication thread to that core.  capacity bounds the requests in
 * flight at once.  pause_ns > 0: the thread shares its cores with compute
 * and sleeps that long between two tests of a request, except while the
 * main thread waits for one. */
pcnn_status engine_create(engine **out, engine_kind kind, MPI_Comm comm, int capacity, int core,
                          long pause_ns);
/* Stop the thread and free.  A healthy engine first waits for everything
 * posted; an aborted one (engine_abort, or a collective that failed or
 * timed out) waits for nothing.  Returns true when collectives were left in
 * flight: MPI may still read or write their buffers (and count arrays), so
 * the caller must never free those.  NULL is a no-op (false). */
bool engine_destroy(engine *e);
engine_kind engine_get_kind(const engine *e);
/* Abort, stop and free an engine whose ranks may have started different
 * collectives (a failed or aborted network): its communicator, count of
 * started collectives and the collectives in flight go to late_peers.h,
 * which completes them inside MPI_Finalize.  *comm_kept is set when the
 * communicator now belongs there (the caller must not free it).  Returns
 * what engine_destroy returns: true when collectives were left in flight,
 * whose buffers the caller must then never free.  NULL: false. */
bool engine_retire(engine *e, bool *comm_kept);

/* Stop progressing: collectives in flight are abandoned, queued ones never
 * start, later posts and waits fail at once.  Never blocks.  Idempotent. */
void engine_abort(engine *e);
/* PCNN_OK, or the status of the first collective that failed or timed out
 * (after which the engine is aborted).  NULL gives PCNN_OK. */
pcnn_status engine_error(const engine *e);

/* Queue a request (never blocks).  On an aborted engine the request is
 * marked done with MPI_ERR_OTHER and never started. */
void engine_post(engine *e, request *r);
/* Has it completed?  Never blocks; drives progress (nonblocking engine). */
bool engine_test(engine *e, request *r);
/* Block until it completes or timeout_ms passes (0: no limit).  Returns
 * PCNN_ERR_MPI (with MPI's message) if the collective failed and
 * PCNN_ERR_TIMEOUT if the limit passed; either aborts the engine (a rank
 * gave up on a collective: the ranks no longer agree on what comes next).
 * On an aborted engine, returns at once (the first error, or
 * PCNN_ERR_INVALID_STATE). */
pcnn_status engine_wait(engine *e, request *r, long timeout_ms);
/* Let posted nonblocking collectives progress (no-op for the thread). */
void engine_progress(engine *e);

/* Monotonic seconds, shared by the engine and the timing code. */
double engine_now(void);

#endif
