/* Spatial and hybrid parallelism: the passes of a training step on this
 * rank's boxes (spatial.h).  run.c's data-parallel step calls these
 * between its agreements, so failing together works as there. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "../core/clock.h"
#include "../core/error.h"
#include "../core/memory.h"
#include "../kernels/kernels.h"
#include "../layers/batchnorm.h"
#include "../layers/clone.h"
#include "loss.h"
#include "spatial.h"

box spatial_phase_box(const spatial_layer *sl, int f, const box *have, const box *need)
{
    box b = *need;
    for (int g = f + 1; g < sl->num_phases; g++) { /* not grown yet */
        const int k = sl->phase_dim[g];
        b.lo[k] = have->lo[k] > need->lo[k] ? have->lo[k] : need->lo[k];
        b.hi[k] = have->hi[k] < need->hi[k] ? have->hi[k] : need->hi[k];
        if (b.hi[k] < b.lo[k]) b.hi[k] = b.lo[k];
    }
    return b;
}

/* The overlap trials: backward passes 1 and 3 with overlap, 2 and 4
 * without (0 warms up, with), then every rank keeps, layer by layer, the
 * faster way over the ranks' summed times; the choice is logged and shown
 * in the layer's choice (pcnn_net_summary). */
enum { OVERLAP_TRIALS = 5 };

static pcnn_status overlap_decide(pcnn_net *net, const char *func)
{
    spatial *sp = net->spatial;
    double *t = mem_calloc(2 * (size_t)sp->count, sizeof(double));
    if (!t) return error_set(PCNN_ERR_OUT_OF_MEMORY, func, "overlap trials");
    for (int i = 0; i < sp->count; i++) {
        t[2 * i] = sp->layers[i].trial[0];
        t[2 * i + 1] = sp->layers[i].trial[1];
    }
    const pcnn_status st = box_mover_sum(sp->mover, t, 2 * sp->count);
    for (int i = 0; i < sp->count && st == PCNN_OK; i++) {
        spatial_layer *sl = &sp->layers[i];
        if (!sl->overlap) continue;
        sl->overlap_on = t[2 * i + 1] <= t[2 * i];
        pcnn_layer *l = net->layers.items[i];
        const double ms = 1e3 / (2.0 * sp->ranks);
        l->decision.halo_overlap = sl->overlap_on ? 1 : -1;
        l->decision.overlap_ms[0] = t[2 * i + 1] * ms;
        l->decision.overlap_ms[1] = t[2 * i] * ms;
        char name[64];
        net_log(net, PCNN_LOG_INFO, "%s: halo overlap %s: %.3g ms per step with, %.3g without",
                layer_name(l, name, sizeof name), sl->overlap_on ? "kept" : "turned off",
                t[2 * i + 1] * ms, t[2 * i] * ms);
    }
    mem_free(t);
    sp->overlap_decided = true;
    return spatial_checked(net, st);
}

static pcnn_status overlap_trials(pcnn_net *net, const char *func)
{
    spatial *sp = net->spatial;
    if (sp->overlap_decided || !sp->mover) return PCNN_OK;
    if (sp->passes >= OVERLAP_TRIALS) return overlap_decide(net, func);
    for (int i = 0; i < sp->count; i++)
        if (sp->layers[i].overlap) sp->layers[i].overlap_on = sp->passes % 2 == 1 || !sp->passes;
    return PCNN_OK;
}

/* A trial step's seconds of layer i (after the warm-up). */
static void overlap_time(spatial *sp, int i, double seconds)
{
    spatial_layer *sl = &sp->layers[i];
    if (sl->overlap && !sp->overlap_decided && sp->passes > 0) sl->trial[sl->overlap_on] += seconds;
}

