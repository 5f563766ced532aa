/* The public calls of the performance model (pcnn.h section 9). */
#include <math.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "perf.h"

void perf_model_defaults(pcnn_perfmodel *m)
{
    perf_link_defaults(&m->link);
    m->knobs = (perf_knobs){.alpha = -1, .beta = 0, .link_gbits = 0, .strategy = -1,
                            .engine = 0, .nb_progress = 0, .source = 0};
}

void perf_model_release(pcnn_perfmodel *m)
{
    mem_free(m->compute.layers);
    mem_free(m->last);
    perf_regressors_free(m);
}

PCNN_API pcnn_status pcnn_perfmodel_create(pcnn_perfmodel **out)
{
    API_ENTRY();
    REQUIRE_PTR(out);
    pcnn_perfmodel *m = mem_calloc(1, sizeof *m);
    if (!m) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "the model");
    perf_model_defaults(m);
    *out = m;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_perfmodel_destroy(pcnn_perfmodel **model)
{
    API_ENTRY();
    if (!model || !*model) return PCNN_OK;
    perf_model_release(*model);
    mem_free(*model);
    *model = NULL;
    return PCNN_OK;
}

static pcnn_status check_budget(double budget)
{
    REQUIRE(budget > 0 && isfinite(budget), PCNN_ERR_INVALID_ARGUMENT,
            "budget_seconds %g: must be positive and finite", budget);
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_perfmodel_calibrate_comm(pcnn_perfmodel *model, pcnn_comm *comm,
                                                   double budget_seconds)
{
    API_ENTRY();
    if (!comm) REQUIRE_PTR(model); /* nothing to agree over: NULL model named first */
    REQUIRE_PTR(comm);
    /* Collective: a bad argument fails on every rank, not on its own. */
    const pcnn_status st = model ? check_budget(budget_seconds)
                                 : FAIL(PCNN_ERR_INVALID_ARGUMENT, "model is NULL");
    return perf_calibrate_link(model ? &model->link : NULL, comm, budget_seconds, st, model,
                               __func__);
}

PCNN_API pcnn_status pcnn_perfmodel_calibrate_compute(pcnn_perfmodel *model, pcnn_net *net,
                                                      double budget_seconds)
{
    API_ENTRY();
    REQUIRE_PTR(model);
    TRY(check_budget(budget_seconds));
    return perf_calibrate_compute(model, net, budget_seconds, __func__);
}

PCNN_API pcnn_status pcnn_perfmodel_calibrate_pace(pcnn_perfmodel *model, pcnn_comm *comm)
{
    API_ENTRY();
    if (!comm) REQUIRE_PTR(model); /* nothing to agree over: NULL model named first */
    REQUIRE_PTR(comm);
    /* Collective: a NULL model fails on every rank, not on its own. */
    const pcnn_status st = model ? PCNN_OK : FAIL(PCNN_ERR_INVALID_ARGUMENT, "model is NULL");
    return perf_calibrate_pace(model, comm, st, __func__);
}

PCNN_API pcnn_status pcnn_perfmodel_fit_regressors(pcnn_perfmodel *model, int threads,
                                                   double budget_seconds, uint64_t seed)
{
    API_ENTRY();
    REQUIRE_PTR(model);
    REQUIRE(threads >= 1, PCNN_ERR_INVALID_ARGUMENT, "threads %d: must be >= 1", threads);
    TRY(check_budget(budget_seconds));
    return perf_fit_regressors(model, threads, budget_seconds, seed);
}

PCNN_API pcnn_status pcnn_perfmodel_set_param(pcnn_perfmodel *model, pcnn_perf_param param,
                                              double value)
{
    API_ENTRY();
    REQUIRE_PTR(model);
    REQUIRE(!isnan(value), PCNN_ERR_INVALID_ARGUMENT, "value is NaN");
    perf_knobs *o = &model->knobs;
    switch (param) {
    case PCNN_PERF_ALPHA_S:
        REQUIRE(value == -1 || (value >= 0 && value <= PERF_MAX_LATENCY_S),
                PCNN_ERR_INVALID_ARGUMENT,
                "alpha %g s: must be in [0, %g], or -1 for the calibrated latencies", value,
                PERF_MAX_LATENCY_S);
        o->alpha = value;
        return PCNN_OK;
    case PCNN_PERF_BETA_S_PER_BYTE:
        REQUIRE(value >= 0 && value <= PERF_MAX_S_PER_BYTE, PCNN_ERR_INVALID_ARGUMENT,
                "beta %g s/byte: must be in [0, %g] (0: calibrated)", value,
                PERF_MAX_S_PER_BYTE);
        o->beta = value;
        return PCNN_OK;
    case PCNN_PERF_GAMMA_S_PER_BYTE:
        REQUIRE(value > 0 && value <= PERF_MAX_S_PER_BYTE, PCNN_ERR_INVALID_ARGUMENT,
                "gamma %g s/byte: must be in (0, %g]", value, PERF_MAX_S_PER_BYTE);
        model->link.gamma = value;
        return PCNN_OK;
    case PCNN_PERF_LINK_GBITS:
        REQUIRE(value == 0 || (value >= PERF_MIN_LINK_GBITS && value <= PERF_MAX_LINK_GBITS),
                PCNN_ERR_INVALID_ARGUMENT,
                "link bandwidth %g Gbit/s: must be in [%g, %g] (0: calibrated)", value,
                PERF_MIN_LINK_GBITS, PERF_MAX_LINK_GBITS);
        o->link_gbits = value;
        return PCNN_OK;
    case PCNN_PERF_STRATEGY:
        REQUIRE(value == -1 || value == PCNN_EXCHANGE_ALLREDUCE ||
                    value == PCNN_EXCHANGE_ALLTOALL_ALLGATHER || value == PCNN_EXCHANGE_FC_GRADIENT,
                PCNN_ERR_INVALID_ARGUMENT, "strategy %g: must be -1 or a pcnn_exchange value", value);
        o->strategy = (int)value;
        return PCNN_OK;
    case PCNN_PERF_ENGINE:
        REQUIRE(value == 0 || value == 1 || value == 2, PCNN_ERR_INVALID_ARGUMENT,
                "engine %g: must be 0 (the network's), 1 (thread) or 2 (nonblocking)", value);
        o->engine = (int)value;
        return PCNN_OK;
    case PCNN_PERF_NONBLOCKING_PROGRESS:
        REQUIRE(value >= 0 && value <= 1, PCNN_ERR_INVALID_ARGUMENT,
                "nonblocking progress %g: must be in [0, 1]", value);
        o->nb_progress = value;
        return PCNN_OK;
    case PCNN_PERF_COMPUTE_SOURCE:
        REQUIRE(value == 0 || value == 1 || value == 2, PCNN_ERR_INVALID_ARGUMENT,
                "compute source %g: must be 0 (best), 1 (timings) or 2 (regressors)", value);
        o->source = (int)value;
        return PCNN_OK;
    case PCNN_PERF_MEMORY_CONTENTION:
        REQUIRE(value >= 1 && value < 1e3, PCNN_ERR_INVALID_ARGUMENT,
                "memory contention %g: must be >= 1 (and < 1000)", value);
        for (int i = 0; i < PERF_CONTENTION_SIZES; i++) model->link.mem_contention[i] = value;
        return PCNN_OK;
    case PCNN_PERF_RANK_PACE:
        REQUIRE(value >= 1 && value < 1e3, PCNN_ERR_INVALID_ARGUMENT,
                "rank pace %g: must be >= 1 (and < 1000)", value);
        model->compute.pace = value;
        return PCNN_OK;
    }
    return FAIL(PCNN_ERR_INVALID_ARGUMENT, "unknown parameter %d", (int)param);
}

PCNN_API pcnn_status pcnn_perfmodel_get_param(const pcnn_perfmodel *model,
                                              pcnn_perf_param param, double *value)
{
    API_ENTRY();
    REQUIRE_PTR(model);
    REQUIRE_PTR(value);
    const perf_knobs *o = &model->knobs;
    switch (param) {
    case PCNN_PERF_ALPHA_S:
        *value = o->alpha >= 0 ? o->alpha : model->link.alpha[PCNN_COLL_SENDRECV];
        return PCNN_OK;
    case PCNN_PERF_BETA_S_PER_BYTE:
        *value = o->beta > 0 ? o->beta
                 : o->link_gbits > 0 ? 8e-9 / o->link_gbits
                                     : model->link.beta[PCNN_COLL_SENDRECV];
        return PCNN_OK;
    case PCNN_PERF_GAMMA_S_PER_BYTE: *value = model->link.gamma; return PCNN_OK;
    case PCNN_PERF_LINK_GBITS: *value = o->link_gbits; return PCNN_OK;
    case PCNN_PERF_STRATEGY: *value = o->strategy; return PCNN_OK;
    case PCNN_PERF_ENGINE: *value = o->engine; return PCNN_OK;
    case PCNN_PERF_NONBLOCKING_PROGRESS: *value = o->nb_progress; return PCNN_OK;
    case PCNN_PERF_COMPUTE_SOURCE: *value = o->source; return PCNN_OK;
    case PCNN_PERF_MEMORY_CONTENTION:
        *value = model->link.mem_contention[PERF_CONTENTION_SIZES - 1];
        return PCNN_OK;
    case PCNN_PERF_RANK_PACE: *value = perf_pace(model); return PCNN_OK;
    }
    return FAIL(PCNN_ERR_INVALID_ARGUMENT, "unknown parameter %d", (int)param);
}

PCNN_API pcnn_status pcnn_perfmodel_collective_time(const pcnn_perfmodel *model,
                                                    pcnn_collective collective, int ranks,
                                                    double bytes, double *seconds)
{
    API_ENTRY();
    REQUIRE_PTR(model);
    REQUIRE_PTR(seconds);
    REQUIRE(collective >= 0 && collective < PERF_COLLECTIVES, PCNN_ERR_INVALID_ARGUMENT,
            "unknown collective %d", (int)collective);
    REQUIRE(ranks >= 1, PCNN_ERR_INVALID_ARGUMENT, "ranks %d: must be >= 1", ranks);
    REQUIRE(bytes >= 0 && isfinite(bytes), PCNN_ERR_INVALID_ARGUMENT,
            "bytes %g: must be finite and >= 0", bytes);
    const perf_knobs *o = &model->knobs;
    const double beta = o->beta > 0 ? o->beta : o->link_gbits > 0 ? 8e-9 / o->link_gbits : 0;
    const double t = perf_coll_time(&model->link, collective, ranks, bytes, beta, o->alpha);
    REQUIRE(isfinite(t) && t >= 0, PCNN_ERR_NUMERIC,
            "%g s for %g bytes over %d ranks: beyond any machine's range", t, bytes, ranks);
    *seconds = t;
    return PCNN_OK;
}

double perf_pace(const pcnn_perfmodel *m) { return m->compute.pace > 1 ? m->compute.pace : 1; }

/* The step at the slowest rank's pace (every rank's computation `pace`
 * times this table's): every rank's step, since each collective waits for
 * that rank.  This rank's layers keep their own times (per); what it waits
 * beyond its own step is exposed communication, shared among the layers as
 * their collectives are (NAN when out of memory). */
static double paced_step(const sim_input *in, sim_layer *layers, sim_bucket *buckets, double pace,
                         double own, double (*per)[SIM_KINDS])
{
    const int L = in->num_layers, B = in->num_buckets;
    sim_layer *slow = mem_calloc((size_t)L, sizeof *slow);
    sim_bucket *slow_b = mem_calloc((size_t)(B ? B : 1), sizeof *slow_b);
    double step = NAN;
    if (slow && slow_b) {
        for (int l = 0; l < L; l++) {
            slow[l] = layers[l];
            slow[l].fwd *= pace, slow[l].bwd *= pace;
        }
        for (int b = 0; b < B; b++) {
            slow_b[b] = buckets[b];
            slow_b[b].update *= pace;
        }
        sim_input paced = *in;
        paced.layers = slow, paced.buckets = slow_b;
        step = sim_step(&paced, NULL);
    }
    mem_free(slow);
    mem_free(slow_b);
    if (!(step > own)) return isnan(step) ? NAN : own;
    double comm = 0;
    for (int l = 0; l < L; l++) comm += per[l][SIM_COMM];
    for (int l = 0; l < L; l++)
        per[l][SIM_EXPOSED] += comm > 0 ? (step - own) * per[l][SIM_COMM] / comm
                                        : l == L - 1 ? step - own : 0;
    return step;
}

PCNN_API pcnn_status pcnn_perfmodel_predict(pcnn_perfmodel *model, const pcnn_net *net,
                                            int global_batch, int ranks, int overlap,
                                            double *step_seconds)
{
    API_ENTRY();
    REQUIRE_PTR(model);
    TRY(net_check_ready(net, __func__));
    REQUIRE(global_batch >= 1, PCNN_ERR_INVALID_ARGUMENT, "global_batch %d: must be >= 1",
            global_batch);
    REQUIRE(ranks >= 1, PCNN_ERR_INVALID_ARGUMENT, "ranks %d: must be >= 1", ranks);
    REQUIRE(overlap == 0 || overlap == 1, PCNN_ERR_INVALID_ARGUMENT,
            "overlap %d: must be 0 or 1", overlap);
    sim_input in;
    sim_layer *layers = NULL;
    sim_bucket *buckets = NULL;
    TRY(perf_build_sim(model, net, global_batch, ranks, overlap == 1, &in, &layers, &buckets,
                       __func__));
    const int L = in.num_layers;
    double(*per)[SIM_KINDS] = mem_calloc((size_t)L, sizeof *per);
    double step = per ? sim_step(&in, per) : NAN;
    if (per && ranks > 1 && perf_pace(model) > 1)
        step = paced_step(&in, layers, buckets, perf_pace(model), step, per);
    mem_free(layers);
    mem_free(buckets);
    if (!per) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "simulation of %d layers", L);
    bool finite = isfinite(step);
    for (int l = 0; l < L && finite; l++)
        for (int k = 0; k < SIM_KINDS; k++) finite = finite && isfinite(per[l][k]);
    if (!finite) { /* the simulator's guard (sim.c), or out of memory in paced_step */
        mem_free(per);
        return FAIL(PCNN_ERR_NUMERIC, "the prediction is not finite (%g s): a timing of "
                    "the model is beyond any machine's range", step);
    }
    mem_free(model->last);
    model->last = per;
    model->last_layers = L;
    model->last_step = step;
    model->last_fingerprint = perf_fingerprint(net_layer_list(net));
    model->last_ranks = ranks;
    if (step_seconds) *step_seconds = step;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_perfmodel_layer_time(const pcnn_perfmodel *model, int layer,
                                               pcnn_time what, double *seconds)
{
    API_ENTRY();
    REQUIRE_PTR(model);
    REQUIRE_PTR(seconds);
    REQUIRE(model->last, PCNN_ERR_INVALID_STATE, "no prediction yet: call pcnn_perfmodel_predict");
    REQUIRE(layer >= -1 && layer < model->last_layers, PCNN_ERR_INVALID_ARGUMENT,
            "layer %d: must be -1 (all) or in [0, %d)", layer, model->last_layers);
    REQUIRE(what >= PCNN_TIME_FORWARD && what <= PCNN_TIME_SHUFFLE, PCNN_ERR_INVALID_ARGUMENT,
            "unknown timing %d", (int)what);
    if (what == PCNN_TIME_STEP) {
        *seconds = model->last_step;
        return PCNN_OK;
    }
    double total = 0;
    for (int l = 0; l < model->last_layers; l++)
        if (layer < 0 || layer == l) total += model->last[l][what];
    *seconds = total;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_perfmodel_validate(const pcnn_perfmodel *model, const pcnn_net *net,
                                             double *step_re, double *wre, char *buf,
                                             size_t size, size_t *needed)
{
    API_ENTRY();
    REQUIRE_PTR(model);
    REQUIRE(buf || size == 0, PCNN_ERR_INVALID_ARGUMENT, "buf is NULL but size is %zu", size);
    return perf_validate(model, net, step_re, wre, buf, size, needed, __func__);
}

PCNN_API pcnn_status pcnn_perfmodel_report(const pcnn_perfmodel *model, char *buf, size_t size,
                                           size_t *needed)
{
    API_ENTRY();
    REQUIRE_PTR(model);
    REQUIRE(buf || size == 0, PCNN_ERR_INVALID_ARGUMENT, "buf is NULL but size is %zu", size);
    const size_t len = perf_report(model, buf, size);
    if (needed) *needed = len;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_perfmodel_save(const pcnn_perfmodel *model, const char *path)
{
    API_ENTRY();
    REQUIRE_PTR(model);
    REQUIRE_PTR(path);
    return perf_save(model, path, __func__);
}

PCNN_API pcnn_status pcnn_perfmodel_share(pcnn_perfmodel *model, pcnn_comm *comm, int root)
{
    API_ENTRY();
    if (!comm) REQUIRE_PTR(model); /* nothing to agree over: NULL model named first */
    REQUIRE_PTR(comm);
    /* Collective: a NULL model fails on every rank, not on its own. */
    const pcnn_status st = model ? PCNN_OK : FAIL(PCNN_ERR_INVALID_ARGUMENT, "model is NULL");
    return perf_share(model, comm, root, st, __func__);
}

PCNN_API pcnn_status pcnn_perfmodel_load(const char *path, pcnn_perfmodel **out)
{
    API_ENTRY();
    REQUIRE_PTR(path);
    REQUIRE_PTR(out);
    pcnn_perfmodel *m = mem_calloc(1, sizeof *m);
    if (!m) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "the model");
    perf_model_defaults(m);
    const pcnn_status st = perf_load(path, m, __func__);
    if (st != PCNN_OK) {
        perf_model_release(m);
        mem_free(m);
        return st;
    }
    *out = m;
    return PCNN_OK;
}
