/* The exchange's plan and the schedule of a step: buckets, the progress
 * engine, and the order in which the strategies' hooks run. */
#include "exchange.h"

#include <string.h>

#include "../core/clock.h"
#include "../core/error.h"
#include "../core/memory.h"
#include "../kernels/bf16.h"
#include "../strategy/exchange_choice.h"
#include "../strategy/thresholds.h"
#include "engine_choice.h"
#include "exchange_strategy.h"

static const exchange_ops *ops_of(pcnn_exchange kind)
{
    switch (kind) {
    case PCNN_EXCHANGE_ALLTOALL_ALLGATHER: return &exchange_alltoall_ops;
    case PCNN_EXCHANGE_FC_GRADIENT: return &exchange_fc_ops;
    case PCNN_EXCHANGE_ALLREDUCE: break;
    }
    return &exchange_allreduce_ops;
}

const char *exchange_kind_name(pcnn_exchange kind, bool by_columns)
{
    if (by_columns && kind == PCNN_EXCHANGE_ALLTOALL_ALLGATHER) return exchange_columns_ops.name;
    return ops_of(kind)->name;
}

const exchange_layer *bucket_layer(const exchange *x, const bucket *b)
{
    for (int i = 0; i < x->setup.num_param_layers; i++)
        if (x->layers[i].index == b->first_layer) return &x->layers[i];
    return NULL; /* unreachable: buckets start at a layer with parameters */
}

/* The parameters of count updated masters: the values every rank gets. */
static void publish(const bucket *b, float *params, const float *master, size_t count)
{
    if (!b->round_params) {
        memcpy(params, master, count * sizeof(float));
        return;
    }
    for (size_t i = 0; i < count; i++) params[i] = bf16_to_f32(bf16_from_f32(master[i]));
}

void exchange_apply_update(exchange *x, const bucket *b, float *params, const float *grads,
                           size_t state_offset, size_t count)
{
    const size_t at = b->state_offset + state_offset;
    if (!x->master) {
        x->setup.update(x->setup.update_arg, params, grads, at, count);
        return;
    }
    x->setup.update(x->setup.update_arg, x->master + at, grads, at, count);
    publish(b, params, x->master + at, count);
}

void exchange_apply_update_strided(exchange *x, const bucket *b, float *params,
                                   const float *grads, size_t state_offset, size_t len,
                                   size_t stride, size_t runs)
{
    const size_t at = b->state_offset + state_offset;
    if (!x->master) {
        x->setup.update_strided(x->setup.update_arg, params, grads, at, len, stride, runs);
        return;
    }
    /* Packed parameters and state alike: the masters are packed too. */
    x->setup.update_strided(x->setup.update_arg, x->master + at, grads, at, len, stride, runs);
    publish(b, params, x->master + at, len * runs);
}

float *exchange_masters(const exchange *x) { return x ? x->master : NULL; }

static void master_from_param(void *arg, owned_run run)
{
    exchange *x = arg;
    memcpy(x->master + run.state_offset, x->setup.params + run.param_index,
           run.count * sizeof(float));
}

void exchange_masters_from_params(exchange *x)
{
    if (!x || !x->master) return;
    exchange_owned_runs(x, x->rank, master_from_param, x);
    for (int k = 0; k < x->num_buckets; k++) {
        const bucket *b = &x->buckets[k];
        if (b->round_params) publish(b, x->setup.params + b->lo, x->setup.params + b->lo, b->count);
    }
}

bool exchange_layer_rounded(const exchange *x, int layer)
{
    const int k = layer >= 0 && layer < x->setup.num_layers ? x->bucket_of_layer[layer] : -1;
    return k >= 0 && x->buckets[k].round_params;
}

