/* Giving up on a network's collectives, in the spirit of NCCL's
 * ncclCommAbort / ncclCommGetAsyncError: abort, the asynchronous error
 * query, the timed agreements of a step, and what destroy does with a
 * network that gave up. */
#include "../core/error.h"
#include "../core/memory.h"
#include "net.h"

PCNN_API pcnn_status pcnn_net_abort(pcnn_net *net)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    net->aborted = true;
    exchange_abort(net->exchange); /* never waits */
    return PCNN_OK;
}

pcnn_status net_async_status(const pcnn_net *net)
{
    pcnn_status st = exchange_error(net->exchange);
    if (st == PCNN_OK) st = reducer_error(net->reducer);
    if (st == PCNN_OK && net->comm) st = net->comm->failed;
    return st;
}

PCNN_API pcnn_status pcnn_net_async_error(const pcnn_net *net, pcnn_status *status)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    REQUIRE_PTR(status);
    *status = net_async_status(net);
    return PCNN_OK;
}

pcnn_status net_check_alive(const pcnn_net *net, const char *func)
{
    if (net->aborted)
        return error_set(PCNN_ERR_INVALID_STATE, func, "the network was aborted "
                         "(pcnn_net_abort); only pcnn_net_destroy may still be called");
    const pcnn_status failure = net_async_status(net);
    if (failure != PCNN_OK)
        return error_set(PCNN_ERR_INVALID_STATE, func, "the network was aborted: one of its "
                         "collectives %s earlier (%s); only pcnn_net_destroy may still be called",
                         failure == PCNN_ERR_TIMEOUT ? "timed out" : "failed",
                         pcnn_status_str(failure));
    return PCNN_OK;
}

/* A given-up agreement leaves the ranks disagreeing on what comes next:
 * the network's own collectives must not wait for partners either. */
static pcnn_status after_agreement(pcnn_net *net, pcnn_status st)
{
    if (net->comm->failed != PCNN_OK) exchange_abort(net->exchange);
    return st;
}

pcnn_status net_agree_batch(pcnn_net *net, pcnn_status local, double *sizes, const char *func)
{
    return after_agreement(
        net, agree_batch_within(net->comm, local, sizes, net->opt.timeout_ms, func));
}

pcnn_status net_agree_sum(pcnn_net *net, pcnn_status local, double *values, int count,
                          const char *func)
{
    return after_agreement(
        net, agree_sum_within(net->comm, local, values, count, net->opt.timeout_ms, func));
}

bool net_destroy_abandoned(pcnn_net *net)
{
    if (!net->aborted && net_async_status(net) == PCNN_OK) return false; /* destroy waits */
    if (!exchange_abandon(net->exchange)) return false; /* nothing in MPI's hands */
    /* MPI may still read or write the parameters, gradients, exchange
     * buffers and activations: keep every block finalize or the layers
     * allocated. */
    if (net->comm) net->comm->users--;
    mem_free(net);
    return true;
}