pcnn_status spatial_begin_step(pcnn_net *net, const char *func)
{
    spatial *sp = net->spatial;
    const int G = sp->group_size;
    sp->failed = PCNN_OK;
    int total = 0;
    for (int g = 0; g < sp->groups; g++) {
        const int n = comm_batch_of(net->comm, g * G);
        for (int q = g * G + 1; q < (g + 1) * G; q++)
            if (comm_batch_of(net->comm, q) != n)
                return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "ranks %d and %d of sample "
                                 "group %d passed %d and %d samples: the ranks of a group "
                                 "pass the same samples", g * G, q, g, n,
                                 comm_batch_of(net->comm, q));
        sp->group_start[g] = total;
        sp->group_count[g] = n;
        total += n;
    }
    sp->batch = total;
    const sample_split split = {sp->groups, sp->group_start, sp->group_count};
    for (int i = 0; i < sp->count; i++) {
        spatial_layer *sl = &sp->layers[i];
        const pcnn_layer *l = net->layers.items[i];
        for (int q = 0; q < sp->ranks; q++)
            sl->have[q] = layout_box(sl->parts, q, &split, l->out.d, l->out.h, l->out.w);
        sl->mine = sl->have[sp->rank];
        for (int j = 0; j < l->num_inputs; j++)
            if (sl->moves[j]) spatial_need_boxes(net, i, j, sl->have, sl->need[j]);
    }
    /* Dimension-ordered halos: the box grows by one dimension per phase,
     * from the part of the block the layer reads (a stride may skip some
     * of it) with the unsplit dimensions' padding; always within need. */
    for (int i = 1; i < sp->count; i++) {
        spatial_layer *sl = &sp->layers[i];
        const box *have = sp->layers[net->layers.items[i]->inputs[0]->index].have;
        for (int f = 0; f < sl->num_phases; f++)
            for (int q = 0; q < sp->ranks; q++)
                sl->phase_box[f][q] = spatial_phase_box(sl, f, &have[q], &sl->need[0][q]);
    }
    return overlap_trials(net, func);
}

static int samples_of(const box *b) { return box_extent(b, LAYOUT_N); }

static size_t box_points(const box *b)
{
    return (size_t)box_extent(b, LAYOUT_D) * (size_t)box_extent(b, LAYOUT_H) *
           (size_t)box_extent(b, LAYOUT_W);
}

bool spatial_load_input(pcnn_net *net, int n, const float *x, bool box_input, bool check)
{
    const spatial *sp = net->spatial;
    pcnn_layer *in = net->layers.items[0];
    const box *b = &sp->layers[0].mine;
    const int c = in->out.c;
    if (box_input) {
        nchw_to_cnhw(x, in->y, n, c, box_points(b), net->threads);
        return !check || floats_finite(in->y, (size_t)n * (size_t)c * box_points(b));
    }
    /* The group's whole samples, NCDHW: copy this rank's rows, each checked
     * while it is in cache. */
    const shape s = in->out;
    const int bd = box_extent(b, LAYOUT_D), bh = box_extent(b, LAYOUT_H),
              bw = box_extent(b, LAYOUT_W);
    const long rows = (long)n * c * bd * bh;
    /* An atomic flag, not a reduction clause: clang lowers that through a
     * lock it exports from the library. */
    atomic_int finite = 1;
#pragma omp parallel for num_threads(net->threads) if (rows * bw > 32768) schedule(static)
    for (long r = 0; r < rows; r++) {
        long t = r;
        const int h = (int)(t % bh);
        t /= bh;
        const int d = (int)(t % bd);
        t /= bd;
        const int ch = (int)(t % c), i = (int)(t / c);
        const float *src = x + ((((size_t)i * (size_t)s.c + (size_t)ch) * (size_t)s.d +
                                 (size_t)(d + b->lo[LAYOUT_D])) * (size_t)s.h +
                                (size_t)(h + b->lo[LAYOUT_H])) * (size_t)s.w +
                           (size_t)b->lo[LAYOUT_W];
        float *dst = in->y + ((((size_t)ch * (size_t)n + (size_t)i) * (size_t)bd + (size_t)d) *
                                  (size_t)bh + (size_t)h) * (size_t)bw;
        memcpy(dst, src, (size_t)bw * sizeof(float));
        if (check && atomic_load_explicit(&finite, memory_order_relaxed) &&
            !floats_finite(dst, (size_t)bw))
            atomic_store_explicit(&finite, 0, memory_order_relaxed);
    }
    return atomic_load(&finite);
}

