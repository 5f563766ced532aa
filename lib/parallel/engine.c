#define _GNU_SOURCE /* pthread_setaffinity_np */
#include "engine.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../kernels/bf16.h"
#include "../kernels/kernels.h"
#include "late_peers.h"
#include "parallel.h"

struct engine {
    engine_kind kind;
    MPI_Comm comm;

    /* Ring buffer of posted requests not yet started (thread engine) or
     * not yet completed (nonblocking engine). */
    request **queue;
    int capacity, head, count;
    request *views;       /* in_flight's copies of bf16 allreduces (capacity) */

    pthread_t thread;
    bool thread_started, stopping;
    pthread_mutex_t lock;
    pthread_cond_t work;  /* the queue has requests, or stop, or abort */
    pthread_cond_t done;  /* some request completed */

    /* Abort: read by the communication thread between two MPI_Test. */
    atomic_bool aborted;
    /* A thread sharing its cores with compute sleeps pause_ns between two
     * MPI_Test, except while the main thread is blocked in engine_wait
     * (waiting > 0): the core is then free, and a request done sooner is
     * a step done sooner. */
    long pause_ns;
    atomic_int waiting;
    struct engine *next_live; /* the live engines (stop_at_finalize) */
    request *left_in_flight;  /* the collective an abort left in MPI's hands */
    bool abandoned;       /* the thread left a started collective behind */
    bool handed_over;     /* late_peers.h owns its collectives in flight */
    pcnn_status error;    /* first failed or timed-out wait (main thread) */
    long started;         /* collectives started on comm (late_peers.h) */
};

double engine_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

engine_kind engine_get_kind(const engine *e) { return e->kind; }

/* A bf16 allreduce: two collectives of 2-byte values (engine.h). */
static bool two_phase(const request *r) { return r->kind == REQ_ALLREDUCE && r->bf16; }

/* Phase 0 of a bf16 allreduce: the rank's values rounded, the slices out. */
static int post_pieces(MPI_Comm comm, request *r)
{
    bf16_from_f32_array(r->send, r->wire_send, (size_t)r->count);
    return MPI_Ialltoallv(r->wire_send, r->scounts, r->sdispls, MPI_UINT16_T, r->wire_pieces,
                          r->rcounts, r->rdispls, MPI_UINT16_T, comm, &r->handle);
}

static int post_collective(MPI_Comm comm, request *r)
{
    const MPI_Datatype type = r->bf16 ? MPI_UINT16_T : MPI_FLOAT;
    switch (r->kind) {
    case REQ_ALLREDUCE:
        if (two_phase(r))
            return r->phase == 0
                       ? post_pieces(comm, r)
                       : MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r->wire_gather,
                                         r->scounts, r->sdispls, MPI_UINT16_T, comm,
                                         &r->handle);
        return MPI_Iallreduce(MPI_IN_PLACE, r->send, r->count, MPI_FLOAT, MPI_SUM, comm,
                              &r->handle);
    case REQ_ALLTOALLV:
        return MPI_Ialltoallv(r->send, r->scounts, r->sdispls, type, r->recv, r->rcounts,
                              r->rdispls, type, comm, &r->handle);
    case REQ_ALLGATHERV:
        return MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r->recv, r->rcounts,
                               r->rdispls, type, comm, &r->handle);
    }
    return MPI_ERR_OTHER;
}

/* Start r, numbering it among the collectives started on the engine's
 * communicator (only one thread starts them at a time). */
static int start_nonblocking(engine *e, request *r)
{
    const int code = post_collective(e->comm, r);
    if (code == MPI_SUCCESS) r->seq = e->started++;
    return code;
}

/* r's collective completed: what follows it.  A bf16 allreduce's pieces
 * are summed in fp32 in rank order and its all-gather started (true, the
 * MPI code in *code); its gathered sums are converted (false: r is done). */
static bool next_phase(engine *e, request *r, int *code)
{
    if (!two_phase(r)) return false;
    if (r->phase == 1) {
        bf16_to_f32_array(r->wire_gather, r->send, (size_t)r->count);
        return false;
    }
    const size_t own = (size_t)r->scounts[r->rank], lo = (size_t)r->sdispls[r->rank];
    float *sums = (float *)r->send + lo;
    sum_pieces_bf16(r->wire_pieces, own, r->ranks, sums, 1);
    bf16_from_f32_array(sums, r->wire_gather + lo, own);
    r->phase = 1;
    *code = start_nonblocking(e, r);
    return true;
}

