/* The adaptive batch-size scheduler (seed 001 chapter 5): what the sched
 * room offers the others and its tests.
 *
 * Two layers.  The policy (policy.c) is pure arithmetic on a config and a
 * state: Algorithm 3 (fix K from theta, grow B and the learning rate every
 * K epochs), the plateau rule of section 5.1.5, warm-up, and the degree of
 * parallelism of section 5.2.1.  It sees only numbers, so tests can script
 * losses and distances.  The handle (scheduler.c, theta.c, state.c) ties
 * the policy to a network: it keeps w_0, measures ||w_0 - w_i|| across
 * ranks, trains epochs and saves its state. */
#ifndef PCNN_SCHED_SCHED_H
#define PCNN_SCHED_SCHED_H

#include <stdbool.h>
#include <stddef.h>

#include "pcnn.h"

typedef struct sched_config {
    int start_batch, max_batch; /* B_s, B_m */
    double initial_lr;          /* mu_0, the learning rate at B_s */
    double growth;              /* > 1: B <- min(B * growth, B_m) */
    int lr_rule;                /* pcnn_sched_lr_rule */
    long interval;              /* K given by the host; 0: find it from theta */
    double theta_threshold;     /* relative change under which theta is saturated */
    double decay;               /* beta */
    long plateau_epochs;        /* epochs without improvement; 0: never decay */
    double plateau_threshold;   /* relative improvement that counts */
    long warmup_epochs;
    int min_local;              /* samples per computing rank (section 5.2.1) */
} sched_config;

typedef struct sched_state {
    long epoch;          /* completed epochs: n - 1 of Algorithm 3 */
    int batch;           /* B of the next epoch */
    double lr;           /* learning rate of the next epoch before warm-up */
    long interval;       /* K; 0 while unknown */
    double initial_loss; /* F(w_0); NaN until known */
    double best_loss;    /* plateau rule: lowest loss that counted; NaN: none */
    long stale_epochs;   /* epochs since best_loss last improved */
    long decays;         /* learning-rate decays so far */
    unsigned events;     /* PCNN_SCHED_EVENT_* of the last epoch */
    double *theta;       /* theta of epochs 1..epoch (NaN where undefined) */
    long theta_cap;
} sched_state;

/* Defaults of every knob, for B_s, B_m and mu_0. */
void sched_config_default(sched_config *c, int start_batch, int max_batch, double initial_lr);

/* The state before the first epoch. */
void sched_state_init(const sched_config *c, sched_state *s);
void sched_state_free(sched_state *s);
/* Room in the theta history for `count` epochs (no-op if there is). */
pcnn_status sched_state_reserve(sched_state *s, long count, const char *func);

/* Record epoch n = s->epoch + 1, whose mean training loss is `loss` and
 * whose parameters lie `distance` from w_0, and take the decisions for the
 * next epoch: theta (eq. 5.4), K, growth, plateau decay.  Only the theta
 * history allocates (amortised doubling, once per many epochs).  Errors:
 * INVALID_STATE (F(w_0) unknown), NUMERIC (loss not finite),
 * OUT_OF_MEMORY (state unchanged). */
pcnn_status sched_end_epoch(const sched_config *c, sched_state *s, double loss, double distance,
                            const char *func);

/* The learning rate of the next epoch, warm-up included. */
double sched_epoch_lr(const sched_config *c, const sched_state *s);

/* Which ranks compute on a batch (section 5.2.1: as many as give each at
 * least min_local samples) is parallel/decomp.h's decomp_active_*. */

/* The handle. */
struct pcnn_scheduler {
    pcnn_net *net;
    sched_config cfg;
    sched_state st;
    bool in_epoch;        /* between begin_epoch and end_epoch */
    bool config_checked;  /* ranks compared their configurations */
    int planned_batch;    /* the batch the network's planner last re-planned for (0: none) */
    /* w_0: this rank's contiguous 1/P of the flat parameter array. */
    float *w0;
    size_t w0_lo, w0_count;
    size_t num_params;
};

/* theta.c: snapshot w_0 (this rank's slice) and the reduction of the
 * squared distance.  The caller flushes the exchange first. */
pcnn_status sched_keep_initial(pcnn_scheduler *s);
double sched_local_sq_distance(const pcnn_scheduler *s);

/* state.c: the serialized state (layout in include/pcnn.h). */
size_t sched_state_bytes(const pcnn_scheduler *s);

#endif
