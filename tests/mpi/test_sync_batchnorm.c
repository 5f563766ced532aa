/* Synchronised batch norm (PCNN_OPT_SYNC_BATCHNORM), under mpiexec with 1
 * to 4 ranks.
 *
 *   1. Sync on: a conv-BN-ReLU-pool-conv-BN-pool-dense network trained
 *      for 5 steps on P ranks with uneven local batches -- one rank
 *      without samples, a different one each step, and a global batch of
 *      one sample -- equals a private one-rank network trained on the
 *      whole batch (parameters, losses, running statistics to 1e-5), for
 *      momentum and Adam, both progress engines; every rank holds the
 *      same parameters and the same running statistics, bit for bit.
 *   2. Sync off: each rank's running statistics after a step are, bit for
 *      bit, those of a private network trained on its own samples; on
 *      more than one rank the parameters then differ from one rank's.
 *   3. Without a communicator the setting changes nothing (train steps and
 *      compute_gradients bit for bit); compute_gradients on a parallel
 *      network stays local; the per-layer override beats the network
 *      default; calls out of place are refused; ranks that disagree fail
 *      finalize with PCNN_ERR_MISMATCH naming the layer.
 *   4. A reduction that times out: the last rank trains another network
 *      (at the same step) on the same communicator, so the step's
 *      agreements match but the
 *      reductions (each network has its own communicator) do not.  Every
 *      rank fails the step with PCNN_ERR_TIMEOUT after the timeout, the
 *      network is aborted, destroy returns keeping the buffer MPI may
 *      still write, and the communicator trains a new network.
 * A hang anywhere is caught by the meson timeout. */
#define PCNN_EXPERIMENTAL /* PCNN_OPT_SYNC_BATCHNORM, PCNN_OPT_ENGINE: pcnn.h section 9 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/mpi_check.h"
#include "core/memory.h"
#include "layers/batchnorm.h"
#include "pcnn.h"

#define SAMPLE (2 * 8 * 8)
#define STEPS 5
#define MAX_LOCAL 8
#define TIMEOUT_MS 1500

static pcnn_comm *comm_world;

typedef struct config {
    pcnn_optimizer optimizer;
    int sync;          /* PCNN_OPT_SYNC_BATCHNORM */
    int layer_sync[2]; /* pcnn_batchnorm_set_sync of each batch norm; -1 default */
    int engine;        /* PCNN_OPT_ENGINE */
    pcnn_exchange exchange;
    long timeout_ms;   /* 0: 60 s; < 0: none (the reductions then wait in MPI_Wait) */
} config;

typedef struct model {
    pcnn_net *net;
    pcnn_layer *bn[2];
} model;

/* conv(2->4) BN ReLU (fused into the BN) maxpool conv(4->3) BN (alone)
 * maxpool dense(->5).  No bias before a batch norm: its gradient is zero
 * up to rounding, which Adam's g / sqrt(v) would blow up to steps of the
 * learning rate in directions set by the rounding alone. */
