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

/* Synchronised batch norm (pcnn.h section 9).  batchnorm_set_sync records
 * the layer's choice (-1: the network's default, 0, 1) before finalize;
 * func names the public function in messages.  After finalize's decide:
 * batchnorm_synchronised says whether the layer reduces its statistics
 * across ranks in a parallel training step (false for other layers), and
 * batchnorm_sync_doubles how many doubles each rank then contributes to
 * its gather (0 when it does not). */
pcnn_status batchnorm_set_sync(pcnn_layer *l, int sync, const char *func);
bool batchnorm_synchronised(const pcnn_layer *l);
size_t batchnorm_sync_doubles(const pcnn_layer *l);

#endif
