/* Changing the gradient exchange of a finalized network's layers (a
 * scheduler's re-plan under PCNN_EXCHANGE_AUTO, graph.h).
 *
 * Each exchange decides which runs of the optimizer state a rank keeps
 * (parallel/exchange.h: allreduce replicates a bucket's state, the others
 * shard it).  The state moves through flat parameter order: every rank
 * writes the runs it owns that no lower rank owns (a replicated run once,
 * every shard once) into a zeroed copy of the whole, a bitwise OR over the
 * ranks assembles it on every rank bit for bit, and the new exchange takes
 * each rank's runs from it — what a checkpoint does through a file.
 * Everything that can fail is allocated, agreed on and started before the
 * old exchange is dropped. */
#include <stdlib.h>
#include <string.h>

#include "../core/error.h"
#include "../core/hash.h"
#include "../core/memory.h"
#include "net.h"

typedef struct span {
    size_t lo, hi; /* [lo, hi) of flat parameter order */
} span;

typedef struct span_list {
    span *v;
    size_t count, cap;
    bool failed;
} span_list;

static void add_run(void *arg, owned_run run)
{
    span_list *s = arg;
    if (s->failed || !run.count) return;
    if (s->count == s->cap) {
        const size_t cap = s->cap ? 2 * s->cap : 64;
        span *v = mem_alloc(cap * sizeof *v);
        if (!v) {
            s->failed = true;
            return;
        }
        if (s->count) memcpy(v, s->v, s->count * sizeof *v);
        mem_free(s->v);
        s->v = v;
        s->cap = cap;
    }
    s->v[s->count++] = (span){run.param_index, run.param_index + run.count};
}

