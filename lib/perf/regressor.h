/* Per-kernel regressors of the performance model (seed 004 §3.1, spec
 * C.2): for each kind of kernel a small MLP, trained on log-normalised
 * shape features against times measured on the real layers of this
 * library, predicts the kernel's seconds at shapes never timed.  The MLP
 * corrects a roofline-like baseline (overhead + work + bytes, fitted
 * first), which carries the trend over orders of magnitude and keeps the
 * extrapolation sane; the MLP learns the rest (algorithm switches, cache
 * effects, threading).
 *
 * The MLPs are libpcnn networks themselves (pcnn_dense + pcnn_relu, an
 * L1 or MSE loss, Adam), built through the public API on one process.  A regressor
 * set is calibrated for one thread count (perf_regressors_threads); a
 * caller predicting for another thread count calibrates another set.
 *
 * What is timed, per kind: one measurement is the fastest of a few
 * repetitions after a warm-up (load from other processes only adds time),
 * timed again when the calibrating thread was descheduled meanwhile or the
 * passes are so short that the clock's jitter shows (regressor_calib.c),
 * read from the network's own timing breakdown, so that each time is what
 * pcnn_net_time reports for such a layer on an idle machine; convolutions
 * run the algorithm conv_decide picks for the shape, or the one forced by
 * perf_shape.algorithm:
 *
 *   *_FWD           the layer's forward pass
 *   *_BWD           its backward pass, input gradient included (every layer
 *                   but the network's first)
 *   *_BWD_WEIGHTS   its backward pass without the input gradient (a
 *                   weighted layer fed directly by the network's input)
 *   PERF_UPDATE     the optimizer on `params` parameters (optim_update)
 *
 * Not thread-safe: a set is used by one thread at a time (prediction runs
 * the MLP as a network). */
#ifndef PCNN_PERF_REGRESSOR_H
#define PCNN_PERF_REGRESSOR_H

#include <stddef.h>
#include <stdint.h>

#include "pcnn.h"

typedef enum perf_kind {
    PERF_CONV2D_FWD = 0,
    PERF_CONV2D_BWD,
    PERF_CONV2D_BWD_WEIGHTS,
    PERF_CONV3D_FWD,
    PERF_CONV3D_BWD,
    PERF_CONV3D_BWD_WEIGHTS,
    PERF_DENSE_FWD,
    PERF_DENSE_BWD,
    PERF_DENSE_BWD_WEIGHTS,
    PERF_POOL2D_FWD,        /* max or average: perf_shape.pool_max */
    PERF_POOL2D_BWD,
    PERF_POOL3D_FWD,
    PERF_POOL3D_BWD,
    PERF_GLOBAL_AVGPOOL_FWD,
    PERF_GLOBAL_AVGPOOL_BWD,
    PERF_RELU_FWD,
    PERF_RELU_BWD,
    PERF_BATCHNORM_FWD,     /* fused_relu: a batch norm computing the ReLU after it */
    PERF_BATCHNORM_BWD,
    PERF_ADD_FWD,           /* residual add; fused_relu as for batch norm */
    PERF_ADD_BWD,
    PERF_DROPOUT_FWD,
    PERF_DROPOUT_BWD,
    PERF_UPDATE,            /* optimizer step over `params` parameters */
    PERF_KIND_COUNT
} perf_kind;

/* One kernel invocation's shape.  Each kind reads only its fields:
 *   conv2d / conv3d:  batch, cin, cout, d (1 for 2D), h, w of the INPUT,
 *                     k, stride, pad (cubic / square), algorithm
 *   dense:            batch, cin (input features), cout (output features)
 *   pool2d / pool3d:  batch, cin (channels), d, h, w of the input, k, stride,
 *                     pad, pool_max (1 max, 0 average)
 *   global avgpool, relu, dropout:
 *                     batch, cin, d, h, w (of the input = output)
 *   batchnorm, add:   batch, cin, d, h, w, fused_relu (0 or 1)
 *   update:           params, optimizer
 * Unread fields are ignored (zero them).  batch = samples on this rank. */
