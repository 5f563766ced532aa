/* Finalize: plan shapes, parameters, activations, shared gradient buffers
 * and workspaces once, so that training steps allocate nothing. */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../layers/batchnorm.h"
#include "../layers/dense.h"
#include "../parallel/decomp.h"
#include "../strategy/conv_measure.h"
#include "../strategy/exchange_choice.h"
#include "net.h"
#include "spatial.h"

/* A batch norm or residual add feeding only the ReLU right after it
 * computes that ReLU (layer.h).  Right after: no other layer's backward
 * runs between the two, so nothing can reuse the ReLU's gradient buffer
 * before the producer reads it. */
static void plan_fusion(pcnn_net *net)
{
    for (int i = 1; i + 1 < net->layers.count; i++) {
        pcnn_layer *l = net->layers.items[i], *next = net->layers.items[i + 1];
        l->fused_relu = NULL;
        next->fused_into = NULL;
        if ((layer_is_batchnorm(l) || layer_is_add(l)) && l->num_consumers == 1 &&
            layer_is_relu(next) && next->inputs[0] == l && l != net->output) {
            l->fused_relu = next;
            next->fused_into = l;
        }
    }
}

/* The backward pass visits layers from last to first; "time" t(i) = L-1-i.
 * Layer i's dy is written from the backward of its last consumer (or by the
 * loss, t = -1, for the output) until it is read by i's own backward.  Two
 * layers whose intervals do not overlap can share one buffer. */
typedef struct grad_interval {
    int layer;
    int start, end;
} grad_interval;

static pcnn_status plan_gradient_slots(pcnn_net *net)
{
    const int L = net->layers.count;
    int *last_consumer = mem_calloc((size_t)L, sizeof *last_consumer);
    grad_interval *iv = mem_calloc((size_t)L, sizeof *iv);
    int *slot_of = mem_calloc((size_t)L, sizeof *slot_of);
    size_t *slot_size = mem_calloc((size_t)L, sizeof *slot_size);
    int *slot_free_after = mem_calloc((size_t)L, sizeof *slot_free_after);
    pcnn_status st = PCNN_OK;
    if (!last_consumer || !iv || !slot_of || !slot_size || !slot_free_after) {
        st = FAIL(PCNN_ERR_OUT_OF_MEMORY, "gradient buffer plan for %d layers", L);
        goto done;
    }
    for (int i = 0; i < L; i++) last_consumer[i] = -1;
    for (int i = 0; i < L; i++)
        for (int j = 0; j < net->layers.items[i]->num_inputs; j++)
            last_consumer[net->layers.items[i]->inputs[j]->index] = i;

    /* Sorted by start time: a layer consumed later starts earlier. */
    int count = 0;
    for (int c = L; c >= 0; c--) /* c == L stands for the loss */
        for (int i = 0; i < L; i++) {
            int consumer = i == net->output->index ? L : last_consumer[i];
            if (consumer != c) continue;
            iv[count].layer = i;
            iv[count].start = c == L ? -1 : L - 1 - c;
            /* A fused ReLU's gradient is read by the backward of the layer that
             * computes it. */
            const pcnn_layer *reader = net->layers.items[i]->fused_into;
            iv[count].end = L - 1 - (reader ? reader->index : i);
            count++;
        }

    int slots = 0;
    for (int k = 0; k < count; k++) {
        size_t need = spatial_layer_floats(net, net->layers.items[iv[k].layer]);
        int best = -1;
        for (int s = 0; s < slots; s++) {
            if (slot_free_after[s] >= iv[k].start) continue; /* still in use */
            if (best < 0) { best = s; continue; }
            bool fits = slot_size[s] >= need, best_fits = slot_size[best] >= need;
            if ((fits && (!best_fits || slot_size[s] < slot_size[best])) ||
                (!fits && !best_fits && slot_size[s] > slot_size[best]))
                best = s;
        }
        if (best < 0) best = slots++;
        if (slot_size[best] < need) slot_size[best] = need;
        slot_free_after[best] = iv[k].end;
        slot_of[iv[k].layer] = best;
    }

    net->grad_slots = mem_calloc((size_t)slots, sizeof *net->grad_slots);
    if (!net->grad_slots) {
        st = FAIL(PCNN_ERR_OUT_OF_MEMORY, "gradient buffer table");
        goto done;
    }
    net->num_grad_slots = slots;
    for (int s = 0; s < slots; s++) {
        net->grad_slots[s] = mem_alloc_floats(slot_size[s]);
        if (!net->grad_slots[s]) {
            st = FAIL(PCNN_ERR_OUT_OF_MEMORY, "gradient buffer of %zu floats", slot_size[s]);
            goto done;
        }
        net_count_memory(net, PCNN_MEMORY_ACTIVATIONS, slot_size[s] * sizeof(float));
    }
    for (int k = 0; k < count; k++)
        net->layers.items[iv[k].layer]->dy = net->grad_slots[slot_of[iv[k].layer]];

done:
    mem_free(last_consumer);
    mem_free(iv);
    mem_free(slot_of);
    mem_free(slot_size);
    mem_free(slot_free_after);
    return st;
}

