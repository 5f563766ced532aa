/* Monotonic seconds, for timing breakdowns and deadlines. */
#ifndef PCNN_CORE_CLOCK_H
#define PCNN_CORE_CLOCK_H

#include <time.h>

static inline double clock_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#endif
