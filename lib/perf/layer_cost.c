/* From a network to the simulator's tables (spec C.7): each layer's
 * compute at the local batch, the exchange's buckets as the strategy room
 * groups them, and each bucket's collectives and update by its strategy.
 * A spatial network's layers (their boxes, halo exchanges and shuffles)
 * come from split_sim.c. */
#include <math.h>
#include <string.h>

#include "../core/error.h"
#include "../core/hash.h"
#include "../core/memory.h"
#include "../kernels/kernels.h"
#include "../layers/dense.h"
#include "../strategy/exchange_choice.h"
#include "perf.h"

uint64_t perf_fingerprint(const layer_list *ll)
{
    uint64_t h = HASH_FNV1A_BASIS;
    for (int i = 0; i < ll->count; i++) {
        const pcnn_layer *l = ll->items[i];
        const shape in = l->num_inputs ? l->inputs[0]->out : l->out;
        h = hash_fnv1a(h, l->ops->kind, strlen(l->ops->kind));
        const int v[9] = {l->num_inputs, in.c, in.d, in.h, in.w, l->out.c, l->out.d, l->out.h,
                          l->out.w};
        for (int k = 0; k < 9; k++) h = hash_fnv1a_u64(h, (uint64_t)(int64_t)v[k]);
        h = hash_fnv1a_u64(h, l->num_params);
    }
    return h;
}

static double nonneg(double x) { return x > 0 ? x : 0; }

/* The exchange a layer's gradient would take on `ranks` ranks. */
static pcnn_exchange layer_exchange(const pcnn_perfmodel *m, const pcnn_net *net,
                                    const pcnn_layer *l, int global_batch, int ranks)
{
    const int s = m->knobs.strategy;
    if (s == PCNN_EXCHANGE_FC_GRADIENT)
        return layer_is_dense(l) ? PCNN_EXCHANGE_FC_GRADIENT : PCNN_EXCHANGE_ALLTOALL_ALLGATHER;
    if (s >= 0) return (pcnn_exchange)s;
    if (l->exchange_chosen) return l->exchange;
    const pcnn_exchange def = net_default_exchange(net);
    if (ranks > 1 && layer_is_dense(l)) {
        const dense_shape d = dense_get_shape(l);
        if (exchange_fc_preferred(d.features, d.out, global_batch, ranks, def, NULL, 0))
            return PCNN_EXCHANGE_FC_GRADIENT;
    }
    return def;
}

double perf_update_call(const perf_compute *c, double own)
{
    if (!(own > 0)) return 0;
    /* parallel_for: grains of 16, work 2 own (optim_update). */
    const bool team = c->threads > 1 && own > 16 && 2 * own >= PAR_MIN_WORK;
    return team ? c->update_team : c->update[0];
}

double perf_update_time(const pcnn_perfmodel *m, bool table, int first, int last, double own)
{
    const perf_compute *c = &m->compute;
    if (!(own > 0)) return 0;
    double count = 0, work = 0;
    for (int i = first; table && i <= last; i++) {
        const perf_layer *p = &c->layers[i];
        if (!p->num_params) continue;
        count += (double)p->num_params;
        work += nonneg(p->update);
    }
    const double per_param = table && count > 0 ? work / count : c->update[1];
    return perf_update_call(c, own) + own * per_param;
}

typedef struct costing {
    const pcnn_perfmodel *m;
    bool table; /* the compute table is this network's */
    int P;
    double link_beta, alpha;
    const bool *columns; /* per layer: its weights exchanged by columns (box dense) */
    double value;        /* bytes of a gradient or parameter value on the wire:
                          * 2 with bf16 (allreduce, all-to-all + all-gather), 4 */
} costing;

static double coll(const costing *c, pcnn_collective k, double bytes)
{
    return perf_coll_time(&c->m->link, k, c->P, bytes, c->link_beta, c->alpha);
}

/* Memory-bound work on `params` parameters that the ranks of a step do at
 * once (the updates after the same collective): the compute table timed
 * it on one rank. */
static double contended(const costing *c, double seconds, double params)
{
    return c->P > 1 ? perf_contention(&c->m->link, params) * seconds : seconds;
}

/* The optimizer on `own` of the parameters of bucket sp's layers. */
static double update_time(const costing *c, const bucket_span *sp, double own)
{
    return contended(c, perf_update_time(c->m, c->table, sp->first_layer, sp->last_layer, own),
                     own);
}

