/* The progress engine: executes the exchange's collectives in the order
 * they are posted, so that communication proceeds while the main thread
 * computes (seed 001 sections 3.3.4 and 5.2.3).
 *
 * Two kinds:
 *   - thread: a dedicated POSIX thread, fed through a mutex/condition
 *     variable queue, makes blocking MPI calls on the network's own
 *     exchange communicator.  Needs MPI_THREAD_MULTIPLE, because the main
 *     thread keeps calling MPI (agreements) on another communicator.
 *   - nonblocking: the main thread posts MPI_Iallreduce / MPI_Ialltoallv /
 *     MPI_Iallgatherv and drives progress with MPI_Test between layers.
 *     Works at any thread level.
 * Requests are posted in the same order on every rank (the schedule is
 * deterministic); completion order does not matter. */
#ifndef PCNN_PARALLEL_ENGINE_H
#define PCNN_PARALLEL_ENGINE_H

#include <stdbool.h>

#include "pcnn.h"

typedef enum request_kind { REQ_ALLREDUCE, REQ_ALLTOALLV, REQ_ALLGATHERV } request_kind;

typedef struct request {
    request_kind kind;
    /* Arguments of the collective (pointers stay valid: planned buffers). */
    float *send, *recv;
    int count;                  /* allreduce */
    const int *scounts, *sdispls, *rcounts, *rdispls;
    int tag;                    /* the bucket, for timing and traces */

    /* Filled by the engine. */
    bool posted, done;
    int mpi_code;
    double t_start, t_end;      /* when the communication ran */
    MPI_Request handle;         /* nonblocking engine */
} request;

typedef enum engine_kind { ENGINE_THREAD = 1, ENGINE_NONBLOCKING = 2 } engine_kind;

typedef struct engine engine;

/* Start an engine on `comm` (which it does not own).  core >= 0 pins the
 * communication thread to that core.  capacity bounds the requests in
 * flight at once. */
pcnn_status engine_create(engine **out, engine_kind kind, MPI_Comm comm, int capacity, int core);
/* Wait for everything posted, stop the thread, free.  NULL is a no-op. */
void engine_destroy(engine *e);
engine_kind engine_get_kind(const engine *e);

/* Queue a request (never blocks). */
void engine_post(engine *e, request *r);
/* Has it completed?  Never blocks; drives progress (nonblocking engine). */
bool engine_test(engine *e, request *r);
/* Block until it completes or timeout_ms passes (0: no limit).  Returns
 * PCNN_ERR_MPI (with MPI's message) if the collective failed and
 * PCNN_ERR_TIMEOUT if the limit passed. */
pcnn_status engine_wait(engine *e, request *r, long timeout_ms);
/* Let posted nonblocking collectives progress (no-op for the thread). */
void engine_progress(engine *e);

/* Monotonic seconds, shared by the engine and the timing code. */
double engine_now(void);

#endif
