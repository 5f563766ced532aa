/* Ranks that disagree or stall fail together, under mpiexec -n 2 or 3;
 * argv[1] is the progress engine (1 thread, 2 nonblocking).  The last rank
 * plays the one that disagrees; PCNN_OPT_TIMEOUT_MS is 1 s.
 *
 *   1. Settings that must agree, set differently on the last rank before
 *      finalize (overlap, learning rate, step, bucket bytes, engine, a
 *      layer's width): PCNN_ERR_MISMATCH on every rank, naming the option
 *      (or layer) and its values on rank 0 and on the last rank; nothing is
 *      left failed, and the communicator trains a good network afterwards.
 *   2. After finalize, a learning rate or a step counter changed on the
 *      last rank: the step fails with MISMATCH everywhere naming it,
 *      parameters unchanged and identical; restored, training goes on.
 *   3. One rank saves (or evaluates) while the others train: MISMATCH on
 *      every rank at once, naming both calls; the next step trains.
 *   4. One rank skips a train_step, then saves while the others make their
 *      last step: every rank's first error is MISMATCH, parameters are
 *      identical.
 *   5. One rank destroys its network early: the others get
 *      PCNN_ERR_TIMEOUT within the timeout + 2 s, their network is failed
 *      (pcnn_net_async_error), refuses calls at once, and destroy returns.
 *   6. A slow rank (it sleeps past the timeout before a step): every rank
 *      gets PCNN_ERR_TIMEOUT within the timeout + 2 s of its call, and
 *      every rank's network reports the same failure.
 *   7. Out of memory on the last rank early in finalize: it gets
 *      OUT_OF_MEMORY, the others REMOTE, having allocated less than half of
 *      what a finalize allocates.
 *   8. An invalid Fortran communicator handle: INVALID_ARGUMENT, the
 *      process goes on.
 * In every case each rank's status is printed with the time it took.
 * A hang anywhere is caught by the meson timeout. */
#define PCNN_EXPERIMENTAL /* PCNN_OPT_ENGINE: pcnn.h section 9 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/mpi_check.h"
#include "core/memory.h"
#include "pcnn.h"

#define TIMEOUT_MS 1000
#define SAMPLE (2 * 6 * 6)
#define PER_RANK 2
#define LAYERS_DEEP 8

static float g_x[4 * PER_RANK * SAMPLE];
static int32_t g_lab[4 * PER_RANK];
static int g_engine;
static bool g_last; /* this rank plays the one that disagrees */
static bool g_spatial; /* build splits each sample's H across the ranks */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void sleep_ms(long ms)
{
    const struct timespec pause = {ms / 1000, ms % 1000 * 1000000L};
    nanosleep(&pause, NULL);
}

typedef void (*tweak_fn)(pcnn_net *net);

/* conv -> relu -> dense(width) -> dense(3), every exchange in play; the
 * last rank applies `tweak` before finalize.  Returns finalize's status. */
static pcnn_status build(pcnn_comm *comm, int width, tweak_fn tweak, pcnn_net **out)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, 2, 6, 6, &l));
    CK(pcnn_conv2d(net, l, 3, 3, 1, 1, 1, &l));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_dense(net, l, width, 1, &l));
    CK(pcnn_dense(net, l, 3, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_MOMENTUM));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 11));
    CK(pcnn_net_set_option(net, PCNN_OPT_BUCKET_BYTES, 256));
    CK(pcnn_net_set_option(net, PCNN_OPT_ENGINE, g_engine));
    CK(pcnn_net_set_option(net, PCNN_OPT_TIMEOUT_MS, TIMEOUT_MS));
    CK(pcnn_net_set_comm(net, comm));
    if (g_spatial) CK(pcnn_net_set_distribution(net, (const int[4]){1, 1, ranks, 1}));
    if (g_last && tweak) tweak(net);
    *out = net;
    return pcnn_net_finalize(net, PER_RANK * ranks);
}

static pcnn_net *build_ok(pcnn_comm *comm)
{
    pcnn_net *net;
    CK(build(comm, 5, NULL, &net));
    return net;
}

