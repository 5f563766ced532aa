#include "rng.h"

#include <math.h>

static uint64_t splitmix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

uint64_t rng_hash(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    return splitmix(splitmix(splitmix(splitmix(a) ^ b) ^ c) ^ d);
}

uint64_t rng_next(rng *r)
{
    r->state += 0x9E3779B97F4A7C15ull;
    uint64_t x = r->state;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

float rng_uniform(rng *r) { return (float)(rng_next(r) >> 40) * (1.0f / 16777216.0f); }

float rng_normal(rng *r)
{
    double u1 = ((double)(rng_next(r) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    double u2 = (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

uint64_t rng_below(rng *r, uint64_t bound)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t x;
    do x = rng_next(r);
    while (x >= limit);
    return x % bound;
}