typedef struct perf_shape {
    int batch;
    int cin, cout;
    int d, h, w;
    int k, stride, pad;
    int algorithm;        /* PCNN_OPT_CONV_ALGORITHM value: 0 auto, 1 GEMM, 2 direct, 3 taps */
    int pool_max;
    int fused_relu;
    int optimizer;        /* pcnn_optimizer */
    int64_t params;
} perf_shape;

typedef struct perf_regressors perf_regressors;

/* "conv2d_fwd", ...; NULL for an unknown kind. */
const char *perf_kind_name(perf_kind kind);

/* The *_FWD kind whose timed layer also gives `kind` (PERF_CONV2D_FWD for
 * PERF_CONV2D_BWD, ...); PERF_UPDATE and *_FWD kinds give themselves. */
perf_kind perf_kind_family(perf_kind kind);

/* The MLP's input features of `shape` for `kind`, before normalisation,
 * already in log space: log(1 + x) of each field the kind reads, then
 * derived terms: the log of the kind's work (flops, window reads, elements
 * or parameters) and of the bytes it moves; for convolutions the im2col
 * size and the kernel each pass runs: for 2D ones the algorithm
 * conv_decide picks for `threads` (one-hot GEMM / direct / taps), per pass
 * (forward, dx, dW) whether it runs the grid or the channel-lane direct
 * kernel, and the share of the direct grid that is output pixels; for 3D
 * ones whether each pass runs direct (the layer's rule, lib/layers/conv3d.c),
 * the share of the vector lanes the output and input rows fill, and of the
 * output-channel blocks that are real channels.  Where a kernel's time
 * steps rather than grows smoothly, the step: for dense layers the share of
 * 16-float vectors batch, inputs and outputs fill and whether the forward
 * runs one sgemv per sample (lib/kernels/gemm.c); for pooling whether 2D
 * max pooling runs its own 2x2 stride-2 kernel, and its row lengths; for
 * element-wise layers the plane and the vectors it fills.  The model adds
 * log t0 of its baseline (regressor_set.h).
 * Writes at most PERF_MAX_FEATURES values to out and their number to
 * *count.  Errors: INVALID_ARGUMENT (unknown kind, NULL), SHAPE (a
 * field the kind reads is out of range: sizes < 1, a window larger than
 * the padded input, params < 1, ...). */
#define PERF_MAX_FEATURES 24
pcnn_status perf_features(perf_kind kind, const perf_shape *shape, int threads, double *out,
                          int *count);

/* How calibration draws, times and fits.  perf_calib_defaults fills the
 * defaults; the caller then changes what it needs. */
typedef struct perf_calib_config {
    double budget_seconds;     /* whole calibration (timing + fitting), > 0 */
    int threads;               /* compute threads of the timed kernels, >= 1 */
    uint64_t seed;             /* shape draws and MLP initialisation */
    uint32_t kinds;            /* bit (1u << kind) per kind to calibrate */
    int max_points;            /* points per kind at most (the budget may stop earlier) */
    int min_points;            /* fewer than this: the kind is left uncalibrated */
    int repetitions;           /* timed runs per shape (the fastest counts), >= 1 */
    double holdout;            /* fraction held out for the error, in [0.05, 0.5]: whole
                                  groups (one shape at several batches), never a shape the
                                  fit saw at another batch */
    int hidden_layers, hidden; /* MLP: hidden_layers x (FC hidden + ReLU) -> FC 1 */
    int members;               /* MLPs per kind, each from its own initialisation and
                                  minibatch order, their predictions (log) averaged:
                                  in 1 .. 8 */
    int steps, batch;          /* Adam steps on minibatches of `batch` points */
    double learning_rate;      /* Adam's at the start, cosine-decayed to 1 % of it */
    double weight_decay;       /* L2 on the MLP's weights, >= 0 */
    int loss;                  /* PCNN_LOSS_L1 (default) or PCNN_LOSS_MSE (seed 004's).  L1
                                  on log time fits the median, which is what the held-out
                                  error measures; MSE fits the mean, pulled by the few shapes
                                  that cache or alignment effects slow down */
} perf_calib_config;

