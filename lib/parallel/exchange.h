/* Gradient exchange: how the gradients of each step become identical
 * parameter updates on every rank (seed 001 chapter 4).
 *
 * Parameters and gradients live in flat arrays, layer after layer, so an
 * exchange works on contiguous ranges: a bucket is a run of consecutive
 * layers with the same strategy, fused up to PCNN_OPT_BUCKET_BYTES.  With
 * the all-to-all + all-gather strategy each bucket is cut into P slices,
 * rank r owning slice r: it sums the P pieces of that slice, updates it with
 * optimizer state kept for that slice only, and all-gathers the result. */
#ifndef PCNN_PARALLEL_EXCHANGE_H
#define PCNN_PARALLEL_EXCHANGE_H

#include <stddef.h>
#include <stdint.h>

#include "pcnn.h"

typedef struct bucket {
    size_t lo, count;       /* range of the flat parameter array */
    pcnn_exchange kind;
    int first_layer, last_layer;
    /* All-to-all + all-gather: rank p's slice is [displs[p], +counts[p])
     * relative to lo; recv holds the P pieces of this rank's slice. */
    int *counts, *displs, *recv_counts, *recv_displs;
    float *recv;
    size_t owned_lo, owned_count; /* this rank's slice, relative to lo */
    size_t state_offset;    /* of the owned elements in the optimizer state */
} bucket;

typedef struct exchange_plan {
    bucket *buckets;
    int num_buckets;
    size_t state_count;     /* optimizer state elements this rank keeps */
    uint64_t bytes_per_step;
    size_t memory_bytes;
} exchange_plan;

/* Plan buckets, slices and receive buffers for the network's communicator
 * (or one local bucket without one).  Sets plan->state_count for the
 * optimizer state the caller then allocates. */
pcnn_status exchange_plan_build(pcnn_net *net, exchange_plan *plan);
void exchange_plan_free(exchange_plan *plan);

/* After the backward pass: combine the gradients across ranks, update the
 * parameters (each rank its owned slices), and distribute them.  On
 * return, every rank holds the same parameters.  Collective. */
pcnn_status exchange_step(pcnn_net *net);

#endif
