/* Compute calibration (spec C.5, seed 002 section V-A): every layer of a
 * finalized network timed at its local shapes, with the algorithms chosen
 * at finalize, at two batch sizes, mean of repetitions; and the
 * optimizer's calls where a step makes them, right after each pass at the
 * larger batch, with a call's own overhead timed apart. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/clock.h"
#include "../core/error.h"
#include "../core/memory.h"
#include "../kernels/kernels.h"
#include "../optim/optim.h"
#include "../strategy/exchange_choice.h"
#include "perf.h"

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The line through (n0, t0) and (n1, t1); one point: proportional. */
static void fit_line(double out[2], int n0, double t0, int n1, double t1)
{
    if (n1 == n0) {
        out[0] = 0;
        out[1] = t1 / n1;
        return;
    }
    out[1] = (t1 - t0) / (n1 - n0);
    out[0] = t0 - out[1] * n0;
}

static double mean(const double *v, int n)
{
    double sum = 0;
    for (int i = 0; i < n; i++) sum += v[i];
    return sum / n;
}

/* Mean per (layer, pass) over reps, into med[l * 3 + pass]: a step's
 * timing is a mean over steps, preempted ones included, which a median of
 * repetitions underestimates (by about 5 % on a shared 2-core VM); and the
 * median relative spread (max - min over median) of the forward timings. */
static double means(const double *samples, int reps, int L, double *med, double *scratch)
{
    int counted = 0;
    double *spreads = scratch + reps;
    for (int l = 0; l < L; l++)
        for (int p = 0; p < 3; p++) {
            double lo = INFINITY, hi = 0;
            for (int r = 0; r < reps; r++) {
                scratch[r] = samples[((size_t)r * L + l) * 3 + p];
                lo = fmin(lo, scratch[r]);
                hi = fmax(hi, scratch[r]);
            }
            med[l * 3 + p] = mean(scratch, reps);
            const double mid = median(scratch, reps);
            if (p == 0 && mid > 1e-5) spreads[counted++] = (hi - lo) / mid;
        }
    return counted ? median(spreads, counted) : 0;
}

/* The optimizer as a step runs it on this network: its kind, hyper-parameters
 * and threads, each layer's parameters and gradients where the network keeps
 * them, and scratch optimizer state (the network's own is never touched). */
typedef struct update_bench {
    pcnn_optimizer kind;
    optim_hyper hyper;
    double weight_decay;
    int threads;
    float *backup, *m, *v; /* all of the network's parameters; v for Adam only */
    float *sum_dst;        /* half as many: where the sums go, cold as a step's gradients */
    float *recv;           /* the largest bucket: its pieces as an all-to-all received them */
    bucket_span *spans;    /* the buckets an exchange on several ranks makes */
    int num_spans;
    perf_compute calls;    /* the cost of a call (update, update_team, threads) */
} update_bench;

static pcnn_status update_bench_open(update_bench *u, const pcnn_net *net)
{
    const net_training_state s = net_get_training_state(net);
    const size_t total = net_num_params(net);
    *u = (update_bench){.kind = net_optimizer(net), .weight_decay = s.weight_decay,
                        .threads = net_threads(net),
                        .hyper = {.momentum = s.momentum, .beta1 = s.beta1, .beta2 = s.beta2,
                                  .epsilon = s.epsilon}};
    const size_t n = total ? total : 1;
    const layer_list *ll = net_layer_list(net);
    const int L = ll->count;
    u->backup = mem_alloc_floats(n);
    /* As the network's own state: zeroed, on huge pages where they can be
     * (a step's update on small pages pays a TLB miss per 4 KiB). */
    u->m = mem_alloc_floats(n);
    u->v = u->kind == PCNN_OPTIMIZER_ADAM ? mem_alloc_floats(n) : NULL;
    u->sum_dst = mem_alloc_floats(n / 2 + 1);
    if (u->sum_dst) memset(u->sum_dst, 0, (n / 2 + 1) * sizeof(float)); /* no page faults timed */
    u->spans = mem_calloc((size_t)L, sizeof *u->spans);
    size_t *counts = mem_calloc((size_t)L, sizeof *counts);
    pcnn_exchange *kinds = mem_calloc((size_t)L, sizeof *kinds);
    pcnn_status st = PCNN_OK;
    if (!u->backup || !u->m || (u->kind == PCNN_OPTIMIZER_ADAM && !u->v) || !u->sum_dst ||
        !u->spans || !counts || !kinds)
        st = FAIL(PCNN_ERR_OUT_OF_MEMORY, "optimizer timing buffers of %zu parameters", total);
    for (int i = 0; st == PCNN_OK && i < L; i++) {
        counts[i] = ll->items[i]->num_params;
        kinds[i] = PCNN_EXCHANGE_ALLREDUCE;
    }
    if (st == PCNN_OK)
        u->num_spans = exchange_group_buckets(counts, kinds, NULL, L, net_bucket_bytes(net), true,
                                              u->spans);
    size_t largest = 0;
    for (int k = 0; st == PCNN_OK && k < u->num_spans; k++)
        if (u->spans[k].count > largest) largest = u->spans[k].count;
    if (st == PCNN_OK && !(u->recv = mem_calloc(largest + 1, sizeof *u->recv))) /* touched */
        st = FAIL(PCNN_ERR_OUT_OF_MEMORY, "a receive buffer of %zu floats", largest);
    mem_free(counts);
    mem_free(kinds);
    return st;
}