static pcnn_status add_bucket(exchange *x, int *cap)
{
    if (x->num_buckets == *cap) {
        int grown_cap = *cap ? 2 * *cap : 8;
        bucket *grown = mem_realloc(x->buckets, (size_t)grown_cap * sizeof *grown);
        if (!grown) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "exchange buckets");
        x->buckets = grown;
        *cap = grown_cap;
    }
    x->buckets[x->num_buckets++] = (bucket){0};
    return PCNN_OK;
}

/* Buckets as the strategy room groups them (exchange_group_buckets). */
static pcnn_status group_buckets(exchange *x)
{
    const int L = x->setup.num_layers;
    size_t *counts = mem_calloc((size_t)L, sizeof *counts);
    pcnn_exchange *kinds = mem_calloc((size_t)L, sizeof *kinds);
    size_t *offsets = mem_calloc((size_t)L, sizeof *offsets);
    bool *by_columns = mem_calloc((size_t)L, sizeof *by_columns);
    bucket_span *spans = mem_calloc((size_t)L, sizeof *spans);
    pcnn_status st = PCNN_OK;
    if (!counts || !kinds || !offsets || !by_columns || !spans)
        st = FAIL(PCNN_ERR_OUT_OF_MEMORY, "bucket plan");
    for (int i = 0; st == PCNN_OK && i < x->setup.num_param_layers; i++) {
        const exchange_layer *l = &x->layers[i];
        counts[l->index] = l->num_params;
        kinds[l->index] = l->kind;
        offsets[l->index] = l->param_offset;
        by_columns[l->index] = l->columns && x->ranks > 1;
    }
    const int n = st == PCNN_OK ? exchange_group_buckets(counts, kinds, by_columns, L,
                                                         x->setup.bucket_bytes, x->ranks > 1,
                                                         spans)
                                : 0;
    int cap = 0;
    for (int k = 0; st == PCNN_OK && k < n; k++) {
        st = add_bucket(x, &cap);
        if (st != PCNN_OK) break;
        bucket *b = &x->buckets[x->num_buckets - 1];
        b->lo = offsets[spans[k].first_layer];
        b->count = spans[k].count;
        b->kind = spans[k].kind;
        b->first_layer = spans[k].first_layer;
        b->last_layer = spans[k].last_layer;
        b->ops = by_columns[b->first_layer] ? &exchange_columns_ops : ops_of(b->kind);
    }
    mem_free(counts);
    mem_free(kinds);
    mem_free(offsets);
    mem_free(by_columns);
    mem_free(spans);
    return st;
}

static pcnn_status plan_buckets(exchange *x)
{
    TRY(group_buckets(x));
    for (int i = 0; i < x->setup.num_layers; i++) x->bucket_of_layer[i] = -1;
    for (int k = 0; k < x->num_buckets; k++) {
        bucket *b = &x->buckets[k];
        if (b->count > INT32_MAX)
            return FAIL(PCNN_ERR_UNSUPPORTED, "layers %d..%d hold %zu parameters; one message "
                        "is limited to 2^31 floats", b->first_layer, b->last_layer, b->count);
        TRY(b->ops->plan(x, b));
        b->state_offset = x->state_count;
        x->state_count += b->state_count;
        for (int i = b->first_layer; i <= b->last_layer; i++) x->bucket_of_layer[i] = k;
    }
    if (x->bf16) {
        x->master = mem_alloc_floats(x->state_count ? x->state_count : 1);
        if (!x->master)
            return FAIL(PCNN_ERR_OUT_OF_MEMORY, "%zu fp32 master weights", x->state_count);
        x->memory_bytes += x->state_count * sizeof(float);
        exchange_masters_from_params(x);
    }
    return PCNN_OK;
}

