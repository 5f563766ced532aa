/* Building the graph: create, append layers, destroy. */
#include <stdio.h>
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../layers/dense.h"
#include "net.h"

PCNN_API pcnn_status pcnn_net_create(pcnn_net **out)
{
    REQUIRE_PTR(out);
    pcnn_net *net = mem_calloc(1, sizeof *net);
    if (!net) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "network handle");
    net->optimizer = PCNN_OPTIMIZER_SGD;
    net->opt.learning_rate = 0.01;
    net->opt.hyper.momentum = 0.9;
    net->opt.hyper.beta1 = 0.9;
    net->opt.hyper.beta2 = 0.999;
    net->opt.hyper.epsilon = 1e-8;
    net->opt.decay_factor = 0.1;
    net->opt.keep_im2col = true;
    net->opt.check_numerics = true;
    net->opt.bucket_bytes = 1u << 20;
    net->opt.exchange = PCNN_EXCHANGE_ALLTOALL_ALLGATHER;
    net->opt.overlap = true;
    net->opt.comm_core = -1;
    *out = net;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_destroy(pcnn_net **net)
{
    if (!net || !*net) return PCNN_OK;
    pcnn_net *n = *net;
    if (net_destroy_abandoned(n)) { /* aborted: collectives left in flight */
        *net = NULL;
        return PCNN_OK;
    }
    net_release_plan(n); /* waits for collectives still in flight */
    for (int i = 0; i < n->num_layers; i++) {
        pcnn_layer *l = n->layers[i];
        if (l->ops->destroy) l->ops->destroy(l);
        else mem_free(l->priv);
        mem_free(l);
    }
    mem_free(n->layers);
    if (n->comm) n->comm->users--;
    mem_free(n);
    *net = NULL;
    return PCNN_OK;
}

const char *layer_name(const pcnn_layer *l, char *buf, size_t size)
{
    snprintf(buf, size, "layer %d (%s)", l->index, l->ops->kind);
    return buf;
}

static bool net_owns(const pcnn_net *net, const pcnn_layer *l)
{
    return l && l->index >= 0 && l->index < net->num_layers && net->layers[l->index] == l;
}

pcnn_status layer_check_new(pcnn_net *net, pcnn_layer *const *inputs, int num_inputs,
                            pcnn_layer **out, const char *func)
{
    if (!net) return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "net is NULL");
    TRY(net_check_alive(net, func));
    if (!out) return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "out is NULL");
    if (net->finalized)
        return error_set(PCNN_ERR_INVALID_STATE, func,
                         "the network is finalized; layers must be added before");
    for (int i = 0; i < num_inputs; i++) {
        if (!inputs[i])
            return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "input layer %d is NULL", i);
        if (!net_owns(net, inputs[i]))
            return error_set(PCNN_ERR_INVALID_ARGUMENT, func,
                             "input layer %d belongs to another network", i);
    }
    return PCNN_OK;
}

