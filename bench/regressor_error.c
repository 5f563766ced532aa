/* Held-out error of the per-kernel regressors (lib/perf/regressor.h):
 * calibrate on this machine within a budget, then print per kind the
 * points timed, the held-out median |RE| and its target (issue 15: 10 %
 * for convolutions, 5 % for dense, pooling and element-wise layers), and
 * the calibration's wall time.
 *   regressor_error [BUDGET_S [THREADS [SEED [resnet|all [MAX_POINTS]]]]]
 * Defaults: 5 s, 1 thread, seed 1, resnet (the kinds a ResNet-20 runs),
 * 400 points per kind at most.
 * Exit status 0 even when a target is missed: a benchmark reports. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "perf/regressor.h"

static double target_of(perf_kind k)
{
    const perf_kind f = perf_kind_family(k);
    return f == PERF_CONV2D_FWD || f == PERF_CONV3D_FWD ? 0.10 : 0.05;
}

int main(int argc, char **argv)
{
    perf_calib_config c;
    perf_calib_defaults(&c);
    if (argc > 1) c.budget_seconds = atof(argv[1]);
    if (argc > 2) c.threads = atoi(argv[2]);
    if (argc > 3) c.seed = strtoull(argv[3], NULL, 10);
    if (argc > 4 && strcmp(argv[4], "all") == 0) c.kinds = perf_kinds_all();
    if (argc > 5) c.max_points = atoi(argv[5]);
    perf_regressors *set = NULL;
    const double t0 = clock_now();
    pcnn_status st = perf_regressors_calibrate(&c, &set);
    const double seconds = clock_now() - t0;
    if (st != PCNN_OK) {
        fprintf(stderr, "calibration failed: %s\n", pcnn_last_error());
        return 1;
    }
    printf("calibration: %.2f s (budget %.1f s, %d thread(s), seed %llu, at most %d points)\n",
           seconds, c.budget_seconds, c.threads, (unsigned long long)c.seed, c.max_points);
    printf("%-20s %7s %6s %10s %7s %s\n", "kind", "train", "test", "median|RE|", "target",
           "met");
    int met = 0, fitted = 0;
    for (int k = 0; k < PERF_KIND_COUNT; k++) {
        if (!(c.kinds >> k & 1u)) continue;
        double re;
        int train, test;
        if (perf_regressor_error(set, (perf_kind)k, &re, &train, &test) != PCNN_OK) {
            printf("%-20s (too few points in the budget)\n", perf_kind_name((perf_kind)k));
            continue;
        }
        const double target = target_of((perf_kind)k);
        fitted++;
        met += re <= target;
        printf("%-20s %7d %6d %9.1f%% %6.0f%% %s\n", perf_kind_name((perf_kind)k), train, test,
               100 * re, 100 * target, re <= target ? "yes" : "NO");
    }
    printf("{\"bench\":\"regressor_error\",\"budget_s\":%.3f,\"seconds\":%.3f,\"threads\":%d,"
           "\"fitted\":%d,\"met\":%d}\n",
           c.budget_seconds, seconds, c.threads, fitted, met);
    perf_regressors_destroy(&set);
    return 0;
}