pcnn_status exchange_create(const exchange_setup *setup, exchange **out)
{
    exchange *x = mem_calloc(1, sizeof *x);
    if (!x) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "exchange plan");
    x->setup = *setup;
    x->comm = setup->comm;
    x->ranks = setup->comm ? setup->comm->size : 1;
    x->rank = setup->comm ? setup->comm->rank : 0;
    x->bf16 = setup->precision == PCNN_PRECISION_BF16 && x->ranks > 1;
    const size_t n = (size_t)setup->num_param_layers;
    x->layers = mem_calloc(n ? n : 1, sizeof *x->layers);
    x->bucket_of_layer = mem_calloc((size_t)setup->num_layers, sizeof(int));
    pcnn_status st = PCNN_OK;
    if (!x->layers || !x->bucket_of_layer) st = FAIL(PCNN_ERR_OUT_OF_MEMORY, "bucket table");
    if (st == PCNN_OK) {
        if (n) memcpy(x->layers, setup->layers, n * sizeof *x->layers);
        x->setup.layers = x->layers;
        st = plan_buckets(x);
    }
    if (st != PCNN_OK) {
        exchange_destroy(x);
        return st;
    }
    *out = x;
    return PCNN_OK;
}

void exchange_destroy(exchange *x)
{
    if (!x) return;
    if (mpi_is_finalized()) engine_abort(x->engine); /* nothing left to wait for */
    engine_destroy(x->engine); /* waits for anything still in flight */
    if (x->has_mpi && !mpi_is_finalized()) MPI_Comm_free(&x->mpi);
    for (int k = 0; k < x->num_buckets; k++) x->buckets[k].ops->free(&x->buckets[k]);
    mem_free(x->buckets);
    mem_free(x->master);
    mem_free(x->bucket_of_layer);
    mem_free(x->layers);
    if (!x->dup_given_up || mpi_is_finalized()) mem_free(x);
}

void exchange_abort(exchange *x)
{
    if (x) engine_abort(x->engine);
}

pcnn_status exchange_error(const exchange *x) { return x ? engine_error(x->engine) : PCNN_OK; }

bool exchange_abandon(exchange *x)
{
    if (!x) return false;
    bool comm_kept = false;
    /* The ranks may have started different collectives: the engine's
     * communicator and those in flight are settled inside MPI_Finalize. */
    const bool abandoned = engine_retire(x->engine, &comm_kept); /* joins outside MPI */
    x->engine = NULL;
    if (comm_kept) {
        x->has_mpi = false;
    } else if (abandoned && x->has_mpi && !mpi_is_finalized()) {
        /* A communicator with collectives pending may be freed. */
        MPI_Comm_free(&x->mpi);
        x->has_mpi = false;
    }
    return abandoned;
}

bool exchange_engine_vote(exchange *x)
{
    if (x->ranks == 1) return false;
    x->vote_thread = engine_vote_thread(x->comm, x->setup.engine, x->setup.threads,
                                        &x->thread_shares_core, x->engine_why,
                                        sizeof x->engine_why);
    return x->vote_thread;
}

/* The exchange's own duplicate of the communicator, within the timeout.
 * Nothing that can fail on one rank comes before the collective; a
 * given-up MPI_Comm_idup may still write x->mpi, so x is then never freed. */
static pcnn_status duplicate(exchange *x)
{
    MPI_Request req;
    const int code = MPI_Comm_idup(x->comm->comm, &x->mpi, &req);
    const pcnn_status st = comm_complete(x->comm, code, &req, *x->setup.timeout_ms,
                                         "pcnn_net_finalize", "MPI_Comm_dup (exchange)");
    if (st != PCNN_OK) {
        x->dup_given_up = code == MPI_SUCCESS;
        return st;
    }
    x->has_mpi = true;
    return PCNN_OK;
}

/* A communication thread here would share its cores with compute (not
 * pinned to one of its own with PCNN_OPT_COMM_CORE). */
static bool unpinned_on_shared_cores(const exchange *x)
{
    return x->thread_shares_core && x->setup.comm_core < 0;
}