/* Complete r (started) blocking, every phase of it. */
static int finish_blocking(engine *e, request *r)
{
    int code = MPI_Wait(&r->handle, MPI_STATUS_IGNORE);
    while (code == MPI_SUCCESS && next_phase(e, r, &code))
        if (code == MPI_SUCCESS) code = MPI_Wait(&r->handle, MPI_STATUS_IGNORE);
    return code;
}

/* A thread on shared cores sleeps between two tests (see struct engine). */
static void pause_between_tests(engine *e)
{
    if (e->pause_ns <= 0 || atomic_load_explicit(&e->waiting, memory_order_relaxed) > 0) return;
    const struct timespec ts = {.tv_sec = e->pause_ns / 1000000000L,
                                .tv_nsec = e->pause_ns % 1000000000L};
    nanosleep(&ts, NULL);
}

/* Start r and poll it until it completes or the engine is aborted.  Returns
 * the MPI code; *left is set when r was abandoned in flight. */
static int run_polled(engine *e, request *r, bool *left)
{
    int code = start_nonblocking(e, r);
    for (;;) {
        int flag = 0;
        while (code == MPI_SUCCESS && !flag) {
            code = MPI_Test(&r->handle, &flag, MPI_STATUS_IGNORE);
            if (code == MPI_SUCCESS && !flag) pause_between_tests(e);
            if (code == MPI_SUCCESS && !flag &&
                atomic_load_explicit(&e->aborted, memory_order_relaxed)) {
                *left = true;
                return code;
            }
        }
        if (code != MPI_SUCCESS || !next_phase(e, r, &code)) return code;
    }
}

/* The communication thread: take requests in posting order and run them.
 * It never holds the lock inside MPI, so abort and post never wait long. */
