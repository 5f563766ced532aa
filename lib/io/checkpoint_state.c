/* Optimizer state and batch-norm statistics between ranks and a
 * checkpoint (see checkpoint_state.h).
 *
 * Where each rank keeps optimizer state, bucket by bucket:
 *   - one rank, or the allreduce exchange: all of the bucket, on every rank;
 *   - all-to-all + all-gather: slice [displs[p], +counts[p]) on rank p;
 *   - the FC gradient exchange (parallel/fc_exchange.h), for a dense layer
 *     of K outputs and F features: weight columns [first_p, +F_p) of every
 *     row, packed row by row (K x F_p), then the whole bias, on rank p.
 * Saving gathers these into flat parameter order on rank 0; loading takes
 * this rank's part for the plan it has now, which may differ in ranks,
 * strategies and buckets from the one that saved. */
#include "checkpoint_state.h"

#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../graph/net.h"
#include "../layers/batchnorm.h"
#include "../layers/dense.h"

static bool collective(const pcnn_net *net) { return net->comm && net->comm->size > 1; }
static bool is_root(const pcnn_net *net) { return !net->comm || net->comm->rank == 0; }

/* ------------------------------------------------------------------ */
/* The FC exchange's packed slices                                      */
/* ------------------------------------------------------------------ */

typedef struct fc_geometry {
    size_t k, f, fp, first;
    bool bias;
} fc_geometry;

static bool is_fc(const pcnn_net *net, const bucket *b)
{
    return collective(net) && b->kind == PCNN_EXCHANGE_FC_GRADIENT;
}

/* Rank p's slice, as fc_plan cuts it. */
static fc_geometry fc_of(const pcnn_net *net, const bucket *b, int p)
{
    const dense_shape d = dense_get_shape(net->layers.items[b->first_layer]);
    long first;
    const int fp = partition_count(d.features, net->comm->size, p, &first);
    return (fc_geometry){(size_t)d.out, (size_t)d.features, (size_t)fp, (size_t)first, d.bias};
}

static size_t fc_state(const fc_geometry *g) { return g->k * g->fp + (g->bias ? g->k : 0); }

/* The largest FC bucket's state summed over the ranks (0: none). */
static size_t fc_scratch_floats(const pcnn_net *net)
{
    size_t most = 0;
    for (int k = 0; k < net->xplan.num_buckets; k++) {
        const bucket *b = &net->xplan.buckets[k];
        if (!is_fc(net, b)) continue;
        size_t total = 0;
        for (int p = 0; p < net->comm->size; p++) {
            fc_geometry g = fc_of(net, b, p);
            total += fc_state(&g);
        }
        if (total > most) most = total;
    }
    return most;
}

/* Gather every rank's packed FC state on rank 0 and unpack it into full
 * (the bucket's part of the flat state). */
static pcnn_status gather_fc(pcnn_net *net, const bucket *b, const float *mine, float *full,
                             const state_gather *g, const char *func)
{
    const int P = net->comm->size;
    const fc_geometry own = fc_of(net, b, net->comm->rank);
    if (full) {
        int at = 0;
        for (int p = 0; p < P; p++) {
            fc_geometry q = fc_of(net, b, p);
            g->counts[p] = (int)fc_state(&q);
            g->displs[p] = at;
            at += g->counts[p];
        }
    }
    int code = MPI_Gatherv(mine, (int)fc_state(&own), MPI_FLOAT, g->fc, g->counts, g->displs,
                           MPI_FLOAT, 0, net->comm->comm);
    if (code != MPI_SUCCESS) return mpi_status(code, func, "MPI_Gatherv (FC optimizer state)");
    if (!full) return PCNN_OK;
    for (int p = 0; p < P; p++) {
        const fc_geometry q = fc_of(net, b, p);
        const float *src = g->fc + g->displs[p];
        for (size_t row = 0; row < q.k; row++)
            memcpy(full + row * q.f + q.first, src + row * q.fp, q.fp * sizeof(float));
        if (q.bias && p == 0) /* every rank holds the same bias state */
            memcpy(full + q.k * q.f, src + q.k * q.fp, q.k * sizeof(float));
    }
    return PCNN_OK;
}

/* ------------------------------------------------------------------ */
/* Saving                                                               */
/* ------------------------------------------------------------------ */

size_t state_bn_floats(pcnn_net *net)
{
    size_t total = 0;
    for (int i = 0; i < net->layers.count; i++) {
        size_t count = 0;
        batchnorm_running_stats(net->layers.items[i], &count);
        total += count;
    }
    return total;
}

pcnn_status state_gather_alloc(pcnn_net *net, state_gather *g, const char *func)
{
    *g = (state_gather){.bn_floats = state_bn_floats(net)};
    const bool root = is_root(net);
    const size_t P = net->comm ? (size_t)net->comm->size : 1, n = net->num_params;
    if (collective(net) && g->bn_floats > (size_t)INT32_MAX)
        return error_set(PCNN_ERR_UNSUPPORTED, func, "%zu batch-norm statistics exceed one "
                         "MPI message", g->bn_floats);
    bool ok = true;
    if (root && net->optim.m) ok = ok && (g->m = mem_alloc_floats(n));
    if (root && net->optim.v) ok = ok && (g->v = mem_alloc_floats(n));
    if (g->bn_floats) {
        ok = ok && (g->bn_mine = mem_alloc_floats(g->bn_floats));
        if (root) ok = ok && (g->bn = mem_alloc_floats(g->bn_floats * P));
    }
    const size_t fc = root && net->optim.m ? fc_scratch_floats(net) : 0;
    if (fc) {
        ok = ok && (g->fc = mem_alloc_floats(fc));
        ok = ok && (g->counts = mem_calloc(P, sizeof(int)));
        ok = ok && (g->displs = mem_calloc(P, sizeof(int)));
    }
    if (!ok)
        return error_set(PCNN_ERR_OUT_OF_MEMORY, func, "optimizer state and statistics of %zu "
                         "parameters to gather", n);
    return PCNN_OK;
}

