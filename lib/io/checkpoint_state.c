/* Optimizer state and batch-norm statistics between ranks and a
 * checkpoint (see checkpoint_state.h).
 *
 * Where each rank keeps optimizer state is its exchange's business: the
 * exchange lists any rank's owned runs (parallel/exchange.h), pairs of a
 * range of that rank's state and the flat parameters it belongs to.
 * Saving gathers these into flat parameter order on rank 0; loading takes
 * this rank's part for the plan it has now, which may differ in ranks,
 * strategies and buckets from the one that saved. */
#include "checkpoint_state.h"

#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../graph/graph.h"
#include "../layers/batchnorm.h"
#include "../parallel/exchange.h"

static bool collective(const pcnn_net *net) { return net_comm(net) && net_comm(net)->size > 1; }
static bool is_root(const pcnn_net *net) { return !net_comm(net) || net_comm(net)->rank == 0; }

/* Where a rank's optimizer state goes in flat parameter order: the owned
 * runs of its exchange strategies (parallel/exchange.h). */
typedef struct state_copy {
    const float *state;
    float *full;
} state_copy;

static void copy_run_out(void *arg, owned_run run)
{
    const state_copy *c = arg;
    memcpy(c->full + run.param_index, c->state + run.state_offset, run.count * sizeof(float));
}

/* The largest optimizer state any rank keeps. */
static size_t largest_state(const pcnn_net *net)
{
    const int P = net_comm(net) ? net_comm(net)->size : 1;
    size_t most = 0;
    for (int p = 0; p < P; p++) {
        const size_t count = exchange_state_count_of(net_exchange(net), p);
        if (count > most) most = count;
    }
    return most;
}

/* ------------------------------------------------------------------ */
/* Saving                                                               */
/* ------------------------------------------------------------------ */

size_t state_bn_floats(pcnn_net *net)
{
    size_t total = 0;
    for (int i = 0; i < net_layer_list(net)->count; i++) {
        size_t count = 0;
        batchnorm_running_stats(net_layer_list(net)->items[i], &count);
        total += count;
    }
    return total;
}

pcnn_status state_gather_alloc(pcnn_net *net, state_gather *g, const char *func)
{
    *g = (state_gather){.bn_floats = state_bn_floats(net)};
    const bool root = is_root(net);
    const size_t P = net_comm(net) ? (size_t)net_comm(net)->size : 1, n = net_num_params(net);
    if (collective(net) && g->bn_floats > (size_t)INT32_MAX)
        return error_set(PCNN_ERR_UNSUPPORTED, func, "%zu batch-norm statistics exceed one "
                         "MPI message", g->bn_floats);
    bool ok = true;
    if (root && net_optim(net)->m) ok = ok && (g->m = mem_alloc_floats(n));
    if (root && net_optim(net)->v) ok = ok && (g->v = mem_alloc_floats(n));
    const bool masters = exchange_masters(net_exchange(net)) != NULL;
    if (root && masters) ok = ok && (g->masters = mem_alloc_floats(n));
    if (g->bn_floats) {
        ok = ok && (g->bn_mine = mem_alloc_floats(g->bn_floats));
        if (root) ok = ok && (g->bn = mem_alloc_floats(g->bn_floats * P));
    }
    const size_t largest =
        collective(net) && (net_optim(net)->m || masters) ? largest_state(net) : 0;
    if (collective(net) && largest > (size_t)INT32_MAX)
        return error_set(PCNN_ERR_UNSUPPORTED, func, "%zu optimizer state values on one rank "
                         "exceed one MPI message", largest);
    if (root && largest) ok = ok && (g->received = mem_alloc_floats(largest));
    if (!ok)
        return error_set(PCNN_ERR_OUT_OF_MEMORY, func, "optimizer state and statistics of %zu "
                         "parameters to gather", n);
    return PCNN_OK;
}

/* One optimizer state vector into flat order on rank 0 (full; NULL on the
 * other ranks): rank by rank, so rank 0 holds one other rank's state at a
 * time. */