static void update_bench_close(update_bench *u)
{
    mem_free(u->backup);
    mem_free(u->m);
    mem_free(u->v);
    mem_free(u->sum_dst);
    mem_free(u->recv);
    mem_free(u->spans);
}

/* The optimizer as a step calls it, in the step's cache state: right after
 * forward and backward at this batch, one call per bucket (as the exchange
 * groups the layers on several ranks; one rank makes one call of them all,
 * which differs by the calls' overheads alone), in forward order.  The
 * calls run on the network's parameters and gradients (where the step
 * finds them: in cache or not) with a zero learning rate, and the
 * parameters are restored from a copy taken before the passes, bit for bit.
 * seconds[l]: layer l's share (by parameters) of its bucket's call, less
 * the call's overhead. */
static void time_updates(const update_bench *u, pcnn_net *net, double *seconds,
                         double *sum_seconds, double *sum_count)
{
    const layer_list *ll = net_layer_list(net);
    float *params = net_params(net);
    for (int i = 0; i < ll->count; i++) seconds[i] = 0;
    *sum_seconds = *sum_count = 0;
    for (int k = 0; k < u->num_spans; k++) {
        const bucket_span *sp = &u->spans[k];
        const pcnn_layer *first = ll->items[sp->first_layer];
        const size_t at = first->param_offset;
        const double t0 = clock_now();
        optim_update(u->kind, &u->hyper, 0.0, u->weight_decay, 1, params + at, first->grads,
                     u->m + at, u->v ? u->v + at : NULL, sp->count, u->threads);
        const double work =
            fmax(0, clock_now() - t0 - perf_update_call(&u->calls, (double)sp->count));
        for (int i = sp->first_layer; i <= sp->last_layer; i++)
            seconds[i] = work * (double)ll->items[i]->num_params / (double)sp->count;
    }
    /* The all-to-all strategy's sum (its kernel, sum_pieces) on two ranks,
     * after every call (not between two, whose timings its traffic would
     * disturb), as a step meets it: its two pieces just written by the
     * receive (here a copy of the two halves of the bucket's parameters),
     * its destination cold (a buffer no pass touches). */
    for (int k = 0; k < u->num_spans; k++) {
        const bucket_span *sp = &u->spans[k];
        const size_t at = ll->items[sp->first_layer]->param_offset, half = sp->count / 2;
        if (half < 16) continue;
        memcpy(u->recv, u->backup + at, 2 * half * sizeof *u->recv);
        const double t1 = clock_now();
        sum_pieces(u->recv, half, 2, u->sum_dst + at / 2, u->threads);
        *sum_seconds += clock_now() - t1;
        *sum_count += (double)half;
    }
    memcpy(params, u->backup, net_num_params(net) * sizeof *params);
}

typedef struct update_run {
    const update_bench *u;
    pcnn_net *net;
    double *seconds;   /* per repetition and layer */
    double *sum_gamma; /* per repetition: the cold sum's seconds per byte (0: none) */
} update_run;

static void after_pass(void *arg, int rep)
{
    const update_run *r = arg;
    double t, n;
    time_updates(r->u, r->net, r->seconds + (size_t)rep * net_layer_list(r->net)->count, &t, &n);
    r->sum_gamma[rep] = n > 0 ? t / (4.0 * n) : 0;
}

/* Time one batch size: reps passes (the caller warmed up); with `u`, after
 * each pass the optimizer's calls (mean per layer into upd). */
