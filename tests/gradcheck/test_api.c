/* Determinism through the public API: a network with every stochastic or
 * parallel ingredient (seeded init, dropout masks, batch statistics,
 * threaded GEMMs and loops) trained for a few steps must give
 *   - bitwise-identical parameters, losses and predictions for the same
 *     seed and thread count (two networks built identically),
 *   - different parameters for a different seed,
 *   - for 1 and 2 threads, each deterministic; across thread counts the
 *     results only need to agree to float32 rounding (reported, loosely
 *     checked).
 * Also: compute_gradients / compute_loss leave parameters, the step
 * counter and batch-norm running statistics alone (pcnn.h: "without
 * updating anything", "no update of any state"); and the batch norm and
 * the residual add that compute the ReLU after them (the planner's fusion)
 * train bit for bit like the same layers followed by separate leaky ReLUs
 * of slope 0, which are never fused.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pcnn.h"
#include "tutil.h"

#define N 8
#define C 3
#define H 12
#define W 10
#define CLASSES 5
#define STEPS 4

typedef struct run_out {
    float *params;
    size_t np;
    float losses[STEPS];
    float pred[N * CLASSES];
    bool ok;
} run_out;

static float g_x[STEPS][N * C * H * W];
static int32_t g_lab[STEPS][N];

static void make_data(void)
{
    trng r = {42};
    for (int s = 0; s < STEPS; s++) {
        for (int i = 0; i < N * C * H * W; i++) g_x[s][i] = trng_range(&r, -1, 1);
        for (int i = 0; i < N; i++) g_lab[s][i] = trng_below(&r, CLASSES);
    }
}

/* conv -> bn -> relu -> (dropout -> conv) + residual add -> relu -> maxpool
 * -> 1x1 conv -> dense.  The conv before the batch norm has no bias: its gradient
 * would be zero up to rounding, which Adam would blow up to lr-sized steps
 * and make the 1-vs-2-threads comparison meaningless. */
static run_out train_relu(double seed, int threads, pcnn_optimizer opt, bool unfused)
{
    run_out o = {0};
    pcnn_net *net = NULL;
    pcnn_layer *in, *a, *b, *c, *d, *e, *f, *r, *g, *h, *y;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, C, H, W, &in));
    CK(pcnn_conv2d(net, in, 8, 3, 1, 1, 0, &a));
    CK(pcnn_batchnorm(net, a, 1e-5f, 0.1f, &b));
    if (unfused)
        CK(pcnn_leaky_relu(net, b, 0.0f, &c));
    else
        CK(pcnn_relu(net, b, &c));
    CK(pcnn_dropout(net, c, 0.25f, &d));
    CK(pcnn_conv2d(net, d, 8, 3, 1, 1, 0, &e));
    CK(pcnn_add(net, c, e, &f));
    if (unfused)
        CK(pcnn_leaky_relu(net, f, 0.0f, &r));
    else
        CK(pcnn_relu(net, f, &r));
    CK(pcnn_maxpool2d(net, r, 2, 2, 0, &g));
    CK(pcnn_conv2d(net, g, 4, 1, 1, 0, 1, &h));
    CK(pcnn_dense(net, h, CLASSES, 1, &y));
    CK(pcnn_layer_set_init(a, PCNN_INIT_GLOROT_UNIFORM));
    CK(pcnn_net_set_loss(net, y, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_optimizer(net, opt));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, seed));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, threads));
    CK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 0.01));
    CK(pcnn_net_set_option(net, PCNN_OPT_WEIGHT_DECAY, 1e-3));
    CK(pcnn_net_finalize(net, N));
    CK(pcnn_net_num_params(net, &o.np));
    o.params = calloc(o.np, sizeof(float));
    if (!o.params) goto fail;
    for (int s = 0; s < STEPS; s++)
        CK(pcnn_net_train_step(net, N, g_x[s], g_lab[s], NULL, &o.losses[s]));
    CK(pcnn_net_get_params(net, o.params, o.np));
    CK(pcnn_net_predict(net, N, g_x[0], o.pred, N * CLASSES));
    o.ok = true;
fail:
    pcnn_net_destroy(&net);
    return o;
}

static run_out train(double seed, int threads, pcnn_optimizer opt)
{
    return train_relu(seed, threads, opt, false);
}

static bool same_bits(const run_out *a, const run_out *b)
{
    return a->np == b->np && !memcmp(a->params, b->params, a->np * sizeof(float)) &&
           !memcmp(a->losses, b->losses, sizeof a->losses) &&
           !memcmp(a->pred, b->pred, sizeof a->pred);
}

static double max_rel_diff(const float *a, const float *b, size_t n)
{
    double scale = 0, m = 0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(b[i]));
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return scale > 0 ? m / scale : m;
}

static int failures = 0;

static void report(const char *name, bool ok, const char *detail)
{
    printf("%-62s %s%s%s\n", name, ok ? "PASS" : "FAIL", detail[0] ? "  " : "", detail);
    if (!ok) failures++;
}

/* compute_loss and compute_gradients change no parameter, no step counter
 * and no batch-norm running statistic (predict output unchanged). */
