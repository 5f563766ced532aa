/* Compute calibration (spec C.5, seed 002 section V-A): every layer of a
 * finalized network timed at its local shapes, with the algorithms chosen
 * at finalize, at two batch sizes, median of repetitions; the optimizer
 * timed on scratch runs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/clock.h"
#include "../core/error.h"
#include "../core/memory.h"
#include "../optim/optim.h"
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

/* Median per (layer, pass) over reps, into med[l * 3 + pass]; the median
 * relative spread (max - min over median) of the forward timings. */
static double medians(const double *samples, int reps, int L, double *med, double *scratch)
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
            med[l * 3 + p] = median(scratch, reps);
            if (p == 0 && med[l * 3] > 1e-5) spreads[counted++] = (hi - lo) / med[l * 3];
        }
    return counted ? median(spreads, counted) : 0;
}

/* Time one batch size: reps passes (the caller warmed up). */
static pcnn_status time_batch(pcnn_net *net, int n, int reps, int L, double *med, double *spread,
                              double *overhead)
{
    double *samples = mem_calloc((size_t)reps * L * 3, sizeof *samples);
    double *over = mem_calloc((size_t)reps, sizeof *over);
    double *scratch = mem_calloc((size_t)reps + (size_t)L + 2, sizeof *scratch);
    pcnn_status st = PCNN_OK;
    if (!samples || !over || !scratch) st = FAIL(PCNN_ERR_OUT_OF_MEMORY, "timing table");
    if (st == PCNN_OK) st = net_time_layers(net, n, reps, samples, over);
    if (st == PCNN_OK) {
        *spread = medians(samples, reps, L, med, scratch);
        *overhead = median(over, reps);
    }
    mem_free(samples);
    mem_free(over);
    mem_free(scratch);
    return st;
}

/* Evict the caches: in a step the optimizer meets its parameters, gradients
 * and state after everything else the step touched. */
#define EVICT_FLOATS ((size_t)8 << 20)
static void evict(float *trash)
{
    for (size_t i = 0; i < EVICT_FLOATS; i += 16) trash[i] += 1.0f;
}

/* The optimizer's seconds on `count` scratch parameters (median of 5, each
 * from cold caches). */
static double time_update(pcnn_optimizer kind, size_t count, int threads, float *buf,
                          float *trash)
{
    float *p = buf, *g = buf + count, *mm = buf + 2 * count, *v = buf + 3 * count;
    const optim_hyper h = {.momentum = 0.9, .beta1 = 0.9, .beta2 = 0.999, .epsilon = 1e-8};
    double t[5];
    optim_update(kind, &h, 1e-3, 0, 1, p, g, mm, v, count, threads); /* warm-up */
    for (int r = 0; r < 5; r++) {
        evict(trash);
        const double t0 = clock_now();
        optim_update(kind, &h, 1e-3, 0, (uint64_t)r + 2, p, g, mm, v, count, threads);
        t[r] = clock_now() - t0;
    }
    return median(t, 5);
}

static pcnn_status calibrate_update(perf_compute *c, pcnn_optimizer kind, int threads,
                                    size_t largest)
{
    size_t big = largest < 4096 ? 4096 : largest;
    if (big > ((size_t)1 << 23)) big = (size_t)1 << 23;
    const size_t small = 256;
    float *buf = mem_calloc(4 * big + EVICT_FLOATS, sizeof *buf);
    if (!buf) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "optimizer timing buffers");
    float *trash = buf + 4 * big;
    const double t_small = time_update(kind, small, threads, buf, trash);
    const double t_big = time_update(kind, big, threads, buf, trash);
    mem_free(buf);
    c->update[1] = (t_big - t_small) / (double)(big - small);
    if (c->update[1] < 0) c->update[1] = t_big / (double)big;
    c->update[0] = fmax(0, t_small - c->update[1] * (double)small);
    return PCNN_OK;
}

pcnn_status perf_calibrate_compute(pcnn_perfmodel *m, pcnn_net *net, double budget,
                                   const char *func)
{
    TRY(net_check_ready(net, func));
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
    if (st == PCNN_OK) st = time_batch(net, hi, 1, L, med_hi, &spread_hi, &over_hi);
    const double pass = clock_now() - start;
    int reps = pass > 0 ? (int)((budget / pass - 1) / 1.5) : 3;
    reps = reps < 2 ? 2 : reps > 15 ? 15 : reps;
    if (st == PCNN_OK) st = time_batch(net, hi, reps, L, med_hi, &spread_hi, &over_hi);
    if (st == PCNN_OK && lo != hi) st = time_batch(net, lo, reps, L, med_lo, &spread_lo, &over_lo);
    size_t largest = 0;
    if (st == PCNN_OK) {
        for (int i = 0; i < L; i++) {
            const pcnn_layer *l = ll->items[i];
            perf_layer *p = &layers[i];
            snprintf(p->kind, sizeof p->kind, "%s", l->ops->kind);
            p->in = l->num_inputs ? l->inputs[0]->out : l->out;
            p->out = l->out;
            p->num_params = l->num_params;
            if (l->num_params > largest) largest = l->num_params;
            const double *H = med_hi + i * 3, *Lo = lo != hi ? med_lo + i * 3 : H;
            fit_line(p->fwd, lo, Lo[0], hi, H[0]);
            fit_line(p->bwd_w, lo, Lo[1], hi, H[1]);
            fit_line(p->bwd_x, lo, fmax(0, Lo[2] - Lo[1]), hi, fmax(0, H[2] - H[1]));
            const bool dx = l->num_inputs && !layer_is_input(l->inputs[0]);
            p->reg_fwd = i ? perf_regressor_time(m, l, hi, 0, dx) : NAN;
            p->reg_bwd = i ? perf_regressor_time(m, l, hi, 1, dx) : NAN;
        }
        st = calibrate_update(&m->compute, net_optimizer(net), net_threads(net), largest);
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
    }
    mem_free(layers);
    mem_free(med_hi);
    mem_free(med_lo);
    return st;
}
