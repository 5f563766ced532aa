/* Timing one layer of the library at one shape through a network of its
 * own (kernel_timing.h), and the optimizer on one run of parameters. */
#include "kernel_timing.h"

#include <stdbool.h>

#include "../core/clock.h"
#include "../core/error.h"
#include "../core/memory.h"
#include "../optim/optim.h"

/* The fastest of v[0, n), n >= 1: other processes on the machine only
 * ever add time to a run, so the minimum is the kernel's own cost and the
 * most repeatable estimate of it (on an idle machine runs agree within a
 * few per cent anyway). */
static double fastest(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        if (v[i] < m) m = v[i];
    return m;
}

static bool is_volume(perf_kind k, const perf_shape *s)
{
    return k == PERF_CONV3D_FWD || k == PERF_POOL3D_FWD || s->d > 1;
}

/* The input, the layer of `kind`, and the ReLU that batch norm or add
 * fuses; *weighted tells whether the layer has parameters, *layers counts
 * the network's layers. */
static pcnn_status build_layer(pcnn_net *net, perf_kind kind, const perf_shape *s, bool *weighted,
                               int *layers)
{
    pcnn_layer *in = NULL, *l = NULL;
    if (kind == PERF_DENSE_FWD)
        TRY(pcnn_net_input(net, s->cin, 1, 1, &in));
    else if (is_volume(kind, s))
        TRY(pcnn_net_input3d(net, s->cin, s->d, s->h, s->w, &in));
    else
        TRY(pcnn_net_input(net, s->cin, s->h, s->w, &in));
    *weighted = false;
    switch (kind) {
    case PERF_CONV2D_FWD:
        TRY(pcnn_conv2d(net, in, s->cout, s->k, s->stride, s->pad, 1, &l));
        *weighted = true;
        break;
    case PERF_CONV3D_FWD:
        TRY(pcnn_conv3d(net, in, s->cout, s->k, s->stride, s->pad, 1, &l));
        *weighted = true;
        break;
    case PERF_DENSE_FWD:
        TRY(pcnn_dense(net, in, s->cout, 1, &l));
        *weighted = true;
        break;
    case PERF_POOL2D_FWD:
        TRY((s->pool_max ? pcnn_maxpool2d : pcnn_avgpool2d)(net, in, s->k, s->stride, s->pad, &l));
        break;
    case PERF_POOL3D_FWD:
        TRY((s->pool_max ? pcnn_maxpool3d : pcnn_avgpool3d)(net, in, s->k, s->stride, s->pad, &l));
        break;
    case PERF_GLOBAL_AVGPOOL_FWD: TRY(pcnn_global_avgpool(net, in, &l)); break;
    case PERF_RELU_FWD: TRY(pcnn_relu(net, in, &l)); break;
    case PERF_DROPOUT_FWD: TRY(pcnn_dropout(net, in, 0.5f, &l)); break;
    case PERF_BATCHNORM_FWD:
        TRY(pcnn_batchnorm(net, in, 1e-5f, 0.1f, &l));
        *weighted = true;
        if (s->fused_relu) TRY(pcnn_relu(net, l, &l));
        break;
    case PERF_ADD_FWD:
        TRY(pcnn_add(net, in, in, &l));
        if (s->fused_relu) TRY(pcnn_relu(net, l, &l));
        break;
    default:
        return FAIL(PCNN_ERR_INVALID_ARGUMENT, "%s is not a layer's forward kind",
                    perf_kind_name(kind) ? perf_kind_name(kind) : "unknown kind");
    }
    int last;
    const char *name;
    TRY(pcnn_layer_info(l, &last, &name));
    *layers = last + 1;
    return pcnn_net_set_loss(net, l, PCNN_LOSS_MSE);
}

/* Seconds of `what` summed over the layers after the input (the layer and
 * a ReLU it fuses) in the breakdown of the last run. */
static pcnn_status layers_time(pcnn_net *net, int layers, pcnn_time what, double *seconds)
{
    *seconds = 0;
    for (int i = 1; i < layers; i++) {
        double t;
        TRY(pcnn_net_time(net, i, what, &t));
        *seconds += t;
    }
    return PCNN_OK;
}

typedef struct timing_run {
    pcnn_net *net;
    int n, layers;
    float *x, *target;
} timing_run;

/* One run of compute_gradients (forward, full backward) and, for a layer
 * with weights, one train step (its backward skips the input gradient). */
static pcnn_status time_once(timing_run *r, bool weighted, perf_layer_times *t)
{
    TRY(pcnn_net_reset_timing(r->net));
    TRY(pcnn_net_compute_gradients(r->net, r->n, r->x, NULL, r->target, NULL));
    TRY(layers_time(r->net, r->layers, PCNN_TIME_FORWARD, &t->fwd));
    TRY(layers_time(r->net, r->layers, PCNN_TIME_BACKWARD, &t->bwd));
    t->bwd_weights = 0;
    if (weighted) {
        TRY(pcnn_net_reset_timing(r->net));
        TRY(pcnn_net_train_step(r->net, r->n, r->x, NULL, r->target, NULL));
        TRY(layers_time(r->net, r->layers, PCNN_TIME_BACKWARD, &t->bwd_weights));
    }
    return PCNN_OK;
}

/* A cheap deterministic fill in [-1, 1) (a normal generator would cost
 * more than the layer on large inputs). */
static void fill(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((uint32_t)(i * 2654435761u) >> 22) / 512.0f - 1.0f;
}