/* In backward order, the first contribution to a layer's dy overwrites it
 * and later ones add to it. */
static pcnn_status plan_accumulation(pcnn_net *net)
{
    bool *written = mem_calloc((size_t)net->layers.count, sizeof *written);
    if (!written) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "accumulation plan");
    for (int i = net->layers.count - 1; i > 0; i--) {
        pcnn_layer *l = net->layers.items[i];
        for (int j = 0; j < l->num_inputs; j++) {
            int src = l->inputs[j]->index;
            l->accumulate_dx[j] = written[src];
            written[src] = true;
        }
    }
    mem_free(written);
    return PCNN_OK;
}

/* Validation at finalize reports under the public function's name. */
#define FINALIZE_REQUIRE(cond, status, ...)                                           \
    do {                                                                              \
        if (!(cond)) return error_set((status), "pcnn_net_finalize", __VA_ARGS__);   \
    } while (0)

static pcnn_status check_graph(const pcnn_net *net)
{
    char name[64];
    FINALIZE_REQUIRE(net->layers.count > 0, PCNN_ERR_INVALID_STATE, "the network has no input");
    FINALIZE_REQUIRE(net->has_loss, PCNN_ERR_INVALID_STATE,
                     "no loss: call pcnn_net_set_loss before finalize");
    for (int i = 0; i < net->layers.count; i++) {
        const pcnn_layer *l = net->layers.items[i];
        FINALIZE_REQUIRE(l == net->output || l->num_consumers > 0, PCNN_ERR_INVALID_STATE,
                         "%s does not lead to the output %s",
                         layer_name(l, name, sizeof name), net->output->ops->kind);
    }
    FINALIZE_REQUIRE(net->output->num_consumers == 0, PCNN_ERR_INVALID_STATE,
                     "the output layer %d feeds other layers", net->output->index);
    return PCNN_OK;
}

/* GEMM dimensions are ints: every layer's whole-batch extent must fit.  The
 * product is taken in double, factor by factor: four int extents may
 * overflow a size_t. */
static pcnn_status check_sizes(const pcnn_net *net, int max_batch)
{
    char name[64];
    for (int i = 0; i < net->layers.count; i++) {
        const pcnn_layer *l = net->layers.items[i];
        const shape o = l->out;
        const double per_sample = (double)o.c * (double)o.d * (double)o.h * (double)o.w;
        FINALIZE_REQUIRE((double)max_batch * per_sample < 2147483647.0, PCNN_ERR_SHAPE,
                         "%s: batch %d x %.0f values per sample exceeds 2^31",
                         layer_name(l, name, sizeof name), max_batch, per_sample);
    }
    return PCNN_OK;
}

/* Each layer's exchange: its own choice, else the network's, where a dense
 * layer takes the FC gradient when it moves fewer bytes (strategy room).
 * Under PCNN_EXCHANGE_AUTO these are the heuristics of the default
 * (all-to-all + all-gather and eq. 4.8); a performance model attached to
 * the network may then replace them (net_plan_exchanges, planner_hook.c). */
