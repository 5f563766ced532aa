/* One clock for the traces of all ranks: at finalize, and again at each
 * merged write, each rank pings rank 0 a few times on the network's
 * communicator and keeps the offset of the ping with the shortest round
 * trip (profile/trace.c turns the two into timestamps, drift included);
 * its process in a trace is its world rank. */
#include "../core/clock.h"
#include "../core/error.h"
#include "../core/memory.h"
#include "net.h"

#define CLOCK_PINGS 8
#define CLOCK_TAG 7401 /* point-to-point on the network's communicator: no
                        * collective of pcnn matches it */

/* The rank of this process in MPI_COMM_WORLD, read through the groups
 * (nothing is sent on it); the communicator's rank if it has none. */
static int world_rank(MPI_Comm comm, int rank)
{
    MPI_Group mine, world;
    int translated = MPI_UNDEFINED;
    if (MPI_Comm_group(comm, &mine) != MPI_SUCCESS) return rank;
    if (MPI_Comm_group(MPI_COMM_WORLD, &world) == MPI_SUCCESS) {
        MPI_Group_translate_ranks(mine, 1, &rank, world, &translated);
        MPI_Group_free(&world);
    }
    MPI_Group_free(&mine);
    return translated == MPI_UNDEFINED ? rank : translated;
}

/* Rank 0 answers each ping with its clock and its origin.  Every wait is
 * timed (PCNN_OPT_TIMEOUT_MS); `buf` (3 doubles) is handed to MPI, so a
 * wait given up leaves it to MPI for good. */
static pcnn_status serve_pings(pcnn_net *net, double *buf, const char *func)
{
    MPI_Comm comm = net->comm->comm;
    for (int q = 1; q < net->comm->size; q++)
        for (int k = 0; k < CLOCK_PINGS; k++) {
            MPI_Request req;
            int code = MPI_Irecv(&buf[2], 1, MPI_DOUBLE, q, CLOCK_TAG, comm, &req);
            TRY(net_complete(net, code, &req, func, "a clock ping"));
            buf[0] = clock_now();
            code = MPI_Isend(buf, 2, MPI_DOUBLE, q, CLOCK_TAG, comm, &req);
            TRY(net_complete(net, code, &req, func, "a clock ping's reply"));
        }
    return PCNN_OK;
}

/* The other ranks: buf[2] the ping, buf[0..1] rank 0's clock and origin. */
static pcnn_status ping(pcnn_net *net, double *buf, clock_ping *pings, const char *func)
{
    MPI_Comm comm = net->comm->comm;
    for (int k = 0; k < CLOCK_PINGS; k++) {
        MPI_Request recv, send;
        int code = MPI_Irecv(buf, 2, MPI_DOUBLE, 0, CLOCK_TAG, comm, &recv);
        if (code != MPI_SUCCESS) return net_complete(net, code, &recv, func, "a clock ping");
        buf[2] = clock_now();
        code = MPI_Isend(&buf[2], 1, MPI_DOUBLE, 0, CLOCK_TAG, comm, &send);
        TRY(net_complete(net, code, &send, func, "a clock ping"));
        TRY(net_complete(net, MPI_SUCCESS, &recv, func, "a clock ping's reply"));
        pings[k] = (clock_ping){buf[2], buf[0], clock_now()};
    }
    return PCNN_OK;
}

pcnn_status net_trace_clock_sync(pcnn_net *net, const char *func)
{
    trace_clock *c = &net->profile.clock;
    c->pid = world_rank(net->comm->comm, net->comm->rank);
    double *buf = mem_alloc(3 * sizeof *buf);
    pcnn_status st = buf ? PCNN_OK : FAIL(PCNN_ERR_OUT_OF_MEMORY, "a clock ping's buffer");
    st = net_agree_sum(net, AGREE_LATER, st, NULL, 0, func);
    if (st != PCNN_OK) {
        mem_free(buf);
        return st;
    }
    clock_measure m = {clock_now(), 0.0, 0.0}; /* rank 0: the reference */
    if (net->comm->rank == 0) {
        buf[1] = c->measured ? c->origin : m.at;
        st = serve_pings(net, buf, func);
    } else {
        clock_ping pings[CLOCK_PINGS];
        st = ping(net, buf, pings, func);
        if (st == PCNN_OK) m = trace_clock_estimate(pings, CLOCK_PINGS);
    }
    if (st == PCNN_OK) {
        if (!c->measured) c->origin = buf[1];
        trace_clock_add(c, m);
    }
    if (!comm_gave_up(net->comm)) mem_free(buf); /* else MPI may still write it */
    /* A rank that gave up fails the others here rather than at their next
     * collective. */
    return net_agree_sum(net, AGREE_LATER, st, NULL, 0, func);
}