static model build(const config *c, pcnn_comm *comm, int max_batch)
{
    model m;
    pcnn_layer *l;
    CK(pcnn_net_create(&m.net));
    CK(pcnn_net_input(m.net, 2, 8, 8, &l));
    CK(pcnn_conv2d(m.net, l, 4, 3, 1, 1, 0, &l));
    CK(pcnn_batchnorm(m.net, l, 1e-5f, 0.1f, &m.bn[0]));
    CK(pcnn_relu(m.net, m.bn[0], &l));
    CK(pcnn_maxpool2d(m.net, l, 2, 2, 0, &l));
    CK(pcnn_conv2d(m.net, l, 3, 3, 1, 1, 0, &l));
    CK(pcnn_batchnorm(m.net, l, 1e-5f, 0.2f, &m.bn[1]));
    CK(pcnn_maxpool2d(m.net, m.bn[1], 2, 2, 0, &l));
    CK(pcnn_dense(m.net, l, 5, 1, &l));
    CK(pcnn_net_set_loss(m.net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_optimizer(m.net, c->optimizer));
    CK(pcnn_net_set_option(m.net, PCNN_OPT_LEARNING_RATE,
                           c->optimizer == PCNN_OPTIMIZER_ADAM ? 0.01 : 0.1));
    CK(pcnn_net_set_option(m.net, PCNN_OPT_SEED, 5));
    CK(pcnn_net_set_option(m.net, PCNN_OPT_THREADS, 1));
    CK(pcnn_net_set_option(m.net, PCNN_OPT_SYNC_BATCHNORM, c->sync));
    for (int k = 0; k < 2; k++)
        if (c->layer_sync[k] >= 0) CK(pcnn_batchnorm_set_sync(m.bn[k], c->layer_sync[k]));
    if (comm) {
        CK(pcnn_net_set_comm(m.net, comm));
        CK(pcnn_net_set_exchange(m.net, c->exchange));
        CK(pcnn_net_set_option(m.net, PCNN_OPT_ENGINE, c->engine));
        const long timeout = c->timeout_ms < 0 ? 0 : c->timeout_ms ? c->timeout_ms : 60000;
        CK(pcnn_net_set_option(m.net, PCNN_OPT_TIMEOUT_MS, timeout));
    }
    CK(pcnn_net_finalize(m.net, max_batch));
    return m;
}

static void make_batch(int step, int n, float *x, int32_t *y)
{
    unsigned s = 4321u + 977u * (unsigned)step;
    for (int i = 0; i < n * SAMPLE; i++) {
        s = s * 1664525u + 1013904223u;
        /* An offset far from zero: the statistics must not cancel badly. */
        x[i] = (float)((s >> 8) & 0xffff) / 65536.0f * 2.0f + 3.0f;
    }
    for (int i = 0; i < n; i++) y[i] = (int32_t)((unsigned)(i * 3 + step) % 5u);
}

/* How a step's global batch is split: rank q takes counts[q] samples. */
typedef enum split { UNEVEN, ONE_IDLE, SINGLE } split;

static int split_counts(split how, int step, int *counts)
{
    int total = 0;
    for (int q = 0; q < ranks; q++) {
        counts[q] = how == SINGLE ? (q == step % ranks) : (q + step) % ranks + 1;
        if (how == ONE_IDLE && ranks > 1 && q == step % ranks) counts[q] = 0;
        total += counts[q];
    }
    return total;
}

/* max |a - b| / max |b|. */
static double max_rel_diff(const float *a, const float *b, size_t n)
{
    double worst = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > worst || isnan(d)) worst = isnan(d) ? INFINITY : d;
        if (fabs((double)b[i]) > scale) scale = fabs((double)b[i]);
    }
    return worst / scale;
}

