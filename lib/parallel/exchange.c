#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "exchange.h"

#include <sched.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../graph/net.h"
#include "../kernels/kernels.h"
#include "../layers/dense.h"
#include "../profile/profile.h"
#include "fc_exchange.h"
#include "parallel.h"

static pcnn_status add_bucket(exchange_plan *plan, int *cap)
{
    if (plan->num_buckets == *cap) {
        int grown_cap = *cap ? 2 * *cap : 8;
        bucket *grown = mem_realloc(plan->buckets, (size_t)grown_cap * sizeof *grown);
        if (!grown) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "exchange buckets");
        plan->buckets = grown;
        *cap = grown_cap;
    }
    bucket *b = &plan->buckets[plan->num_buckets++];
    *b = (bucket){0};
    return PCNN_OK;
}

/* Slices, receive buffer and byte count of one bucket. */
static pcnn_status plan_slices(const pcnn_comm *c, bucket *b, exchange_plan *plan)
{
    const int P = c ? c->size : 1, r = c ? c->rank : 0;
    b->owned_lo = 0;
    b->owned_count = b->count;
    if (P == 1) return PCNN_OK;
    if (b->kind == PCNN_EXCHANGE_ALLREDUCE) {
        plan->bytes_per_step += 2 * (uint64_t)b->count * sizeof(float) * (P - 1) / P;
        return PCNN_OK;
    }
    b->counts = mem_calloc((size_t)P, sizeof(int));
    b->displs = mem_calloc((size_t)P, sizeof(int));
    b->recv_counts = mem_calloc((size_t)P, sizeof(int));
    b->recv_displs = mem_calloc((size_t)P, sizeof(int));
    if (!b->counts || !b->displs || !b->recv_counts || !b->recv_displs)
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "exchange slices");
    for (int p = 0; p < P; p++) {
        long off;
        b->counts[p] = partition_count((long)b->count, P, p, &off);
        b->displs[p] = (int)off;
    }
    b->owned_lo = (size_t)b->displs[r];
    b->owned_count = (size_t)b->counts[r];
    for (int p = 0; p < P; p++) {
        b->recv_counts[p] = b->counts[r];
        b->recv_displs[p] = p * b->counts[r];
    }
    b->recv = mem_alloc_floats((size_t)P * b->owned_count);
    if (!b->recv) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "exchange receive buffer");
    plan->memory_bytes += (size_t)P * b->owned_count * sizeof(float);
    /* Sent by this rank: every slice but its own (all-to-all), then its own
     * slice to the P-1 others (all-gather). */
    plan->bytes_per_step += (uint64_t)(b->count - b->owned_count) * sizeof(float);
    plan->bytes_per_step += (uint64_t)b->owned_count * (P - 1) * sizeof(float);
    return PCNN_OK;
}

/* Eq. 4.8 of seed 001: the FC exchange moves fewer bytes than reducing the
 * gradient when F*B/P + K*B < K*F (B the global batch).  Chosen by default
 * only under the network default all-to-all + all-gather strategy. */
static bool fc_saves_bytes(const pcnn_net *net, const pcnn_layer *l)
{
    if (!layer_is_dense(l) || net->opt.exchange != PCNN_EXCHANGE_ALLTOALL_ALLGATHER) return false;
    const dense_shape d = dense_get_shape(l);
    const double B = net->global_max_batch, P = net->comm->size;
    return (double)d.features * B / P + (double)d.out * B < (double)d.out * d.features;
}

pcnn_status exchange_plan_build(pcnn_net *net, exchange_plan *plan)
{
    *plan = (exchange_plan){0};
    plan->overlap = net->opt.overlap;
    plan->bucket_of_layer = mem_calloc((size_t)net->layers.count, sizeof(int));
    if (!plan->bucket_of_layer) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "bucket table");
    int cap = 0;
    const size_t bucket_floats = net->opt.bucket_bytes / sizeof(float);
    const bool parallel = net->comm && net->comm->size > 1;
    bucket *open = NULL;
    for (int i = 0; i < net->layers.count; i++) {
        pcnn_layer *l = net->layers.items[i];
        if (l->num_params == 0) continue;
        if (parallel && !l->exchange_chosen && fc_saves_bytes(net, l))
            l->exchange = PCNN_EXCHANGE_FC_GRADIENT;
        pcnn_exchange kind = parallel ? l->exchange : PCNN_EXCHANGE_ALLREDUCE;
        bool fits = open && open->kind == kind && kind != PCNN_EXCHANGE_FC_GRADIENT &&
                    (open->count + l->num_params <= bucket_floats || !parallel);
        if (!fits) {
            TRY(add_bucket(plan, &cap));
            open = &plan->buckets[plan->num_buckets - 1];
            open->lo = l->param_offset;
            open->kind = kind;
            open->first_layer = i;
        }
        open->count += l->num_params;
        open->last_layer = i;
    }
    for (int i = 0; i < net->layers.count; i++) plan->bucket_of_layer[i] = -1;
    for (int k = 0; k < plan->num_buckets; k++) {
        bucket *b = &plan->buckets[k];
        if (b->kind == PCNN_EXCHANGE_FC_GRADIENT) TRY(fc_plan(net, b, plan));
        else TRY(plan_slices(net->comm, b, plan));
        b->state_offset = plan->state_count;
        plan->state_count += b->owned_count;
        for (int i = b->first_layer; i <= b->last_layer; i++) plan->bucket_of_layer[i] = k;
        if (b->count > INT32_MAX)
            return FAIL(PCNN_ERR_UNSUPPORTED, "layers %d..%d hold %zu parameters; one message "
                        "is limited to 2^31 floats", b->first_layer, b->last_layer, b->count);
    }
    return PCNN_OK;
}

