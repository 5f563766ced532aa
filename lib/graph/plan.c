/* Finalize: plan shapes, parameters, activations, shared gradient buffers
 * and workspaces once, so that training steps allocate nothing. */
#include <omp.h>
#include <stdint.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../layers/batchnorm.h"
#include "net.h"

/* A batch norm or residual add feeding only the ReLU right after it
 * computes that ReLU (layer.h).  Right after: no other layer's backward
 * runs between the two, so nothing can reuse the ReLU's gradient buffer
 * before the producer reads it. */
static void plan_fusion(pcnn_net *net)
{
    for (int i = 1; i + 1 < net->num_layers; i++) {
        pcnn_layer *l = net->layers[i], *next = net->layers[i + 1];
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
    const int L = net->num_layers;
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
        for (int j = 0; j < net->layers[i]->num_inputs; j++)
            last_consumer[net->layers[i]->inputs[j]->index] = i;

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
            const pcnn_layer *reader = net->layers[i]->fused_into;
            iv[count].end = L - 1 - (reader ? reader->index : i);
            count++;
        }

    int slots = 0;
    for (int k = 0; k < count; k++) {
        size_t need = (size_t)net->max_batch * shape_size(net->layers[iv[k].layer]->out);
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
        net->memory_bytes += slot_size[s] * sizeof(float);
    }
    for (int k = 0; k < count; k++)
        net->layers[iv[k].layer]->dy = net->grad_slots[slot_of[iv[k].layer]];

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
    bool *written = mem_calloc((size_t)net->num_layers, sizeof *written);
    if (!written) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "accumulation plan");
    for (int i = net->num_layers - 1; i > 0; i--) {
        pcnn_layer *l = net->layers[i];
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
    FINALIZE_REQUIRE(net->num_layers > 0, PCNN_ERR_INVALID_STATE, "the network has no input");
    FINALIZE_REQUIRE(net->has_loss, PCNN_ERR_INVALID_STATE,
                     "no loss: call pcnn_net_set_loss before finalize");
    for (int i = 0; i < net->num_layers; i++) {
        const pcnn_layer *l = net->layers[i];
        FINALIZE_REQUIRE(l == net->output || l->num_consumers > 0, PCNN_ERR_INVALID_STATE,
                         "%s does not lead to the output %s",
                         layer_name(l, name, sizeof name), net->output->ops->kind);
    }
    FINALIZE_REQUIRE(net->output->num_consumers == 0, PCNN_ERR_INVALID_STATE,
                     "the output layer %d feeds other layers", net->output->index);
    return PCNN_OK;
}

/* GEMM dimensions are ints: every layer's whole-batch extent must fit. */
static pcnn_status check_sizes(const pcnn_net *net, int max_batch)
{
    char name[64];
    for (int i = 0; i < net->num_layers; i++) {
        const pcnn_layer *l = net->layers[i];
        FINALIZE_REQUIRE((double)max_batch * (double)shape_size(l->out) < 2147483647.0,
                         PCNN_ERR_SHAPE, "%s: batch %d x %zu values per sample exceeds 2^31",
                         layer_name(l, name, sizeof name), max_batch, shape_size(l->out));
    }
    return PCNN_OK;
}

