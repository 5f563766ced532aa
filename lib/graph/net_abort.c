/* Giving up on a network's collectives, in the spirit of NCCL's
 * ncclCommAbort / ncclCommGetAsyncError: abort, the asynchronous error
 * query, the timed agreements and collectives of every collective call,
 * and what destroy does with a network that gave up.
 *
 * The rule after a timeout: a rank that gives up on a collective (or sees
 * in an agreement that another rank's network failed) aborts its network:
 * from then on every call on it but destroy, abort and the error query
 * returns PCNN_ERR_INVALID_STATE at once, without communicating; a rank
 * that did not notice fails at its next collective (it times out, or an
 * agreement tells it).  Destroy never waits longer than the timeout. */
#include "../core/error.h"
#include "../core/memory.h"
#include "net.h"
#include "spatial.h"

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
    if (st == PCNN_OK) st = spatial_async_status(net);
    if (st == PCNN_OK && net->comm) st = net->comm->failed;
    if (st == PCNN_OK) st = net->remote_failure;
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
                         "collectives %s earlier (%s)%s; only pcnn_net_destroy may still be "
                         "called", failure == PCNN_ERR_TIMEOUT ? "timed out" : "failed",
                         pcnn_status_str(failure), net->remote_failure != PCNN_OK &&
                         exchange_error(net->exchange) == PCNN_OK && net->comm->failed == PCNN_OK &&
                         spatial_async_status(net) == PCNN_OK ? " on another rank" : "");
    if (net->comm && mpi_is_finalized())
        return error_set(PCNN_ERR_INVALID_STATE, func, "MPI was finalised: only "
                         "pcnn_net_destroy may still be called");
    return PCNN_OK;
}

/* A given-up collective leaves the ranks disagreeing on what comes next,
 * and a peer whose network failed will not take part in this one's
 * exchange: the network's own collectives must not wait for partners. */
static pcnn_status after_collective(pcnn_net *net, pcnn_status st)
{
    if (net->comm->peer_failed != PCNN_OK && net->remote_failure == PCNN_OK)
        net->remote_failure = net->comm->peer_failed;
    if (net->comm->failed != PCNN_OK || net->remote_failure != PCNN_OK)
        exchange_abort(net->exchange);
    net_log_failure(net);
    return st;
}

pcnn_status net_agree(pcnn_net *net, pcnn_status local, const char *func)
{
    return net_agree_sum(net, AGREE_ENTRY, local, NULL, 0, func);
}

pcnn_status net_agree_sum(pcnn_net *net, agree_stage stage, pcnn_status local, double *values,
                          int count, const char *func)
{
    return after_collective(net, agree_sum(net->comm, stage, local, values, count,
                                           net->opt.timeout_ms, func));
}

pcnn_status net_agree_batch(pcnn_net *net, pcnn_status local, double *sizes, double lr,
                            const char *func)
{
    return after_collective(net, agree_batch(net->comm, local, sizes, net->step, lr,
                                             net->opt.timeout_ms, func));
}

pcnn_status net_agree_batch_post(pcnn_net *net, pcnn_status local, const double *sizes, double lr,
                                 const char *func, agree_ticket *ticket)
{
    return after_collective(net, agree_batch_post(net->comm, local, sizes, net->step, lr, func,
                                                  ticket));
}

pcnn_status net_agree_batch_finish(pcnn_net *net, agree_ticket *ticket, double *sizes,
                                   const char *func)
{
    return after_collective(net, agree_batch_finish(net->comm, ticket, sizes,
                                                    net->opt.timeout_ms, func));
}

void net_agree_abandon(pcnn_net *net, agree_ticket *ticket)
{
    const pcnn_status why = net_async_status(net);
    agree_abandon(net->comm, ticket, why != PCNN_OK ? why : PCNN_ERR_TIMEOUT);
    after_collective(net, why);
}

pcnn_status net_complete(pcnn_net *net, int post_code, MPI_Request *req, const char *func,
                         const char *what)
{
    return after_collective(net, comm_complete(net->comm, post_code, req, net->opt.timeout_ms,
                                               func, what));
}

pcnn_status net_agree_words(pcnn_net *net, const uint64_t *words, int count, const char *func,
                            word_difference *diff)
{
    return after_collective(net, agree_words(net->comm, PCNN_OK, words, count,
                                             net->opt.timeout_ms, func, diff));
}

void net_lend_buffers(pcnn_net *net) { net->lent = true; }

bool net_destroy_abandoned(pcnn_net *net)
{
    /* A healthy network waits for its collectives in flight (the last
     * step's all-gathers) no longer than the timeout: a flush that gives up
     * aborts the engine, and the network is then destroyed as failed. */
    if (net->exchange && !net->aborted && net_async_status(net) == PCNN_OK &&
        !mpi_is_finalized())
        exchange_flush(net->exchange);
    if (!net->aborted && net_async_status(net) == PCNN_OK) return false; /* destroy waits */
    const bool abandoned = exchange_abandon(net->exchange);
    if (!abandoned && !(net->lent && !mpi_is_finalized())) return false; /* nothing in MPI's hands */
    /* MPI may still read or write the parameters, gradients, exchange
     * buffers and activations: keep every block finalize or the layers
     * allocated. */
    if (net->comm) net->comm->users--;
    mem_free(net);
    return true;
}
