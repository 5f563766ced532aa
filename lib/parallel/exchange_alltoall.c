/* All-to-all + all-gather (seed 001 §4.1.2, §4.3): the bucket is cut into
 * P slices, rank r owning slice r.  An all-to-all brings rank r the P
 * pieces of its slice; it sums them (in rank order, so the bits do not
 * depend on timing), updates the slice with optimizer state kept for that
 * slice only, and an all-gather brings every rank the updated bucket.
 *
 * bf16 on the wire (exchange_setup.precision): the pieces travel rounded
 * to bf16 and are summed in fp32; the owner updates its fp32 masters
 * (exchange_masters) and publishes them rounded to bf16, into its
 * parameters and into the all-gather, so every rank ends with the same
 * bf16-valued parameters. */
#include "../core/error.h"
#include "../core/memory.h"
#include "../kernels/bf16.h"
#include "../kernels/kernels.h"
#include "decomp.h"
#include "exchange_strategy.h"

pcnn_status slices_plan(const exchange *x, const bucket *b, slices *s)
{
    const int P = x->ranks, r = x->rank;
    s->counts = mem_calloc((size_t)P, sizeof(int));
    s->displs = mem_calloc((size_t)P, sizeof(int));
    s->recv_counts = mem_calloc((size_t)P, sizeof(int));
    s->recv_displs = mem_calloc((size_t)P, sizeof(int));
    if (!s->counts || !s->displs || !s->recv_counts || !s->recv_displs)
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "exchange slices");
    for (int p = 0; p < P; p++) {
        long first;
        s->counts[p] = decomp_share((long)b->count, P, p, &first);
        s->displs[p] = (int)first;
    }
    s->owned_lo = (size_t)s->displs[r];
    s->owned_count = (size_t)s->counts[r];
    for (int p = 0; p < P; p++) {
        s->recv_counts[p] = s->counts[r];
        s->recv_displs[p] = p * s->counts[r];
    }
    return PCNN_OK;
}

void slices_free(slices *s)
{
    mem_free(s->counts);
    mem_free(s->displs);
    mem_free(s->recv_counts);
    mem_free(s->recv_displs);
    *s = (slices){0};
}

typedef struct alltoall {
    slices s;
    float *recv;          /* fp32: the P pieces of this rank's slice */
    /* bf16: this rank's gradient rounded (sent), the pieces of its slice,
     * and the bucket's parameters as all-gathered. */
    bf16 *send16, *recv16, *gather16;
} alltoall;

static pcnn_status alltoall_plan(exchange *x, bucket *b)
{
    const int P = x->ranks;
    alltoall *a = mem_calloc(1, sizeof *a);
    if (!a) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "exchange slices");
    b->impl = a;
    TRY(slices_plan(x, b, &a->s));
    const size_t own = a->s.owned_count, pieces = (size_t)P * own;
    if (x->bf16) {
        a->send16 = mem_alloc((b->count ? b->count : 1) * sizeof(bf16));
        a->recv16 = mem_alloc((pieces ? pieces : 1) * sizeof(bf16));
        a->gather16 = mem_alloc((b->count ? b->count : 1) * sizeof(bf16));
        if (!a->send16 || !a->recv16 || !a->gather16)
            return FAIL(PCNN_ERR_OUT_OF_MEMORY, "bf16 exchange buffers");
        x->memory_bytes += (2 * b->count + pieces) * sizeof(bf16);
        b->round_params = true;
    } else {
        a->recv = mem_alloc_floats(pieces);
        if (!a->recv) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "exchange receive buffer");
        x->memory_bytes += pieces * sizeof(float);
    }
    b->state_count = own;
    /* Sent by this rank: every slice but its own (all-to-all), then its own
     * slice to the P-1 others (all-gather). */
    const uint64_t value = x->bf16 ? sizeof(bf16) : sizeof(float);
    x->bytes_per_step += (uint64_t)(b->count - own) * value;
    x->bytes_per_step += (uint64_t)own * (uint64_t)(P - 1) * value;
    return PCNN_OK;
}

static void alltoall_free(bucket *b)
{
    alltoall *a = b->impl;
    if (!a) return;
    slices_free(&a->s);
    mem_free(a->recv);
    mem_free(a->send16);
    mem_free(a->recv16);
    mem_free(a->gather16);
    mem_free(a);
    b->impl = NULL;
}

static void alltoall_prepare(exchange *x, bucket *b)
{
    alltoall *a = b->impl;
    const int tag = (int)(b - x->buckets);
    const slices *s = &a->s;
    b->reduce[0] = (request){.kind = REQ_ALLTOALLV, .send = x->setup.grads + b->lo,
                             .recv = a->recv, .scounts = s->counts, .sdispls = s->displs,
                             .rcounts = s->recv_counts, .rdispls = s->recv_displs, .tag = tag};
    b->num_reduce = 1;
    b->gather = (request){.kind = REQ_ALLGATHERV, .recv = x->setup.params + b->lo,
                          .rcounts = s->counts, .rdispls = s->displs, .tag = tag};
    if (x->bf16) {
        b->reduce[0].send = a->send16;
        b->reduce[0].recv = a->recv16;
        b->reduce[0].bf16 = true;
        b->gather.recv = a->gather16;
        b->gather.bf16 = true;
    }
}

static void alltoall_post(exchange *x, bucket *b)
{
    alltoall *a = b->impl;
    if (x->bf16) bf16_from_f32_array(x->setup.grads + b->lo, a->send16, b->count);
    engine_post(x->engine, &b->reduce[0]);
}

static void alltoall_update(exchange *x, bucket *b)
{
    const alltoall *a = b->impl;
    const size_t own = a->s.owned_count, at = b->lo + a->s.owned_lo;
    float *grads = x->setup.grads + at, *params = x->setup.params + at;
    if (!x->bf16) {
        sum_pieces(a->recv, own, x->ranks, grads, x->setup.threads);
        exchange_apply_update(x, b, params, grads, 0, own);
        return;
    }
    sum_pieces_bf16(a->recv16, own, x->ranks, grads, x->setup.threads);
    exchange_apply_update(x, b, params, grads, 0, own); /* params: the masters rounded */
    bf16_from_f32_array(params, a->gather16 + a->s.owned_lo, own); /* exact */
}

static void alltoall_post_gather(exchange *x, bucket *b) { engine_post(x->engine, &b->gather); }

/* bf16: every slice into the parameters (the own one as it already is). */
static void alltoall_unpack(exchange *x, bucket *b)
{
    const alltoall *a = b->impl;
    if (x->bf16) bf16_to_f32_array(a->gather16, x->setup.params + b->lo, b->count);
}

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
    .unpack = alltoall_unpack,
    .owned_runs = alltoall_runs,
};
