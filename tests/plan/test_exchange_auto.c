/* PCNN_EXCHANGE_AUTO and the scheduler's re-plan under mpiexec (2 ranks or
 * more):
 *   1. Without a model: the heuristics (all-to-all + all-gather, the FC
 *      gradient for the dense layer where eq. 4.8 says so).
 *   2. With a model whose links make one strategy clearly cheaper, that
 *      strategy (allreduce everywhere; all-to-all + all-gather everywhere
 *      when all-gathers cost a large latency), reported in the plan report,
 *      the summary, the log callback and pcnn_layer_get_exchange.
 *   3. Training under AUTO equals training with the chosen exchanges set
 *      by hand (1e-5).
 *   4. A rank with another model, or none: MISMATCH on every rank at
 *      finalize, no deadlock.
 *   5. The scheduler's batch growth re-plans (report, log), the dense
 *      layer's exchange changes with the batch (the FC gradient at small
 *      batches, then a weight exchange) and training, with momentum and
 *      with Adam (whose state moves to the new owners), stays equal to one
 *      rank on the global batch (1e-5); a rank with another model at the
 *      re-plan: MISMATCH on every rank. */
#define PCNN_EXPERIMENTAL
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/mpi_check.h"
#include "synthetic_model.h"

static pcnn_comm *world;

enum { DENSE_OUT = 10 };

/* input 4x16x16 -> conv 8 -> relu -> maxpool 2 -> flatten (512) -> dense 10 */
static pcnn_net *build_with(pcnn_comm *comm, pcnn_exchange exchange, pcnn_optimizer optimizer,
                            pcnn_layer **conv, pcnn_layer **dense)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    if (comm) {
        CK(pcnn_net_set_comm(net, comm));
        CK(pcnn_net_set_exchange(net, exchange));
        CK(pcnn_net_set_option(net, PCNN_OPT_TIMEOUT_MS, 30000));
    }
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 5));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    CK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 0.05));
    CK(pcnn_net_set_optimizer(net, optimizer));
    if (optimizer == PCNN_OPTIMIZER_ADAM) CK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 1e-3));
    CK(pcnn_net_input(net, 4, 16, 16, &l));
    CK(pcnn_conv2d(net, l, 8, 3, 1, 1, 1, &l));
    *conv = l;
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_maxpool2d(net, l, 2, 2, 0, &l));
    CK(pcnn_flatten(net, l, &l));
    CK(pcnn_dense(net, l, DENSE_OUT, 1, &l));
    *dense = l;
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    return net;
}

static pcnn_net *build(pcnn_comm *comm, pcnn_exchange exchange, pcnn_layer **conv,
                       pcnn_layer **dense)
{
    return build_with(comm, exchange, PCNN_OPTIMIZER_MOMENTUM, conv, dense);
}

/* Links where allreduce is nearly free and the others slow, or the
 * reverse with all-gathers of a large latency. */
static void set_links(pcnn_perfmodel *m, bool allreduce_cheap)
{
    perf_link *k = &m->link;
    for (int c = 0; c < PERF_COLLECTIVES; c++) {
        k->alpha[c] = 1e-9;
        k->beta[c] = 1e-13;
        k->curve[c].count = 0;
    }
    if (allreduce_cheap) {
        k->alpha[PCNN_COLL_ALLTOALL] = k->alpha[PCNN_COLL_ALLGATHER] = 1e-3;
        k->beta[PCNN_COLL_ALLTOALL] = k->beta[PCNN_COLL_ALLGATHER] = 1e-6;
    } else {
        k->alpha[PCNN_COLL_ALLREDUCE] = 1e-2;
        k->beta[PCNN_COLL_ALLREDUCE] = 1e-6;
        k->alpha[PCNN_COLL_ALLGATHER] = 1e-4; /* the FC gradient has two */
    }
}

static char logged[4096];

static void on_log(void *user, pcnn_log_level level, const char *message)
{
    (void)user;
    (void)level;
    const size_t used = strlen(logged);
    snprintf(logged + used, sizeof logged - used, "%s\n", message);
}

