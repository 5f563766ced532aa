/* Collective models (collectives.h). */
#include "collectives.h"

#include <math.h>
#include <stdbool.h>

/* MPICH's default thresholds (MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE,
 * MPIR_CVAR_ALLGATHER_LONG_MSG_SIZE). */
#define ALLREDUCE_SHORT 2048.0
#define ALLGATHER_LONG 524288.0

void perf_link_defaults(perf_link *k)
{
    *k = (perf_link){0};
    k->gamma = 1.0 / 4e9;
    k->poll_work = 1e-4;
    for (int i = 0; i < PERF_CONTENTION_SIZES; i++) k->mem_contention[i] = 1;
    for (int c = 0; c < PERF_COLLECTIVES; c++) {
        k->alpha[c] = 5e-6;
        k->beta[c] = 8.0 / 10e9;
    }
}

double perf_contention_params(int i)
{
    static const double params[PERF_CONTENTION_SIZES] = {262144, 1048576, 2097152, 4194304};
    return params[i < 0 ? 0 : i >= PERF_CONTENTION_SIZES ? PERF_CONTENTION_SIZES - 1 : i];
}

double perf_contention(const perf_link *k, double params)
{
    const int last = PERF_CONTENTION_SIZES - 1;
    if (!(params > perf_contention_params(0))) return k->mem_contention[0];
    if (params >= perf_contention_params(last)) return k->mem_contention[last];
    int i = 0;
    while (params >= perf_contention_params(i + 1)) i++;
    const double lo = log(perf_contention_params(i)), hi = log(perf_contention_params(i + 1));
    const double f = (log(params) - lo) / (hi - lo);
    return k->mem_contention[i] + f * (k->mem_contention[i + 1] - k->mem_contention[i]);
}

void perf_coll_terms(pcnn_collective c, int P, double n, double t[3])
{
    t[0] = t[1] = t[2] = 0;
    if (P <= 1 || !(n > 0)) return;
    const double lg = ceil(log2((double)P)), f = (double)(P - 1) / P;
    switch (c) {
    case PCNN_COLL_SENDRECV:
        t[0] = 1, t[1] = n;
        break;
    case PCNN_COLL_ALLREDUCE:
        if (n <= ALLREDUCE_SHORT) /* recursive doubling */
            t[0] = lg, t[1] = lg * n, t[2] = lg * n;
        else /* Rabenseifner: reduce-scatter + all-gather */
            t[0] = 2 * lg, t[1] = 2 * f * n, t[2] = f * n;
        break;
    case PCNN_COLL_ALLTOALL: /* pairwise: MPI_Alltoallv, as the exchange posts it, has no Bruck */
        t[0] = P - 1, t[1] = f * n;
        break;
    case PCNN_COLL_ALLGATHER:
        if (n < ALLGATHER_LONG && (P & (P - 1)) == 0) /* recursive doubling */
            t[0] = lg, t[1] = f * n;
        else /* ring */
            t[0] = P - 1, t[1] = f * n;
        break;
    }
}

/* Log-log lines between measured points (the sweep's are 4x apart: close
 * enough for an alpha + beta n, and convex where a size leaves a cache);
 * past the last point, a straight line with its segment's slope (bandwidth
 * bound there). */
/* The largest measured time up to point i: a noisy point below an earlier
 * one would make a larger message cheaper. */
static double rising(const perf_curve *cv, int i)
{
    double t = cv->seconds[0];
    for (int j = 1; j <= i; j++) t = fmax(t, cv->seconds[j]);
    return t;
}

static double curve_at(const perf_curve *cv, double n)
{
    const int last = cv->count - 1;
    if (n > cv->bytes[last]) {
        const double dx = cv->bytes[last] - cv->bytes[last - 1];
        const double top = rising(cv, last);
        const double slope = dx > 0 ? (top - rising(cv, last - 1)) / dx : 0;
        return top + (n - cv->bytes[last]) * fmax(0, slope);
    }
    int i = 1;
    while (i < last && cv->bytes[i] < n) i++;
    const double x0 = log(cv->bytes[i - 1]), x1 = log(cv->bytes[i]);
    const double y0 = log(rising(cv, i - 1)), y1 = log(rising(cv, i));
    const double u = x1 > x0 ? (log(n) - x0) / (x1 - x0) : 0;
    return exp(y0 + u * (y1 - y0));
}

double perf_coll_time(const perf_link *k, pcnn_collective c, int P, double n, double link_beta,
                      double alpha_override)
{
    if (P <= 1 || !(n > 0) || c < 0 || c >= PERF_COLLECTIVES) return 0;
    const perf_curve *cv = &k->curve[c];
    const bool measured =
        link_beta <= 0 && alpha_override < 0 && P == k->ranks && cv->count >= 2;
    if (measured && n >= cv->bytes[0]) return curve_at(cv, n);
    const double alpha = alpha_override >= 0 ? alpha_override : k->alpha[c];
    const double beta = link_beta > 0 ? link_beta : k->beta[c];
    double t[3];
    perf_coll_terms(c, P, n, t);
    double seconds = t[0] * alpha + t[1] * beta + t[2] * k->gamma;
    /* Past MPICH's switch to Rabenseifner a message is cheaper per byte
     * but never cheaper than the largest one before it. */
    if (c == PCNN_COLL_ALLREDUCE && n > ALLREDUCE_SHORT) {
        perf_coll_terms(c, P, ALLREDUCE_SHORT, t);
        seconds = fmax(seconds, t[0] * alpha + t[1] * beta + t[2] * k->gamma);
    }
    /* Below the first measured size: never above what that size costs. */
    return measured ? fmin(seconds, cv->seconds[0]) : seconds;
}

void perf_coll_fit(perf_link *k, pcnn_collective c)
{
    const perf_curve *cv = &k->curve[c];
    /* Minimise sum ((a A + b B + G - t) / t)^2 over a, b. */
    double saa = 0, sab = 0, sbb = 0, sa = 0, sb = 0;
    for (int i = 0; i < cv->count; i++) {
        double t[3];
        perf_coll_terms(c, k->ranks, cv->bytes[i], t);
        const double w = 1.0 / cv->seconds[i];
        const double A = t[0] * w, B = t[1] * w, r = 1.0 - t[2] * k->gamma * w;
        saa += A * A, sab += A * B, sbb += B * B, sa += A * r, sb += B * r;
    }
    const double det = saa * sbb - sab * sab;
    if (cv->count < 2 || !(fabs(det) > 0)) return;
    double a = (sa * sbb - sb * sab) / det, b = (saa * sb - sab * sa) / det;
    if (a < 0) a = 0, b = sbb > 0 ? sb / sbb : 0;
    if (b < 0) b = 0, a = saa > 0 ? sa / saa : 0;
    k->alpha[c] = a;
    k->beta[c] = b;
}