static void decide_exchanges(pcnn_net *net)
{
    const bool parallel = net->comm && net->comm->size > 1;
    const pcnn_exchange def = net->opt.exchange == PCNN_EXCHANGE_AUTO
                                  ? PCNN_EXCHANGE_ALLTOALL_ALLGATHER
                                  : net->opt.exchange;
    for (int i = 0; i < net->layers.count; i++) {
        pcnn_layer *l = net->layers.items[i];
        char why[96] = "";
        if (!l->exchange_chosen) {
            l->exchange = def;
            if (net_is_spatial(net)) goto chosen; /* the FC gradient needs whole-batch rows */
            if (parallel && layer_is_dense(l)) {
                const dense_shape d = dense_get_shape(l);
                if (exchange_fc_preferred(d.features, d.out, net->global_max_batch,
                                          net->comm->size, def, why, sizeof why))
                    l->exchange = PCNN_EXCHANGE_FC_GRADIENT;
            }
        }
    chosen:
        if (net_is_spatial(net) && l->exchange == PCNN_EXCHANGE_FC_GRADIENT)
            l->exchange = PCNN_EXCHANGE_ALLTOALL_ALLGATHER;
        if (!parallel || l->num_params == 0) continue;
        net_note_exchange(l, l->exchange_chosen ? " (set by the user)" : "", why);
    }
}

/* The optimizer on one run of this rank's parameters, with the learning
 * rate and step of the step in progress (both owned here, not by the
 * exchange). */
static void apply_update(void *arg, float *params, const float *grads, size_t state_offset,
                         size_t count)
{
    pcnn_net *net = arg;
    float *m = net->optim.m ? net->optim.m + state_offset : NULL;
    float *v = net->optim.v ? net->optim.v + state_offset : NULL;
    optim_update(net->optimizer, &net->opt.hyper, net->step_lr, net->opt.weight_decay,
                 net->step + 1, params, grads, m, v, count, net->threads);
}

static void apply_update_strided(void *arg, float *params, const float *grads,
                                 size_t state_offset, size_t len, size_t stride, size_t runs)
{
    pcnn_net *net = arg;
    float *m = net->optim.m ? net->optim.m + state_offset : NULL;
    float *v = net->optim.v ? net->optim.v + state_offset : NULL;
    optim_update_strided(net->optimizer, &net->opt.hyper, net->step_lr, net->opt.weight_decay,
                         net->step + 1, params, grads, m, v, len, stride, runs, net->threads);
}

pcnn_status net_exchange_create(pcnn_net *net, const pcnn_exchange *kinds, exchange **out)
{
    int count = 0;
    for (int i = 0; i < net->layers.count; i++) count += net->layers.items[i]->num_params > 0;
    exchange_layer *layers = mem_calloc(count ? (size_t)count : 1, sizeof *layers);
    /* Box dense layers' weights are split by columns (spatial_dense.c):
     * their all-to-all would carry only zeros. */
    exchange_columns *columns = mem_calloc(count ? (size_t)count : 1, sizeof *columns);
    int **tables = mem_calloc(count ? (size_t)count : 1, sizeof *tables);
    pcnn_status st = PCNN_OK;
    if (!layers || !columns || !tables) st = FAIL(PCNN_ERR_OUT_OF_MEMORY, "exchange layer table");
    for (int i = 0, k = 0; st == PCNN_OK && i < net->layers.count; i++) {
        const pcnn_layer *l = net->layers.items[i];
        if (l->num_params == 0) continue;
        layers[k] = (exchange_layer){.index = i, .param_offset = l->param_offset,
                                     .num_params = l->num_params,
                                     .kind = kinds ? kinds[i] : l->exchange, .layer = l};
        if (l->exchange_by_columns && layers[k].kind == PCNN_EXCHANGE_ALLTOALL_ALLGATHER) {
            st = spatial_box_dense_columns(net, i, &columns[k], &tables[k]);
            layers[k].columns = &columns[k];
        }
        k++;
    }
    const exchange_setup setup = {
        .comm = net->comm,
        .params = net->params,
        .grads = net->grads,
        .num_layers = net->layers.count,
        .layers = layers,
        .num_param_layers = count,
        .max_batch = net->max_batch,
        .bucket_bytes = net->opt.bucket_bytes,
        .overlap = net->opt.overlap,
        .engine = net->opt.engine,
        .comm_core = net->opt.comm_core,
        .timeout_ms = &net->opt.timeout_ms,
        .threads = net->threads,
        .precision = net->opt.precision,
        .profile = &net->profile,
        .update = apply_update,
        .update_strided = apply_update_strided,
        .update_arg = net,
    };
    if (st == PCNN_OK) st = exchange_create(&setup, out);
    for (int k = 0; tables && k < count; k++) mem_free(tables[k]);
    mem_free(tables);
    mem_free(columns);
    mem_free(layers);
    return st;
}