static void get_exchanges(pcnn_layer *conv, pcnn_layer *dense, pcnn_exchange *c,
                          pcnn_exchange *d)
{
    CK(pcnn_layer_get_exchange(conv, c));
    CK(pcnn_layer_get_exchange(dense, d));
}

static void test_heuristics(void)
{
    pcnn_layer *conv, *dense, *conv2, *dense2;
    pcnn_net *a = build(world, PCNN_EXCHANGE_AUTO, &conv, &dense);
    pcnn_net *b = build(world, PCNN_EXCHANGE_ALLTOALL_ALLGATHER, &conv2, &dense2);
    CK(pcnn_net_finalize(a, 2));
    CK(pcnn_net_finalize(b, 2));
    pcnn_exchange c, d, c2, d2;
    get_exchanges(conv, dense, &c, &d);
    get_exchanges(conv2, dense2, &c2, &d2);
    /* eq. 4.8 at B = 2: F B / P + K B = 512 + 20 < K F = 5120 */
    expect(c == PCNN_EXCHANGE_ALLTOALL_ALLGATHER && d == PCNN_EXCHANGE_FC_GRADIENT &&
               c2 == c && d2 == d,
           "auto without a model: the default's heuristics (conv all-to-all + all-gather, "
           "dense FC gradient)");
    expect(pcnn_net_plan_report(a, NULL, 0, NULL) == PCNN_ERR_INVALID_STATE,
           "auto without a model: no plan record");
    pcnn_net_destroy(&a);
    pcnn_net_destroy(&b);
}

/* n values in [-0.5, 0.5) from seed. */
static void fill_uniform(float *x, size_t n, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(s >> 40) / (double)(1ull << 24)) - 0.5f;
    }
}

/* Three steps on the same batch; the parameters. */
static float *train3(pcnn_net *net, size_t *count)
{
    CK(pcnn_net_num_params(net, count));
    enum { B = 2 };
    float x[B * 4 * 16 * 16];
    int32_t y[B] = {3, 7};
    fill_uniform(x, sizeof x / sizeof x[0], 99);
    /* Each rank its share of the batch. */
    const int n = B / ranks + (rank < B % ranks), first = rank * (B / ranks) +
                                                           (rank < B % ranks ? rank : B % ranks);
    for (int step = 0; step < 3; step++)
        CK(pcnn_net_train_step(net, n, n ? x + first * 4 * 16 * 16 : NULL, y + first, NULL,
                               NULL));
    float *w = malloc(*count * sizeof *w);
    CK(pcnn_net_get_params(net, w, *count));
    return w;
}

static double rel_diff(const float *a, const float *b, size_t n)
{
    double d = 0, s = 1e-30;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        s = fmax(s, fabs((double)b[i]));
    }
    return d / s;
}

/* rel_diff of two networks' parameters (b of the same count). */
static double params_diff(pcnn_net *a, pcnn_net *b)
{
    size_t count;
    CK(pcnn_net_num_params(b, &count));
    float *wa = malloc(count * sizeof *wa), *wb = malloc(count * sizeof *wb);
    CK(pcnn_net_get_params(a, wa, count));
    CK(pcnn_net_get_params(b, wb, count));
    const double d = rel_diff(wa, wb, count);
    free(wa);
    free(wb);
    return d;
}

