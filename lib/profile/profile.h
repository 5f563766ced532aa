/* The profile room: per-layer timing breakdown and the Chrome-trace
 * timeline (seed 001 section 3.3: compute, communication, and the exposed
 * part of communication, per layer).  Recording never allocates: the
 * tables and the trace ring are sized at finalize. */
#ifndef PCNN_PROFILE_H
#define PCNN_PROFILE_H

#include <stddef.h>

#include "pcnn.h"

struct bucket;

typedef enum timing_kind {
    TIMING_FORWARD,
    TIMING_BACKWARD,
    TIMING_UPDATE,   /* summing received pieces + optimizer */
    TIMING_COMM,     /* duration of the collectives (on the engine) */
    TIMING_EXPOSED,  /* main thread blocked waiting for them */
    TIMING_KINDS
} timing_kind;

typedef enum trace_kind {
    TRACE_FORWARD,
    TRACE_BACKWARD,
    TRACE_UPDATE,
    TRACE_ALLREDUCE,
    TRACE_ALLTOALL,
    TRACE_ALLGATHER,
    TRACE_WAIT,
    TRACE_KINDS
} trace_kind;

typedef struct trace_event {
    int layer;
    trace_kind kind;
    double t0, t1;
} trace_event;

typedef struct profile {
    double (*layer)[TIMING_KINDS]; /* accumulated seconds per layer */
    int num_layers;
    long steps;                    /* training steps since the last reset */
    double step_seconds;           /* their wall time */
    trace_event *events;           /* ring of the most recent spans */
    size_t capacity, next;
    bool wrapped;
} profile;

pcnn_status profile_alloc(profile *p, int num_layers, size_t trace_events);
void profile_free(profile *p);
void profile_reset(profile *p);

/* Record seconds of `kind` for one layer, or for a bucket (split over its
 * layers in proportion to their parameters). */
void timing_layer(pcnn_net *net, int layer, timing_kind kind, double seconds);
void timing_bucket(pcnn_net *net, const struct bucket *b, timing_kind kind, double seconds);

/* Record a span of the timeline (no-op when tracing is off). */
void trace_span(pcnn_net *net, int layer, trace_kind kind, double t0, double t1);

#endif