static pcnn_status gather_vector(pcnn_net *net, const float *state, float *full,
                                 const state_gather *g, const char *func)
{
    if (!collective(net)) {
        state_copy c = {state, full};
        exchange_owned_runs(net_exchange(net), 0, copy_run_out, &c);
        return PCNN_OK;
    }
    const pcnn_comm *comm = net_comm(net);
    MPI_Request req;
    if (comm->rank != 0) {
        const int count = (int)exchange_state_count(net_exchange(net));
        const int code = MPI_Isend(state, count, MPI_FLOAT, 0, 0, comm->comm, &req);
        const pcnn_status st = net_complete(net, code, &req, func, "MPI_Send (optimizer state)");
        if (st != PCNN_OK && comm_gave_up(comm)) net_lend_buffers(net); /* MPI may still read it */
        return st;
    }
    for (int p = 0; p < comm->size; p++) {
        state_copy c = {state, full};
        if (p > 0) {
            const int count = (int)exchange_state_count_of(net_exchange(net), p);
            const int code = MPI_Irecv(g->received, count, MPI_FLOAT, p, 0, comm->comm, &req);
            TRY(net_complete(net, code, &req, func, "MPI_Recv (optimizer state)"));
            c.state = g->received;
        }
        exchange_owned_runs(net_exchange(net), p, copy_run_out, &c);
    }
    return PCNN_OK;
}

pcnn_status state_gather_run(pcnn_net *net, state_gather *g, const char *func)
{
    if (net_optim(net)->m) TRY(gather_vector(net, net_optim(net)->m, g->m, g, func));
    if (net_optim(net)->v) TRY(gather_vector(net, net_optim(net)->v, g->v, g, func));
    const float *masters = exchange_masters(net_exchange(net));
    if (masters) TRY(gather_vector(net, masters, g->masters, g, func));
    if (!g->bn_floats) return PCNN_OK;
    float *dst = g->bn_mine;
    for (int i = 0; i < net_layer_list(net)->count; i++) {
        size_t count = 0;
        const float *s = batchnorm_running_stats(net_layer_list(net)->items[i], &count);
        if (count) memcpy(dst, s, count * sizeof(float));
        dst += count;
    }
    if (!collective(net)) {
        memcpy(g->bn, g->bn_mine, g->bn_floats * sizeof(float));
        return PCNN_OK;
    }
    MPI_Request req;
    const int code = MPI_Igather(g->bn_mine, (int)g->bn_floats, MPI_FLOAT, g->bn,
                                 (int)g->bn_floats, MPI_FLOAT, 0, net_comm(net)->comm, &req);
    return net_complete(net, code, &req, func, "MPI_Gather (batch-norm statistics)");
}

void state_gather_free(state_gather *g)
{
    mem_free(g->m);
    mem_free(g->v);
    mem_free(g->masters);
    mem_free(g->bn);
    mem_free(g->bn_mine);
    mem_free(g->received);
    *g = (state_gather){0};
}

/* ------------------------------------------------------------------ */
/* Loading                                                              */
/* ------------------------------------------------------------------ */

typedef struct state_load {
    const unsigned char *file;
    float *state;
} state_load;

static void load_run(void *arg, owned_run run)
{
    const state_load *l = arg;
    ckpt_decode_floats(l->file + 4 * run.param_index, l->state + run.state_offset, run.count);
}

/* This rank's part of one flat state vector of the file. */
static void scatter_vector(const pcnn_net *net, const unsigned char *file, float *state)
{
    state_load l = {file, state};
    exchange_owned_runs(net_exchange(net), net_comm(net) ? net_comm(net)->rank : 0, load_run, &l);
}

/* Batch normalisation keeps per-rank statistics: with as many ranks as
 * saved each gets its own back (an exact resume); otherwise every rank
 * takes the element-wise mean over the saved ranks, the natural estimate
 * for another split of the batch. */
static void scatter_bn(pcnn_net *net, const ckpt_view *v)
{
    const size_t per_rank = v->meta.bn_floats;
    const uint32_t saved = v->meta.ranks;
    const int P = net_comm(net) ? net_comm(net)->size : 1, r = net_comm(net) ? net_comm(net)->rank : 0;
    size_t at = 0;
    for (int i = 0; i < net_layer_list(net)->count; i++) {
        size_t count = 0;
        float *s = batchnorm_running_stats(net_layer_list(net)->items[i], &count);
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

const float *state_saved_params(pcnn_net *net, const state_gather *g)
{
    return g->masters ? g->masters : net_params(net);
}

void state_scatter(pcnn_net *net, const ckpt_view *v)
{
    if (net_optim(net)->m) scatter_vector(net, v->m, net_optim(net)->m);
    if (net_optim(net)->v) scatter_vector(net, v->v, net_optim(net)->v);
    if (v->bn) scatter_bn(net, v);
    /* The file's parameters are fp32 masters (or fp32 parameters): with
     * bf16 on the wire they become this rank's masters, and the
     * parameters are rounded as every rank's are. */
    net_masters_from_params(net);
}
