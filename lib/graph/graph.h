/* The graph's door for the rooms above it (the batch scheduler and
 * checkpoints): what they may ask of a network, without struct pcnn_net,
 * which stays private to graph/ (net.h). */
#ifndef PCNN_GRAPH_GRAPH_H
#define PCNN_GRAPH_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/error.h"
#include "../data/dataset.h"
#include "../layers/layer.h"
#include "../optim/optim.h"
#include "../parallel/exchange.h"
#include "../parallel/parallel.h"
#include "pcnn.h"

/* A finalized network that was not aborted; func names the public
 * function in messages. */
pcnn_status net_check_ready(const pcnn_net *net, const char *func);

/* What planning made (valid after finalize). */
const pcnn_comm *net_comm(const pcnn_net *net); /* NULL: one process */
const layer_list *net_layer_list(const pcnn_net *net);
const pcnn_layer *net_output(const pcnn_net *net);
bool net_is_finalized(const pcnn_net *net);
size_t net_num_params(const pcnn_net *net);
float *net_params(const pcnn_net *net);     /* the flat parameter array */
optim_state *net_optim(const pcnn_net *net); /* this rank's optimizer state */
const exchange *net_exchange(const pcnn_net *net);
/* The parameters were set (a checkpoint): bf16 on the wire takes the
 * masters from them and rounds them (exchange_masters_from_params). */
void net_masters_from_params(pcnn_net *net);
pcnn_optimizer net_optimizer(const pcnn_net *net);
pcnn_loss net_loss_kind(const pcnn_net *net);
int net_local_max_batch(const pcnn_net *net);  /* this rank's share */
int net_global_max_batch(const pcnn_net *net); /* as given to finalize */

/* Wait for the parameters still in flight: call before reading them. */
pcnn_status net_settle(pcnn_net *net);

/* The collectives of a call on the network's communicator (graph/net_abort.c),
 * each given up after PCNN_OPT_TIMEOUT_MS; giving up (or learning that
 * another rank's network failed) aborts the network.  A collective call
 * starts with net_agree, so that every rank is known to be in it before
 * anything else is posted.
 *   net_agree, net_agree_sum, net_agree_words
 *                             agree / agree_sum / agree_words (parallel.h)
 *   net_complete              complete a nonblocking MPI call posted on
 *                             net_comm(net)->comm (comm_complete); when it
 *                             gives up, the buffers handed to MPI must never
 *                             be freed: net_lend_buffers when they are the
 *                             network's own (destroy then keeps them). */
pcnn_status net_agree(pcnn_net *net, pcnn_status local, const char *func);
pcnn_status net_agree_sum(pcnn_net *net, agree_stage stage, pcnn_status local, double *values,
                          int count, const char *func);
pcnn_status net_agree_words(pcnn_net *net, const uint64_t *words, int count, const char *func,
                            word_difference *diff);
pcnn_status net_complete(pcnn_net *net, int post_code, MPI_Request *req, const char *func,
                         const char *what);
void net_lend_buffers(pcnn_net *net);

/* What a checkpoint saves and restores besides the arrays: the optimizer's
 * hyper-parameters, the learning-rate schedule and the step counter. */
typedef struct net_training_state {
    double learning_rate, momentum, weight_decay, beta1, beta2, epsilon, decay_factor;
    uint64_t warmup_steps, decay_every_steps, step, seed;
} net_training_state;

net_training_state net_get_training_state(const pcnn_net *net);
/* Everything but the seed, which finalize has used already. */
void net_set_training_state(pcnn_net *net, const net_training_state *s);
/* The scheduler's learning rate (validated by the caller). */
void net_set_learning_rate(pcnn_net *net, double rate);

/* One epoch over `data` in batches of `batch` (graph/train.c), each batch
 * split over the ranks sched_share lets compute (min_local 0: all ranks).
 * *first_loss (may be NULL) receives the loss of the first step, taken
 * before its update.  Collective with a communicator. */
pcnn_status net_train_epoch(pcnn_net *net, const pcnn_dataset *data, int batch, int min_local,
                            double *mean_loss, double *first_loss, const char *func);

/* What the performance model reads and times (perf room). */
pcnn_exchange net_default_exchange(const pcnn_net *net); /* PCNN_OPT_EXCHANGE's value */
size_t net_bucket_bytes(const pcnn_net *net);
bool net_overlap(const pcnn_net *net);
int net_threads(const pcnn_net *net);                    /* resolved at finalize */
/* Time every layer of a finalized network on n local samples (1..its
 * local max batch; zero inputs, a loss on zero targets), reps times:
 * samples[(rep * layers + l) * 3 + pass] receives the seconds of layer l's
 * forward (pass 0, training mode, running statistics untouched), backward
 * without any input gradient (1; convolutions and dense layers, else 0)
 * and backward as a training step runs it (2); overhead[rep] the input copy
 * plus the loss.  The layers run on the batch the network last trained on
 * (a network that has not trained: made-up values).  Local: no collective;
 * parameters and optimizer state are unchanged (parameters in flight are
 * waited for first), gradients and activations are overwritten.
 * after_pass (may be NULL) runs after each pass's backward, where a step
 * would update, with arg and the repetition. */
