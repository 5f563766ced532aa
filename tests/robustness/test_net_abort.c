/* Giving up on collectives, under mpiexec -n 2 or 3; argv[1] is the
 * progress engine (1 thread, 2 nonblocking).  The last rank plays the one
 * that stops.
 *
 *   1. pcnn_net_abort on a healthy network, right after a step (its
 *      all-gathers may be in flight) and before finalize: every later call
 *      returns INVALID_STATE saying "aborted" and communicates nothing,
 *      the error query stays PCNN_OK, destroy returns, no thread is left,
 *      and the communicator still trains a new network.
 *   2. A timeout inside the gradient exchange, for the allreduce and the
 *      all-to-all + all-gather exchanges: the stopping rank trains a
 *      second network on the same communicator (at the same step count),
 *      so the step's agreements match but the exchanges (each network has
 *      its own communicator) do not.  Every rank gets PCNN_ERR_TIMEOUT after the timeout and within
 *      5 s more, the query reports it, later calls are refused, destroy
 *      returns (keeping the buffers of the collectives in flight), no
 *      thread is left, and the communicator still trains a new network.
 *   3. A timeout in the step's agreement: the last rank stops calling
 *      train_step, sleeps past the timeout and cleans up; the others get
 *      PCNN_ERR_TIMEOUT within the bound, the query reports it, and every
 *      rank destroys its network and the communicator and finalizes MPI.
 * A hang anywhere is caught by the meson timeout. */
#define PCNN_EXPERIMENTAL /* PCNN_OPT_ENGINE: pcnn.h section 9 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/mpi_check.h"
#include "core/memory.h"
#include "pcnn.h"

#define TIMEOUT_MS 1500
#define SAMPLE (2 * 6 * 6)
#define PER_RANK 2

static float g_x[4 * PER_RANK * SAMPLE];
static int32_t g_lab[4 * PER_RANK];

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int threads_now(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1) break;
    if (f) fclose(f);
    return n;
}

/* conv -> relu -> dense -> dense, every layer with parameters on `exchange`
 * (two or three buckets: bucket_bytes is small). */
static pcnn_net *build(pcnn_comm *comm, int engine, pcnn_exchange exchange)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, 2, 6, 6, &l));
    CK(pcnn_conv2d(net, l, 3, 3, 1, 1, 1, &l));
    CK(pcnn_layer_set_exchange(l, exchange));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_dense(net, l, 5, 1, &l));
    CK(pcnn_layer_set_exchange(l, exchange));
    CK(pcnn_dense(net, l, 3, 1, &l));
    CK(pcnn_layer_set_exchange(l, exchange));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_MOMENTUM));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 7));
    CK(pcnn_net_set_option(net, PCNN_OPT_BUCKET_BYTES, 256));
    CK(pcnn_net_set_option(net, PCNN_OPT_ENGINE, engine));
    CK(pcnn_net_set_option(net, PCNN_OPT_TIMEOUT_MS, TIMEOUT_MS));
    CK(pcnn_net_set_comm(net, comm));
    CK(pcnn_net_finalize(net, PER_RANK * ranks));
    return net;
}

static pcnn_status step(pcnn_net *net, float *loss)
{
    return pcnn_net_train_step(net, PER_RANK, g_x + (size_t)rank * PER_RANK * SAMPLE,
                               g_lab + PER_RANK * rank, NULL, loss);
}

/* A few good steps: finite losses, identical parameters on every rank. */
static bool trains(pcnn_net *net)
{
    bool ok = true;
    for (int s = 0; s < 3; s++) {
        float loss = -1.0f;
        ok = ok && step(net, &loss) == PCNN_OK && loss > 0.0f && loss < 10.0f;
    }
    size_t n = 0;
    CK(pcnn_net_num_params(net, &n));
    float *p = malloc(n * sizeof *p), *q = malloc(n * sizeof *q);
    CK(pcnn_net_get_params(net, p, n));
    memcpy(q, p, n * sizeof *p);
    MPI_Bcast(q, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    ok = ok && n > 0 && memcmp(p, q, n * sizeof *p) == 0;
    free(p);
    free(q);
    return ok;
}

static bool says_aborted(pcnn_status st)
{
    return st == PCNN_ERR_INVALID_STATE && strstr(pcnn_last_error(), "aborted") != NULL;
}

/* Every call but destroy, abort and the query is refused, and none of them
 * communicates (n == 0 on a parallel step would otherwise join a
 * collective). */
static bool refuses_everything(pcnn_net *net)
{
    float loss, out[3 * PER_RANK], params[8];
    double value;
    size_t count;
    char text[64];
    pcnn_layer *l;
    bool ok = says_aborted(step(net, &loss));
    ok = ok && says_aborted(pcnn_net_train_step(net, 0, NULL, NULL, NULL, &loss));
    ok = ok && says_aborted(pcnn_net_predict(net, PER_RANK, g_x, out, 3 * PER_RANK));
    ok = ok && says_aborted(pcnn_net_compute_loss(net, PER_RANK, g_x, g_lab, NULL, &loss));
    ok = ok && says_aborted(pcnn_net_get_params(net, params, 8));
    ok = ok && says_aborted(pcnn_net_num_params(net, &count));
    ok = ok && says_aborted(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 0.1));
    ok = ok && says_aborted(pcnn_net_get_option(net, PCNN_OPT_LEARNING_RATE, &value));
    ok = ok && says_aborted(pcnn_net_summary(net, text, sizeof text, NULL));
    ok = ok && says_aborted(pcnn_net_finalize(net, PER_RANK * ranks));
    ok = ok && says_aborted(pcnn_net_input(net, 1, 2, 2, &l));
    return ok;
}

