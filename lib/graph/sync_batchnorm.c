/* Synchronised batch norm, the graph's side (pcnn.h section 9): the public
 * per-layer switch, the reducer that a network with synchronised layers
 * and a communicator starts at finalize, and the hooks through which a
 * parallel training step lets its layers reduce across ranks
 * (layers/layer.h run_reduce; parallel/parallel.h reducer). */
#include <limits.h>

#include "../core/error.h"
#include "../layers/batchnorm.h"
#include "net.h"

PCNN_API pcnn_status pcnn_batchnorm_set_sync(pcnn_layer *layer, int sync)
{
    API_ENTRY();
    REQUIRE_PTR(layer);
    TRY(net_check_alive(net_of_layer(layer), __func__));
    return batchnorm_set_sync(layer, sync, __func__);
}

pcnn_status net_sync_start(pcnn_net *net)
{
    size_t most = 0;
    for (int i = 0; i < net->layers.count; i++) {
        const size_t d = batchnorm_sync_doubles(net->layers.items[i]);
        if (d > most) most = d;
    }
    if (!net->comm || most == 0) return PCNN_OK;
    if (most > (size_t)INT_MAX / (size_t)net->comm->size)
        return FAIL(PCNN_ERR_UNSUPPORTED, "batch-norm statistics of %zu doubles from %d ranks "
                    "do not fit one MPI message", most, net->comm->size);
    TRY(reducer_create(net->comm, (int)most, &net->opt.timeout_ms, &net->reducer));
    net_count_memory(net, PCNN_MEMORY_COMMUNICATION, reducer_bytes(net->reducer));
    return PCNN_OK;
}

static const double *hook_gather(void *arg, const double *mine, int count)
{
    const double *all = NULL;
    return reducer_gather(arg, mine, count, &all) == PCNN_OK ? all : NULL;
}

static bool hook_sum(void *arg, double *values, int count)
{
    return reducer_sum(arg, values, count) == PCNN_OK;
}

run_reduce net_sync_hooks(pcnn_net *net)
{
    return (run_reduce){.gather = hook_gather, .sum = hook_sum, .arg = net->reducer,
                        .ranks = reducer_ranks(net->reducer)};
}

pcnn_status net_sync_checked(pcnn_net *net, pcnn_status st)
{
    const pcnn_status failed = reducer_error(net->reducer);
    if (failed == PCNN_OK) return st;
    /* This rank gave up on a collective: its exchange must not wait for
     * partners either (net_abort.c after_agreement does the same). */
    exchange_abort(net->exchange);
    return st == PCNN_OK ? failed : st;
}