pcnn_status exchange_start(exchange *x, int thread_votes)
{
    if (x->ranks == 1) return PCNN_OK;
    engine_kind kind;
    TRY(engine_decide(x->comm, x->setup.engine, x->vote_thread, thread_votes, &kind,
                      x->engine_why, sizeof x->engine_why));
    TRY(duplicate(x));
    MPI_Comm_set_errhandler(x->mpi, MPI_ERRORS_RETURN);
    for (int k = 0; k < x->num_buckets; k++) x->buckets[k].ops->prepare(x, &x->buckets[k]);
    const long pause_ns = unpinned_on_shared_cores(x)
                              ? 1000L * strategy_table.engine_poll_pause_us
                              : 0;
    return engine_create(&x->engine, kind, x->mpi, 3 * x->num_buckets + 2, x->setup.comm_core,
                         pause_ns);
}

size_t exchange_state_count(const exchange *x) { return x->state_count; }
uint64_t exchange_bytes_per_step(const exchange *x) { return x->bytes_per_step; }
size_t exchange_memory_bytes(const exchange *x) { return x->memory_bytes; }
int exchange_active_engine(const exchange *x)
{
    return x->engine ? (int)engine_get_kind(x->engine) : 0;
}

const char *exchange_engine_reason(const exchange *x) { return x->engine_why; }

bool exchange_thread_pauses(const exchange *x)
{
    return x->engine && engine_get_kind(x->engine) == ENGINE_THREAD && unpinned_on_shared_cores(x);
}
int exchange_num_buckets(const exchange *x) { return x->num_buckets; }

int exchange_kind_of_layer(const exchange *x, int layer)
{
    const int k = layer >= 0 && layer < x->setup.num_layers ? x->bucket_of_layer[layer] : -1;
    return k < 0 ? -1 : (int)x->buckets[k].kind;
}

const float *exchange_own_columns(exchange *x, int layer)
{
    const int k = x && layer >= 0 && layer < x->setup.num_layers ? x->bucket_of_layer[layer] : -1;
    if (k < 0 || x->buckets[k].ops != &exchange_columns_ops) return NULL;
    return exchange_columns_own(x, &x->buckets[k]);
}

static void count_run(void *arg, owned_run run) { *(size_t *)arg += run.count; }

typedef struct shifted_runs {
    owned_run_fn fn;
    void *arg;
    size_t state_base;
} shifted_runs;

static void shift_run(void *arg, owned_run run)
{
    const shifted_runs *s = arg;
    run.state_offset += s->state_base;
    s->fn(s->arg, run);
}

void exchange_owned_runs(const exchange *x, int rank, owned_run_fn fn, void *arg)
{
    /* Rank p's state is laid out bucket after bucket, as this rank's. */
    shifted_runs s = {fn, arg, 0};
    for (int k = 0; k < x->num_buckets; k++) {
        const bucket *b = &x->buckets[k];
        b->ops->owned_runs(x, b, rank, shift_run, &s);
        b->ops->owned_runs(x, b, rank, count_run, &s.state_base);
    }
}

size_t exchange_state_count_of(const exchange *x, int rank)
{
    size_t count = 0;
    for (int k = 0; k < x->num_buckets; k++)
        x->buckets[k].ops->owned_runs(x, &x->buckets[k], rank, count_run, &count);
    return count;
}

/* ------------------------------------------------------------------ */
/* The schedule of a step                                              */
/* ------------------------------------------------------------------ */

static void account(exchange *x, const bucket *b, const request *r)
{
    /* A collective in flight across a timing reset (an all-gather left for
     * the next step) counts from the reset. */
    const double start = r->t_start > x->setup.profile->since ? r->t_start
                                                                : x->setup.profile->since;
    timing_range(x->setup.profile, b->first_layer, b->last_layer, TIMING_COMM,
                 r->t_end > start ? r->t_end - start : 0);
    trace_span(x->setup.profile, b->first_layer,
               r->kind == REQ_ALLREDUCE   ? TRACE_ALLREDUCE
               : r->kind == REQ_ALLTOALLV ? TRACE_ALLTOALL
                                          : TRACE_ALLGATHER,
               r->t_start, r->t_end);
}