static void *comm_thread(void *arg)
{
    engine *e = arg;
    pthread_mutex_lock(&e->lock);
    for (;;) {
        while (e->count == 0 && !e->stopping && !atomic_load(&e->aborted))
            pthread_cond_wait(&e->work, &e->lock);
        if (atomic_load(&e->aborted) || e->count == 0) break; /* queued requests never start */
        request *r = e->queue[e->head];
        e->head = (e->head + 1) % e->capacity;
        e->count--;
        pthread_mutex_unlock(&e->lock);

        bool left = false;
        double t0 = engine_now();
        int code = run_polled(e, r, &left);
        double t1 = engine_now();

        pthread_mutex_lock(&e->lock);
        if (left) {
            e->abandoned = true;
            e->left_in_flight = r;
            break;
        }
        r->t_start = t0;
        r->t_end = t1;
        r->mpi_code = code;
        r->done = true;
        pthread_cond_broadcast(&e->done);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

/* The host may call MPI_Finalize while a communication thread still runs
 * (C++ destructors and Fortran finalizers destroy networks after it): MPI
 * deletes MPI_COMM_SELF's attributes first thing in MPI_Finalize, and the
 * delete callback of ours stops every live communication thread there,
 * before MPI shuts down, and completes what they had posted.  Their
 * engines are then aborted and destroy joins nothing.  Live engines that
 * had failed, and those retired before (engine_retire), have their
 * collectives settled with the other ranks' there (late_peers.h). */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static engine *live_threads;
static int finalize_key = MPI_KEYVAL_INVALID;

/* The requests an aborted engine holds in flight (after its thread was
 * joined): the one the thread left, or the nonblocking engine's queue. */
static int in_flight(engine *e, request **out)
{
    int n = 0;
    if (e->kind == ENGINE_THREAD) {
        if (e->left_in_flight) out[n++] = e->left_in_flight;
    } else {
        for (int k = 0; k < e->count; k++) {
            request *r = e->queue[(e->head + k) % e->capacity];
            if (r->in_mpi) out[n++] = r; /* the later ones never started */
        }
    }
    /* A bf16 allreduce is in MPI's hands as the collective of its phase. */
    for (int k = 0; k < n; k++) {
        const request *r = out[k];
        if (!two_phase(r)) continue;
        request *v = &e->views[k];
        *v = *r;
        if (r->phase == 0) {
            *v = (request){.kind = REQ_ALLTOALLV, .send = r->wire_send, .recv = r->wire_pieces,
                           .scounts = r->scounts, .sdispls = r->sdispls, .rcounts = r->rcounts,
                           .rdispls = r->rdispls};
        } else {
            *v = (request){.kind = REQ_ALLGATHERV, .recv = r->wire_gather,
                           .rcounts = r->scounts, .rdispls = r->sdispls};
        }
        v->bf16 = true;
        v->handle = r->handle;
        v->seq = r->seq;
        out[k] = v;
    }
    return n;
}

/* Hand an aborted, stopped engine's communicator and collectives over to
 * late_peers.h.  Its collectives then belong there: the engine forgets
 * them. */
static bool hand_over(engine *e)
{
    request **reqs = mem_calloc((size_t)e->capacity, sizeof *reqs);
    if (!reqs) return false;
    const int n = in_flight(e, reqs);
    const bool kept = late_peers_keep(e->comm, e->started, reqs, n);
    mem_free(reqs);
    return kept;
}

static int stop_at_finalize(MPI_Comm comm, int key, void *value, void *extra)
{
    (void)comm, (void)key, (void)value, (void)extra;
    pthread_mutex_lock(&live_lock);
    for (engine *e = live_threads; e; e = e->next_live) {
        const bool failed = atomic_load(&e->aborted);
        engine_abort(e);
        if (e->thread_started) {
            pthread_join(e->thread, NULL); /* it leaves within one MPI_Test */
            e->thread_started = false;
        }
        if (failed) { /* the ranks may have started different collectives */
            if (hand_over(e)) e->handed_over = true;
            continue;
        }
        if (e->kind != ENGINE_THREAD) {
            /* Its requests complete in MPI_Finalize, once started: those
             * a bf16 allreduce held back start here, in order. */
            for (int k = 0; k < e->count; k++) {
                request *r = e->queue[(e->head + k) % e->capacity];
                if (r->in_mpi || start_nonblocking(e, r) == MPI_SUCCESS) finish_blocking(e, r);
            }
            e->count = 0;
            continue;
        }
        /* MPI requires pending communication to complete before
         * MPI_Finalize, and every rank is finalizing: finish here, on the
         * finalizing thread, the collective the thread left in flight and
         * those still queued, in posting order as the partners do. */
        if (e->left_in_flight) {
            finish_blocking(e, e->left_in_flight);
            e->left_in_flight = NULL;
            e->abandoned = false;
        }
        for (; e->count > 0; e->count--, e->head = (e->head + 1) % e->capacity) {
            request *r = e->queue[e->head];
            if (start_nonblocking(e, r) == MPI_SUCCESS) finish_blocking(e, r);
        }
    }
    live_threads = NULL;
    finalize_key = MPI_KEYVAL_INVALID; /* MPI frees its keyvals */
    pthread_mutex_unlock(&live_lock);
    late_peers_settle(); /* every rank is here */
    return MPI_SUCCESS;
}

static void watch_finalize(engine *e)
{
    pthread_mutex_lock(&live_lock);
    if (finalize_key == MPI_KEYVAL_INVALID &&
        MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, stop_at_finalize, &finalize_key, NULL) ==
            MPI_SUCCESS)
        MPI_Comm_set_attr(MPI_COMM_SELF, finalize_key, NULL);
    e->next_live = live_threads;
    live_threads = e;
    pthread_mutex_unlock(&live_lock);
}

static void unwatch_finalize(engine *e)
{
    pthread_mutex_lock(&live_lock);
    for (engine **p = &live_threads; *p; p = &(*p)->next_live)
        if (*p == e) {
            *p = e->next_live;
            break;
        }
    pthread_mutex_unlock(&live_lock);
}

pcnn_status engine_create(engine **out, engine_kind kind, MPI_Comm comm, int capacity, int core,
                          long pause_ns)
{
    engine *e = mem_calloc(1, sizeof *e);
    if (!e) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "progress engine");
    e->kind = kind;
    e->comm = comm;
    e->pause_ns = pause_ns;
    atomic_init(&e->aborted, false);
    atomic_init(&e->waiting, 0);
    e->capacity = capacity > 0 ? capacity : 1;
    e->queue = mem_calloc((size_t)e->capacity, sizeof *e->queue);
    e->views = mem_calloc((size_t)e->capacity, sizeof *e->views);
    if (!e->queue || !e->views) {
        mem_free(e->queue);
        mem_free(e->views);
        mem_free(e);
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "progress engine queue of %d", capacity);
    }
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->work, NULL);
    pthread_condattr_t attr; /* timed waits count on the monotonic clock */
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&e->done, &attr);
    pthread_condattr_destroy(&attr);
    if (kind == ENGINE_THREAD) {
        int rc = pthread_create(&e->thread, NULL, comm_thread, e);
        if (rc != 0) {
            engine_destroy(e);
            return FAIL(PCNN_ERR_OUT_OF_MEMORY, "cannot start the communication thread (error %d)",
                        rc);
        }
        e->thread_started = true;
        if (core >= 0 && core < CPU_SETSIZE) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(core, &set);
            rc = pthread_setaffinity_np(e->thread, sizeof set, &set);
            if (rc != 0) {
                engine_destroy(e);
                return FAIL(PCNN_ERR_INVALID_ARGUMENT,
                            "cannot pin the communication thread to core %d (error %d)", core, rc);
            }
        }
    }
    watch_finalize(e);
    *out = e;
    return PCNN_OK;
}

