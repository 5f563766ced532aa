/* The network graph: layers in order of addition (a topological order of
 * the DAG), the flat parameter/gradient arrays, the planned buffers, and
 * the options.  The graph room offers the rooms above it net_forward /
 * net_backward (training and inference drivers). */
#ifndef PCNN_GRAPH_NET_H
#define PCNN_GRAPH_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/error.h"
#include "../layers/layer.h"
#include "../optim/optim.h"
#include "../parallel/exchange.h"
#include "../parallel/parallel.h"
#include "../profile/profile.h"
#include "graph.h"

typedef struct net_options {
    double learning_rate;
    double weight_decay;
    optim_hyper hyper;    /* momentum, Adam betas and epsilon */
    uint64_t seed;
    long warmup_steps;
    long decay_every_steps;
    double decay_factor;
    int threads;          /* 0: omp_get_max_threads() at finalize */
    bool keep_im2col;
    int conv_algorithm; /* PCNN_OPT_CONV_ALGORITHM */
    bool check_numerics;
    size_t bucket_bytes;
    pcnn_exchange exchange; /* default of layers that did not choose */
    bool overlap;
    int engine;           /* 0 auto, 1 thread, 2 nonblocking */
    int comm_core;        /* -1: not pinned */
    long timeout_ms;      /* 0: none */
    size_t trace_events;
    bool sync_batchnorm;  /* default of batch norms that did not choose */
    bool bn_scope;        /* PCNN_OPT_BN_SCOPE: batch norm over the spatial group */
    bool halo_overlap;    /* PCNN_OPT_HALO_OVERLAP */
    bool spatial_fallback; /* PCNN_OPT_SPATIAL_FALLBACK */
    int halo_schedule;    /* PCNN_OPT_HALO_SCHEDULE */
    int plan_max_spatial; /* PCNN_OPT_PLAN_MAX_SPATIAL (0: the communicator's size) */
    int plan_spatial_dims; /* PCNN_OPT_PLAN_SPATIAL_DIMS */
    bool plan_mixed;      /* PCNN_OPT_PLAN_MIXED */
    double memory_limit_mib; /* PCNN_OPT_MEMORY_LIMIT_MIB (0: none) */
    int precision;        /* PCNN_OPT_PRECISION: a pcnn_precision */
    size_t conv3d_col_budget; /* not an option: tests set it (plan_ctx) */
} net_options;

struct pcnn_net {
    layer_list layers;    /* frozen once finalized */

    pcnn_layer *output;
    pcnn_loss loss;
    bool has_loss;
    pcnn_optimizer optimizer;
    net_options opt;

    bool finalized;
    bool plan_failed;     /* a finalize failed: the network must be rebuilt */
    bool aborted;         /* pcnn_net_abort: only destroy and the error query */
    pcnn_status remote_failure; /* an agreement showed another rank's network failed */
    bool lent;            /* planned buffers were handed to a given-up collective */
    int max_batch;
    int threads;          /* resolved thread count */
    uint64_t step;        /* completed training steps */

    /* Flat arrays of all trainable parameters, layer by layer. */
    size_t num_params;
    float *params, *grads;
    optim_state optim;    /* for this rank's owned slices only */

    /* Data parallelism: the communicator (NULL: one process), the
     * exchange, and where this rank's samples start in the batch. */
    pcnn_comm *comm;
    exchange *exchange;
    double step_lr;       /* learning rate of the step in progress */
    long sample_base;
    int global_max_batch; /* as given to finalize; max_batch is this rank's share */
    reducer *reducer;     /* synchronised batch norms' reductions (NULL: none) */

    /* Planned buffers. */
    float *workspace;     /* shared scratch (see layer_ops.workspace_floats) */
    float **grad_slots;   /* dy buffers shared by layers with disjoint lifetimes */
    int num_grad_slots;
    double *loss_scratch; /* per-sample losses or per-channel partial sums */
    float *stats_saved;   /* running statistics before a step ahead (step_ahead.c) */
    float *stage_x;       /* one batch staged from a dataset (NCHW) */
    int32_t *stage_labels;
    float *stage_targets;
    size_t memory_bytes;  /* the sum of memory_part (net_count_memory) */
    size_t memory_part[PCNN_MEMORY_PARTS];

    int last_backward_n;  /* batch size of the last backward (input grad) */
    struct spatial *spatial; /* distributions (graph/spatial.h); NULL: none set */
    profile profile;      /* timing breakdown and trace */

    /* The host's callbacks (graph/callbacks.c). */
    pcnn_step_callback step_callback;
    void *step_user;
    pcnn_log_callback log_callback;
    void *log_user;
    bool stopped_early;   /* the last epoch ended early at a callback's request */
    bool failure_logged;  /* the network's failure was told to the log callback */

