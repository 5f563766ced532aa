#define _DEFAULT_SOURCE
#include "memory.h"
#include "error.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE_BYTES (2u << 20)

#ifdef PCNN_FAULT_INJECTION
/* Allocation-failure injection (tests only, see memory.h).  Atomics: the
 * counters are process-wide and networks may be built on several threads. */
#include <stdatomic.h>

static atomic_long fail_at;     /* 1-based allocation number to fail; 0: off */
static atomic_long attempts;    /* allocations attempted since arming */
static atomic_long live_blocks; /* blocks handed out and not yet freed */

PCNN_API void pcnn_debug_fail_allocation(long n)
{
    API_ENTRY();
    atomic_store(&attempts, 0);
    atomic_store(&fail_at, n > 0 ? n : 0);
}

PCNN_API long pcnn_debug_allocations(void)
{
    API_ENTRY();
    return atomic_load(&attempts);
}

PCNN_API long pcnn_debug_live_allocations(void)
{
    API_ENTRY();
    return atomic_load(&live_blocks);
}

/* Count one attempt; true if it is the one to fail (then disarm). */
static int inject_failure(void)
{
    long k = atomic_fetch_add(&attempts, 1) + 1;
    long target = atomic_load(&fail_at);
    return target > 0 && k == target && atomic_compare_exchange_strong(&fail_at, &target, 0);
}
#define INJECT_FAILURE() inject_failure()
#define COUNT_LIVE(p, delta) \
    do {                                                       \
        if (p) atomic_fetch_add(&live_blocks, (delta));        \
    } while (0)
#else
#define INJECT_FAILURE() 0
#define COUNT_LIVE(p, delta) ((void)0)
#endif

void *mem_alloc(size_t bytes)
{
    if (INJECT_FAILURE()) return NULL;
    size_t rounded = (bytes + PCNN_ALIGN - 1) / PCNN_ALIGN * PCNN_ALIGN;
    if (rounded < bytes) return NULL;
    if (rounded == 0) rounded = PCNN_ALIGN;
    size_t align = rounded >= HUGE_PAGE_BYTES ? HUGE_PAGE_BYTES : PCNN_ALIGN;
    if (align == HUGE_PAGE_BYTES) rounded = (rounded + align - 1) / align * align;
    void *p = NULL;
    if (posix_memalign(&p, align, rounded) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    if (align == HUGE_PAGE_BYTES) madvise(p, rounded, MADV_HUGEPAGE);
#endif
    memset(p, 0, rounded); /* fault every page in now, not during a step */
    COUNT_LIVE(p, 1);
    return p;
}

float *mem_alloc_floats(size_t count)
{
    if (count > SIZE_MAX / sizeof(float)) return NULL;
    return mem_alloc(count * sizeof(float));
}

void mem_free(void *p)
{
    COUNT_LIVE(p, -1);
    free(p);
}

void *mem_calloc(size_t count, size_t size)
{
    if (INJECT_FAILURE()) return NULL;
    void *p = calloc(count ? count : 1, size ? size : 1);
    COUNT_LIVE(p, 1);
    return p;
}

void *mem_realloc(void *p, size_t bytes)
{
    if (INJECT_FAILURE()) return NULL;
    void *q = realloc(p, bytes ? bytes : 1);
    if (!p) COUNT_LIVE(q, 1); /* a resize keeps the block count */
    return q;
}
