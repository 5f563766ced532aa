/* The weights of a dense layer split by columns (exchange.h,
 * exchange_columns): each rank's weight gradient is complete on its own
 * columns and zero elsewhere, so the all-to-all of all-to-all + all-gather
 * would carry only zeros to sum.  Each rank instead updates its own
 * columns with the gradient it has (optimizer state for them alone), as
 * soon as the backward pass is done with them (update_local), and one
 * all-gather of the packed columns brings every rank the others'.  The K
 * biases, a partial sum on every rank, are allreduced and updated
 * everywhere once that arrives.  Sent per step: K F_r (P - 1) floats of
 * columns instead of twice K F (P - 1) / P.
 *
 * The own columns live packed in the stage during training
 * (exchange_own_columns): the passes multiply them there, the update
 * streams them (and their state) instead of short runs of the weights,
 * and they are the all-gather's contribution as they stand (so the layer's
 * forward pass waits for the all-gather, which has long arrived by then:
 * MPI may rewrite a contribution in place).  The rank's passes read only
 * its own columns, so the others' are copied into the parameters only
 * when something else reads them (exchange_flush), which copies the own
 * ones back too; the next pass packs them again from the parameters
 * (whatever wrote them meanwhile).  The arithmetic is the all-to-all's:
 * its sum of a gradient with P - 1 zeros is that gradient. */
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "exchange_strategy.h"

typedef struct columns {
    int out, features, ranks;
    bool bias;
    int *start, *first, *len;  /* the tables of exchange_columns, copied */
    int *counts, *displs;      /* rank p's packed columns in stage: K x F_p */
    float *stage;              /* [p][K][F_p] */
    bool stale;                /* stage holds others' columns newer than params */
    bool own_packed;           /* the stage holds this rank's columns, current */
    bool own_newer;            /* ... updated since params had them */
} columns;

static size_t columns_of(const columns *c, int p)
{
    size_t count = 0;
    for (int k = c->start[p]; k < c->start[p + 1]; k++) count += (size_t)c->len[k];
    return count;
}

static int *copy_ints(const int *from, int n)
{
    int *to = mem_calloc((size_t)(n > 0 ? n : 1), sizeof *to);
    if (to && n > 0) memcpy(to, from, (size_t)n * sizeof *to);
    return to;
}

static pcnn_status columns_plan(exchange *x, bucket *b)
{
    const exchange_columns *in = bucket_layer(x, b)->columns;
    const int P = x->ranks, layer = b->first_layer;
    if (in->ranks != P)
        return FAIL(PCNN_ERR_INTERNAL, "layer %d: columns of %d ranks, %d ranks", layer,
                    in->ranks, P);
    columns *c = mem_calloc(1, sizeof *c);
    if (!c) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "column exchange of layer %d", layer);
    b->impl = c;
    *c = (columns){.out = in->out, .features = in->features, .ranks = P, .bias = in->bias};
    const int runs = in->start[P];
    c->start = copy_ints(in->start, P + 1);
    c->first = copy_ints(in->first, runs);
    c->len = copy_ints(in->len, runs);
    c->counts = mem_calloc((size_t)P, sizeof(int));
    c->displs = mem_calloc((size_t)P, sizeof(int));
    if (!c->start || !c->first || !c->len || !c->counts || !c->displs)
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "column tables of layer %d", layer);
    size_t total = 0;
    for (int p = 0; p < P; p++) {
        c->counts[p] = (int)((size_t)c->out * columns_of(c, p));
        c->displs[p] = (int)total;
        total += (size_t)c->counts[p];
    }
    if (total != (size_t)c->out * (size_t)c->features)
        return FAIL(PCNN_ERR_INTERNAL, "layer %d: the ranks' columns cover %zu of %zu weights",
                    layer, total, (size_t)c->out * (size_t)c->features);
    c->stage = mem_alloc_floats(total);
    if (!c->stage) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "column staging of layer %d", layer);
    x->memory_bytes += total * sizeof(float);
    const size_t own = (size_t)c->counts[x->rank], biases = c->bias ? (size_t)c->out : 0;
    b->state_count = own + biases;
    x->bytes_per_step += (uint64_t)own * (uint64_t)(P - 1) * sizeof(float);
    x->bytes_per_step += 2 * (uint64_t)biases * sizeof(float) * (uint64_t)(P - 1) / (uint64_t)P;
    return PCNN_OK;
}

static void columns_free(bucket *b)
{
    columns *c = b->impl;
    if (!c) return;
    mem_free(c->start);
    mem_free(c->first);
    mem_free(c->len);
    mem_free(c->counts);
    mem_free(c->displs);
    mem_free(c->stage);
    mem_free(c);
    b->impl = NULL;
}

static size_t bias_at(const columns *c) { return (size_t)c->out * (size_t)c->features; }

static void columns_prepare(exchange *x, bucket *b)
{
    columns *c = b->impl;
    const int tag = (int)(b - x->buckets);
    b->num_reduce = 0;
    if (c->bias)
        b->reduce[b->num_reduce++] =
            (request){.kind = REQ_ALLREDUCE, .send = x->setup.grads + b->lo + bias_at(c),
                      .count = c->out, .tag = tag};
    b->gather = (request){.kind = REQ_ALLGATHERV, .recv = c->stage, .rcounts = c->counts,
                          .rdispls = c->displs, .tag = tag};
}

static void columns_post(exchange *x, bucket *b)
{
    if (b->num_reduce) engine_post(x->engine, &b->reduce[0]);
}