static pcnn_status step(pcnn_net *net)
{
    float loss;
    return pcnn_net_train_step(net, PER_RANK, g_x + (size_t)rank * PER_RANK * SAMPLE,
                               g_lab + PER_RANK * rank, NULL, &loss);
}

/* Parameters identical on every rank (collective over MPI_COMM_WORLD). */
static bool params_same(pcnn_net *net)
{
    size_t n = 0;
    CK(pcnn_net_num_params(net, &n));
    float *p = malloc(n * sizeof *p), *q = malloc(n * sizeof *q);
    CK(pcnn_net_get_params(net, p, n));
    memcpy(q, p, n * sizeof *p);
    MPI_Bcast(q, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    const bool same = n > 0 && memcmp(p, q, n * sizeof *p) == 0;
    free(p);
    free(q);
    return same;
}

static bool params_equal(pcnn_net *net, const float *before)
{
    size_t n = 0;
    CK(pcnn_net_num_params(net, &n));
    float *p = malloc(n * sizeof *p);
    CK(pcnn_net_get_params(net, p, n));
    const bool same = memcmp(p, before, n * sizeof *p) == 0;
    free(p);
    return same;
}

static float *params_copy(pcnn_net *net)
{
    size_t n = 0;
    CK(pcnn_net_num_params(net, &n));
    float *p = malloc(n * sizeof *p);
    CK(pcnn_net_get_params(net, p, n));
    return p;
}

/* The same status on every rank. */
static bool same_everywhere(pcnn_status st)
{
    int mine[2] = {(int)st, -(int)st};
    MPI_Allreduce(MPI_IN_PLACE, mine, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return mine[0] == -mine[1];
}

static pcnn_status query(const pcnn_net *net)
{
    pcnn_status st = PCNN_ERR_INTERNAL;
    CK(pcnn_net_async_error(net, &st));
    return st;
}

static bool says(const char *text) { return strstr(pcnn_last_error(), text) != NULL; }

/* Every rank reports what it got and how long it took. */
static void report(const char *scenario, pcnn_status st, double seconds)
{
    printf("  rank %d: %-44s %-18s %.2f s: %s\n", rank, scenario, pcnn_status_str(st), seconds,
           st == PCNN_OK ? "" : pcnn_last_error());
    fflush(stdout);
}

/* ------------------------------------------------------------------ */
/* 1. Settings that must agree                                          */
/* ------------------------------------------------------------------ */

static void no_overlap(pcnn_net *n) { CK(pcnn_net_set_option(n, PCNN_OPT_OVERLAP, 0)); }
static void other_rate(pcnn_net *n) { CK(pcnn_net_set_option(n, PCNN_OPT_LEARNING_RATE, 0.05)); }
static void other_step(pcnn_net *n) { CK(pcnn_net_set_option(n, PCNN_OPT_STEP, 7)); }
static void other_bucket(pcnn_net *n) { CK(pcnn_net_set_option(n, PCNN_OPT_BUCKET_BYTES, 512)); }
static void other_engine(pcnn_net *n) { CK(pcnn_net_set_option(n, PCNN_OPT_ENGINE, 3 - g_engine)); }
static void no_halo_overlap(pcnn_net *n) { CK(pcnn_net_set_option(n, PCNN_OPT_HALO_OVERLAP, 0)); }
static void other_schedule(pcnn_net *n) { CK(pcnn_net_set_option(n, PCNN_OPT_HALO_SCHEDULE, 1)); }
static void tracing(pcnn_net *n) { CK(pcnn_net_set_option(n, PCNN_OPT_TRACE_EVENTS, 1000)); }

static void finalize_mismatch(pcnn_comm *comm, const char *name, int width, tweak_fn tweak,
                              const char *first, const char *other)
{
    pcnn_net *net;
    const double t0 = now();
    const pcnn_status st = build(comm, width, tweak, &net);
    const double took = now() - t0;
    char what[200], tail[64];
    snprintf(what, sizeof what, "finalize, %s differs", name);
    report(what, st, took);
    snprintf(tail, sizeof tail, "%s on rank %d", other, ranks - 1);
    const bool named = st == PCNN_ERR_MISMATCH && says(name) && says(first) && says(tail);
    if (!named) fprintf(stderr, "rank %d: want \"%s\", \"%s\", \"%s\"\n", rank, name, first, tail);
    const bool clean = query(net) == PCNN_OK;
    CK(pcnn_net_destroy(&net));
    snprintf(what, sizeof what, "finalize: %s differing on one rank fails with MISMATCH "
             "naming it and its values, on every rank, at once", name);
    expect(named && same_everywhere(st) && took < 2.0, what);
    snprintf(what, sizeof what, "finalize: after the %s mismatch no network is failed", name);
    expect(clean, what);
}

static void settings(void)
{
    pcnn_comm *comm;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    char other_engine_text[16];
    snprintf(other_engine_text, sizeof other_engine_text, "%d", 3 - g_engine);
    finalize_mismatch(comm, "PCNN_OPT_OVERLAP", 5, no_overlap, "1 on rank 0", "0");
    finalize_mismatch(comm, "PCNN_OPT_LEARNING_RATE", 5, other_rate, "0.01", "0.05");
    finalize_mismatch(comm, "PCNN_OPT_STEP", 5, other_step, "0 on rank 0", "7");
    finalize_mismatch(comm, "PCNN_OPT_BUCKET_BYTES", 5, other_bucket, "256 on rank 0", "512");
    finalize_mismatch(comm, "PCNN_OPT_ENGINE", 5, other_engine, "on rank 0", other_engine_text);
    /* A tracing finalize pings rank 0 for its clock: tracing on one rank
     * only gave MISMATCH there, OK elsewhere, then a hung step. */
    finalize_mismatch(comm, "PCNN_OPT_TRACE_EVENTS", 5, tracing, "0 on rank 0", "1");
    /* A spatial network's halo messages follow these two: a difference
     * hung the first step's halo exchange. */
    g_spatial = true;
    finalize_mismatch(comm, "PCNN_OPT_HALO_OVERLAP", 5, no_halo_overlap, "1 on rank 0", "0");
    finalize_mismatch(comm, "PCNN_OPT_HALO_SCHEDULE", 5, other_schedule, "0 on rank 0", "1");
    g_spatial = false;
    /* A layer: the last rank's first dense layer is wider. */
    pcnn_net *net;
    pcnn_status st = build(comm, g_last ? 6 : 5, NULL, &net);
    report("finalize, a dense layer is wider", st, 0);
    expect(st == PCNN_ERR_MISMATCH && same_everywhere(st) && says("layer 3 (dense here)") &&
               says("output channels: 5 on rank 0"),
           "finalize: a layer differing on one rank is named with its values");
    CK(pcnn_net_destroy(&net));
    /* Nothing failed: the communicator trains. */
    net = build_ok(comm);
    const bool trained = step(net) == PCNN_OK && step(net) == PCNN_OK && params_same(net);
    CK(pcnn_net_destroy(&net));
    CK(pcnn_comm_destroy(&comm));
    expect(trained, "finalize mismatches: the communicator trains a good network afterwards");
}

/* ------------------------------------------------------------------ */
/* 2. The step's agreement: learning rate and step counter              */
/* ------------------------------------------------------------------ */

static void step_values(void)
{
    pcnn_comm *comm;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    pcnn_net *net = build_ok(comm);
    const bool good = step(net) == PCNN_OK && params_same(net);
    float *before = params_copy(net);

    if (g_last) CK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 0.02));
    double t0 = now();
    pcnn_status st = step(net);
    report("step, learning rate changed on one rank", st, now() - t0);
    bool named = st == PCNN_ERR_MISMATCH && says("learning rate") && says("0.01") &&
                 says("0.02");
    expect(good && named && same_everywhere(st) && params_equal(net, before),
           "step: a learning rate changed on one rank fails with MISMATCH naming both values, "
           "parameters unchanged");
    if (g_last) CK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 0.01));

    if (g_last) CK(pcnn_net_set_option(net, PCNN_OPT_STEP, 9));
    t0 = now();
    st = step(net);
    report("step, step counter changed on one rank", st, now() - t0);
    named = st == PCNN_ERR_MISMATCH && says("step counter 1 on rank 0, 9 on rank");
    expect(named && same_everywhere(st) && params_equal(net, before),
           "step: a step counter changed on one rank fails with MISMATCH naming both values, "
           "parameters unchanged");
    if (g_last) CK(pcnn_net_set_option(net, PCNN_OPT_STEP, 1));
    expect(step(net) == PCNN_OK && params_same(net) && query(net) == PCNN_OK,
           "step: restored, every rank trains on with identical parameters");

    /* NaN from the last rank, whose numeric check is off (allowed between
     * steps): rank 0's check covers the step for every rank. */
    float *mine = g_x + (size_t)rank * PER_RANK * SAMPLE;
    const float kept = mine[0];
    float *after_ok = params_copy(net);
    if (g_last) {
        CK(pcnn_net_set_option(net, PCNN_OPT_CHECK_NUMERICS, 0));
        mine[0] = NAN;
    }
    t0 = now();
    st = step(net);
    report("step, NaN from a rank not checking", st, now() - t0);
    expect(st == PCNN_ERR_NUMERIC && same_everywhere(st) && says("NaN or Inf on some rank") &&
               params_equal(net, after_ok),
           "step: NaN on a rank whose check is off fails with NUMERIC on every rank, "
           "parameters unchanged");
    mine[0] = kept;
    if (g_last) CK(pcnn_net_set_option(net, PCNN_OPT_CHECK_NUMERICS, 1));
    expect(step(net) == PCNN_OK && params_same(net), "step: after the NaN, every rank trains on");
    free(after_ok);
    free(before);
    CK(pcnn_net_destroy(&net));
    CK(pcnn_comm_destroy(&comm));
}

