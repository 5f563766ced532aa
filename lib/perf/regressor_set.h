/* The inside of a regressor set (regressor.h), shared by its files:
 * fitting and prediction (regressor.c), calibration (regressor_calib.c)
 * and the byte format (regressor_io.c). */
#ifndef PCNN_PERF_REGRESSOR_SET_H
#define PCNN_PERF_REGRESSOR_SET_H

#include <stdbool.h>

#include "regressor.h"

/* perf_features, and the two terms of the kind's baseline: work[0] its
 * work (flops, window reads, elements or parameters) and work[1] the
 * bytes it moves at least. */
pcnn_status perf_kernel_work(perf_kind kind, const perf_shape *shape, int threads, double *out,
                             int *count, double work[2]);

/* Largest ensemble the format accepts (perf_calib_config.members). */
#define PERF_MAX_MEMBERS 8

/* One kind's model: a baseline t0 = c[0] + c[1] work + c[2] bytes (a
 * roofline-like line, non-negative, fitted on relative error), and an
 * ensemble of MLPs on the features plus log t0 that predicts log(t / t0)
 * (the members' mean), with its normalisation, architecture, weights and
 * the networks that evaluate them (built for one sample at a time). */
typedef struct perf_mlp {
    bool fitted;
    double baseline[3];
    int features, hidden_layers, hidden; /* features: the MLP's inputs, log t0 included */
    double mean[PERF_MAX_FEATURES + 1], scale[PERF_MAX_FEATURES + 1]; /* x' = (x - mean) / scale */
    double y_mean, y_scale;                                   /* log(t / t0) */
    double y_lo, y_hi; /* the range of log(t / t0) in training: an MLP far from its points
                          (few of them, a shape unlike any timed) is held to the
                          corrections it has seen rather than extrapolate */
    double median_re;
    int train_points, test_points;
    int members;       /* MLPs of one architecture from different seeds */
    size_t num_params; /* of one member */
    float *params;     /* members x num_params */
    pcnn_net *net[PERF_MAX_MEMBERS];
} perf_mlp;

struct perf_regressors {
    int threads;
    perf_mlp mlp[PERF_KIND_COUNT];
};

/* An empty set for `threads`. */
pcnn_status perf_set_create(int threads, perf_regressors **out);

/* Build m->net[i] of each member from m's architecture and load its part of
 * m->params into it. */
pcnn_status perf_mlp_build_predictor(perf_mlp *m);

/* The timing half of perf_regressors_calibrate: samples[k] (mem_alloc'd,
 * the caller frees each with mem_free) receives counts[k] measured points
 * of kind k, for every kind (empty for kinds not in c->kinds). */
pcnn_status perf_regressors_measure(const perf_calib_config *c, perf_sample *samples[],
                                    int counts[]);

/* INVALID_ARGUMENT naming the first field of c out of range. */
pcnn_status perf_calib_check(const perf_calib_config *c);

/* Largest architecture the format accepts. */
#define PERF_MAX_HIDDEN_LAYERS 8
#define PERF_MAX_HIDDEN 512

#endif
