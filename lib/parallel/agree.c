/* Agreement points: the collectives at which ranks learn of each other's
 * failures, so that an error on one rank never leaves the others blocked,
 * and the one timed wait every collective of pcnn goes through. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/error.h"
#include "../core/hash.h"
#include "../core/memory.h"
#include "engine.h" /* engine_now */
#include "parallel.h"

/* ------------------------------------------------------------------ */
/* The timed wait                                                       */
/* ------------------------------------------------------------------ */

pcnn_status comm_check_usable(const pcnn_comm *c, const char *func)
{
    if (mpi_is_finalized())
        return error_set(PCNN_ERR_INVALID_STATE, func, "MPI was finalised: no collective call "
                         "is possible any more; only the destroy calls remain");
    if (c->failed == PCNN_OK) return PCNN_OK;
    return error_set(PCNN_ERR_INVALID_STATE, func, "an earlier collective on this communicator "
                     "%s and was abandoned; destroy the networks that use it and the "
                     "communicator", c->failed == PCNN_ERR_TIMEOUT ? "timed out" : "failed");
}

static pcnn_status give_up(pcnn_comm *c, pcnn_status why)
{
    c->failed = why;
    return why;
}

pcnn_status request_complete(MPI_Request *req, long timeout_ms, pcnn_status *broke,
                             const char *func, const char *what)
{
    if (timeout_ms <= 0) {
        int code = MPI_Wait(req, MPI_STATUS_IGNORE);
        if (code == MPI_SUCCESS) return PCNN_OK;
        *broke = PCNN_ERR_MPI;
        return mpi_status(code, func, what);
    }
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
                             "(another rank may have stopped, or be in another call); the "
                             "communicator is now unusable", what, timeout_ms);
        }
    }
}

pcnn_status comm_complete(pcnn_comm *c, int post_code, MPI_Request *req, long timeout_ms,
                          const char *func, const char *what)
{
    if (post_code != MPI_SUCCESS) {
        give_up(c, PCNN_ERR_MPI); /* the other ranks may have posted theirs */
        return mpi_status(post_code, func, what);
    }
    pcnn_status broke = PCNN_OK;
    const pcnn_status st = request_complete(req, timeout_ms, &broke, func, what);
    if (broke != PCNN_OK) give_up(c, broke);
    return st;
}

/* ------------------------------------------------------------------ */
/* Where a rank is                                                      */
/* ------------------------------------------------------------------ */

/* The collective calls, to name where another rank is. */
static const char *const collective_calls[] = {
    "pcnn_net_finalize", "pcnn_net_train_step", "pcnn_net_train_epoch", "pcnn_net_evaluate",
    "pcnn_net_save", "pcnn_net_load", "pcnn_net_save_extra", "pcnn_net_load_extra",
    "pcnn_scheduler_create", "pcnn_scheduler_begin_epoch", "pcnn_scheduler_end_epoch",
    "pcnn_scheduler_train_epoch", "pcnn_scheduler_save_state", "pcnn_scheduler_load_state",
    "pcnn_net_write_trace_merged", "pcnn_net_predict_parallel", "pcnn_net_compute_loss",
    "pcnn_net_compute_gradients", "pcnn_net_train_step_local", "pcnn_net_plan_distribution",
    "pcnn_net_set_exchange", "pcnn_layer_set_exchange", "pcnn_perfmodel_calibrate_comm",
    "pcnn_perfmodel_share", "pcnn_comm_barrier", "pcnn_comm_bcast"};

static const char *const stage_names[] = {"", " (batch agreement)", " (loss agreement)",
                                          " (end of step)", " (a later agreement)"};
#define STAGES ((int)(sizeof stage_names / sizeof stage_names[0]))

/* A call and stage as one double, exact (48 bits of the name's hash). */
static double point_of(const char *func, int stage)
{
    const uint64_t h = hash_fnv1a(HASH_FNV1A_BASIS, func, strlen(func)) >> 16;
    return (double)(h * STAGES + (uint64_t)stage);
}

static void name_point(double point, char *out, size_t size)
{
    const size_t calls = sizeof collective_calls / sizeof collective_calls[0];
    for (size_t i = 0; i < calls; i++)
        for (int s = 0; s < STAGES; s++)
            if (point_of(collective_calls[i], s) == point) {
                snprintf(out, size, "%s%s", collective_calls[i], stage_names[s]);
                return;
            }
    snprintf(out, size, "another call");
}

