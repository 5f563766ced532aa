/* The baseline exchange: an in-place allreduce of the bucket's gradient,
 * then every rank applies the full update (and keeps the full optimizer
 * state).  On one process this is the only strategy: a local update. */
#include "../core/error.h"
#include "exchange_strategy.h"

static pcnn_status allreduce_plan(exchange *x, bucket *b)
{
    b->state_count = b->count;
    if (x->ranks > 1)
        x->bytes_per_step += 2 * (uint64_t)b->count * sizeof(float) * (x->ranks - 1) / x->ranks;
    return PCNN_OK;
}

static void allreduce_free(bucket *b) { (void)b; }

static void allreduce_prepare(exchange *x, bucket *b)
{
    b->reduce[0] = (request){.kind = REQ_ALLREDUCE, .send = x->setup.grads + b->lo,
                             .count = (int)b->count, .tag = (int)(b - x->buckets)};
    b->num_reduce = 1;
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