/* Group reductions of a split batch norm (layers/layer.h run_reduce). */
static const double *group_gather(void *arg, const double *mine, int count)
{
    const double *all = NULL;
    return reducer_gather(arg, mine, count, &all) == PCNN_OK ? all : NULL;
}

static bool group_sum(void *arg, double *values, int count)
{
    return reducer_sum(arg, values, count) == PCNN_OK;
}

/* The reductions layer i takes part in (NULL: none). */
static const run_reduce *reduce_of(const pcnn_net *net, int i, const run_reduce *global,
                                   const run_reduce *group)
{
    const spatial_layer *sl = &net->spatial->layers[i];
    const pcnn_layer *l = sl->direct || sl->box_dropout ? net->layers.items[i] : sl->twin;
    if (!batchnorm_synchronised(l)) return NULL;
    return sl->group_bn ? group : global;
}

static run_ctx ctx_of(const pcnn_net *net, const spatial_layer *sl, bool train,
                      const run_reduce *reduce)
{
    const spatial *sp = net->spatial;
    return (run_ctx){
        .n = samples_of(&sl->mine),
        .train = train,
        .update_stats = train && !sp->keep_stats,
        .threads = net->threads,
        .seed = net->opt.seed,
        .step = net->step,
        .sample_base = sl->mine.lo[LAYOUT_N],
        .exchange_step = exchange_step_active(net->exchange),
        .workspace = sl->direct || sl->box_dropout ? net->workspace : sp->workspace,
        .reduce = reduce,
    };
}

static void box_extent3(const box *b, int lo[3], int ext[3])
{
    for (int k = 0; k < 3; k++) {
        lo[k] = b->lo[LAYOUT_D + k];
        ext[k] = box_extent(b, LAYOUT_D + k);
    }
}

/* A twin batch norm updates the original's running statistics (which
 * checkpoints save and load). */
static void sync_running_stats(pcnn_layer *to, pcnn_layer *from)
{
    size_t count = 0, from_count = 0;
    float *dst = batchnorm_running_stats(to, &count);
    const float *src = batchnorm_running_stats(from, &from_count);
    if (dst && src && count == from_count) memcpy(dst, src, count * sizeof(float));
}