static pcnn_status query(const pcnn_net *net)
{
    pcnn_status st = PCNN_ERR_INTERNAL;
    CK(pcnn_net_async_error(net, &st));
    return st;
}

/* 1. Abort a healthy network. */
static void abort_healthy(pcnn_comm *comm, int engine, pcnn_exchange exchange, int threads0)
{
    const char *name = exchange == PCNN_EXCHANGE_ALLREDUCE ? "allreduce" : "all-to-all";
    char what[160];
    pcnn_net *net = build(comm, engine, exchange);
    const bool trained = trains(net);
    float loss;
    const bool stepped = step(net, &loss) == PCNN_OK; /* all-gathers left in flight */
    bool ok = pcnn_net_abort(net) == PCNN_OK && pcnn_net_abort(net) == PCNN_OK;
    ok = ok && query(net) == PCNN_OK;
    const bool refused = refuses_everything(net);
    ok = ok && pcnn_net_destroy(&net) == PCNN_OK && net == NULL;
    snprintf(what, sizeof what, "%s: abort on a healthy network after good steps", name);
    expect(trained && stepped && ok, what);
    snprintf(what, sizeof what, "%s: after abort every call is INVALID_STATE \"aborted\"", name);
    expect(refused, what);
    snprintf(what, sizeof what, "%s: destroy after abort left no thread", name);
    expect(threads_now() == threads0, what);

    /* Idle (the parameters were read, so nothing is in flight): abort and
     * destroy free everything but the record of the collectives started,
     * kept (two blocks) for MPI_Finalize, where the ranks compare theirs
     * (another rank may be ahead: lib/parallel/late_peers.h). */
    const long live = pcnn_debug_live_allocations();
    net = build(comm, engine, exchange);
    bool idle_ok = trains(net) && pcnn_net_abort(net) == PCNN_OK &&
                   pcnn_net_destroy(&net) == PCNN_OK;
    snprintf(what, sizeof what, "%s: abort of an idle network keeps only its record for "
             "MPI_Finalize", name);
    expect(idle_ok && pcnn_debug_live_allocations() == live + 2, what);

    net = build(comm, engine, exchange);
    snprintf(what, sizeof what, "%s: the communicator trains a new network after abort", name);
    expect(trains(net), what);
    CK(pcnn_net_destroy(&net));
}

/* 2. A timeout inside the exchange. */
static void exchange_timeout(pcnn_comm *comm, int engine, pcnn_exchange exchange, int threads0)
{
    const char *name = exchange == PCNN_EXCHANGE_ALLREDUCE ? "allreduce" : "all-to-all";
    char what[160];
    const bool stopper = rank == ranks - 1;
    const long live = pcnn_debug_live_allocations();
    pcnn_net *mine = build(comm, engine, exchange), *other = build(comm, engine, exchange);
    const bool trained = trains(mine);
    /* The step agreement compares step counters: the other network takes
     * mine's, so that only the exchanges differ. */
    if (stopper) CK(pcnn_net_set_option(other, PCNN_OPT_STEP, 3));
    float loss;
    const double t0 = now();
    const pcnn_status st = step(stopper ? other : mine, &loss);
    const double elapsed = now() - t0;
    const pcnn_net *failed = stopper ? other : mine;
    const bool in_time = elapsed >= 0.9 * TIMEOUT_MS * 1e-3 && elapsed < TIMEOUT_MS * 1e-3 + 5.0;
    if (!in_time || st != PCNN_ERR_TIMEOUT)
        fprintf(stderr, "rank %d: %s: %s after %.2f s: %s\n", rank, name, pcnn_status_str(st),
                elapsed, pcnn_last_error());
    snprintf(what, sizeof what, "%s: mismatched exchange gives PCNN_ERR_TIMEOUT on every rank",
             name);
    expect(trained && st == PCNN_ERR_TIMEOUT, what);
    snprintf(what, sizeof what, "%s: the timeout came after %d ms and within 5 s more", name,
             TIMEOUT_MS);
    expect(in_time, what);
    snprintf(what, sizeof what, "%s: pcnn_net_async_error reports the timeout", name);
    expect(query(failed) == PCNN_ERR_TIMEOUT, what);
    snprintf(what, sizeof what, "%s: the timed-out network refuses every call", name);
    expect(refuses_everything(stopper ? other : mine), what);
    bool destroyed = pcnn_net_destroy(&mine) == PCNN_OK && pcnn_net_destroy(&other) == PCNN_OK &&
                     !mine && !other;
    snprintf(what, sizeof what, "%s: destroy after the timeout returns and leaves no thread",
             name);
    expect(destroyed && threads_now() == threads0, what);
    /* The reduction is still posted: MPI may write its buffers any time. */
    snprintf(what, sizeof what, "%s: the buffers of the abandoned collective were kept", name);
    expect(pcnn_debug_live_allocations() > live, what);
    pcnn_net *net = build(comm, engine, exchange);
    snprintf(what, sizeof what, "%s: the communicator trains a new network after the timeout",
             name);
    expect(trains(net), what);
    CK(pcnn_net_destroy(&net));
}

