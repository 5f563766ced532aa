/* The performance model's handle and its tables (spec WP3).  The room sits
 * above graph: it reads finalized networks through graph/graph.h. */
#ifndef PCNN_PERF_PERF_H
#define PCNN_PERF_PERF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../graph/graph.h"
#include "../parallel/layout.h"
#include "collectives.h"
#include "sim.h"

#define PERF_FORMAT_VERSION 6u /* 2: per-layer update timings; 3: the link's poll_cpu;
                                  4: its mem_contention by size; 5: the ranks' pace;
                                  6: the collectives' repetition spread */
#define PERF_FORMAT_OLDEST 2u  /* read too (poll_cpu 0, mem_contention 1, pace 1) */
#define PERF_KIND_LEN 24

/* What any machine can do, held on set_param and load so that every
 * prediction stays finite: a latency at most 10 s, a time per byte at
 * most 1 ms (1 kB/s, slower than any link or memory), a link of 1 kbit/s
 * to 1 Pbit/s, a timing at most a day. */
#define PERF_MAX_LATENCY_S 10.0
#define PERF_MAX_S_PER_BYTE 1e-3
#define PERF_MIN_LINK_GBITS 1e-6
#define PERF_MAX_LINK_GBITS 1e6
#define PERF_MAX_SECONDS 86400.0

/* One layer's measured costs, each a + b n over the local batch n, fitted
 * through the two timed batches. */
typedef struct perf_layer {
    char kind[PERF_KIND_LEN];
    shape in, out;
    uint64_t num_params;
    double fwd[2], bwd_w[2], bwd_x[2]; /* backward without the input gradient; the rest */
    double reg_fwd, reg_bwd;           /* the regressors' estimate at batch_hi (NaN: none) */
    double update; /* seconds of the optimizer's work on the layer's parameters (a call's
                      overhead apart): its share of its bucket's call, timed as a step
                      makes it, after a pass at batch_hi */
} perf_layer;

typedef struct perf_compute {
    int num_layers;     /* 0: not calibrated */
    perf_layer *layers;
    uint64_t fingerprint; /* of the network's layers (perf_fingerprint) */
    int threads, batch_lo, batch_hi;
    int optimizer;      /* pcnn_optimizer the update was timed with */
    double update[2];   /* optimizer: seconds per call (inline) + per parameter (the
                           network's mean, for networks without this table) */
    double update_team; /* seconds per call that opens a thread team (parallel_for) */
    double sum_gamma;   /* all-to-all's sum of the received pieces (sum_pieces): seconds
                           per byte of each piece beyond the first, with the threads, the
                           pieces as just received, the destination cold (small pieces
                           in cache: no buckets) */
    double overhead[2]; /* input copy and loss: a + b n */
    double spread;      /* median relative spread of the repetitions (timing noise) */
    double pace;        /* >= 1: the slowest rank's computation over this table's (a
                           synchronous step waits for it at every collective); 0 or 1:
                           this table's pace */
} perf_compute;

typedef struct perf_knobs {
    double alpha;       /* < 0: calibrated */
    double beta;        /* 0: calibrated */
    double link_gbits;  /* 0: calibrated */
    int strategy;       /* -1: the network's */
    int engine;         /* 0 the network's, 1 thread, 2 nonblocking */
    double nb_progress;
    int source;         /* 0 best, 1 timings, 2 regressors */
} perf_knobs;

struct pcnn_perfmodel {
    perf_link link;
    perf_compute compute;
    perf_knobs knobs;
    void *regressors;   /* perf_regressors of regressor.h when built with them */
    /* The last prediction. */
    int last_layers;
    double (*last)[SIM_KINDS];
    double last_step;
    uint64_t last_fingerprint;
    int last_ranks;     /* the ranks it was for */
    /* pcnn_perfmodel_set_log_callback's (perf/progress.c); neither saved
     * nor shared: each rank's host has its own. */
    pcnn_log_callback log;
    void *log_user;
};

/* A line through the model's log callback, if it has one (m may be NULL). */
void perf_log(const pcnn_perfmodel *m, pcnn_log_level level, const char *fmt, ...)
    PCNN_PRINTF(3, 4);

/* A hash of the network's layer kinds and shapes: a compute table and a
 * prediction belong to the network whose fingerprint they carry. */
uint64_t perf_fingerprint(const layer_list *layers);

/* Build the simulator's input for `net` (perf/layer_cost.c): local batch,
 * per-layer compute, buckets and their collectives.  Arrays are allocated
 * into *layers_out, *buckets_out (free with mem_free). */
pcnn_status perf_build_sim(pcnn_perfmodel *m, const pcnn_net *net, int global_batch, int ranks,
                           bool overlap, sim_input *in, sim_layer **layers_out,
                           sim_bucket **buckets_out, const char *func);

