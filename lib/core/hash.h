/* FNV-1a 64, the one non-cryptographic hash behind every fingerprint and
 * checksum libpcnn stores or compares: layer and definition hashes in
 * checkpoints, the scheduler state's checksum, the cross-rank structure
 * check.  Incremental: start from HASH_FNV1A_BASIS and feed pieces in
 * order; feeding a sequence in pieces equals feeding it at once.
 * Parameters are the published ones (http://www.isthe.com/chongo/tech/comp/fnv/):
 * offset basis 14695981039346656037, prime 2^40 + 2^8 + 0xb3. */
#ifndef PCNN_CORE_HASH_H
#define PCNN_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HASH_FNV1A_BASIS 0xcbf29ce484222325ull
#define HASH_FNV1A_PRIME 0x100000001b3ull

/* h continued over n bytes (bytes may be NULL when n is 0). */
uint64_t hash_fnv1a(uint64_t h, const void *bytes, size_t n);

/* h continued over the 8 little-endian bytes of v, so that hashes of
 * numbers are the same on every host. */
uint64_t hash_fnv1a_u64(uint64_t h, uint64_t v);

#endif
