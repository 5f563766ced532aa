/* Timing the library's real layers at one shape, for the regressors
 * (regressor.h): a network of the input and the layer (with the ReLU it
 * fuses, for batch norm and add) is built through the public API on one
 * process, and its own timing breakdown is read per run, so each time is
 * what pcnn_net_time reports for such a layer in a real network. */
#ifndef PCNN_PERF_KERNEL_TIMING_H
#define PCNN_PERF_KERNEL_TIMING_H

#include "regressor.h"

/* Seconds of one layer's passes, the fastest of `repetitions` runs after
 * one warm-up.  bwd_weights is the backward pass without the input gradient
 * (a train step of a layer fed by the input), timed only for layers with
 * weights (0 otherwise). */
typedef struct perf_layer_times {
    double fwd, bwd, bwd_weights;
} perf_layer_times;

/* Time the layer of `fwd_kind` (a *_FWD kind) at `shape` with `threads`
 * compute threads.  Errors: what building or running the network reports
 * (SHAPE for a shape the layer refuses), INVALID_ARGUMENT for a kind that
 * is not a *_FWD kind. */
pcnn_status perf_time_layer(perf_kind fwd_kind, const perf_shape *shape, int threads,
                            int repetitions, perf_layer_times *out);

/* The same for several batch sizes on one network finalized for
 * shape->batch (each in [1, shape->batch]): out[i] for batches[i]. */
pcnn_status perf_time_layer_batches(perf_kind fwd_kind, const perf_shape *shape, int threads,
                                    int repetitions, const int *batches, int count,
                                    perf_layer_times *out);

/* Seconds (fastest of `repetitions`) of optim_update over shape->params parameters with
 * shape->optimizer. */
pcnn_status perf_time_update(const perf_shape *shape, int threads, int repetitions,
                             double *seconds);

#endif