/* ------------------------------------------------------------------ */
/* 3-4. Different calls at once; a skipped step                         */
/* ------------------------------------------------------------------ */

static void other_calls(const char *path, const pcnn_dataset *data)
{
    pcnn_comm *comm;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    pcnn_net *net = build_ok(comm);
    bool good = step(net) == PCNN_OK;

    double t0 = now();
    pcnn_status st = g_last ? pcnn_net_save(net, path) : step(net);
    report("one rank saves while the others train", st, now() - t0);
    expect(good && st == PCNN_ERR_MISMATCH && same_everywhere(st) &&
               says("pcnn_net_train_step (batch agreement)") && says("pcnn_net_save") &&
               now() - t0 < 2.0,
           "one rank saves while the others train: MISMATCH on every rank at once, naming "
           "both calls");
    t0 = now();
    double loss = 0;
    st = g_last ? pcnn_net_evaluate(net, data, &loss, NULL) : step(net);
    report("one rank evaluates while the others train", st, now() - t0);
    expect(st == PCNN_ERR_MISMATCH && same_everywhere(st) && says("pcnn_net_evaluate"),
           "one rank evaluates while the others train: MISMATCH on every rank");
    expect(step(net) == PCNN_OK && params_same(net) && query(net) == PCNN_OK,
           "after the mismatched calls every rank trains on, parameters identical");

    /* 4. The last rank skips the third step, then saves while the others
     * make their fourth. */
    pcnn_status first = PCNN_OK;
    double took = 0;
    for (int s = 0; s < 4 && first == PCNN_OK; s++) {
        if (g_last && s == 2) continue;
        t0 = now();
        first = step(net);
        took = now() - t0;
    }
    if (g_last && first == PCNN_OK) {
        t0 = now();
        first = pcnn_net_save(net, path);
        took = now() - t0;
    }
    report("one rank skips a step", first, took);
    expect(first == PCNN_ERR_MISMATCH && same_everywhere(first) && took < 2.0,
           "one rank skips a step: every rank's first error is MISMATCH, at once");
    expect(params_same(net), "one rank skips a step: parameters identical on every rank");
    CK(pcnn_net_destroy(&net));
    CK(pcnn_comm_destroy(&comm));
}