static pcnn_status time_batch(pcnn_net *net, int n, int reps, int L, double *med, double *spread,
                              double *overhead, const update_bench *u, double *upd,
                              double *sum_gamma)
{
    double *samples = mem_calloc((size_t)reps * L * 3, sizeof *samples);
    double *over = mem_calloc((size_t)reps, sizeof *over);
    double *scratch = mem_calloc((size_t)reps + (size_t)L + 2, sizeof *scratch);
    double *ups = u ? mem_calloc((size_t)reps * L, sizeof *ups) : NULL;
    double *sums = u ? mem_calloc((size_t)reps, sizeof *sums) : NULL;
    pcnn_status st = PCNN_OK;
    if (!samples || !over || !scratch || (u && (!ups || !sums)))
        st = FAIL(PCNN_ERR_OUT_OF_MEMORY, "timing table");
    update_run run = {u, net, ups, sums};
    if (st == PCNN_OK && u) memcpy(u->backup, net_params(net), net_num_params(net) * sizeof(float));
    if (st == PCNN_OK)
        st = net_time_layers(net, n, reps, samples, over, u ? after_pass : NULL, &run);
    if (st == PCNN_OK) {
        *spread = means(samples, reps, L, med, scratch);
        *overhead = median(over, reps);
        for (int l = 0; u && l < L; l++) {
            for (int r = 0; r < reps; r++) scratch[r] = ups[(size_t)r * L + l];
            upd[l] = mean(scratch, reps);
        }
        if (u) *sum_gamma = median(sums, reps);
    }
    mem_free(samples);
    mem_free(over);
    mem_free(scratch);
    mem_free(ups);
    mem_free(sums);
    return st;
}

/* Seconds of one warm optimizer call on `count` parameters (median of 15). */
static double time_call(const update_bench *u, float *buf, size_t count, int threads)
{
    float *p = buf, *g = buf + count, *mm = buf + 2 * count, *v = buf + 3 * count;
    double t[15];
    for (int r = -2; r < 15; r++) { /* two warm-up calls */
        const double t0 = clock_now();
        optim_update(u->kind, &u->hyper, 1e-3, u->weight_decay, 1, p, g, mm, v, count, threads);
        if (r >= 0) t[r] = clock_now() - t0;
    }
    return median(t, 15);
}

/* Seconds per byte of a piece beyond the first in that sum on small
 * pieces in cache (a network without buckets to time it on: time_updates
 * times it as a step meets it), the threads the step uses (median of 15
 * after two warm-up runs). */
static double time_sum(float *buf, size_t n, int threads)
{
    double t[15];
    for (int r = -2; r < 15; r++) {
        const double t0 = clock_now();
        sum_pieces(buf, n, 2, buf + 2 * n, threads);
        if (r >= 0) t[r] = clock_now() - t0;
    }
    return median(t, 15) / (4.0 * (double)n);
}

/* The optimizer's cost per call: inline (a tiny run), and with a thread
 * team: the smallest run parallel_for splits, less its work on one thread
 * shared by the team; and the sharded update's summation. */
static pcnn_status calibrate_update_calls(perf_compute *c, const update_bench *u)
{
    c->threads = u->threads;
    const size_t team = PAR_MIN_WORK / 2; /* optim_update's work is 2 count */
    const size_t pieces = (size_t)1 << 15; /* 3 x 128 KiB: in cache */
    float *buf = mem_calloc(3 * pieces > 4 * team ? 3 * pieces : 4 * team, sizeof *buf);
    if (!buf) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "optimizer timing buffers");
    c->update[0] = time_call(u, buf, 16, 1);
    c->update_team = c->update[0];
    if (u->threads > 1) {
        const double one = time_call(u, buf, team, 1), all = time_call(u, buf, team, u->threads);
        c->update_team = fmax(c->update[0], all - one / u->threads);
    }
    c->sum_gamma = time_sum(buf, pieces, u->threads);
    mem_free(buf);
    return PCNN_OK;
}

