/* The planner's pieces on one process (lib/plan): candidate generation
 * table-driven (batch, dimension mask, largest spatial group, input
 * grouping, halo, memory cap), roles of the layer kinds, shuffle costs,
 * and whole plans on a made-up model for 2 and 4 ranks: batch 1 on large
 * planes plans spatial, a batch of 8 plans pure sample parallelism; a
 * ResNet block plans; the one-rank public call and its report; the
 * exchanges PCNN_EXCHANGE_AUTO prices, against eq. 4.8; the dense layer
 * that folds a flatten in (its share of W, the edge's two sums); the halo
 * of a convolution run in place (no staged copy) against one that stages. */
#define PCNN_EXPERIMENTAL
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "plan/plan.h"
#include "strategy/exchange_choice.h"
#include "synthetic_model.h"

static int failures;

static void expect(int ok, const char *what)
{
    printf("%s %s\n", ok ? "PASS" : "FAIL", what);
    if (!ok) failures++;
}

static int expect_summary(void)
{
    printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}

#define CHECK(call)                                                                     \
    do {                                                                                \
        pcnn_status s_ = (call);                                                        \
        if (s_ != PCNN_OK) {                                                            \
            printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, pcnn_last_error()); \
            return 1;                                                                   \
        }                                                                               \
    } while (0)

/* input c x h x w -> conv(c, k, 1, k/2) -> relu -> flatten -> dense 4 */
static pcnn_net *conv_net(int c, int h, int w, int k)
{
    pcnn_net *net = NULL;
    pcnn_layer *l;
    if (pcnn_net_create(&net) || pcnn_net_input(net, c, h, w, &l) ||
        pcnn_conv2d(net, l, c, k, 1, k / 2, 1, &l) || pcnn_relu(net, l, &l) ||
        pcnn_flatten(net, l, &l) || pcnn_dense(net, l, 4, 1, &l) ||
        pcnn_net_set_loss(net, l, PCNN_LOSS_MSE))
        return NULL;
    return net;
}

static plan_env env_of(const pcnn_net *net, pcnn_perfmodel *m, int ranks, int batch)
{
    return (plan_env){.layers = net_layer_list(net), .output = net_output(net), .model = m,
                      .ranks = ranks, .batch = batch, .max_spatial = ranks, .dims = 7,
                      .halo_overlap = true, .table = true,
                      .exchange = PCNN_EXCHANGE_ALLREDUCE};
}

typedef struct cand_case {
    const char *what;
    int c, hw, k;       /* the network */
    int batch, dims, max_spatial, groups;
    double cap;         /* bytes, 0 none */
    int expected[8][4];
    int count;
} cand_case;

static const cand_case cases[] = {
    {"all splits of 4 over H, W", 8, 16, 3, 4, 7, 4, 1, 0,
     {{4, 1, 1, 1}, {2, 1, 2, 1}, {2, 1, 1, 2}, {1, 1, 4, 1}, {1, 1, 2, 2}, {1, 1, 1, 4}}, 6},
    {"batch 1: no sample groups of 2", 8, 16, 3, 1, 7, 4, 1, 0,
     {{4, 1, 1, 1}, {1, 1, 4, 1}, {1, 1, 2, 2}, {1, 1, 1, 4}}, 4},
    {"mask H only", 8, 16, 3, 4, 2, 4, 1, 0, {{4, 1, 1, 1}, {2, 1, 2, 1}, {1, 1, 4, 1}}, 3},
    {"mask none", 8, 16, 3, 4, 0, 4, 1, 0, {{4, 1, 1, 1}}, 1},
    {"largest spatial group 2", 8, 16, 3, 4, 7, 2, 1, 0,
     {{4, 1, 1, 1}, {2, 1, 2, 1}, {2, 1, 1, 2}}, 3},
    {"input in 2 groups", 8, 16, 3, 4, 7, 4, 2, 0, {{4, 1, 1, 1}, {2, 1, 2, 1}, {2, 1, 1, 2}}, 3},
    {"7x7 halo of 3 > blocks of 2", 8, 8, 7, 4, 7, 4, 1, 0,
     {{4, 1, 1, 1}, {2, 1, 2, 1}, {2, 1, 1, 2}, {1, 1, 2, 2}}, 4},
    {"memory cap: sample only", 8, 16, 3, 4, 7, 4, 1, 34000, {{4, 1, 1, 1}}, 1},
    {"memory cap: groups of 2", 8, 16, 3, 4, 7, 4, 1, 36000,
     {{4, 1, 1, 1}, {2, 1, 2, 1}, {2, 1, 1, 2}}, 3},
};