/* Finalize runs in phases.  Deciding allocates nothing; each later phase
 * allocates one group of buffers and, with a communicator, ends in an
 * agreement, so that a rank out of memory stops the others before they
 * allocate the next group (the largest come last). */
static void plan_decide(pcnn_net *net, plan_ctx *p)
{
    net->threads = net->opt.threads > 0 ? net->opt.threads : omp_get_max_threads();
    if (net->threads < 1) net->threads = 1;
    *p = (plan_ctx){.max_batch = net->max_batch, .threads = net->threads,
                    .keep_im2col = net->opt.keep_im2col,
                    .conv_algorithm = net->opt.conv_algorithm,
                    .sync_batchnorm = net->opt.sync_batchnorm,
                    .conv3d_col_budget = net->opt.conv3d_col_budget,
                    .precision = net->opt.precision,
                    /* a spatial network's twins run boxes: their rules decide */
                    .measure = conv_measure_enabled() && !net_is_spatial(net)};
    if (!net_is_spatial(net)) plan_fusion(net); /* twins run unfused */
    /* Decide first (pure, see layer.h), then allocate what was decided. */
    for (int i = 0; i < net->layers.count; i++)
        if (net->layers.items[i]->ops->decide)
            net->layers.items[i]->ops->decide(net->layers.items[i], p);
    size_t total = 0;
    for (int i = 0; i < net->layers.count; i++) {
        net->layers.items[i]->param_offset = total;
        total += net->layers.items[i]->num_params;
    }
    net->num_params = total;
    decide_exchanges(net);
}

/* Parameters: one flat array, layer after layer, and their gradients. */
static pcnn_status plan_parameters(pcnn_net *net, const plan_ctx *p)
{
    (void)p;
    const size_t total = net->num_params;
    net->params = mem_alloc_floats(total);
    net->grads = mem_alloc_floats(total);
    if (!net->params || !net->grads)
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "%zu parameters and their gradients", total);
    net_count_memory(net, PCNN_MEMORY_PARAMETERS, 2 * total * sizeof(float));
    for (int i = 0; i < net->layers.count; i++) {
        pcnn_layer *l = net->layers.items[i];
        l->params = net->params + l->param_offset;
        l->grads = net->grads + l->param_offset;
        if (l->ops->init_params) l->ops->init_params(l, net->opt.seed);
    }
    return PCNN_OK;
}

/* The exchange plan decides which slices this rank updates, and so how
 * much optimizer state it keeps. */
static pcnn_status plan_optimizer(pcnn_net *net, const plan_ctx *p)
{
    (void)p;
    TRY(net_exchange_create(net, NULL, &net->exchange));
    net_count_memory(net, PCNN_MEMORY_COMMUNICATION, exchange_memory_bytes(net->exchange));
    TRY(optim_state_alloc(&net->optim, net->optimizer, exchange_state_count(net->exchange)));
    net_count_memory(net, PCNN_MEMORY_OPTIMIZER, optim_state_bytes(&net->optim));
    return PCNN_OK;
}

/* Activations (all kept for the backward pass), the layers' own buffers
 * and the shared workspace. */