/* Layer l's computation at n local samples (perf/compute_source.c): t[0]
 * forward, t[1] backward without the input gradient, t[2] the input
 * gradient's part.  table: the compute table is this network's and may be
 * used (else the regressors alone).  INVALID_STATE when no source knows l. */
pcnn_status perf_layer_compute(pcnn_perfmodel *m, const pcnn_layer *l, bool table, int n,
                               double t[3], const char *func);

/* A layer under a distribution (perf/split_cost.c; spec A.10, C.7). */

/* A layer's box on the rank holding the most under a distribution. */
typedef struct perf_geometry {
    int n;                    /* samples */
    int out[3], in[3];        /* largest output and input blocks over D, H, W */
    int halo_fwd[3], halo_bwd[3]; /* widest forward (x) and backward (dL/dy) halos, both sides */
    double interior;          /* share of the outputs whose windows read no halo */
    double in_floats;         /* the halo-extended input box */
    double bytes;             /* activations, gradients (halo included), parameter state */
} perf_geometry;

/* l's geometry under parts for `batch` samples; false when a split
 * dimension has an empty block or a halo wider than the neighbour's block
 * (spec A.3). */
bool perf_split_geometry(const pcnn_layer *l, const int *parts, int batch, perf_geometry *g);
/* The box's share of each sample's outputs. */
double perf_box_share(const pcnn_layer *l, const perf_geometry *g);
/* The what-if link's seconds per byte the knobs set (0: the calibrated
 * one), and modelled seconds of a collective with the knobs (link speed,
 * alpha) applied. */
double perf_link_beta(const pcnn_perfmodel *m);
double perf_coll(const pcnn_perfmodel *m, pcnn_collective c, int ranks, double bytes);
/* Layer l's forward, weight-gradient and input-gradient seconds for n
 * samples scaled to a share `frac` of each: the compute table's lines at
 * n frac (table), else the regressors at n times frac; INVALID_STATE
 * (message only with func) when neither knows l. */
pcnn_status perf_box_compute(pcnn_perfmodel *m, const pcnn_layer *l, bool table, int n,
                             double frac, double t[3], const char *func);
/* One dimension's halo after another (PCNN_OPT_HALO_SCHEDULE 0): two
 * messages per split dimension, each a face of the box; forward the
 * input's (channels of the input), backward the output gradient's;
 * `value` bytes per value (4, or 2 for a bf16 halo). */
double perf_halo_seconds(const pcnn_perfmodel *m, const perf_geometry *g, bool backward,
                         int channels, double value);
/* How a split windowed layer (interior < 1 on a spatial group) runs its
 * halo, and what that costs on the calling thread given its box compute
 * t[3] (forward, weight gradient, input gradient): per pass the exposed
 * exchange plus the staging copies (fwd, bwd), the border cells computed
 * again in place (border_*, computation), and the exchanges' whole
 * duration. */
typedef struct perf_halo_how {
    bool overlap, in_place, staged, keeps_input;
    bool bf16_fwd; /* the forward halo travels in bf16 (graph/spatial.h spatial_halo_bf16) */
} perf_halo_how;
typedef struct perf_halo {
    double fwd, bwd, border_fwd, border_bwd, duration;
} perf_halo;
perf_halo perf_halo_terms(const pcnn_perfmodel *m, const pcnn_layer *l, const perf_geometry *g,
                          const double t[3], const perf_halo_how *how);

/* One way of the shuffle of l's output from distribution a to b on
 * `groups` sample groups of `batch` samples over `ranks` ranks: the
 * all-to-all, among a sample group's ranks, of the rank that moves most;
 * 0 when a equals b. */
double perf_shuffle_seconds(const pcnn_perfmodel *m, const pcnn_layer *l, const int *a,
                            const int *b, int batch, int groups, int ranks);

/* A spatial network's layers on `ranks` ranks (perf/split_sim.c): each
 * layer's computation at its box and its halo and shuffle terms into
 * layers[i] (1..L-1), whether its weights go by columns into columns[i],
 * the samples' worth of input a rank copies in (its box of its group's)
 * into *input_samples.  *spatial false: the network is not spatial,
 * nothing written.
 * INVALID_ARGUMENT where its spatial groups do not divide `ranks` or
 * there are fewer samples than sample groups; SHAPE where a layer's box
 * would not fit; INVALID_STATE where no compute source knows a layer. */
pcnn_status perf_split_layers(pcnn_perfmodel *m, const pcnn_net *net, bool table, int batch,
                              int ranks, sim_layer *layers, bool *columns, double *input_samples,
                              bool *spatial, const char *func);

/* Compute calibration and the regressors' bridge (perf/calib_compute.c,
 * perf/regressor_source.c). */
pcnn_status perf_calibrate_compute(pcnn_perfmodel *m, pcnn_net *net, double budget,
                                   const char *func);
/* Seconds of layer l's forward (pass 0) or backward (pass 1, with the
 * input gradient when dx) at local batch n from the regressors; NaN when
 * they cannot say (not built in, kind not calibrated). */
