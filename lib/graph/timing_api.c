/* The public timing calls: the network's checks around its profile
 * (profile/profile.h). */
#include "../core/error.h"
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
    const int rank = net->comm ? net->comm->rank : 0;
    return trace_write(&net->profile, &net->layers, rank, path);
}