bool engine_destroy(engine *e)
{
    if (!e) return false;
    bool abandoned = false;
    unwatch_finalize(e);
    if (e->handed_over) {
        abandoned = false; /* late_peers.h settled them inside MPI_Finalize */
    } else if (e->thread_started) {
        pthread_mutex_lock(&e->lock);
        e->stopping = true;
        pthread_cond_broadcast(&e->work);
        pthread_mutex_unlock(&e->lock);
        /* Healthy: the thread runs what is queued.  Aborted: it leaves
         * within one MPI_Test. */
        pthread_join(e->thread, NULL);
        abandoned = e->abandoned && !mpi_is_finalized();
    } else if (atomic_load(&e->aborted)) {
        /* One last look: what completed need not leak.  After the host's
         * MPI_Finalize, MPI holds nothing any more. */
        if (!mpi_is_finalized()) engine_progress(e);
        abandoned = e->count > 0 && !mpi_is_finalized();
    } else if (!mpi_is_finalized()) {
        for (int k = 0; k < e->count; k++) {
            request *r = e->queue[(e->head + k) % e->capacity];
            if (r->in_mpi || start_nonblocking(e, r) == MPI_SUCCESS) finish_blocking(e, r);
        }
    }
    pthread_cond_destroy(&e->work);
    pthread_cond_destroy(&e->done);
    pthread_mutex_destroy(&e->lock);
    mem_free(e->queue);
    mem_free(e->views);
    mem_free(e);
    return abandoned;
}

bool engine_retire(engine *e, bool *comm_kept)
{
    *comm_kept = false;
    if (!e) return false;
    engine_abort(e);
    unwatch_finalize(e);
    if (e->thread_started) {
        pthread_join(e->thread, NULL); /* aborted: it leaves within one MPI_Test */
        e->thread_started = false;
    }
    if (!e->handed_over && !mpi_is_finalized()) {
        engine_progress(e); /* what completed need not be settled */
        const int n = e->kind == ENGINE_THREAD ? (e->left_in_flight != NULL) : e->count;
        *comm_kept = hand_over(e);
        if (*comm_kept) {
            e->handed_over = true;
            e->abandoned = false;
            e->count = 0;
            pthread_cond_destroy(&e->work);
            pthread_cond_destroy(&e->done);
            pthread_mutex_destroy(&e->lock);
            mem_free(e->queue);
            mem_free(e->views);
            mem_free(e);
            return n > 0;
        }
    }
    return engine_destroy(e);
}

void engine_abort(engine *e)
{
    if (!e || atomic_exchange(&e->aborted, true)) return;
    if (e->kind != ENGINE_THREAD) return; /* nothing polls but the caller */
    pthread_mutex_lock(&e->lock); /* held only briefly, never across MPI */
    pthread_cond_broadcast(&e->work);
    pthread_cond_broadcast(&e->done);
    pthread_mutex_unlock(&e->lock);
}

pcnn_status engine_error(const engine *e) { return e ? e->error : PCNN_OK; }

/* Test every request in flight (nonblocking engine) and keep only the
 * unfinished ones, in posting order.  Collectives must start in one order
 * on every rank, and a bf16 allreduce's all-gather starts only once its
 * pieces arrived, at a moment that differs between ranks: so requests
 * posted after one whose pieces are still travelling wait in the queue
 * (not yet started) until its all-gather has started.  After an abort
 * nothing more starts. */
void engine_progress(engine *e)
{
    if (e->kind != ENGINE_NONBLOCKING) return;
    const bool aborted = atomic_load(&e->aborted);
    int kept = 0;
    bool gate = aborted;
    for (int k = 0; k < e->count; k++) {
        request *r = e->queue[(e->head + k) % e->capacity];
        if (!r->in_mpi && gate) {
            e->queue[(e->head + kept++) % e->capacity] = r;
            continue;
        }
        if (!r->in_mpi) {
            r->t_start = engine_now();
            r->mpi_code = start_nonblocking(e, r);
            r->in_mpi = r->mpi_code == MPI_SUCCESS;
        }
        int flag = 0;
        if (r->in_mpi) r->mpi_code = MPI_Test(&r->handle, &flag, MPI_STATUS_IGNORE);
        /* A bf16 allreduce's pieces arrived: it continues with its gather. */
        if (flag && r->mpi_code == MPI_SUCCESS && two_phase(r) && r->phase == 0 && aborted) {
            r->mpi_code = MPI_ERR_OTHER; /* its gather would start after the abort */
        } else if (flag && r->mpi_code == MPI_SUCCESS && next_phase(e, r, &r->mpi_code) &&
                   r->mpi_code == MPI_SUCCESS) {
            flag = 0;
        }
        if (r->mpi_code == MPI_SUCCESS && !flag && two_phase(r) && r->phase == 0) gate = true;
        if (flag || r->mpi_code != MPI_SUCCESS) {
            r->done = true;
            r->t_end = engine_now();
        } else {
            e->queue[(e->head + kept++) % e->capacity] = r;
        }
    }
    e->count = kept;
}

