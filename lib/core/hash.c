#include "hash.h"

#include "le.h"

uint64_t hash_fnv1a(uint64_t h, const void *bytes, size_t n)
{
    const unsigned char *b = bytes;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * HASH_FNV1A_PRIME;
    return h;
}

uint64_t hash_fnv1a_u64(uint64_t h, uint64_t v)
{
    unsigned char b[8];
    le_put_u64(b, v);
    return hash_fnv1a(h, b, sizeof b);
}