/* Wait for a request from the main thread, counting the time blocked. */
static pcnn_status wait_for(exchange *x, bucket *b, request *r)
{
    if (!r->posted) return PCNN_OK;
    const double t0 = clock_now();
    pcnn_status st = engine_wait(x->engine, r, *x->setup.timeout_ms);
    const double t1 = clock_now();
    r->posted = false;
    if (st != PCNN_OK) return st;
    timing_range(x->setup.profile, b->first_layer, b->last_layer, TIMING_EXPOSED, t1 - t0);
    trace_span(x->setup.profile, b->first_layer, TRACE_WAIT, t0, t1);
    account(x, b, r);
    return PCNN_OK;
}

/* Run one of the bucket's update hooks, timed as its update. */
static void timed_update(exchange *x, bucket *b, void (*hook)(exchange *, bucket *))
{
    const double t0 = clock_now();
    hook(x, b);
    const double t1 = clock_now();
    timing_range(x->setup.profile, b->first_layer, b->last_layer, TIMING_UPDATE, t1 - t0);
    trace_span(x->setup.profile, b->first_layer, TRACE_UPDATE, t0, t1);
}

static void update_bucket(exchange *x, bucket *b)
{
    timed_update(x, b, b->ops->update);
    b->updated = true;
}

void exchange_begin_step(exchange *x)
{
    if (!x->engine) return;
    x->step_active = true;
    for (int k = 0; k < x->num_buckets; k++) {
        bucket *b = &x->buckets[k];
        if (b->ops->begin_step) b->ops->begin_step(x, b);
    }
}

bool exchange_step_active(const exchange *x) { return x->step_active; }

int exchange_first_posting_layer(const exchange *x)
{
    for (int k = 0; x->setup.overlap && k < x->num_buckets; k++)
        if (x->buckets[k].ops->after_forward) return x->buckets[k].first_layer;
    return x->setup.num_layers;
}

/* The bucket whose hooks a layer's step events reach (NULL: none). */
static bucket *active_bucket(exchange *x, int layer)
{
    if (!x->step_active) return NULL;
    const int k = x->bucket_of_layer[layer];
    return k >= 0 ? &x->buckets[k] : NULL;
}

void exchange_after_forward(exchange *x, int layer)
{
    bucket *b = active_bucket(x, layer);
    if (b && x->setup.overlap && b->ops->after_forward) b->ops->after_forward(x, b);
}

void exchange_before_backward(exchange *x, int layer)
{
    bucket *b = active_bucket(x, layer);
    if (b && b->ops->before_backward) b->ops->before_backward(x, b);
}

void exchange_after_backward(exchange *x, int layer)
{
    bucket *b = active_bucket(x, layer);
    /* Backward runs last layer first: the bucket is complete at its first. */
    if (!b || !x->setup.overlap || b->first_layer != layer) return;
    b->ops->post_reduce(x, b);
    b->reduce_posted = true;
    /* Not while the last step's all-gather may still read what the
     * update rewrites: update then does it all. */
    if (b->ops->update_local && !b->gather_pending) timed_update(x, b, b->ops->update_local);
}

/* The bucket's all-gather arrived: count it and unpack.  Blocking. */
static pcnn_status finish_gather(exchange *x, bucket *b)
{
    if (!b->gather_pending) return PCNN_OK;
    b->gather_pending = false;
    TRY(wait_for(x, b, &b->gather));
    if (b->ops->unpack) b->ops->unpack(x, b);
    return PCNN_OK;
}

/* Is the last step's all-gather still in flight (no blocking)?
 * The bucket's update waits for it: it rewrites what the gather sends. */
