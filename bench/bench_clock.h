/* What every benchmark here times with: a monotonic clock in seconds and
 * the comparison qsort needs for medians of repeated rounds.  Header only,
 * so each benchmark stays one file to build and read. */
#ifndef PCNN_BENCH_CLOCK_H
#define PCNN_BENCH_CLOCK_H

#include <time.h>

static inline double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