static pcnn_status prepare_and_time(timing_run *r, perf_kind kind, const perf_shape *s,
                                    int threads, int reps, const int *batches, int count,
                                    perf_layer_times *out, double *v)
{
    bool weighted;
    TRY(pcnn_net_set_option(r->net, PCNN_OPT_THREADS, threads));
    TRY(pcnn_net_set_option(r->net, PCNN_OPT_CONV_ALGORITHM, s->algorithm));
    TRY(pcnn_net_set_option(r->net, PCNN_OPT_CHECK_NUMERICS, 0));
    TRY(pcnn_net_set_option(r->net, PCNN_OPT_LEARNING_RATE, 1e-6));
    TRY(build_layer(r->net, kind, s, &weighted, &r->layers));
    TRY(pcnn_net_finalize(r->net, s->batch));
    size_t out_count;
    TRY(pcnn_net_output_size(r->net, &out_count));
    const bool flat = kind == PERF_DENSE_FWD;
    const size_t d = flat || s->d < 1 ? 1 : (size_t)s->d;
    const size_t in_count = (size_t)s->batch * (size_t)s->cin * d * (flat ? 1 : (size_t)s->h) *
                            (flat ? 1 : (size_t)s->w);
    r->x = mem_alloc_floats(in_count);
    r->target = mem_alloc_floats((size_t)s->batch * out_count);
    if (!r->x || !r->target)
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "timing buffers of %zu floats", in_count);
    fill(r->x, in_count);
    fill(r->target, (size_t)s->batch * out_count);
    perf_layer_times t;
    r->n = s->batch;
    TRY(time_once(r, weighted, &t)); /* warm-up: first touch of every buffer */
    for (int b = 0; b < count; b++) {
        r->n = batches[b];
        for (int i = 0; i < reps; i++) {
            TRY(time_once(r, weighted, &t));
            v[i] = t.fwd;
            v[reps + i] = t.bwd;
            v[2 * reps + i] = t.bwd_weights;
        }
        out[b].fwd = fastest(v, reps);
        out[b].bwd = fastest(v + reps, reps);
        out[b].bwd_weights = fastest(v + 2 * reps, reps);
    }
    return PCNN_OK;
}

pcnn_status perf_time_layer_batches(perf_kind fwd_kind, const perf_shape *shape, int threads,
                                    int repetitions, const int *batches, int count,
                                    perf_layer_times *out)
{
    REQUIRE_PTR(shape);
    REQUIRE_PTR(batches);
    REQUIRE_PTR(out);
    REQUIRE(threads >= 1 && repetitions >= 1 && count >= 1, PCNN_ERR_INVALID_ARGUMENT,
            "threads %d, repetitions %d and count %d must be >= 1", threads, repetitions, count);
    for (int b = 0; b < count; b++)
        REQUIRE(batches[b] >= 1 && batches[b] <= shape->batch, PCNN_ERR_INVALID_ARGUMENT,
                "batch %d not in [1, %d]", batches[b], shape->batch);
    double *v = mem_alloc((size_t)repetitions * 3 * sizeof *v);
    if (!v) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "%d repetitions", repetitions);
    timing_run r = {0};
    pcnn_status st = pcnn_net_create(&r.net);
    if (st == PCNN_OK)
        st = prepare_and_time(&r, fwd_kind, shape, threads, repetitions, batches, count, out, v);
    pcnn_net_destroy(&r.net);
    mem_free(r.x);
    mem_free(r.target);
    mem_free(v);
    return st;
}

pcnn_status perf_time_layer(perf_kind fwd_kind, const perf_shape *shape, int threads,
                            int repetitions, perf_layer_times *out)
{
    REQUIRE_PTR(shape);
    return perf_time_layer_batches(fwd_kind, shape, threads, repetitions, &shape->batch, 1, out);
}

pcnn_status perf_time_update(const perf_shape *shape, int threads, int repetitions,
                             double *seconds)
{
    REQUIRE_PTR(shape);
    REQUIRE_PTR(seconds);
    REQUIRE(threads >= 1 && repetitions >= 1, PCNN_ERR_INVALID_ARGUMENT,
            "threads %d and repetitions %d must be >= 1", threads, repetitions);
    REQUIRE(shape->params >= 1, PCNN_ERR_SHAPE, "params %lld must be >= 1",
            (long long)shape->params);
    REQUIRE(shape->optimizer >= PCNN_OPTIMIZER_SGD && shape->optimizer <= PCNN_OPTIMIZER_ADAM,
            PCNN_ERR_INVALID_ARGUMENT, "unknown optimizer %d", shape->optimizer);
    const pcnn_optimizer kind = (pcnn_optimizer)shape->optimizer;
    const size_t count = (size_t)shape->params;
    optim_state state = {0};
    float *params = mem_alloc_floats(count), *grads = mem_alloc_floats(count);
    double *v = mem_alloc((size_t)repetitions * sizeof *v);
    pcnn_status st = PCNN_OK;
    if (!params || !grads || !v)
        st = FAIL(PCNN_ERR_OUT_OF_MEMORY, "update buffers of %zu parameters", count);
    if (st == PCNN_OK) st = optim_state_alloc(&state, kind, count);
    if (st == PCNN_OK) {
        fill(params, count);
        fill(grads, count);
        const optim_hyper h = {0.9, 0.9, 0.999, 1e-8};
        for (int i = -1; i < repetitions; i++) { /* i == -1: warm-up */
            const double t0 = clock_now();
            optim_update(kind, &h, 1e-3, 0, (uint64_t)(i + 2), params, grads, state.m, state.v,
                         count, threads);
            if (i >= 0) v[i] = clock_now() - t0;
        }
        *seconds = fastest(v, repetitions);
    }
    optim_state_free(&state);
    mem_free(params);
    mem_free(grads);
    mem_free(v);
    return st;
}
