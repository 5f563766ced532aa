/* Aligned, pre-faulted allocations for the buffers planned at finalize.
 * Page faults cost ~10 us per 4 KiB page on the target machines, so big
 * buffers are touched once here (and advised onto huge pages) instead of on
 * the first training step. */
#ifndef PCNN_CORE_MEMORY_H
#define PCNN_CORE_MEMORY_H

#include <stddef.h>

#define PCNN_ALIGN 64

/* Zero-filled, 64-byte aligned block of `bytes` (0 allowed: returns a valid
 * unique pointer).  NULL on failure, with no message set. */
void *mem_alloc(size_t bytes);
/* Same, for `count` floats, with overflow check. */
float *mem_alloc_floats(size_t count);
void mem_free(void *p);

/* Plain small allocations (graph nodes, names): calloc/realloc/free behind
 * one door so failure injection can reach every allocation. */
void *mem_calloc(size_t count, size_t size);
void *mem_realloc(void *p, size_t bytes);

#ifdef PCNN_FAULT_INJECTION
#include "pcnn.h" /* PCNN_API */

/* Allocation-failure injection, compiled only with -DPCNN_FAULT_INJECTION:
 * always into the internal static library the tests link, and into
 * libpcnn.so only with `meson setup -Dfault_injection=true` (never in a
 * release build).  Every mem_alloc / mem_calloc / mem_realloc counts as one
 * allocation.  pcnn_debug_fail_allocation(n) restarts the count and makes
 * allocation number n (1-based) fail once, as if the system were out of
 * memory; n <= 0 disarms.  pcnn_debug_allocations() is the number of
 * allocations attempted since; pcnn_debug_live_allocations() the number of
 * blocks allocated and not yet freed (process-wide), for leak checks. */
PCNN_API void pcnn_debug_fail_allocation(long n);
PCNN_API long pcnn_debug_allocations(void);
PCNN_API long pcnn_debug_live_allocations(void);
#endif

#endif