/* One optimizer state vector into flat order on rank 0 (full; NULL on the
 * other ranks). */
static pcnn_status gather_vector(pcnn_net *net, const float *state, float *full,
                                 const state_gather *g, const char *func)
{
    for (int k = 0; k < net->xplan.num_buckets; k++) {
        const bucket *b = &net->xplan.buckets[k];
        const float *mine = state + b->state_offset;
        if (is_fc(net, b)) {
            TRY(gather_fc(net, b, mine, full ? full + b->lo : NULL, g, func));
        } else if (collective(net) && b->kind == PCNN_EXCHANGE_ALLTOALL_ALLGATHER) {
            int code = MPI_Gatherv(mine, (int)b->owned_count, MPI_FLOAT,
                                   full ? full + b->lo : NULL, b->counts, b->displs, MPI_FLOAT,
                                   0, net->comm->comm);
            if (code != MPI_SUCCESS) return mpi_status(code, func, "MPI_Gatherv (optimizer state)");
        } else if (full) {
            memcpy(full + b->lo + b->owned_lo, mine, b->owned_count * sizeof(float));
        }
    }
    return PCNN_OK;
}

pcnn_status state_gather_run(pcnn_net *net, state_gather *g, const char *func)
{
    if (net->optim.m) TRY(gather_vector(net, net->optim.m, g->m, g, func));
    if (net->optim.v) TRY(gather_vector(net, net->optim.v, g->v, g, func));
    if (!g->bn_floats) return PCNN_OK;
    float *dst = g->bn_mine;
    for (int i = 0; i < net->layers.count; i++) {
        size_t count = 0;
        const float *s = batchnorm_running_stats(net->layers.items[i], &count);
        if (count) memcpy(dst, s, count * sizeof(float));
        dst += count;
    }
    if (!collective(net)) {
        memcpy(g->bn, g->bn_mine, g->bn_floats * sizeof(float));
        return PCNN_OK;
    }
    int code = MPI_Gather(g->bn_mine, (int)g->bn_floats, MPI_FLOAT, g->bn, (int)g->bn_floats,
                          MPI_FLOAT, 0, net->comm->comm);
    if (code != MPI_SUCCESS) return mpi_status(code, func, "MPI_Gather (batch-norm statistics)");
    return PCNN_OK;
}

void state_gather_free(state_gather *g)
{
    mem_free(g->m);
    mem_free(g->v);
    mem_free(g->bn);
    mem_free(g->bn_mine);
    mem_free(g->fc);
    mem_free(g->counts);
    mem_free(g->displs);
    *g = (state_gather){0};
}

/* ------------------------------------------------------------------ */
/* Loading                                                              */
/* ------------------------------------------------------------------ */

/* This rank's part of one flat state vector of the file. */
static void scatter_vector(const pcnn_net *net, const unsigned char *file, float *state)
{
    for (int k = 0; k < net->xplan.num_buckets; k++) {
        const bucket *b = &net->xplan.buckets[k];
        float *mine = state + b->state_offset;
        if (is_fc(net, b)) {
            const fc_geometry g = fc_of(net, b, net->comm->rank);
            const unsigned char *src = file + 4 * b->lo;
            for (size_t row = 0; row < g.k; row++)
                ckpt_decode_floats(src + 4 * (row * g.f + g.first), mine + row * g.fp, g.fp);
            if (g.bias) ckpt_decode_floats(src + 4 * g.k * g.f, mine + g.k * g.fp, g.k);
        } else {
            ckpt_decode_floats(file + 4 * (b->lo + b->owned_lo), mine, b->owned_count);
        }
    }
}

/* Batch normalisation keeps per-rank statistics: with as many ranks as
 * saved each gets its own back (an exact resume); otherwise every rank
 * takes the element-wise mean over the saved ranks, the natural estimate
 * for another split of the batch. */
static void scatter_bn(pcnn_net *net, const ckpt_view *v)
{
    const size_t per_rank = v->meta.bn_floats;
    const uint32_t saved = v->meta.ranks;
    const int P = net->comm ? net->comm->size : 1, r = net->comm ? net->comm->rank : 0;
    size_t at = 0;
    for (int i = 0; i < net->layers.count; i++) {
        size_t count = 0;
        float *s = batchnorm_running_stats(net->layers.items[i], &count);
        if (saved == (uint32_t)P) {
            ckpt_decode_floats(v->bn + 4 * ((size_t)r * per_rank + at), s, count);
            at += count;
            continue;
        }
        for (size_t j = 0; j < count; j++, at++) {
            double sum = 0.0;
            for (uint32_t q = 0; q < saved; q++) {
                float x;
                ckpt_decode_floats(v->bn + 4 * ((size_t)q * per_rank + at), &x, 1);
                sum += x;
            }
            s[j] = (float)(sum / saved);
        }
    }
}

void state_scatter(pcnn_net *net, const ckpt_view *v)
{
    if (net->optim.m) scatter_vector(net, v->m, net->optim.m);
    if (net->optim.v) scatter_vector(net, v->v, net->optim.v);
    if (v->bn) scatter_bn(net, v);
}