static int test_candidates(pcnn_perfmodel *m)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const cand_case *t = &cases[i];
        pcnn_net *net = conv_net(t->c, t->hw, t->hw, t->k);
        if (!net) return 1;
        plan_env env = env_of(net, m, 4, t->batch);
        env.dims = t->dims;
        env.max_spatial = t->max_spatial;
        env.memory_cap = t->cap;
        int parts[64][LAYOUT_DIMS];
        const pcnn_layer *conv = env.layers->items[1];
        const int n = plan_layer_candidates(&env, conv, t->groups, parts, 64);
        int same = n == t->count;
        for (int c = 0; same && c < n; c++) same = !memcmp(parts[c], t->expected[c], sizeof parts[c]);
        if (!same) {
            printf("  got %d:", n);
            for (int c = 0; c < n; c++)
                printf(" {%d,%d,%d,%d}", parts[c][0], parts[c][1], parts[c][2], parts[c][3]);
            printf("\n");
        }
        char what[128];
        snprintf(what, sizeof what, "candidates: %s", t->what);
        expect(same, what);
        /* The head: the dense layer is sample-parallel whatever the options. */
        const int nd = plan_layer_candidates(&env, env.layers->items[4], t->groups, parts, 64);
        if (i == 0)
            expect(nd == 1 && parts[0][0] == 4 && plan_layer_role(&env, env.layers->items[4]) ==
                   PLAN_SAMPLE && plan_layer_role(&env, env.layers->items[2]) == PLAN_INHERIT &&
                   plan_layer_role(&env, env.layers->items[1]) == PLAN_FREE,
                   "roles: conv chooses, relu inherits, dense sample-parallel");
        pcnn_net_destroy(&net);
    }
    return 0;
}

static int test_shuffle(pcnn_perfmodel *m)
{
    pcnn_net *net = conv_net(8, 16, 16, 3);
    plan_env env = env_of(net, m, 2, 2);
    const pcnn_layer *conv = env.layers->items[1];
    const int a[4] = {2, 1, 1, 1}, b[4] = {1, 1, 2, 1}, c[4] = {1, 1, 1, 2};
    const double ab = plan_shuffle_cost(&env, conv, a, b, 1);
    const double bc = plan_shuffle_cost(&env, conv, b, c, 1);
    /* Batch 2 of 8 x 16 x 16: {2,1,1,1} -> {1,1,2,1}: each rank keeps
     * half of its sample and sends the other half, 8 x 8 x 16 floats;
     * {1,1,2,1} -> {1,1,1,2}: half of each of its two half samples, as
     * many. */
    double want = 0;
    pcnn_perfmodel_collective_time(m, PCNN_COLL_ALLTOALL, 2, 4.0 * 8 * 8 * 16, &want);
    expect(plan_shuffle_cost(&env, conv, a, a, 1) == 0, "shuffle: same distribution is free");
    expect(want > 0 && fabs(ab - 2 * want) <= 1e-12 && fabs(bc - 2 * want) <= 1e-12,
           "shuffle: the all-to-all of the bytes that move, forward and backward");
    /* Batch 1: rank 1 holds nothing under {2,1,1,1}; rank 0 sends half. */
    env.batch = 1;
    expect(fabs(plan_shuffle_cost(&env, conv, a, b, 1) - 2 * want) <= 1e-12,
           "shuffle at batch 1: the rank that sends most");
    pcnn_net_destroy(&net);
    return 0;
}