static void test_with_model(bool allreduce_cheap)
{
    pcnn_perfmodel *m;
    CK(pcnn_perfmodel_create(&m));
    set_links(m, allreduce_cheap);
    pcnn_layer *conv, *dense;
    pcnn_net *net = build(world, PCNN_EXCHANGE_AUTO, &conv, &dense);
    logged[0] = '\0';
    CK(pcnn_net_set_log_callback(net, on_log, NULL));
    CK(pcnn_net_set_perfmodel(net, m));
    CK(pcnn_net_finalize(net, 2));
    pcnn_exchange c, d;
    get_exchanges(conv, dense, &c, &d);
    const pcnn_exchange want = allreduce_cheap ? PCNN_EXCHANGE_ALLREDUCE
                                               : PCNN_EXCHANGE_ALLTOALL_ALLGATHER;
    char what[200];
    snprintf(what, sizeof what, "auto with a model where %s is cheapest: conv %d, dense %d",
             allreduce_cheap ? "allreduce" : "all-to-all + all-gather", (int)c, (int)d);
    expect(c == want && d == want, what);
    static char report[8192], summary[8192];
    size_t needed = 0;
    CK(pcnn_net_plan_report(net, report, sizeof report, &needed));
    CK(pcnn_net_summary(net, summary, sizeof summary, NULL));
    expect(strstr(report, "gradient exchange chosen by the model") != NULL &&
               (strstr(report, "* allreduce") != NULL) == allreduce_cheap &&
               strstr(report, "FC gradient") != NULL && needed < sizeof report,
           "auto: the plan report lists every kind's cost and marks the chosen one");
    expect(strstr(summary, "(performance model)") != NULL &&
               strstr(logged, "(performance model)") != NULL,
           "auto: the summary and the log callback tell the model's choice");
    if (rank == 0 && allreduce_cheap) fputs(report, stdout);

    /* 3. The same training as the choice set by hand. */
    pcnn_layer *conv2, *dense2;
    pcnn_net *hand = build(world, want, &conv2, &dense2);
    CK(pcnn_layer_set_exchange(dense2, want));
    CK(pcnn_net_finalize(hand, 2));
    size_t n1, n2;
    float *w1 = train3(net, &n1), *w2 = train3(hand, &n2);
    const double diff = n1 == n2 ? rel_diff(w1, w2, n1) : INFINITY;
    snprintf(what, sizeof what, "auto trains as its choice set by hand (%.2e)", diff);
    expect(diff <= 1e-5, what);
    free(w1);
    free(w2);
    pcnn_net_destroy(&net);
    pcnn_net_destroy(&hand);
    pcnn_perfmodel_destroy(&m);
}

static void test_mismatch(bool none)
{
    pcnn_perfmodel *m;
    CK(pcnn_perfmodel_create(&m));
    set_links(m, rank != 1);
    pcnn_layer *conv, *dense;
    pcnn_net *net = build(world, PCNN_EXCHANGE_AUTO, &conv, &dense);
    if (!(none && rank == 1)) CK(pcnn_net_set_perfmodel(net, m));
    const pcnn_status st = pcnn_net_finalize(net, 2);
    const char *msg = pcnn_last_error();
    char what[300];
    snprintf(what, sizeof what, "a rank with %s: MISMATCH on every rank naming rank 1 (%s)",
             none ? "no model" : "another model", msg);
    expect(st == PCNN_ERR_MISMATCH && strstr(msg, "rank 1") && strstr(msg, "pcnn_net_finalize"),
           what);
    pcnn_net_destroy(&net);
    pcnn_perfmodel_destroy(&m);
}

/* A dataset of n samples of 4x16x16 with labels in [0, 10). */
static pcnn_dataset *dataset(int n)
{
    float *x = malloc(sizeof(float) * (size_t)n * 1024);
    int32_t *y = malloc(sizeof(int32_t) * (size_t)n);
    fill_uniform(x, (size_t)n * 1024, 7);
    for (int i = 0; i < n; i++) y[i] = (int32_t)(i * 7 % DENSE_OUT);
    pcnn_dataset *d;
    CK(pcnn_dataset_create(n, 4, 16, 16, x, y, NULL, 0, &d));
    free(x);
    free(y);
    return d;
}

static pcnn_scheduler *growing(pcnn_net *net, int most)
{
    pcnn_scheduler *s;
    CK(pcnn_scheduler_create(net, 2, most, 0.05, &s));
    CK(pcnn_scheduler_set_option(s, PCNN_SCHED_INTERVAL_EPOCHS, 1));
    return s;
}

