/* The step simulator (spec C.1, C.7): one training step walked layer by
 * layer on two resources, the calling thread (computation, updates, waits)
 * and the link (collectives, one in flight at a time, in the order they
 * are posted: seed 002's greedy rule).  It follows the exchange's schedule
 * (parallel/exchange.c): a bucket's reduction is posted once its gradient
 * is complete during backward, arrived reductions are applied at the poll
 * after each layer, the rest at the end of the step, where the all-gathers
 * are posted in forward order and each is waited for before the bucket's
 * first layer runs forward in the next step.  Without overlap every
 * collective is posted and waited for in turn at the end of the step.
 *
 * The simulator knows no network: a caller (layer_cost.c) describes the
 * layers and buckets in seconds.  Steps are simulated until the all-gathers
 * carried from one step into the next repeat (steady state). */
#ifndef PCNN_PERF_SIM_H
#define PCNN_PERF_SIM_H

#include <stdbool.h>

/* One layer's cost at its local shape, seconds on the calling thread.  The
 * halo terms are where spatial parallelism plugs in (seed 002, spec A.10,
 * C.7; split_sim.c fills them from the layer's distribution, 0 for data
 * parallelism): the calling thread's time in the layer's halo exchanges
 * (what overlap with interior compute leaves of them, and the staging
 * copies) and in the shuffles (A.8) into it, per pass; and, for the
 * report, the exchanges' whole duration. */
typedef struct sim_layer {
    double fwd, bwd;
    double halo_fwd, halo_bwd;
    double shuffle_fwd, shuffle_bwd;
    double halo;       /* the halo exchanges' duration, both passes */
    double weight;     /* share of its bucket's update/comm/exposed (its parameters) */
} sim_layer;

/* One bucket of the exchange (layers first..last), seconds. */
typedef struct sim_bucket {
    int first_layer, last_layer;
    double fwd_comm;    /* overlap: posted after the first layer's forward (FC activations) */
    double bwd_comm;    /* overlap: posted before the first layer's backward (FC errors) */
    double reduce_comm; /* posted when the bucket's gradient is complete */
    double update;      /* calling thread, once fwd/bwd/reduce comms arrived */
    double gather_comm; /* posted at the end of the step (0: none) */
} sim_bucket;

typedef struct sim_input {
    int num_layers;           /* layer 0 is the input */
    const sim_layer *layers;
    int num_buckets;
    const sim_bucket *buckets; /* in layer order */
    bool overlap;             /* PCNN_OPT_OVERLAP */
    bool parallel;            /* false: no collectives at all (one rank) */
    double progress;          /* rate of the link while the thread computes:
                                 1 communication thread, about 0 nonblocking engine */
    double poll_work;         /* link seconds done at each poll between layers
                                 (nonblocking engine: MPI progresses only inside
                                 MPI calls; 0 for the thread) */
    double poll_cpu;          /* share of a poll's link seconds that is the
                                 thread's own time (0..1) */
    double pre;               /* before forward: batch agreement, input copy */
    double mid;               /* between forward and backward: loss, its agreement */
    double post;              /* after the end of the exchange: end agreement */
} sim_input;

/* Categories per layer, indexed as pcnn_time: forward, backward, update,
 * comm, exposed, (the step's index, unused), halo, exposed halo, shuffle. */
enum {
    SIM_FWD, SIM_BWD, SIM_UPDATE, SIM_COMM, SIM_EXPOSED, SIM_STEP_UNUSED,
    SIM_HALO, SIM_HALO_EXPOSED, SIM_SHUFFLE, SIM_KINDS
};

/* Simulate; per_layer (num_layers rows, may be NULL) receives the steady
 * step's seconds per category; returns the step's wall time. */
double sim_step(const sim_input *in, double (*per_layer)[SIM_KINDS]);

#endif