static pcnn_status plan(pcnn_net *net, int max_batch)
{
    net->threads = net->opt.threads > 0 ? net->opt.threads : omp_get_max_threads();
    if (net->threads < 1) net->threads = 1;
    plan_ctx p = {max_batch, net->opt.keep_im2col, net->opt.conv_algorithm};
    plan_fusion(net);

    /* Parameters: one flat array, layer after layer. */
    size_t total = 0;
    for (int i = 0; i < net->num_layers; i++) {
        net->layers[i]->param_offset = total;
        total += net->layers[i]->num_params;
    }
    net->num_params = total;
    net->params = mem_alloc_floats(total);
    net->grads = mem_alloc_floats(total);
    if (!net->params || !net->grads)
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "%zu parameters and their gradients", total);
    net->memory_bytes += 2 * total * sizeof(float);
    for (int i = 0; i < net->num_layers; i++) {
        pcnn_layer *l = net->layers[i];
        l->params = net->params + l->param_offset;
        l->grads = net->grads + l->param_offset;
        if (l->ops->init_params) l->ops->init_params(l, net->opt.seed);
    }
    for (int i = 0; i < net->num_layers; i++)
        if (!net->layers[i]->exchange_chosen) net->layers[i]->exchange = net->opt.exchange;
    /* Exchange plan first: it decides which slices this rank updates, and
     * so how much optimizer state it keeps. */
    TRY(exchange_plan_build(net, &net->xplan));
    net->memory_bytes += net->xplan.memory_bytes;
    TRY(optim_state_alloc(&net->optim, net->optimizer, net->xplan.state_count));
    net->memory_bytes += optim_state_bytes(&net->optim);

    /* Activations: all kept for the backward pass. */
    size_t workspace = 0;
    for (int i = 0; i < net->num_layers; i++) {
        pcnn_layer *l = net->layers[i];
        if (!l->fused_relu) { /* which writes the ReLU's output instead */
            size_t count = (size_t)max_batch * shape_size(l->out);
            l->y = mem_alloc_floats(count);
            if (!l->y) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "activations of layer %d", i);
            net->memory_bytes += count * sizeof(float);
        }
        if (l->ops->setup) TRY(l->ops->setup(l, &p)); /* may choose an algorithm */
        if (l->ops->workspace_floats) {
            size_t w = l->ops->workspace_floats(l, &p);
            if (w > workspace) workspace = w;
        }
        net->memory_bytes += l->buffer_bytes;
    }
    net->workspace = mem_alloc_floats(workspace);
    if (!net->workspace) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "workspace of %zu floats", workspace);
    net->memory_bytes += workspace * sizeof(float);

    /* Per-sample scratch for losses (and per-channel partial sums). */
    size_t scratch = (size_t)max_batch;
    if ((size_t)net->output->out.c > scratch) scratch = (size_t)net->output->out.c;
    net->loss_scratch = mem_alloc(scratch * sizeof(double));
    if (!net->loss_scratch) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "loss scratch");
    net->memory_bytes += scratch * sizeof(double);

    /* Staging for batches taken from a dataset. */
    const size_t in_floats = (size_t)max_batch * shape_size(net->layers[0]->out);
    const size_t out_floats = (size_t)max_batch * shape_size(net->output->out);
    net->stage_x = mem_alloc_floats(in_floats);
    net->stage_labels = mem_alloc((size_t)max_batch * sizeof(int32_t));
    net->stage_targets = mem_alloc_floats(net->loss == PCNN_LOSS_SOFTMAX_CROSS_ENTROPY ? 0 : out_floats);
    if (!net->stage_x || !net->stage_labels || !net->stage_targets)
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "staging buffers for %d samples", max_batch);
    net->memory_bytes += (in_floats + out_floats) * sizeof(float);

    TRY(profile_alloc(&net->profile, net->num_layers, net->opt.trace_events));
    net->memory_bytes += net->opt.trace_events * sizeof(trace_event);

    TRY(plan_gradient_slots(net));
    return plan_accumulation(net);
}

static pcnn_status check_same_network(const pcnn_net *net)
{
    uint64_t *hashes = mem_calloc((size_t)net->num_layers, sizeof *hashes);
    pcnn_status st = hashes ? PCNN_OK : FAIL(PCNN_ERR_OUT_OF_MEMORY, "network fingerprint");
    if (hashes) net_layer_hashes(net, hashes);
    st = agree(net->comm, st, "pcnn_net_finalize");
    if (st == PCNN_OK) st = agree_structure(net->comm, hashes, net->num_layers, "pcnn_net_finalize");
    mem_free(hashes);
    return st;
}

PCNN_API pcnn_status pcnn_net_finalize(pcnn_net *net, int max_batch)
{
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    REQUIRE(!net->finalized, PCNN_ERR_INVALID_STATE, "the network is already finalized");
    REQUIRE(!net->plan_failed, PCNN_ERR_INVALID_STATE,
            "a previous finalize failed; destroy the network and build it again");
    /* With a communicator every rank must reach the agreement below, so
     * local failures are collected, not returned early. */
    pcnn_status st = PCNN_OK;
    if (max_batch < 1)
        st = FAIL(PCNN_ERR_INVALID_ARGUMENT, "max_batch %d must be >= 1", max_batch);
    const int ranks = net->comm ? net->comm->size : 1;
    const int local = max_batch < 1 ? 1 : (int)(((long)max_batch + ranks - 1) / ranks);
    if (st == PCNN_OK) st = check_graph(net);
    if (st == PCNN_OK) st = check_sizes(net, local);
    if (st == PCNN_OK && net->comm && ranks > 1 && net->opt.engine == 1 &&
        net->comm->thread_level < MPI_THREAD_MULTIPLE)
        st = FAIL(PCNN_ERR_UNSUPPORTED, "the thread engine (PCNN_OPT_ENGINE 1) needs "
                  "MPI_THREAD_MULTIPLE; MPI provides level %d (initialise MPI with "
                  "MPI_Init_thread, or choose engine 0 or 2)", net->comm->thread_level);
    net->global_max_batch = max_batch;
    net->max_batch = local;
    const bool planned = st == PCNN_OK; /* layers' setup may then hold buffers */
    if (st == PCNN_OK) st = plan(net, local);
    if (net->comm) {
        st = agree(net->comm, st, __func__);
        if (st == PCNN_OK) st = check_same_network(net);
        if (st == PCNN_OK) st = agree(net->comm, exchange_start(net), __func__);
    }
    if (st != PCNN_OK) {
        net_release_plan(net);
        /* Layers' setup buffers are freed by destroy, so a plan that ran
         * cannot run again; a bad argument or graph can be fixed and retried. */
        if (planned) net->plan_failed = true;
        return st;
    }
    net->finalized = true;
    return PCNN_OK;
}

void net_release_plan(pcnn_net *net)
{
    /* First: collectives still in flight (a destroy right after a step)
     * read and write the parameters and gradients freed below. */
    exchange_plan_free(&net->xplan);
    for (int i = 0; i < net->num_layers; i++) {
        pcnn_layer *l = net->layers[i];
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
}
