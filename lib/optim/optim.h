/* Optimizers: element-wise parameter updates over a range of the flat
 * parameter array.  Element-wise is what lets the exchange strategies shard
 * the update: a rank that owns a slice of a gradient updates only that
 * slice and keeps optimizer state (momentum, Adam moments) for it alone. */
#ifndef PCNN_OPTIM_H
#define PCNN_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "pcnn.h"

typedef struct optim_hyper {
    double momentum;
    double beta1, beta2, epsilon;
} optim_hyper;

/* State for `count` owned parameters: m (momentum or Adam's first moment)
 * and v (Adam's second moment); NULL where the optimizer needs none. */
typedef struct optim_state {
    float *m, *v;
    size_t count;
} optim_state;

pcnn_status optim_state_alloc(optim_state *s, pcnn_optimizer kind, size_t count);
void optim_state_free(optim_state *s);
size_t optim_state_bytes(const optim_state *s);

/* One update of params[0, count) from grads, with state m/v for the same
 * elements (from an optim_state, offset to match).  t is the 1-based step
 * number (Adam's bias correction).  Weight decay is L2, added to the
 * gradient, as in torch.optim. */
void optim_update(pcnn_optimizer kind, const optim_hyper *h, double lr, double weight_decay,
                  uint64_t t, float *params, const float *grads, float *m, float *v,
                  size_t count, int threads);

/* The same on `runs` runs of len parameters, run j's gradients at grads +
 * j * stride and its parameters and state packed at params, m and v + j *
 * len: one call for many short runs (a layer's weights split by columns,
 * updated in a packed copy of them), the same bits as one optim_update per
 * run. */
void optim_update_strided(pcnn_optimizer kind, const optim_hyper *h, double lr,
                          double weight_decay, uint64_t t, float *params, const float *grads,
                          float *m, float *v, size_t len, size_t stride, size_t runs, int threads);

#endif