static pcnn_status plan_activations(pcnn_net *net, const plan_ctx *p)
{
    size_t workspace = 0;
    for (int i = 0; i < net->layers.count; i++) {
        pcnn_layer *l = net->layers.items[i];
        if (!l->fused_relu) { /* which writes the ReLU's output instead */
            size_t count = spatial_layer_floats(net, l);
            l->y = mem_alloc_floats(count);
            if (!l->y) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "activations of layer %d", i);
            net_count_memory(net, PCNN_MEMORY_ACTIVATIONS, count * sizeof(float));
        }
        if (!spatial_runs_original(net, l)) continue; /* its twin's buffers: spatial_plan */
        if (l->ops->setup) TRY(l->ops->setup(l, p));
        if (l->ops->workspace_floats) {
            size_t w = l->ops->workspace_floats(l, p);
            if (w > workspace) workspace = w;
        }
        net_count_memory(net, PCNN_MEMORY_WORKSPACE, l->buffer_bytes);
    }
    net->workspace = mem_alloc_floats(workspace);
    if (!net->workspace) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "workspace of %zu floats", workspace);
    net_count_memory(net, PCNN_MEMORY_WORKSPACE, workspace * sizeof(float));
    return PCNN_OK;
}

/* Loss scratch, staging for dataset batches, the trace, and the shared
 * gradient buffers. */
static pcnn_status plan_scratch(pcnn_net *net, const plan_ctx *p)
{
    (void)p;
    const int max_batch = net->max_batch;
    /* Per-sample scratch for losses (and per-channel partial sums). */
    size_t scratch = (size_t)max_batch;
    if ((size_t)net->output->out.c > scratch) scratch = (size_t)net->output->out.c;
    net->loss_scratch = mem_alloc(scratch * sizeof(double));
    if (!net->loss_scratch) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "loss scratch");
    net_count_memory(net, PCNN_MEMORY_WORKSPACE, scratch * sizeof(double));

    /* A spatial network stages only this rank's box of the input. */
    const size_t in_floats = spatial_layer_floats(net, net->layers.items[0]);
    const size_t out_floats = (size_t)max_batch * shape_size(net->output->out);
    net->stage_x = mem_alloc_floats(in_floats);
    net->stage_labels = mem_alloc((size_t)max_batch * sizeof(int32_t));
    net->stage_targets = mem_alloc_floats(net->loss == PCNN_LOSS_SOFTMAX_CROSS_ENTROPY ? 0 : out_floats);
    if (!net->stage_x || !net->stage_labels || !net->stage_targets)
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "staging buffers for %d samples", max_batch);
    net_count_memory(net, PCNN_MEMORY_WORKSPACE, (in_floats + out_floats) * sizeof(float));

    TRY(profile_alloc(&net->profile, &net->layers, net->opt.trace_events));
    net_count_memory(net, PCNN_MEMORY_WORKSPACE, net->opt.trace_events * sizeof(trace_event));

    TRY(plan_gradient_slots(net));
    TRY(step_ahead_plan(net));
    return plan_accumulation(net);
}

typedef pcnn_status (*plan_phase)(pcnn_net *net, const plan_ctx *p);

static const plan_phase plan_phases[] = {plan_parameters, plan_optimizer, plan_activations,
                                         plan_scratch, net_measure_layers, spatial_plan};

pcnn_status net_exchange_start(pcnn_net *net, exchange *x, const char *func)
{
    double votes = exchange_engine_vote(x) ? 1.0 : 0.0;
    TRY(net_agree_sum(net, AGREE_LATER, PCNN_OK, &votes, 1, func));
    return net_agree_sum(net, AGREE_LATER, exchange_start(x, (int)votes), NULL, 0, func);
}

