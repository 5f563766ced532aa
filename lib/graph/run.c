/* Running the graph: forward and backward drivers, and the public calls
 * that train on or infer from one batch. */
#include <math.h>

#include "../core/clock.h"
#include "../core/error.h"
#include "../kernels/kernels.h"
#include "../layers/batchnorm.h"
#include "loss.h"
#include "net.h"
#include "option_table.h"
#include "spatial.h"

static run_ctx make_ctx(const pcnn_net *net, int n, bool train, bool update_stats,
                        const run_reduce *reduce)
{
    run_ctx ctx = {
        .n = n,
        .train = train,
        .update_stats = update_stats,
        .threads = net->threads,
        .seed = net->opt.seed,
        .step = net->step,
        .sample_base = net->sample_base,
        .exchange_step = exchange_step_active(net->exchange),
        .workspace = net->workspace,
        .reduce = reduce,
    };
    return ctx;
}

/* With reduce (a parallel training step of a network with synchronised
 * batch norms), the layers that reduce across ranks must take part in every
 * reduction, in the order of the other ranks: on a rank without samples
 * (n == 0), and for the rest of a forward pass that failed, they run with
 * n == 0, contributing nothing, and no other layer runs. */
static bool joins_reductions(const pcnn_layer *l, const run_reduce *reduce)
{
    return reduce && batchnorm_synchronised(l);
}

/* Before each layer, wait for the parameters of the previous step's
 * exchange that this layer needs, and no others (seed 001 section 4.4).
 * A rank without samples (n == 0) only meets the exchange and the
 * reductions.  Layers [from, to). */
static pcnn_status forward_range(pcnn_net *net, int n, int from, int to, bool train,
                                 bool update_stats, const run_reduce *reduce)
{
    run_ctx ctx = make_ctx(net, n, train, update_stats, reduce);
    run_ctx idle = ctx;
    idle.n = 0;
    pcnn_status st = PCNN_OK;
    for (int i = from > 1 ? from : 1; i < to && i < net->layers.count; i++) {
        pcnn_layer *l = net->layers.items[i];
        if (st == PCNN_OK) {
            st = exchange_before_forward(net->exchange, i);
            if (n == 0) exchange_after_forward(net->exchange, i);
        }
        if (n == 0 || st != PCNN_OK) {
            if (joins_reductions(l, reduce)) l->ops->forward(l, &idle);
            continue;
        }
        const double t0 = clock_now();
        l->ops->forward(l, &ctx);
        const double t1 = clock_now();
        if (train) {
            timing_layer(&net->profile, i, TIMING_FORWARD, t1 - t0);
            trace_span(&net->profile, i, TRACE_FORWARD, t0, t1);
        }
        exchange_after_forward(net->exchange, i);
        exchange_poll(net->exchange);
    }
    return st;
}

static pcnn_status forward_pass(pcnn_net *net, int n, bool train, bool update_stats,
                                const run_reduce *reduce)
{
    return forward_range(net, n, 1, net->layers.count, train, update_stats, reduce);
}

pcnn_status net_forward(pcnn_net *net, int n, bool train, bool update_stats)
{
    return forward_pass(net, n, train, update_stats, NULL);
}

pcnn_status net_forward_layers(pcnn_net *net, int n, int from, int to)
{
    return forward_range(net, n, from, to, true, true, NULL);
}

/* After each layer, hand a completed bucket of gradients to the exchange
 * and let arrived reductions update their parameters.  A rank without
 * samples (n == 0, its gradients zeroed) only meets the exchange and the
 * reductions. */
static void backward_pass(pcnn_net *net, int n, bool want_input_grad, const run_reduce *reduce)
{
    run_ctx ctx = make_ctx(net, n, true, false, reduce);
    for (int i = net->layers.count - 1; i > 0; i--) {
        pcnn_layer *l = net->layers.items[i];
        float *dx[LAYER_MAX_INPUTS] = {NULL};
        if (n == 0) {
            exchange_before_backward(net->exchange, i);
            if (joins_reductions(l, reduce)) l->ops->backward(l, &ctx, dx);
            exchange_after_backward(net->exchange, i);
            continue;
        }
        for (int j = 0; j < l->num_inputs; j++)
            if (want_input_grad || !layer_is_input(l->inputs[j])) dx[j] = l->inputs[j]->dy;
        exchange_before_backward(net->exchange, i);
        const double t0 = clock_now();
        l->ops->backward(l, &ctx, dx);
        const double t1 = clock_now();
        timing_layer(&net->profile, i, TIMING_BACKWARD, t1 - t0);
        trace_span(&net->profile, i, TRACE_BACKWARD, t0, t1);
        exchange_after_backward(net->exchange, i);
        exchange_poll(net->exchange);
    }
    net->last_backward_n = want_input_grad ? n : 0;
}