pcnn_status net_time_layers(pcnn_net *net, int n, int reps, double *samples, double *overhead,
                            void (*after_pass)(void *arg, int rep), void *arg);

/* How layer i of a finalized spatial network runs (graph/spatial.h), as
 * the performance model prices it; false (all zero) on a network that is
 * not spatial. */
typedef struct net_layer_split {
    int parts[4];          /* its distribution, N D H W */
    int input_parts[2][4]; /* its inputs' (a shuffle where one differs) */
    int groups;            /* the input's sample groups */
    bool windowed;         /* convolution or pooling */
    bool in_place;         /* on its input's block, border cells again */
    bool overlap;          /* its halo overlapped with its interior (as the trials decided) */
    bool staged;           /* its input copied into a halo-extended box */
    bool keeps_input;      /* that box kept from forward to backward */
    bool box_dense;        /* a dense layer on each rank's box of a split input */
    bool folded;           /* that dense layer's flatten: neither moves nor runs */
    bool group_bn;         /* batch norm reducing over the sample group */
} net_layer_split;
bool net_layer_split_of(const pcnn_net *net, int i, net_layer_split *out);

/* What the strategy planner (plan room) reads and keeps: the network's
 * options of section 9, and its record of the last plan, which the
 * network releases (with `release`) when it is destroyed or a new record
 * replaces it. */
typedef struct net_plan_options {
    int max_spatial;       /* PCNN_OPT_PLAN_MAX_SPATIAL (0: the communicator's size) */
    int spatial_dims;      /* PCNN_OPT_PLAN_SPATIAL_DIMS mask */
    bool mixed;            /* PCNN_OPT_PLAN_MIXED */
    double memory_limit_mib; /* 0: none */
    bool halo_overlap;     /* PCNN_OPT_HALO_OVERLAP */
    bool exchange_auto;    /* the network's exchange is PCNN_EXCHANGE_AUTO */
    int precision;         /* PCNN_OPT_PRECISION: bf16 halves what the exchange sends */
    bool editable;         /* before finalize, not failed or aborted */
} net_plan_options;
net_plan_options net_get_plan_options(const pcnn_net *net);
void *net_plan_record(const pcnn_net *net);
void net_set_plan_record(pcnn_net *net, void *record, void (*release)(void *));

/* A printf-style message to the host's log callback, if any (graph/
 * callbacks.c); never printed. */
void net_log(const pcnn_net *net, pcnn_log_level level, const char *fmt, ...) PCNN_PRINTF(3, 4);

/* A client's planner (the plan room's, attached by pcnn_net_set_perfmodel):
 * functions and a context the network keeps, never owns, and calls
 *   - at finalize under PCNN_EXCHANGE_AUTO, on more than one rank, once the
 *     ranks agreed on the network: `exchanges` chooses the gradient
 *     exchange of the layers whose exchange the user did not set.  kinds[i]
 *     holds layer i's heuristic choice and allowed[i] the kinds it may take
 *     (bit 1 << kind); it writes the chosen kinds, the same on every rank,
 *     and a reason per layer (NET_WHY_LEN chars, "" to keep the heuristic's);
 *   - when a scheduler changes the batch (net_planner_batch):
 *     `batch_changed` re-plans for the new global batch.
 * Both are collective and return the same status on every rank.  Before
 * either, the ranks agree that they hold the same planner: identity(ctx)
 * (never 0) is compared, 0 standing for none; a difference is a MISMATCH
 * on every rank. */
#define NET_WHY_LEN 96
typedef struct net_planner {
    void *ctx;
    uint64_t (*identity)(void *ctx);
    pcnn_status (*exchanges)(void *ctx, pcnn_net *net, pcnn_exchange *kinds,
                             const unsigned *allowed, char (*why)[NET_WHY_LEN],
                             const char *func);
    pcnn_status (*batch_changed)(void *ctx, pcnn_net *net, int global_batch, const char *func);
} net_planner;

/* Change the gradient exchange of a finalized network's layers to kinds[i]
 * (the same on every rank, else MISMATCH): the optimizer state moves to the
 * new exchange's owners bit for bit; a changed layer's summary note says
 * `how` and why[i] (why may be NULL) and the log callback hears of it.
 * Nothing changes when no kind differs.  Collective with a communicator;
 * a failure on any rank (out of memory) is agreed and leaves the network
 * as it was on every rank. */
pcnn_status net_switch_exchanges(pcnn_net *net, const pcnn_exchange *kinds, const char *how,
                                 const char (*why)[NET_WHY_LEN], const char *func);

/* Attach (p NULL: detach) the planner; before finalize or after, never
 * during a collective call. */
void net_set_planner(pcnn_net *net, const net_planner *p);
bool net_has_planner(const pcnn_net *net);
/* The scheduler's batch change to global_batch: with a planner attached,
 * its re-plan; without, nothing.  Collective with a communicator of more
 * than one rank (the planners' identities are agreed first). */
pcnn_status net_planner_batch(pcnn_net *net, int global_batch, const char *func);

#endif
