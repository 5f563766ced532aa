/* The optimizer's cost in the performance model (lib/perf/calib_compute.c,
 * layer_cost.c): a call's overhead (inline, or with a thread team where
 * parallel_for opens one) plus the timed per-parameter work of the layers
 * it covers, for a whole bucket, a shard of it (all-to-all + all-gather)
 * and another network (the mean rate), with the all-to-all strategy's
 * sum of received pieces at its timed rate; the simulator's buckets against
 * the hand values; and a real calibration that times the update's calls
 * as a step makes them (one bucket here: its work shared by parameters)
 * and leaves the parameters and the optimizer state bit for bit as they
 * were. */
#define PCNN_EXPERIMENTAL
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/expect.h"
#include "core/memory.h"
#include "graph/graph.h"
#include "kernels/kernels.h"
#include "pcnn.h"
#include "perf/perf.h"

#define CK(call) EXPECT((call) == PCNN_OK, "%s: %s", #call, pcnn_last_error())

static int close_rel(double a, double b, double tol) { return fabs(a - b) <= tol * fabs(b); }

/* input 3x8x8 -> conv 4 (3x3) -> relu -> dense 10: 112 and 2570 parameters. */
static pcnn_net *small_net(int threads, uint64_t seed)
{
    pcnn_net *net;
    pcnn_layer *in, *cv, *r, *fc;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, 3, 8, 8, &in));
    CK(pcnn_conv2d(net, in, 4, 3, 1, 1, 1, &cv));
    CK(pcnn_relu(net, cv, &r));
    CK(pcnn_dense(net, r, 10, 1, &fc));
    CK(pcnn_net_set_loss(net, fc, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_MOMENTUM));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, threads));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, (double)seed));
    CK(pcnn_net_finalize(net, 8));
    return net;
}

static void train(pcnn_net *net, int steps)
{
    float x[8 * 3 * 8 * 8];
    int32_t labels[8];
    for (int i = 0; i < 8 * 3 * 8 * 8; i++) x[i] = (float)((i * 7919) % 97) / 97.0f - 0.5f;
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < 8; i++) labels[i] = (i * 3 + s) % 10;
        CK(pcnn_net_train_step(net, 8, x, labels, NULL, NULL));
    }
}

/* The table of `net` with made-up timings: the optimizer's work 2 ns per
 * parameter of the conv, 4 ns per parameter of the dense layer; a call
 * 1 us inline, 5 us with a thread team. */
static void synthetic_table(pcnn_perfmodel *m, const pcnn_net *net, int threads)
{
    const layer_list *ll = net_layer_list(net);
    perf_layer *rows = calloc((size_t)ll->count, sizeof *rows);
    for (int i = 0; i < ll->count; i++) {
        rows[i].num_params = ll->items[i]->num_params;
        rows[i].fwd[1] = 1e-6;
        rows[i].bwd_w[1] = 1e-6;
    }
    rows[1].update = 112 * 2e-9;
    rows[3].update = 2570 * 4e-9;
    m->compute = (perf_compute){.num_layers = ll->count, .layers = rows,
                                .fingerprint = perf_fingerprint(ll), .threads = threads,
                                .batch_lo = 4, .batch_hi = 8, .update = {1e-6, 3e-9},
                                .update_team = 5e-6, .sum_gamma = 5e-11};
}