void net_backward(pcnn_net *net, int n, bool want_input_grad)
{
    backward_pass(net, n, want_input_grad, NULL);
}

pcnn_status net_check_ready(const pcnn_net *net, const char *func)
{
    if (!net) return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "net is NULL");
    TRY(net_check_alive(net, func));
    if (!net->finalized)
        return error_set(PCNN_ERR_INVALID_STATE, func,
                         "the network is not finalized: call pcnn_net_finalize first");
    return PCNN_OK;
}

/* Validate one batch of inputs and targets against the network. */
pcnn_status net_check_batch(const pcnn_net *net, const char *func, int n, const float *x,
                            const int32_t *labels, const float *targets, bool need_targets)
{
    TRY(net_check_ready(net, func));
    return net_check_batch_sized(net, func, n, x,
                                 (size_t)n * shape_size(net->layers.items[0]->out), labels,
                                 targets, need_targets);
}

pcnn_status net_check_batch_sized(const pcnn_net *net, const char *func, int n, const float *x,
                                  size_t in_count, const int32_t *labels, const float *targets,
                                  bool need_targets)
{
    TRY(net_check_ready(net, func));
    if (n < 1 || n > net->max_batch)
        return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "batch of %d samples: must be in [1, %d]",
                         n, net->max_batch);
    if (!x) return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "x is NULL");
    if (net->opt.check_numerics && !floats_finite(x, in_count))
        return error_set(PCNN_ERR_NUMERIC, func, "the input batch contains NaN or Inf");
    if (!need_targets) return PCNN_OK;
    if (net->loss == PCNN_LOSS_SOFTMAX_CROSS_ENTROPY) {
        if (!labels)
            return error_set(PCNN_ERR_INVALID_ARGUMENT, func,
                             "labels is NULL: cross entropy needs int32 class labels");
        for (int j = 0; j < n; j++)
            if (labels[j] < 0 || labels[j] >= net->output->out.c)
                return error_set(PCNN_ERR_INVALID_ARGUMENT, func,
                                 "label %d of sample %d is outside [0, %d)", (int)labels[j], j,
                                 net->output->out.c);
    } else {
        if (!targets)
            return error_set(PCNN_ERR_INVALID_ARGUMENT, func,
                             "targets is NULL: MSE and L1 need float targets");
        if (net->opt.check_numerics &&
            !floats_finite(targets, (size_t)n * shape_size(net->output->out)))
            return error_set(PCNN_ERR_NUMERIC, func, "the targets contain NaN or Inf");
    }
    return PCNN_OK;
}

void net_load_input(pcnn_net *net, int n, const float *x)
{
    const shape s = net->layers.items[0]->out;
    nchw_to_cnhw(x, net->layers.items[0]->y, n, s.c, shape_spatial(s), net->threads);
}

double net_loss(pcnn_net *net, int n, const int32_t *labels, const float *targets,
                double norm_samples, bool want_grad)
{
    loss_args a = {
        .kind = net->loss,
        .y = net->output->y,
        .s = net->output->out,
        .n = n,
        .labels = labels,
        .targets = targets,
        .norm_samples = norm_samples,
        .scratch = net->loss_scratch,
        .threads = net->threads,
    };
    return loss_compute(&a, want_grad ? net->output->dy : NULL);
}

/* A training step's update: the graph owns the learning rate and the step
 * counter; the exchange applies the optimizer to the runs this rank owns
 * (graph/plan.c apply_update). */
static void begin_step(pcnn_net *net, double lr)
{
    net->step_lr = lr;
    exchange_begin_step(net->exchange);
}

static pcnn_status end_step(pcnn_net *net)
{
    pcnn_status st = exchange_end_step(net->exchange);
    if (st == PCNN_OK) net->step++;
    return st;
}

typedef enum run_mode { RUN_LOSS, RUN_GRADIENTS, RUN_TRAIN } run_mode;

