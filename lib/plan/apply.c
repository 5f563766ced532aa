/* pcnn_net_plan_distribution (pcnn.h section 9): every rank checks that
 * it plans with the same model and options, computes the plan, and
 * applies rank 0's with the distribution calls. */
#include <math.h>
#include <string.h>

#include "../core/error.h"
#include "../core/hash.h"
#include "../core/memory.h"
#include "plan.h"

static uint64_t hash_doubles(uint64_t h, const double *v, size_t n)
{
    return hash_fnv1a(h, v, n * sizeof *v);
}

/* A hash of everything in the model that the plan depends on, field by
 * field (no padding bytes). */
uint64_t plan_model_hash(const pcnn_perfmodel *m)
{
    uint64_t h = HASH_FNV1A_BASIS;
    const perf_link *k = &m->link;
    h = hash_fnv1a_u64(h, (uint64_t)k->ranks);
    h = hash_doubles(h, &k->gamma, 1);
    h = hash_doubles(h, &k->poll_work, 1);
    h = hash_doubles(h, &k->poll_cpu, 1);
    h = hash_doubles(h, k->mem_contention, PERF_CONTENTION_SIZES);
    h = hash_doubles(h, k->alpha, PERF_COLLECTIVES);
    h = hash_doubles(h, k->beta, PERF_COLLECTIVES);
    for (int c = 0; c < PERF_COLLECTIVES; c++) {
        h = hash_fnv1a_u64(h, (uint64_t)k->curve[c].count);
        h = hash_doubles(h, k->curve[c].bytes, (size_t)k->curve[c].count);
        h = hash_doubles(h, k->curve[c].seconds, (size_t)k->curve[c].count);
    }
    const perf_compute *c = &m->compute;
    h = hash_fnv1a_u64(h, (uint64_t)c->num_layers);
    for (int i = 0; i < c->num_layers; i++) {
        const perf_layer *p = &c->layers[i];
        h = hash_fnv1a(h, p->kind, strnlen(p->kind, PERF_KIND_LEN));
        h = hash_fnv1a_u64(h, p->num_params);
        h = hash_doubles(h, p->fwd, 2);
        h = hash_doubles(h, p->bwd_w, 2);
        h = hash_doubles(h, p->bwd_x, 2);
    }
    h = hash_fnv1a_u64(h, c->fingerprint);
    h = hash_doubles(h, c->update, 2);
    h = hash_doubles(h, c->overhead, 2);
    const perf_knobs *kn = &m->knobs;
    const double knobs[5] = {kn->alpha, kn->beta, kn->link_gbits, kn->nb_progress,
                             (double)kn->strategy};
    h = hash_doubles(h, knobs, 5);
    h = hash_fnv1a_u64(h, (uint64_t)kn->source);
    const size_t reg = perf_regressors_bytes(m);
    h = hash_fnv1a_u64(h, reg);
    if (reg) {
        unsigned char *buf = mem_calloc(reg, 1);
        if (!buf) return h ^ 1; /* seen as a mismatch, never as equal */
        perf_regressors_write(m, buf, reg);
        h = hash_fnv1a(h, buf, reg);
        mem_free(buf);
    }
    return h;
}

pcnn_status plan_make_env(pcnn_net *net, pcnn_perfmodel *m, int batch, plan_env *env,
                          bool *mixed)
{
    const net_plan_options o = net_get_plan_options(net);
    const layer_list *ll = net_layer_list(net);
    const pcnn_comm *comm = net_comm(net);
    const int P = comm ? comm->size : 1;
    const bool table = m->compute.num_layers == ll->count &&
                       m->compute.fingerprint == perf_fingerprint(ll) && m->knobs.source != 2;
    if (!table && (m->knobs.source == 1 || !m->regressors))
        return FAIL(PCNN_ERR_INVALID_STATE,
                    m->compute.num_layers ? "the model's compute calibration is of another "
                                            "network: calibrate a finalized twin of this one"
                                          : "the model has no compute calibration "
                                            "(pcnn_perfmodel_calibrate_compute on a finalized "
                                            "twin of this network) and no regressors");
    *env = (plan_env){.layers = ll, .output = net_output(net), .model = m, .ranks = P,
                      .batch = batch, .max_spatial = o.max_spatial > 0 ? o.max_spatial : P,
                      .dims = o.spatial_dims, .memory_cap = o.memory_limit_mib * 1048576.0,
                      .halo_overlap = o.halo_overlap, .table = table,
                      .exchange = o.exchange_auto ? PCNN_EXCHANGE_AUTO
                                                  : net_default_exchange(net),
                      .value = o.precision == PCNN_PRECISION_BF16 ? 2.0 : 4.0};
    *mixed = o.mixed;
    return PCNN_OK;
}

pcnn_status plan_agree_inputs(pcnn_net *net, pcnn_perfmodel *model, int global_batch,
                              const char *func)
{
    const pcnn_comm *comm = net_comm(net);
    if (!comm || comm->size == 1) return PCNN_OK;
    const layer_list *ll = net_layer_list(net);
    const net_plan_options o = net_get_plan_options(net);
    const uint64_t words[3] = {
        plan_model_hash(model),
        hash_fnv1a_u64(perf_fingerprint(ll), (uint64_t)global_batch),
        hash_fnv1a_u64(hash_fnv1a_u64(hash_fnv1a_u64(hash_fnv1a_u64(
                           HASH_FNV1A_BASIS, (uint64_t)o.max_spatial), (uint64_t)o.spatial_dims),
                                      (uint64_t)o.mixed),
                       (uint64_t)llround(o.memory_limit_mib * 1024) ^
                           ((uint64_t)o.halo_overlap << 63))};
    word_difference diff;
    const pcnn_status st = net_agree_words(net, words, 3, func, &diff);
    if (st == PCNN_ERR_MISMATCH) {
        static const char *const what[3] = {"the performance model",
                                            "the network's layers or the global batch",
                                            "the planning options"};
        return error_set(PCNN_ERR_MISMATCH, func, "%s on rank %d differs from rank 0's",
                         what[diff.index >= 0 && diff.index < 3 ? diff.index : 0], diff.rank);
    }
    return st;
}