/* ------------------------------------------------------------------ */
/* Records                                                              */
/* ------------------------------------------------------------------ */

static double *my_record(const pcnn_comm *c) { return c->records; }
static const double *record_of(const pcnn_comm *c, int q)
{
    return c->records + AGREE_RECORD * (size_t)(q + 1);
}

static bool is_fatal(pcnn_status st) { return st == PCNN_ERR_TIMEOUT || st == PCNN_ERR_MPI; }

/* Fill this rank's record and post the all-gather of every rank's. */
static pcnn_status post_records(pcnn_comm *c, agree_stage stage, pcnn_status local,
                                const double *values, int count, const char *func,
                                agree_ticket *t)
{
    *t = (agree_ticket){.local = local};
    if (count > AGREE_MAX_VALUES)
        return error_set(PCNN_ERR_INTERNAL, func, "an agreement of %d values", count);
    TRY(comm_check_usable(c, func));
    c->peer_failed = PCNN_OK;
    double *mine = my_record(c);
    mine[0] = point_of(func, (int)stage);
    mine[1] = (double)local;
    for (int i = 0; i < AGREE_MAX_VALUES; i++) mine[2 + i] = i < count && values ? values[i] : 0.0;
    t->code = MPI_Iallgather(my_record(c), AGREE_RECORD, MPI_DOUBLE, c->records + AGREE_RECORD,
                             AGREE_RECORD, MPI_DOUBLE, c->comm, &t->req);
    t->posted = true;
    return PCNN_OK;
}

/* Wait for the records a ticket posted, and judge them alike on every rank
 * (see parallel.h). */
static pcnn_status finish_records(pcnn_comm *c, agree_ticket *t, long timeout_ms,
                                  const char *func)
{
    if (!t->posted) return error_set(PCNN_ERR_INTERNAL, func, "an agreement never posted");
    t->posted = false;
    TRY(comm_complete(c, t->code, &t->req, timeout_ms, func, "MPI_Allgather (agreement)"));
    for (int q = 0; q < c->size; q++)
        if (record_of(c, q)[0] != record_of(c, 0)[0]) {
            char first[80], other[80];
            name_point(record_of(c, 0)[0], first, sizeof first);
            name_point(record_of(c, q)[0], other, sizeof other);
            return error_set(PCNN_ERR_MISMATCH, func, "ranks are in different collective calls: "
                             "rank 0 in %s, rank %d in %s (every rank must make the same "
                             "collective calls in the same order)", first, q, other);
        }
    int failed = 0;
    for (int q = 0; q < c->size; q++) {
        const pcnn_status s = (pcnn_status)record_of(c, q)[1];
        failed += s != PCNN_OK;
        if (q != c->rank && is_fatal(s) && c->peer_failed == PCNN_OK) c->peer_failed = s;
    }
    if (t->local != PCNN_OK) return t->local; /* keep this rank's own message */
    if (failed)
        return error_set(PCNN_ERR_REMOTE, func, "%d other rank(s) failed; this rank (%d) did not%s",
                         failed, c->rank, c->peer_failed != PCNN_OK ? " (a network on another "
                         "rank failed: this rank's network is aborted as well)" : "");
    return PCNN_OK;
}

/* Post this rank's record, gather everyone's, and judge them. */
static pcnn_status exchange_records(pcnn_comm *c, agree_stage stage, pcnn_status local,
                                    const double *values, int count, long timeout_ms,
                                    const char *func)
{
    agree_ticket t;
    TRY(post_records(c, stage, local, values, count, func, &t));
    return finish_records(c, &t, timeout_ms, func);
}

void agree_abandon(pcnn_comm *c, agree_ticket *t, pcnn_status why)
{
    if (!t->posted) return;
    t->posted = false;
    give_up(c, why); /* MPI keeps the request and may still write the records */
}

pcnn_status agree_sum(pcnn_comm *c, agree_stage stage, pcnn_status local, double *values,
                      int count, long timeout_ms, const char *func)
{
    TRY(exchange_records(c, stage, local, values, count, timeout_ms, func));
    for (int i = 0; i < count; i++) {
        double sum = 0.0;
        for (int q = 0; q < c->size; q++) sum += record_of(c, q)[2 + i];
        values[i] = sum;
    }
    return PCNN_OK;
}