/* Zero gradients: what a rank without samples contributes to a step. */
static void zero_grads(pcnn_net *net)
{
    for (size_t i = 0; i < net->num_params; i++) net->grads[i] = 0.0f;
}

static pcnn_status numeric_check(const pcnn_net *net, const char *func, double loss)
{
    if (net->opt.check_numerics && !isfinite(loss))
        return error_set(PCNN_ERR_NUMERIC, func, "the loss is %g at step %llu", loss,
                         (unsigned long long)net->step);
    return PCNN_OK;
}

/* Local (one-rank) runs: compute_loss, compute_gradients, and train steps
 * of a network without a communicator. */
static pcnn_status run_local_counted(pcnn_net *net, const char *func, run_mode mode, int n,
                                     const float *x, const int32_t *labels,
                                     const float *targets, float *loss_out)
{
    if (net && net_is_spatial(net) && mode != RUN_TRAIN) /* collective */
        return spatial_compute(net, func, mode == RUN_GRADIENTS, n, x, labels, targets, loss_out);
    TRY(net_check_batch(net, func, n, x, labels, targets, true));
    TRY(exchange_flush(net->exchange)); /* a parallel network's parameters may be in flight */
    int saved = blas_threads_enter();
    const double t0 = clock_now();
    net->sample_base = 0;
    net_load_input(net, n, x);
    pcnn_status st = net_forward(net, n, true, mode == RUN_TRAIN);
    double loss = st == PCNN_OK ? net_loss(net, n, labels, targets, n, mode != RUN_LOSS) : 0;
    if (st == PCNN_OK) st = numeric_check(net, func, loss);
    if (st == PCNN_OK && mode != RUN_LOSS) {
        if (mode == RUN_TRAIN) begin_step(net, net_effective_lr(net));
        net_backward(net, n, mode == RUN_GRADIENTS);
        if (mode == RUN_TRAIN) {
            const uint64_t step = net->step;
            st = end_step(net);
            const double t1 = clock_now();
            net->profile.steps++;
            net->profile.step_seconds += t1 - t0;
            trace_step(&net->profile, step, t0, t1);
        }
    }
    blas_threads_leave(saved);
    if (st == PCNN_OK && loss_out) *loss_out = (float)loss;
    return st;
}

/* A step's agreement, except on a rank whose network already failed (one
 * of its collectives gave up): waiting for partners again would double the
 * time to fail on a broken link; they fail at their own deadline or learn
 * of it at their next agreement. */
static pcnn_status agree_unless_failed(pcnn_net *net, agree_stage stage, pcnn_status st,
                                       double *values, int count, const char *func)
{
    if (net_async_status(net) != PCNN_OK) return st;
    return net_agree_sum(net, stage, st, values, count, func);
}

/* A data-parallel training step.  Three agreement points make every rank
 * fail together: after validating the local batch (which also sums the
 * batch sizes, finds this rank's first global sample, and checks that the
 * step counter and the learning rate are the same everywhere; where the
 * forward pass communicates nothing, it runs while this agreement travels
 * and is undone if the step does not go ahead: step_ahead.c), after the
 * forward pass (which sums the loss and catches NaN on any rank) -- before
 * any parameter changes, so a failed step changes nothing -- and after the
 * update: a step returns PCNN_OK on a rank only if every rank applied the
 * whole update (a rank that gave up on a reduction fails the step
 * everywhere). */
