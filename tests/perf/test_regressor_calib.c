/* The regressors on this machine's real layers (lib/perf/kernel_timing.h,
 * perf_regressors_calibrate): timing each kind of layer gives positive
 * times where the pass exists, refused shapes and bad arguments fail
 * clearly, and a small calibration within its budget yields models that
 * grow with the work.  Timings are never compared with tight bounds: the
 * machine may be shared. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "../common/expect.h"
#include "core/clock.h"
#include "perf/kernel_timing.h"
#include "perf/regressor.h"

static void test_layer_timing(void)
{
    perf_layer_times t;
    const perf_shape conv = {.batch = 4, .cin = 8, .cout = 8, .d = 1, .h = 16, .w = 16, .k = 3,
                             .stride = 1, .pad = 1};
    EXPECT(perf_time_layer(PERF_CONV2D_FWD, &conv, 1, 2, &t) == PCNN_OK, "conv2d: %s",
           pcnn_last_error());
    EXPECT(t.fwd > 0 && t.bwd > 0 && t.bwd_weights > 0 && t.fwd < 1 && t.bwd < 1,
           "conv2d times %g %g %g", t.fwd, t.bwd, t.bwd_weights);
    const perf_shape conv3 = {.batch = 2, .cin = 2, .cout = 4, .d = 6, .h = 6, .w = 6, .k = 3,
                              .stride = 1, .pad = 1};
    EXPECT(perf_time_layer(PERF_CONV3D_FWD, &conv3, 1, 2, &t) == PCNN_OK && t.fwd > 0 &&
               t.bwd > 0 && t.bwd_weights > 0,
           "conv3d: %s", pcnn_last_error());
    const perf_shape dense = {.batch = 8, .cin = 64, .cout = 32};
    EXPECT(perf_time_layer(PERF_DENSE_FWD, &dense, 1, 2, &t) == PCNN_OK && t.fwd > 0 &&
               t.bwd > 0 && t.bwd_weights > 0,
           "dense: %s", pcnn_last_error());
    const perf_shape act = {.batch = 4, .cin = 8, .d = 1, .h = 8, .w = 8, .fused_relu = 1};
    const perf_kind plain[] = {PERF_RELU_FWD, PERF_DROPOUT_FWD, PERF_ADD_FWD,
                               PERF_GLOBAL_AVGPOOL_FWD, PERF_BATCHNORM_FWD};
    for (int i = 0; i < 5; i++) {
        EXPECT(perf_time_layer(plain[i], &act, 1, 2, &t) == PCNN_OK && t.fwd > 0 && t.bwd > 0,
               "%s: %s", perf_kind_name(plain[i]), pcnn_last_error());
        const bool weighted = plain[i] == PERF_BATCHNORM_FWD;
        EXPECT(weighted ? t.bwd_weights > 0 : t.bwd_weights == 0, "%s: weights-only %g",
               perf_kind_name(plain[i]), t.bwd_weights);
    }
    const perf_shape pool = {.batch = 2, .cin = 3, .d = 1, .h = 8, .w = 8, .k = 2, .stride = 2,
                             .pool_max = 1};
    EXPECT(perf_time_layer(PERF_POOL2D_FWD, &pool, 1, 2, &t) == PCNN_OK && t.fwd > 0 &&
               t.bwd > 0,
           "pool2d: %s", pcnn_last_error());
    const perf_shape pool3 = {.batch = 2, .cin = 3, .d = 4, .h = 4, .w = 4, .k = 2, .stride = 2};
    EXPECT(perf_time_layer(PERF_POOL3D_FWD, &pool3, 1, 2, &t) == PCNN_OK && t.fwd > 0,
           "pool3d: %s", pcnn_last_error());

    /* Several batches on one network: each at most the network's batch. */
    perf_layer_times three[3];
    const int batches[3] = {4, 2, 1};
    EXPECT(perf_time_layer_batches(PERF_DENSE_FWD, &dense, 1, 2, batches, 3, three) == PCNN_OK &&
               three[0].fwd > 0 && three[2].fwd > 0,
           "three batches: %s", pcnn_last_error());
    const int too_big[1] = {9};
    EXPECT(perf_time_layer_batches(PERF_DENSE_FWD, &dense, 1, 2, too_big, 1, three) ==
                   PCNN_ERR_INVALID_ARGUMENT &&
               strstr(pcnn_last_error(), "batch 9") != NULL,
           "batch above the network's: %s", pcnn_last_error());

    /* Refused shapes and kinds. */
    perf_shape bad = pool;
    bad.k = 12;
    EXPECT(perf_time_layer(PERF_POOL2D_FWD, &bad, 1, 2, &t) == PCNN_ERR_SHAPE,
           "a window larger than the input: %s", pcnn_last_error());
    EXPECT(perf_time_layer(PERF_CONV2D_BWD, &conv, 1, 2, &t) == PCNN_ERR_INVALID_ARGUMENT &&
               strstr(pcnn_last_error(), "conv2d_bwd") != NULL,
           "a backward kind: %s", pcnn_last_error());
    EXPECT(perf_time_layer(PERF_RELU_FWD, &act, 0, 2, &t) == PCNN_ERR_INVALID_ARGUMENT,
           "zero threads");

    double small, large;
    const perf_shape u1 = {.params = 1000, .optimizer = PCNN_OPTIMIZER_ADAM};
    const perf_shape u2 = {.params = 1000000, .optimizer = PCNN_OPTIMIZER_ADAM};
    EXPECT(perf_time_update(&u1, 1, 3, &small) == PCNN_OK &&
               perf_time_update(&u2, 1, 3, &large) == PCNN_OK,
           "update: %s", pcnn_last_error());
    EXPECT(small > 0 && large > 5 * small, "Adam on 1e3 params %g s, on 1e6 %g s", small, large);
    const perf_shape u3 = {.params = 0, .optimizer = 0};
    EXPECT(perf_time_update(&u3, 1, 3, &small) == PCNN_ERR_SHAPE, "zero parameters");
}

