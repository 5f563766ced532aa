#define _DEFAULT_SOURCE
#include "memory.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE_BYTES (2u << 20)

void *mem_alloc(size_t bytes)
{
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
    return p;
}

float *mem_alloc_floats(size_t count)
{
    if (count > SIZE_MAX / sizeof(float)) return NULL;
    return mem_alloc(count * sizeof(float));
}

void mem_free(void *p) { free(p); }

void *mem_calloc(size_t count, size_t size) { return calloc(count ? count : 1, size ? size : 1); }

void *mem_realloc(void *p, size_t bytes) { return realloc(p, bytes ? bytes : 1); }