pcnn_status layer_append(pcnn_net *net, const layer_ops *ops, pcnn_layer *const *inputs,
                         int num_inputs, shape out, size_t num_params, void *priv,
                         pcnn_layer **out_layer)
{
    if (net->num_layers == net->cap_layers) {
        int cap = net->cap_layers ? 2 * net->cap_layers : 16;
        pcnn_layer **grown = mem_realloc(net->layers, (size_t)cap * sizeof *grown);
        if (!grown) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "growing the layer list to %d", cap);
        net->layers = grown;
        net->cap_layers = cap;
    }
    pcnn_layer *l = mem_calloc(1, sizeof *l);
    if (!l) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "layer %d", net->num_layers);
    l->ops = ops;
    l->net = net;
    l->index = net->num_layers;
    l->num_inputs = num_inputs;
    for (int i = 0; i < num_inputs; i++) {
        l->inputs[i] = inputs[i];
        inputs[i]->num_consumers++;
    }
    l->out = out;
    l->num_params = num_params;
    l->init = PCNN_INIT_HE_NORMAL;
    l->priv = priv;
    net->layers[net->num_layers++] = l;
    *out_layer = l;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_layer_output_shape(const pcnn_layer *layer, int *channels,
                                             int *height, int *width)
{
    REQUIRE_PTR(layer);
    if (channels) *channels = layer->out.c;
    if (height) *height = layer->out.h;
    if (width) *width = layer->out.w;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_layer_info(const pcnn_layer *layer, int *index, const char **kind)
{
    REQUIRE_PTR(layer);
    if (index) *index = layer->index;
    if (kind) *kind = layer->ops->kind;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_layer_num_params(const pcnn_layer *layer, size_t *count)
{
    REQUIRE_PTR(layer);
    REQUIRE_PTR(count);
    *count = layer->num_params;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_set_loss(pcnn_net *net, pcnn_layer *output, pcnn_loss loss)
{
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    REQUIRE_PTR(output);
    REQUIRE(!net->finalized, PCNN_ERR_INVALID_STATE, "the network is finalized");
    REQUIRE(net_owns(net, output), PCNN_ERR_INVALID_ARGUMENT,
            "output layer belongs to another network");
    REQUIRE(loss == PCNN_LOSS_SOFTMAX_CROSS_ENTROPY || loss == PCNN_LOSS_MSE ||
                loss == PCNN_LOSS_L1,
            PCNN_ERR_INVALID_ARGUMENT, "unknown loss %d", (int)loss);
    REQUIRE(output->index > 0, PCNN_ERR_INVALID_ARGUMENT,
            "the output cannot be the input layer");
    if (loss == PCNN_LOSS_SOFTMAX_CROSS_ENTROPY) {
        char name[64];
        REQUIRE(shape_spatial(output->out) == 1 && output->out.c >= 2, PCNN_ERR_SHAPE,
                "cross entropy needs a (classes, 1, 1) output with at least 2 classes; "
                "%s gives (%d, %d, %d)",
                layer_name(output, name, sizeof name), output->out.c, output->out.h,
                output->out.w);
    }
    net->output = output;
    net->loss = loss;
    net->has_loss = true;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_set_optimizer(pcnn_net *net, pcnn_optimizer optimizer)
{
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    REQUIRE(!net->finalized, PCNN_ERR_INVALID_STATE,
            "the optimizer must be chosen before finalize");
    REQUIRE(optimizer == PCNN_OPTIMIZER_SGD || optimizer == PCNN_OPTIMIZER_MOMENTUM ||
                optimizer == PCNN_OPTIMIZER_ADAM,
            PCNN_ERR_INVALID_ARGUMENT, "unknown optimizer %d", (int)optimizer);
    net->optimizer = optimizer;
    return PCNN_OK;
}

static bool valid_exchange(pcnn_exchange e)
{
    return e == PCNN_EXCHANGE_ALLREDUCE || e == PCNN_EXCHANGE_ALLTOALL_ALLGATHER ||
           e == PCNN_EXCHANGE_FC_GRADIENT;
}

PCNN_API pcnn_status pcnn_net_set_comm(pcnn_net *net, pcnn_comm *comm)
{
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    REQUIRE_PTR(comm);
    REQUIRE(!net->finalized, PCNN_ERR_INVALID_STATE,
            "the communicator must be set before finalize");
    if (net->comm) net->comm->users--;
    net->comm = comm;
    comm->users++;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_set_exchange(pcnn_net *net, pcnn_exchange exchange)
{
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    REQUIRE(!net->finalized, PCNN_ERR_INVALID_STATE, "the exchange must be set before finalize");
    REQUIRE(valid_exchange(exchange), PCNN_ERR_INVALID_ARGUMENT, "unknown exchange %d",
            (int)exchange);
    REQUIRE(exchange != PCNN_EXCHANGE_FC_GRADIENT, PCNN_ERR_INVALID_ARGUMENT,
            "PCNN_EXCHANGE_FC_GRADIENT applies to dense layers: use pcnn_layer_set_exchange");
    net->opt.exchange = exchange;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_layer_set_exchange(pcnn_layer *layer, pcnn_exchange exchange)
{
    REQUIRE_PTR(layer);
    TRY(net_check_alive(layer->net, __func__));
    char name[64];
    REQUIRE(!layer->net->finalized, PCNN_ERR_INVALID_STATE,
            "the exchange must be set before finalize");
    REQUIRE(valid_exchange(exchange), PCNN_ERR_INVALID_ARGUMENT, "unknown exchange %d",
            (int)exchange);
    REQUIRE(layer->num_params > 0, PCNN_ERR_INVALID_ARGUMENT,
            "%s has no parameters to exchange", layer_name(layer, name, sizeof name));
    REQUIRE(exchange != PCNN_EXCHANGE_FC_GRADIENT || layer_is_dense(layer),
            PCNN_ERR_INVALID_ARGUMENT, "%s: PCNN_EXCHANGE_FC_GRADIENT applies to dense layers",
            layer_name(layer, name, sizeof name));
    layer->exchange = exchange;
    layer->exchange_chosen = true;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_exchange_bytes(const pcnn_net *net, uint64_t *bytes_per_step)
{
    TRY(net_check_ready(net, __func__));
    REQUIRE_PTR(bytes_per_step);
    *bytes_per_step = net->xplan.bytes_per_step;
    return PCNN_OK;
}
