/* Parallel loops without OpenMP regions that run on one thread.
 *
 * libgomp builds, and mallocs, a fresh team for every parallel region that
 * runs on a single thread (a false if() clause or num_threads(1)); only
 * teams of two or more threads are cached.  So the library decides itself
 * whether a loop is worth splitting, runs it inline when it is not, and
 * opens a region only with all of its threads. */
#include <omp.h>

#include "kernels.h"

/* Block t of `parts` over [0, n), in whole grains: the same cut for the
 * same (n, grain, parts). */
static void block(size_t n, size_t grain, int t, int parts, size_t *lo, size_t *hi)
{
    const size_t grains = (n + grain - 1) / grain, per = grains / (size_t)parts;
    const size_t extra = grains % (size_t)parts, tt = (size_t)t;
    const size_t first = tt * per + (tt < extra ? tt : extra);
    size_t a = first * grain, b = (first + per + (tt < extra)) * grain;
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
}

void parallel_parts(size_t n, size_t grain, size_t work, int threads, part_fn fn, void *arg)
{
    if (n == 0) return;
    if (grain == 0) grain = 1;
    size_t grains = (n + grain - 1) / grain;
    int parts = threads;
    if ((size_t)parts > grains) parts = (int)grains;
    if (parts <= 1 || work < PAR_MIN_WORK) {
        fn(arg, 0, n, 0);
        return;
    }
#pragma omp parallel num_threads(parts)
    {
        size_t lo, hi;
        const int t = omp_get_thread_num();
        block(n, grain, t, omp_get_num_threads(), &lo, &hi);
        if (lo < hi) fn(arg, lo, hi, t);
    }
}

typedef struct range_call {
    range_fn fn;
    void *arg;
} range_call;

static void call_range(void *arg, size_t lo, size_t hi, int part)
{
    const range_call *c = arg;
    (void)part;
    c->fn(c->arg, lo, hi);
}

void parallel_for(size_t n, size_t grain, size_t work, int threads, range_fn fn, void *arg)
{
    range_call c = {fn, arg};
    parallel_parts(n, grain, work, threads, call_range, &c);
}