static pcnn_status run_parallel_counted(pcnn_net *net, const char *func, int n,
                                        const float *x, const int32_t *labels,
                                        const float *targets, float *loss_out, double *stop,
                                        bool box_input)
{
    TRY(net_check_alive(net, func)); /* n == 0 skips the batch check */
    const double t0 = clock_now();
    const bool spatial = net_is_spatial(net);
    size_t in_count = (size_t)n * shape_size(net->layers.items[0]->out);
    if (box_input && spatial) {
        int start[3], count[3];
        TRY(pcnn_layer_local_box(net->layers.items[0], start, count));
        in_count = (size_t)n * (size_t)net->layers.items[0]->out.c * (size_t)count[0] *
                   (size_t)count[1] * (size_t)count[2];
    }
    /* Whole samples on a spatial rank: only its box is staged, and checked
     * as it is copied (the other ranks check theirs; the agreement below
     * fails every rank together).  Nothing reads the staging of a step
     * that does not go ahead. */
    const bool stage_now = spatial && !box_input && n > 0;
    pcnn_status st = n == 0 ? PCNN_OK
                            : net_check_batch_sized(net, func, n, x, stage_now ? 0 : in_count,
                                                    labels, targets, true);
    if (st == PCNN_OK && stage_now &&
        !spatial_load_input(net, n, x, false, net->opt.check_numerics))
        st = error_set(PCNN_ERR_NUMERIC, func, "the input batch contains NaN or Inf");
    if (n < 0 || n > net->max_batch)
        st = error_set(PCNN_ERR_INVALID_ARGUMENT, func,
                       "local batch of %d samples: must be in [0, %d] on each rank", n,
                       net->max_batch);
    const double lr = net_effective_lr(net);
    double sizes[3] = {n, 0, stop ? *stop : 0.0};
    /* Forward first where it may, while the agreement travels (step_ahead.c):
     * the layers before `ahead`. */
    int ahead = 0;
    if (step_ahead_possible(net)) {
        const int saved = blas_threads_enter();
        st = step_ahead_forward(net, func, st, n, x, sizes, lr, &ahead);
        blas_threads_leave(saved);
        TRY(st);
    } else {
        TRY(net_agree_batch(net, st, sizes, lr, func));
    }
    if (stop && (*stop = sizes[2]) > 0) { /* a callback asked: no rank steps */
        if (ahead) step_ahead_undo(net);
        return PCNN_OK;
    }
    double global = sizes[0];
    if (spatial) {
        TRY(spatial_begin_step(net, func)); /* every rank's verdict is the same */
        global = net->spatial->batch;
    }
    if (global < 1) {
        if (ahead) step_ahead_undo(net);
        return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "no rank passed any sample");
    }
    net->sample_base = (long)sizes[1];
    /* Synchronised batch norms reduce across ranks through these hooks. */
    run_reduce hooks;
    const run_reduce *reduce = net->reducer ? (hooks = net_sync_hooks(net), &hooks) : NULL;

    int saved = blas_threads_enter();
    const uint64_t step = net->step;
    begin_step(net, lr);
    double loss = 0.0;
    /* No samples here (n == 0): take part in every collective all the same,
     * in the order the other ranks post them. */
    if (ahead) { /* the rest, from the first layer that posts a collective */
        st = forward_range(net, n, ahead, net->layers.count, true, true, NULL);
    } else if (spatial) {
        if (n > 0 && !stage_now) spatial_load_input(net, n, x, box_input, false);
        st = spatial_forward(net, reduce, true);
    } else {
        if (n > 0) net_load_input(net, n, x);
        st = forward_pass(net, n, true, true, reduce);
    }
    if (st == PCNN_OK && spatial) {
        loss = spatial_loss(net, labels, targets);
        st = numeric_check(net, func, loss);
    } else if (st == PCNN_OK && n > 0) {
        loss = net_loss(net, n, labels, targets, global, true);
        st = numeric_check(net, func, loss);
    }
    st = net_sync_checked(net, st);
    /* The loss summed with the ranks checking numerics (an option allowed
     * to differ between steps): one rank's check covers every rank's loss,
     * and all see the same sum, so they fail together. */
    double agreed[2] = {loss, net->opt.check_numerics ? 1.0 : 0.0};
    st = agree_unless_failed(net, AGREE_STEP_LOSS, st, agreed, 2, func);
    loss = agreed[0];
    if (st == PCNN_OK && agreed[1] > 0 && !isfinite(loss))
        st = error_set(PCNN_ERR_NUMERIC, func, "the loss summed over the ranks is %g at step "
                       "%llu: NaN or Inf on some rank (checked by %g of them)", loss,
                       (unsigned long long)net->step, agreed[1]);
    if (st != PCNN_OK) {
        /* Drain what the failed step posted (an aborted exchange has
         * nothing to wait for); a drain that gives up fails the network. */
        const pcnn_status drained =
            net_async_status(net) == PCNN_OK ? exchange_flush(net->exchange) : PCNN_OK;
        if (drained != PCNN_OK) st = drained;
    } else {
        if (spatial) {
            st = spatial_backward(net, reduce);
        } else {
            if (n == 0) zero_grads(net);
            backward_pass(net, n, false, reduce);
        }
        st = net_sync_checked(net, st);
        if (st == PCNN_OK) st = end_step(net); /* else aborted: nothing to wait for */
        st = agree_unless_failed(net, AGREE_STEP_END, st, NULL, 0, func);
        const double t1 = clock_now();
        net->profile.steps++;
        net->profile.step_seconds += t1 - t0;
        trace_step(&net->profile, step, t0, t1);
    }
    blas_threads_leave(saved);
    if (st == PCNN_OK && loss_out) *loss_out = (float)loss;
    return st;
}