static void test_formula(void)
{
    pcnn_perfmodel *m;
    CK(pcnn_perfmodel_create(&m));
    pcnn_net *net = small_net(2, 1);
    synthetic_table(m, net, 2);
    const perf_compute *c = &m->compute;
    /* parallel_for opens a team from a work of PAR_MIN_WORK = 2 own. */
    const double edge = PAR_MIN_WORK / 2;
    EXPECT(perf_update_call(c, edge - 1) == 1e-6 && perf_update_call(c, edge) == 5e-6 &&
               perf_update_call(c, 16) == 1e-6 && perf_update_call(c, 0) == 0,
           "call overheads %g %g %g", perf_update_call(c, edge - 1), perf_update_call(c, edge),
           perf_update_call(c, 16));
    m->compute.threads = 1;
    EXPECT(perf_update_call(c, 1e6) == 1e-6, "one thread: always inline");
    m->compute.threads = 2;
    /* The whole network in one call: one overhead, both layers' work. */
    const double work = 112 * 2e-9 + 2570 * 4e-9;
    double t = perf_update_time(m, true, 1, 3, 2682);
    EXPECT(close_rel(t, 1e-6 + work, 1e-12), "one bucket: %.9g vs %.9g", t, 1e-6 + work);
    /* Each layer alone: its work and a call. */
    t = perf_update_time(m, true, 3, 3, 2570);
    EXPECT(close_rel(t, 1e-6 + 2570 * 4e-9, 1e-12), "the dense layer alone: %.9g", t);
    /* A shard of 1341 (two ranks): its share of the work. */
    t = perf_update_time(m, true, 1, 3, 1341);
    EXPECT(close_rel(t, 1e-6 + work * 1341 / 2682, 1e-12), "a half shard: %.9g", t);
    /* Another network: the mean rate. */
    t = perf_update_time(m, false, 1, 3, 1e5);
    EXPECT(close_rel(t, 5e-6 + 1e5 * 3e-9, 1e-12), "without the table: %.9g", t);
    EXPECT(perf_update_time(m, true, 1, 3, 0) == 0, "nothing owned: nothing");

    /* The simulator's buckets.  One rank: one bucket of both layers. */
    sim_input in;
    sim_layer *layers;
    sim_bucket *buckets;
    CK(perf_build_sim(m, net, 8, 1, false, &in, &layers, &buckets, "test"));
    EXPECT(in.num_buckets == 1 && close_rel(buckets[0].update, 1e-6 + work, 1e-12),
           "one rank: %d bucket(s), update %.9g", in.num_buckets, buckets[0].update);
    mem_free(layers);
    mem_free(buckets);
    /* Two ranks (what-if), all-to-all + all-gather: the sum of the pieces
     * (at the rate timed in cache) and the shard's update. */
    CK(pcnn_perfmodel_set_param(m, PCNN_PERF_STRATEGY, PCNN_EXCHANGE_ALLTOALL_ALLGATHER));
    CK(perf_build_sim(m, net, 16, 2, true, &in, &layers, &buckets, "test"));
    const double sum = 1341 * 4.0 * 5e-11;
    EXPECT(in.num_buckets == 1 &&
               close_rel(buckets[0].update, sum + 1e-6 + work * 1341 / 2682, 1e-12),
           "two ranks, sharded: update %.9g vs %.9g", buckets[0].update,
           sum + 1e-6 + work * 1341 / 2682);
    mem_free(layers);
    mem_free(buckets);
    /* FC gradient: the dense layer's bucket updates its 10 x ceil(256 / 2)
     * weight columns and the bias in two calls. */
    CK(pcnn_perfmodel_set_param(m, PCNN_PERF_STRATEGY, PCNN_EXCHANGE_FC_GRADIENT));
    CK(perf_build_sim(m, net, 16, 2, true, &in, &layers, &buckets, "test"));
    const int fc = in.num_buckets - 1;
    const double rate = 4e-9, bwd_w = 8e-6; /* 1 us per sample, 8 samples */
    const double want = bwd_w + (1e-6 + 10 * 128 * rate) + (1e-6 + 10 * rate);
    EXPECT(in.num_buckets == 2 && buckets[fc].first_layer == 3 &&
               close_rel(buckets[fc].update, want, 1e-9),
           "FC gradient: %d buckets, update %.9g vs %.9g", in.num_buckets, buckets[fc].update,
           want);
    mem_free(layers);
    mem_free(buckets);
    pcnn_net_destroy(&net);
    pcnn_perfmodel_destroy(&m);
}

/* A real calibration: every layer with parameters has its share of the
 * update's work, the others none, and training goes on as if nothing had
 * run. */
static void test_calibration(void)
{
    pcnn_net *a = small_net(1, 7), *b = small_net(1, 7);
    train(a, 3);
    train(b, 3);
    pcnn_perfmodel *m;
    CK(pcnn_perfmodel_create(&m));
    CK(pcnn_perfmodel_calibrate_compute(m, a, 0.2));
    const perf_compute *c = &m->compute;
    EXPECT(c->num_layers == 4, "4 layers timed: %d", c->num_layers);
    for (int i = 0; i < c->num_layers; i++) {
        const perf_layer *p = &c->layers[i];
        EXPECT(p->num_params ? p->update > 0 && p->update < 0.1 : p->update == 0,
               "layer %d (%zu parameters): update %g s", i, (size_t)p->num_params, p->update);
    }
    /* One bucket holds both layers: the same work per parameter. */
    EXPECT(close_rel(c->layers[1].update / 112, c->layers[3].update / 2570, 1e-9),
           "shares by parameters: %g and %g s/param", c->layers[1].update / 112,
           c->layers[3].update / 2570);
    EXPECT(c->update[0] > 0 && c->update[0] < 1e-3 && c->update_team == c->update[0],
           "one thread: call overhead %g s, with a team the same (%g)", c->update[0],
           c->update_team);
    EXPECT(c->update[1] > 0 && c->update[1] < 1e-6, "mean cost per parameter %g s",
           c->update[1]);
    EXPECT(c->sum_gamma > 0 && c->sum_gamma < 1e-8, "summation %g s/B", c->sum_gamma);
    train(a, 2);
    train(b, 2);
    size_t n;
    CK(pcnn_net_num_params(a, &n));
    float *pa = malloc(n * sizeof *pa), *pb = malloc(n * sizeof *pb);
    CK(pcnn_net_get_params(a, pa, n));
    CK(pcnn_net_get_params(b, pb, n));
    EXPECT(memcmp(pa, pb, n * sizeof *pa) == 0,
           "calibration left parameters and momentum as they were (training after it "
           "matches a twin's bit for bit)");
    free(pa);
    free(pb);
    char report[8192];
    CK(pcnn_perfmodel_report(m, report, sizeof report, NULL));
    EXPECT(strstr(report, "per call") && strstr(report, "update"), "report:\n%s", report);
    pcnn_net_destroy(&a);
    pcnn_net_destroy(&b);
    pcnn_perfmodel_destroy(&m);
}

int main(void)
{
    test_formula();
    test_calibration();
    if (!failures) printf("update cost: all checks passed\n");
    return failures ? 1 : 0;
}