static void test_calibrate(void)
{
    perf_calib_config c;
    perf_calib_defaults(&c);
    c.budget_seconds = 1.5;
    c.kinds = 1u << PERF_RELU_FWD | 1u << PERF_RELU_BWD | 1u << PERF_UPDATE;
    perf_regressors *set = NULL;
    const double t0 = clock_now();
    EXPECT(perf_regressors_calibrate(&c, &set) == PCNN_OK, "calibrate: %s", pcnn_last_error());
    const double took = clock_now() - t0;
    EXPECT(took < 3 * c.budget_seconds + 1, "calibration took %.2f s for a %.1f s budget", took,
           c.budget_seconds);
    if (!set) return;
    const perf_kind kinds[3] = {PERF_RELU_FWD, PERF_RELU_BWD, PERF_UPDATE};
    for (int i = 0; i < 3; i++) {
        double re;
        int train, test;
        EXPECT(perf_regressor_error(set, kinds[i], &re, &train, &test) == PCNN_OK,
               "%s not calibrated in %.1f s", perf_kind_name(kinds[i]), c.budget_seconds);
        EXPECT(isfinite(re) && re >= 0 && train >= 8 && test >= 1, "%s: error %g on %d / %d",
               perf_kind_name(kinds[i]), re, train, test);
    }
    EXPECT(!perf_regressor_has(set, PERF_CONV2D_FWD), "a kind not asked for was fitted");
    double small, large;
    const perf_shape a = {.batch = 1, .cin = 4, .d = 1, .h = 8, .w = 8};
    const perf_shape b = {.batch = 32, .cin = 64, .d = 1, .h = 32, .w = 32};
    EXPECT(perf_regressor_predict(set, PERF_RELU_FWD, &a, &small) == PCNN_OK &&
               perf_regressor_predict(set, PERF_RELU_FWD, &b, &large) == PCNN_OK,
           "predict relu: %s", pcnn_last_error());
    EXPECT(small > 0 && large > 10 * small, "relu on 256 elements %g s, on 2M %g s", small,
           large);
    perf_regressors_destroy(&set);

    c.budget_seconds = 0;
    EXPECT(perf_regressors_calibrate(&c, &set) == PCNN_ERR_INVALID_ARGUMENT &&
               strstr(pcnn_last_error(), "budget") != NULL && set == NULL,
           "zero budget: %s", pcnn_last_error());
    perf_calib_defaults(&c);
    c.kinds = 0;
    EXPECT(perf_regressors_calibrate(&c, &set) == PCNN_ERR_INVALID_ARGUMENT &&
               strstr(pcnn_last_error(), "kinds") != NULL,
           "no kinds: %s", pcnn_last_error());
}

int main(void)
{
    test_layer_timing();
    test_calibrate();
    if (failures) printf("%d failure(s)\n", failures);
    else printf("all calibration checks passed\n");
    return failures ? 1 : 0;
}