/* Every rank holds these bits. */
static bool same_on_every_rank(const float *v, size_t n)
{
    float *r0 = malloc(n * sizeof(float));
    memcpy(r0, v, n * sizeof(float));
    MPI_Bcast(r0, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    bool same = memcmp(r0, v, n * sizeof(float)) == 0;
    free(r0);
    return same;
}

/* The running statistics of both batch norms, one after the other. */
static size_t running_stats(const model *m, float *out)
{
    size_t total = 0;
    for (int k = 0; k < 2; k++) {
        size_t n = 0;
        const float *s = batchnorm_running_stats(m->bn[k], &n);
        memcpy(out + total, s, n * sizeof(float));
        total += n;
    }
    return total;
}

/* Train par on the ranks and seq on the whole batch; returns the worst
 * relative difference of the losses. */
static double train_both(const model *par, const model *seq, split how, int steps)
{
    float x[MAX_LOCAL * 4 * SAMPLE];
    int32_t y[MAX_LOCAL * 4];
    double worst = 0.0;
    for (int step = 0; step < steps; step++) {
        int counts[4] = {0};
        const int total = split_counts(how, step, counts);
        int first = 0;
        for (int q = 0; q < rank; q++) first += counts[q];
        make_batch(step, total, x, y);
        float lp, ls;
        const int mine = counts[rank];
        CK(pcnn_net_train_step(par->net, mine, mine ? x + (size_t)first * SAMPLE : NULL,
                               mine ? y + first : NULL, NULL, &lp));
        if (seq) {
            CK(pcnn_net_train_step(seq->net, total, x, y, NULL, &ls));
            const double d = fabs((double)lp - ls) / fabs((double)ls);
            if (d > worst) worst = d;
        }
    }
    return worst;
}

static const char *const split_names[] = {"uneven", "one idle rank", "one sample"};

/* 1. Sync on equals one rank on the whole batch. */
static void check_equivalence(pcnn_optimizer optimizer, int engine, pcnn_exchange exchange,
                              split how)
{
    config c = {.optimizer = optimizer, .sync = 1, .layer_sync = {-1, -1}, .engine = engine,
                .exchange = exchange, .timeout_ms = exchange == PCNN_EXCHANGE_ALLREDUCE ? -1 : 0};
    const int max_batch = 4 * MAX_LOCAL;
    model par = build(&c, comm_world, ranks * MAX_LOCAL), seq = build(&c, NULL, max_batch);
    const double loss_diff = train_both(&par, &seq, how, STEPS);
    size_t n;
    CK(pcnn_net_num_params(seq.net, &n));
    float *wp = malloc(n * sizeof(float)), *ws = malloc(n * sizeof(float));
    CK(pcnn_net_get_params(par.net, wp, n));
    CK(pcnn_net_get_params(seq.net, ws, n));
    float sp[32], ss[32];
    const size_t ns = running_stats(&par, sp);
    running_stats(&seq, ss);
    const double params = max_rel_diff(wp, ws, n), stats = max_rel_diff(sp, ss, ns);
    const bool same_params = same_on_every_rank(wp, n), same_stats = same_on_every_rank(sp, ns);
    char what[256];
    snprintf(what, sizeof what,
             "sync on, %s, %s engine, %s, %s: params %.1e, loss %.1e, running stats %.1e "
             "from one rank; identical on every rank: params %d stats %d",
             optimizer == PCNN_OPTIMIZER_ADAM ? "adam" : "momentum",
             engine == 1 ? "thread" : "nonblocking",
             exchange == PCNN_EXCHANGE_ALLREDUCE ? "allreduce, no timeout" : "alltoall",
             split_names[how],
             params, loss_diff, stats, same_params, same_stats);
    expect(params < 1e-5 && loss_diff < 1e-5 && stats < 1e-5 && same_params && same_stats,
           what);
    free(wp);
    free(ws);
    pcnn_net_destroy(&par.net);
    pcnn_net_destroy(&seq.net);
}

/* 2. Sync off keeps per-rank statistics, as before. */
static void check_sync_off(void)
{
    config c = {.optimizer = PCNN_OPTIMIZER_MOMENTUM, .sync = 0, .layer_sync = {-1, -1},
                .engine = 2, .exchange = PCNN_EXCHANGE_ALLTOALL_ALLGATHER};
    model par = build(&c, comm_world, ranks * MAX_LOCAL), own = build(&c, NULL, MAX_LOCAL);
    int counts[4] = {0};
    const int total = split_counts(UNEVEN, 0, counts);
    int first = 0;
    for (int q = 0; q < rank; q++) first += counts[q];
    float x[MAX_LOCAL * 4 * SAMPLE];
    int32_t y[MAX_LOCAL * 4];
    make_batch(0, total, x, y);
    CK(pcnn_net_train_step(par.net, counts[rank], x + (size_t)first * SAMPLE, y + first, NULL,
                           NULL));
    CK(pcnn_net_train_step(own.net, counts[rank], x + (size_t)first * SAMPLE, y + first, NULL,
                           NULL));
    float sp[32], so[32];
    const size_t ns = running_stats(&par, sp);
    running_stats(&own, so);
    expect(memcmp(sp, so, ns * sizeof(float)) == 0,
           "sync off: each rank's running statistics are those of its own samples, bitwise");
    pcnn_net_destroy(&par.net);
    pcnn_net_destroy(&own.net);

    if (ranks < 2) return;
    model seq = build(&c, NULL, 4 * MAX_LOCAL);
    par = build(&c, comm_world, ranks * MAX_LOCAL);
    train_both(&par, &seq, UNEVEN, STEPS);
    size_t n;
    CK(pcnn_net_num_params(seq.net, &n));
    float *wp = malloc(n * sizeof(float)), *ws = malloc(n * sizeof(float));
    CK(pcnn_net_get_params(par.net, wp, n));
    CK(pcnn_net_get_params(seq.net, ws, n));
    const double d = max_rel_diff(wp, ws, n);
    char what[160];
    snprintf(what, sizeof what, "sync off: per-rank statistics differ from one rank (%.1e)", d);
    expect(d > 1e-3, what);
    free(wp);
    free(ws);
    pcnn_net_destroy(&par.net);
    pcnn_net_destroy(&seq.net);
}

/* 3a. Without a communicator, and for compute_gradients, sync changes
 * nothing. */
static void check_local(void)
{
    config on = {.optimizer = PCNN_OPTIMIZER_ADAM, .sync = 1, .layer_sync = {-1, 1}};
    config off = on;
    off.sync = 0;
    off.layer_sync[1] = -1;
    model a = build(&on, NULL, 8), b = build(&off, NULL, 8);
    float x[8 * SAMPLE];
    int32_t y[8];
    bool same = true;
    for (int step = 0; step < 3; step++) {
        make_batch(step, 8, x, y);
        float la, lb;
        CK(pcnn_net_train_step(a.net, 8, x, y, NULL, &la));
        CK(pcnn_net_train_step(b.net, 8, x, y, NULL, &lb));
        same = same && la == lb;
    }
    size_t n;
    CK(pcnn_net_num_params(a.net, &n));
    float *ga = malloc(n * sizeof(float)), *gb = malloc(n * sizeof(float));
    float dxa[8 * SAMPLE], dxb[8 * SAMPLE];
    CK(pcnn_net_compute_gradients(a.net, 8, x, y, NULL, NULL));
    CK(pcnn_net_compute_gradients(b.net, 8, x, y, NULL, NULL));
    CK(pcnn_net_get_grads(a.net, ga, n));
    CK(pcnn_net_get_grads(b.net, gb, n));
    CK(pcnn_net_get_input_grad(a.net, dxa, 8 * SAMPLE));
    CK(pcnn_net_get_input_grad(b.net, dxb, 8 * SAMPLE));
    same = same && !memcmp(ga, gb, n * sizeof(float)) && !memcmp(dxa, dxb, sizeof dxa);
    expect(same, "without a communicator sync changes nothing: train steps and gradients, "
                 "bitwise");
    pcnn_net_destroy(&a.net);
    pcnn_net_destroy(&b.net);

    /* A parallel synchronised network's compute_gradients is local. */
    model par = build(&on, comm_world, ranks * 4), own = build(&off, NULL, 4);
    train_both(&par, NULL, UNEVEN, 2);
    float *w = malloc(n * sizeof(float));
    CK(pcnn_net_get_params(par.net, w, n));
    CK(pcnn_net_set_params(own.net, w, n));
    make_batch(7, 3, x, y);
    CK(pcnn_net_compute_gradients(par.net, 3, x, y, NULL, NULL));
    CK(pcnn_net_compute_gradients(own.net, 3, x, y, NULL, NULL));
    CK(pcnn_net_get_grads(par.net, ga, n));
    CK(pcnn_net_get_grads(own.net, gb, n));
    expect(!memcmp(ga, gb, n * sizeof(float)),
           "sync on: compute_gradients stays local (this rank's statistics), bitwise");
    free(w);
    free(ga);
    free(gb);
    pcnn_net_destroy(&par.net);
    pcnn_net_destroy(&own.net);
}

/* Occurrences of the summary's synchronisation note. */
static int synchronised_layers(const pcnn_net *net)
{
    char text[4096];
    CK(pcnn_net_summary(net, text, sizeof text, NULL));
    int count = 0;
    for (const char *p = text; (p = strstr(p, "synchronised")) != NULL; p++) count++;
    return count;
}

/* 3b. The per-layer override, misuse, and ranks that disagree. */
static void check_api(void)
{
    config c = {.optimizer = PCNN_OPTIMIZER_SGD, .sync = 1, .layer_sync = {0, -1}};
    model m = build(&c, NULL, 4);
    expect(synchronised_layers(m.net) == 1, "network default 1, first layer 0: one synchronised");
    pcnn_status st = pcnn_batchnorm_set_sync(m.bn[0], 1);
    bool ok = st == PCNN_ERR_INVALID_STATE &&
              strstr(pcnn_last_error(), "pcnn_batchnorm_set_sync") != NULL;
    st = pcnn_net_set_option(m.net, PCNN_OPT_SYNC_BATCHNORM, 0);
    ok = ok && st == PCNN_ERR_INVALID_STATE;
    pcnn_net_destroy(&m.net);
    c.sync = 0;
    c.layer_sync[0] = 1;
    m = build(&c, NULL, 4);
    ok = ok && synchronised_layers(m.net) == 1;
    pcnn_net_destroy(&m.net);
    expect(ok, "the per-layer setting beats the network's; both fixed at finalize");

    pcnn_net *net;
    pcnn_layer *in, *conv, *bn;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, 1, 4, 4, &in));
    CK(pcnn_conv2d(net, in, 2, 3, 1, 1, 1, &conv));
    CK(pcnn_batchnorm(net, conv, 1e-5f, 0.1f, &bn));
    ok = pcnn_batchnorm_set_sync(conv, 1) == PCNN_ERR_INVALID_ARGUMENT &&
         strstr(pcnn_last_error(), "layer 1 (conv2d) is not a batch norm") != NULL;
    ok = ok && pcnn_batchnorm_set_sync(bn, 2) == PCNN_ERR_INVALID_ARGUMENT &&
         pcnn_batchnorm_set_sync(bn, -2) == PCNN_ERR_INVALID_ARGUMENT &&
         pcnn_batchnorm_set_sync(NULL, 1) == PCNN_ERR_INVALID_ARGUMENT &&
         pcnn_net_set_option(net, PCNN_OPT_SYNC_BATCHNORM, 2) == PCNN_ERR_INVALID_ARGUMENT;
    double v = -1;
    ok = ok && pcnn_batchnorm_set_sync(bn, -1) == PCNN_OK &&
         pcnn_net_get_option(net, PCNN_OPT_SYNC_BATCHNORM, &v) == PCNN_OK && v == 0;
    pcnn_net_destroy(&net);
    expect(ok, "pcnn_batchnorm_set_sync refuses other layers and values outside -1..1");

    if (ranks < 2) return;
    CK(pcnn_net_create(&m.net));
    CK(pcnn_net_input(m.net, 2, 8, 8, &in));
    CK(pcnn_conv2d(m.net, in, 4, 3, 1, 1, 1, &conv));
    CK(pcnn_batchnorm(m.net, conv, 1e-5f, 0.1f, &bn));
    CK(pcnn_batchnorm_set_sync(bn, rank == 1));
    CK(pcnn_dense(m.net, bn, 3, 1, &in));
    CK(pcnn_net_set_loss(m.net, in, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_comm(m.net, comm_world));
    st = pcnn_net_finalize(m.net, 4);
    ok = st == PCNN_ERR_MISMATCH && strstr(pcnn_last_error(), "layer 2") != NULL;
    if (!ok) fprintf(stderr, "rank %d: %s: %s\n", rank, pcnn_status_str(st), pcnn_last_error());
    expect(ok, "ranks that disagree on synchronisation: PCNN_ERR_MISMATCH naming layer 2");
    pcnn_net_destroy(&m.net);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* 4. A reduction that does not complete in time. */
static void check_timeout(int engine)
{
    if (ranks < 2) return;
    config c = {.optimizer = PCNN_OPTIMIZER_MOMENTUM, .sync = 1, .layer_sync = {-1, -1},
                .engine = engine, .exchange = PCNN_EXCHANGE_ALLTOALL_ALLGATHER,
                .timeout_ms = TIMEOUT_MS};
    const bool stopper = rank == ranks - 1;
    const long live = pcnn_debug_live_allocations();
    model mine = build(&c, comm_world, ranks * MAX_LOCAL);
    model other = build(&c, comm_world, ranks * MAX_LOCAL);
    train_both(&mine, NULL, UNEVEN, 1);
    /* The step agreement compares step counters: the stopper's other
     * network must look like the same step. */
    double step;
    CK(pcnn_net_get_option(mine.net, PCNN_OPT_STEP, &step));
    CK(pcnn_net_set_option(other.net, PCNN_OPT_STEP, step));
    float x[2 * SAMPLE];
    int32_t y[2];
    make_batch(3, 2, x, y);
    pcnn_net *stepping = stopper ? other.net : mine.net;
    const double t0 = now();
    const pcnn_status st = pcnn_net_train_step(stepping, 2, x, y, NULL, NULL);
    const double elapsed = now() - t0;
    const bool in_time = elapsed >= 0.9 * TIMEOUT_MS * 1e-3 && elapsed < TIMEOUT_MS * 1e-3 + 5.0;
    const bool names = strstr(pcnn_last_error(), "pcnn_net_train_step") != NULL &&
                       strstr(pcnn_last_error(), "batch-norm") != NULL;
    if (st != PCNN_ERR_TIMEOUT || !in_time || !names)
        fprintf(stderr, "rank %d: %s after %.2f s: %s\n", rank, pcnn_status_str(st), elapsed,
                pcnn_last_error());
    char what[160];
    snprintf(what, sizeof what, "%s engine: a batch-norm reduction timing out fails the step "
             "with PCNN_ERR_TIMEOUT on every rank, in time", engine == 1 ? "thread" : "nonblocking");
    expect(st == PCNN_ERR_TIMEOUT && in_time && names, what);
    pcnn_status async = PCNN_OK;
    CK(pcnn_net_async_error(stepping, &async));
    const pcnn_status again = pcnn_net_train_step(stepping, 2, x, y, NULL, NULL);
    expect(async == PCNN_ERR_TIMEOUT && again == PCNN_ERR_INVALID_STATE &&
               strstr(pcnn_last_error(), "aborted") != NULL,
           "after it the network is aborted: the error query says TIMEOUT, steps are refused");
    const bool destroyed = pcnn_net_destroy(&mine.net) == PCNN_OK &&
                           pcnn_net_destroy(&other.net) == PCNN_OK && !mine.net && !other.net;
    expect(destroyed && pcnn_debug_live_allocations() > live,
           "destroy returns, keeping the buffer MPI may still write");
    /* The communicator itself is fine. */
    model fresh = build(&c, comm_world, ranks * MAX_LOCAL);
    float loss = NAN;
    CK(pcnn_net_train_step(fresh.net, 2, x, y, NULL, &loss));
    expect(isfinite(loss), "the communicator trains a new synchronised network afterwards");
    pcnn_net_destroy(&fresh.net);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm_world));
    if (rank == 0) printf("synchronised batch norm on %d rank(s)\n", ranks);
    const pcnn_optimizer optimizers[] = {PCNN_OPTIMIZER_MOMENTUM, PCNN_OPTIMIZER_ADAM};
    for (int o = 0; o < 2; o++)
        for (int engine = 1; engine <= 2; engine++)
            for (int how = UNEVEN; how <= SINGLE; how++)
                check_equivalence(optimizers[o], engine, PCNN_EXCHANGE_ALLTOALL_ALLGATHER, how);
    for (int engine = 1; engine <= 2; engine++)
        check_equivalence(PCNN_OPTIMIZER_MOMENTUM, engine, PCNN_EXCHANGE_ALLREDUCE, ONE_IDLE);
    check_sync_off();
    check_local();
    check_api();
    for (int engine = 1; engine <= 2; engine++) check_timeout(engine);
    CK(pcnn_comm_destroy(&comm_world));
    if (rank == 0) printf("%d failure(s) in %d checks\n", failures, checks);
    MPI_Finalize();
    return failures ? 1 : 0;
}
