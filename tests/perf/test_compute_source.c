/* Where the performance model takes a layer's computation from
 * (lib/perf/compute_source.c, regressor_source.c): pooling (2D, 3D) and 3D
 * convolution layers are asked of the regressors with exactly their
 * shapes (kernel, stride, padding, max or average, depth); inside the two
 * timed batches the network's own timings are used as measured; outside
 * them the timing at the nearest timed batch is scaled by the regressors'
 * ratio, and the timings-only source keeps the line. */
#define PCNN_EXPERIMENTAL
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/expect.h"
#include "core/rng.h"
#include "graph/graph.h"
#include "pcnn.h"
#include "perf/perf.h"
#include "perf/regressor.h"

#define CK(call) EXPECT((call) == PCNN_OK, "%s: %s", #call, pcnn_last_error())

static int close_rel(double a, double b, double tol) { return fabs(a - b) <= tol * fabs(b); }

/* A law the synthetic points follow: 2 us + 1 ns per input value. */
static double law(const perf_shape *s)
{
    return 2e-6 + 1e-9 * s->batch * s->cin * s->d * s->h * s->w;
}

/* Fit `kind` on 40 synthetic points of random valid shapes. */
static void fit_kind(perf_regressors **set, perf_kind kind, bool volume, bool conv, uint64_t seed)
{
    enum { N = 40 };
    perf_sample s[N];
    rng g = rng_make(seed, 4, 5, 6);
    for (int i = 0; i < N; i++) {
        perf_shape sh = {.batch = 1 + (int)rng_below(&g, 32), .cin = 1 + (int)rng_below(&g, 32),
                         .d = volume ? 4 + (int)rng_below(&g, 12) : 1,
                         .h = 4 + (int)rng_below(&g, 28), .w = 4 + (int)rng_below(&g, 28),
                         .k = 2 + (int)rng_below(&g, 2)};
        sh.stride = conv ? 1 : sh.k;
        sh.pad = conv ? sh.k / 2 : 0;
        sh.cout = conv ? 1 + (int)rng_below(&g, 16) : 0;
        sh.pool_max = (int)rng_below(&g, 2);
        s[i] = (perf_sample){.shape = sh, .seconds = law(&sh)};
    }
    perf_calib_config c;
    perf_calib_defaults(&c);
    c.steps = 300;
    CK(perf_regressors_fit(set, kind, s, N, &c));
}

static double predict_kind(perf_regressors *set, perf_kind kind, perf_shape sh)
{
    double t = NAN;
    CK(perf_regressor_predict(set, kind, &sh, &t));
    return t;
}