static const char *exchange_name(pcnn_exchange e)
{
    return e == PCNN_EXCHANGE_ALLREDUCE ? "AR" : e == PCNN_EXCHANGE_FC_GRADIENT ? "FC" : "A2A";
}

/* Batches 2, 4, .. 64 under a scheduler: on the way the dense layer's
 * exchange changes (the FC gradient's activations grow with the batch, a
 * weight exchange does not), the optimizer state following it. */
static void test_replan(pcnn_optimizer optimizer)
{
    enum { N = 128, EPOCHS = 6, MOST = 64 };
    pcnn_perfmodel *m;
    CK(pcnn_perfmodel_create(&m));
    pcnn_layer *conv, *dense, *conv_seq, *dense_seq;
    pcnn_net *par = build_with(world, PCNN_EXCHANGE_AUTO, optimizer, &conv, &dense);
    pcnn_net *seq = build_with(NULL, 0, optimizer, &conv_seq, &dense_seq);
    synthetic_model(m, par, 1e-9);
    logged[0] = '\0';
    CK(pcnn_net_set_log_callback(par, on_log, NULL));
    CK(pcnn_net_set_perfmodel(par, m));
    CK(pcnn_net_finalize(par, MOST));
    CK(pcnn_net_finalize(seq, MOST));
    pcnn_dataset *data = dataset(N);
    pcnn_scheduler *sp = growing(par, MOST), *ss = growing(seq, MOST);
    double worst = 0;
    char path[256] = "";
    int changes = 0;
    pcnn_exchange last = (pcnn_exchange)-1;
    for (int e = 0; e < EPOCHS; e++) {
        CK(pcnn_scheduler_train_epoch(sp, data, NULL));
        CK(pcnn_scheduler_train_epoch(ss, data, NULL));
        worst = fmax(worst, params_diff(par, seq));
        double b;
        pcnn_exchange c, d;
        CK(pcnn_scheduler_get_option(sp, PCNN_SCHED_BATCH, &b));
        get_exchanges(conv, dense, &c, &d);
        changes += e > 0 && d != last;
        last = d;
        const size_t used = strlen(path);
        snprintf(path + used, sizeof path - used, " %d:%s/%s", (int)b, exchange_name(c),
                 exchange_name(d));
    }
    const char *opt = optimizer == PCNN_OPTIMIZER_ADAM ? "Adam" : "momentum";
    char what[400];
    snprintf(what, sizeof what, "%s: the dense layer's exchange changes as the batch grows "
             "(batch:conv/dense after each epoch:%s)", opt, path);
    expect(changes >= 1 && strstr(path, "FC") != NULL, what);
    snprintf(what, sizeof what, "%s: re-planned growing batch trains as one rank (%.2e)", opt,
             worst);
    expect(worst <= 1e-5, what);
    static char report[16384], summary[16384];
    CK(pcnn_net_plan_report(par, report, sizeof report, NULL));
    CK(pcnn_net_summary(par, summary, sizeof summary, NULL));
    /* The last epoch trained at batch 64 (re-planned when it began). */
    snprintf(what, sizeof what, "%s: the scheduler's batch changes re-plan (report, log "
             "callback, the summary's note)", opt);
    expect(strstr(report, "re-plan for a scheduler's batch") != NULL &&
               strstr(report, "global batch 64") != NULL &&
               strstr(logged, "re-plan for batch 2:") != NULL &&
               strstr(logged, "re-plan for batch 64:") != NULL &&
               strstr(logged, "gradient exchange changed") != NULL &&
               strstr(summary, "(re-planned for batch") != NULL,
           what);
    if (rank == 0 && optimizer == PCNN_OPTIMIZER_MOMENTUM) fputs(report, stdout);
    pcnn_scheduler_destroy(&sp);

    /* Another model on rank 1 at the next re-plan: MISMATCH everywhere. */
    if (rank == 1) synthetic_model(m, par, 2e-9);
    pcnn_scheduler *s2 = growing(par, MOST);
    const pcnn_status st = pcnn_scheduler_begin_epoch(s2, NULL, NULL);
    const char *msg = pcnn_last_error();
    snprintf(what, sizeof what, "a re-plan with another model on rank 1: MISMATCH on every "
             "rank (%s)", msg);
    expect(st == PCNN_ERR_MISMATCH && strstr(msg, "rank 1") != NULL, what);
    pcnn_scheduler_destroy(&s2);
    pcnn_scheduler_destroy(&ss);
    pcnn_net_destroy(&par);
    pcnn_net_destroy(&seq);
    pcnn_dataset_destroy(&data);
    pcnn_perfmodel_destroy(&m);
}

