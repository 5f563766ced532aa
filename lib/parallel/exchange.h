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

#include "engine.h"
#include "pcnn.h"

typedef struct fc_exchange fc_exchange; /* fc_exchange.c */

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

    /* Schedule state of the current step. */
    request reduce;         /* allreduce, or the all-to-all of the gradients */
    request gather;         /* all-gather of the updated parameters */
    request errors;         /* FC exchange: all-gather of the output errors */
    bool reduce_posted, updated, gather_pending;
    fc_exchange *fc;        /* PCNN_EXCHANGE_FC_GRADIENT: its buffers */
} bucket;

typedef struct exchange_plan {
    bucket *buckets;
    int num_buckets;
    int *bucket_of_layer;   /* -1 for layers without parameters */
    MPI_Comm comm;          /* this network's own duplicate, when has_comm */
    bool has_comm;          /* (a zeroed MPI_Comm is not MPI_COMM_NULL in MPICH) */
    engine *engine;         /* NULL on one rank */
    bool overlap;
    bool step_active;       /* a parallel training step is in progress */
    double lr;              /* learning rate of the step in progress */
    size_t state_count;     /* optimizer state elements this rank keeps */
    uint64_t bytes_per_step;
    size_t memory_bytes;
} exchange_plan;

/* Plan buckets, slices and receive buffers for the network's communicator
 * (or one local bucket without one).  Sets plan->state_count for the
 * optimizer state the caller then allocates. */
pcnn_status exchange_plan_build(pcnn_net *net, exchange_plan *plan);
void exchange_plan_free(exchange_plan *plan);

/*
 * The schedule of one training step (seed 001 section 4.4):
 *   exchange_begin        before the forward pass of a training step: fixes
 *                         the step's learning rate and batch split.
 *   exchange_layer_forward_done, exchange_layer_backward_start
 *                         the FC exchange's activation all-to-all (after
 *                         the dense layer's forward) and error all-gather
 *                         (when its output gradient is ready).
 *   exchange_layer_done   after each layer's backward: once a bucket's
 *                         gradient is complete, post its reduction (the
 *                         all-to-all, or the allreduce) — in backward order.
 *   exchange_poll         between layers: sum and update the slices whose
 *                         reduction has arrived, while back-propagation
 *                         goes on.
 *   exchange_end          after the backward pass: finish the remaining
 *                         reductions and updates, then post the all-gathers
 *                         in forward order; advances the step counter.
 *   exchange_wait_layer   before a layer's next forward pass: wait for that
 *                         layer's parameters only.
 *   exchange_flush        before anything else reads the parameters.
 * Without overlap (PCNN_OPT_OVERLAP 0) exchange_end does everything, each
 * collective posted and waited in turn: the same arithmetic, so the same
 * bits.  On one rank exchange_end just runs the optimizer.
 */
void exchange_begin(pcnn_net *net);
void exchange_layer_forward_done(pcnn_net *net, int layer);
void exchange_layer_backward_start(pcnn_net *net, int layer);
void exchange_layer_done(pcnn_net *net, int layer);
void exchange_poll(pcnn_net *net);
pcnn_status exchange_end(pcnn_net *net);
pcnn_status exchange_wait_layer(pcnn_net *net, int layer);
pcnn_status exchange_flush(pcnn_net *net);

/* Start the progress engine and the network's exchange communicator
 * (collective); called at the end of finalize. */
pcnn_status exchange_start(pcnn_net *net);

#endif