void perf_calib_defaults(perf_calib_config *c);

/* Bits of the kinds a residual network like ResNet-20 runs (2D convolution,
 * batch norm and add with fused ReLU, ReLU, global average pooling, dense,
 * update). */
uint32_t perf_kinds_resnet(void);
uint32_t perf_kinds_all(void);

/* Calibrate a new set on this process: for each kind in c->kinds draw
 * random shapes (log-uniform, seeded), time the real layers, fit one MLP
 * per kind, and record its held-out median |RE|.  Three quarters of the
 * budget time layers, a quarter is left for fitting; each layer family
 * gets a share by weight (convolutions the most), the family furthest
 * behind its share is timed next, and each drawn shape gives points at its
 * batch and at 1/2, 1/4 and 1/8 of it; a fit short of time trains fewer
 * members, then fewer steps (at least 200), so the result depends on the
 * machine's speed as well as on the seed.  Kinds the budget leaves
 * with fewer than c->min_points points stay uncalibrated (predict then
 * fails for them).  Local, no communication.  *out is destroyed with
 * perf_regressors_destroy.  Errors: INVALID_ARGUMENT (bad config),
 * OUT_OF_MEMORY, and whatever building a timed network reports. */
pcnn_status perf_regressors_calibrate(const perf_calib_config *c, perf_regressors **out);

/* One measured point for perf_regressors_fit. */
typedef struct perf_sample {
    perf_shape shape;
    double seconds;            /* > 0, finite */
} perf_sample;

/* Fit (or refit) the MLP of `kind` in `set` on given samples (measured
 * elsewhere, or synthetic in tests), holding out c->holdout of them for the
 * error; deterministic given c->seed and the samples.  Creates the set
 * when *set is NULL (with c->threads).  Errors: INVALID_ARGUMENT (NaN,
 * non-positive or infinite seconds, fewer than c->min_points samples, bad
 * kind), SHAPE (a sample's shape, as perf_features). */
pcnn_status perf_regressors_fit(perf_regressors **set, perf_kind kind, const perf_sample *samples,
                                int count, const perf_calib_config *c);

void perf_regressors_destroy(perf_regressors **set);

/* Thread count the set was calibrated for. */
int perf_regressors_threads(const perf_regressors *set);

/* True when `kind` has a fitted MLP. */
int perf_regressor_has(const perf_regressors *set, perf_kind kind);

/* Predicted seconds of one invocation.  Errors: INVALID_ARGUMENT (NULL,
 * unknown kind), INVALID_STATE (kind not calibrated), SHAPE (as
 * perf_features). */
pcnn_status perf_regressor_predict(perf_regressors *set, perf_kind kind, const perf_shape *shape,
                                   double *seconds);

/* Held-out median |RE| of the kind (0.05 = 5 %), and the number of points
 * it was trained on and held out.  INVALID_STATE when not calibrated. */
pcnn_status perf_regressor_error(const perf_regressors *set, perf_kind kind, double *median_re,
                                 int *train_points, int *test_points);

/* Serialisation: little-endian, versioned ("PCNNREG1", format version,
 * the set's threads, per kind the sizes, members, error, baseline, the range
 * of corrections, normalisation and each member's weights), FNV-1a checksum
 * at the end.  perf_regressors_save with buf NULL
 * (size 0) only reports *needed; otherwise buf must hold *needed bytes
 * (SHAPE if size is smaller).  perf_regressors_load rebuilds a set that
 * predicts bit for bit like the saved one.  Errors of load: INVALID_ARGUMENT
 * (NULL), CORRUPT with a message naming what is wrong (truncated, bad
 * magic, checksum mismatch, sizes out of range), UNSUPPORTED (another
 * format version: sets of versions 1 and 2 were fitted on other features
 * or stored otherwise, and are refused rather than read as nonsense;
 * calibrate again). */
pcnn_status perf_regressors_save(const perf_regressors *set, void *buf, size_t size,
                                 size_t *needed);
pcnn_status perf_regressors_load(const void *buf, size_t size, perf_regressors **out);

#endif