pcnn_status plan_share(pcnn_net *net, pcnn_status st, plan_record *r, int (*parts)[LAYOUT_DIMS],
                       const char *func)
{
    const int L = net_layer_list(net)->count;
    for (int i = 0; st == PCNN_OK && i < L; i++)
        memcpy(parts[i], r->per[i].candidates[r->per[i].chosen].parts, sizeof parts[i]);
    const pcnn_comm *comm = net_comm(net);
    if (!comm || comm->size == 1) return st;
    /* Rank 0 decides (the others computed the same from the same model). */
    const pcnn_status all = net_agree(net, st, func);
    if (st == PCNN_OK && all != PCNN_OK) st = all;
    if (st != PCNN_OK) return st;
    /* Broadcast from a buffer of its own: one given up stays MPI's. */
    int *sent = mem_alloc((size_t)L * LAYOUT_DIMS * sizeof *sent);
    st = net_agree(net, sent ? PCNN_OK : error_set(PCNN_ERR_OUT_OF_MEMORY, func, "the plan"),
                   func);
    if (st != PCNN_OK) {
        mem_free(sent);
        return st;
    }
    memcpy(sent, parts, (size_t)L * LAYOUT_DIMS * sizeof *sent);
    MPI_Request req;
    const int code = MPI_Ibcast(sent, L * LAYOUT_DIMS, MPI_INT, 0, comm->comm, &req);
    TRY(net_complete(net, code, &req, func, "MPI_Bcast (plan)"));
    memcpy(parts, sent, (size_t)L * LAYOUT_DIMS * sizeof *sent);
    mem_free(sent);
    for (int i = 0; i < L; i++)
        if (memcmp(parts[i], r->per[i].candidates[r->per[i].chosen].parts, sizeof parts[i]))
            for (int c = 0; c < r->per[i].count; c++)
                if (!memcmp(parts[i], r->per[i].candidates[c].parts, sizeof parts[i]))
                    r->per[i].chosen = c;
    return PCNN_OK;
}

static pcnn_status apply(pcnn_net *net, const int (*parts)[LAYOUT_DIMS])
{
    const layer_list *ll = net_layer_list(net);
    TRY(pcnn_net_set_distribution(net, parts[0]));
    for (int i = 1; i < ll->count; i++)
        TRY(pcnn_layer_set_distribution(ll->items[i], parts[i]));
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_plan_distribution(pcnn_net *net, pcnn_perfmodel *model,
                                                int global_batch, double *predicted)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    const layer_list *ll = net_layer_list(net);
    /* A rank's own bad argument fails every rank (agreed before anything
     * else is posted): returning alone would leave the others waiting. */
    pcnn_status local = PCNN_OK;
    if (!model)
        local = error_set(PCNN_ERR_INVALID_ARGUMENT, __func__, "model is NULL");
    else if (global_batch < 1)
        local = error_set(PCNN_ERR_INVALID_ARGUMENT, __func__, "global_batch %d must be >= 1",
                          global_batch);
    else if (!net_get_plan_options(net).editable)
        local = error_set(PCNN_ERR_INVALID_STATE, __func__,
                          "the distribution is planned before pcnn_net_finalize");
    else if (!(ll->count > 1 && net_output(net)))
        local = error_set(PCNN_ERR_INVALID_STATE, __func__,
                          "the network needs its layers and pcnn_net_set_loss before planning");
    const pcnn_comm *comm = net_comm(net);
    if (comm && comm->size > 1) {
        const pcnn_status all = net_agree(net, local, __func__);
        if (local == PCNN_OK) local = all;
    }
    if (local != PCNN_OK) return local;
    TRY(plan_agree_inputs(net, model, global_batch, __func__));
    plan_env env;
    bool mixed = true;
    plan_record *r = NULL;
    pcnn_status st = plan_make_env(net, model, global_batch, &env, &mixed);
    if (st == PCNN_OK) st = plan_compute(&env, mixed, &r, __func__);
    const int L = ll->count;
    int(*parts)[LAYOUT_DIMS] = mem_calloc((size_t)L, sizeof *parts);
    if (st == PCNN_OK && !parts) st = FAIL(PCNN_ERR_OUT_OF_MEMORY, "plan");
    st = plan_share(net, st, r, parts, __func__);
    if (st == PCNN_OK) st = apply(net, (const int(*)[LAYOUT_DIMS])parts);
    mem_free(parts);
    if (st != PCNN_OK) {
        plan_record_free(r);
        return st;
    }
    net_set_plan_record(net, r, plan_record_free);
    if (predicted) *predicted = r->predicted;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_plan_report(const pcnn_net *net, char *buf, size_t size,
                                          size_t *needed)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    REQUIRE(buf || size == 0, PCNN_ERR_INVALID_ARGUMENT, "buf is NULL with size %zu", size);
    const plan_record *r = net_plan_record(net);
    REQUIRE(r, PCNN_ERR_INVALID_STATE, "no plan: call pcnn_net_plan_distribution first");
    const size_t n = plan_describe(r, net_layer_list(net), buf, size);
    if (needed) *needed = n;
    return PCNN_OK;
}
