/* Counter-based random numbers: every stream is a pure function of its key
 * (seed, purpose, layer, step, ...), so results do not depend on call order,
 * thread count or rank count. */
#ifndef PCNN_CORE_RNG_H
#define PCNN_CORE_RNG_H

#include <stdint.h>

typedef struct rng {
    uint64_t state;
} rng;

/* Mix a key of up to four words into one 64-bit value (splitmix64 rounds). */
uint64_t rng_hash(uint64_t a, uint64_t b, uint64_t c, uint64_t d);

static inline rng rng_make(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    rng r = {rng_hash(a, b, c, d)};
    return r;
}

uint64_t rng_next(rng *r);
/* Uniform in [0, 1) with 24 random bits (exact in float). */
float rng_uniform(rng *r);
/* Standard normal (Box-Muller, double internally). */
float rng_normal(rng *r);
/* Uniform integer in [0, bound), bound > 0, without modulo bias. */
uint64_t rng_below(rng *r, uint64_t bound);

#endif
