#include "exchange.h"

#include "../core/error.h"
#include "../core/memory.h"
#include "../graph/net.h"
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

pcnn_status exchange_plan_build(pcnn_net *net, exchange_plan *plan)
{
    *plan = (exchange_plan){0};
    int cap = 0;
    const size_t bucket_floats = net->opt.bucket_bytes / sizeof(float);
    bucket *open = NULL;
    for (int i = 0; i < net->num_layers; i++) {
        const pcnn_layer *l = net->layers[i];
        if (l->num_params == 0) continue;
        pcnn_exchange kind = net->comm ? l->exchange : PCNN_EXCHANGE_ALLREDUCE;
        bool fits = open && open->kind == kind &&
                    (open->count + l->num_params <= bucket_floats || !net->comm);
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
    for (int k = 0; k < plan->num_buckets; k++) {
        bucket *b = &plan->buckets[k];
        TRY(plan_slices(net->comm, b, plan));
        b->state_offset = plan->state_count;
        plan->state_count += b->owned_count;
    }
    return PCNN_OK;
}

void exchange_plan_free(exchange_plan *plan)
{
    for (int k = 0; k < plan->num_buckets; k++) {
        bucket *b = &plan->buckets[k];
        mem_free(b->counts);
        mem_free(b->displs);
        mem_free(b->recv_counts);
        mem_free(b->recv_displs);
        mem_free(b->recv);
    }
    mem_free(plan->buckets);
    *plan = (exchange_plan){0};
}

/* Sum the P received pieces of the owned slice, in rank order (the same
 * order on every run: results are reproducible). */
static void sum_pieces(const bucket *b, int P, float *dst, int threads)
{
    const long n = (long)b->owned_count;
#pragma omp parallel for num_threads(threads) schedule(static) if (n > 16384)
    for (long i = 0; i < n; i++) {
        float s = b->recv[i];
        for (int p = 1; p < P; p++) s += b->recv[(size_t)p * n + i];
        dst[i] = s;
    }
}

static void update(pcnn_net *net, const bucket *b)
{
    const size_t at = b->lo + b->owned_lo;
    float *m = net->optim.m ? net->optim.m + b->state_offset : NULL;
    float *v = net->optim.v ? net->optim.v + b->state_offset : NULL;
    optim_update(net->optimizer, &net->opt.hyper, net_effective_lr(net), net->opt.weight_decay,
                 net->step + 1, net->params + at, net->grads + at, m, v, b->owned_count,
                 net->threads);
}

pcnn_status exchange_step(pcnn_net *net)
{
    const pcnn_comm *c = net->comm;
    const int P = c ? c->size : 1;
    for (int k = 0; k < net->xplan.num_buckets; k++) {
        const bucket *b = &net->xplan.buckets[k];
        float *g = net->grads + b->lo, *w = net->params + b->lo;
        if (P > 1 && b->kind == PCNN_EXCHANGE_ALLREDUCE) {
            MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, g, (int)b->count, MPI_FLOAT, MPI_SUM, c->comm),
                    "MPI_Allreduce (gradients)");
        } else if (P > 1) {
            MPI_TRY(MPI_Alltoallv(g, b->counts, b->displs, MPI_FLOAT, b->recv, b->recv_counts,
                                  b->recv_displs, MPI_FLOAT, c->comm),
                    "MPI_Alltoallv (gradients)");
            sum_pieces(b, P, g + b->owned_lo, net->threads);
        }
        update(net, b);
        if (P > 1 && b->kind == PCNN_EXCHANGE_ALLTOALL_ALLGATHER)
            MPI_TRY(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, w, b->counts, b->displs,
                                   MPI_FLOAT, c->comm),
                    "MPI_Allgatherv (parameters)");
    }
    net->step++;
    return PCNN_OK;
}
