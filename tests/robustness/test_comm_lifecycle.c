/* The communication thread's lifecycle, under mpiexec -n 2 (or more).
 *
 *   1. 100 networks attached to a communicator, each created, finalized
 *      (which starts the progress engine) and destroyed (which stops it),
 *      alternating the thread and the nonblocking engine, sometimes after
 *      a training step whose all-gathers were waited for (idle engine);
 *   2. destroy with requests in flight: right after a training step, before
 *      anything waited for that step's all-gathers; also with two networks
 *      sharing one communicator, destroyed in the opposite order;
 *   3. a communicator created and destroyed around each of those networks.
 * After each phase: no block allocated by libpcnn is live (the internal
 * library counts them), the process has as many threads as before (every
 * communication thread was joined), and the ranks' parameters agree.  A
 * hang is caught by the meson timeout. */
#define PCNN_EXPERIMENTAL /* PCNN_OPT_ACTIVE_ENGINE, PCNN_OPT_ENGINE: pcnn.h section 9 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/memory.h"
#include "../common/mpi_check.h"
#include "pcnn.h"

static int provided;
static int threads = 1; /* PCNN_OPT_THREADS; PCNN_TEST_THREADS overrides (TSan runs) */

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

#define SAMPLE (2 * 6 * 6)

static float g_x[8 * SAMPLE];
static int32_t g_lab[8];

/* conv -> relu -> dense -> dense: two buckets when bucket_bytes is small. */
static pcnn_net *build(pcnn_comm *comm, int engine, int overlap)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, 2, 6, 6, &l));
    CK(pcnn_conv2d(net, l, 3, 3, 1, 1, 1, &l));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_dense(net, l, 5, 1, &l));
    CK(pcnn_dense(net, l, 3, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_MOMENTUM));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, threads));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 5));
    CK(pcnn_net_set_option(net, PCNN_OPT_BUCKET_BYTES, 256));
    CK(pcnn_net_set_option(net, PCNN_OPT_ENGINE, engine));
    CK(pcnn_net_set_option(net, PCNN_OPT_OVERLAP, overlap));
    CK(pcnn_net_set_option(net, PCNN_OPT_TIMEOUT_MS, 60000));
    CK(pcnn_net_set_comm(net, comm));
    CK(pcnn_net_finalize(net, 2 * ranks));
    return net;
}

/* One global batch of 2 samples per rank. */
static void step(pcnn_net *net)
{
    float loss;
    CK(pcnn_net_train_step(net, 2, g_x + (size_t)rank * 2 * SAMPLE, g_lab + 2 * rank, NULL,
                           &loss));
}

