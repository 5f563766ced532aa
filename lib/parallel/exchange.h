/* Gradient exchange: how the gradients of each step become identical
 * parameter updates on every rank (seed 001 chapter 4).  The graph's door
 * into the parallel room for training steps.
 *
 * Parameters and gradients live in flat arrays, layer after layer, so an
 * exchange works on contiguous ranges: a bucket is a run of consecutive
 * layers with the same strategy, fused up to PCNN_OPT_BUCKET_BYTES.  Each
 * bucket is handled by one strategy (exchange_strategy.h): allreduce,
 * all-to-all + all-gather, or the FC gradient.  A strategy decides which
 * part of the bucket this rank updates (its owned runs); the graph applies
 * the optimizer to exactly those runs, through exchange_setup.update.
 *
 * The exchange never sees pcnn_net: the graph describes what it needs in
 * an exchange_setup. */
#ifndef PCNN_PARALLEL_EXCHANGE_H
#define PCNN_PARALLEL_EXCHANGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../layers/layer.h"
#include "../profile/profile.h"
#include "pcnn.h"

typedef struct exchange exchange;

/* The columns of a dense layer's weights W (K x F, row after row) whose
 * gradient each rank computes alone, and completely: a dense layer run on
 * each rank's box of a split input where every rank holds every sample
 * (graph/spatial_dense.c).  Rank p's columns are the feature runs
 * [first[k], first[k] + len[k]) for k in [start[p], start[p + 1]); the
 * ranks' runs cover every column once, and each rank's gradient is zero
 * outside its own.  The K biases after W are summed as usual. */
typedef struct exchange_columns {
    int out, features;
    bool bias;
    int ranks;
    const int *start;         /* ranks + 1 */
    const int *first, *len;   /* start[ranks] runs */
} exchange_columns;

/* A layer with parameters, as the exchange sees it. */
typedef struct exchange_layer {
    int index;                /* position in the network (timing, traces) */
    size_t param_offset, num_params;
    pcnn_exchange kind;       /* decided before planning (strategy room) */
    const pcnn_layer *layer;  /* the dense layer, for PCNN_EXCHANGE_FC_GRADIENT */
    /* Set for a layer whose weight gradient is split by columns and whose
     * kind is all-to-all + all-gather (then its own bucket, exchanged by
     * exchange_columns.c; the exchange copies the tables); NULL otherwise. */
    const exchange_columns *columns;
} exchange_layer;

/* One run of a rank's optimizer state: state[state_offset, +count) belongs
 * to the flat parameters [param_index, +count). */
typedef struct owned_run {
    size_t state_offset, param_index, count;
} owned_run;

typedef void (*owned_run_fn)(void *arg, owned_run run);

/* The optimizer step on one owned run: params -= f(grads, state).  The
 * graph owns the learning rate and the step counter; grads may be a
 * strategy's own buffer (a summed slice, a packed FC slice). */
typedef void (*exchange_update_fn)(void *arg, float *params, const float *grads,
                                   size_t state_offset, size_t count);
/* The same on `runs` runs of len parameters, run j's gradients at grads +
 * j * stride, its parameters packed at params + j * len and its state at
 * state_offset + j * len (columns of a matrix). */
typedef void (*exchange_update_strided_fn)(void *arg, float *params, const float *grads,
                                           size_t state_offset, size_t len, size_t stride,
                                           size_t runs);

typedef struct exchange_setup {
    pcnn_comm *comm;           /* NULL, or one rank: local updates only */
    float *params, *grads;     /* the flat arrays */
    int num_layers;            /* of the network, for per-layer tables */
    const exchange_layer *layers; /* layers with parameters, in order */
    int num_param_layers;
    int max_batch;             /* this rank's largest batch */
    size_t bucket_bytes;
    bool overlap;
    int engine;                /* PCNN_OPT_ENGINE: 0 auto, 1 thread, 2 nonblocking */
    int comm_core;             /* -1: not pinned */
    const long *timeout_ms;    /* PCNN_OPT_TIMEOUT_MS, read at each wait */
    int threads;
    /* PCNN_OPT_PRECISION (a pcnn_precision).  bf16 on more than one rank:
     * gradients and gathered parameters travel as bfloat16 (sums in fp32
     * at the receiver), and the exchange keeps fp32 master weights of the
     * runs this rank updates (exchange_masters). */
    int precision;
    profile *profile;
    exchange_update_fn update;
    exchange_update_strided_fn update_strided;
    void *update_arg;
} exchange_setup;

/* Plan buckets, slices and buffers (local; no MPI call).  The setup's
 * arrays are copied. */
pcnn_status exchange_create(const exchange_setup *setup, exchange **out);

/* The name of exchange kind `kind`, its strategy's (parallel/exchange_*.c):
 * one spelling for the summary, the log and the planner's report.
 * by_columns: all-to-all as the columns strategy of box dense layers. */
const char *exchange_kind_name(pcnn_exchange kind, bool by_columns);
/* The engine: this rank's vote for the communication thread (local; true
 * when it would host it), counted by the caller over every rank in an
 * agreement; exchange_start then starts the engine every rank agreed on
 * (the thread only when all ranks voted for it) on a private duplicate of
 * the communicator (collective, within PCNN_OPT_TIMEOUT_MS); called at the
 * end of finalize. */
