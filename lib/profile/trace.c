/* The Chrome-trace timeline (chrome://tracing, Perfetto): this rank's
 * most recent compute and communication spans and step markers, on one
 * clock shared by all ranks, so that the ranks' parts make one trace. */
#include <math.h>
#include <stdio.h>

#include "../core/atomic_file.h"
#include "../core/error.h"
#include "../core/memory.h"
#include "../core/text.h"
#include "profile.h"

static const char *const span_names[TRACE_KINDS] = {
    "forward", "backward", "update", "allreduce", "alltoall", "allgather", "wait", "step",
    "halo", "shuffle",
};

/* Tracks (Chrome's threads) of one rank's process. */
enum { TRACK_COMPUTE, TRACK_COMM, TRACK_STEPS };

const char trace_header[] = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
const char trace_footer[] = "\n]}\n";

void trace_step(profile *p, uint64_t step, double t0, double t1)
{
    if (!p->capacity) return;
    trace_span(p, -1, TRACE_STEP, t0, t1);
    const size_t last = (p->next ? p->next : p->capacity) - 1;
    p->events[last].step = step;
}

clock_measure trace_clock_estimate(const clock_ping *pings, int count)
{
    int best = 0;
    for (int k = 1; k < count; k++)
        if (pings[k].received - pings[k].sent < pings[best].received - pings[best].sent) best = k;
    const clock_ping *b = &pings[best];
    const double mid = 0.5 * (b->sent + b->received);
    return (clock_measure){mid, b->remote - mid, 0.5 * (b->received - b->sent)};
}

void trace_clock_add(trace_clock *c, clock_measure m)
{
    if (c->measured == 0) c->first = m;
    c->last = m;
    c->measured = c->measured == 0 ? 1 : 2;
}

/* The drift is known when the offset changed between the measurements by
 * more than their errors could explain; otherwise the better measurement
 * alone is the offset (a noisy one on a busy machine must not tilt the
 * whole timeline). */
static bool drift_known(const trace_clock *c)
{
    return c->measured == 2 && c->last.at > c->first.at &&
           fabs(c->last.offset - c->first.offset) > c->first.error + c->last.error;
}

static const clock_measure *better(const trace_clock *c)
{
    return c->last.error < c->first.error ? &c->last : &c->first;
}

double trace_clock_to_rank0(const trace_clock *c, double t)
{
    const clock_measure *a = &c->first, *b = &c->last;
    if (!drift_known(c)) return t + better(c)->offset;
    return t + a->offset + (b->offset - a->offset) * (t - a->at) / (b->at - a->at);
}

double trace_clock_error(const trace_clock *c)
{
    if (!drift_known(c)) return better(c)->error;
    return c->first.error > c->last.error ? c->first.error : c->last.error;
}

/* Seconds on the trace's time axis (microseconds in the file): rank 0's
 * clock from its measurement at finalize on, or without one this rank's
 * own from its first span. */
static double axis(const profile *p, double t, double own_zero)
{
    return p->clock.measured ? trace_clock_to_rank0(&p->clock, t) - p->clock.origin
                             : t - own_zero;
}

static double own_zero(const profile *p, size_t count, size_t first)
{
    double origin = count ? p->events[first].t0 : 0.0;
    for (size_t k = 0; k < count; k++)
        if (p->events[k].t0 < origin) origin = p->events[k].t0;
    return origin;
}

static void put_metadata(text *t, int pid, const trace_clock *c)
{
    static const char *const tracks[] = {"compute", "communication", "steps"};
    text_put(t, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                "\"args\":{\"name\":\"rank %d\"}},\n", pid, pid);
    text_put(t, "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                "\"args\":{\"sort_index\":%d}}", pid, pid);
    for (int k = 0; k < 3; k++)
        text_put(t, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                    "\"args\":{\"name\":\"%s\"}}", pid, k, tracks[k]);
    /* The measurement itself, so that a reader knows how far to trust the
     * alignment of this rank with rank 0. */
    const double drift = drift_known(c) ? (c->last.offset - c->first.offset) /
                                               (c->last.at - c->first.at)
                                         : 0.0;
    text_put(t, ",\n{\"name\":\"clock sync\",\"cat\":\"clock\",\"ph\":\"i\",\"s\":\"p\","
                "\"ts\":0,\"pid\":%d,\"tid\":%d,\"args\":{\"measured\":%s,"
                "\"offset_us\":%.3f,\"error_us\":%.3f,\"measurements\":%d,"
                "\"drift_ppm\":%.3f}}",
             pid, TRACK_STEPS, c->measured ? "true" : "false",
             (trace_clock_to_rank0(c, c->last.at) - c->last.at) * 1e6,
             trace_clock_error(c) * 1e6, c->measured, drift * 1e6);
}

size_t trace_format(const profile *p, const layer_list *layers, char *buf, size_t size)
{
    text t = text_start(buf, size);
    const int pid = p->clock.pid;
    const size_t count = p->wrapped ? p->capacity : p->next;
    const size_t first = p->wrapped ? p->next : 0;
    const double zero = own_zero(p, count, first);
    put_metadata(&t, pid, &p->clock);
    for (size_t k = 0; k < count; k++) {
        const trace_event *e = &p->events[(first + k) % p->capacity];
        const double t0 = axis(p, e->t0, zero), t1 = axis(p, e->t1, zero);
        const double ts = t0 * 1e6, dur = (t1 - t0) * 1e6;
        if (e->kind == TRACE_STEP) {
            text_put(&t, ",\n{\"name\":\"step %llu\",\"cat\":\"step\",\"ph\":\"X\",\"ts\":%.3f,"
                         "\"dur\":%.3f,\"pid\":%d,\"tid\":%d,\"args\":{\"step\":%llu}}",
                     (unsigned long long)e->step, ts, dur, pid, TRACK_STEPS,
                     (unsigned long long)e->step);
            continue;
        }
        const bool comm = e->kind == TRACE_ALLREDUCE || e->kind == TRACE_ALLTOALL ||
                          e->kind == TRACE_ALLGATHER || e->kind == TRACE_HALO ||
                          e->kind == TRACE_SHUFFLE;
        text_put(&t, ",\n{\"name\":\"%s %d %s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,"
                     "\"dur\":%.3f,\"pid\":%d,\"tid\":%d}",
                 span_names[e->kind], e->layer, layers->items[e->layer]->ops->kind,
                 comm ? "comm" : "compute", ts, dur, pid, comm ? TRACK_COMM : TRACK_COMPUTE);
    }
    return t.len;
}

pcnn_status trace_write(const profile *p, const layer_list *layers, const char *path)
{
    const size_t len = trace_format(p, layers, NULL, 0);
    char *body = mem_alloc(len + 1);
    if (!body) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "the trace text (%zu bytes)", len + 1);
    trace_format(p, layers, body, len + 1);
    atomic_file f;
    pcnn_status st = atomic_file_open(&f, path);
    if (st == PCNN_OK) {
        fputs(trace_header, f.stream);
        fwrite(body, 1, len, f.stream);
        fputs(trace_footer, f.stream);
        st = atomic_file_commit(&f);
    }
    mem_free(body);
    return st;
}
