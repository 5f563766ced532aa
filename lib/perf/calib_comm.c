/* Link calibration (spec C.5): ping-pong and collective sweeps from 8 B
 * to 64 MiB on the caller's communicator, through the same nonblocking
 * calls and timed completion the exchange uses.  Every decision (how many
 * repetitions, when to stop a sweep) is taken from values all ranks agreed
 * on, so every rank posts the same collectives; rank 0's fit is broadcast. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/clock.h"
#include "../core/error.h"
#include "../core/memory.h"
#include "perf.h"

#define TIMEOUT_MS 120000L
#define SIZES 13 /* 8 B * 4^k, k = 0..11, then 64 MiB */
#define MAX_BYTES ((size_t)64 << 20)

typedef struct bench {
    pcnn_comm *c;
    const char *func;
    unsigned char *send, *recv;
} bench;

static double size_of(int k) { return k < SIZES - 1 ? 8.0 * pow(4.0, k) : (double)MAX_BYTES; }

static pcnn_status complete(bench *b, int code, MPI_Request *req, const char *what)
{
    return comm_complete(b->c, code, req, TIMEOUT_MS, b->func, what);
}

/* One collective of `bytes` (rounded as posted); *actual the bytes modelled. */
static pcnn_status run_once(bench *b, pcnn_collective k, double bytes, double *actual)
{
    const int P = b->c->size, r = b->c->rank;
    MPI_Comm comm = b->c->comm;
    MPI_Request req;
    int per = (int)(bytes / P) > 0 ? (int)(bytes / P) : 1;
    switch (k) {
    case PCNN_COLL_ALLREDUCE: {
        const int count = (int)(bytes / 4) > 0 ? (int)(bytes / 4) : 1;
        *actual = 4.0 * count;
        return complete(b, MPI_Iallreduce(b->send, b->recv, count, MPI_FLOAT, MPI_SUM, comm, &req),
                        &req, "MPI_Iallreduce (calibration)");
    }
    case PCNN_COLL_ALLTOALL:
        *actual = (double)per * P;
        return complete(b, MPI_Ialltoall(b->send, per, MPI_BYTE, b->recv, per, MPI_BYTE, comm,
                                         &req),
                        &req, "MPI_Ialltoall (calibration)");
    case PCNN_COLL_ALLGATHER:
        *actual = (double)per * P;
        return complete(b, MPI_Iallgather(b->send, per, MPI_BYTE, b->recv, per, MPI_BYTE, comm,
                                          &req),
                        &req, "MPI_Iallgather (calibration)");
    case PCNN_COLL_SENDRECV: {
        per = (int)bytes;
        *actual = per;
        if (r > 1) return PCNN_OK;
        const int peer = 1 - r;
        for (int leg = 0; leg < 2; leg++) {
            const bool sending = (leg == 0) == (r == 0);
            const int code = sending ? MPI_Isend(b->send, per, MPI_BYTE, peer, 77, comm, &req)
                                     : MPI_Irecv(b->recv, per, MPI_BYTE, peer, 77, comm, &req);
            TRY(complete(b, code, &req, sending ? "MPI_Isend (ping-pong)" : "MPI_Irecv (ping-pong)"));
        }
        return PCNN_OK;
    }
    }
    return PCNN_OK;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of t[0..n) (sorted in place). */
static double median_of(double *t, int n)
{
    qsort(t, (size_t)n, sizeof t[0], cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* Median seconds of `reps` runs after a warm-up (a run preempted by another
 * process on a shared machine does not count), the maximum over ranks;
 * *elapsed the wall time of it all, warm-up included (its first touch of
 * the buffers' pages may cost more than the runs), the maximum too. */
#define MAX_REPS 20
static pcnn_status measure(bench *b, pcnn_collective k, double bytes, int reps, double *seconds,
                           double *actual, double *elapsed, double *spread)
{
    const double start = clock_now();
    TRY(run_once(b, k, bytes, actual));
    MPI_Request req;
    TRY(complete(b, MPI_Ibarrier(b->c->comm, &req), &req, "MPI_Ibarrier (calibration)"));
    double t[MAX_REPS];
    reps = reps > MAX_REPS ? MAX_REPS : reps;
    for (int i = 0; i < reps; i++) {
        const double t0 = clock_now();
        TRY(run_once(b, k, bytes, actual));
        t[i] = clock_now() - t0;
        if (k == PCNN_COLL_SENDRECV) t[i] /= 2; /* one way of the round trip */
    }
    const double mid = median_of(t, reps); /* sorts t */
    /* Repetitions that disagree: the interquartile range over the median
     * (-1: too few runs to tell). */
    const double iqr = reps >= 4 && mid > 0 ? (t[(3 * reps) / 4] - t[reps / 4]) / mid : -1;
    double mine[3] = {mid, clock_now() - start, iqr}, most[3];
    TRY(complete(b, MPI_Iallreduce(mine, most, 3, MPI_DOUBLE, MPI_MAX, b->c->comm, &req), &req,
                 "MPI_Iallreduce (calibration times)"));
    *seconds = most[0];
    *elapsed = most[1];
    if (spread) *spread = most[2];
    return PCNN_OK;
}

/* Sweep one collective within `share` seconds, from the smallest size up
 * (latency first, then bandwidth as far as the budget goes: on a slow link
 * 64 MiB alone may take longer than the budget, and a curve whose points
 * are far apart models the sizes between them badly).  Each size's
 * estimate extends the last two points' slope (at least 1 ns per byte);
 * the sweep stops at the first size it cannot afford twice.  Decisions use
 * agreed times only (the time used is the measured wall time, not the
 * estimate), so every rank posts the same collectives. */
static pcnn_status sweep(bench *b, perf_link *k, pcnn_collective c, double share)
{
    perf_curve *cv = &k->curve[c];
    cv->count = 0;
    double used = 0, spreads[SIZES];
    int counted = 0;
    for (int i = 0; i < SIZES && cv->count < PERF_CURVE_MAX; i++) {
        const double n = size_of(i);
        double estimate = 1e-4;
        if (cv->count) {
            const int last = cv->count - 1;
            double slope = 1e-9;
            if (last > 0) {
                const double s = (cv->seconds[last] - cv->seconds[last - 1]) /
                                 (cv->bytes[last] - cv->bytes[last - 1]);
                if (s > slope) slope = s;
            }
            estimate = cv->seconds[last] + (n - cv->bytes[last]) * slope;
        }
        const double left = share - used;
        if (i > 0 && 2 * estimate > left) break;
        int reps = (int)(left / (SIZES - i) / estimate);
        /* Small ones (the first, 8 B, too) get enough runs for a median. */
        reps = reps < 1 ? 1 : reps > MAX_REPS ? MAX_REPS : reps;
        if ((i == 0 || estimate < 1e-3) && reps < 7) reps = 7;
        double t = 0, actual = 0, elapsed = 0, spread = -1;
        TRY(measure(b, c, n, reps, &t, &actual, &elapsed, &spread));
        used += elapsed;
        if (spread >= 0) spreads[counted++] = spread;
        if (t > 0 && (!cv->count || actual > cv->bytes[cv->count - 1])) {
            cv->bytes[cv->count] = actual;
            cv->seconds[cv->count] = t;
            cv->count++;
        }
    }
    k->spread[c] = counted ? median_of(spreads, counted) : 0;
    return PCNN_OK;
}

/* Seconds per byte of summing one float vector into another. */
static double measure_gamma(void)
{
    const size_t n = (size_t)1 << 22;
    float *x = mem_calloc(2 * n, sizeof *x);
    if (!x) return 1.0 / 4e9;
    float *y = x + n;
    double best = INFINITY;
    for (int r = 0; r < 4; r++) {
        const double t0 = clock_now();
        for (size_t i = 0; i < n; i++) y[i] += x[i];
        const double t = clock_now() - t0;
        if (t < best) best = t;
    }
    mem_free(x);
    return best / (4.0 * (double)n);
}

/* How far a nonblocking all-reduce gets per MPI_Test when the caller
 * computes between tests (the nonblocking engine's polls between layers):
 * the time it takes alone over the number of polls it needs with 0.5 ms of
 * computation between them (the largest count over ranks). */
static pcnn_status measure_polling(bench *b, const perf_link *k, double *poll_work,
                                   double *poll_cpu)
{
    const perf_curve *cv = &k->curve[PCNN_COLL_ALLREDUCE];
    double bytes = 8 << 20;
    if (cv->count && cv->bytes[cv->count - 1] < bytes) bytes = cv->bytes[cv->count - 1];
    double alone = 0, actual = 0, elapsed = 0;
    TRY(measure(b, PCNN_COLL_ALLREDUCE, bytes, 2, &alone, &actual, &elapsed, NULL));
    MPI_Request req;
    TRY(complete(b, MPI_Ibarrier(b->c->comm, &req), &req, "MPI_Ibarrier (calibration)"));
    const int count = (int)(bytes / 4);
    int code = MPI_Iallreduce(b->send, b->recv, count, MPI_FLOAT, MPI_SUM, b->c->comm, &req);
    double polls = 0, in_tests = 0;
    const double start = clock_now();
    for (int flag = 0; code == MPI_SUCCESS && !flag;) {
        const double until = clock_now() + 5e-4;
        while (clock_now() < until) continue; /* computing, not in MPI */
        const double t0 = clock_now();
        code = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        in_tests += clock_now() - t0;
        polls++;
        if (!flag && clock_now() - start > 10.0) { /* hardly progresses: let the wait finish it */
            TRY(complete(b, code, &req, "MPI_Iallreduce (polled calibration)"));
            break;
        }
    }
    if (code != MPI_SUCCESS) return mpi_status(code, b->func, "MPI_Test (calibration)");
    double most = polls;
    TRY(complete(b, MPI_Iallreduce(&polls, &most, 1, MPI_DOUBLE, MPI_MAX, b->c->comm, &req),
                 &req, "MPI_Iallreduce (calibration polls)"));
    *poll_work = alone / (most > 1 ? most : 1);
    /* The share of that work the polling thread does itself (shared
     * memory: its copies) rather than a network does beside it. */
    double cpu = alone > 0 ? in_tests / alone : 0, worst = cpu;
    TRY(complete(b, MPI_Iallreduce(&cpu, &worst, 1, MPI_DOUBLE, MPI_MAX, b->c->comm, &req),
                 &req, "MPI_Iallreduce (calibration polls)"));
    *poll_cpu = worst < 0 ? 0 : worst > 1 ? 1 : worst;
    return PCNN_OK;
}

/* A momentum update's memory traffic over n parameters (optim_update's
 * loop for PCNN_OPTIMIZER_MOMENTUM, the learning rate too small to move
 * them far): three streams read, two written. */
static void stream_update(float *p, const float *g, float *m, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        m[i] = 0.9f * m[i] + g[i];
        p[i] -= 1e-12f * m[i];
    }
}

#define CONTENTION_REPS 7
#define CONTENTION_ALONE 8 /* ranks timed alone, one after the other */

static int timed_alone(const bench *b)
{
    return b->c->size < CONTENTION_ALONE ? b->c->size : CONTENTION_ALONE;
}

/* Compute in registers (as the compute calibration's neighbours do: an
 * idle core would lend the timed rank more than it has in training)
 * until every rank has entered a barrier. */
static pcnn_status compute_until_barrier(bench *b)
{
    MPI_Request req;
    int code = MPI_Ibarrier(b->c->comm, &req), flag = 0;
    volatile double x = 1.0;
    const double start = clock_now();
    while (code == MPI_SUCCESS && !flag && clock_now() - start < 10.0) {
        for (int i = 0; i < 20000; i++) x = x * 1.0000001 + 1e-9;
        code = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    }
    if (code != MPI_SUCCESS) return mpi_status(code, b->func, "MPI_Test (calibration)");
    return flag ? PCNN_OK : complete(b, MPI_SUCCESS, &req, "MPI_Ibarrier (calibration)");
}

/* This rank's ratio for updates of n parameters: every rank streaming
 * at once, over one rank at a time while the others compute (0 for a rank
 * not timed alone). */
static pcnn_status contention_at(bench *b, float *buf, size_t n, double *ratio)
{
    float *p = buf, *g = buf + n, *m = buf + 2 * n;
    for (size_t i = 0; i < n; i++) g[i] = 1e-3f;
    stream_update(p, g, m, n); /* pages touched */
    double together[CONTENTION_REPS], alone[CONTENTION_REPS];
    MPI_Request req;
    for (int r = 0; r < CONTENTION_REPS; r++) {
        TRY(complete(b, MPI_Ibarrier(b->c->comm, &req), &req, "MPI_Ibarrier (calibration)"));
        const double t0 = clock_now();
        stream_update(p, g, m, n);
        together[r] = clock_now() - t0;
    }
    const int timed = timed_alone(b);
    for (int q = 0; q < timed; q++) {
        for (int r = 0; r < CONTENTION_REPS; r++) {
            TRY(complete(b, MPI_Ibarrier(b->c->comm, &req), &req, "MPI_Ibarrier (calibration)"));
            if (b->c->rank != q) {
                TRY(compute_until_barrier(b));
                continue;
            }
            const double t0 = clock_now();
            stream_update(p, g, m, n);
            alone[r] = clock_now() - t0;
            TRY(complete(b, MPI_Ibarrier(b->c->comm, &req), &req, "MPI_Ibarrier (calibration)"));
        }
    }
    *ratio = 0; /* not timed alone: left out of the mean */
    if (b->c->rank < timed) {
        const double a = median_of(alone, CONTENTION_REPS);
        *ratio = a > 0 ? median_of(together, CONTENTION_REPS) / a : 1;
    }
    return PCNN_OK;
}

/* The exchange's ranks reach their updates together (each after the same
 * collective), and ranks on one node then share its memory bandwidth and
 * last-level cache; the compute calibration is local and times the update
 * on one rank, beside ranks that are computing.  Per size, the mean ratio
 * over the ranks timed (>= 1, and not falling with the size: a larger
 * update fits a cache less). */
static pcnn_status measure_contention(bench *b, double *factor)
{
    const size_t most = (size_t)perf_contention_params(PERF_CONTENTION_SIZES - 1);
    float *buf = mem_calloc(3 * most, sizeof *buf);
    TRY(agree(b->c, buf ? PCNN_OK : FAIL(PCNN_ERR_OUT_OF_MEMORY, "contention buffer"),
              TIMEOUT_MS, b->func));
    double mine[PERF_CONTENTION_SIZES], sum[PERF_CONTENTION_SIZES];
    pcnn_status st = PCNN_OK;
    for (int i = 0; i < PERF_CONTENTION_SIZES && st == PCNN_OK; i++)
        st = contention_at(b, buf, (size_t)perf_contention_params(i), &mine[i]);
    mem_free(buf);
    TRY(st);
    MPI_Request req;
    TRY(complete(b, MPI_Iallreduce(mine, sum, PERF_CONTENTION_SIZES, MPI_DOUBLE, MPI_SUM,
                                   b->c->comm, &req),
                 &req, "MPI_Iallreduce (calibration contention)"));
    for (int i = 0; i < PERF_CONTENTION_SIZES; i++) {
        const double mean = sum[i] / timed_alone(b);
        double f = mean >= 1 && mean < 1e3 ? mean : 1;
        if (i > 0 && f < factor[i - 1]) f = factor[i - 1];
        factor[i] = f;
    }
    return PCNN_OK;
}

/* The link as doubles, for the broadcast: its 4 scalars (ranks, gamma,
 * poll_work, poll_cpu), the contention by size, then each collective's. */
enum { PACKED = 4 + PERF_CONTENTION_SIZES + PERF_COLLECTIVES * (3 + 2 * PERF_CURVE_MAX) };

/* Returns the doubles a full pack takes (PACKED, or a field added here
 * and not counted there: refused by the caller, nothing written past v). */
static size_t pack(perf_link *k, double *v, bool out)
{
    double *p = v;
    size_t fields = 0;
#define FIELD(x)                                                                   \
    do {                                                                           \
        if (++fields <= PACKED) (void)(out ? (*p++ = (double)(x)) : ((x) = *p++)); \
    } while (0)
    FIELD(k->ranks);
    FIELD(k->gamma);
    FIELD(k->poll_work);
    FIELD(k->poll_cpu);
    for (int i = 0; i < PERF_CONTENTION_SIZES; i++) FIELD(k->mem_contention[i]);
    for (int c = 0; c < PERF_COLLECTIVES; c++) {
        FIELD(k->alpha[c]);
        FIELD(k->beta[c]);
        FIELD(k->curve[c].count);
        for (int i = 0; i < PERF_CURVE_MAX; i++) {
            FIELD(k->curve[c].bytes[i]);
            FIELD(k->curve[c].seconds[i]);
        }
    }
#undef FIELD
    return fields;
}

/* Every rank's verdict on its arguments, and the same budget everywhere:
 * sweeps cut to different budgets would post different collectives. */
static pcnn_status agree_budget(pcnn_comm *comm, double budget, pcnn_status local,
                                const char *func)
{
    uint64_t word;
    memcpy(&word, &budget, sizeof word);
    word_difference d;
    const pcnn_status st = agree_words(comm, local, &word, 1, TIMEOUT_MS, func, &d);
    if (st != PCNN_ERR_MISMATCH) return st;
    double first, other;
    memcpy(&first, &d.first, sizeof first);
    memcpy(&other, &d.other, sizeof other);
    return error_set(PCNN_ERR_MISMATCH, func, "ranks passed different budgets: %g s on rank 0, "
                     "%g s on rank %d", first, other, d.rank);
}

/* *left: what the budget leaves after `start`, by the slowest rank's clock
 * (an agreed value: the sweeps decide from it). */
static pcnn_status budget_left(bench *b, double start, double budget, double *left)
{
    double used = clock_now() - start, most = used;
    MPI_Request req;
    TRY(complete(b, MPI_Iallreduce(&used, &most, 1, MPI_DOUBLE, MPI_MAX, b->c->comm, &req), &req,
                 "MPI_Iallreduce (calibration budget)"));
    *left = budget - most;
    return PCNN_OK;
}

/* "8 B", "2 KiB", "64 MiB": a message size for the progress lines. */
static const char *size_text(double bytes, char *buf, size_t size)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB"};
    int u = 0;
    while (bytes >= 1024 && u < 3) {
        bytes /= 1024;
        u++;
    }
    snprintf(buf, size, "%.0f %s", bytes, unit[u]);
    return buf;
}

static void log_sweep(const pcnn_perfmodel *log, const perf_link *k, pcnn_collective c,
                      double seconds)
{
    static const char *const name[PERF_COLLECTIVES] = {"send-recv", "all-reduce", "all-to-all",
                                                       "all-gather"};
    const perf_curve *cv = &k->curve[c];
    char lo[32], hi[32];
    if (cv->count == 0) {
        perf_log(log, PCNN_LOG_INFO, "calibrate_comm: %s: no size measured in %.3g s (the "
                 "defaults stay)", name[c], seconds);
        return;
    }
    size_text(cv->bytes[0], lo, sizeof lo);
    size_text(cv->bytes[cv->count - 1], hi, sizeof hi);
    if (cv->count == 1)
        perf_log(log, PCNN_LOG_INFO, "calibrate_comm: %s swept, 1 size (%s) in %.3g s",
                 name[c], lo, seconds);
    else
        perf_log(log, PCNN_LOG_INFO, "calibrate_comm: %s swept, %d sizes %s..%s in %.3g s",
                 name[c], cv->count, lo, hi, seconds);
}

pcnn_status perf_calibrate_link(perf_link *k, pcnn_comm *comm, double budget, pcnn_status local,
                                const pcnn_perfmodel *log, const char *func)
{
    const double start = clock_now();
    TRY(comm_check_usable(comm, func));
    TRY(agree_budget(comm, budget, local, func));
    perf_log(log, PCNN_LOG_INFO, "calibrate_comm: %d rank(s), budget %g s", comm->size, budget);
    perf_link fresh;
    perf_link_defaults(&fresh);
    fresh.ranks = comm->size;
    fresh.gamma = measure_gamma();
    perf_log(log, PCNN_LOG_INFO, "calibrate_comm: summation timed, gamma %.3g s/B (%.3g s)",
             fresh.gamma, clock_now() - start);
    if (comm->size == 1) {
        perf_log(log, PCNN_LOG_INFO, "calibrate_comm: one rank, no link to measure: done");
        *k = fresh;
        return PCNN_OK;
    }
    const size_t room = MAX_BYTES + 64 * (size_t)comm->size;
    bench b = {.c = comm, .func = func, .send = mem_calloc(room, 1), .recv = mem_calloc(room, 1)};
    pcnn_status st = b.send && b.recv ? PCNN_OK
                                      : FAIL(PCNN_ERR_OUT_OF_MEMORY, "calibration buffers");
    st = agree(comm, st, TIMEOUT_MS, func);
    /* The fixed costs first (the contention's sizes do not depend on the
     * budget), so that the sweeps take what is left of it. */
    double t = clock_now();
    if (st == PCNN_OK) st = measure_contention(&b, fresh.mem_contention);
    double left = 0;
    if (st == PCNN_OK) st = budget_left(&b, start, budget, &left);
    if (st == PCNN_OK)
        perf_log(log, PCNN_LOG_INFO, "calibrate_comm: memory contention timed (%.3g s); %.3g s "
                 "left for the sweeps", clock_now() - t, left > 0 ? left : 0);
    const pcnn_collective order[4] = {PCNN_COLL_ALLREDUCE, PCNN_COLL_ALLTOALL,
                                      PCNN_COLL_ALLGATHER, PCNN_COLL_SENDRECV};
    const double share[4] = {0.3, 0.3, 0.24, 0.16};
    for (int i = 0; i < 4 && st == PCNN_OK; i++) {
        t = clock_now();
        st = sweep(&b, &fresh, order[i], left * share[i]);
        if (st == PCNN_OK) log_sweep(log, &fresh, order[i], clock_now() - t);
    }
    t = clock_now();
    if (st == PCNN_OK) st = measure_polling(&b, &fresh, &fresh.poll_work, &fresh.poll_cpu);
    if (st == PCNN_OK)
        perf_log(log, PCNN_LOG_INFO, "calibrate_comm: nonblocking progress timed (%.3g s)",
                 clock_now() - t);
    double packed[PACKED];
    if (st == PCNN_OK) {
        for (int c = 0; c < PERF_COLLECTIVES; c++) perf_coll_fit(&fresh, (pcnn_collective)c);
        /* The same on every rank: none posts the broadcast. */
        if (pack(&fresh, packed, true) != PACKED)
            st = FAIL(PCNN_ERR_INTERNAL, "the link's broadcast layout");
        MPI_Request req;
        if (st == PCNN_OK)
            st = complete(&b, MPI_Ibcast(packed, PACKED, MPI_DOUBLE, 0, comm->comm, &req), &req,
                          "MPI_Ibcast (calibration)");
    }
    if (st == PCNN_OK) {
        pack(&fresh, packed, false);
        *k = fresh;
        perf_log(log, PCNN_LOG_INFO, "calibrate_comm: done in %.3g s (rank 0's fits kept on "
                 "every rank)", clock_now() - start);
    }
    if (!comm_gave_up(comm)) { /* else MPI may still write them */
        mem_free(b.send);
        mem_free(b.recv);
    }
    return st;
}
