/* Timing breakdown: accumulation, the per-step means and the report. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../core/clock.h"
#include "../core/error.h"
#include "../core/text.h"
#include "../core/memory.h"
#include "profile.h"

pcnn_status profile_alloc(profile *p, const layer_list *layers, size_t trace_events)
{
    const int num_layers = layers->count;
    *p = (profile){0};
    p->layer = mem_calloc((size_t)num_layers, sizeof *p->layer);
    p->mark = mem_calloc((size_t)num_layers, sizeof *p->mark);
    p->layer_params = mem_calloc((size_t)num_layers, sizeof *p->layer_params);
    p->num_layers = num_layers;
    if (trace_events) p->events = mem_calloc(trace_events, sizeof *p->events);
    if (!p->layer || !p->mark || !p->layer_params || (trace_events && !p->events)) {
        profile_free(p);
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "timing tables (%zu trace events)", trace_events);
    }
    for (int i = 0; i < num_layers; i++) p->layer_params[i] = layers->items[i]->num_params;
    p->capacity = trace_events;
    return PCNN_OK;
}

void profile_free(profile *p)
{
    mem_free(p->layer);
    mem_free(p->mark);
    mem_free(p->layer_params);
    mem_free(p->events);
    *p = (profile){0};
}

void profile_reset(profile *p)
{
    memset(p->layer, 0, (size_t)p->num_layers * sizeof *p->layer);
    p->steps = 0;
    p->step_seconds = 0.0;
    p->since = clock_now();
    p->next = 0;
    p->wrapped = false;
}

void profile_mark(profile *p)
{
    if (p->layer) memcpy(p->mark, p->layer, (size_t)p->num_layers * sizeof *p->layer);
}

void profile_rewind(profile *p)
{
    if (p->layer) memcpy(p->layer, p->mark, (size_t)p->num_layers * sizeof *p->layer);
}

void timing_layer(profile *p, int layer, timing_kind kind, double seconds)
{
    p->layer[layer][kind] += seconds;
}

void timing_range(profile *p, int first_layer, int last_layer, timing_kind kind,
                  double seconds)
{
    if (first_layer == last_layer) {
        p->layer[first_layer][kind] += seconds;
        return;
    }
    size_t count = 0;
    for (int i = first_layer; i <= last_layer; i++) count += p->layer_params[i];
    for (int i = first_layer; i <= last_layer; i++)
        p->layer[i][kind] += seconds * (double)p->layer_params[i] / (double)count;
}

void trace_span(profile *p, int layer, trace_kind kind, double t0, double t1)
{
    if (!p->capacity) return;
    p->events[p->next] = (trace_event){layer, kind, t0, t1, 0};
    if (++p->next == p->capacity) {
        p->next = 0;
        p->wrapped = true;
    }
}

static const timing_kind public_kind[] = {
    [PCNN_TIME_FORWARD] = TIMING_FORWARD,   [PCNN_TIME_BACKWARD] = TIMING_BACKWARD,
    [PCNN_TIME_UPDATE] = TIMING_UPDATE,     [PCNN_TIME_COMM] = TIMING_COMM,
    [PCNN_TIME_EXPOSED] = TIMING_EXPOSED,   [PCNN_TIME_HALO] = TIMING_HALO,
    [PCNN_TIME_HALO_EXPOSED] = TIMING_HALO_EXPOSED, [PCNN_TIME_SHUFFLE] = TIMING_SHUFFLE,
};

double profile_per_step(const profile *p, int layer, pcnn_time what)
{
    const double steps = p->steps > 0 ? (double)p->steps : 1.0;
    if (what == PCNN_TIME_STEP) return p->step_seconds / steps;
    double total = 0.0;
    for (int i = 0; i < p->num_layers; i++)
        if (layer < 0 || layer == i) total += p->layer[i][public_kind[what]];
    return total / steps;
}

double profile_overlap_ratio(const profile *p)
{
    double comm = 0.0, exposed = 0.0;
    for (int i = 0; i < p->num_layers; i++) {
        comm += p->layer[i][TIMING_COMM];
        exposed += p->layer[i][TIMING_EXPOSED];
    }
    if (comm <= 0.0) return NAN;
    double r = 100.0 * (comm - exposed) / comm;
    return r < 0.0 ? 0.0 : r;
}

size_t profile_report(const profile *p, const layer_list *layers, char *buf, size_t size)
{
    const double ms = 1e3 / (p->steps > 0 ? (double)p->steps : 1.0);
    text t = text_start(buf, size);
    text_put(&t, "timing per step over %ld steps (ms)\n", p->steps);
    text_put(&t, "%-5s %-15s %9s %9s %9s %9s %9s\n", "layer", "kind", "forward", "backward", "update",
        "comm", "exposed");
    double sum[TIMING_KINDS] = {0};
    for (int i = 1; i < p->num_layers; i++) {
        const double *v = p->layer[i];
        for (int k = 0; k < TIMING_KINDS; k++) sum[k] += v[k];
        text_put(&t, "%-5d %-15s %9.3f %9.3f %9.3f %9.3f %9.3f\n", i, layers->items[i]->ops->kind,
            v[TIMING_FORWARD] * ms, v[TIMING_BACKWARD] * ms, v[TIMING_UPDATE] * ms,
            v[TIMING_COMM] * ms, v[TIMING_EXPOSED] * ms);
    }
    text_put(&t, "%-5s %-15s %9.3f %9.3f %9.3f %9.3f %9.3f\n", "total", "", sum[TIMING_FORWARD] * ms,
        sum[TIMING_BACKWARD] * ms, sum[TIMING_UPDATE] * ms, sum[TIMING_COMM] * ms,
        sum[TIMING_EXPOSED] * ms);
    const double step = p->step_seconds * ms;
    /* What the columns do not cover: input conversion, the loss, and the
     * agreement collectives (which also absorb waiting for slower ranks). */
    const double other = step - (sum[TIMING_FORWARD] + sum[TIMING_BACKWARD] +
                                 sum[TIMING_UPDATE] + sum[TIMING_EXPOSED]) * ms;
    text_put(&t, "step %.3f ms (other: input, loss, agreement %.3f ms); exposed communication "
                 "%.3f ms (%.1f%% of the step); ",
             step, other > 0 ? other : 0.0, sum[TIMING_EXPOSED] * ms,
             step > 0 ? 100.0 * sum[TIMING_EXPOSED] * ms / step : 0.0);
    const double r = profile_overlap_ratio(p);
    if (isnan(r)) text_put(&t, "overlap ratio R: n/a (no communication)\n");
    else text_put(&t, "overlap ratio R = %.1f%%\n", r);
    /* A spatial split: its halo exchanges and shuffles, per layer. */
    if (sum[TIMING_HALO] + sum[TIMING_SHUFFLE] > 0.0) {
        text_put(&t, "%-5s %-15s %9s %9s %9s\n", "layer", "kind", "halo", "exposed", "shuffle");
        for (int i = 1; i < p->num_layers; i++) {
            const double *v = p->layer[i];
            if (v[TIMING_HALO] + v[TIMING_SHUFFLE] <= 0.0) continue;
            text_put(&t, "%-5d %-15s %9.3f %9.3f %9.3f\n", i, layers->items[i]->ops->kind,
                v[TIMING_HALO] * ms, v[TIMING_HALO_EXPOSED] * ms, v[TIMING_SHUFFLE] * ms);
        }
        text_put(&t, "%-5s %-15s %9.3f %9.3f %9.3f\n", "total", "", sum[TIMING_HALO] * ms,
            sum[TIMING_HALO_EXPOSED] * ms, sum[TIMING_SHUFFLE] * ms);
    }
    return t.len;
}