/* Parameters identical on every rank (this waits for the all-gathers). */
static bool params_agree(pcnn_net *net)
{
    size_t n;
    CK(pcnn_net_num_params(net, &n));
    float *p = malloc(n * sizeof *p), *q = malloc(n * sizeof *q);
    CK(pcnn_net_get_params(net, p, n));
    memcpy(q, p, n * sizeof *p);
    MPI_Bcast(q, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    bool same = memcmp(p, q, n * sizeof *p) == 0;
    free(p);
    free(q);
    return same;
}

static bool engine_is(pcnn_net *net, int want)
{
    double v = -1;
    CK(pcnn_net_get_option(net, PCNN_OPT_ACTIVE_ENGINE, &v));
    return v == want;
}

int main(void)
{
    MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
    if (getenv("PCNN_TEST_THREADS")) threads = atoi(getenv("PCNN_TEST_THREADS"));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    for (int i = 0; i < 8 * SAMPLE; i++) g_x[i] = (float)((i * 31) % 89) / 89.0f - 0.5f;
    for (int i = 0; i < 8; i++) g_lab[i] = i % 3;
    const bool multiple = provided >= MPI_THREAD_MULTIPLE;
    if (rank == 0) printf("MPI thread level %d (MULTIPLE: %s)\n", provided, multiple ? "yes" : "no");

    const long live_none = pcnn_debug_live_allocations();
    pcnn_comm *comm;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    /* Warm up whatever MPI, OpenMP and OpenBLAS start lazily. */
    pcnn_net *warm = build(comm, 0, 1);
    step(warm);
    params_agree(warm);
    CK(pcnn_net_destroy(&warm));
    const int threads0 = threads_now();
    const long live0 = pcnn_debug_live_allocations();

    /* 1. Start and stop the engine 100 times. */
    bool engines_ok = true, agree_ok = true;
    for (int it = 0; it < 100; it++) {
        const int engine = multiple && it % 2 == 0 ? 1 : 2;
        pcnn_net *net = build(comm, engine, it % 3 != 2);
        engines_ok = engines_ok && engine_is(net, engine);
        if (it % 10 == 0) {
            step(net);
            agree_ok = agree_ok && params_agree(net); /* engine idle afterwards */
        }
        CK(pcnn_net_destroy(&net));
        if (net != NULL) engines_ok = false;
    }
    expect(engines_ok, "100 finalize/destroy cycles: the requested engine ran each time");
    expect(agree_ok, "100 finalize/destroy cycles: parameters agree after the steps");
    expect(threads_now() == threads0, "100 cycles: every communication thread was joined");
    expect(pcnn_debug_live_allocations() == live0, "100 cycles: nothing leaked");

    /* 2. Destroy right after a step: the all-gathers are still in flight. */
    for (int it = 0; it < 40; it++) {
        const int engine = multiple && it % 2 == 0 ? 1 : 2;
        pcnn_net *net = build(comm, engine, 1);
        step(net);
        if (it % 4 == 1) step(net);
        CK(pcnn_net_destroy(&net));
    }
    expect(threads_now() == threads0, "40 destroys with requests in flight: threads joined");
    expect(pcnn_debug_live_allocations() == live0, "40 destroys with requests in flight: no leak");

    /* Two networks on one communicator, steps interleaved, destroyed in
     * the opposite order of creation, each with its all-gathers pending. */
    for (int it = 0; it < 10; it++) {
        pcnn_net *a = build(comm, multiple ? 1 : 2, 1), *b = build(comm, 2, 1);
        step(a);
        step(b);
        step(a);
        CK(pcnn_net_destroy(&b));
        CK(pcnn_net_destroy(&a));
    }
    expect(threads_now() == threads0 && pcnn_debug_live_allocations() == live0,
           "two networks per communicator destroyed in flight: no thread or block left");

    /* 3. A communicator per network. */
    CK(pcnn_comm_destroy(&comm));
    for (int it = 0; it < 20; it++) {
        pcnn_comm *c;
        CK(pcnn_comm_create(MPI_COMM_WORLD, &c));
        pcnn_net *net = build(c, multiple && it % 2 ? 1 : 2, 1);
        step(net);
        CK(pcnn_net_destroy(&net));
        CK(pcnn_comm_destroy(&c));
    }
    expect(threads_now() == threads0 && pcnn_debug_live_allocations() == live_none,
           "20 communicators created and destroyed around networks: nothing left");

    /* 4. Out of memory on one rank during a collective finalize: that rank
     * reports OUT_OF_MEMORY, the others REMOTE, nobody hangs or leaks.  Walk
     * every allocation of finalize, failing on rank 0, then on rank 1. */
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    int walked = 0;
    bool oom_ok = true;
    for (int victim = 0; victim < 2 && victim < ranks; victim++) {
        for (long n = 1;; n++) {
            pcnn_net *net;
            pcnn_layer *l;
            CK(pcnn_net_create(&net));
            CK(pcnn_net_input(net, 2, 6, 6, &l));
            CK(pcnn_conv2d(net, l, 3, 3, 1, 1, 1, &l));
            CK(pcnn_dense(net, l, 3, 1, &l));
            CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
            CK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_ADAM));
            CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
            CK(pcnn_net_set_option(net, PCNN_OPT_ENGINE, multiple && n % 2 ? 1 : 2));
            CK(pcnn_net_set_comm(net, comm));
            pcnn_debug_fail_allocation(rank == victim ? n : 0);
            pcnn_status st = pcnn_net_finalize(net, 2 * ranks);
            const bool hit = rank == victim && pcnn_debug_allocations() >= n;
            pcnn_debug_fail_allocation(0);
            int failed = st != PCNN_OK, any = 0;
            MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            const pcnn_status want = !any ? PCNN_OK
                                     : rank == victim ? PCNN_ERR_OUT_OF_MEMORY
                                                      : PCNN_ERR_REMOTE;
            /* The victim fails exactly when its allocation n happened. */
            if (st != want || (rank == victim && hit != (any != 0))) {
                oom_ok = false;
                fprintf(stderr, "rank %d: allocation %ld failing on rank %d: %s (%s)\n", rank,
                        n, victim, pcnn_status_str(st), pcnn_last_error());
            }
            if (!any) step(net); /* the survivor of the walk trains */
            CK(pcnn_net_destroy(&net));
            if (!any) break;
            walked++;
        }
    }
    CK(pcnn_comm_destroy(&comm));
    if (rank == 0) printf("%d allocation failures at finalize walked on np=%d\n", walked, ranks);
    expect(oom_ok && walked > 20, "out of memory on one rank at finalize: OOM there, REMOTE "
                                  "elsewhere");
    expect(threads_now() == threads0 && pcnn_debug_live_allocations() == live_none,
           "after the out-of-memory walk: no thread or block left");

    MPI_Finalize();
    if (rank == 0) printf("%d passed, %d failed\n", checks - failures, failures);
    return failures ? 1 : 0;
}