/* graph/spatial_dense.c's box dense: with one sample group the dense layer
 * is priced at its share of W for the whole batch; the edge into the
 * flatten costs its two sums of K x batch from a split input, the saving
 * back from an unsplit one; with several groups, the shuffle as before. */
static int test_box_dense(pcnn_perfmodel *m)
{
    pcnn_net *net = conv_net(8, 16, 16, 3);
    synthetic_model(m, net, 1e-9);
    plan_env env = env_of(net, m, 2, 1);
    const pcnn_layer *const *l = (const pcnn_layer *const *)env.layers->items;
    /* Synthetic: the dense layer's compute is linear in the samples. */
    const perf_layer *d = &m->compute.layers[4];
    const double head = d->fwd[1] + d->bwd_w[1] + d->bwd_x[1];
    const double saving = plan_box_dense_saving(&env, l[4], 1);
    expect(fabs(saving - head / 2) <= 1e-12 * head && plan_box_dense_saving(&env, l[4], 2) == 0 &&
               plan_box_dense_saving(&env, l[2], 1) == 0,
           "box dense: one sample on 2 ranks, each multiplies half of W (only the dense layer, "
           "only with one sample group)");
    const int split[4] = {1, 1, 2, 1}, sample[4] = {2, 1, 1, 1};
    double sum = 0;
    pcnn_perfmodel_collective_time(m, PCNN_COLL_ALLREDUCE, 2, 8.0 * 4, &sum);
    expect(sum > 0 && fabs(plan_edge_cost(&env, l[2], l[3], split, sample, 1) - 2 * sum) <= 1e-15,
           "box dense: from a split input, the flatten's edge is the two sums, no shuffle");
    expect(fabs(plan_edge_cost(&env, l[2], l[3], sample, sample, 1) - saving) <= 1e-15,
           "box dense: from a whole-sample input, the head's compute back on the edge");
    expect(plan_edge_cost(&env, l[1], l[2], split, split, 1) == 0,
           "box dense: the other edges are shuffles");
    /* Hybrid, 2 groups of 2 on 4 ranks: the head after a shuffle. */
    env = env_of(net, m, 4, 2);
    const int hybrid[4] = {2, 1, 2, 1}, head4[4] = {4, 1, 1, 1};
    expect(plan_edge_cost(&env, l[2], l[3], hybrid, head4, 2) ==
               plan_shuffle_cost(&env, l[2], hybrid, head4, 2),
           "box dense: with several sample groups, the flatten's shuffle");
    pcnn_net_destroy(&net);
    return 0;
}

static const int *chosen(const plan_record *r, int layer)
{
    return r->per[layer].candidates[r->per[layer].chosen].parts;
}