int main(void)
{
    pcnn_perfmodel *m = NULL;
    CK(pcnn_perfmodel_create(&m));
    perf_regressors *set = NULL;
    fit_kind(&set, PERF_POOL2D_FWD, false, false, 1);
    fit_kind(&set, PERF_POOL2D_BWD, false, false, 2);
    fit_kind(&set, PERF_POOL3D_FWD, true, false, 3);
    fit_kind(&set, PERF_POOL3D_BWD, true, false, 4);
    fit_kind(&set, PERF_CONV3D_FWD, true, true, 5);
    fit_kind(&set, PERF_CONV3D_BWD, true, true, 6);
    fit_kind(&set, PERF_CONV3D_BWD_WEIGHTS, true, true, 7);
    if (!set) return 1;
    m->regressors = set;

    /* A 2D network: input 3 x 20 x 20 -> max pool 2 -> average pool 3 (stride 1, pad 1). */
    pcnn_net *net2;
    pcnn_layer *in2, *mp, *ap;
    CK(pcnn_net_create(&net2));
    CK(pcnn_net_input(net2, 3, 20, 20, &in2));
    CK(pcnn_maxpool2d(net2, in2, 2, 2, 0, &mp));
    CK(pcnn_avgpool2d(net2, mp, 3, 1, 1, &ap));
    const perf_shape mp_shape = {.batch = 8, .cin = 3, .d = 1, .h = 20, .w = 20, .k = 2,
                                 .stride = 2, .pad = 0, .pool_max = 1};
    const perf_shape ap_shape = {.batch = 8, .cin = 3, .d = 1, .h = 10, .w = 10, .k = 3,
                                 .stride = 1, .pad = 1, .pool_max = 0};
    const double mp_f = perf_regressor_time(m, mp, 8, 0, false);
    const double ap_f = perf_regressor_time(m, ap, 8, 0, true);
    const double ap_b = perf_regressor_time(m, ap, 8, 1, true);
    EXPECT(mp_f == predict_kind(set, PERF_POOL2D_FWD, mp_shape),
           "max pool 2D: the regressor sees its shape (%g vs %g)", mp_f,
           predict_kind(set, PERF_POOL2D_FWD, mp_shape));
    EXPECT(ap_f == predict_kind(set, PERF_POOL2D_FWD, ap_shape), "average pool 2D forward");
    EXPECT(ap_b == predict_kind(set, PERF_POOL2D_BWD, ap_shape), "average pool 2D backward");
    EXPECT(close_rel(mp_f, law(&mp_shape), 0.25), "max pool estimate %g near the law %g", mp_f,
           law(&mp_shape));

    /* A 3D network: input 2 x 8 x 12 x 12 -> conv3d 4, k3 s1 p1 -> max pool 3D 2. */
    pcnn_net *net3;
    pcnn_layer *in3, *cv, *mp3;
    CK(pcnn_net_create(&net3));
    CK(pcnn_net_input3d(net3, 2, 8, 12, 12, &in3));
    CK(pcnn_conv3d(net3, in3, 4, 3, 1, 1, 1, &cv));
    CK(pcnn_maxpool3d(net3, cv, 2, 2, 0, &mp3));
    const perf_shape cv_shape = {.batch = 4, .cin = 2, .cout = 4, .d = 8, .h = 12, .w = 12,
                                 .k = 3, .stride = 1, .pad = 1};
    const perf_shape mp3_shape = {.batch = 4, .cin = 4, .d = 8, .h = 12, .w = 12, .k = 2,
                                  .stride = 2, .pad = 0, .pool_max = 1};
    EXPECT(perf_regressor_time(m, cv, 4, 0, false) == predict_kind(set, PERF_CONV3D_FWD, cv_shape),
           "conv3d forward");
    EXPECT(perf_regressor_time(m, cv, 4, 1, false) ==
               predict_kind(set, PERF_CONV3D_BWD_WEIGHTS, cv_shape),
           "conv3d backward without the input gradient");
    EXPECT(perf_regressor_time(m, cv, 4, 1, true) == predict_kind(set, PERF_CONV3D_BWD, cv_shape),
           "conv3d backward");
    EXPECT(perf_regressor_time(m, mp3, 4, 1, true) ==
               predict_kind(set, PERF_POOL3D_BWD, mp3_shape),
           "max pool 3D backward");

    /* The compute source.  A table for net2 timed at batches 8 and 16:
     * forward 1 ms + 0.1 ms per sample, backward 2 ms + 0.2 ms. */
    CK(pcnn_net_set_loss(net2, ap, PCNN_LOSS_MSE));
    CK(pcnn_net_finalize(net2, 16));
    const layer_list *ll = net_layer_list(net2);
    perf_layer *rows = calloc((size_t)ll->count, sizeof *rows);
    for (int i = 0; i < ll->count; i++) {
        rows[i].fwd[0] = 1e-3, rows[i].fwd[1] = 1e-4;
        rows[i].bwd_w[0] = 2e-3, rows[i].bwd_w[1] = 2e-4;
    }
    m->compute = (perf_compute){.num_layers = ll->count, .layers = rows,
                                .fingerprint = perf_fingerprint(ll), .threads = 1,
                                .batch_lo = 8, .batch_hi = 16};
    double t[3];
    CK(perf_layer_compute(m, mp, true, 12, t, "test"));
    EXPECT(close_rel(t[0], 1e-3 + 12e-4, 1e-12) && close_rel(t[1], 2e-3 + 24e-4, 1e-12) &&
               t[2] == 0,
           "inside the timed batches: the timings (%g, %g, %g)", t[0], t[1], t[2]);
    CK(perf_layer_compute(m, mp, true, 2, t, "test"));
    const double r2 = perf_regressor_time(m, mp, 2, 0, false);
    const double r8 = perf_regressor_time(m, mp, 8, 0, false);
    EXPECT(close_rel(t[0], (1e-3 + 8e-4) * r2 / r8, 1e-12),
           "below the timed batches: the timing at 8 scaled by the regressor (%g vs %g)", t[0],
           (1e-3 + 8e-4) * r2 / r8);
    CK(perf_layer_compute(m, mp, true, 64, t, "test"));
    const double r64 = perf_regressor_time(m, mp, 64, 0, false);
    const double r16 = perf_regressor_time(m, mp, 16, 0, false);
    EXPECT(close_rel(t[0], (1e-3 + 16e-4) * r64 / r16, 1e-12),
           "above the timed batches: the timing at 16 scaled (%g)", t[0]);
    m->knobs.source = 1;
    CK(perf_layer_compute(m, mp, true, 2, t, "test"));
    EXPECT(close_rel(t[0], 1e-3 + 2e-4, 1e-12), "timings only: the line (%g)", t[0]);
    /* Noisy timings whose line crosses zero above one sample (1 ms at 8,
     * 2.5 ms at 16): a batch of one costs its share of the time at 8. */
    const double saved[2] = {rows[mp->index].fwd[0], rows[mp->index].fwd[1]};
    rows[mp->index].fwd[0] = -0.5e-3, rows[mp->index].fwd[1] = 0.1875e-3;
    CK(perf_layer_compute(m, mp, true, 1, t, "test"));
    EXPECT(close_rel(t[0], 1e-3 / 8, 1e-12), "a line through zero: 1/8 of 1 ms (%g)", t[0]);
    CK(perf_layer_compute(m, mp, true, 12, t, "test"));
    EXPECT(close_rel(t[0], -0.5e-3 + 12 * 0.1875e-3, 1e-12), "and the line inside (%g)", t[0]);
    rows[mp->index].fwd[0] = saved[0], rows[mp->index].fwd[1] = saved[1];
    m->knobs.source = 0;
    CK(perf_layer_compute(m, mp, false, 2, t, "test"));
    EXPECT(t[0] == r2, "regressors alone: their estimate (%g vs %g)", t[0], r2);
    /* A kind no regressor of the set covers (dense) and no table: an error. */
    pcnn_net *net4;
    pcnn_layer *in4, *fc;
    CK(pcnn_net_create(&net4));
    CK(pcnn_net_input(net4, 3, 4, 4, &in4));
    CK(pcnn_dense(net4, in4, 5, 1, &fc));
    EXPECT(perf_layer_compute(m, fc, false, 2, t, "test") == PCNN_ERR_INVALID_STATE &&
               strstr(pcnn_last_error(), "no regressor") != NULL,
           "no source: %s", pcnn_last_error());

    /* Copies priced as ReLU's one read and one write per value: leaky
     * ReLU and flatten (whose shape is its input's). */
    fit_kind(&set, PERF_RELU_FWD, false, false, 8);
    fit_kind(&set, PERF_RELU_BWD, false, false, 9);
    pcnn_layer *lk, *fl;
    CK(pcnn_leaky_relu(net4, in4, 0.1f, &lk));
    CK(pcnn_flatten(net4, lk, &fl));
    const perf_shape copy_shape = {.batch = 2, .cin = 3, .cout = 3, .d = 1, .h = 4, .w = 4};
    const perf_shape flat_shape = {.batch = 2, .cin = 3, .cout = 48, .d = 1, .h = 4, .w = 4};
    EXPECT(perf_regressor_time(m, lk, 2, 0, true) == predict_kind(set, PERF_RELU_FWD, copy_shape) &&
               perf_regressor_time(m, fl, 2, 1, true) ==
                   predict_kind(set, PERF_RELU_BWD, flat_shape),
           "leaky ReLU and flatten: ReLU's regressor at their shapes");

    pcnn_net_destroy(&net2);
    pcnn_net_destroy(&net3);
    pcnn_net_destroy(&net4);
    pcnn_perfmodel_destroy(&m);
    if (!failures) printf("compute source: all checks passed\n");
    return failures ? 1 : 0;
}