/* Two steps on a batch of 8, each rank its share. */
static void train2(pcnn_net *net, bool whole, int seed)
{
    enum { B = 8, SAMPLE = 4 * 16 * 16 };
    static float x[B * SAMPLE];
    int32_t y[B];
    fill_uniform(x, sizeof x / sizeof x[0], (uint64_t)seed);
    for (int i = 0; i < B; i++) y[i] = (int32_t)((i * 3 + seed) % DENSE_OUT);
    const int n = whole ? B : B / ranks + (rank < B % ranks);
    const int first = whole ? 0 : rank * (B / ranks) + (rank < B % ranks ? rank : B % ranks);
    for (int step = 0; step < 2; step++)
        CK(pcnn_net_train_step(net, n, n ? x + first * SAMPLE : NULL, y + first, NULL, NULL));
}

/* Switch par's conv and dense layers to each pair of cycle[count] in turn,
 * two steps of par and seq (one rank) after each (whole: every rank passes
 * the whole batch); whether every switch took, engine included (0: any),
 * and the parameters' difference at the end in *diff. */
static bool run_cycle(pcnn_net *par, pcnn_net *seq, const pcnn_layer *conv,
                      const pcnn_layer *dense, const pcnn_exchange (*cycle)[2], int count,
                      bool whole, int engine, double *diff)
{
    const layer_list *ll = net_layer_list(par);
    pcnn_exchange kinds[16];
    bool applied = true;
    train2(par, whole, 1);
    train2(seq, true, 1);
    for (int k = 0; k < count; k++) {
        for (int i = 0; i < ll->count; i++) kinds[i] = ll->items[i]->exchange;
        kinds[conv->index] = cycle[k][0];
        kinds[dense->index] = cycle[k][1];
        CK(net_switch_exchanges(par, kinds, " (test)", NULL, "run_cycle"));
        pcnn_exchange c, d;
        CK(pcnn_layer_get_exchange(conv, &c));
        CK(pcnn_layer_get_exchange(dense, &d));
        double active;
        CK(pcnn_net_get_option(par, PCNN_OPT_ACTIVE_ENGINE, &active));
        applied = applied && c == cycle[k][0] && d == cycle[k][1] &&
                  (!engine || (int)active == engine);
        train2(par, whole, k + 2);
        train2(seq, true, k + 2);
    }
    *diff = params_diff(par, seq);
    return applied;
}

/* The switch itself, every kind to every other (replicated to sharded and
 * back, shards of one size to another), with training between. */