static int test_plans(pcnn_perfmodel *m)
{
    /* Large planes at batch 1: splitting halves the compute; halos are
     * a few rows. */
    pcnn_net *net = conv_net(8, 128, 128, 3);
    synthetic_model(m, net, 1e-9);
    plan_env env = env_of(net, m, 2, 1);
    plan_record *r = NULL;
    CHECK(plan_compute(&env, true, &r, "test"));
    const int *p = chosen(r, 1);
    expect(p[0] == 1 && p[2] * p[3] == 2 && chosen(r, 4)[0] == 2 && r->predicted < r->sample_only,
           "batch 1, 128x128 planes on 2 ranks: the convolution splits, the head is "
           "sample-parallel, predicted below pure sample parallelism");
    char text[8192];
    const size_t len = plan_describe(r, env.layers, text, sizeof text);
    expect(len > 100 && len < sizeof text && strstr(text, "* {1, 1, ") &&
           strstr(text, "shuffle into it") && strstr(text, "chosen path: 0:{1,1,") &&
           strstr(text, "uniform {2, 1, 1, 1}: ") && strstr(text, "uniform {1, 1, 2, 1}: "),
           "report: candidates, chosen marks, the shuffle, the path");
    /* Uniform: the same here (one distribution, the head sample-parallel). */
    plan_record *u = NULL;
    CHECK(plan_compute(&env, false, &u, "test"));
    expect(u->per[1].count == 1 && chosen(u, 0)[0] == 1 && chosen(u, 2)[0] == 1 &&
           fabs(u->predicted - r->predicted) <= 1e-12 * r->predicted,
           "uniform plan: input, conv and relu alike, same cost as the mixed one here");
    plan_record_free(u);
    plan_record_free(r);

    /* Batch 8: sample parallelism computes the same share without halos. */
    env.batch = 8;
    CHECK(plan_compute(&env, true, &r, "test"));
    int all_sample = 1;
    for (int i = 0; i < r->layers; i++) all_sample &= chosen(r, i)[0] == 2;
    expect(all_sample && r->predicted == r->sample_only,
           "batch 8 on 2 ranks: every layer {2, 1, 1, 1}");
    plan_record_free(r);

    pcnn_net_destroy(&net);

    /* Messages of a second each make halos and shuffles ruinous: sample
     * parallelism even at batch 1, until a memory cap below a whole
     * sample's activations forces the split (the pooled head fits). */
    pcnn_layer *l;
    CHECK(pcnn_net_create(&net));
    CHECK(pcnn_net_input(net, 8, 128, 128, &l));
    CHECK(pcnn_conv2d(net, l, 8, 3, 1, 1, 1, &l));
    CHECK(pcnn_relu(net, l, &l));
    CHECK(pcnn_global_avgpool(net, l, &l));
    CHECK(pcnn_flatten(net, l, &l));
    CHECK(pcnn_dense(net, l, 4, 1, &l));
    CHECK(pcnn_net_set_loss(net, l, PCNN_LOSS_MSE));
    synthetic_model(m, net, 1e-9);
    CHECK(pcnn_perfmodel_set_param(m, PCNN_PERF_ALPHA_S, 1.0));
    env = env_of(net, m, 2, 1);
    CHECK(plan_compute(&env, true, &r, "test"));
    expect(chosen(r, 1)[0] == 2, "slow messages at batch 1: sample parallelism");
    plan_record_free(r);
    env.memory_cap = 1048576.0;
    CHECK(plan_compute(&env, true, &r, "test"));
    expect(chosen(r, 0)[0] == 1 && chosen(r, 1)[0] == 1 && chosen(r, 3)[0] == 2,
           "a 1 MiB cap: input, convolution and ReLU split, the pooled head whole");
    plan_record_free(r);
    env.memory_cap = 1000;
    expect(plan_compute(&env, true, &r, "test") == PCNN_ERR_SHAPE &&
           strstr(pcnn_last_error(), "no distribution fits"),
           "memory cap below every candidate: SHAPE");
    CHECK(pcnn_perfmodel_set_param(m, PCNN_PERF_ALPHA_S, -1));
    pcnn_net_destroy(&net);
    return 0;
}