pcnn_status agree(pcnn_comm *c, pcnn_status local, long timeout_ms, const char *func)
{
    return agree_sum(c, AGREE_ENTRY, local, NULL, 0, timeout_ms, func);
}

void format_double(double v, char *out, size_t size)
{
    snprintf(out, size, "%.15g", v); /* the shortest that reads back exactly */
    if (strtod(out, NULL) != v) snprintf(out, size, "%.17g", v);
}

/* The first rank whose value i differs from rank 0's, or -1. */
static int first_differing(const pcnn_comm *c, int i)
{
    for (int q = 1; q < c->size; q++)
        if (memcmp(&record_of(c, q)[2 + i], &record_of(c, 0)[2 + i], sizeof(double)) != 0)
            return q;
    return -1;
}

pcnn_status agree_batch_post(pcnn_comm *c, pcnn_status local, const double *sizes, uint64_t step,
                             double lr, const char *func, agree_ticket *t)
{
    const double mine[4] = {sizes[0], (double)step, lr, sizes[2]};
    return post_records(c, AGREE_STEP_BATCH, local, mine, 4, func, t);
}

pcnn_status agree_batch_finish(pcnn_comm *c, agree_ticket *t, double *sizes, long timeout_ms,
                               const char *func)
{
    TRY(finish_records(c, t, timeout_ms, func));
    double total = 0.0, below = 0.0, stops = 0.0;
    for (int q = 0; q < c->size; q++) {
        const double n = record_of(c, q)[2];
        c->batches[q] = (int)n;
        total += n;
        if (q < c->rank) below += n;
        stops += record_of(c, q)[5];
    }
    int q = first_differing(c, 1);
    if (q > 0)
        return error_set(PCNN_ERR_MISMATCH, func, "ranks are at different training steps: step "
                         "counter %.0f on rank 0, %.0f on rank %d (PCNN_OPT_STEP)",
                         record_of(c, 0)[3], record_of(c, q)[3], q);
    q = first_differing(c, 2);
    if (q > 0) {
        char a[32], b[32];
        format_double(record_of(c, 0)[4], a, sizeof a);
        format_double(record_of(c, q)[4], b, sizeof b);
        return error_set(PCNN_ERR_MISMATCH, func, "ranks would use different learning rates "
                         "for this step: %s on rank 0, %s on rank %d (PCNN_OPT_LEARNING_RATE "
                         "and its schedule)", a, b, q);
    }
    sizes[0] = total;
    sizes[1] = below;
    sizes[2] = stops;
    return PCNN_OK;
}

pcnn_status agree_batch(pcnn_comm *c, pcnn_status local, double *sizes, uint64_t step,
                        double lr, long timeout_ms, const char *func)
{
    agree_ticket t;
    TRY(agree_batch_post(c, local, sizes, step, lr, func, &t));
    return agree_batch_finish(c, &t, sizes, timeout_ms, func);
}

/* ------------------------------------------------------------------ */
/* Comparing words                                                      */
/* ------------------------------------------------------------------ */

pcnn_status agree_words(pcnn_comm *c, pcnn_status local, const uint64_t *words, int count,
                        long timeout_ms, const char *func, word_difference *diff)
{
    uint64_t *all = mem_calloc((size_t)c->size * (size_t)(count > 0 ? count : 1), sizeof *all);
    pcnn_status st = local;
    if (st == PCNN_OK && !all)
        st = FAIL(PCNN_ERR_OUT_OF_MEMORY, "table of %d words from %d ranks", count, c->size);
    /* Even a rank out of memory takes part, or the others would wait. */
    st = agree_sum(c, AGREE_LATER, st, NULL, 0, timeout_ms, func);
    if (st == PCNN_OK) {
        MPI_Request req;
        const int code = MPI_Iallgather(words, count, MPI_UINT64_T, all, count, MPI_UINT64_T,
                                        c->comm, &req);
        st = comm_complete(c, code, &req, timeout_ms, func, "MPI_Allgather (comparison)");
        if (st != PCNN_OK) return st; /* `all` stays MPI's */
    }
    for (int i = 0; st == PCNN_OK && i < count; i++)
        for (int q = 1; q < c->size; q++) {
            const uint64_t a = all[i], b = all[(size_t)q * count + i];
            if (a == b) continue;
            *diff = (word_difference){.index = i, .rank = q, .first = a, .other = b};
            st = PCNN_ERR_MISMATCH;
            break;
        }
    mem_free(all);
    return st;
}
