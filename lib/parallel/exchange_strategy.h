/* Inside the exchange: buckets, and the interface every exchange strategy
 * implements.  The schedule (exchange.c) only calls these hooks; what moves
 * over the wire and which part of the parameters a rank updates is the
 * strategy's business.  A new strategy (a halo exchange, a shuffle between
 * distributions) is one more exchange_ops table: no branch in the step.
 * Private to the parallel room. */
#ifndef PCNN_PARALLEL_EXCHANGE_STRATEGY_H
#define PCNN_PARALLEL_EXCHANGE_STRATEGY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "exchange.h"
#include "parallel.h"

typedef struct bucket bucket;

typedef struct exchange_ops {
    const char *name;
    /* Slices, buffers and per-step bytes (local).  Sets b->state_count. */
    pcnn_status (*plan)(exchange *x, bucket *b);
    void (*free)(bucket *b);
    /* Describe the bucket's collectives once the communicator exists. */
    void (*prepare)(exchange *x, bucket *b);
    /* Optional hooks of the step; NULL: nothing to do. */
    void (*begin_step)(exchange *x, bucket *b);
    void (*after_forward)(exchange *x, bucket *b);   /* overlap only */
    void (*before_backward)(exchange *x, bucket *b);
    /* Post the reductions not yet posted this step. */
    void (*post_reduce)(exchange *x, bucket *b);
    /* Optional: the part of the update that waits for no reduction (a
     * rank's own complete gradient), run once the bucket's gradient is
     * complete and its reductions posted, at the same point of every
     * rank's step; sets b->local_updated.  A large update left for
     * whenever the reductions arrive lands at different points on
     * different ranks, and every rank then waits for the others' at the
     * next halo exchange. */
    void (*update_local)(exchange *x, bucket *b);
    /* The reductions arrived: update this rank's runs (through the
     * setup's update hook), those of update_local too unless it ran. */
    void (*update)(exchange *x, bucket *b);
    /* Post the all-gather of the updated parameters; NULL: none needed. */
    void (*post_gather)(exchange *x, bucket *b);
    /* The all-gather arrived; NULL: nothing to unpack. */
    void (*unpack)(exchange *x, bucket *b);
    /* Before anything else reads the parameters (exchange_flush), after
     * the all-gather arrived; NULL: nothing to do. */
    void (*settle)(exchange *x, bucket *b);
    /* Visit rank's runs of optimizer state (relative to b->state_offset). */
    void (*owned_runs)(const exchange *x, const bucket *b, int rank, owned_run_fn fn, void *arg);
} exchange_ops;

extern const exchange_ops exchange_allreduce_ops;
extern const exchange_ops exchange_alltoall_ops;
extern const exchange_ops exchange_fc_ops;
extern const exchange_ops exchange_columns_ops;

#define BUCKET_MAX_REDUCE 2

struct bucket {
    const exchange_ops *ops;
    pcnn_exchange kind;
    size_t lo, count;          /* range of the flat parameter array */
    int first_layer, last_layer;
    size_t state_offset;       /* of this rank's runs in the optimizer state */
    size_t state_count;
    /* Parameters all-gathered in bf16: the update writes them rounded
     * from the masters (exchange_masters). */
    bool round_params;

    /* Requests of a step: the reductions (all must arrive before the
     * update) and the all-gather of the updated parameters. */
    request reduce[BUCKET_MAX_REDUCE];
    int num_reduce;
    request gather;
    /* Schedule state of the current step. */
    bool reduce_posted, updated, gather_pending, local_updated;

    void *impl;                /* the strategy's own state */
};

struct exchange {
    exchange_setup setup;      /* arrays below are private copies */
    exchange_layer *layers;
    pcnn_comm *comm;           /* NULL: one process */
    int ranks, rank;
    bucket *buckets;
    int num_buckets;
    int *bucket_of_layer;      /* -1 for layers without parameters */
    MPI_Comm mpi;              /* this exchange's own duplicate, when has_mpi */
    bool has_mpi;              /* (a zeroed MPI_Comm is not MPI_COMM_NULL in MPICH) */
    bool dup_given_up;         /* MPI may still write `mpi`: x is never freed */
    engine *engine;            /* NULL on one rank */
    char engine_why[160];      /* the engine choice's reason */
    bool vote_thread;          /* this rank would host the communication thread */
    bool thread_shares_core;   /* ... on cores its compute threads use */
    bool step_active;          /* a parallel training step is in progress */
    bool bf16;                 /* bf16 on the wire (precision bf16, ranks > 1) */
    float *master;             /* state_count fp32 masters when bf16, else NULL */
    size_t state_count;
    uint64_t bytes_per_step;
    size_t memory_bytes;
};

/* For strategies: the layer record of a bucket's first layer, timing, and
 * applying the optimizer to one run of this rank's state. */
const exchange_layer *bucket_layer(const exchange *x, const bucket *b);
void exchange_apply_update(exchange *x, const bucket *b, float *params, const float *grads,
                           size_t state_offset, size_t count);
void exchange_apply_update_strided(exchange *x, const bucket *b, float *params,
                                   const float *grads, size_t state_offset, size_t len,
                                   size_t stride, size_t runs);
/* Rank p's slice of a bucket cut into P slices (decomp_share): slice p is
 * [displs[p], +counts[p]) of the bucket; recv_* describe the P pieces of
 * this rank's slice, one after the other in rank order (all-to-all). */
typedef struct slices {
    int *counts, *displs, *recv_counts, *recv_displs;
    size_t owned_lo, owned_count;
} slices;
pcnn_status slices_plan(const exchange *x, const bucket *b, slices *s);
void slices_free(slices *s);

/* A columns bucket's own columns, packed (exchange_columns.c). */
float *exchange_columns_own(exchange *x, bucket *b);

#endif
