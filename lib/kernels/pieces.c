/* The sum of equal pieces that an all-to-all delivered (kernels.h
 * sum_pieces): the first two added, then each further piece, over a
 * block short enough to stay in L1 before the next block.  One loop per
 * piece vectorises; one loop over the pieces per element (a trip count
 * known only at run time) did not and ran 4 times slower in cache.  Each
 * element's additions come in piece order either way: the same bits. */
#include "kernels.h"

#include "bf16.h"

enum { BLOCK = 2048 }; /* floats of dst, and of each piece, per block */

typedef struct pieces_args {
    const float *pieces;
    size_t n;
    int count;
    float *dst;
} pieces_args;

VECTOR_CLONES static void sum_block(const pieces_args *a, size_t lo, size_t hi)
{
    const float *p0 = a->pieces;
    float *d = a->dst;
    if (a->count == 1) {
        for (size_t i = lo; i < hi; i++) d[i] = p0[i];
        return;
    }
    const float *p1 = p0 + a->n;
    for (size_t i = lo; i < hi; i++) d[i] = p0[i] + p1[i];
    for (int p = 2; p < a->count; p++) {
        const float *q = p0 + (size_t)p * a->n;
        for (size_t i = lo; i < hi; i++) d[i] += q[i];
    }
}

static void sum_range(void *arg, size_t lo, size_t hi)
{
    for (size_t b = lo; b < hi; b += BLOCK) sum_block(arg, b, hi - b < BLOCK ? hi : b + BLOCK);
}

void sum_pieces(const float *pieces, size_t n, int count, float *dst, int threads)
{
    if (n == 0 || count < 1) return;
    pieces_args a = {pieces, n, count, dst};
    parallel_for(n, 16, n * (size_t)count, threads, sum_range, &a);
}

typedef struct pieces_bf16_args {
    const uint16_t *pieces;
    size_t n;
    int count;
    float *dst;
} pieces_bf16_args;

/* One block: the first piece widened, then each further one added. */
VECTOR_CLONES static void sum_block_bf16(const pieces_bf16_args *a, size_t lo, size_t hi)
{
    float *d = a->dst;
    for (size_t i = lo; i < hi; i++) d[i] = bf16_to_f32(a->pieces[i]);
    for (int p = 1; p < a->count; p++) {
        const uint16_t *q = a->pieces + (size_t)p * a->n;
        for (size_t i = lo; i < hi; i++) d[i] += bf16_to_f32(q[i]);
    }
}

static void sum_range_bf16(void *arg, size_t lo, size_t hi)
{
    for (size_t b = lo; b < hi; b += BLOCK)
        sum_block_bf16(arg, b, hi - b < BLOCK ? hi : b + BLOCK);
}

void sum_pieces_bf16(const uint16_t *pieces, size_t n, int count, float *dst, int threads)
{
    if (n == 0 || count < 1) return;
    pieces_bf16_args a = {pieces, n, count, dst};
    parallel_for(n, 16, n * (size_t)count, threads, sum_range_bf16, &a);
}
