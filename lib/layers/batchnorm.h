/* Batch normalisation internals shared with the rest of the library
 * (checkpoints save and restore the running statistics). */
#ifndef PCNN_LAYERS_BATCHNORM_H
#define PCNN_LAYERS_BATCHNORM_H

#include <stddef.h>

#include "layer.h"

/* The running statistics of a batch-norm layer, one buffer of 2*C floats:
 * mean[C] then (unbiased) variance[C], read and writable.  *count (may be
 * NULL) receives 2*C.  NULL (and *count = 0) if l is not a batch-norm layer
 * or its network is not finalized yet. */
float *batchnorm_running_stats(pcnn_layer *l, size_t *count);

bool layer_is_batchnorm(const pcnn_layer *l);

#endif