pcnn_status perf_calibrate_compute(pcnn_perfmodel *m, pcnn_net *net, double budget,
                                   const char *func)
{
    TRY(net_check_ready(net, func));
    net_layer_split split;
    if (net_layer_split_of(net, 0, &split))
        return error_set(PCNN_ERR_INVALID_STATE, func,
                         "the network is spatially distributed: its layers run on boxes, not "
                         "whole samples; calibrate a twin of it without a distribution (same "
                         "layers, one rank), then predict this one with that model");
    TRY(net_settle(net)); /* parameters in flight land before they are copied */
    const double start = clock_now();
    const layer_list *ll = net_layer_list(net);
    const int L = ll->count, hi = net_local_max_batch(net), lo = hi > 1 ? hi / 2 : 1;
    double *med_hi = mem_calloc((size_t)L * 3, sizeof(double));
    double *med_lo = mem_calloc((size_t)L * 3, sizeof(double));
    perf_layer *layers = mem_calloc((size_t)L, sizeof *layers);
    pcnn_status st = PCNN_OK;
    if (!med_hi || !med_lo || !layers) st = FAIL(PCNN_ERR_OUT_OF_MEMORY, "compute table");
    /* A warm-up pass measures the cost of one; the budget sets how many
     * follow: reps at the largest batch and reps at about half of it. */
    double spread_hi = 0, spread_lo = 0, over_hi = 0, over_lo = 0;
    update_bench u = {0};
    double *upd = mem_calloc((size_t)L, sizeof *upd);
    if (st == PCNN_OK && !upd) st = FAIL(PCNN_ERR_OUT_OF_MEMORY, "update table");
    perf_log(m, PCNN_LOG_INFO, "calibrate_compute: %d layers at batches %d and %d, budget %g s",
             L, hi, lo, budget);
    if (st == PCNN_OK) st = update_bench_open(&u, net);
    if (st == PCNN_OK) st = calibrate_update_calls(&u.calls, &u);
    double cold_sum = 0;
    if (st == PCNN_OK)
        st = time_batch(net, hi, 1, L, med_hi, &spread_hi, &over_hi, &u, upd, &cold_sum);
    const double pass = clock_now() - start;
    int reps = pass > 0 ? (int)((budget / pass - 1) / 1.5) : 3;
    reps = reps < 2 ? 2 : reps > 15 ? 15 : reps;
    if (st == PCNN_OK)
        perf_log(m, PCNN_LOG_INFO, "calibrate_compute: warm-up pass %.3g s: %d repetitions at "
                 "each batch", pass, reps);
    double t = clock_now();
    if (st == PCNN_OK)
        st = time_batch(net, hi, reps, L, med_hi, &spread_hi, &over_hi, &u, upd, &cold_sum);
    if (st == PCNN_OK)
        perf_log(m, PCNN_LOG_INFO, "calibrate_compute: batch %d timed (%.3g s, spread %.0f %%)",
                 hi, clock_now() - t, 100 * spread_hi);
    t = clock_now();
    if (st == PCNN_OK && lo != hi) {
        st = time_batch(net, lo, reps, L, med_lo, &spread_lo, &over_lo, NULL, NULL, NULL);
        if (st == PCNN_OK)
            perf_log(m, PCNN_LOG_INFO, "calibrate_compute: batch %d timed (%.3g s, spread "
                     "%.0f %%)", lo, clock_now() - t, 100 * spread_lo);
    }
    if (st == PCNN_OK) {
        for (int i = 0; i < L; i++) {
            const pcnn_layer *l = ll->items[i];
            perf_layer *p = &layers[i];
            snprintf(p->kind, sizeof p->kind, "%s", l->ops->kind);
            p->in = l->num_inputs ? l->inputs[0]->out : l->out;
            p->out = l->out;
            p->num_params = l->num_params;
            p->update = upd[i];
            const double *H = med_hi + i * 3, *Lo = lo != hi ? med_lo + i * 3 : H;
            fit_line(p->fwd, lo, Lo[0], hi, H[0]);
            fit_line(p->bwd_w, lo, Lo[1], hi, H[1]);
            fit_line(p->bwd_x, lo, fmax(0, Lo[2] - Lo[1]), hi, fmax(0, H[2] - H[1]));
            const bool dx = l->num_inputs && !layer_is_input(l->inputs[0]);
            p->reg_fwd = i ? perf_regressor_time(m, l, hi, 0, dx) : NAN;
            p->reg_bwd = i ? perf_regressor_time(m, l, hi, 1, dx) : NAN;
        }
    }
    if (st == PCNN_OK) {
        perf_compute *c = &m->compute;
        mem_free(c->layers);
        c->layers = layers;
        layers = NULL;
        c->num_layers = L;
        c->fingerprint = perf_fingerprint(ll);
        c->threads = net_threads(net);
        c->batch_lo = lo;
        c->batch_hi = hi;
        c->optimizer = (int)net_optimizer(net);
        fit_line(c->overhead, lo, lo != hi ? over_lo : over_hi, hi, over_hi);
        c->spread = fmax(spread_hi, spread_lo);
        c->pace = 1; /* relative to the table it replaces */
        c->update[0] = u.calls.update[0];
        c->update_team = u.calls.update_team;
        /* The sum as a step meets it (time_updates) where the network has
         * buckets to time it on, else on small pieces in cache. */
        c->sum_gamma = cold_sum > 0 ? cold_sum : u.calls.sum_gamma;
        /* For other networks: this one's mean cost per parameter. */
        double work = 0, count = 0;
        for (int i = 0; i < L; i++) {
            work += c->layers[i].update;
            count += (double)c->layers[i].num_params;
        }
        c->update[1] = count > 0 ? fmax(0, work) / count : 0;
        perf_log(m, PCNN_LOG_INFO, "calibrate_compute: done in %.3g s", clock_now() - start);
    }
    update_bench_close(&u);
    mem_free(upd);
    mem_free(layers);
    mem_free(med_hi);
    mem_free(med_lo);
    return st;
}
