/* The data-parallel exchange's choices, as pure rules the parallel room
 * calls: the exchange of a dense layer's gradient (seed 001 eq. 4.8), the
 * progress engine, and the grouping of layers into buckets.  What needs
 * MPI or the OS (ranks on the node, usable cores, the agreement between
 * ranks) stays with the caller. */
#ifndef PCNN_STRATEGY_EXCHANGE_CHOICE_H
#define PCNN_STRATEGY_EXCHANGE_CHOICE_H

#include <stdbool.h>
#include <stddef.h>

#include "pcnn.h"

/* Eq. 4.8 of seed 001: does the FC exchange (PCNN_EXCHANGE_FC_GRADIENT:
 * gather activations and errors, F*B/P + K*B floats) move fewer bytes than
 * reducing the K x F gradient?  B is the global batch.  Only under the
 * network default all-to-all + all-gather (network_default); the caller
 * asks for dense layers whose exchange the user did not set.  Fills
 * reason (if not NULL, snprintf-style) with the two byte counts. */
bool exchange_fc_preferred(int features, int outputs, int global_batch, int ranks,
                           pcnn_exchange network_default, char *reason, size_t size);

/* The progress engine of the exchange. */
typedef enum exchange_engine {
    EXCHANGE_ENGINE_NONBLOCKING, /* MPI_I* collectives, progressed by polling */
    EXCHANGE_ENGINE_THREAD,      /* blocking collectives on a communication thread */
} exchange_engine;

typedef struct engine_inputs {
    int requested;        /* PCNN_OPT_ENGINE: 0 automatic, 1 thread, 2 nonblocking */
    bool thread_multiple; /* MPI provides MPI_THREAD_MULTIPLE */
    int ranks_on_node;    /* ranks sharing this node's cores (>= 1) */
    int compute_threads;  /* each rank's compute threads */
    int usable_cores;     /* cores this rank may run on (its affinity mask) */
    bool partners_off_node; /* some ranks of the communicator are on other nodes */
} engine_inputs;

/* This rank's engine: the thread when asked for or, automatically, when
 * every rank on the node has a core for it (strategy_table's
 * engine_thread_cores), or when partners are on other nodes: data crosses
 * a network only while some thread drives MPI, so the nonblocking engine
 * would leave the link idle inside every layer; the thread then shares the
 * cores and pauses between tests (exchange_engine_shares_core).  Never
 * without MPI_THREAD_MULTIPLE.  Blocking and
 * nonblocking collectives do not match each other, so the caller agrees
 * across ranks (the thread only if every rank chose it) and fails when
 * the thread was requested but not chosen.  Fills reason (if not NULL). */
exchange_engine exchange_engine_choose(const engine_inputs *in, char *reason, size_t size);
/* Would a communication thread share its cores with compute threads (then
 * it must not busy-poll)? */
bool exchange_engine_shares_core(const engine_inputs *in);

/* A run of consecutive layers whose gradients travel as one message. */
typedef struct bucket_span {
    int first_layer, last_layer; /* layer indices; layers between without
                                    parameters belong to it too */
    size_t count;                /* parameters of its layers */
    pcnn_exchange kind;
} bucket_span;

/* Group layers 0..num_layers-1 (num_params[i] parameters each, exchanged
 * as kinds[i]) into buckets, in layer order: a layer joins the open bucket
 * when it has the same kind, is not an FC exchange nor `alone` (one bucket
 * per FC layer, and per layer exchanged by columns; alone may be NULL),
 * and keeps the bucket within bucket_bytes; layers without parameters are
 * skipped.  On one rank (!parallel) every bucket is an all-reduce and the
 * size does not limit it.  spans has room for num_layers buckets; returns
 * how many were made. */
int exchange_group_buckets(const size_t *num_params, const pcnn_exchange *kinds,
                           const bool *alone, int num_layers,
                           size_t bucket_bytes, bool parallel, bucket_span *spans);

#endif