/* A residual block: conv-bn-relu-conv-bn + skip -> add -> relu, pooled head. */
static int test_residual(pcnn_perfmodel *m)
{
    pcnn_net *net;
    pcnn_layer *in, *a, *b;
    CHECK(pcnn_net_create(&net));
    CHECK(pcnn_net_input(net, 8, 64, 64, &in));
    CHECK(pcnn_conv2d(net, in, 8, 3, 1, 1, 1, &a));
    CHECK(pcnn_batchnorm(net, a, 1e-5f, 0.1f, &a));
    CHECK(pcnn_relu(net, a, &a));
    CHECK(pcnn_conv2d(net, a, 8, 3, 1, 1, 1, &b));
    CHECK(pcnn_batchnorm(net, b, 1e-5f, 0.1f, &b));
    CHECK(pcnn_add(net, b, in, &b));
    CHECK(pcnn_relu(net, b, &b));
    CHECK(pcnn_global_avgpool(net, b, &b));
    CHECK(pcnn_flatten(net, b, &b));
    CHECK(pcnn_dense(net, b, 4, 1, &b));
    CHECK(pcnn_net_set_loss(net, b, PCNN_LOSS_MSE));
    synthetic_model(m, net, 1e-9);
    plan_env env = env_of(net, m, 4, 1);
    plan_record *r = NULL;
    CHECK(plan_compute(&env, true, &r, "test"));
    /* The add inherits both inputs' distribution: the skip (the input)
     * and the main path agree. */
    expect(!memcmp(chosen(r, 6), chosen(r, 0), 4 * sizeof(int)) &&
           !memcmp(chosen(r, 6), chosen(r, 5), 4 * sizeof(int)) && chosen(r, 1)[0] == 1 &&
           r->method == 0,
           "residual block at batch 1 on 4 ranks: split, add's inputs alike, exact search");
    plan_record_free(r);
    /* What-if: 16 ranks (no communicator needed to plan), printed. */
    env = env_of(net, m, 16, 4);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK(plan_compute(&env, true, &r, "test"));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("residual block, 16 ranks, batch 4: %d variants planned in %.3f s\n", r->variants, dt);
    expect(chosen(r, 1)[0] <= 4 && dt < 10, "16 ranks at batch 4: groups of at most 4 samples");
    plan_record_free(r);
    pcnn_net_destroy(&net);
    return 0;
}

/* The public calls on one process: only {1, 1, 1, 1}; errors. */
static int test_public(pcnn_perfmodel *m)
{
    pcnn_net *net = conv_net(4, 16, 16, 3);
    char text[4096];
    size_t needed = 0;
    double predicted = -1;
    expect(pcnn_net_plan_report(net, text, sizeof text, &needed) == PCNN_ERR_INVALID_STATE,
           "report before a plan: INVALID_STATE");
    pcnn_perfmodel *empty = NULL;
    CHECK(pcnn_perfmodel_create(&empty));
    expect(pcnn_net_plan_distribution(net, empty, 4, NULL) == PCNN_ERR_INVALID_STATE &&
           strstr(pcnn_last_error(), "pcnn_net_plan_distribution: ") &&
           strstr(pcnn_last_error(), "no compute calibration"),
           "a model without compute estimates: INVALID_STATE naming the call");
    pcnn_perfmodel_destroy(&empty);
    expect(pcnn_net_plan_distribution(net, m, 0, NULL) == PCNN_ERR_INVALID_ARGUMENT,
           "batch 0: INVALID_ARGUMENT");
    synthetic_model(m, net, 1e-9);
    CHECK(pcnn_net_plan_distribution(net, m, 4, &predicted));
    CHECK(pcnn_net_plan_report(net, text, sizeof text, &needed));
    char small[16];
    size_t needed_small = 0;
    CHECK(pcnn_net_plan_report(net, small, sizeof small, &needed_small));
    expect(predicted > 0 && needed == strlen(text) && needed_small == needed &&
           strlen(small) == sizeof small - 1 && strstr(text, "* {1, 1, 1, 1}"),
           "one rank: plan {1, 1, 1, 1}, report snprintf-style");
    CHECK(pcnn_net_finalize(net, 4));
    expect(pcnn_net_plan_distribution(net, m, 4, NULL) == PCNN_ERR_INVALID_STATE,
           "after finalize: INVALID_STATE");
    pcnn_net_destroy(&net);
    return 0;
}

/* Links of beta seconds per byte and no latency, no measured curve. */
static void bandwidth_only(pcnn_perfmodel *m, double beta)
{
    for (int c = 0; c < PERF_COLLECTIVES; c++) {
        m->link.alpha[c] = 0;
        m->link.beta[c] = beta;
        m->link.curve[c].count = 0;
    }
}

/* PCNN_EXCHANGE_AUTO's prices (plan_exchange_cost) on a link of bandwidth
 * only, with nothing to update: on 2 ranks the FC gradient is cheaper than
 * all-to-all + all-gather exactly where eq. 4.8 counts fewer floats (F B/P +
 * K B < K F); only dense layers can take it; allreduce costs what the
 * model says of its collective. */
