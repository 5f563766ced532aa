/* Finalize's measured choice of the layers' algorithms (layer_ops'
 * candidates): where a layer's rules were unsure, time each candidate's
 * forward and backward at the layer's local batch on its own buffers and
 * the network's workspace (all allocated by the phases before), sum the
 * timings over the ranks in one agreement per layer (rank order: the same
 * bits everywhere, within PCNN_OPT_TIMEOUT_MS), and switch every rank to
 * the pick of strategy/conv_measure.h.  A layer identical to one measured
 * before (kind, configuration, shapes, candidates) takes its result
 * without timing.  A rank times no layer that would overrun the budget
 * (past it by one forward + backward at most: the warm-up that shows it)
 * and no layer after, and says so; a layer that any rank skipped keeps its
 * rules' choice.  Only
 * data-parallel networks: a spatial network's twins run boxes of their
 * own and keep their rules. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "../strategy/conv_measure.h"
#include "net.h"
#include "spatial.h"

/* Timed runs after one warm-up; the least counts. */
#define MEASURE_RUNS 2

/* Values that are neither denormal nor zero, the same on every rank. */
static void fill(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)((i * 2654435761u >> 12) % 255) / 256.0f - 0.49f;
}

static bool same_layer(const pcnn_layer *a, const pcnn_layer *b)
{
    if (a->ops != b->ops || layer_is_input(a->inputs[0]) != layer_is_input(b->inputs[0]) ||
        memcmp(&a->out, &b->out, sizeof a->out) != 0 ||
        memcmp(&a->inputs[0]->out, &b->inputs[0]->out, sizeof a->out) != 0)
        return false;
    char da[96] = "", db[96] = "";
    if (a->ops->describe) a->ops->describe(a, da, sizeof da), b->ops->describe(b, db, sizeof db);
    int ca[CONV_MAX_CANDIDATES], cb[CONV_MAX_CANDIDATES];
    const int na = a->ops->candidates(a, ca), nb = b->ops->candidates(b, cb);
    return strcmp(da, db) == 0 && na == nb && memcmp(ca, cb, (size_t)na * sizeof *ca) == 0;
}

/* An earlier layer measured with the same shapes, or NULL. */
static const pcnn_layer *measured_twin(const pcnn_net *net, const pcnn_layer *l)
{
    for (int i = 1; i < l->index; i++) {
        const pcnn_layer *o = net->layers.items[i];
        if (o->decision.measured && same_layer(o, l)) return o;
    }
    return NULL;
}

/* ms of one forward + backward of algorithm a: the least of `runs` after
 * a warm-up, or the warm-up's own time when runs is 0. */
static double time_algorithm(pcnn_layer *l, int a, int runs, const run_ctx *ctx,
                             float *const dx[])
{
    l->ops->use_algorithm(l, a, NULL);
    double best = INFINITY;
    for (int r = 0; r <= runs; r++) {
        const double t0 = omp_get_wtime();
        l->ops->forward(l, ctx);
        l->ops->backward(l, ctx, dx);
        const double t = (omp_get_wtime() - t0) * 1e3;
        if ((r > 0 || runs == 0) && t < best) best = t; /* run 0 warms caches and pages */
    }
    return best;
}

/* values[0]: 1 when this rank skipped the layer; values[a]: ms of
 * algorithm a.  left_ms: what remains of the budget.  The first
 * candidate's warm-up sizes the rest: a layer whose candidates would not
 * fit once each is skipped, one that fits only once each runs once. */