PCNN_API pcnn_status pcnn_net_finalize(pcnn_net *net, int max_batch)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    REQUIRE(!net->finalized, PCNN_ERR_INVALID_STATE, "the network is already finalized");
    REQUIRE(!net->plan_failed, PCNN_ERR_INVALID_STATE,
            "a previous finalize failed; destroy the network and build it again");
    /* With a communicator every rank must reach the agreements below, so
     * local failures are collected, not returned early. */
    pcnn_status st = PCNN_OK;
    if (max_batch < 1)
        st = FAIL(PCNN_ERR_INVALID_ARGUMENT, "max_batch %d must be >= 1", max_batch);
    const int ranks = net->comm ? net->comm->size : 1;
    /* Planned for the largest share of a batch: rank 0's. */
    int local = max_batch < 1 ? 1 : decomp_share(max_batch, ranks, 0, NULL);
    if (st == PCNN_OK) st = check_graph(net);
    if (st == PCNN_OK) st = spatial_resolve(net, max_batch, &local); /* distributions */
    if (st == PCNN_OK) st = check_sizes(net, local);
    if (st == PCNN_OK && net->comm && ranks > 1 && net->opt.engine == 1 &&
        net->comm->thread_level < MPI_THREAD_MULTIPLE)
        st = FAIL(PCNN_ERR_UNSUPPORTED, "the thread engine (PCNN_OPT_ENGINE 1) needs "
                  "MPI_THREAD_MULTIPLE; MPI provides level %d (initialise MPI with "
                  "MPI_Init_thread, or choose engine 0 or 2)", net->comm->thread_level);
    net->global_max_batch = max_batch;
    net->max_batch = local;
    plan_ctx p;
    /* Layers' setup may then hold buffers, and their summaries the choices. */
    const bool planned = st == PCNN_OK;
    if (planned) plan_decide(net, &p);
    if (net->comm) {
        st = net_agree(net, st, __func__);
        if (st == PCNN_OK) st = net_check_same_network(net, __func__);
    }
    if (st == PCNN_OK) st = net_plan_exchanges(net, __func__); /* PCNN_EXCHANGE_AUTO */
    for (size_t k = 0; st == PCNN_OK && k < sizeof plan_phases / sizeof plan_phases[0]; k++) {
        st = plan_phases[k](net, &p);
        if (net->comm) st = net_agree_sum(net, AGREE_LATER, st, NULL, 0, __func__);
    }
    if (st == PCNN_OK && net->comm) st = net_exchange_start(net, net->exchange, __func__);
    if (st == PCNN_OK && net->comm)
        st = net_agree_sum(net, AGREE_LATER, net_sync_start(net), NULL, 0, __func__);
    if (st == PCNN_OK && net->comm && net->opt.trace_events)
        st = net_trace_clock_sync(net, __func__);
    if (st != PCNN_OK) {
        if (net->comm && comm_gave_up(net->comm)) exchange_abort(net->exchange);
        net_release_plan(net);
        /* Layers' setup buffers are freed by destroy, so a plan that ran
         * cannot run again; a bad argument or graph can be fixed and retried. */
        if (planned) net->plan_failed = true;
        return st;
    }
    net->finalized = true;
    net->layers.frozen = true;
    net_log_choices(net);
    return PCNN_OK;
}

void net_release_plan(pcnn_net *net)
{
    /* First: collectives still in flight (a destroy right after a step)
     * read and write the parameters and gradients freed below. */
    exchange_destroy(net->exchange);
    net->exchange = NULL;
    spatial_release(net);
    reducer_destroy(net->reducer); /* keeps the buffer of a given-up reduction */
    net->reducer = NULL;
    for (int i = 0; i < net->layers.count; i++) {
        pcnn_layer *l = net->layers.items[i];
        mem_free(l->y);
        l->y = l->dy = l->params = l->grads = NULL;
    }
    for (int s = 0; s < net->num_grad_slots; s++) mem_free(net->grad_slots[s]);
    mem_free(net->grad_slots);
    net->grad_slots = NULL;
    net->num_grad_slots = 0;
    mem_free(net->params);
    mem_free(net->grads);
    mem_free(net->workspace);
    mem_free(net->loss_scratch);
    step_ahead_release(net);
    mem_free(net->stage_x);
    mem_free(net->stage_labels);
    mem_free(net->stage_targets);
    net->stage_x = net->stage_targets = NULL;
    net->stage_labels = NULL;
    net->params = net->grads = net->workspace = NULL;
    net->loss_scratch = NULL;
    optim_state_free(&net->optim);
    profile_free(&net->profile);
    net->memory_bytes = 0;
    for (int k = 0; k < PCNN_MEMORY_PARTS; k++) net->memory_part[k] = 0;
}