/* 3. The last rank stops calling train_step: a timeout in the agreement. */
static void agreement_timeout(pcnn_comm *comm, int engine)
{
    const bool stopper = rank == ranks - 1;
    pcnn_net *net = build(comm, engine, PCNN_EXCHANGE_ALLTOALL_ALLGATHER);
    const bool trained = trains(net);
    pcnn_status st = PCNN_ERR_TIMEOUT, async = PCNN_ERR_TIMEOUT;
    double elapsed = TIMEOUT_MS * 1e-3;
    bool refused = true;
    if (stopper) {
        const long ms = TIMEOUT_MS + 1000; /* past the others' timeout */
        const struct timespec pause = {ms / 1000, ms % 1000 * 1000000L};
        nanosleep(&pause, NULL);
    } else {
        float loss;
        const double t0 = now();
        st = step(net, &loss);
        elapsed = now() - t0;
        async = query(net);
        refused = refuses_everything(net);
        if (st != PCNN_ERR_TIMEOUT)
            fprintf(stderr, "rank %d: %s after %.2f s: %s\n", rank, pcnn_status_str(st), elapsed,
                    pcnn_last_error());
    }
    const bool destroyed = pcnn_net_destroy(&net) == PCNN_OK && net == NULL;
    expect(trained, "agreement: good steps before one rank stops");
    expect(st == PCNN_ERR_TIMEOUT, "agreement: the waiting ranks get PCNN_ERR_TIMEOUT");
    expect(elapsed >= 0.9 * TIMEOUT_MS * 1e-3 && elapsed < TIMEOUT_MS * 1e-3 + 5.0,
           "agreement: the timeout came after the limit and within 5 s more");
    expect(async == PCNN_ERR_TIMEOUT, "agreement: pcnn_net_async_error reports the timeout");
    expect(refused, "agreement: the timed-out network refuses every call");
    expect(destroyed, "agreement: every rank destroys its network");
}

int main(int argc, char **argv)
{
    const int engine = argc > 1 ? atoi(argv[1]) : 2;
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (ranks < 2 || ranks > 4 || (engine == 1 && provided < MPI_THREAD_MULTIPLE)) {
        if (rank == 0) fprintf(stderr, "needs 2 to 4 ranks (and MULTIPLE for engine 1)\n");
        MPI_Finalize();
        return 77;
    }
    for (int i = 0; i < 4 * PER_RANK * SAMPLE; i++)
        g_x[i] = (float)((i * 37) % 97) / 97.0f - 0.5f;
    for (int i = 0; i < 4 * PER_RANK; i++) g_lab[i] = i % 3;
    if (rank == 0) printf("engine %d, %d ranks, timeout %d ms\n", engine, ranks, TIMEOUT_MS);

    pcnn_comm *comm;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    pcnn_net *warm = build(comm, engine, PCNN_EXCHANGE_ALLREDUCE); /* lazy starts */
    trains(warm);
    CK(pcnn_net_destroy(&warm));
    const int threads0 = threads_now();

    /* Abort before finalize. */
    pcnn_net *raw;
    pcnn_layer *l;
    CK(pcnn_net_create(&raw));
    bool early = pcnn_net_abort(raw) == PCNN_OK && says_aborted(pcnn_net_input(raw, 1, 2, 2, &l)) &&
                 says_aborted(pcnn_net_set_comm(raw, comm)) &&
                 says_aborted(pcnn_net_finalize(raw, 4)) && query(raw) == PCNN_OK &&
                 pcnn_net_destroy(&raw) == PCNN_OK;
    expect(early, "abort before finalize: calls refused, destroy returns");

    const pcnn_exchange exchanges[2] = {PCNN_EXCHANGE_ALLREDUCE, PCNN_EXCHANGE_ALLTOALL_ALLGATHER};
    for (int k = 0; k < 2; k++) abort_healthy(comm, engine, exchanges[k], threads0);
    for (int k = 0; k < 2; k++) exchange_timeout(comm, engine, exchanges[k], threads0);
    agreement_timeout(comm, engine);

    /* The communicator is unusable on the ranks that gave up, yet it is
     * destroyed and MPI finalizes. */
    expect(pcnn_comm_destroy(&comm) == PCNN_OK && comm == NULL,
           "every rank destroys the communicator");
    const int result = failures;
    if (rank == 0) printf("%d of %d checks failed\n", failures, checks);
    MPI_Finalize();
    return result ? 1 : 0;
}