static void test_switch_cycle(pcnn_optimizer optimizer, int engine)
{
    static const pcnn_exchange cycle[][2] = {
        {PCNN_EXCHANGE_ALLTOALL_ALLGATHER, PCNN_EXCHANGE_FC_GRADIENT},
        {PCNN_EXCHANGE_ALLTOALL_ALLGATHER, PCNN_EXCHANGE_ALLTOALL_ALLGATHER},
        {PCNN_EXCHANGE_ALLREDUCE, PCNN_EXCHANGE_FC_GRADIENT},
        {PCNN_EXCHANGE_ALLREDUCE, PCNN_EXCHANGE_ALLTOALL_ALLGATHER},
        {PCNN_EXCHANGE_ALLTOALL_ALLGATHER, PCNN_EXCHANGE_ALLREDUCE},
        {PCNN_EXCHANGE_ALLREDUCE, PCNN_EXCHANGE_ALLREDUCE},
    };
    pcnn_layer *conv, *dense, *c2, *d2;
    pcnn_net *par = build_with(world, PCNN_EXCHANGE_ALLREDUCE, optimizer, &conv, &dense);
    pcnn_net *seq = build_with(NULL, 0, optimizer, &c2, &d2);
    CK(pcnn_net_set_option(par, PCNN_OPT_ENGINE, engine));
    CK(pcnn_net_finalize(par, 8));
    CK(pcnn_net_finalize(seq, 8));
    double diff;
    const bool applied = run_cycle(par, seq, conv, dense, cycle,
                                   (int)(sizeof cycle / sizeof cycle[0]), false, engine, &diff);
    char what[200];
    snprintf(what, sizeof what, "%s, %s engine: switching every exchange to every other "
             "between steps trains as one rank (%.2e)",
             optimizer == PCNN_OPTIMIZER_ADAM ? "Adam" : "momentum",
             engine == 1 ? "thread" : "nonblocking", diff);
    expect(applied && diff <= 1e-5, what);
    pcnn_net_destroy(&par);
    pcnn_net_destroy(&seq);
}

/* A spatial network (every sample split along H over the ranks, the
 * dense layer on each rank's box): its layers switch between allreduce and
 * all-to-all + all-gather (the FC gradient is not for spatial networks)
 * and it trains as one rank. */
/* A dense layer on each rank's box (spatial, one sample group) keeps
 * all-to-all + all-gather under the model, even where allreduce is
 * cheapest: its weights then go as one all-gather of each rank's columns,
 * less than either. */
static void test_auto_columns(void)
{
    pcnn_perfmodel *m;
    CK(pcnn_perfmodel_create(&m));
    set_links(m, true);
    pcnn_layer *conv, *dense;
    pcnn_net *net = build(world, PCNN_EXCHANGE_AUTO, &conv, &dense);
    const int split[4] = {1, 1, ranks, 1};
    CK(pcnn_net_set_distribution(net, split));
    CK(pcnn_net_set_perfmodel(net, m));
    CK(pcnn_net_finalize(net, 2));
    pcnn_exchange c, d;
    get_exchanges(conv, dense, &c, &d);
    static char summary[8192];
    CK(pcnn_net_summary(net, summary, sizeof summary, NULL));
    char what[200];
    snprintf(what, sizeof what, "auto on a split where allreduce is cheapest: conv %d, the "
             "dense layer on each rank's box %d (its columns' all-gather)", (int)c, (int)d);
    expect(c == PCNN_EXCHANGE_ALLREDUCE && d == PCNN_EXCHANGE_ALLTOALL_ALLGATHER &&
               strstr(summary, "all-gather of each rank's columns") != NULL,
           what);
    pcnn_net_destroy(&net);
    pcnn_perfmodel_destroy(&m);
}

static void test_switch_spatial(void)
{
    static const pcnn_exchange cycle[][2] = {
        {PCNN_EXCHANGE_ALLTOALL_ALLGATHER, PCNN_EXCHANGE_ALLREDUCE},
        {PCNN_EXCHANGE_ALLREDUCE, PCNN_EXCHANGE_ALLTOALL_ALLGATHER},
        {PCNN_EXCHANGE_ALLTOALL_ALLGATHER, PCNN_EXCHANGE_ALLTOALL_ALLGATHER},
    };
    pcnn_layer *conv, *dense, *c2, *d2;
    pcnn_net *par = build_with(world, PCNN_EXCHANGE_ALLREDUCE, PCNN_OPTIMIZER_ADAM, &conv, &dense);
    pcnn_net *seq = build_with(NULL, 0, PCNN_OPTIMIZER_ADAM, &c2, &d2);
    const int split[4] = {1, 1, ranks, 1};
    CK(pcnn_net_set_distribution(par, split));
    CK(pcnn_net_finalize(par, 8));
    CK(pcnn_net_finalize(seq, 8));
    /* Every rank passes the whole batch; the library keeps its box. */
    double diff;
    const bool applied = run_cycle(par, seq, conv, dense, cycle,
                                   (int)(sizeof cycle / sizeof cycle[0]), true, 0, &diff);
    char what[200];
    snprintf(what, sizeof what, "a spatial network (H split over %d ranks) switches exchanges "
             "between steps and trains as one rank (%.2e)", ranks, diff);
    expect(applied && diff <= 1e-5, what);
    pcnn_net_destroy(&par);
    pcnn_net_destroy(&seq);
}