static void check_no_side_effects(bool gradients)
{
    bool ok = false;
    pcnn_net *net = NULL;
    pcnn_layer *in, *a, *b, *c, *y;
    float *p0 = NULL, *p1 = NULL, l1 = 0, l2 = 0;
    float pred0[N * CLASSES], pred1[N * CLASSES];
    size_t np = 0;
    double step = -1;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, C, H, W, &in));
    CK(pcnn_conv2d(net, in, 4, 3, 1, 1, 1, &a));
    CK(pcnn_batchnorm(net, a, 1e-5f, 0.1f, &b));
    CK(pcnn_dropout(net, b, 0.5f, &c));
    CK(pcnn_dense(net, c, CLASSES, 1, &y));
    CK(pcnn_net_set_loss(net, y, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_finalize(net, N));
    CK(pcnn_net_num_params(net, &np));
    p0 = calloc(np, sizeof *p0);
    p1 = calloc(np, sizeof *p1);
    if (!p0 || !p1) goto fail;
    /* One real step first, so the optimizer and statistics are not fresh. */
    CK(pcnn_net_train_step(net, N, g_x[1], g_lab[1], NULL, NULL));
    CK(pcnn_net_get_params(net, p0, np));
    CK(pcnn_net_predict(net, N, g_x[0], pred0, N * CLASSES));
    if (gradients) {
        CK(pcnn_net_compute_gradients(net, N, g_x[0], g_lab[0], NULL, &l1));
        CK(pcnn_net_compute_gradients(net, N, g_x[0], g_lab[0], NULL, &l2));
    } else {
        CK(pcnn_net_compute_loss(net, N, g_x[0], g_lab[0], NULL, &l1));
        CK(pcnn_net_compute_loss(net, N, g_x[0], g_lab[0], NULL, &l2));
    }
    CK(pcnn_net_get_params(net, p1, np));
    CK(pcnn_net_predict(net, N, g_x[0], pred1, N * CLASSES));
    CK(pcnn_net_get_option(net, PCNN_OPT_STEP, &step));
    bool same_p = !memcmp(p0, p1, np * sizeof *p0);
    bool same_pred = !memcmp(pred0, pred1, sizeof pred0);
    ok = same_p && same_pred && step == 1 && l1 == l2;
    if (!ok)
        printf("  step %g (want 1), repeated losses %.9g %.9g, params %s, predict %s "
               "(max rel diff %.3g: running statistics moved?)\n",
               step, (double)l1, (double)l2, same_p ? "unchanged" : "changed",
               same_pred ? "unchanged" : "changed", max_rel_diff(pred1, pred0, N * CLASSES));
fail:
    report(gradients ? "compute_gradients: no side effects (params, step, bn stats)"
                     : "compute_loss: no side effects (params, step, bn stats)",
           ok, "");
    free(p0);
    free(p1);
    pcnn_net_destroy(&net);
}

int main(void)
{
    make_data();
    char buf[160];
    run_out t1[2], t2[2], other;
    const pcnn_optimizer opts[] = {PCNN_OPTIMIZER_ADAM, PCNN_OPTIMIZER_MOMENTUM};
    const char *names[] = {"adam", "momentum"};
    for (int k = 0; k < 2; k++) {
        for (int rep = 0; rep < 2; rep++) {
            t1[rep] = train(7, 1, opts[k]);
            t2[rep] = train(7, 2, opts[k]);
        }
        other = train(8, 1, opts[k]);
        run_out unfused = train_relu(7, 2, opts[k], true);
        bool built = t1[0].ok && t1[1].ok && t2[0].ok && t2[1].ok && other.ok && unfused.ok;
        snprintf(buf, sizeof buf, "%s: bn + ReLU, add + ReLU fused = unfused, bitwise",
                 names[k]);
        report(buf, built && same_bits(&t2[0], &unfused), "");
        free(unfused.params);
        snprintf(buf, sizeof buf, "%s: same seed, 1 thread: bitwise identical", names[k]);
        report(buf, built && same_bits(&t1[0], &t1[1]), "");
        snprintf(buf, sizeof buf, "%s: same seed, 2 threads: bitwise identical", names[k]);
        report(buf, built && same_bits(&t2[0], &t2[1]), "");
        if (built) {
            double dp = max_rel_diff(other.params, t1[0].params, t1[0].np);
            snprintf(buf, sizeof buf, "max rel param diff %.3g", dp);
            char name[100];
            snprintf(name, sizeof name, "%s: seed 7 vs seed 8: parameters differ", names[k]);
            report(name, dp > 1e-3, buf);
            double d12 = max_rel_diff(t2[0].params, t1[0].params, t1[0].np);
            double l12 = max_rel_diff(t2[0].losses, t1[0].losses, STEPS);
            double p12 = max_rel_diff(t2[0].pred, t1[0].pred, N * CLASSES);
            snprintf(buf, sizeof buf, "params %.3g, losses %.3g, predictions %.3g", d12, l12, p12);
            snprintf(name, sizeof name, "%s: 1 vs 2 threads agree (rel 1e-4)", names[k]);
            report(name, d12 < 1e-4 && l12 < 1e-4 && p12 < 1e-4, buf);
            bool finite = true;
            for (int s = 0; s < STEPS; s++) finite = finite && isfinite(t1[0].losses[s]);
            snprintf(buf, sizeof buf, "losses %.5g %.5g %.5g %.5g", t1[0].losses[0],
                     t1[0].losses[1], t1[0].losses[2], t1[0].losses[3]);
            snprintf(name, sizeof name, "%s: finite losses", names[k]);
            report(name, finite, buf);
        } else {
            report("networks could not be trained", false, "");
        }
        for (int rep = 0; rep < 2; rep++) {
            free(t1[rep].params);
            free(t2[rep].params);
        }
        free(other.params);
    }
    check_no_side_effects(false);
    check_no_side_effects(true);
    printf("test_api: %d failure(s)\n", failures);
    return failures ? 1 : 0;
}
