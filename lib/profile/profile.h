/* The profile room: per-layer timing breakdown and the Chrome-trace
 * timeline (seed 001 section 3.3: compute, communication, and the exposed
 * part of communication, per layer).  Recording never allocates: the
 * tables and the trace ring are sized at finalize. */
#ifndef PCNN_PROFILE_H
#define PCNN_PROFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "../layers/layer.h"
#include "pcnn.h"

typedef enum timing_kind {
    TIMING_FORWARD,
    TIMING_BACKWARD,
    TIMING_UPDATE,   /* summing received pieces + optimizer */
    TIMING_COMM,     /* duration of the collectives (on the engine) */
    TIMING_EXPOSED,  /* main thread blocked waiting for them */
    TIMING_HALO,     /* halo exchanges of a spatial split (graph/spatial_run.c) */
    TIMING_HALO_EXPOSED, /* the part of them not hidden behind computation */
    TIMING_SHUFFLE,  /* moves between distributions */
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
    TRACE_HALO,
    TRACE_SHUFFLE,
    TRACE_KINDS
} trace_kind;

typedef struct trace_event {
    int layer;
    trace_kind kind;
    double t0, t1;
} trace_event;

typedef struct profile {
    double (*layer)[TIMING_KINDS]; /* accumulated seconds per layer */
    size_t *layer_params;          /* parameters per layer: splits a range's time */
    int num_layers;
    long steps;                    /* training steps since the last reset */
    double step_seconds;           /* their wall time */
    trace_event *events;           /* ring of the most recent spans */
    size_t capacity, next;
    bool wrapped;
} profile;

/* Tables for the layers of `layers` (their parameter counts are copied)
 * and a trace ring of trace_events spans (0: tracing off). */
pcnn_status profile_alloc(profile *p, const layer_list *layers, size_t trace_events);
void profile_free(profile *p);
void profile_reset(profile *p);

/* Record seconds of `kind` for one layer, or for the layers first..last
 * (split in proportion to their parameters). */
void timing_layer(profile *p, int layer, timing_kind kind, double seconds);
void timing_range(profile *p, int first_layer, int last_layer, timing_kind kind,
                  double seconds);

/* Record a span of the timeline (no-op when tracing is off). */
void trace_span(profile *p, int layer, trace_kind kind, double t0, double t1);

/* Mean seconds per step of `what` for one layer, or all (layer -1). */
double profile_per_step(const profile *p, int layer, pcnn_time what);

/* The share of communication hidden behind computation, in percent; NaN
 * without communication. */
double profile_overlap_ratio(const profile *p);

/* The per-layer table of pcnn_net_timing_report into buf (snprintf-style:
 * returns the full length); `layers` gives the kinds. */
size_t profile_report(const profile *p, const layer_list *layers, char *buf, size_t size);

/* Write the trace ring to `path` (atomically) as Chrome-trace JSON of
 * process `rank`; `layers` gives the kinds.  Tracing must be on. */
pcnn_status trace_write(const profile *p, const layer_list *layers, int rank, const char *path);

#endif