/* The timings of a training step that fails, or that a callback stops,
 * are forgotten: pcnn_net_time reports the steps counted.  compute_loss
 * and compute_gradients keep theirs (a host's own loop reads its breakdown
 * there; so does perf/kernel_timing.c). */
static pcnn_status run_local(pcnn_net *net, const char *func, run_mode mode, int n,
                             const float *x, const int32_t *labels, const float *targets,
                             float *loss_out)
{
    if (!net) return run_local_counted(net, func, mode, n, x, labels, targets, loss_out);
    const long steps = net->profile.steps;
    profile_mark(&net->profile);
    const pcnn_status st = run_local_counted(net, func, mode, n, x, labels, targets, loss_out);
    if (mode == RUN_TRAIN && net->profile.steps == steps) profile_rewind(&net->profile);
    return st;
}

static pcnn_status run_parallel(pcnn_net *net, const char *func, int n, const float *x,
                                const int32_t *labels, const float *targets, float *loss_out,
                                double *stop, bool box_input)
{
    const long steps = net->profile.steps;
    profile_mark(&net->profile);
    const pcnn_status st =
        run_parallel_counted(net, func, n, x, labels, targets, loss_out, stop, box_input);
    if (net->profile.steps == steps) profile_rewind(&net->profile);
    return st;
}

/* The step counter stays within PCNN_OPT_STEP's range, so that every value
 * it holds can be set, read and saved to a checkpoint that loads again. */
static pcnn_status check_step_room(const pcnn_net *net, const char *func)
{
    double lo, hi;
    option_bounds(option_row_of(PCNN_OPT_STEP), &lo, &hi);
    if (net && net->finalized && (double)net->step >= hi)
        return error_set(PCNN_ERR_INVALID_STATE, func, "the step counter is at its maximum "
                         "%.17g (the range of PCNN_OPT_STEP): set a smaller step to train on",
                         hi);
    return PCNN_OK;
}

pcnn_status net_train_step(pcnn_net *net, int n, const float *x, const int32_t *labels,
                           const float *targets, float *loss, double *stop, bool box_input,
                           const char *func)
{
    TRY(check_step_room(net, func));
    if (net && net->finalized && net->comm)
        return run_parallel(net, func, n, x, labels, targets, loss, stop, box_input);
    if (stop && *stop > 0) return PCNN_OK;
    return run_local(net, func, RUN_TRAIN, n, x, labels, targets, loss);
}

PCNN_API pcnn_status pcnn_net_train_step(pcnn_net *net, int n, const float *x,
                                         const int32_t *labels, const float *targets,
                                         float *loss)
{
    API_ENTRY();
    return net_train_step(net, n, x, labels, targets, loss, NULL, false, __func__);
}

PCNN_API pcnn_status pcnn_net_train_step_local(pcnn_net *net, int n, const float *x_local,
                                               const int32_t *labels, const float *targets,
                                               float *loss)
{
    API_ENTRY();
    TRY(check_step_room(net, __func__));
    if (net && net->finalized && net->comm)
        return run_parallel(net, __func__, n, x_local, labels, targets, loss, NULL, true);
    /* One rank: its box is the whole sample. */
    return run_local(net, __func__, RUN_TRAIN, n, x_local, labels, targets, loss);
}

PCNN_API pcnn_status pcnn_net_compute_gradients(pcnn_net *net, int n, const float *x,
                                                const int32_t *labels, const float *targets,
                                                float *loss)
{
    API_ENTRY();
    return run_local(net, __func__, RUN_GRADIENTS, n, x, labels, targets, loss);
}

PCNN_API pcnn_status pcnn_net_compute_loss(pcnn_net *net, int n, const float *x,
                                           const int32_t *labels, const float *targets,
                                           float *loss)
{
    API_ENTRY();
    return run_local(net, __func__, RUN_LOSS, n, x, labels, targets, loss);
}

