/* The baseline exchange: an in-place allreduce of the bucket's gradient,
 * then every rank applies the full update (and keeps the full optimizer
 * state).  On one process this is the only strategy: a local update.
 *
 * bf16 on the wire: no MPI reduction (a custom operation would round each
 * partial sum to bf16 at every hop, in an order MPI chooses) but the
 * engine's two-phase bf16 allreduce (engine.h): a reduce-scatter as an
 * all-to-all of bf16 pieces, fp32 sums in rank order by each slice's
 * owner, and an all-gather of the sums rounded to bf16.  Every rank gets
 * the same summed gradient and applies the same fp32 update to its fp32
 * parameters (the masters, exchange_masters, are their exact copy). */
#include "../core/error.h"
#include "../core/memory.h"
#include "../kernels/bf16.h"
#include "exchange_strategy.h"

typedef struct allreduce16 {
    slices s;
    bf16 *send, *pieces, *gather;
} allreduce16;

static pcnn_status allreduce_plan(exchange *x, bucket *b)
{
    b->state_count = b->count;
    if (x->ranks == 1) return PCNN_OK;
    if (!x->bf16) {
        x->bytes_per_step += 2 * (uint64_t)b->count * sizeof(float) * (x->ranks - 1) / x->ranks;
        return PCNN_OK;
    }
    allreduce16 *a = mem_calloc(1, sizeof *a);
    if (!a) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "bf16 allreduce");
    b->impl = a;
    TRY(slices_plan(x, b, &a->s));
    const size_t own = a->s.owned_count, pieces = (size_t)x->ranks * own;
    a->send = mem_alloc((b->count ? b->count : 1) * sizeof(bf16));
    a->pieces = mem_alloc((pieces ? pieces : 1) * sizeof(bf16));
    a->gather = mem_alloc((b->count ? b->count : 1) * sizeof(bf16));
    if (!a->send || !a->pieces || !a->gather)
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "bf16 allreduce buffers");
    x->memory_bytes += (2 * b->count + pieces) * sizeof(bf16);
    /* The pieces of the other slices out, the own slice's sums to the
     * P - 1 others: 2 (n - n_r) + 2 n_r (P - 1) bytes. */
    x->bytes_per_step += (uint64_t)(b->count - own) * sizeof(bf16);
    x->bytes_per_step += (uint64_t)own * (uint64_t)(x->ranks - 1) * sizeof(bf16);
    return PCNN_OK;
}

static void allreduce_free(bucket *b)
{
    allreduce16 *a = b->impl;
    if (!a) return;
    slices_free(&a->s);
    mem_free(a->send);
    mem_free(a->pieces);
    mem_free(a->gather);
    mem_free(a);
    b->impl = NULL;
}

static void allreduce_prepare(exchange *x, bucket *b)
{
    b->reduce[0] = (request){.kind = REQ_ALLREDUCE, .send = x->setup.grads + b->lo,
                             .count = (int)b->count, .tag = (int)(b - x->buckets)};
    b->num_reduce = 1;
    const allreduce16 *a = b->impl;
    if (!a) return;
    request *r = &b->reduce[0];
    r->bf16 = true;
    r->scounts = a->s.counts;
    r->sdispls = a->s.displs;
    r->rcounts = a->s.recv_counts;
    r->rdispls = a->s.recv_displs;
    r->wire_send = a->send;
    r->wire_pieces = a->pieces;
    r->wire_gather = a->gather;
    r->rank = x->rank;
    r->ranks = x->ranks;
}

static void allreduce_post(exchange *x, bucket *b) { engine_post(x->engine, &b->reduce[0]); }

static void allreduce_update(exchange *x, bucket *b)
{
    exchange_apply_update(x, b, x->setup.params + b->lo, x->setup.grads + b->lo, 0, b->count);
}

static void allreduce_runs(const exchange *x, const bucket *b, int rank, owned_run_fn fn,
                           void *arg)
{
    (void)x;
    (void)rank;
    fn(arg, (owned_run){0, b->lo, b->count});
}

const exchange_ops exchange_allreduce_ops = {
    .name = "allreduce",
    .plan = allreduce_plan,
    .free = allreduce_free,
    .prepare = allreduce_prepare,
    .post_reduce = allreduce_post,
    .update = allreduce_update,
    .owned_runs = allreduce_runs,
};
