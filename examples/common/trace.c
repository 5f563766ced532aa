/* Tracing for the examples, switched on from outside the program (see
 * example.h): the examples read PCNN_TRACE, the library reads nothing from
 * the environment. */
#define PCNN_EXPERIMENTAL /* pcnn_net_write_trace_merged: pcnn.h section 9 */
#include "example.h"

#include <stdlib.h>

/* Spans kept per rank: a few steps of a deep network. */
#define EX_TRACE_EVENTS 16384

const char *ex_trace_path(const char *option)
{
    if (option && option[0]) return option;
    const char *env = getenv("PCNN_TRACE");
    return env && env[0] ? env : NULL;
}

void ex_trace_enable(pcnn_net *net, const char *path)
{
    if (path) EX_CHECK(pcnn_net_set_option(net, PCNN_OPT_TRACE_EVENTS, EX_TRACE_EVENTS));
}

void ex_trace_write(pcnn_net *net, const char *path, int rank)
{
    if (!path) return;
    EX_CHECK(pcnn_net_write_trace_merged(net, path));
    if (rank == 0)
        printf("trace of every rank written to %s (open it in ui.perfetto.dev or "
               "chrome://tracing)\n", path);
}