/* ------------------------------------------------------------------ */
/* 5-6. A rank that leaves, a rank that is late                          */
/* ------------------------------------------------------------------ */

static bool refuses_at_once(pcnn_net *net)
{
    float p[4];
    const double t0 = now();
    const bool refused = step(net) == PCNN_ERR_INVALID_STATE &&
                         pcnn_net_get_params(net, p, 4) == PCNN_ERR_INVALID_STATE &&
                         pcnn_net_save(net, "unused.ckpt") == PCNN_ERR_INVALID_STATE;
    return refused && now() - t0 < 0.5;
}

static void early_destroy(void)
{
    pcnn_comm *comm;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    pcnn_net *net = build_ok(comm);
    const bool good = step(net) == PCNN_OK && step(net) == PCNN_OK;
    pcnn_status st = PCNN_OK;
    double t0 = now(), took;
    bool refused = true;
    if (g_last) {
        st = pcnn_net_destroy(&net);
        took = now() - t0;
        report("destroys its network early", st, took);
    } else {
        st = step(net);
        took = now() - t0;
        report("steps while one rank destroyed its network", st, took);
        refused = query(net) == PCNN_ERR_TIMEOUT && refuses_at_once(net);
    }
    const bool in_time = g_last ? took < 2.0 : took >= 0.9 * TIMEOUT_MS * 1e-3 &&
                                                   took < TIMEOUT_MS * 1e-3 + 2.0;
    expect(good && (g_last ? st == PCNN_OK : st == PCNN_ERR_TIMEOUT) && in_time,
           "one rank destroys its network: the others get TIMEOUT within the timeout + 2 s");
    expect(refused, "one rank destroys its network: the others' networks are failed and "
                    "refuse every call at once");
    t0 = now();
    const bool destroyed = pcnn_net_destroy(&net) == PCNN_OK &&
                           pcnn_comm_destroy(&comm) == PCNN_OK && now() - t0 < 2.0;
    expect(destroyed, "one rank destroys its network: every rank destroys its network and "
                      "communicator at once");
}

