/* Counting every heap allocation of the process, for the benchmark's
 * "mallocs per step".
 *
 * glibc supports replacing malloc by defining malloc, free, calloc, realloc
 * and the aligned variants in the program; the dynamic linker then resolves
 * every caller's malloc (libpcnn, OpenBLAS, libgomp, MPICH, glibc itself)
 * to these.  They count the call and forward to glibc's own allocator
 * through its exported __libc_* entry points, so allocation behaviour (and
 * GLIBC_TUNABLES) is unchanged.  No LD_PRELOAD, no hooks removed from
 * modern glibc. */
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "malloc_count.h"

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void *__libc_memalign(size_t align, size_t size);
extern void __libc_free(void *p);

static atomic_ulong allocations;

unsigned long malloc_count(void)
{
    return atomic_load_explicit(&allocations, memory_order_relaxed);
}

static void count(void) { atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed); }

void *malloc(size_t size)
{
    count();
    return __libc_malloc(size);
}

void *calloc(size_t count_, size_t size)
{
    count();
    return __libc_calloc(count_, size);
}

void *realloc(void *p, size_t size)
{
    count();
    return __libc_realloc(p, size);
}

void free(void *p) { __libc_free(p); }

void *memalign(size_t align, size_t size)
{
    count();
    return __libc_memalign(align, size);
}

void *aligned_alloc(size_t align, size_t size)
{
    count();
    return __libc_memalign(align, size);
}

int posix_memalign(void **out, size_t align, size_t size)
{
    if (align < sizeof(void *) || (align & (align - 1)) != 0) return EINVAL;
    count();
    void *p = __libc_memalign(align, size);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