static void time_layer(pcnn_net *net, pcnn_layer *l, double left_ms,
                       double values[CONV_ALGO_SLOTS])
{
    memset(values, 0, CONV_ALGO_SLOTS * sizeof *values);
    values[0] = 1.0;
    if (left_ms <= 0.0) return;
    int algos[CONV_MAX_CANDIDATES];
    const int n = l->ops->candidates(l, algos);
    pcnn_layer *in = l->inputs[0];
    fill(in->y, spatial_layer_floats(net, in));
    fill(l->dy, spatial_layer_floats(net, l));
    float *dx[LAYER_MAX_INPUTS] = {layer_is_input(in) ? NULL : in->dy};
    const run_ctx ctx = {.n = net->max_batch, .train = true, .threads = net->threads,
                         .seed = net->opt.seed, .workspace = net->workspace};
    const double first = time_algorithm(l, algos[0], 0, &ctx, dx);
    if (first * n > left_ms) return;
    const int runs = first * n * (1 + MEASURE_RUNS) <= left_ms ? MEASURE_RUNS : 0;
    values[algos[0]] = runs ? time_algorithm(l, algos[0], runs, &ctx, dx) : first;
    for (int i = 1; i < n; i++) values[algos[i]] = time_algorithm(l, algos[i], runs, &ctx, dx);
    values[0] = 0.0;
    conv_measure_adjust(values);
}

/* Switch l to algorithm a for good (-1: its rules' choice), and count
 * what that frees. */
static void switch_to(pcnn_net *net, pcnn_layer *l, int a, const char *why)
{
    const size_t had = l->buffer_bytes;
    l->ops->use_algorithm(l, a, why);
    net->memory_part[PCNN_MEMORY_WORKSPACE] -= had - l->buffer_bytes;
    net->memory_bytes -= had - l->buffer_bytes;
}

/* The pick from the ranks' mean timings, or the rules' choice when some
 * rank skipped the layer. */
static void settle(pcnn_net *net, pcnn_layer *l, const double mean[CONV_ALGO_SLOTS], bool timed)
{
    conv_choice rules = {0};
    int algos[CONV_MAX_CANDIDATES];
    rules.num_candidates = l->ops->candidates(l, algos);
    for (int i = 0; i < rules.num_candidates; i++) rules.candidates[i] = (conv_algorithm)algos[i];
    l->ops->use_algorithm(l, -1, NULL); /* to learn the rules' choice */
    rules.algorithm = (conv_algorithm)l->algorithm;
    if (!timed) {
        switch_to(net, l, -1, "");
        return;
    }
    const conv_algorithm pick = conv_measure_pick(&rules, mean);
    char why[64];
    conv_measure_reason(&rules, pick, mean, why, sizeof why);
    switch_to(net, l, (int)pick, why);
    l->decision.measured = true;
    memcpy(l->decision.measured_ms, mean, sizeof l->decision.measured_ms);
}

pcnn_status net_measure_layers(pcnn_net *net, const plan_ctx *p)
{
    if (!p->measure || net_is_spatial(net)) return PCNN_OK;
    const double start = omp_get_wtime();
    const int ranks = net->comm ? net->comm->size : 1;
    bool spent = false;
    for (int i = 1; i < net->layers.count; i++) {
        pcnn_layer *l = net->layers.items[i];
        int algos[CONV_MAX_CANDIDATES];
        if (!l->ops->candidates || l->ops->candidates(l, algos) == 0) continue;
        const pcnn_layer *seen = measured_twin(net, l);
        if (seen) { /* the same on every rank: no agreement */
            settle(net, l, seen->decision.measured_ms, true);
            continue;
        }
        /* Once one layer did not fit, none is tried: each try costs a run. */
        const double left = spent ? 0.0
                                  : conv_measure_budget_ms() - (omp_get_wtime() - start) * 1e3;
        double values[CONV_ALGO_SLOTS];
        time_layer(net, l, left, values);
        spent = spent || values[0] != 0.0;
        if (net->comm)
            TRY(net_agree_sum(net, AGREE_LATER, PCNN_OK, values, CONV_ALGO_SLOTS,
                              "pcnn_net_finalize"));
        for (int a = 1; a < CONV_ALGO_SLOTS; a++) values[a] /= ranks;
        settle(net, l, values, values[0] == 0.0);
    }
    return PCNN_OK;
}