PCNN_API pcnn_status pcnn_net_predict(pcnn_net *net, int n, const float *x, float *out,
                                      size_t out_count)
{
    API_ENTRY();
    TRY(net_check_ready(net, __func__));
    REQUIRE(n >= 1, PCNN_ERR_INVALID_ARGUMENT, "n = %d must be >= 1", n);
    REQUIRE_PTR(x);
    REQUIRE_PTR(out);
    TRY(spatial_refuse(net, __func__));
    const shape in = net->layers.items[0]->out, o = net->output->out;
    REQUIRE(out_count >= (size_t)n * shape_size(o), PCNN_ERR_SHAPE,
            "out holds %zu floats; %d samples need %zu", out_count, n,
            (size_t)n * shape_size(o));
    /* Every chunk is checked before any output is written. */
    for (int start = 0; net->opt.check_numerics && start < n; start += net->max_batch) {
        int count = n - start < net->max_batch ? n - start : net->max_batch;
        REQUIRE(floats_finite(x + (size_t)start * shape_size(in), (size_t)count * shape_size(in)),
                PCNN_ERR_NUMERIC, "samples %d..%d contain NaN or Inf", start, start + count - 1);
    }
    TRY(exchange_flush(net->exchange));
    int saved = blas_threads_enter();
    for (int start = 0; start < n; start += net->max_batch) {
        int count = n - start < net->max_batch ? n - start : net->max_batch;
        const float *xb = x + (size_t)start * shape_size(in);
        net_load_input(net, count, xb);
        net_forward(net, count, false, false); /* flushed: cannot fail */
        cnhw_to_nchw(net->output->y, out + (size_t)start * shape_size(o), count, o.c,
                     shape_spatial(o), net->threads);
    }
    blas_threads_leave(saved);
    return PCNN_OK;
}

/* Chunks of max_batch samples, each collective: every rank runs every
 * chunk (one whose samples ran out passes none) until no rank has any
 * left, as spatial_evaluate does. */
PCNN_API pcnn_status pcnn_net_predict_parallel(pcnn_net *net, int n, const float *x, float *out,
                                               size_t out_count)
{
    API_ENTRY();
    TRY(net_check_ready(net, __func__));
    if (!net_is_spatial(net)) return pcnn_net_predict(net, n, x, out, out_count);
    const size_t in = shape_size(net->layers.items[0]->out), o = shape_size(net->output->out);
    pcnn_status st = PCNN_OK;
    if (n < 0) st = FAIL(PCNN_ERR_INVALID_ARGUMENT, "n = %d must be >= 0", n);
    else if (n > 0 && !x) st = FAIL(PCNN_ERR_INVALID_ARGUMENT, "x is NULL");
    else if (n > 0 && !out) st = FAIL(PCNN_ERR_INVALID_ARGUMENT, "out is NULL");
    else if (out_count < (size_t)n * o)
        st = FAIL(PCNN_ERR_SHAPE, "out holds %zu floats; %d samples need %zu", out_count, n,
                  (size_t)n * o);
    else if (net->opt.check_numerics && !floats_finite(x, (size_t)n * in)) /* before any output */
        st = FAIL(PCNN_ERR_NUMERIC, "the input batch contains NaN or Inf");
    if (st == PCNN_OK) st = exchange_flush(net->exchange);
    const int saved = blas_threads_enter();
    for (int start = 0;; start += net->max_batch) {
        const int left = st == PCNN_OK && n > start ? n - start : 0;
        const int count = left < net->max_batch ? left : net->max_batch;
        double sizes[3] = {count, 0, 0};
        st = net_agree_batch(net, st, sizes, net_effective_lr(net), __func__);
        if (st == PCNN_OK && start == 0 && sizes[0] == 0)
            st = FAIL(PCNN_ERR_INVALID_ARGUMENT, "no rank passed any sample");
        if (st != PCNN_OK || sizes[0] == 0) break;
        st = spatial_begin_step(net, __func__);
        if (st != PCNN_OK) break;
        if (count > 0) spatial_load_input(net, count, x + (size_t)start * in, false, false);
        st = spatial_forward(net, NULL, false);
        if (st == PCNN_OK)
            st = spatial_gather_output(net, count, count ? out + (size_t)start * o : out);
        if (st != PCNN_OK) break;
    }
    blas_threads_leave(saved);
    return st;
}