/* An allocation failing on rank 1 at each point of the switch in turn:
 * every rank returns an error, no rank hangs, the network keeps its
 * exchanges and trains on as one rank would. */
static void test_switch_failures(void)
{
    pcnn_layer *conv, *dense, *c2, *d2;
    pcnn_net *par = build_with(world, PCNN_EXCHANGE_ALLREDUCE, PCNN_OPTIMIZER_ADAM, &conv, &dense);
    pcnn_net *seq = build_with(NULL, 0, PCNN_OPTIMIZER_ADAM, &c2, &d2);
    CK(pcnn_net_finalize(par, 8));
    CK(pcnn_net_finalize(seq, 8));
    train2(par, false, 1);
    train2(seq, true, 1);
    const layer_list *ll = net_layer_list(par);
    pcnn_exchange kinds[16];
    for (int i = 0; i < ll->count; i++) kinds[i] = ll->items[i]->exchange;
    kinds[conv->index] = PCNN_EXCHANGE_ALLTOALL_ALLGATHER;
    kinds[dense->index] = PCNN_EXCHANGE_FC_GRADIENT;
    int failed = 0, kept = 1, agreed = 1;
    pcnn_status st = PCNN_ERR_OUT_OF_MEMORY;
    for (long n = 1; st != PCNN_OK && n < 200; n++) {
        if (rank == 1) pcnn_debug_fail_allocation(n);
        st = net_switch_exchanges(par, kinds, " (test)", NULL, "test_switch_failures");
        if (rank == 1) pcnn_debug_fail_allocation(0);
        int mine = st != PCNN_OK, all = 0;
        MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        agreed &= all == 0 || all == ranks;
        if (st == PCNN_OK) break;
        failed++;
        pcnn_exchange c, d;
        get_exchanges(conv, dense, &c, &d);
        kept &= c == PCNN_EXCHANGE_ALLREDUCE && d == PCNN_EXCHANGE_ALLREDUCE;
        train2(par, false, (int)n + 1); /* the old exchange still runs */
        train2(seq, true, (int)n + 1);
    }
    pcnn_exchange c, d;
    get_exchanges(conv, dense, &c, &d);
    train2(par, false, 500);
    train2(seq, true, 500);
    const double diff = params_diff(par, seq);
    char what[240];
    snprintf(what, sizeof what, "an allocation failing on rank 1 at each of %d points of the "
             "switch fails every rank, keeps the exchanges, trains as one rank (%.2e); then "
             "the switch succeeds", failed, diff);
    expect(failed > 3 && agreed && kept && st == PCNN_OK && c == kinds[conv->index] &&
               d == kinds[dense->index] && diff <= 1e-5,
           what);
    pcnn_net_destroy(&par);
    pcnn_net_destroy(&seq);
}

/* The fp32 masters (bf16 on the wire) move with a switch as the optimizer
 * state does: the checkpoint saved after switching every exchange holds
 * the masters saved before, bit for bit (lost masters would be the bf16
 * parameters, and a switch that took them from the parameters would
 * differ in most values); training goes on as one rank's to bf16
 * tolerance (2^-7 of the parameters' scale, test_bf16_wire.c). */