static int test_exchange_costs(pcnn_perfmodel *m)
{
    const perf_link saved = m->link;
    bandwidth_only(m, 1e-9);
    m->link.gamma = 1e-15;
    int agree = 0, cases = 0, fc_wins = 0;
    uint64_t seed = 3;
    for (int t = 0; t < 200; t++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        const int F = 2 * (1 + (int)((seed >> 33) % 256)), K = 1 + (int)((seed >> 20) % 64);
        const int B = 2 * (1 + (int)((seed >> 45) % 64));
        /* Away from the boundary, where rounding could decide. */
        const double fc = (double)F * B / 2 + (double)K * B, reduce = (double)K * F;
        if (fabs(fc - reduce) < 0.02 * reduce) continue;
        pcnn_net *net = NULL;
        pcnn_layer *l;
        if (pcnn_net_create(&net) || pcnn_net_input(net, F, 1, 1, &l) ||
            pcnn_flatten(net, l, &l) || pcnn_dense(net, l, K, 1, &l)) {
            printf("FAIL building a dense net: %s\n", pcnn_last_error());
            return 1;
        }
        plan_env env = env_of(net, m, 2, B);
        const double c_fc = plan_exchange_cost(&env, l, PCNN_EXCHANGE_FC_GRADIENT);
        const double c_a2a = plan_exchange_cost(&env, l, PCNN_EXCHANGE_ALLTOALL_ALLGATHER);
        agree += (c_fc < c_a2a) == exchange_fc_preferred(F, K, B, 2,
                                                          PCNN_EXCHANGE_ALLTOALL_ALLGATHER,
                                                          NULL, 0);
        cases++;
        fc_wins += c_fc < c_a2a;
        pcnn_net_destroy(&net);
    }
    char what[160];
    snprintf(what, sizeof what, "FC gradient vs all-to-all + all-gather priced as eq. 4.8 "
             "counts (%d of %d cases, %d for the FC gradient)", agree, cases, fc_wins);
    expect(cases > 100 && agree == cases && fc_wins > 10 && fc_wins < cases - 10, what);
    pcnn_net *net = conv_net(2, 8, 8, 3);
    if (!net) return 1;
    const layer_list *ll = net_layer_list(net);
    plan_env env = env_of(net, m, 4, 8);
    const pcnn_layer *conv = ll->items[1];
    const double ar = plan_exchange_cost(&env, conv, PCNN_EXCHANGE_ALLREDUCE);
    const double want = perf_coll_time(&m->link, PCNN_COLL_ALLREDUCE, 4,
                                       4.0 * (double)conv->num_params, 0, -1);
    expect(isinf(plan_exchange_cost(&env, conv, PCNN_EXCHANGE_FC_GRADIENT)) &&
               fabs(ar - want) <= 1e-12 * want && ar > 0,
           "a convolution cannot take the FC gradient; allreduce is its collective");
    pcnn_net_destroy(&net);
    m->link = saved;
    return 0;
}

/* The FC gradient a sample-parallel network takes for a dense layer where
 * eq. 4.8 prefers it (finalize's heuristics) is priced on the path that
 * splits no layer only; on a split path with one sample group the dense
 * layer runs on each rank's box and its weights go by columns, which
 * moves less still. */