static bool gather_in_flight(exchange *x, bucket *b)
{
    if (!b->gather_pending) return false;
    if (!engine_test(x->engine, &b->gather) || b->gather.mpi_code != MPI_SUCCESS) return true;
    return finish_gather(x, b) != PCNN_OK; /* arrived: does not block */
}

/* Have all of a bucket's reductions arrived, successfully (no blocking)? */
static bool reductions_arrived(exchange *x, bucket *b)
{
    for (int q = 0; q < b->num_reduce; q++) {
        request *r = &b->reduce[q];
        if (!r->posted || !engine_test(x->engine, r) || r->mpi_code != MPI_SUCCESS) return false;
    }
    return true;
}

void exchange_poll(exchange *x)
{
    if (!x->engine || !x->setup.overlap) return;
    engine_progress(x->engine); /* also the last step's all-gathers, before begin_step */
    if (!x->step_active) return;
    for (int k = x->num_buckets - 1; k >= 0; k--) {
        bucket *b = &x->buckets[k];
        if (!b->reduce_posted || b->updated) continue;
        if (!reductions_arrived(x, b)) continue; /* failures: exchange_end_step */
        if (gather_in_flight(x, b)) continue;
        for (int q = 0; q < b->num_reduce; q++) {
            b->reduce[q].posted = false;
            account(x, b, &b->reduce[q]);
        }
        update_bucket(x, b);
    }
}

static pcnn_status end_step(exchange *x, pcnn_status st)
{
    for (int k = 0; k < x->num_buckets; k++) {
        x->buckets[k].reduce_posted = false;
        x->buckets[k].updated = false;
        x->buckets[k].local_updated = false;
    }
    x->step_active = false;
    return st;
}

pcnn_status exchange_end_step(exchange *x)
{
    pcnn_status st = PCNN_OK;
    if (!x->engine) { /* one rank: nothing to exchange */
        for (int k = 0; k < x->num_buckets; k++) update_bucket(x, &x->buckets[k]);
        return end_step(x, st);
    }
    /* Forward order: the first layers' parameters are needed first. */
    for (int k = 0; k < x->num_buckets && st == PCNN_OK; k++) {
        bucket *b = &x->buckets[k];
        if (!b->reduce_posted) { /* no overlap: post now */
            b->ops->post_reduce(x, b);
            b->reduce_posted = true;
        }
        if (!b->updated) {
            for (int q = 0; q < b->num_reduce && st == PCNN_OK; q++)
                st = wait_for(x, b, &b->reduce[q]);
            if (st == PCNN_OK) st = finish_gather(x, b); /* the last step's, if no pass waited */
            if (st != PCNN_OK) break;
            update_bucket(x, b);
        }
        if (b->ops->post_gather) {
            b->ops->post_gather(x, b);
            b->gather_pending = true;
            if (!x->setup.overlap) st = finish_gather(x, b);
        }
    }
    return end_step(x, st);
}

pcnn_status exchange_before_forward(exchange *x, int layer)
{
    if (!x->engine) return PCNN_OK;
    const int k = x->bucket_of_layer[layer];
    return k < 0 ? PCNN_OK : finish_gather(x, &x->buckets[k]);
}

pcnn_status exchange_flush(exchange *x)
{
    pcnn_status st = PCNN_OK;
    for (int k = 0; k < x->num_buckets; k++) {
        bucket *b = &x->buckets[k];
        for (int q = 0; q < b->num_reduce; q++) { /* a step that failed half-way */
            if (!b->reduce[q].posted) continue;
            pcnn_status s = wait_for(x, b, &b->reduce[q]);
            if (st == PCNN_OK) st = s;
        }
        pcnn_status s = finish_gather(x, b);
        if (st == PCNN_OK) st = s;
        if (s == PCNN_OK && b->ops->settle) b->ops->settle(x, b);
    }
    end_step(x, PCNN_ERR_INTERNAL); /* clears the step state */
    return st;
}
