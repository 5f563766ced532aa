/* The profile room: per-layer timing breakdown and the Chrome-trace
 * timeline (seed 001 section 3.3: compute, communication, and the exposed
 * part of communication, per layer).  Recording never allocates: the
 * tables and the trace ring are sized at finalize. */
#ifndef PCNN_PROFILE_H
#define PCNN_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
    TRACE_STEP,      /* a whole training step: the step marker */
    TRACE_HALO,
    TRACE_SHUFFLE,
    TRACE_KINDS
} trace_kind;

typedef struct trace_event {
    int layer;       /* -1 for TRACE_STEP */
    trace_kind kind;
    double t0, t1;
    uint64_t step;   /* TRACE_STEP: the step counter when the step began */
} trace_event;

/* Where this rank's timeline sits among the ranks' (measured by the graph
 * at finalize and again at each merged write, graph/trace_clock.c): a
 * merged trace needs one clock.  Two measurements whose offsets differ by
 * more than their errors also give the drift: a time t of this rank then
 * reads on rank 0's clock linearly through both (trace_clock_to_rank0);
 * otherwise with the offset of the more precise one. */
typedef struct clock_measure {
    double at;       /* this rank's clock at the measurement */
    double offset;   /* seconds to add to this rank's clock to read rank 0's */
    double error;    /* bound on |offset error|: half the best ping's round trip */
} clock_measure;

typedef struct trace_clock {
    int pid;         /* the world rank: the process of this rank in a trace */
    int measured;    /* 0: one process, times relative to its first span; 1 or 2 */
    clock_measure first, last; /* at finalize; at the last merged write */
    double origin;   /* rank 0's clock at finalize's measurement: time 0 of every rank */
} trace_clock;

/* One ping of rank 0 by this rank: this rank's clock when it sent and when
 * the reply came back, and rank 0's clock in the reply. */
typedef struct clock_ping {
    double sent, remote, received;
} clock_ping;

typedef struct profile {
    double (*layer)[TIMING_KINDS]; /* accumulated seconds per layer */
    double (*mark)[TIMING_KINDS];  /* layer as profile_mark left it */
    size_t *layer_params;          /* parameters per layer: splits a range's time */
    int num_layers;
    long steps;                    /* training steps since the last reset */
    double step_seconds;           /* their wall time */
    double since;                  /* clock_now() at the last reset: a span begun
                                      before it counts from it */
    trace_event *events;           /* ring of the most recent spans */
    size_t capacity, next;
    bool wrapped;
    trace_clock clock;             /* kept by profile_reset */
} profile;

/* Tables for the layers of `layers` (their parameter counts are copied)
 * and a trace ring of trace_events spans (0: tracing off). */
pcnn_status profile_alloc(profile *p, const layer_list *layers, size_t trace_events);
void profile_free(profile *p);
void profile_reset(profile *p);
/* Remember the per-layer seconds before a training step, and forget what
 * it added if it fails or does not go ahead: per-step figures stay those
 * of the steps counted. */
void profile_mark(profile *p);
void profile_rewind(profile *p);

/* Record seconds of `kind` for one layer, or for the layers first..last
 * (split in proportion to their parameters). */
void timing_layer(profile *p, int layer, timing_kind kind, double seconds);
void timing_range(profile *p, int first_layer, int last_layer, timing_kind kind,
                  double seconds);

/* Record a span of the timeline (no-op when tracing is off); trace_step
 * the marker of a whole training step. */
void trace_span(profile *p, int layer, trace_kind kind, double t0, double t1);
void trace_step(profile *p, uint64_t step, double t0, double t1);

/* The offset to rank 0's clock from pings (NTP's estimate): the ping with
 * the shortest round trip gives offset = remote - (sent + received) / 2,
 * within error = half that round trip, at = (sent + received) / 2.
 * count >= 1. */
clock_measure trace_clock_estimate(const clock_ping *pings, int count);

/* Record a measurement (the first, or a later one replacing the last). */
void trace_clock_add(trace_clock *c, clock_measure m);

/* This rank's time t on rank 0's clock; the bound of its error (with the
 * drift, the larger of the two measurements' bounds). */
double trace_clock_to_rank0(const trace_clock *c, double t);
double trace_clock_error(const trace_clock *c);

/* Mean seconds per step of `what` for one layer, or all (layer -1). */
double profile_per_step(const profile *p, int layer, pcnn_time what);

/* The share of communication hidden behind computation, in percent; NaN
 * without communication. */
double profile_overlap_ratio(const profile *p);

/* The per-layer table of pcnn_net_timing_report into buf (snprintf-style:
 * returns the full length); `layers` gives the kinds. */
size_t profile_report(const profile *p, const layer_list *layers, char *buf, size_t size);

/* This rank's part of a Chrome trace into buf (snprintf-style: returns the
 * full length, without the terminating NUL): its metadata (process and
 * thread names, the clock measurement) and its spans as JSON objects
 * separated by ",\n", on the common clock of p->clock, pid its world rank.
 * Ranks' parts joined by ",\n" inside trace_header / trace_footer make one
 * trace.  `layers` gives the kinds. */
size_t trace_format(const profile *p, const layer_list *layers, char *buf, size_t size);
extern const char trace_header[], trace_footer[];

/* Write this rank's part alone to `path` (atomically) as a whole trace.
 * Tracing must be on. */
pcnn_status trace_write(const profile *p, const layer_list *layers, const char *path);

#endif