static int test_sample_path_fc(pcnn_perfmodel *m)
{
    const perf_link saved = m->link;
    bandwidth_only(m, 1e-7);
    pcnn_net *net = conv_net(8, 16, 16, 3); /* dense: F = 2048, K = 4 */
    if (!net) return 1;
    synthetic_model(m, net, 1e-9);
    plan_env env = env_of(net, m, 2, 1);
    env.exchange = PCNN_EXCHANGE_ALLTOALL_ALLGATHER;
    const pcnn_layer *dense = env.layers->items[4];
    plan_candidate c = {.parts = {2, 1, 1, 1}};
    CHECK(plan_candidate_costs(&env, dense, &c, "test"));
    const double split_path = c.gradient;
    env.sample_path = true;
    CHECK(plan_candidate_costs(&env, dense, &c, "test"));
    const double fc = plan_exchange_cost(&env, dense, PCNN_EXCHANGE_FC_GRADIENT);
    const double a2a = plan_exchange_cost(&env, dense, PCNN_EXCHANGE_ALLTOALL_ALLGATHER);
    expect(fc < a2a && c.gradient == fc && split_path == a2a,
           "a dense layer's gradient: the FC gradient on the sample-parallel path (eq. 4.8 "
           "at batch 1), all-to-all + all-gather where the path may split");
    env.sample_path = false;
    plan_record *r = NULL;
    CHECK(plan_compute(&env, true, &r, "test"));
    const int *conv = chosen(r, 1);
    /* The split's dense layer runs on each rank's box and gathers only its
     * columns of W: the FC gradient's all-gather without its activations,
     * and less compute. */
    const double folded = plan_box_dense_saving(&env, dense, 1);
    expect(r->predicted < r->sample_only && conv[0] == 1 && conv[2] * conv[3] == 2 &&
               folded > a2a - perf_coll_time(&m->link, PCNN_COLL_ALLGATHER, 2,
                                             4.0 * 4 * 2048, 0, -1),
           "a split whose dense layer gathers its columns is planned over sample parallelism "
           "with the FC gradient");
    plan_record_free(r);
    pcnn_net_destroy(&net);
    m->link = saved;
    return 0;
}

/* A convolution of stride 1 and padding k/2 runs on its block in place:
 * its halo costs the border cells computed again (a 32nd of the layer on
 * blocks of 32 rows), no copy of the block; without padding it stages its
 * halo-extended input, a copy priced at the summation's speed. */
static int test_in_place_cost(pcnn_perfmodel *m)
{
    for (int pad = 1; pad >= 0; pad--) {
        pcnn_net *net = NULL;
        pcnn_layer *l;
        CHECK(pcnn_net_create(&net));
        CHECK(pcnn_net_input(net, 8, 64, 64, &l));
        CHECK(pcnn_conv2d(net, l, 8, 3, 1, pad, 1, &l));
        CHECK(pcnn_flatten(net, l, &l));
        CHECK(pcnn_dense(net, l, 4, 1, &l));
        CHECK(pcnn_net_set_loss(net, l, PCNN_LOSS_MSE));
        synthetic_model(m, net, 1e-9);
        plan_env env = env_of(net, m, 2, 1);
        env.halo_overlap = false;
        plan_candidate c = {.parts = {1, 1, 2, 1}};
        const double gamma = m->link.gamma;
        CHECK(plan_candidate_costs(&env, env.layers->items[1], &c, "test"));
        const double cheap = c.halo;
        m->link.gamma = gamma + 1e-6;
        CHECK(plan_candidate_costs(&env, env.layers->items[1], &c, "test"));
        m->link.gamma = gamma;
        const double copies = c.halo - cheap;
        char what[200];
        snprintf(what, sizeof what, "padding %d: the halo's cost %.3g s, %.3g s more with the "
                 "copies 1e-6 s per byte dearer (compute %.3g s)", pad, cheap, copies,
                 c.compute);
        if (pad)
            expect(copies == 0 && cheap >= c.compute / 32 && cheap < c.compute / 32 + 1e-3,
                   what);
        else
            expect(copies > 1e-6 * 4.0 * 8 * 33 * 64, what);
        pcnn_net_destroy(&net);
    }
    return 0;
}

int main(void)
{
    pcnn_perfmodel *m = NULL;
    CHECK(pcnn_perfmodel_create(&m));
    if (test_candidates(m) || test_shuffle(m) || test_plans(m) || test_residual(m) ||
        test_public(m) || test_exchange_costs(m) || test_box_dense(m) ||
        test_sample_path_fc(m) || test_in_place_cost(m))
        return 1;
    pcnn_perfmodel_destroy(&m);
    return expect_summary();
}