    /* The strategy planner's record (plan room), released with the network. */
    void *plan_record;
    void (*plan_record_release)(void *);
    net_planner planner;  /* a client's planner (graph.h); ctx NULL: none */
};

/* Count bytes the plan allocated toward the total and one part of it. */
static inline void net_count_memory(pcnn_net *net, pcnn_memory_part part, size_t bytes)
{
    net->memory_bytes += bytes;
    net->memory_part[part] += bytes;
}

/* The network a layer belongs to: its list is that network's `layers`. */
static inline pcnn_net *net_of_layer(const pcnn_layer *l)
{
    return (pcnn_net *)(void *)((char *)l->list - offsetof(pcnn_net, layers));
}

/* Drivers (graph/run.c).  net_load_input converts n NCHW samples into the
 * input layer; net_forward runs every layer (update_stats: batch norm
 * updates its running statistics); net_loss returns the loss of the local
 * samples normalised by norm_samples and, with want_grad, seeds the
 * output's dy; net_backward runs every layer backwards, computing the input
 * gradient only when asked. */
void net_load_input(pcnn_net *net, int n, const float *x);
pcnn_status net_forward(pcnn_net *net, int n, bool train, bool update_stats);
double net_loss(pcnn_net *net, int n, const int32_t *labels, const float *targets,
                double norm_samples, bool want_grad);
void net_backward(pcnn_net *net, int n, bool want_input_grad);
/* The training forward pass (statistics updated) of layers [from, to). */
pcnn_status net_forward_layers(pcnn_net *net, int n, int from, int to);

/* Release everything finalize allocated, after stopping the exchange (also
 * rolls back a failed finalize). */
void net_release_plan(pcnn_net *net);
/* Finalize's phase after the buffers: time the layers whose rules were
 * unsure and switch them to the fastest, agreed across ranks
 * (graph/conv_measure.c). */
pcnn_status net_measure_layers(pcnn_net *net, const plan_ctx *p);

/* Finalize's check that every rank built the same network with the same
 * settings (graph/fingerprint.c): PCNN_ERR_MISMATCH naming the option or
 * the layer that differs and its value on rank 0 and on the first rank
 * that differs.  Collective, timed. */
pcnn_status net_check_same_network(pcnn_net *net, const char *func);

/* Common validation for public calls: a batch of n samples with the
 * targets its loss needs (checked for range and, when enabled, NaN/Inf).
 * func names the public function in messages.  net_check_ready: graph.h. */
pcnn_status net_check_batch(const pcnn_net *net, const char *func, int n, const float *x,
                            const int32_t *labels, const float *targets, bool need_targets);
/* The same for an input of in_count floats (a rank's box of the batch). */
pcnn_status net_check_batch_sized(const pcnn_net *net, const char *func, int n, const float *x,
                                  size_t in_count, const int32_t *labels, const float *targets,
                                  bool need_targets);

/* Giving up on collectives (graph/net_abort.c; the agreements the rooms
 * above use too are in graph.h).
 *   net_check_alive      every public call but destroy, abort and the error
 *                        query: INVALID_STATE once the network was aborted,
 *                        once one of its collectives (or one on its
 *                        communicator) failed or timed out, once an
 *                        agreement showed another rank's network failed,
 *                        or once the host finalised MPI.
 *   net_async_status     that failure: PCNN_OK, PCNN_ERR_TIMEOUT, ...
 *   net_agree_batch      the step-start agreement (agree_batch) with this
 *                        network's step counter and the step's learning rate.
 *   net_destroy_abandoned
 *                        destroy's first step: a healthy network waits for
 *                        its collectives in flight within the timeout; an
 *                        aborted or failed one stops its engine without
 *                        waiting; returns true when buffers were left in
 *                        MPI's hands, having then freed the handle and
 *                        leaked the rest: destroy must stop there. */
pcnn_status net_check_alive(const pcnn_net *net, const char *func);
pcnn_status net_async_status(const pcnn_net *net);
pcnn_status net_agree_batch(pcnn_net *net, pcnn_status local, double *sizes, double lr,
                            const char *func);
/* The same in two halves (agree_batch_post, agree_batch_finish), and
 * giving up on a posted half when the network failed in between. */
pcnn_status net_agree_batch_post(pcnn_net *net, pcnn_status local, const double *sizes, double lr,
                                 const char *func, agree_ticket *ticket);
pcnn_status net_agree_batch_finish(pcnn_net *net, agree_ticket *ticket, double *sizes,
                                   const char *func);
