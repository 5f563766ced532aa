/* All-to-all + all-gather (seed 001 §4.1.2, §4.3): the bucket is cut into
 * P slices, rank r owning slice r.  An all-to-all brings rank r the P
 * pieces of its slice; it sums them (in rank order, so the bits do not
 * depend on timing), updates the slice with optimizer state kept for that
 * slice only, and an all-gather brings every rank the updated bucket. */
#include "../core/error.h"
#include "../core/memory.h"
#include "../kernels/kernels.h"
#include "decomp.h"
#include "exchange_strategy.h"

typedef struct alltoall {
    /* Rank p's slice is [displs[p], +counts[p]) relative to the bucket;
     * recv holds the P pieces of this rank's slice. */
    int *counts, *displs, *recv_counts, *recv_displs;
    float *recv;
    size_t owned_lo, owned_count;
} alltoall;

static pcnn_status alltoall_plan(exchange *x, bucket *b)
{
    const int P = x->ranks, r = x->rank;
    alltoall *a = mem_calloc(1, sizeof *a);
    if (!a) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "exchange slices");
    b->impl = a;
    a->counts = mem_calloc((size_t)P, sizeof(int));
    a->displs = mem_calloc((size_t)P, sizeof(int));
    a->recv_counts = mem_calloc((size_t)P, sizeof(int));
    a->recv_displs = mem_calloc((size_t)P, sizeof(int));
    if (!a->counts || !a->displs || !a->recv_counts || !a->recv_displs)
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "exchange slices");
    for (int p = 0; p < P; p++) {
        long first;
        a->counts[p] = decomp_share((long)b->count, P, p, &first);
        a->displs[p] = (int)first;
    }
    a->owned_lo = (size_t)a->displs[r];
    a->owned_count = (size_t)a->counts[r];
    for (int p = 0; p < P; p++) {
        a->recv_counts[p] = a->counts[r];
        a->recv_displs[p] = p * a->counts[r];
    }
    a->recv = mem_alloc_floats((size_t)P * a->owned_count);
    if (!a->recv) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "exchange receive buffer");
    x->memory_bytes += (size_t)P * a->owned_count * sizeof(float);
    b->state_count = a->owned_count;
    /* Sent by this rank: every slice but its own (all-to-all), then its own
     * slice to the P-1 others (all-gather). */
    x->bytes_per_step += (uint64_t)(b->count - a->owned_count) * sizeof(float);
    x->bytes_per_step += (uint64_t)a->owned_count * (P - 1) * sizeof(float);
    return PCNN_OK;
}

static void alltoall_free(bucket *b)
{
    alltoall *a = b->impl;
    if (!a) return;
    mem_free(a->counts);
    mem_free(a->displs);
    mem_free(a->recv_counts);
    mem_free(a->recv_displs);
    mem_free(a->recv);
    mem_free(a);
    b->impl = NULL;
}

static void alltoall_prepare(exchange *x, bucket *b)
{
    alltoall *a = b->impl;
    const int tag = (int)(b - x->buckets);
    b->reduce[0] = (request){.kind = REQ_ALLTOALLV, .send = x->setup.grads + b->lo,
                             .recv = a->recv, .scounts = a->counts, .sdispls = a->displs,
                             .rcounts = a->recv_counts, .rdispls = a->recv_displs, .tag = tag};
    b->num_reduce = 1;
    b->gather = (request){.kind = REQ_ALLGATHERV, .recv = x->setup.params + b->lo,
                          .rcounts = a->counts, .rdispls = a->displs, .tag = tag};
}

static void alltoall_post(exchange *x, bucket *b) { engine_post(x->engine, &b->reduce[0]); }

static void alltoall_update(exchange *x, bucket *b)
{
    const alltoall *a = b->impl;
    const size_t at = b->lo + a->owned_lo;
    sum_pieces(a->recv, a->owned_count, x->ranks, x->setup.grads + at, x->setup.threads);
    exchange_apply_update(x, b, x->setup.params + at, x->setup.grads + at, 0, a->owned_count);
}

static void alltoall_post_gather(exchange *x, bucket *b) { engine_post(x->engine, &b->gather); }

static void alltoall_runs(const exchange *x, const bucket *b, int rank, owned_run_fn fn,
                          void *arg)
{
    long first;
    const int count = decomp_share((long)b->count, x->ranks, rank, &first);
    fn(arg, (owned_run){0, b->lo + (size_t)first, (size_t)count});
}

const exchange_ops exchange_alltoall_ops = {
    .name = "all-to-all + all-gather",
    .plan = alltoall_plan,
    .free = alltoall_free,
    .prepare = alltoall_prepare,
    .post_reduce = alltoall_post,
    .update = alltoall_update,
    .post_gather = alltoall_post_gather,
    .owned_runs = alltoall_runs,
};