/* Visit rank p's runs, row after row: where each lies in the weights,
 * in its packed block of the stage (= its optimizer state) and its length. */
typedef void (*run_fn)(void *arg, size_t weight, size_t packed, size_t len);

static void visit_runs(const columns *c, int p, run_fn fn, void *arg)
{
    size_t packed = 0;
    for (int o = 0; o < c->out; o++)
        for (int k = c->start[p]; k < c->start[p + 1]; k++) {
            const size_t len = (size_t)c->len[k];
            fn(arg, (size_t)o * (size_t)c->features + (size_t)c->first[k], packed, len);
            packed += len;
        }
}

typedef struct run_args {
    exchange *x;
    const bucket *b;
    float *block; /* the rank's packed columns in the stage */
} run_args;

/* Runs of equal length at a fixed stride, updated in one call (a split
 * along D, H or W makes every rank's runs one such sequence). */

typedef struct run_group {
    run_args a;
    size_t weight, packed, len, stride, runs;
} run_group;

static void flush_group(run_group *g)
{
    if (g->runs == 0) return;
    exchange *x = g->a.x;
    exchange_apply_update_strided(x, g->a.b, g->a.block + g->packed,
                                  x->setup.grads + g->a.b->lo + g->weight, g->packed, g->len,
                                  g->stride, g->runs);
    g->runs = 0;
}

static void update_run(void *arg, size_t weight, size_t packed, size_t len)
{
    run_group *g = arg;
    if (g->runs > 0 && len == g->len) {
        if (g->runs == 1 && weight >= g->weight + len) g->stride = weight - g->weight;
        if (weight == g->weight + g->runs * g->stride) {
            g->runs++;
            return;
        }
    }
    flush_group(g);
    *g = (run_group){.a = g->a, .weight = weight, .packed = packed, .len = len, .stride = len,
                     .runs = 1};
}

static void pack_run(void *arg, size_t weight, size_t packed, size_t len)
{
    const run_args *a = arg;
    memcpy(a->block + packed, a->x->setup.params + a->b->lo + weight, len * sizeof(float));
}

float *exchange_columns_own(exchange *x, bucket *b)
{
    columns *c = b->impl;
    run_args a = {x, b, c->stage + c->displs[x->rank]};
    if (!c->own_packed) visit_runs(c, x->rank, pack_run, &a);
    c->own_packed = true;
    return a.block;
}

/* The own columns: their gradient is complete on this rank. */
static void columns_update_own(exchange *x, bucket *b)
{
    columns *c = b->impl;
    run_group g = {.a = {x, b, exchange_columns_own(x, b)}};
    visit_runs(c, x->rank, update_run, &g);
    flush_group(&g);
    c->own_newer = true;
    b->local_updated = true;
}

/* The biases once their all-reduce arrived (and the columns, unless the
 * backward pass already updated them). */
static void columns_update(exchange *x, bucket *b)
{
    columns *c = b->impl;
    if (!b->local_updated) columns_update_own(x, b);
    if (c->bias) {
        const size_t at = b->lo + bias_at(c);
        exchange_apply_update(x, b, x->setup.params + at, x->setup.grads + at,
                              (size_t)c->counts[x->rank], (size_t)c->out);
    }
}

static void columns_post_gather(exchange *x, bucket *b) { engine_post(x->engine, &b->gather); }

static void columns_arrived(exchange *x, bucket *b)
{
    (void)x;
    ((columns *)b->impl)->stale = true;
}

static void unpack_run(void *arg, size_t weight, size_t packed, size_t len)
{
    const run_args *a = arg;
    memcpy(a->x->setup.params + a->b->lo + weight, a->block + packed, len * sizeof(float));
}

/* The parameters current for whatever reads or writes them next: the
 * others' columns if they arrived, this rank's if it updated them (packed
 * again from the parameters at the next pass). */
static void columns_settle(exchange *x, bucket *b)
{
    columns *c = b->impl;
    for (int p = 0; p < c->ranks; p++) {
        if (p == x->rank ? !c->own_newer : !c->stale) continue;
        run_args a = {x, b, c->stage + c->displs[p]};
        visit_runs(c, p, unpack_run, &a);
    }
    c->stale = c->own_newer = c->own_packed = false;
}

typedef struct owned_args {
    size_t lo;
    owned_run_fn fn;
    void *arg;
} owned_args;

static void owned_run_of(void *arg, size_t weight, size_t packed, size_t len)
{
    const owned_args *a = arg;
    a->fn(a->arg, (owned_run){packed, a->lo + weight, len});
}

static void columns_runs(const exchange *x, const bucket *b, int rank, owned_run_fn fn, void *arg)
{
    (void)x;
    const columns *c = b->impl;
    owned_args a = {b->lo, fn, arg};
    visit_runs(c, rank, owned_run_of, &a);
    if (c->bias)
        fn(arg, (owned_run){(size_t)c->counts[rank], b->lo + bias_at(c), (size_t)c->out});
}

const exchange_ops exchange_columns_ops = {
    .name = "all-gather of each rank's columns",
    .plan = columns_plan,
    .free = columns_free,
    .prepare = columns_prepare,
    .post_reduce = columns_post,
    .update_local = columns_update_own,
    .update = columns_update,
    .post_gather = columns_post_gather,
    .unpack = columns_arrived,
    .settle = columns_settle,
    .owned_runs = columns_runs,
};
