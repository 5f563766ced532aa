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

#endif