void engine_post(engine *e, request *r)
{
    r->posted = true;
    r->done = false;
    r->phase = 0;
    r->mpi_code = MPI_SUCCESS;
    if (atomic_load(&e->aborted)) { /* a collective the other ranks may never match */
        r->done = true;
        r->mpi_code = MPI_ERR_OTHER;
        return;
    }
    if (e->kind == ENGINE_NONBLOCKING) {
        r->in_mpi = false;
        e->queue[(e->head + e->count) % e->capacity] = r;
        e->count++;
        engine_progress(e); /* starts it, unless a bf16 allreduce before it holds it back */
        return;
    }
    pthread_mutex_lock(&e->lock);
    e->queue[(e->head + e->count) % e->capacity] = r;
    e->count++;
    pthread_cond_signal(&e->work);
    pthread_mutex_unlock(&e->lock);
}

bool engine_test(engine *e, request *r)
{
    if (e->kind == ENGINE_NONBLOCKING) {
        engine_progress(e);
        return r->done;
    }
    pthread_mutex_lock(&e->lock);
    bool done = r->done;
    pthread_mutex_unlock(&e->lock);
    return done;
}

static pcnn_status finished(engine *e, const request *r)
{
    if (r->mpi_code == MPI_SUCCESS) return PCNN_OK;
    static const char *const names[] = {"MPI_Allreduce", "MPI_Alltoallv", "MPI_Allgatherv"};
    pcnn_status st = mpi_status(r->mpi_code, "engine_wait", names[r->kind]);
    if (e->error == PCNN_OK) e->error = st;
    engine_abort(e);
    return st;
}

static pcnn_status timed_out(engine *e, long timeout_ms)
{
    e->error = PCNN_ERR_TIMEOUT;
    engine_abort(e);
    return error_set(PCNN_ERR_TIMEOUT, "engine_wait", "a collective did not complete within "
                     "%ld ms (another rank may have stopped); the network is now aborted",
                     timeout_ms);
}

static pcnn_status refused(const engine *e)
{
    if (e->error != PCNN_OK)
        return error_set(e->error, "engine_wait", "an earlier collective %s; the network is "
                         "aborted", e->error == PCNN_ERR_TIMEOUT ? "timed out" : "failed");
    return error_set(PCNN_ERR_INVALID_STATE, "engine_wait", "the network was aborted");
}

pcnn_status engine_wait(engine *e, request *r, long timeout_ms)
{
    if (!r->posted) return PCNN_OK;
    if (atomic_load(&e->aborted)) return refused(e);
    const double deadline = timeout_ms > 0 ? engine_now() + timeout_ms * 1e-3 : 0.0;
    if (e->kind == ENGINE_NONBLOCKING) {
        while (!r->done) {
            engine_progress(e);
            if (!r->done && atomic_load_explicit(&e->aborted, memory_order_relaxed))
                return refused(e);
            if (!r->done && deadline > 0 && engine_now() > deadline)
                return timed_out(e, timeout_ms);
        }
        return finished(e, r);
    }
    pthread_mutex_lock(&e->lock);
    atomic_fetch_add(&e->waiting, 1);
    while (!r->done && !atomic_load(&e->aborted)) {
        if (deadline <= 0) {
            pthread_cond_wait(&e->done, &e->lock);
            continue;
        }
        struct timespec ts;
        double whole;
        double frac = modf(deadline, &whole);
        ts.tv_sec = (time_t)whole;
        ts.tv_nsec = (long)(frac * 1e9);
        if (pthread_cond_timedwait(&e->done, &e->lock, &ts) == ETIMEDOUT && !r->done) {
            atomic_fetch_sub(&e->waiting, 1);
            pthread_mutex_unlock(&e->lock);
            return timed_out(e, timeout_ms);
        }
    }
    const bool done = r->done;
    atomic_fetch_sub(&e->waiting, 1);
    pthread_mutex_unlock(&e->lock);
    return done ? finished(e, r) : refused(e);
}
