/* Small helpers shared by the gradient-check and API tests: a seeded
 * random stream (independent of the library's), and a check macro that
 * reports the failing call with the library's last error. */
#ifndef PCNN_TESTS_TUTIL_H
#define PCNN_TESTS_TUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "pcnn.h"

typedef struct trng {
    uint64_t s;
} trng;

static inline uint64_t trng_next(trng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static inline double trng_uniform(trng *r) { return (double)(trng_next(r) >> 11) * 0x1.0p-53; }

/* Uniform in [lo, hi). */
static inline float trng_range(trng *r, double lo, double hi)
{
    return (float)(lo + (hi - lo) * trng_uniform(r));
}

static inline int trng_below(trng *r, int bound) { return (int)(trng_next(r) % (uint64_t)bound); }

/* Evaluate a pcnn call; on failure print where and why and jump to `fail`. */
#define CK(call)                                                                     \
    do {                                                                             \
        pcnn_status ck_s_ = (call);                                                  \
        if (ck_s_ != PCNN_OK) {                                                      \
            fprintf(stderr, "  %s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call,    \
                    pcnn_status_str(ck_s_), pcnn_last_error());                      \
            goto fail;                                                               \
        }                                                                            \
    } while (0)

#endif