void net_agree_abandon(pcnn_net *net, agree_ticket *ticket);
bool net_destroy_abandoned(pcnn_net *net);

/* Synchronised batch norm (graph/sync_batchnorm.c).
 *   net_sync_start     at finalize, collective once the ranks agree on the
 *                      structure: the reducer, when a layer synchronises
 *                      and the network has a communicator.
 *   net_sync_hooks     a parallel training step's run_reduce over it.
 *   net_sync_checked   after each pass: st, or the reducer's failure, which
 *                      also aborts the exchange (the step must then fail). */
pcnn_status net_sync_start(pcnn_net *net);
run_reduce net_sync_hooks(pcnn_net *net);
pcnn_status net_sync_checked(pcnn_net *net, pcnn_status st);

/* A data-parallel step's forward pass while its batch agreement travels
 * (graph/step_ahead.c).
 *   step_ahead_possible  no distribution or synchronised batch norm, and
 *                        the first layers' forward pass posts nothing: it
 *                        may run before the agreement completes.
 *   step_ahead_forward   post the agreement (sizes, lr and local as for
 *                        net_agree_batch), run the forward pass of this
 *                        rank's n samples (none when local failed) up to
 *                        the first layer that posts a collective (*rest
 *                        receives it: the caller runs the rest after
 *                        begin_step), finish the agreement into sizes; on
 *                        failure nothing of the step remains.
 *   step_ahead_undo      put back what the forward pass changed (batch
 *                        norm's running statistics), for a step that then
 *                        does not go ahead.
 *   step_ahead_plan, step_ahead_release
 *                        at finalize and release: the copy of the running
 *                        statistics. */
bool step_ahead_possible(const pcnn_net *net);
pcnn_status step_ahead_forward(pcnn_net *net, const char *func, pcnn_status local, int n,
                               const float *x, double *sizes, double lr, int *rest);
void step_ahead_undo(pcnn_net *net);
pcnn_status step_ahead_plan(pcnn_net *net);
void step_ahead_release(pcnn_net *net);

/* Tracing's common clock (graph/trace_clock.c): at finalize (with a
 * communicator and tracing on) and at each merged write, measure this
 * rank's clock offset to rank 0 (pings on the communicator, timed) into
 * net->profile.clock, with its world rank.  Collective; ends in an
 * agreement. */
pcnn_status net_trace_clock_sync(pcnn_net *net, const char *func);

/* One training step (graph/run.c): pcnn_net_train_step, where stop (NULL:
 * none) carries this rank's vote to stop before this step (0 or 1) into
 * the step's first agreement and receives the number of ranks that voted;
 * when that is > 0 no rank trains: PCNN_OK without a step.  box_input: x
 * holds only this rank's box of a spatial network's input
 * (pcnn_net_train_step_local). */
pcnn_status net_train_step(pcnn_net *net, int n, const float *x, const int32_t *labels,
                           const float *targets, float *loss, double *stop, bool box_input,
                           const char *func);

/* The log callback (graph/callbacks.c): a printf-style message to the
 * host's callback, if any; never printed.  net_log_choices tells, after
 * finalize, what fell back from what was asked (the progress engine, a
 * convolution algorithm); net_log_failure, once, that the network failed. */
void net_log_choices(const pcnn_net *net);
void net_log_failure(pcnn_net *net);

/* The gradient exchange (graph/plan.c, graph/planner_hook.c,
 * graph/exchange_switch.c).
 *   net_exchange_create  plan an exchange of the network's parameters with
 *                        layer i's gradients exchanged by kinds[i] (NULL:
 *                        l->exchange); local, nothing posted yet.
 *   net_exchange_start   start exchange x of the network on the engine
 *                        every rank votes for (collective, agreed).
 *   net_note_exchange    record layer l's exchange (l->exchange), who chose
 *                        it and why in l->decision, replacing an earlier one.
 *   net_plan_exchanges   finalize under PCNN_EXCHANGE_AUTO, once the ranks
 *                        agreed on the network: the attached planner's
 *                        choice replaces the heuristics' (collective). */
pcnn_status net_exchange_create(pcnn_net *net, const pcnn_exchange *kinds, exchange **out);
pcnn_status net_exchange_start(pcnn_net *net, exchange *x, const char *func);
void net_note_exchange(pcnn_layer *l, const char *how, const char *why);

/* Layer l's decisions (l->decision) as one line into buf (snprintf-style;
 * "" when none); returns its full length (graph/decision.c). */
size_t net_decision_text(const pcnn_layer *l, char *buf, size_t size);
pcnn_status net_plan_exchanges(pcnn_net *net, const char *func);

/* The learning rate of the next step, schedule included. */
double net_effective_lr(const pcnn_net *net);

#endif
