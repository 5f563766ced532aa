/* Helpers shared by the examples (see example.h). */
#define PCNN_EXPERIMENTAL /* PCNN_OPT_ACTIVE_ENGINE: pcnn.h section 9 */
#include "example.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef EX_PLOT_SCRIPT
#define EX_PLOT_SCRIPT "examples/plot_curves.py"
#endif

static int world_rank(void)
{
    int init = 0, fin = 0, rank = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

void ex_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "error (rank %d): ", world_rank());
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin) MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

void *ex_alloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) ex_fail("out of memory (%zu bytes)", bytes);
    return p;
}

double ex_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- command-line options ---------------------------------------------- */

static int args_c;
static char **args_v;
static char used[256];
static const char *args_usage;

void ex_args_init(int argc, char **argv, const char *usage)
{
    if (argc > (int)sizeof used) ex_fail("too many arguments (%d)", argc);
    args_c = argc;
    args_v = argv;
    args_usage = usage;
    memset(used, 0, sizeof used);
    used[0] = 1;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            if (world_rank() == 0) fputs(usage, stdout);
            MPI_Finalize();
            exit(0);
        }
}

/* The value after `name`, or NULL if absent; marks both as consumed. */
static const char *find(const char *name, int flag)
{
    for (int i = 1; i < args_c; i++) {
        if (strcmp(args_v[i], name)) continue;
        used[i] = 1;
        if (flag) return args_v[i];
        if (i + 1 >= args_c) ex_fail("option %s needs a value\n%s", name, args_usage);
        used[i + 1] = 1;
        return args_v[i + 1];
    }
    return NULL;
}

int ex_arg_int(const char *name, int def)
{
    const char *v = find(name, 0);
    if (!v) return def;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || end == v || x < -2147483647L || x > 2147483647L)
        ex_fail("option %s: '%s' is not an integer", name, v);
    return (int)x;
}

double ex_arg_double(const char *name, double def)
{
    const char *v = find(name, 0);
    if (!v) return def;
    char *end;
    double x = strtod(v, &end);
    if (*end || end == v || !isfinite(x)) ex_fail("option %s: '%s' is not a number", name, v);
    return x;
}

const char *ex_arg_str(const char *name, const char *def)
{
    const char *v = find(name, 0);
    return v ? v : def;
}

int ex_arg_flag(const char *name)
{
    return find(name, 1) != NULL;
}

void ex_args_done(void)
{
    for (int i = 1; i < args_c; i++)
        if (!used[i]) ex_fail("unknown argument '%s'\n%s", args_v[i], args_usage);
}

int ex_share(int total, int size, int rank, int *first)
{
    int base = total / size, extra = total % size;
    *first = rank * base + (rank < extra ? rank : extra);
    return base + (rank < extra ? 1 : 0);
}

/* ---- progress bar ------------------------------------------------------ */

void ex_progress_start(ex_progress *p, int enabled, const char *label, long total)
{
    /* Open MPI hands every rank a pseudo-terminal even behind a pipe. */
    int tty = isatty(STDOUT_FILENO) && !getenv("OMPI_COMM_WORLD_SIZE");
    *p = (ex_progress){.enabled = enabled, .tty = enabled && tty,
                       .total = total > 0 ? total : 1, .t0 = ex_now()};
    snprintf(p->label, sizeof p->label, "%s", label);
}