void exchange_plan_free(exchange_plan *plan)
{
    engine_destroy(plan->engine); /* waits for anything still in flight */
    if (plan->has_comm) MPI_Comm_free(&plan->comm);
    for (int k = 0; k < plan->num_buckets; k++) {
        bucket *b = &plan->buckets[k];
        mem_free(b->counts);
        mem_free(b->displs);
        mem_free(b->recv_counts);
        mem_free(b->recv_displs);
        mem_free(b->recv);
        fc_free(b);
    }
    mem_free(plan->buckets);
    mem_free(plan->bucket_of_layer);
    *plan = (exchange_plan){0};
}

/* Describe each bucket's collectives once; the engine reuses them. */
static void prepare_requests(pcnn_net *net, bucket *b, int tag)
{
    if (b->fc) {
        fc_prepare_requests(b);
        return;
    }
    float *g = net->grads + b->lo, *w = net->params + b->lo;
    if (b->kind == PCNN_EXCHANGE_ALLREDUCE) {
        b->reduce = (request){.kind = REQ_ALLREDUCE, .send = g, .count = (int)b->count, .tag = tag};
        return;
    }
    b->reduce = (request){.kind = REQ_ALLTOALLV, .send = g, .recv = b->recv,
                          .scounts = b->counts, .sdispls = b->displs,
                          .rcounts = b->recv_counts, .rdispls = b->recv_displs, .tag = tag};
    b->gather = (request){.kind = REQ_ALLGATHERV, .recv = w, .rcounts = b->counts,
                          .rdispls = b->displs, .tag = tag};
}

/* MPICH's blocking collectives busy-poll: a communication thread without a
 * core of its own steals cycles from compute.  The automatic choice takes
 * the thread only when the ranks on this node, each with its compute
 * threads and one communication thread, fit on the cores we may use. */
static bool spare_core_per_rank(MPI_Comm comm, int threads)
{
    int local = 1;
    MPI_Comm node;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
        MPI_Comm_size(node, &local);
        MPI_Comm_free(&node);
    }
    cpu_set_t set;
    const int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    return (long)local * (threads + 1) <= cores;
}

pcnn_status exchange_start(pcnn_net *net)
{
    exchange_plan *plan = &net->xplan;
    if (!net->comm || net->comm->size == 1) return PCNN_OK;
    MPI_TRY(MPI_Comm_dup(net->comm->comm, &plan->comm), "MPI_Comm_dup (exchange)");
    plan->has_comm = true;
    MPI_Comm_set_errhandler(plan->comm, MPI_ERRORS_RETURN);
    for (int k = 0; k < plan->num_buckets; k++) prepare_requests(net, &plan->buckets[k], k);
    /* Blocking and nonblocking collectives do not match each other, so all
     * ranks must pick the same engine: the thread only if every rank can. */
    int thread_ok = net->opt.engine != 2 && net->comm->thread_level >= MPI_THREAD_MULTIPLE &&
                    (net->opt.engine == 1 || spare_core_per_rank(plan->comm, net->threads));
    MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, &thread_ok, 1, MPI_INT, MPI_MIN, plan->comm),
            "MPI_Allreduce (engine choice)");
    const engine_kind kind = thread_ok ? ENGINE_THREAD : ENGINE_NONBLOCKING;
    if (net->opt.engine == 1 && kind != ENGINE_THREAD)
        return FAIL(PCNN_ERR_UNSUPPORTED, "the thread engine needs MPI_THREAD_MULTIPLE on every "
                    "rank; this rank has level %d (initialise MPI with MPI_Init_thread)",
                    net->comm->thread_level);
    return engine_create(&plan->engine, kind, plan->comm, 3 * plan->num_buckets + 2,
                         net->opt.comm_core);
}

/* Sum the P received pieces of the owned slice, in rank order (the same
 * order on every run: results are reproducible). */