static void slow_rank(void)
{
    pcnn_comm *comm;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    pcnn_net *net = build_ok(comm);
    const bool good = step(net) == PCNN_OK && step(net) == PCNN_OK && params_same(net);
    if (g_last) sleep_ms(TIMEOUT_MS + 1000);
    const double t0 = now();
    const pcnn_status st = step(net);
    const double took = now() - t0;
    report(g_last ? "steps late (slept past the timeout)" : "steps while one rank is late", st,
           took);
    expect(good && st == PCNN_ERR_TIMEOUT && took < TIMEOUT_MS * 1e-3 + 2.0,
           "a slow rank: every rank gets TIMEOUT within the timeout + 2 s of its call");
    expect(query(net) == PCNN_ERR_TIMEOUT && refuses_at_once(net),
           "a slow rank: every rank's network is failed the same way and refuses at once");
    const double t1 = now();
    const bool destroyed = pcnn_net_destroy(&net) == PCNN_OK &&
                           pcnn_comm_destroy(&comm) == PCNN_OK && now() - t1 < 2.0;
    expect(destroyed, "a slow rank: destroy returns at once on every rank");
}

/* The same before an evaluation (its entry, dataset and loss agreements,
 * after the last step's all-gathers still in flight): one timeout, not one
 * per agreement. */
static void slow_evaluate(const pcnn_dataset *data)
{
    pcnn_comm *comm;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    pcnn_net *net = build_ok(comm);
    const bool good = step(net) == PCNN_OK && step(net) == PCNN_OK;
    if (g_last) sleep_ms(TIMEOUT_MS + 1000);
    const double t0 = now();
    double loss = 0;
    const pcnn_status st = pcnn_net_evaluate(net, data, &loss, NULL);
    const double took = now() - t0;
    report(g_last ? "evaluates late (slept past the timeout)" : "evaluates, one rank late", st,
           took);
    expect(good && st == PCNN_ERR_TIMEOUT && took < TIMEOUT_MS * 1e-3 + 0.5,
           "a slow rank before evaluate: every rank gets TIMEOUT within the timeout + 0.5 s");
    CK(pcnn_net_destroy(&net));
    CK(pcnn_comm_destroy(&comm));
}

