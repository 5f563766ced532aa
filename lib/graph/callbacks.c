/* The host's callbacks on a network: the step callback of the epoch loop
 * (graph/train.c calls it) and the log callback, the only way the
 * library's diagnostics leave it (it never prints). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../core/error.h"
#include "../kernels/gemm_path.h"
#include "net.h"

PCNN_API pcnn_status pcnn_net_set_step_callback(pcnn_net *net, pcnn_step_callback callback,
                                                void *user)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    net->step_callback = callback;
    net->step_user = callback ? user : NULL;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_stopped_early(const pcnn_net *net, int *stopped)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    REQUIRE_PTR(stopped);
    *stopped = net->stopped_early;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_set_log_callback(pcnn_net *net, pcnn_log_callback callback,
                                               void *user)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    net->log_callback = callback;
    net->log_user = callback ? user : NULL;
    return PCNN_OK;
}

void net_log(const pcnn_net *net, pcnn_log_level level, const char *fmt, ...)
{
    if (!net->log_callback) return;
    char message[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    net->log_callback(net->log_user, level, message);
}

/* A layer that chooses its algorithm (l->algorithm != 0) and computes
 * with another than the one forced fell back (strategy/conv_choice.c). */
static void log_conv_fallbacks(const pcnn_net *net)
{
    static const char *const forced[] = {[2] = "direct", [3] = "taps"};
    const int asked = net->opt.conv_algorithm;
    if (asked != 2 && asked != 3) return;
    for (int i = 0; i < net->layers.count; i++) {
        const pcnn_layer *l = net->layers.items[i];
        if (l->algorithm == 0 || l->algorithm == asked) continue;
        net_log(net, PCNN_LOG_WARNING, "layer %d (%s): PCNN_OPT_CONV_ALGORITHM %d (%s) does "
                "not apply; it computes with %s", i, l->ops->kind, asked, forced[asked],
                l->decision.kernel);
    }
}

/* Never silently slow: say when the own GEMM stands in for an OpenBLAS
 * that runs below the CPU, and when PCNN_GEMM holds a value it ignores. */
static void log_gemm_path(const pcnn_net *net)
{
    const gemm_path *g = gemm_path_get();
    if (g->env_invalid)
        net_log(net, PCNN_LOG_WARNING, "PCNN_GEMM must be auto, openblas or own; ignored: %s",
                g->why);
    else if (g->own)
        net_log(net, g->forced ? PCNN_LOG_INFO : PCNN_LOG_WARNING, "%s", g->why);
}

void net_log_choices(const pcnn_net *net)
{
    if (!net->log_callback) return;
    if (net->comm && net->comm->size > 1 && net->opt.engine == 0 &&
        (exchange_active_engine(net->exchange) != 1 || exchange_thread_pauses(net->exchange)))
        net_log(net, PCNN_LOG_INFO, "progress engine chosen automatically: %s",
                exchange_engine_reason(net->exchange));
    log_conv_fallbacks(net);
    log_gemm_path(net);
}

void net_log_failure(pcnn_net *net)
{
    const pcnn_status failure = net_async_status(net);
    if (failure == PCNN_OK || net->failure_logged) return;
    net->failure_logged = true;
    const bool remote = net->remote_failure != PCNN_OK && failure == net->remote_failure &&
                        net->comm->failed == PCNN_OK && exchange_error(net->exchange) == PCNN_OK;
    if (remote)
        net_log(net, PCNN_LOG_WARNING, "the network failed: another rank's network %s (%s); "
                "only pcnn_net_destroy may still be called", failure == PCNN_ERR_TIMEOUT
                ? "timed out" : "failed", pcnn_status_str(failure));
    else
        net_log(net, PCNN_LOG_WARNING, "the network failed: a collective %s (%s): %s; only "
                "pcnn_net_destroy may still be called", failure == PCNN_ERR_TIMEOUT
                ? "timed out" : "failed", pcnn_status_str(failure), pcnn_last_error());
}
