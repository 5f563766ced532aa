/* The Chrome-trace timeline (chrome://tracing, Perfetto): one JSON file
 * with the most recent compute and communication spans of this rank. */
#include <stdio.h>

#include "../core/atomic_file.h"
#include "../core/error.h"
#include "profile.h"

static const char *const span_names[TRACE_KINDS] = {
    "forward", "backward", "update", "allreduce", "alltoall", "allgather", "wait", "halo",
    "shuffle",
};

pcnn_status trace_write(const profile *p, const layer_list *layers, int rank, const char *path)
{
    atomic_file f;
    TRY(atomic_file_open(&f, path));
    const size_t count = p->wrapped ? p->capacity : p->next;
    const size_t first = p->wrapped ? p->next : 0;
    double origin = count ? p->events[first].t0 : 0.0;
    for (size_t k = 0; k < count; k++)
        if (p->events[k].t0 < origin) origin = p->events[k].t0;
    fprintf(f.stream, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    fprintf(f.stream, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                      "\"args\":{\"name\":\"compute\"}},\n", rank);
    fprintf(f.stream, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":1,"
                      "\"args\":{\"name\":\"communication\"}}", rank);
    for (size_t k = 0; k < count; k++) {
        const trace_event *e = &p->events[(first + k) % p->capacity];
        const bool comm = e->kind == TRACE_ALLREDUCE || e->kind == TRACE_ALLTOALL ||
                          e->kind == TRACE_ALLGATHER || e->kind == TRACE_HALO ||
                          e->kind == TRACE_SHUFFLE;
        fprintf(f.stream,
                ",\n{\"name\":\"%s %d %s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,"
                "\"dur\":%.3f,\"pid\":%d,\"tid\":%d}",
                span_names[e->kind], e->layer, layers->items[e->layer]->ops->kind,
                comm ? "comm" : "compute", (e->t0 - origin) * 1e6, (e->t1 - e->t0) * 1e6, rank,
                comm ? 1 : 0);
    }
    fprintf(f.stream, "\n]}\n");
    return atomic_file_commit(&f);
}