/* ------------------------------------------------------------------ */
/* 7. Out of memory on one rank                                         */
/* ------------------------------------------------------------------ */

/* A deeper network, so that finalize allocates many blocks (not yet
 * finalized). */
static pcnn_net *build_deep(pcnn_comm *comm)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, 2, 6, 6, &l));
    for (int i = 0; i < LAYERS_DEEP; i++) {
        CK(pcnn_conv2d(net, l, 2, 3, 1, 1, 1, &l));
        CK(pcnn_relu(net, l, &l));
    }
    CK(pcnn_dense(net, l, 3, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_ADAM));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    CK(pcnn_net_set_option(net, PCNN_OPT_ENGINE, g_engine));
    CK(pcnn_net_set_option(net, PCNN_OPT_TIMEOUT_MS, TIMEOUT_MS));
    CK(pcnn_net_set_comm(net, comm));
    return net;
}

static void out_of_memory(void)
{
    pcnn_comm *comm;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    pcnn_net *net = build_deep(comm);
    pcnn_debug_fail_allocation(0);
    CK(pcnn_net_finalize(net, PER_RANK * ranks));
    const long full = pcnn_debug_allocations();
    CK(pcnn_net_destroy(&net));
    /* The last rank fails its fifth allocation of finalize (the parameters
     * are among the first ones). */
    net = build_deep(comm);
    pcnn_debug_fail_allocation(g_last ? 5 : 0);
    const double t0 = now();
    const pcnn_status st = pcnn_net_finalize(net, PER_RANK * ranks);
    const double took = now() - t0;
    const long made = pcnn_debug_allocations();
    pcnn_debug_fail_allocation(0);
    report("finalize, out of memory on one rank", st, took);
    printf("  rank %d: %ld of the %ld allocations of a finalize made\n", rank, made, full);
    expect(st == (g_last ? PCNN_ERR_OUT_OF_MEMORY : PCNN_ERR_REMOTE) && took < 2.0,
           "out of memory on one rank: OUT_OF_MEMORY there, REMOTE on the others, at once");
    expect(made < full / 2, "out of memory on one rank: the others stopped allocating before "
                            "half of a finalize");
    CK(pcnn_net_destroy(&net));
    CK(pcnn_comm_destroy(&comm));
}

int main(int argc, char **argv)
{
    g_engine = argc > 1 ? atoi(argv[1]) : 2;
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (ranks < 2 || ranks > 4 || (g_engine == 1 && provided < MPI_THREAD_MULTIPLE)) {
        if (rank == 0) fprintf(stderr, "needs 2 to 4 ranks (and MULTIPLE for engine 1)\n");
        MPI_Finalize();
        return 77;
    }
    g_last = rank == ranks - 1;
    for (int i = 0; i < 4 * PER_RANK * SAMPLE; i++)
        g_x[i] = (float)((i * 37) % 97) / 97.0f - 0.5f;
    for (int i = 0; i < 4 * PER_RANK; i++) g_lab[i] = i % 3;
    if (rank == 0) printf("engine %d, %d ranks, timeout %d ms\n", g_engine, ranks, TIMEOUT_MS);
    char path[64];
    snprintf(path, sizeof path, "disagree_%d_%d.ckpt", g_engine, ranks);
    pcnn_dataset *data;
    CK(pcnn_dataset_create(4 * PER_RANK, 2, 6, 6, g_x, g_lab, NULL, 0, &data));

    settings();
    step_values();
    other_calls(path, data);
    early_destroy();
    slow_rank();
    slow_evaluate(data);
    out_of_memory();

    pcnn_comm *bad = NULL;
    const pcnn_status st = pcnn_comm_create_fortran(12345, &bad);
    expect(st == PCNN_ERR_INVALID_ARGUMENT && bad == NULL && says("12345") &&
               says("not a valid communicator"),
           "an invalid Fortran handle: INVALID_ARGUMENT, the process goes on");

    CK(pcnn_dataset_destroy(&data));
    if (rank == 0) remove(path);
    const int result = failures;
    if (rank == 0) printf("%d of %d checks failed\n", failures, checks);
    MPI_Finalize();
    return result ? 1 : 0;
}
