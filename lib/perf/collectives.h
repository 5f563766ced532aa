/* Models of the collectives the exchange uses (spec C.4): the
 * Thakur-Rabenseifner-Gropp forms of MPICH's algorithms in alpha (s per
 * message), beta (s per byte: the INVERSE of the link bandwidth, seed 004's
 * unit correction) and gamma (s per byte of local reduction), with the
 * algorithm picked by MPICH's default size thresholds; and the curve
 * measured at calibration, used where it applies (same ranks, sizes from
 * the sweep's smallest up, past its largest along the last segment, no
 * link override) because MPICH switches algorithms and a line does not fit
 * across the switch. */
#ifndef PCNN_PERF_COLLECTIVES_H
#define PCNN_PERF_COLLECTIVES_H

#include "pcnn.h"

#define PERF_COLLECTIVES 4 /* pcnn_collective values 0..3 */
#define PERF_CURVE_MAX 24
#define PERF_CONTENTION_SIZES 4 /* 2^18, 2^20, 2^21, 2^22 parameters */

typedef struct perf_curve {
    int count;
    double bytes[PERF_CURVE_MAX], seconds[PERF_CURVE_MAX]; /* bytes ascending */
} perf_curve;

typedef struct perf_link {
    int ranks;          /* of the calibration; 0: not calibrated (defaults) */
    double gamma;       /* s per byte summed locally */
    double poll_work;   /* link seconds a nonblocking collective advances per
                           MPI_Test between layers (sim.h) */
    double poll_cpu;    /* the share of that advance the polling thread spends
                           itself (shared memory: its copies; 0..1) */
    /* How many times as long the optimizer's update of perf_contention_params(i)
     * parameters takes when every rank runs its own at once (as the
     * exchange's ranks do) as on one rank: ranks on a node share its memory
     * bandwidth and last-level cache, the more the less fits in it (>= 1). */
    double mem_contention[PERF_CONTENTION_SIZES];
    double alpha[PERF_COLLECTIVES], beta[PERF_COLLECTIVES];
    perf_curve curve[PERF_COLLECTIVES];
    /* Per collective, the median over its curve's points of the relative
     * spread of the repetitions (interquartile range over median): how
     * much the runs of one size disagreed (a loaded machine: > 0.5); 0
     * where unknown (no calibration, or a file from before it). */
    double spread[PERF_COLLECTIVES];
} perf_link;

/* Defaults before calibration: 5 us, 10 Gbit/s, 4 GB/s of summation. */
void perf_link_defaults(perf_link *k);

/* The parameters of contention size i (0 .. PERF_CONTENTION_SIZES - 1). */
double perf_contention_params(int i);

/* The contention factor for an update of `params` parameters: interpolated
 * in log(params) between the calibrated sizes, the nearest beyond them. */
double perf_contention(const perf_link *k, double params);

/* The coefficients of alpha, beta and gamma in the model of collective c
 * on P ranks for n bytes (per rank: the reduced vector, everything a rank
 * sends in an all-to-all, the gathered total of an all-gather, one
 * message of a send-receive).  P = 1 or n = 0: all zero. */
void perf_coll_terms(pcnn_collective c, int P, double n, double terms[3]);

/* Seconds of collective c; link_beta > 0 overrides the calibrated beta
 * (what-if link bandwidth) and rules the measured curve out, as does
 * alpha_override >= 0. */
double perf_coll_time(const perf_link *k, pcnn_collective c, int P, double n, double link_beta,
                      double alpha_override);

/* Least-squares fit of alpha and beta of collective c from its curve
 * measured on k->ranks ranks, gamma given (relative errors weighted
 * equally); both clamped to >= 0. */
void perf_coll_fit(perf_link *k, pcnn_collective c);

#endif
