/* The scheduling policy: Algorithm 3 of seed 001 with the learning-rate
 * control of section 5.1.5, as arithmetic on numbers only (no network, no
 * MPI), so that every rank that sees the same numbers takes the same
 * decisions and tests can script them. */
#include <math.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../parallel/parallel.h"
#include "sched.h"

void sched_config_default(sched_config *c, int start_batch, int max_batch, double initial_lr)
{
    *c = (sched_config){
        .start_batch = start_batch,
        .max_batch = max_batch,
        .initial_lr = initial_lr,
        .growth = 2.0,
        .lr_rule = PCNN_SCHED_LR_LINEAR,
        .interval = 0,
        .theta_threshold = 0.10,
        .decay = 0.1,
        .plateau_epochs = 3,
        .plateau_threshold = 0.01,
        .warmup_epochs = 0,
        .min_local = 2,
    };
}

/* mu for batch B before any decay: the noise scale mu N / B (eq. 5.2) is
 * kept by the linear rule, the gradient variance mu^2 / B (eq. 5.3) by the
 * root rule.  Computed from B, not by repeated products, so a restored
 * state gives the same bits. */
static double lr_at_batch(const sched_config *c, int batch)
{
    const double ratio = (double)batch / (double)c->start_batch;
    return c->initial_lr * (c->lr_rule == PCNN_SCHED_LR_ROOT ? sqrt(ratio) : ratio);
}

static int next_batch(const sched_config *c, int batch)
{
    double want = floor((double)batch * c->growth + 0.5);
    if (want < batch + 1.0) want = batch + 1.0;
    return want >= c->max_batch ? c->max_batch : (int)want;
}

void sched_state_init(const sched_config *c, sched_state *s)
{
    double *theta = s->theta;
    const long cap = s->theta_cap;
    *s = (sched_state){
        .batch = c->start_batch,
        .lr = c->initial_lr,
        .interval = c->interval,
        .initial_loss = NAN,
        .best_loss = NAN,
        .theta = theta,
        .theta_cap = cap,
    };
}

void sched_state_free(sched_state *s)
{
    mem_free(s->theta);
    s->theta = NULL;
    s->theta_cap = 0;
}

pcnn_status sched_state_reserve(sched_state *s, long count, const char *func)
{
    if (count <= s->theta_cap) return PCNN_OK;
    long cap = s->theta_cap ? 2 * s->theta_cap : 64;
    if (cap < count) cap = count;
    double *grown = mem_realloc(s->theta, (size_t)cap * sizeof *grown);
    if (!grown) return error_set(PCNN_ERR_OUT_OF_MEMORY, func, "theta history of %ld epochs", cap);
    s->theta = grown;
    s->theta_cap = cap;
    return PCNN_OK;
}

/* Algorithm 3, lines 7-12, then the plateau rule. */
pcnn_status sched_end_epoch(const sched_config *c, sched_state *s, double loss, double distance,
                            const char *func)
{
    if (!isfinite(loss))
        return error_set(PCNN_ERR_NUMERIC, func, "the training loss of epoch %ld is %g",
                         s->epoch + 1, loss);
    if (isnan(s->initial_loss))
        return error_set(PCNN_ERR_INVALID_STATE, func,
                         "F(w_0) is unknown: set PCNN_SCHED_INITIAL_LOSS (e.g. the loss of the "
                         "first step) before the first pcnn_scheduler_end_epoch");
    const long n = s->epoch + 1;
    TRY(sched_state_reserve(s, n, func));
    /* eq. 5.4; undefined (NaN) while the parameters have not moved. */
    const double theta =
        distance > 0 && isfinite(distance) ? (s->initial_loss - loss) / distance : NAN;
    s->theta[n - 1] = theta;
    unsigned events = 0;

    /* K is the first epoch whose theta moved by less than the threshold
     * relative to the previous epoch's; warm-up epochs do not count. */
    if (s->interval == 0 && n >= c->warmup_epochs + 2) {
        const double prev = s->theta[n - 2];
        if (isfinite(prev) && isfinite(theta) && prev != 0.0 &&
            fabs(theta - prev) < c->theta_threshold * fabs(prev)) {
            s->interval = n;
            events |= PCNN_SCHED_EVENT_INTERVAL_FOUND;
        }
    }
    if (s->interval > 0 && n % s->interval == 0 && s->batch < c->max_batch) {
        s->batch = next_batch(c, s->batch);
        /* After the first decay the learning rate no longer follows B:
         * the run is converging, and a larger B only lowers the noise. */
        if (s->decays == 0) s->lr = lr_at_batch(c, s->batch);
        events |= PCNN_SCHED_EVENT_BATCH_GREW;
    }
    /* A plateau is judged within one (B, mu) phase: losses under another
     * batch or learning rate are not comparable, and a learning rate rising
     * with B would pass for a plateau.  So warm-up epochs do not count, and
     * growth restarts the rule from the next epoch's loss. */
    const bool new_phase = (events & PCNN_SCHED_EVENT_BATCH_GREW) || n <= c->warmup_epochs;
    if (new_phase) {
        s->best_loss = NAN;
        s->stale_epochs = 0;
    }

    /* Section 5.1.5: at the first plateau back to mu_0 * beta (an effective
     * factor of (B_s / B_m) beta under the linear rule), then by beta. */
    if (c->plateau_epochs > 0 && !new_phase) {
        const double gain = s->best_loss - loss;
        if (isnan(s->best_loss) || gain > c->plateau_threshold * fabs(s->best_loss)) {
            s->best_loss = loss;
            s->stale_epochs = 0;
        } else if (++s->stale_epochs >= c->plateau_epochs) {
            s->lr = s->decays == 0 ? c->initial_lr * c->decay : s->lr * c->decay;
            s->decays++;
            s->stale_epochs = 0;
            if (loss < s->best_loss) s->best_loss = loss;
            events |= PCNN_SCHED_EVENT_LR_DECAYED;
        }
    }
    s->epoch = n;
    s->events = events;
    return PCNN_OK;
}

double sched_epoch_lr(const sched_config *c, const sched_state *s)
{
    const long next = s->epoch + 1;
    if (c->warmup_epochs > 0 && next < c->warmup_epochs)
        return s->lr * (double)next / (double)c->warmup_epochs;
    return s->lr;
}