double perf_regressor_time(pcnn_perfmodel *m, const pcnn_layer *l, int n, int pass, bool dx);
/* Bytes of the regressors' serialisation (0: none) and its writing into
 * buf; loading from bytes (size 0: none). */
size_t perf_regressors_bytes(const pcnn_perfmodel *m);
void perf_regressors_write(const pcnn_perfmodel *m, unsigned char *buf, size_t size);
pcnn_status perf_regressors_read(pcnn_perfmodel *m, const unsigned char *buf, size_t size);
void perf_regressors_free(pcnn_perfmodel *m);
/* Fit a new regressor set for `threads` within budget seconds. */
pcnn_status perf_fit_regressors(pcnn_perfmodel *m, int threads, double budget, uint64_t seed);
/* Text about the regressors for the report. */
size_t perf_regressors_describe(const pcnn_perfmodel *m, char *buf, size_t size);

/* Link calibration (perf/calib_comm.c); collective.  `local` is this
 * rank's verdict on its arguments: every rank learns of a bad one, and of
 * budgets that differ, before any sweep (k is then not touched). */
pcnn_status perf_calibrate_link(perf_link *k, pcnn_comm *comm, double budget, pcnn_status local,
                                const pcnn_perfmodel *log, const char *func);

/* The model file (perf/model_file.c): perf_encode writes its bytes to a
 * new buffer (*out, mem_free it), perf_decode reads them into a model that
 * holds nothing yet (`path` names the source in messages). */
pcnn_status perf_encode(const pcnn_perfmodel *m, unsigned char **out, size_t *len,
                        const char *func);
pcnn_status perf_decode(const unsigned char *buf, size_t size, pcnn_perfmodel *m,
                        const char *path, const char *func);
pcnn_status perf_save(const pcnn_perfmodel *m, const char *path, const char *func);
pcnn_status perf_load(const char *path, pcnn_perfmodel *m, const char *func);

/* Root's model on every rank of comm (perf/model_share.c); collective.
 * `local` as for perf_calibrate_link (m may be NULL if it is not OK). */
pcnn_status perf_share(pcnn_perfmodel *m, pcnn_comm *comm, int root, pcnn_status local,
                       const char *func);
/* A model's defaults, and freeing what it holds (perf/perfmodel_api.c). */
void perf_model_defaults(pcnn_perfmodel *m);
void perf_model_release(pcnn_perfmodel *m);

/* Texts (perf/report.c). */
size_t perf_report(const pcnn_perfmodel *m, char *buf, size_t size);

/* The PCNN_PERF_FLAG_* that apply to predictions on `ranks` ranks (0:
 * any; 1: the links do not matter) and their explanation, one line each
 * (perf/confidence.c). */
struct text;
unsigned perf_confidence_flags(const pcnn_perfmodel *m, int ranks);
void perf_confidence_explain(const pcnn_perfmodel *m, unsigned flags, struct text *t);
pcnn_status perf_validate(const pcnn_perfmodel *m, const pcnn_net *net, double *step_re,
                          double *wre, char *buf, size_t size, size_t *needed,
                          const char *func);

/* Seconds of one optimizer call on `own` parameters taken from layers
 * first..last (perf/layer_cost.c): the call's overhead (inline or with a
 * thread team, as parallel_for decides) plus the share own / count of
 * those layers' timed work (count: the layers' parameters); without this
 * network's table, the mean per-parameter cost.  own 0: 0. */
double perf_update_time(const pcnn_perfmodel *m, bool table, int first, int last, double own);
/* The overhead of one optimizer call on `own` parameters with the table's
 * threads: with a thread team where parallel_for opens one. */
double perf_update_call(const perf_compute *c, double own);

/* The compute table's whole step on one rank at batch_hi: every layer's
 * forward, backward and update (the ranks' pace compares these). */
double perf_compute_total(const perf_compute *c);
/* Compare every rank's compute total: c->pace = the slowest's over this
 * rank's (perf/calib_pace.c).  Collective over comm; local: this rank's
 * failure so far (m may then be NULL), agreed before anything else. */
pcnn_status perf_calibrate_pace(pcnn_perfmodel *m, pcnn_comm *comm, pcnn_status local,
                                const char *func);
/* The pace predictions of several ranks run at (>= 1). */
double perf_pace(const pcnn_perfmodel *m);

/* a + b n */
static inline double perf_line(const double c[2], double n) { return c[0] + c[1] * n; }

/* A timed line read at n samples: never negative, and below the smallest
 * timed batch lo never under its proportional share of the time there (a
 * fixed cost only adds to a smaller batch's time), so two noisy timings
 * whose line crosses zero do not price a batch of one at nothing. */
static inline double perf_line_at(const double c[2], double n, double lo)
{
    const double t = perf_line(c, n);
    const double floor = n < lo ? perf_line(c, lo) * n / lo : 0;
    return t > floor ? t : floor > 0 ? floor : 0;
}

#endif
