/* The scheduler handle: the public calls that tie the policy to a network,
 * its communicator and its epochs. */
#include <math.h>
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../graph/graph.h"
#include "../parallel/decomp.h"
#include "../parallel/parallel.h"
#include "sched.h"

static int ranks_of(const pcnn_scheduler *s) { return net_comm(s->net) ? net_comm(s->net)->size : 1; }
static int rank_of(const pcnn_scheduler *s) { return net_comm(s->net) ? net_comm(s->net)->rank : 0; }

/* What a batch is shared among: the ranks, or under a spatial distribution
 * the sample groups (every rank of a group takes the group's samples). */
static int sharers_of(const pcnn_scheduler *s)
{
    int groups = ranks_of(s);
    if (net_comm(s->net)) pcnn_net_group_info(s->net, NULL, &groups, NULL, NULL);
    return groups;
}

static int sharer_of(const pcnn_scheduler *s)
{
    int group = rank_of(s);
    if (net_comm(s->net)) pcnn_net_group_info(s->net, &group, NULL, NULL, NULL);
    return group;
}

static pcnn_status agree_if(const pcnn_scheduler *s, pcnn_status st, const char *func)
{
    return net_comm(s->net) ? net_agree(s->net, st, func) : st;
}

PCNN_API pcnn_status pcnn_scheduler_create(pcnn_net *net, int start_batch, int max_batch,
                                           double initial_lr, pcnn_scheduler **out)
{
    API_ENTRY();
    REQUIRE_PTR(out);
    TRY(net_check_ready(net, __func__));
    /* Every rank reaches the agreement below: local failures are collected. */
    pcnn_status st = PCNN_OK;
    if (start_batch < 1 || start_batch > max_batch)
        st = FAIL(PCNN_ERR_INVALID_ARGUMENT, "start batch %d must be in [1, max batch %d]",
                  start_batch, max_batch);
    else if (max_batch > net_global_max_batch(net))
        st = FAIL(PCNN_ERR_INVALID_ARGUMENT, "max batch %d exceeds the network's max_batch %d "
                  "(finalize with max_batch >= B_m)", max_batch, net_global_max_batch(net));
    else if (!isfinite(initial_lr) || initial_lr <= 0)
        st = FAIL(PCNN_ERR_INVALID_ARGUMENT, "initial learning rate %g must be finite and > 0",
                  initial_lr);
    pcnn_scheduler *s = NULL;
    if (st == PCNN_OK) {
        s = mem_calloc(1, sizeof *s);
        if (!s) st = FAIL(PCNN_ERR_OUT_OF_MEMORY, "scheduler handle");
    }
    if (s) {
        s->net = net;
        sched_config_default(&s->cfg, start_batch, max_batch, initial_lr);
        sched_state_init(&s->cfg, &s->st);
    }
    pcnn_status flushed = net_settle(net); /* w_0 must be the settled parameters */
    if (st == PCNN_OK) st = flushed;
    if (st == PCNN_OK) st = sched_keep_initial(s);
    if (net_comm(net)) st = net_agree(net, st, __func__);
    if (st != PCNN_OK) {
        pcnn_scheduler_destroy(&s);
        return st;
    }
    *out = s;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_scheduler_destroy(pcnn_scheduler **sched)
{
    API_ENTRY();
    if (!sched || !*sched) return PCNN_OK;
    pcnn_scheduler *s = *sched;
    sched_state_free(&s->st);
    mem_free(s->w0);
    mem_free(s);
    *sched = NULL;
    return PCNN_OK;
}

static bool is_count(double v) { return isfinite(v) && v >= 0 && v <= 1e9 && v == floor(v); }

PCNN_API pcnn_status pcnn_scheduler_set_option(pcnn_scheduler *sched, pcnn_sched_option option,
                                               double value)
{
    API_ENTRY();
    REQUIRE_PTR(sched);
    const bool started = sched->st.epoch > 0 || sched->in_epoch;
    sched_config *c = &sched->cfg;
    if (option == PCNN_SCHED_INITIAL_LOSS) {
        REQUIRE(sched->st.epoch == 0, PCNN_ERR_INVALID_STATE,
                "F(w_0) is fixed once the first epoch has ended");
        REQUIRE(isfinite(value), PCNN_ERR_INVALID_ARGUMENT, "initial loss %g must be finite",
                value);
        sched->st.initial_loss = value;
        return PCNN_OK;
    }
    if (option >= PCNN_SCHED_EPOCH && option <= PCNN_SCHED_EVENTS)
        return FAIL(PCNN_ERR_INVALID_STATE, "scheduler option %d is read-only", (int)option);
    REQUIRE(!started, PCNN_ERR_INVALID_STATE,
            "scheduler option %d must be set before the first epoch begins", (int)option);
    switch (option) {
    case PCNN_SCHED_GROWTH_FACTOR:
        REQUIRE(value > 1 && value <= 1024, PCNN_ERR_INVALID_ARGUMENT,
                "growth factor %g must be in (1, 1024]", value);
        c->growth = value;
        break;
    case PCNN_SCHED_LR_RULE:
        REQUIRE(value == PCNN_SCHED_LR_LINEAR || value == PCNN_SCHED_LR_ROOT,
                PCNN_ERR_INVALID_ARGUMENT, "learning-rate rule %g: 0 (linear) or 1 (root)", value);
        c->lr_rule = (int)value;
        break;
    case PCNN_SCHED_INTERVAL_EPOCHS:
        REQUIRE(is_count(value), PCNN_ERR_INVALID_ARGUMENT,
                "interval %g must be a whole number of epochs (0: from theta)", value);
        c->interval = (long)value;
        sched->st.interval = c->interval;
        break;
    case PCNN_SCHED_THETA_THRESHOLD:
        REQUIRE(value > 0 && value <= 10, PCNN_ERR_INVALID_ARGUMENT,
                "theta threshold %g must be in (0, 10]", value);
        c->theta_threshold = value;
        break;
    case PCNN_SCHED_DECAY_FACTOR:
        REQUIRE(value > 0 && value <= 1, PCNN_ERR_INVALID_ARGUMENT,
                "decay factor %g must be in (0, 1]", value);
        c->decay = value;
        break;
    case PCNN_SCHED_PLATEAU_EPOCHS:
    case PCNN_SCHED_WARMUP_EPOCHS:
        REQUIRE(is_count(value), PCNN_ERR_INVALID_ARGUMENT,
                "option %d: %g must be a whole number of epochs", (int)option, value);
        if (option == PCNN_SCHED_PLATEAU_EPOCHS) c->plateau_epochs = (long)value;
        else c->warmup_epochs = (long)value;
        break;
    case PCNN_SCHED_PLATEAU_THRESHOLD:
        REQUIRE(value >= 0 && value < 1, PCNN_ERR_INVALID_ARGUMENT,
                "plateau threshold %g must be in [0, 1)", value);
        c->plateau_threshold = value;
        break;
    case PCNN_SCHED_MIN_LOCAL_SAMPLES:
        REQUIRE(is_count(value) && value <= 65536, PCNN_ERR_INVALID_ARGUMENT,
                "min local samples %g must be an integer in [0, 65536]", value);
        c->min_local = (int)value;
        break;
    default:
        return FAIL(PCNN_ERR_INVALID_ARGUMENT, "unknown scheduler option %d", (int)option);
    }
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_scheduler_get_option(const pcnn_scheduler *sched,
                                               pcnn_sched_option option, double *value)
{
    API_ENTRY();
    REQUIRE_PTR(sched);
    REQUIRE_PTR(value);
    const sched_config *c = &sched->cfg;
    const sched_state *s = &sched->st;
    double v;
    switch (option) {
    case PCNN_SCHED_GROWTH_FACTOR: v = c->growth; break;
    case PCNN_SCHED_LR_RULE: v = c->lr_rule; break;
    case PCNN_SCHED_INTERVAL_EPOCHS: v = (double)c->interval; break;
    case PCNN_SCHED_THETA_THRESHOLD: v = c->theta_threshold; break;
    case PCNN_SCHED_DECAY_FACTOR: v = c->decay; break;
    case PCNN_SCHED_PLATEAU_EPOCHS: v = (double)c->plateau_epochs; break;
    case PCNN_SCHED_PLATEAU_THRESHOLD: v = c->plateau_threshold; break;
    case PCNN_SCHED_WARMUP_EPOCHS: v = (double)c->warmup_epochs; break;
    case PCNN_SCHED_MIN_LOCAL_SAMPLES: v = c->min_local; break;
    case PCNN_SCHED_INITIAL_LOSS: v = s->initial_loss; break;
    case PCNN_SCHED_EPOCH: v = (double)s->epoch; break;
    case PCNN_SCHED_BATCH: v = s->batch; break;
    case PCNN_SCHED_LEARNING_RATE: v = sched_epoch_lr(c, s); break;
    case PCNN_SCHED_INTERVAL: v = (double)s->interval; break;
    case PCNN_SCHED_THETA: v = s->epoch > 0 ? s->theta[s->epoch - 1] : NAN; break;
    case PCNN_SCHED_DECAYS: v = (double)s->decays; break;
    case PCNN_SCHED_ACTIVE_RANKS:
        v = decomp_active_ranks(s->batch, sharers_of(sched), c->min_local);
        break;
    case PCNN_SCHED_EVENTS: v = s->events; break;
    default: return FAIL(PCNN_ERR_INVALID_ARGUMENT, "unknown scheduler option %d", (int)option);
    }
    *value = v;
    return PCNN_OK;
}

/* Ranks must run the same policy: compare every knob, after agreeing on
 * local failures; a mismatch names the knob and its values. */
static pcnn_status check_same_config(const pcnn_scheduler *s, pcnn_status st, const char *func)
{
    const sched_config *c = &s->cfg;
    enum { KNOBS = 12 };
    static const char *const names[KNOBS] = {
        "the start batch", "the max batch", "the initial learning rate",
        "PCNN_SCHED_GROWTH_FACTOR", "PCNN_SCHED_LR_RULE", "PCNN_SCHED_INTERVAL_EPOCHS",
        "PCNN_SCHED_THETA_THRESHOLD", "PCNN_SCHED_DECAY_FACTOR", "PCNN_SCHED_PLATEAU_EPOCHS",
        "the plateau threshold", "PCNN_SCHED_WARMUP_EPOCHS", "the minimum local batch"};
    const double knobs[KNOBS] = {c->start_batch, c->max_batch, c->initial_lr, c->growth,
                                 c->lr_rule, (double)c->interval, c->theta_threshold, c->decay,
                                 (double)c->plateau_epochs, c->plateau_threshold,
                                 (double)c->warmup_epochs, c->min_local};
    TRY(net_agree(s->net, st, func));
    uint64_t words[KNOBS];
    memcpy(words, knobs, sizeof words);
    word_difference d;
    st = net_agree_words(s->net, words, KNOBS, func, &d);
    if (st != PCNN_ERR_MISMATCH) return st;
    double first, other;
    memcpy(&first, &d.first, sizeof first);
    memcpy(&other, &d.other, sizeof other);
    return error_set(PCNN_ERR_MISMATCH, func, "ranks configured the scheduler differently: %s "
                     "is %g on rank 0 and %g on rank %d (set the same options on every rank)",
                     names[d.index], first, other, d.rank);
}

static pcnn_status begin(pcnn_scheduler *s, int *batch, double *lr, const char *func)
{
    pcnn_net *net = s->net;
    const double rate = sched_epoch_lr(&s->cfg, &s->st);
    const int largest = decomp_largest_share(s->cfg.max_batch, sharers_of(s), s->cfg.min_local);
    pcnn_status st = PCNN_OK;
    if (s->in_epoch)
        st = error_set(PCNN_ERR_INVALID_STATE, func, "epoch %ld has begun and not ended",
                       s->st.epoch + 1);
    else if (largest > net_local_max_batch(net))
        st = error_set(PCNN_ERR_SHAPE, func,
                       "a rank may get %d samples of a batch up to %d (at least %d samples per "
                       "computing rank) but the network holds %d: finalize with max_batch >= %ld",
                       largest, s->cfg.max_batch, s->cfg.min_local, net_local_max_batch(net),
                       (long)(largest - 1) * sharers_of(s) + 1);
    else if (!(rate > 0) || !isfinite(rate))
        st = error_set(PCNN_ERR_NUMERIC, func, "the learning rate is %g after %ld decays", rate,
                       s->st.decays);
    if (net_comm(net) && !s->config_checked) st = check_same_config(s, st, func);
    else st = agree_if(s, st, func);
    TRY(st);
    s->config_checked = true;
    if (s->st.batch != s->planned_batch) {
        /* A performance model attached to the network re-plans for the
         * new batch (collective; the planners are agreed first). */
        TRY(net_planner_batch(net, s->st.batch, func));
        s->planned_batch = s->st.batch;
    }
    net_set_learning_rate(net, rate);
    s->in_epoch = true;
    if (batch) *batch = s->st.batch;
    if (lr) *lr = rate;
    return PCNN_OK;
}

static pcnn_status end(pcnn_scheduler *s, double loss, const char *func)
{
    pcnn_status st = PCNN_OK;
    if (!s->in_epoch)
        st = error_set(PCNN_ERR_INVALID_STATE, func,
                       "no epoch has begun: call pcnn_scheduler_begin_epoch first");
    /* Reserve before agreeing, so that the policy below cannot fail on one
     * rank only. */
    if (st == PCNN_OK) st = sched_state_reserve(&s->st, s->st.epoch + 1, func);
    pcnn_status flushed = net_settle(s->net);
    if (st == PCNN_OK) st = flushed;
    const bool known = !isnan(s->st.initial_loss);
    double v[4] = {st == PCNN_OK ? sched_local_sq_distance(s) : 0.0, loss,
                   known ? s->st.initial_loss : 0.0, known ? 1.0 : 0.0};
    if (net_comm(s->net)) TRY(net_agree_sum(s->net, AGREE_ENTRY, st, v, 4, func));
    TRY(st);
    const double P = ranks_of(s);
    if (s->st.epoch == 0 && v[3] > 0) {
        if (v[3] != P)
            return error_set(PCNN_ERR_MISMATCH, func,
                             "PCNN_SCHED_INITIAL_LOSS is set on %g of %g ranks", v[3], P);
        s->st.initial_loss = v[2] / P;
    }
    TRY(sched_end_epoch(&s->cfg, &s->st, v[1] / P, sqrt(v[0]), func));
    s->in_epoch = false;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_scheduler_begin_epoch(pcnn_scheduler *sched, int *batch, double *lr)
{
    API_ENTRY();
    REQUIRE_PTR(sched);
    return begin(sched, batch, lr, __func__);
}

PCNN_API pcnn_status pcnn_scheduler_end_epoch(pcnn_scheduler *sched, double loss)
{
    API_ENTRY();
    REQUIRE_PTR(sched);
    return end(sched, loss, __func__);
}

PCNN_API pcnn_status pcnn_scheduler_train_epoch(pcnn_scheduler *sched, const pcnn_dataset *data,
                                                double *mean_loss)
{
    API_ENTRY();
    REQUIRE_PTR(sched);
    int batch;
    TRY(begin(sched, &batch, NULL, __func__));
    double mean = NAN, first = NAN;
    pcnn_status st = net_train_epoch(sched->net, data, batch, sched->cfg.min_local, &mean,
                                     &first, __func__);
    if (st != PCNN_OK) {
        sched->in_epoch = false; /* not counted: the host may train it again */
        return st;
    }
    /* The first step's loss is global, so every rank sets the same F(w_0). */
    if (sched->st.epoch == 0 && isnan(sched->st.initial_loss)) sched->st.initial_loss = first;
    TRY(end(sched, mean, __func__));
    if (mean_loss) *mean_loss = mean;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_scheduler_share(const pcnn_scheduler *sched, int count, int *first,
                                          int *n)
{
    API_ENTRY();
    REQUIRE_PTR(sched);
    REQUIRE_PTR(first);
    REQUIRE_PTR(n);
    REQUIRE(count >= 0, PCNN_ERR_INVALID_ARGUMENT, "count %d must be >= 0", count);
    long at;
    const int mine = decomp_active_share(count, sharers_of(sched), sharer_of(sched),
                                         sched->cfg.min_local, &at);
    *first = (int)at;
    *n = mine;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_scheduler_theta(const pcnn_scheduler *sched, long epoch,
                                          double *theta)
{
    API_ENTRY();
    REQUIRE_PTR(sched);
    REQUIRE_PTR(theta);
    REQUIRE(epoch >= 1 && epoch <= sched->st.epoch, PCNN_ERR_INVALID_ARGUMENT,
            "epoch %ld: theta is known for epochs 1..%ld", epoch, sched->st.epoch);
    *theta = sched->st.theta[epoch - 1];
    return PCNN_OK;
}