static void test_switch_bf16(void)
{
    pcnn_layer *conv, *dense, *c2, *d2;
    pcnn_net *par = build_with(world, PCNN_EXCHANGE_ALLTOALL_ALLGATHER, PCNN_OPTIMIZER_ADAM,
                               &conv, &dense);
    pcnn_net *seq = build_with(NULL, 0, PCNN_OPTIMIZER_ADAM, &c2, &d2);
    CK(pcnn_net_set_option(par, PCNN_OPT_PRECISION, PCNN_PRECISION_BF16));
    CK(pcnn_net_set_option(seq, PCNN_OPT_PRECISION, PCNN_PRECISION_BF16));
    CK(pcnn_net_finalize(par, 8));
    CK(pcnn_net_finalize(seq, 8));
    train2(par, false, 1);
    train2(seq, true, 1);
    int id = (int)getpid();
    MPI_Bcast(&id, 1, MPI_INT, 0, MPI_COMM_WORLD);
    char path[3][128];
    static const pcnn_exchange cycle[2][2] = {
        {PCNN_EXCHANGE_ALLREDUCE, PCNN_EXCHANGE_FC_GRADIENT},
        {PCNN_EXCHANGE_ALLTOALL_ALLGATHER, PCNN_EXCHANGE_ALLTOALL_ALLGATHER}};
    const layer_list *ll = net_layer_list(par);
    pcnn_exchange kinds[16];
    for (int k = 0; k < 3; k++) {
        snprintf(path[k], sizeof path[k], "/tmp/pcnn_switch_bf16_%d_%d.ckpt", id, k);
        CK(pcnn_net_save(par, path[k]));
        if (k == 2) break;
        for (int i = 0; i < ll->count; i++) kinds[i] = ll->items[i]->exchange;
        kinds[conv->index] = cycle[k][0];
        kinds[dense->index] = cycle[k][1];
        CK(net_switch_exchanges(par, kinds, " (test)", NULL, "test_switch_bf16"));
    }
    /* The files' parameters, read by fp32 networks of one process. */
    size_t n;
    CK(pcnn_net_num_params(seq, &n));
    float *w[3];
    for (int k = 0; k < 3; k++) {
        pcnn_layer *a, *b;
        pcnn_net *one = build_with(NULL, 0, PCNN_OPTIMIZER_ADAM, &a, &b);
        CK(pcnn_net_finalize(one, 8));
        CK(pcnn_net_load(one, path[k]));
        w[k] = malloc(n * sizeof(float));
        CK(pcnn_net_get_params(one, w[k], n));
        pcnn_net_destroy(&one);
    }
    size_t bf16_values = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &w[0][i], 4);
        bf16_values += (u & 0xffffu) == 0;
    }
    const bool kept = memcmp(w[0], w[1], n * sizeof(float)) == 0 &&
                      memcmp(w[0], w[2], n * sizeof(float)) == 0;
    train2(par, false, 2);
    train2(seq, true, 2);
    const double diff = params_diff(par, seq);
    char what[200];
    snprintf(what, sizeof what, "bf16 on the wire: the fp32 masters survive two switches bit for "
             "bit (%d; %zu of %zu saved values are bf16 numbers), then one rank's to %.2e",
             kept, bf16_values, n, diff);
    expect(kept && (ranks == 1 || bf16_values < n / 4) && diff <= 1.0 / 128, what);
    for (int k = 0; k < 3; k++) {
        free(w[k]);
        if (rank == 0) remove(path[k]);
    }
    pcnn_net_destroy(&par);
    pcnn_net_destroy(&seq);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    CK(pcnn_comm_create(MPI_COMM_WORLD, &world));
    test_heuristics();
    test_with_model(true);
    test_with_model(false);
    test_mismatch(false);
    test_mismatch(true);
    test_switch_cycle(PCNN_OPTIMIZER_MOMENTUM, 2);
    test_switch_failures();
    test_switch_spatial();
    test_auto_columns();
    test_switch_cycle(PCNN_OPTIMIZER_ADAM, 1); /* the communication thread restarts */
    test_switch_bf16();
    test_replan(PCNN_OPTIMIZER_MOMENTUM);
    test_replan(PCNN_OPTIMIZER_ADAM);
    pcnn_comm_destroy(&world);
    MPI_Finalize();
    if (rank == 0) printf("%d of %d checks failed\n", failures, checks);
    return failures ? 1 : 0;
}
