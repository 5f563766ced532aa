/* The public timing calls: the network's checks around its profile
 * (profile/profile.h). */
#include <limits.h>
#include <string.h>

#include "../core/atomic_file.h"
#include "../core/error.h"
#include "../core/memory.h"
#include "net.h"

PCNN_API pcnn_status pcnn_net_time(const pcnn_net *net, int layer, pcnn_time what,
                                   double *seconds_per_step)
{
    API_ENTRY();
    TRY(net_check_ready(net, __func__));
    REQUIRE_PTR(seconds_per_step);
    REQUIRE(layer >= -1 && layer < net->layers.count, PCNN_ERR_INVALID_ARGUMENT,
            "layer %d: must be -1 (all) or in [0, %d)", layer, net->layers.count);
    REQUIRE(what >= PCNN_TIME_FORWARD && what <= PCNN_TIME_SHUFFLE, PCNN_ERR_INVALID_ARGUMENT,
            "unknown timing %d", (int)what);
    *seconds_per_step = profile_per_step(&net->profile, layer, what);
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_overlap_ratio(const pcnn_net *net, double *percent)
{
    API_ENTRY();
    TRY(net_check_ready(net, __func__));
    REQUIRE_PTR(percent);
    *percent = profile_overlap_ratio(&net->profile);
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_reset_timing(pcnn_net *net)
{
    API_ENTRY();
    TRY(net_check_ready(net, __func__));
    profile_reset(&net->profile);
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_timing_report(const pcnn_net *net, char *buf, size_t size,
                                            size_t *needed)
{
    API_ENTRY();
    TRY(net_check_ready(net, __func__));
    REQUIRE(buf || size == 0, PCNN_ERR_INVALID_ARGUMENT, "buf is NULL but size is %zu", size);
    const size_t len = profile_report(&net->profile, &net->layers, buf, size);
    if (needed) *needed = len;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_write_trace(const pcnn_net *net, const char *path)
{
    API_ENTRY();
    TRY(net_check_ready(net, __func__));
    REQUIRE_PTR(path);
    REQUIRE(net->profile.capacity > 0, PCNN_ERR_INVALID_STATE,
            "tracing is off: set PCNN_OPT_TRACE_EVENTS before finalize");
    return trace_write(&net->profile, &net->layers, path);
}

/* This rank's part of the merged trace, led by the ",\n" that joins it to
 * the lower ranks' (rank 0's has none); NULL when out of memory. */
static char *format_part(const pcnn_net *net, size_t *len)
{
    const char *join = net->comm->rank > 0 ? ",\n" : "";
    const size_t lead = strlen(join);
    *len = lead + trace_format(&net->profile, &net->layers, NULL, 0);
    char *part = mem_alloc(*len + 1);
    if (!part) return NULL;
    memcpy(part, join, lead);
    trace_format(&net->profile, &net->layers, part + lead, *len + 1 - lead);
    return part;
}

/* Rank 0's file: the header, every rank's part in rank order, the footer. */
static pcnn_status write_merged(const char *path, const char *parts, size_t len)
{
    atomic_file f;
    TRY(atomic_file_open(&f, path));
    fputs(trace_header, f.stream);
    fwrite(parts, 1, len, f.stream);
    fputs(trace_footer, f.stream);
    return atomic_file_commit(&f);
}

/* Gather every rank's part to rank 0 and write them there: each phase
 * ends in an agreement, so a rank out of memory (or rank 0 unable to
 * write) fails every rank.  Buffers handed to a gather that was given up
 * stay MPI's. */
static pcnn_status gather_and_write(pcnn_net *net, const char *path, const char *func)
{
    pcnn_comm *c = net->comm;
    const bool root = c->rank == 0;
    size_t len = 0;
    char *part = format_part(net, &len);
    int *counts = root ? mem_calloc(2 * (size_t)c->size, sizeof *counts) : NULL;
    pcnn_status st = PCNN_OK;
    if (!part || (root && !counts))
        st = error_set(PCNN_ERR_OUT_OF_MEMORY, func, "this rank's part of the trace (%zu bytes)",
                       len);
    else if (len > INT_MAX)
        st = error_set(PCNN_ERR_UNSUPPORTED, func, "this rank's part of the trace is %zu bytes: "
                       "more than one gather moves (2^31 - 1); trace fewer events", len);
    double total = (double)len;
    st = net_agree_sum(net, AGREE_LATER, st, &total, 1, func);
    int mine = (int)len;
    MPI_Request req;
    if (st == PCNN_OK) {
        const int code = MPI_Igather(&mine, 1, MPI_INT, counts, 1, MPI_INT, 0, c->comm, &req);
        st = net_complete(net, code, &req, func, "the gather of the trace sizes");
    }
    char *all = NULL;
    if (st == PCNN_OK && root) {
        if (total > (double)INT_MAX)
            st = error_set(PCNN_ERR_UNSUPPORTED, func, "the merged trace would be %.0f bytes: "
                           "more than one gather moves (2^31 - 1); trace fewer events", total);
        else if (!(all = mem_alloc((size_t)total + 1)))
            st = error_set(PCNN_ERR_OUT_OF_MEMORY, func, "the merged trace (%.0f bytes)", total);
        int *displs = counts + c->size;
        for (int q = 1; q < c->size && st == PCNN_OK; q++) displs[q] = displs[q - 1] + counts[q - 1];
    }
    if (!comm_gave_up(c)) st = net_agree_sum(net, AGREE_LATER, st, NULL, 0, func);
    if (st == PCNN_OK) {
        const int code = MPI_Igatherv(part, mine, MPI_CHAR, all, counts, counts + c->size,
                                      MPI_CHAR, 0, c->comm, &req);
        st = net_complete(net, code, &req, func, "the gather of the traces");
    }
    if (st == PCNN_OK && root) st = write_merged(path, all, (size_t)total);
    if (!comm_gave_up(c)) {
        st = net_agree_sum(net, AGREE_LATER, st, NULL, 0, func);
        mem_free(part);
        mem_free(counts);
        mem_free(all);
    }
    return st;
}

PCNN_API pcnn_status pcnn_net_write_trace_merged(pcnn_net *net, const char *path)
{
    API_ENTRY();
    TRY(net_check_ready(net, __func__));
    pcnn_status st = PCNN_OK;
    if (!path) st = FAIL(PCNN_ERR_INVALID_ARGUMENT, "path is NULL");
    else if (net->profile.capacity == 0)
        st = FAIL(PCNN_ERR_INVALID_STATE, "tracing is off: set PCNN_OPT_TRACE_EVENTS before "
                  "finalize");
    if (!net->comm) {
        TRY(st);
        return trace_write(&net->profile, &net->layers, path);
    }
    TRY(net_agree(net, st, __func__));
    /* Measured again: the two measurements also give the clocks' drift. */
    TRY(net_trace_clock_sync(net, __func__));
    return gather_and_write(net, path, __func__);
}