pcnn_status spatial_forward(pcnn_net *net, const run_reduce *global, bool train)
{
    spatial *sp = net->spatial;
    run_reduce group_hooks = {.gather = group_gather, .sum = group_sum,
                              .arg = sp->group_reducer,
                              .ranks = sp->group_reducer ? reducer_ranks(sp->group_reducer) : 1};
    pcnn_status st = PCNN_OK;
    for (int i = 1; i < net->layers.count; i++) {
        pcnn_layer *l = net->layers.items[i];
        spatial_layer *sl = &sp->layers[i];
        if (sl->folded || sl->box_dense) { /* spatial_dense.c */
            if (st == PCNN_OK) st = exchange_before_forward(net->exchange, i);
            if (sl->box_dense) {
                const pcnn_status s2 = spatial_box_dense_forward(net, i, train, st != PCNN_OK);
                if (st == PCNN_OK) st = s2;
            }
            if (st == PCNN_OK) {
                exchange_after_forward(net->exchange, i);
                exchange_poll(net->exchange);
            }
            continue;
        }
        pcnn_layer *run = sl->direct || sl->box_dropout ? l : sl->twin;
        const run_reduce *reduce = reduce_of(net, i, global, &group_hooks);
        run_ctx ctx = ctx_of(net, sl, train, reduce);
        if (st == PCNN_OK) st = exchange_before_forward(net->exchange, i);
        const double start = clock_now();
        /* In place always; overlapped (computes as it moves) in training
         * passes, inference keeping one path, so that its outputs do not
         * depend on the trials. */
        if (st == PCNN_OK && (sl->in_place || (sl->overlap_on && train))) {
            double exposed = 0.0; /* waiting for halos: timed as such, not as compute */
            const double t0 = clock_now();
            st = sl->in_place ? spatial_in_place_forward(net, i, &ctx, &exposed)
                              : spatial_overlapped_forward(net, i, &ctx, &exposed);
            const double t1 = clock_now();
            if (train) overlap_time(sp, i, t1 - start);
            if (st == PCNN_OK && ctx.n > 0 && train) {
                timing_layer(&net->profile, i, TIMING_FORWARD, t1 - t0 - exposed);
                trace_span(&net->profile, i, TRACE_FORWARD, t0, t1);
            }
            if (st == PCNN_OK) {
                exchange_after_forward(net->exchange, i);
                exchange_poll(net->exchange);
            }
            continue;
        }
        for (int j = 0; j < l->num_inputs && st == PCNN_OK; j++)
            if (sl->moves[j]) st = spatial_move_in(net, i, j);
        if (st != PCNN_OK || ctx.n == 0) {
            /* Join the reductions with nothing; the step fails later if st. */
            if (reduce) {
                ctx.n = 0;
                if (!sl->direct && layer_is_batchnorm(l)) sync_running_stats(run, l);
                run->ops->forward(run, &ctx);
                if (!sl->direct && layer_is_batchnorm(l)) sync_running_stats(l, run);
            }
            if (st == PCNN_OK) exchange_after_forward(net->exchange, i);
            continue;
        }
        const bool twin_bn = !sl->direct && layer_is_batchnorm(l);
        if (twin_bn) sync_running_stats(run, l);
        const double t0 = clock_now();
        if (sl->box_dropout) {
            int lo[3], ext[3];
            box_extent3(&sl->mine, lo, ext);
            dropout_forward_box(l, &ctx, lo, ext);
        } else {
            run->ops->forward(run, &ctx);
        }
        const double t1 = clock_now();
        if (twin_bn) sync_running_stats(l, run);
        if (train) overlap_time(sp, i, t1 - start);
        if (train) {
            timing_layer(&net->profile, i, TIMING_FORWARD, t1 - t0);
            trace_span(&net->profile, i, TRACE_FORWARD, t0, t1);
        }
        exchange_after_forward(net->exchange, i);
        exchange_poll(net->exchange);
    }
    if (st == PCNN_OK && sp->group_reducer) st = reducer_error(sp->group_reducer);
    return spatial_checked(net, st);
}

double spatial_loss(pcnn_net *net, const int32_t *labels, const float *targets)
{
    const spatial *sp = net->spatial;
    const spatial_layer *sl = &sp->layers[net->output->index];
    const int n = samples_of(&sl->mine);
    if (n == 0) return 0.0;
    const int group = sp->rank / sp->group_size;
    const int offset = sl->mine.lo[LAYOUT_N] - sp->group_start[group];
    loss_args a = {
        .kind = net->loss,
        .y = net->output->y,
        .s = net->output->out,
        .n = n,
        .labels = labels ? labels + offset : NULL,
        .targets = targets ? targets + (size_t)offset * shape_size(net->output->out) : NULL,
        .norm_samples = sp->batch,
        .scratch = net->loss_scratch,
        .threads = net->threads,
    };
    return loss_compute(&a, net->output->dy);
}