typedef struct sum_args {
    const bucket *b;
    int P;
    float *dst;
} sum_args;

VECTOR_CLONES static void sum_range(void *arg, size_t lo, size_t hi)
{
    const sum_args *a = arg;
    const size_t n = a->b->owned_count;
    const float *recv = a->b->recv;
    for (size_t i = lo; i < hi; i++) {
        float s = recv[i];
        for (int p = 1; p < a->P; p++) s += recv[(size_t)p * n + i];
        a->dst[i] = s;
    }
}

static void sum_pieces(const bucket *b, int P, float *dst, int threads)
{
    sum_args a = {b, P, dst};
    parallel_for(b->owned_count, 16, b->owned_count * (size_t)P, threads, sum_range, &a);
}

/* The reduction of bucket b has arrived: sum the pieces (all-to-all) and
 * update this rank's slice of the parameters. */
static void update_bucket(pcnn_net *net, bucket *b)
{
    const double t0 = engine_now();
    if (b->fc) {
        fc_update(net, b);
        b->updated = true;
        const double t1 = engine_now();
        timing_range(&net->profile, b->first_layer, b->last_layer, TIMING_UPDATE, t1 - t0);
        trace_span(&net->profile, b->first_layer, TRACE_UPDATE, t0, t1);
        return;
    }
    const int P = net->comm ? net->comm->size : 1;
    const size_t at = b->lo + b->owned_lo;
    if (P > 1 && b->kind == PCNN_EXCHANGE_ALLTOALL_ALLGATHER)
        sum_pieces(b, P, net->grads + at, net->threads);
    float *m = net->optim.m ? net->optim.m + b->state_offset : NULL;
    float *v = net->optim.v ? net->optim.v + b->state_offset : NULL;
    optim_update(net->optimizer, &net->opt.hyper, net->xplan.lr, net->opt.weight_decay,
                 net->step + 1, net->params + at, net->grads + at, m, v, b->owned_count,
                 net->threads);
    b->updated = true;
    const double t1 = engine_now();
    timing_range(&net->profile, b->first_layer, b->last_layer, TIMING_UPDATE, t1 - t0);
    trace_span(&net->profile, b->first_layer, TRACE_UPDATE, t0, t1);
}

/* A collective finished: account its time on the communication side. */
static void account(pcnn_net *net, const bucket *b, const request *r)
{
    timing_range(&net->profile, b->first_layer, b->last_layer, TIMING_COMM, r->t_end - r->t_start);
    trace_span(&net->profile, b->first_layer,
               r->kind == REQ_ALLREDUCE   ? TRACE_ALLREDUCE
               : r->kind == REQ_ALLTOALLV ? TRACE_ALLTOALL
                                          : TRACE_ALLGATHER,
               r->t_start, r->t_end);
}

/* Wait for a request from the main thread, counting the time blocked. */
static pcnn_status wait_for(pcnn_net *net, bucket *b, request *r)
{
    if (!r->posted) return PCNN_OK;
    const double t0 = engine_now();
    pcnn_status st = engine_wait(net->xplan.engine, r, net->opt.timeout_ms);
    const double t1 = engine_now();
    r->posted = false;
    if (st != PCNN_OK) return st;
    timing_range(&net->profile, b->first_layer, b->last_layer, TIMING_EXPOSED, t1 - t0);
    trace_span(&net->profile, b->first_layer, TRACE_WAIT, t0, t1);
    account(net, b, r);
    return PCNN_OK;
}

void exchange_begin(pcnn_net *net)
{
    exchange_plan *plan = &net->xplan;
    plan->lr = net_effective_lr(net);
    if (!plan->engine) return;
    plan->step_active = true;
    for (int k = 0; k < plan->num_buckets; k++)
        if (plan->buckets[k].fc)
            fc_set_counts(&plan->buckets[k], net->comm->gather, net->comm->size,
                          net->comm->rank);
}

static bucket *fc_bucket_of(pcnn_net *net, int layer)
{
    exchange_plan *plan = &net->xplan;
    if (!plan->step_active) return NULL;
    const int k = plan->bucket_of_layer[layer];
    return k >= 0 && plan->buckets[k].fc ? &plan->buckets[k] : NULL;
}

void exchange_layer_forward_done(pcnn_net *net, int layer)
{
    bucket *b = fc_bucket_of(net, layer);
    if (!b || !net->xplan.overlap) return;
    fc_post_activations(net, b, net->xplan.engine);
    b->reduce_posted = true;
}

void exchange_layer_backward_start(pcnn_net *net, int layer)
{
    bucket *b = fc_bucket_of(net, layer);
    if (!b) return;
    fc_capture_errors(net, b);
    if (net->xplan.overlap) fc_post_errors(b, net->xplan.engine);
}

