/* Building the graph: create, configure, destroy (layers are added through
 * graph/layer_api.c). */

#include "../core/error.h"
#include "../core/memory.h"
#include "../layers/dense.h"
#include "loss.h"
#include "net.h"
#include "spatial.h"
#include "option_table.h"

PCNN_API pcnn_status pcnn_net_create(pcnn_net **out)
{
    API_ENTRY();
    REQUIRE_PTR(out);
    pcnn_net *net = mem_calloc(1, sizeof *net);
    if (!net) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "network handle");
    net->optimizer = PCNN_OPTIMIZER_SGD;
    net_options_defaults(&net->opt);
    *out = net;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_destroy(pcnn_net **net)
{
    API_ENTRY();
    if (!net || !*net) return PCNN_OK;
    pcnn_net *n = *net;
    if (net_destroy_abandoned(n)) { /* aborted: collectives left in flight */
        *net = NULL;
        return PCNN_OK;
    }
    net_release_plan(n); /* waits for collectives still in flight */
    spatial_destroy(n);
    if (n->plan_record_release) n->plan_record_release(n->plan_record);
    layer_list_destroy(&n->layers);
    if (n->comm) n->comm->users--;
    mem_free(n);
    *net = NULL;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_set_loss(pcnn_net *net, pcnn_layer *output, pcnn_loss loss)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    REQUIRE_PTR(output);
    REQUIRE(!net->finalized, PCNN_ERR_INVALID_STATE, "the network is finalized");
    REQUIRE(layer_list_owns(&net->layers, output), PCNN_ERR_INVALID_ARGUMENT,
            "output layer belongs to another network");
    REQUIRE(loss_known(loss), PCNN_ERR_INVALID_ARGUMENT, "unknown loss %d", (int)loss);
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
    API_ENTRY();
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
    API_ENTRY();
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
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    REQUIRE(!net->finalized, PCNN_ERR_INVALID_STATE, "the exchange must be set before finalize");
    REQUIRE(valid_exchange(exchange) || exchange == PCNN_EXCHANGE_AUTO,
            PCNN_ERR_INVALID_ARGUMENT, "unknown exchange %d", (int)exchange);
    REQUIRE(exchange != PCNN_EXCHANGE_FC_GRADIENT, PCNN_ERR_INVALID_ARGUMENT,
            "PCNN_EXCHANGE_FC_GRADIENT applies to dense layers: use pcnn_layer_set_exchange");
    net->opt.exchange = exchange;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_layer_set_exchange(pcnn_layer *layer, pcnn_exchange exchange)
{
    API_ENTRY();
    REQUIRE_PTR(layer);
    TRY(net_check_alive(net_of_layer(layer), __func__));
    char name[64];
    REQUIRE(!layer->list->frozen, PCNN_ERR_INVALID_STATE,
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

PCNN_API pcnn_status pcnn_layer_set_precision(pcnn_layer *layer, int precision)
{
    API_ENTRY();
    REQUIRE_PTR(layer);
    TRY(net_check_alive(net_of_layer(layer), __func__));
    char name[64];
    REQUIRE(!layer->list->frozen, PCNN_ERR_INVALID_STATE,
            "the precision must be set before finalize");
    REQUIRE(precision >= -1 && precision <= PCNN_PRECISION_BF16, PCNN_ERR_INVALID_ARGUMENT,
            "precision %d: -1 (the network's), 0 (fp32) or 1 (bf16)", precision);
    REQUIRE(layer->ops->caps.bf16, PCNN_ERR_INVALID_ARGUMENT,
            "%s has no products with a bf16 path (conv2d, conv3d, dense and the "
            "transposed convolutions have)",
            layer_name(layer, name, sizeof name));
    layer->precision = precision;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_exchange_bytes(const pcnn_net *net, uint64_t *bytes_per_step)
{
    API_ENTRY();
    TRY(net_check_ready(net, __func__));
    REQUIRE_PTR(bytes_per_step);
    *bytes_per_step = exchange_bytes_per_step(net->exchange);
    return PCNN_OK;
}