pcnn_status spatial_backward(pcnn_net *net, const run_reduce *global)
{
    spatial *sp = net->spatial;
    run_reduce group_hooks = {.gather = group_gather, .sum = group_sum,
                              .arg = sp->group_reducer,
                              .ranks = sp->group_reducer ? reducer_ranks(sp->group_reducer) : 1};
    pcnn_status st = PCNN_OK;
    for (int i = net->layers.count - 1; i > 0; i--) {
        pcnn_layer *l = net->layers.items[i];
        spatial_layer *sl = &sp->layers[i];
        if (sl->folded || sl->box_dense) { /* spatial_dense.c */
            exchange_before_backward(net->exchange, i);
            if (sl->box_dense) {
                const pcnn_status s2 = spatial_box_dense_backward(net, i, st != PCNN_OK);
                if (st == PCNN_OK) st = s2;
            }
            exchange_after_backward(net->exchange, i);
            exchange_poll(net->exchange);
            continue;
        }
        pcnn_layer *run = sl->direct || sl->box_dropout ? l : sl->twin;
        const run_reduce *reduce = reduce_of(net, i, global, &group_hooks);
        run_ctx ctx = ctx_of(net, sl, true, reduce);
        float *dx[2] = {NULL, NULL};
        for (int j = 0; j < l->num_inputs; j++)
            if (!layer_is_input(l->inputs[j])) dx[j] = run->inputs[j]->dy;
        exchange_before_backward(net->exchange, i);
        const double start = clock_now();
        /* The shared staging holds a later layer's input by now (in
         * place: its halo alone, staged again there); a kept one does not. */
        for (int j = 0; j < l->num_inputs && st == PCNN_OK && !sl->in_place; j++)
            if (sl->moves[j] && !sl->keeps_input && sp->in_y_owner[j] != i)
                st = spatial_restage(net, i, j);
        if (sl->overlap_on || sl->in_place) {
            double exposed = 0.0;
            const double t0 = clock_now();
            if (st == PCNN_OK)
                st = sl->in_place ? spatial_in_place_backward(net, i, &ctx, &exposed)
                                  : spatial_overlapped_backward(net, i, &ctx, &exposed);
            const double t1 = clock_now();
            overlap_time(sp, i, t1 - start);
            timing_layer(&net->profile, i, TIMING_BACKWARD, t1 - t0 - exposed);
            trace_span(&net->profile, i, TRACE_BACKWARD, t0, t1);
            exchange_after_backward(net->exchange, i);
            exchange_poll(net->exchange);
            continue;
        }
        if (ctx.n == 0) {
            for (size_t k = 0; k < l->num_params; k++) l->grads[k] = 0.0f;
            if (reduce) {
                float *none[2] = {NULL, NULL};
                run->ops->backward(run, &ctx, none);
            }
        } else {
            const double t0 = clock_now();
            if (sl->box_dropout)
                dropout_backward_box(l, &ctx, (size_t)l->out.c * box_volume(&sl->mine), dx[0]);
            else
                run->ops->backward(run, &ctx, dx);
            const double t1 = clock_now();
            timing_layer(&net->profile, i, TIMING_BACKWARD, t1 - t0);
            trace_span(&net->profile, i, TRACE_BACKWARD, t0, t1);
        }
        for (int j = 0; j < l->num_inputs && st == PCNN_OK; j++)
            if (sl->moves[j] && !layer_is_input(l->inputs[j])) st = spatial_move_back(net, i, j);
        overlap_time(sp, i, clock_now() - start);
        exchange_after_backward(net->exchange, i);
        exchange_poll(net->exchange);
    }
    if (st == PCNN_OK && sp->group_reducer) st = reducer_error(sp->group_reducer);
    sp->passes++;
    return spatial_checked(net, st);
}

pcnn_status spatial_gather_output(pcnn_net *net, int n, float *out)
{
    spatial *sp = net->spatial;
    const pcnn_layer *o = net->output;
    const spatial_layer *sl = &sp->layers[o->index];
    /* Every rank of a group receives all its samples: overlapping boxes.
     * Staged in buffers of finalize (a rank failing to allocate here alone
     * would leave the others waiting in the move). */
    box *dst = sp->gather_boxes;
    float *staged = sp->gather_staged;
    pcnn_status st = n <= net->max_batch ? PCNN_OK
                                         : FAIL(PCNN_ERR_INTERNAL, "outputs of %d samples", n);
    for (int q = 0; st == PCNN_OK && q < sp->ranks; q++) {
        const int g = q / sp->group_size;
        dst[q] = (box){{sp->group_start[g], 0, 0, 0},
                       {sp->group_start[g] + sp->group_count[g], o->out.d, o->out.h, o->out.w}};
    }
    if (st == PCNN_OK)
        st = box_move(sp->mover, 4 * net->layers.count, o->out.c, sl->have, dst, o->y, staged,
                      false, net->threads);
    if (st == PCNN_OK) cnhw_to_nchw(staged, out, n, o->out.c, shape_spatial(o->out), net->threads);
    return spatial_checked(net, st);
}