bool exchange_engine_vote(exchange *x);
pcnn_status exchange_start(exchange *x, int thread_votes);
/* Stop the engine (waiting for anything in flight; after the host's
 * MPI_Finalize, for nothing, and no MPI call is made) and free.  NULL: no-op. */
void exchange_destroy(exchange *x);

/* Giving up (graph/net_abort.c).  exchange_abort never blocks: collectives
 * in flight are abandoned and every later wait fails at once.
 * exchange_error: the first collective that failed or timed out, else OK.
 * exchange_abandon stops the engine without waiting; when collectives were
 * left in MPI's hands it frees only the communicator and returns true —
 * the exchange and the buffers MPI may still touch are kept for good —
 * else it returns false and exchange_destroy frees as usual.  NULL: no-op,
 * OK, false. */
void exchange_abort(exchange *x);
pcnn_status exchange_error(const exchange *x);
bool exchange_abandon(exchange *x);

/* Master weights (bf16 on the wire, more than one rank; else NULL and the
 * calls below do nothing).  The optimizer updates fp32 masters laid out as
 * this rank's optimizer state (exchange_owned_runs: state offset ->
 * flat parameter); the parameters the network computes with are written
 * from them: rounded to bf16 for buckets whose parameters are all-gathered
 * in bf16 (all-to-all + all-gather, the FC gradient), so that every rank
 * holds the same bits as the owner, exact elsewhere (allreduce, columns:
 * every rank or the owner computes them in fp32 from identical sums).
 * exchange_masters_from_params takes the masters from the parameters and
 * rounds those parameters (at creation, after the user or a checkpoint set
 * the parameters: the same values on every rank, so the same bits). */
float *exchange_masters(const exchange *x);
void exchange_masters_from_params(exchange *x);
/* Do the layer's parameters travel in bf16 (and hold bf16 values)? */
bool exchange_layer_rounded(const exchange *x, int layer);

/* What planning found. */
size_t exchange_state_count(const exchange *x);   /* optimizer state of this rank */
uint64_t exchange_bytes_per_step(const exchange *x); /* sent by this rank (§4.2) */
size_t exchange_memory_bytes(const exchange *x);
int exchange_active_engine(const exchange *x);     /* 0 none, 1 thread, 2 nonblocking */
const char *exchange_engine_reason(const exchange *x); /* "" on one rank */
/* Does the communication thread share its cores, pausing between tests? */
bool exchange_thread_pauses(const exchange *x);
int exchange_num_buckets(const exchange *x);
/* The exchange PCNN_EXCHANGE_* a layer's bucket uses, or -1 without parameters. */
int exchange_kind_of_layer(const exchange *x, int layer);
/* A layer exchanged by columns (exchange_columns, which reads only this
 * rank's columns of its gradient and writes none): this rank's columns of
 * its weights, which it updates packed, K rows of its columns' runs one
 * after the other (the tables' order); current for the passes of a step
 * (packed again from the parameters after exchange_flush).  NULL for any
 * other layer. */
const float *exchange_own_columns(exchange *x, int layer);
/* Visit rank's owned runs, bucket by bucket (state order).  Runs of
 * different ranks may overlap where the state is replicated. */
void exchange_owned_runs(const exchange *x, int rank, owned_run_fn fn, void *arg);
size_t exchange_state_count_of(const exchange *x, int rank);

/*
 * The hooks of one training step (seed 001 section 4.4), the same for every
 * strategy:
 *   exchange_begin_step     before the forward pass of a parallel step,
 *                           after the batch agreement (the split of the
 *                           batch is in the communicator).  The layers
 *                           before exchange_first_posting_layer may run
 *                           their forward pass before it: their hooks
 *                           then only wait for the previous step's
 *                           parameters.
 *   exchange_before_forward before a layer's forward pass: wait for that
 *                           layer's parameters from the previous step.
 *   exchange_after_forward  after a layer's forward pass (the FC gradient
 *                           posts its activations).
 *   exchange_before_backward, exchange_after_backward
 *                           around a layer's backward pass; once a
 *                           bucket's gradient is complete its reduction is
 *                           posted — in backward order.
 *   exchange_poll           between layers: update the slices whose
 *                           reduction has arrived.
 *   exchange_end_step       after the backward pass: finish reductions and
 *                           updates, post the all-gathers in forward order.
 *   exchange_flush          before anything else reads or writes the
 *                           parameters (a bucket split by columns brings
 *                           the other ranks' columns in only then).
 * Without overlap (PCNN_OPT_OVERLAP 0) exchange_end_step does everything,
 * each collective posted and waited in turn: the same arithmetic, so the
 * same bits.  Outside a step (compute_gradients, evaluation) the hooks do
 * nothing.  On one rank exchange_end_step just applies the updates.
 */
void exchange_begin_step(exchange *x);
bool exchange_step_active(const exchange *x);
/* The first layer whose forward pass posts a collective (the FC
 * gradient's activations, with overlap), or num_layers: none does. */
int exchange_first_posting_layer(const exchange *x);
pcnn_status exchange_before_forward(exchange *x, int layer);
void exchange_after_forward(exchange *x, int layer);
void exchange_before_backward(exchange *x, int layer);
void exchange_after_backward(exchange *x, int layer);
void exchange_poll(exchange *x);
pcnn_status exchange_end_step(exchange *x);
pcnn_status exchange_flush(exchange *x);

#endif
