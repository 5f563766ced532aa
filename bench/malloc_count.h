/* Process-wide count of heap allocations (malloc, calloc, realloc and the
 * aligned variants, from any thread and any library) since start-up. */
#ifndef PCNN_BENCH_MALLOC_COUNT_H
#define PCNN_BENCH_MALLOC_COUNT_H

unsigned long malloc_count(void);

#endif