static int by_start(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The union of the runs that ranks below `rank` own, sorted and merged. */
static pcnn_status lower_owned(const exchange *x, int rank, span_list *s, const char *func)
{
    for (int p = 0; p < rank; p++) exchange_owned_runs(x, p, add_run, s);
    if (s->failed) return error_set(PCNN_ERR_OUT_OF_MEMORY, func, "optimizer state map");
    if (!s->count) return PCNN_OK;
    qsort(s->v, s->count, sizeof *s->v, by_start);
    size_t merged = 0;
    for (size_t i = 1; i < s->count; i++) {
        if (s->v[i].lo <= s->v[merged].hi) {
            if (s->v[i].hi > s->v[merged].hi) s->v[merged].hi = s->v[i].hi;
        } else {
            s->v[++merged] = s->v[i];
        }
    }
    s->count = merged + 1;
    return PCNN_OK;
}

/* This rank's part of the whole state: its runs outside `lower`. */
/* Up to three vectors laid out as the optimizer state: m, v and the fp32
 * master weights of bf16 on the wire (exchange_masters). */
enum { STATE_VECTORS = 3 };
typedef struct state_out {
    const span_list *lower;
    const float *s[STATE_VECTORS]; /* this rank's, under the old exchange (or NULL) */
    float *full[STATE_VECTORS];
} state_out;

static void copy_piece(const state_out *o, size_t at, size_t state_at, size_t count)
{
    if (!count) return;
    for (int k = 0; k < STATE_VECTORS; k++)
        if (o->s[k]) memcpy(o->full[k] + at, o->s[k] + state_at, count * sizeof(float));
}

static void write_run(void *arg, owned_run run)
{
    const state_out *o = arg;
    size_t at = run.param_index;
    const size_t end = run.param_index + run.count;
    for (size_t i = 0; i < o->lower->count && at < end; i++) {
        const span *s = &o->lower->v[i];
        if (s->hi <= at) continue;
        if (s->lo >= end) break;
        if (s->lo > at) copy_piece(o, at, run.state_offset + (at - run.param_index), s->lo - at);
        at = s->hi;
    }
    if (at < end) copy_piece(o, at, run.state_offset + (at - run.param_index), end - at);
}

/* This rank's runs of the new exchange from the whole. */
typedef struct state_in {
    const float *full[STATE_VECTORS];
    float *s[STATE_VECTORS];
} state_in;

static void read_run(void *arg, owned_run run)
{
    const state_in *in = arg;
    for (int k = 0; k < STATE_VECTORS; k++)
        if (in->s[k])
            memcpy(in->s[k] + run.state_offset, in->full[k] + run.param_index,
                   run.count * sizeof(float));
}

/* The whole of one state vector on every rank: a bitwise OR of the ranks'
 * parts (each value written by exactly one rank, zero bits elsewhere). */
static pcnn_status assemble(pcnn_net *net, float *full, size_t n, const char *func)
{
    if (!net->comm || net->comm->size == 1) return PCNN_OK;
    const size_t chunk = (size_t)1 << 28;
    for (size_t at = 0; at < n; at += chunk) {
        const int count = (int)(n - at < chunk ? n - at : chunk);
        MPI_Request req;
        const int code = MPI_Iallreduce(MPI_IN_PLACE, full + at, count, MPI_UINT32_T, MPI_BOR,
                                        net->comm->comm, &req);
        TRY(net_complete(net, code, &req, func, "MPI_Allreduce (optimizer state)"));
    }
    return PCNN_OK;
}

static void uncount_memory(pcnn_net *net, pcnn_memory_part part, size_t bytes)
{
    net->memory_bytes -= bytes;
    net->memory_part[part] -= bytes;
}

/* Every rank asks for the same kinds (rank 0 decided them). */
static pcnn_status agree_kinds(pcnn_net *net, const pcnn_exchange *kinds, const char *func)
{
    uint64_t h = HASH_FNV1A_BASIS;
    for (int i = 0; i < net->layers.count; i++) h = hash_fnv1a_u64(h, (uint64_t)kinds[i]);
    word_difference d;
    const pcnn_status st = net_agree_words(net, &h, 1, func, &d);
    if (st != PCNN_ERR_MISMATCH) return st;
    return error_set(PCNN_ERR_MISMATCH, func, "rank %d asks for other gradient exchanges than "
                     "rank 0", d.rank);
}

pcnn_status net_switch_exchanges(pcnn_net *net, const pcnn_exchange *kinds, const char *how,
                                 const char (*why)[NET_WHY_LEN], const char *func)
{
    const int L = net->layers.count;
    int changed = 0;
    for (int i = 0; i < L; i++)
        changed += net->layers.items[i]->num_params && kinds[i] != net->layers.items[i]->exchange;
    if (net->comm && net->comm->size > 1) TRY(agree_kinds(net, kinds, func));
    if (!changed) return PCNN_OK;
    TRY(net_settle(net)); /* nothing of the old exchange in flight */

    const size_t n = net->num_params;
    const bool has_m = net->optim.m != NULL, has_v = net->optim.v != NULL;
    const float *masters = exchange_masters(net->exchange);
    float *full_m = has_m ? mem_calloc(n ? n : 1, sizeof(float)) : NULL;
    float *full_v = has_v ? mem_calloc(n ? n : 1, sizeof(float)) : NULL;
    float *full_w = masters ? mem_calloc(n ? n : 1, sizeof(float)) : NULL;
    const bool moved = has_m || masters; /* any state vector to move */
    span_list lower = {0};
    exchange *next = NULL;
    optim_state state = {0};
    pcnn_status st = (has_m && !full_m) || (has_v && !full_v) || (masters && !full_w)
                         ? error_set(PCNN_ERR_OUT_OF_MEMORY, func, "a copy of the optimizer "
                                     "state of %zu parameters", n)
                         : PCNN_OK;
    const int rank = net->comm ? net->comm->rank : 0;
    if (st == PCNN_OK && moved) st = lower_owned(net->exchange, rank, &lower, func);
    if (st == PCNN_OK) st = net_exchange_create(net, kinds, &next);
    if (st == PCNN_OK) st = optim_state_alloc(&state, net->optimizer, exchange_state_count(next));
    if (net->comm) st = net_agree(net, st, func);
    if (st == PCNN_OK && moved) {
        state_out o = {&lower, {net->optim.m, net->optim.v, masters}, {full_m, full_v, full_w}};
        exchange_owned_runs(net->exchange, rank, write_run, &o);
        if (has_m) st = assemble(net, full_m, n, func);
        if (st == PCNN_OK && has_v) st = assemble(net, full_v, n, func);
        if (st == PCNN_OK && masters) st = assemble(net, full_w, n, func);
    }
    /* The new exchange starts (its engine, its communicator) beside the
     * old one, idle since settled: a failure anywhere keeps the old. */
    if (st == PCNN_OK && net->comm) st = net_exchange_start(net, next, func);
    mem_free(lower.v);
    if (st != PCNN_OK) {
        exchange_destroy(next);
        optim_state_free(&state);
        if (!(net->comm && comm_gave_up(net->comm))) { /* else MPI may still write them */
            mem_free(full_m);
            mem_free(full_v);
            mem_free(full_w);
        }
        return st;
    }

    /* Commit (nothing fails from here): the new exchange and its state
     * replace the old. */
    uncount_memory(net, PCNN_MEMORY_COMMUNICATION, exchange_memory_bytes(net->exchange));
    uncount_memory(net, PCNN_MEMORY_OPTIMIZER, optim_state_bytes(&net->optim));
    exchange_destroy(net->exchange);
    optim_state_free(&net->optim);
    net->exchange = next;
    net->optim = state;
    net_count_memory(net, PCNN_MEMORY_COMMUNICATION, exchange_memory_bytes(next));
    net_count_memory(net, PCNN_MEMORY_OPTIMIZER, optim_state_bytes(&net->optim));
    /* The new exchange took its masters from the (rounded) parameters:
     * the old masters replace them. */
    if (moved) {
        state_in in = {{full_m, full_v, full_w}, {net->optim.m, net->optim.v, exchange_masters(next)}};
        exchange_owned_runs(next, rank, read_run, &in);
    }
    mem_free(full_m);
    mem_free(full_v);
    mem_free(full_w);
    for (int i = 0; i < L; i++) {
        pcnn_layer *l = net->layers.items[i];
        if (!l->num_params || kinds[i] == l->exchange) continue;
        l->exchange = kinds[i];
        net_note_exchange(l, how, why ? why[i] : "");
        char decided[512];
        net_decision_text(l, decided, sizeof decided);
        net_log(net, PCNN_LOG_INFO, "layer %d (%s): %s", i, l->ops->kind, decided);
    }
    return PCNN_OK;
}