void exchange_layer_done(pcnn_net *net, int layer)
{
    exchange_plan *plan = &net->xplan;
    /* Outside a training step (compute_gradients, evaluation) the gradients
     * are the caller's: nothing is exchanged. */
    if (!plan->step_active || !plan->overlap) return;
    const int k = plan->bucket_of_layer[layer];
    if (k < 0 || plan->buckets[k].first_layer != layer || plan->buckets[k].fc) return;
    bucket *b = &plan->buckets[k];
    engine_post(plan->engine, &b->reduce);
    b->reduce_posted = true;
}

/* Have all of a bucket's reductions arrived (without blocking)? */
static bool reductions_arrived(engine *e, bucket *b)
{
    if (!b->reduce.posted || !engine_test(e, &b->reduce)) return false;
    if (b->fc && (!b->errors.posted || !engine_test(e, &b->errors))) return false;
    return b->reduce.mpi_code == MPI_SUCCESS && (!b->fc || b->errors.mpi_code == MPI_SUCCESS);
}

void exchange_poll(pcnn_net *net)
{
    exchange_plan *plan = &net->xplan;
    if (!plan->step_active || !plan->overlap) return;
    engine_progress(plan->engine);
    for (int k = plan->num_buckets - 1; k >= 0; k--) {
        bucket *b = &plan->buckets[k];
        if (!b->reduce_posted || b->updated) continue;
        if (!reductions_arrived(plan->engine, b)) continue; /* failures: exchange_end */
        b->reduce.posted = false;
        account(net, b, &b->reduce);
        if (b->fc) {
            b->errors.posted = false;
            account(net, b, &b->errors);
        }
        update_bucket(net, b);
    }
}

static pcnn_status end_step(pcnn_net *net, pcnn_status st)
{
    exchange_plan *plan = &net->xplan;
    for (int k = 0; k < plan->num_buckets; k++) {
        plan->buckets[k].reduce_posted = false;
        plan->buckets[k].updated = false;
    }
    plan->step_active = false;
    if (st == PCNN_OK) net->step++;
    return st;
}

pcnn_status exchange_end(pcnn_net *net)
{
    exchange_plan *plan = &net->xplan;
    pcnn_status st = PCNN_OK;
    if (!plan->engine) { /* one rank: nothing to exchange */
        for (int k = 0; k < plan->num_buckets; k++) update_bucket(net, &plan->buckets[k]);
        return end_step(net, st);
    }
    /* Forward order: the first layers' parameters are needed first. */
    for (int k = 0; k < plan->num_buckets && st == PCNN_OK; k++) {
        bucket *b = &plan->buckets[k];
        if (!b->reduce_posted) { /* no overlap: post now */
            if (b->fc) {
                fc_post_activations(net, b, plan->engine);
                fc_post_errors(b, plan->engine);
            } else {
                engine_post(plan->engine, &b->reduce);
            }
            b->reduce_posted = true;
        }
        if (!b->updated) {
            st = wait_for(net, b, &b->reduce);
            if (st == PCNN_OK && b->fc) st = wait_for(net, b, &b->errors);
            if (st != PCNN_OK) break;
            update_bucket(net, b);
        }
        if (b->kind != PCNN_EXCHANGE_ALLREDUCE) {
            engine_post(plan->engine, &b->gather);
            b->gather_pending = true;
            if (!plan->overlap) st = exchange_wait_layer(net, b->first_layer);
        }
    }
    return end_step(net, st);
}

pcnn_status exchange_wait_layer(pcnn_net *net, int layer)
{
    exchange_plan *plan = &net->xplan;
    if (!plan->engine) return PCNN_OK;
    const int k = plan->bucket_of_layer[layer];
    if (k < 0 || !plan->buckets[k].gather_pending) return PCNN_OK;
    bucket *b = &plan->buckets[k];
    b->gather_pending = false;
    TRY(wait_for(net, b, &b->gather));
    if (b->fc) fc_unpack_weights(net, b);
    return PCNN_OK;
}

pcnn_status exchange_flush(pcnn_net *net)
{
    exchange_plan *plan = &net->xplan;
    pcnn_status st = PCNN_OK;
    for (int k = 0; k < plan->num_buckets; k++) {
        bucket *b = &plan->buckets[k];
        request *half_done[2] = {&b->reduce, &b->errors}; /* a step that failed half-way */
        for (int q = 0; q < 2; q++) {
            if (!half_done[q]->posted) continue;
            pcnn_status s = wait_for(net, b, half_done[q]);
            if (st == PCNN_OK) st = s;
        }
        if (b->gather_pending) {
            pcnn_status s = exchange_wait_layer(net, b->first_layer);
            if (st == PCNN_OK) st = s;
        }
    }
    end_step(net, PCNN_ERR_INTERNAL); /* clears the step state, keeps the counter */
    return st;
}