static void bucket_costs(const costing *c, const pcnn_net *net, const bucket_span *sp,
                         const double (*comp)[3], int n, int global_batch, sim_bucket *b,
                         sim_layer *layers)
{
    const int P = c->P;
    const double count = (double)sp->count, bytes = c->value * count;
    *b = (sim_bucket){.first_layer = sp->first_layer, .last_layer = sp->last_layer};
    if (P <= 1) {
        b->update = update_time(c, sp, count);
        return;
    }
    switch (sp->kind) {
    case PCNN_EXCHANGE_ALLREDUCE:
        /* bf16: a reduce-scatter by all-to-all, the owner's fp32 sums and
         * their all-gather, one after the other (parallel/engine.h). */
        b->reduce_comm = c->value < 4 ? coll(c, PCNN_COLL_ALLTOALL, bytes) +
                                            (P - 1) * ceil(count / P) * 4.0 * c->m->link.gamma +
                                            coll(c, PCNN_COLL_ALLGATHER, bytes)
                                      : coll(c, PCNN_COLL_ALLREDUCE, bytes);
        b->update = update_time(c, sp, count);
        break;
    case PCNN_EXCHANGE_ALLTOALL_ALLGATHER: {
        if (c->columns[sp->first_layer]) {
            /* Each rank's own columns updated and all-gathered, the
             * biases allreduced (parallel/exchange_columns.c). */
            const dense_shape d = dense_get_shape(net_layer_list(net)->items[sp->first_layer]);
            const double K = d.out, biases = d.bias ? K : 0;
            b->reduce_comm = biases > 0 ? coll(c, PCNN_COLL_ALLREDUCE, 4.0 * biases) : 0;
            b->update = update_time(c, sp, K * ceil((double)d.features / P) + biases);
            b->gather_comm = coll(c, PCNN_COLL_ALLGATHER, 4.0 * K * d.features);
            break;
        }
        const double own = ceil(count / P);
        b->reduce_comm = coll(c, PCNN_COLL_ALLTOALL, bytes);
        /* The sum of the P pieces received: at the rate timed on this
         * network's buckets (calib_compute.c), else the link's gamma. */
        const double gamma = c->table && c->m->compute.sum_gamma > 0 ? c->m->compute.sum_gamma
                                                                     : c->m->link.gamma;
        b->update = contended(c, (P - 1) * own * 4.0 * gamma, own) + update_time(c, sp, own);
        b->gather_comm = coll(c, PCNN_COLL_ALLGATHER, bytes);
        break;
    }
    case PCNN_EXCHANGE_FC_GRADIENT: {
        const pcnn_layer *l = net_layer_list(net)->items[sp->first_layer];
        const dense_shape d = dense_get_shape(l);
        const double F = d.features, K = d.out;
        b->fwd_comm = coll(c, PCNN_COLL_ALLTOALL, c->value * F * n);
        b->bwd_comm = coll(c, PCNN_COLL_ALLGATHER, c->value * K * global_batch);
        /* dW of this rank's F/P columns over the whole batch: the flops of
         * the local weight gradient; the layer's backward keeps dx only. */
        /* Two optimizer calls: this rank's weight columns, then the bias. */
        b->update = comp[sp->first_layer][1] + update_time(c, sp, K * ceil(F / P)) +
                    (d.bias ? update_time(c, sp, K) : 0);
        layers[sp->first_layer].bwd = comp[sp->first_layer][2];
        b->gather_comm = coll(c, PCNN_COLL_ALLGATHER, c->value * K * F);
        break;
    }
    }
}

/* The engine the step would use: 1 thread, 2 nonblocking. */
static int engine_of(const pcnn_perfmodel *m, const pcnn_net *net, int ranks)
{
    if (m->knobs.engine) return m->knobs.engine;
    const pcnn_comm *comm = net_comm(net);
    const int active = comm && comm->size == ranks ? exchange_active_engine(net_exchange(net)) : 0;
    return active ? active : 1;
}

