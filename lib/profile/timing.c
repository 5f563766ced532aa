/* Timing breakdown: accumulation and the public queries. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../core/error.h"
#include "../core/text.h"
#include "../core/memory.h"
#include "../graph/net.h"
#include "profile.h"

pcnn_status profile_alloc(profile *p, int num_layers, size_t trace_events)
{
    *p = (profile){0};
    p->layer = mem_calloc((size_t)num_layers, sizeof *p->layer);
    p->num_layers = num_layers;
    if (trace_events) p->events = mem_calloc(trace_events, sizeof *p->events);
    if (!p->layer || (trace_events && !p->events)) {
        profile_free(p);
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "timing tables (%zu trace events)", trace_events);
    }
    p->capacity = trace_events;
    return PCNN_OK;
}

void profile_free(profile *p)
{
    mem_free(p->layer);
    mem_free(p->events);
    *p = (profile){0};
}

void profile_reset(profile *p)
{
    memset(p->layer, 0, (size_t)p->num_layers * sizeof *p->layer);
    p->steps = 0;
    p->step_seconds = 0.0;
    p->next = 0;
    p->wrapped = false;
}

void timing_layer(pcnn_net *net, int layer, timing_kind kind, double seconds)
{
    net->profile.layer[layer][kind] += seconds;
}

void timing_bucket(pcnn_net *net, const struct bucket *b, timing_kind kind, double seconds)
{
    if (b->first_layer == b->last_layer) {
        net->profile.layer[b->first_layer][kind] += seconds;
        return;
    }
    for (int i = b->first_layer; i <= b->last_layer; i++)
        net->profile.layer[i][kind] +=
            seconds * (double)net->layers.items[i]->num_params / (double)b->count;
}

void trace_span(pcnn_net *net, int layer, trace_kind kind, double t0, double t1)
{
    profile *p = &net->profile;
    if (!p->capacity) return;
    p->events[p->next] = (trace_event){layer, kind, t0, t1};
    if (++p->next == p->capacity) {
        p->next = 0;
        p->wrapped = true;
    }
}

static const timing_kind public_kind[] = {
    [PCNN_TIME_FORWARD] = TIMING_FORWARD,   [PCNN_TIME_BACKWARD] = TIMING_BACKWARD,
    [PCNN_TIME_UPDATE] = TIMING_UPDATE,     [PCNN_TIME_COMM] = TIMING_COMM,
    [PCNN_TIME_EXPOSED] = TIMING_EXPOSED,
};

PCNN_API pcnn_status pcnn_net_time(const pcnn_net *net, int layer, pcnn_time what,
                                   double *seconds_per_step)
{
    TRY(net_check_ready(net, __func__));
    REQUIRE_PTR(seconds_per_step);
    REQUIRE(layer >= -1 && layer < net->layers.count, PCNN_ERR_INVALID_ARGUMENT,
            "layer %d: must be -1 (all) or in [0, %d)", layer, net->layers.count);
    REQUIRE(what >= PCNN_TIME_FORWARD && what <= PCNN_TIME_STEP, PCNN_ERR_INVALID_ARGUMENT,
            "unknown timing %d", (int)what);
    const profile *p = &net->profile;
    const double steps = p->steps > 0 ? (double)p->steps : 1.0;
    if (what == PCNN_TIME_STEP) {
        *seconds_per_step = p->step_seconds / steps;
        return PCNN_OK;
    }
    double total = 0.0;
    for (int i = 0; i < net->layers.count; i++)
        if (layer < 0 || layer == i) total += p->layer[i][public_kind[what]];
    *seconds_per_step = total / steps;
    return PCNN_OK;
}

static double overlap_ratio(const profile *p, int num_layers)
{
    double comm = 0.0, exposed = 0.0;
    for (int i = 0; i < num_layers; i++) {
        comm += p->layer[i][TIMING_COMM];
        exposed += p->layer[i][TIMING_EXPOSED];
    }
    if (comm <= 0.0) return NAN;
    double r = 100.0 * (comm - exposed) / comm;
    return r < 0.0 ? 0.0 : r;
}

PCNN_API pcnn_status pcnn_net_overlap_ratio(const pcnn_net *net, double *percent)
{
    TRY(net_check_ready(net, __func__));
    REQUIRE_PTR(percent);
    *percent = overlap_ratio(&net->profile, net->layers.count);
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_reset_timing(pcnn_net *net)
{
    TRY(net_check_ready(net, __func__));
    profile_reset(&net->profile);
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_timing_report(const pcnn_net *net, char *buf, size_t size,
                                            size_t *needed)
{
    TRY(net_check_ready(net, __func__));
    REQUIRE(buf || size == 0, PCNN_ERR_INVALID_ARGUMENT, "buf is NULL but size is %zu", size);
    const profile *p = &net->profile;
    const double ms = 1e3 / (p->steps > 0 ? (double)p->steps : 1.0);
    text t = text_start(buf, size);
    text_put(&t, "timing per step over %ld steps (ms)\n", p->steps);
    text_put(&t, "%-5s %-15s %9s %9s %9s %9s %9s\n", "layer", "kind", "forward", "backward", "update",
        "comm", "exposed");
    double sum[TIMING_KINDS] = {0};
    for (int i = 1; i < net->layers.count; i++) {
        const double *v = p->layer[i];
        for (int k = 0; k < TIMING_KINDS; k++) sum[k] += v[k];
        text_put(&t, "%-5d %-15s %9.3f %9.3f %9.3f %9.3f %9.3f\n", i, net->layers.items[i]->ops->kind,
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
    const double r = overlap_ratio(p, net->layers.count);
    if (isnan(r)) text_put(&t, "overlap ratio R: n/a (no communication)\n");
    else text_put(&t, "overlap ratio R = %.1f%%\n", r);
    if (needed) *needed = t.len;
    return PCNN_OK;
}