void ex_progress_update(ex_progress *p, long done, double loss)
{
    if (!p->enabled) return;
    double t = ex_now(), frac = (double)done / (double)p->total;
    if (p->tty) {
        if (t - p->last_draw < 0.1 && done < p->total) return;
        p->last_draw = t;
        enum { WIDTH = 30 };
        char bar[WIDTH + 1];
        int full = (int)(frac * WIDTH + 0.5);
        for (int i = 0; i < WIDTH; i++) bar[i] = i < full ? '#' : '.';
        bar[WIDTH] = '\0';
        double eta = done > 0 ? (t - p->t0) * (double)(p->total - done) / (double)done : 0.0;
        printf("\r%s [%s] %3.0f%% %ld/%ld  loss %.4f  %.1f s, eta %.0f s \033[K", p->label, bar,
               100 * frac, done, p->total, loss, t - p->t0, eta);
        fflush(stdout);
    } else if ((int)(4 * frac) > p->quarter && done < p->total) {
        p->quarter = (int)(4 * frac);
        printf("%s  %3d%%  step %ld/%ld  loss %.4f  %.1f s\n", p->label, 25 * p->quarter, done,
               p->total, loss, t - p->t0);
        fflush(stdout);
    }
}

void ex_progress_finish(ex_progress *p)
{
    if (p->enabled && p->tty) {
        printf("\r\033[K");
        fflush(stdout);
    }
}

/* ---- reports ------------------------------------------------------------ */

/* Fetch one of libpcnn's snprintf-style reports into a fresh string. */
static char *report(pcnn_status (*fn)(const pcnn_net *, char *, size_t, size_t *),
                    const pcnn_net *net)
{
    size_t need = 0;
    EX_CHECK(fn(net, NULL, 0, &need));
    char *buf = ex_alloc(need + 1);
    EX_CHECK(fn(net, buf, need + 1, NULL));
    return buf;
}

void ex_print_summary(const pcnn_net *net, int rank)
{
    char *s = report(pcnn_net_summary, net);
    if (rank == 0) fputs(s, stdout);
    free(s);
}

int ex_engine_option(const char *name)
{
    if (!strcmp(name, "auto")) return 0;
    if (!strcmp(name, "thread")) return 1;
    if (!strcmp(name, "nonblocking")) return 2;
    ex_fail("the engine must be auto, thread or nonblocking, not '%s'", name);
}

const char *ex_engine_name(const pcnn_net *net)
{
    double engine;
    EX_CHECK(pcnn_net_get_option(net, PCNN_OPT_ACTIVE_ENGINE, &engine));
    return engine == 1   ? "communication thread"
           : engine == 2 ? "non-blocking collectives"
                         : "none (one rank)";
}

void ex_print_timing(const pcnn_net *net, int rank)
{
    char *s = report(pcnn_net_timing_report, net);
    double overlap;
    EX_CHECK(pcnn_net_overlap_ratio(net, &overlap));
    const char *engine = ex_engine_name(net);
    if (rank == 0) {
        printf("timing breakdown (ms per training step, from pcnn_net_timing_report):\n%s", s);
        if (isnan(overlap))
            printf("overlap ratio: n/a (no communication)   progress engine: %s\n", engine);
        else
            printf("overlap ratio R = %.1f%% of the communication hidden   progress engine: %s\n",
                   overlap, engine);
        fflush(stdout);
    }
    free(s);
}

/* ---- curves ------------------------------------------------------------- */

FILE *ex_csv_open(const char *path, const char *header)
{
    if (!path) return NULL;
    FILE *f = fopen(path, "w");
    if (!f) ex_fail("cannot create %s", path);
    fprintf(f, "%s\n", header);
    return f;
}

void ex_csv_row(FILE *f, const char *fmt, ...)
{
    if (!f) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fflush(f);
}

void ex_csv_close(FILE **f)
{
    if (*f && fclose(*f)) ex_fail("error writing the curves CSV");
    *f = NULL;
}

int ex_plot(const char *csv, const char *png)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl("/usr/bin/python3", "python3", EX_PLOT_SCRIPT, csv, png, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
        WEXITSTATUS(status) == 0) {
        printf("plot written to %s\n", png);
        return 0;
    }
    fprintf(stderr, "could not draw %s; run by hand:\n  /usr/bin/python3 %s %s %s\n"
            "(needs Debian's python3-matplotlib)\n", png, EX_PLOT_SCRIPT, csv, png);
    return 1;
}
