/* Small helpers shared by the libpcnn examples: error checks, command-line
 * options, a progress bar, CSV curves and the timing printout.  They keep
 * each example about its subject; none of this is part of the library. */
#ifndef PCNN_EXAMPLE_H
#define PCNN_EXAMPLE_H

#include <stdio.h>

#include "pcnn.h"

/* Check a libpcnn status: on failure print the library's message and
 * abort the MPI job (examples keep it simple; a host would clean up). */
#define EX_CHECK(call)                                                           \
    do {                                                                         \
        pcnn_status ex_s_ = (call);                                              \
        if (ex_s_ != PCNN_OK)                                                    \
            ex_fail("%s:%d: %s failed: %s (%s)", __FILE__, __LINE__, #call,      \
                    pcnn_last_error(), pcnn_status_str(ex_s_));                  \
    } while (0)

/* Check an MPI return code the same way. */
#define EX_MPI(call)                                                             \
    do {                                                                         \
        if ((call) != MPI_SUCCESS) ex_fail("%s:%d: %s failed", __FILE__, __LINE__, #call); \
    } while (0)

/* Print "error: ..." with the world rank to stderr and MPI_Abort. */
void ex_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* malloc that fails the job instead of returning NULL. */
void *ex_alloc(size_t bytes);

/* Monotonic wall clock in seconds. */
double ex_now(void);

/* Command-line options of the form `--name value` (and `--name` flags).
 * ex_args_init handles --help (prints usage on rank 0 and exits cleanly);
 * each ex_arg_* call consumes its option; ex_args_done fails on anything
 * left unconsumed, so a typo never runs silently with the default. */
void ex_args_init(int argc, char **argv, const char *usage);
int ex_arg_int(const char *name, int def);
double ex_arg_double(const char *name, double def);
const char *ex_arg_str(const char *name, const char *def);
int ex_arg_flag(const char *name);
void ex_args_done(void);

/* This rank's share [*first, *first + return) of `total` items split over
 * `size` ranks the way libpcnn splits a global batch: the first
 * total % size ranks get one more. */
int ex_share(int total, int size, int rank, int *first);

/* A progress bar for rank 0.  On a terminal it redraws one line (at most
 * ten times a second); otherwise it prints a plain line at each quarter, so
 * that logs stay readable.  `enabled` is 0 on the other ranks. */
typedef struct ex_progress {
    int enabled, tty, quarter;
    long total;
    double t0, last_draw;
    char label[64];
} ex_progress;

void ex_progress_start(ex_progress *p, int enabled, const char *label, long total);
void ex_progress_update(ex_progress *p, long done, double loss);
/* Clear the bar (terminal) so the caller's summary line replaces it. */
void ex_progress_finish(ex_progress *p);

/* Print the network summary (pcnn_net_summary) on rank 0. */
void ex_print_summary(const pcnn_net *net, int rank);

/* Print on rank 0 the library's per-layer timing breakdown
 * (pcnn_net_timing_report), the overlap ratio and the progress engine. */
void ex_print_timing(const pcnn_net *net, int rank);

/* PCNN_OPT_ENGINE's value for "auto", "thread" or "nonblocking" (fails the
 * job on anything else). */
int ex_engine_option(const char *name);

/* "communication thread", "non-blocking collectives" or "none (one rank)". */
const char *ex_engine_name(const pcnn_net *net);

/* Training curves: ex_csv_open returns NULL when path is NULL (curves not
 * asked for) and fails the job if the file cannot be created. */
FILE *ex_csv_open(const char *path, const char *header);
void ex_csv_row(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ex_csv_close(FILE **f);

/* Render a CSV written above into a PNG with examples/plot_curves.py
 * (matplotlib under /usr/bin/python3).  Call after MPI_Finalize, on one
 * rank: it runs a child process.  Returns 0 on success; on failure prints
 * the command to run by hand. */
int ex_plot(const char *csv, const char *png);

/* Tracing switched on from outside: ex_trace_path returns the option's
 * value (an example's --trace FILE) or else the environment's PCNN_TRACE
 * (NULL: no trace).  With a path, ex_trace_enable (before finalize) keeps
 * the last spans of every rank and ex_trace_write (collective) writes ONE
 * Chrome trace of all ranks there, on one clock, with a step marker per
 * training step (pcnn_net_write_trace_merged).  The variable is read here,
 * by the examples: libpcnn never reads the environment. */
const char *ex_trace_path(const char *option);
void ex_trace_enable(pcnn_net *net, const char *path);
void ex_trace_write(pcnn_net *net, const char *path, int rank);

#endif