pcnn_status perf_build_sim(pcnn_perfmodel *m, const pcnn_net *net, int global_batch, int ranks,
                           bool overlap, sim_input *in, sim_layer **layers_out,
                           sim_bucket **buckets_out, const char *func)
{
    const layer_list *ll = net_layer_list(net);
    /* ceil(global_batch / ranks), without overflowing near INT_MAX. */
    const int L = ll->count, n = (int)(((long long)global_batch + ranks - 1) / ranks);
    /* The table where it is this network's, else the regressors. */
    const bool have_table = m->compute.num_layers > 0;
    const bool matches = have_table && m->compute.num_layers == L &&
                         m->compute.fingerprint == perf_fingerprint(ll);
    const bool table = matches && m->knobs.source != 2;
    if (!table && (m->knobs.source == 1 || !m->regressors)) {
        if (have_table && !matches)
            return error_set(PCNN_ERR_MISMATCH, func,
                             "the compute calibration is of another network (%d layers; this "
                             "one has %d or differs in shapes): calibrate this network",
                             m->compute.num_layers, L);
        if (m->knobs.source != 2)
            return error_set(PCNN_ERR_INVALID_STATE, func,
                             "no compute calibration: call pcnn_perfmodel_calibrate_compute");
    }
    sim_layer *layers = mem_calloc((size_t)L, sizeof *layers);
    sim_bucket *buckets = mem_calloc((size_t)L, sizeof *buckets);
    bucket_span *spans = mem_calloc((size_t)L, sizeof *spans);
    size_t *counts = mem_calloc((size_t)L, sizeof *counts);
    pcnn_exchange *kinds = mem_calloc((size_t)L, sizeof *kinds);
    double(*comp)[3] = mem_calloc((size_t)L, sizeof *comp);
    bool *columns = mem_calloc((size_t)L, sizeof *columns);
    pcnn_status st = PCNN_OK;
    if (!layers || !buckets || !spans || !counts || !kinds || !comp || !columns)
        st = FAIL(PCNN_ERR_OUT_OF_MEMORY, "simulation tables");
    bool spatial = false;
    double input_samples = n; /* the input copy's share of the step's overhead */
    if (st == PCNN_OK)
        st = perf_split_layers(m, net, table, global_batch, ranks, layers, columns,
                               &input_samples, &spatial, func);
    for (int i = 1; st == PCNN_OK && i < L; i++) {
        const pcnn_layer *l = ll->items[i];
        counts[i] = l->num_params;
        kinds[i] = layer_exchange(m, net, l, global_batch, ranks);
        if (spatial) {
            /* A spatial network cannot take the FC gradient (graph/plan.c). */
            if (kinds[i] == PCNN_EXCHANGE_FC_GRADIENT) kinds[i] = PCNN_EXCHANGE_ALLTOALL_ALLGATHER;
            columns[i] = columns[i] && kinds[i] == PCNN_EXCHANGE_ALLTOALL_ALLGATHER;
            continue;
        }
        st = perf_layer_compute(m, l, table, n, comp[i], func);
        layers[i].fwd = comp[i][0];
        layers[i].bwd = comp[i][1] + comp[i][2];
        layers[i].weight = (double)l->num_params;
    }
    int B = 0;
    if (st == PCNN_OK) {
        const costing c = {
            .m = m, .table = matches, .P = ranks, .alpha = m->knobs.alpha,
            .link_beta = perf_link_beta(m),
            .columns = columns,
            .value = ranks > 1 && net_get_plan_options(net).precision == PCNN_PRECISION_BF16
                         ? 2.0 : 4.0};
        B = exchange_group_buckets(counts, kinds, columns, L, net_bucket_bytes(net), ranks > 1,
                                   spans);
        for (int k = 0; k < B; k++)
            bucket_costs(&c, net, &spans[k], (const double(*)[3])comp, n, global_batch,
                         &buckets[k], layers);
        const int engine = engine_of(m, net, ranks);
        const double agree = ranks > 1 ? coll(&c, PCNN_COLL_ALLGATHER,
                                              8.0 * AGREE_RECORD * ranks)
                                       : 0;
        *in = (sim_input){.num_layers = L, .layers = layers, .num_buckets = B,
                          .buckets = buckets, .overlap = overlap, .parallel = ranks > 1,
                          .progress = engine == 1 ? 1.0 : m->knobs.nb_progress,
                          .poll_work = engine == 1 ? 0 : m->link.poll_work,
                          /* The thread's share of polled work is the calibrated
                           * link's; another link (what-if) moves data beside it. */
                          .poll_cpu = engine == 1 || c.link_beta > 0 ? 0 : m->link.poll_cpu,
                          .pre = agree,
                          .mid = (matches ? nonneg(perf_line(m->compute.overhead,
                                                             input_samples))
                                          : 0) +
                                 agree,
                          .post = agree};
    }
    mem_free(spans);
    mem_free(counts);
    mem_free(kinds);
    mem_free(comp);
    mem_free(columns);
    if (st != PCNN_OK) {
        mem_free(layers);
        mem_free(buckets);
        return st;
    }
    *layers_out = layers;
    *buckets_out = buckets;
    return PCNN_OK;
}
