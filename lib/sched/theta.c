/* theta's denominator ||w_0 - w_i|| (eq. 5.4) without a copy of w_0 on
 * every rank: rank r keeps the r-th contiguous 1/P of the flat parameter
 * array (decomp_share), whatever each layer's exchange strategy, so no
 * element is counted twice; the squared partial norms are summed across
 * ranks by the caller in the agreement it already makes. */
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../graph/graph.h"
#include "../parallel/decomp.h"
#include "../parallel/parallel.h"
#include "sched.h"

pcnn_status sched_keep_initial(pcnn_scheduler *s)
{
    const pcnn_net *net = s->net;
    const int P = net_comm(net) ? net_comm(net)->size : 1, r = net_comm(net) ? net_comm(net)->rank : 0;
    long lo;
    const size_t count = (size_t)decomp_share((long)net_num_params(net), P, r, &lo);
    float *w0 = mem_alloc_floats(count);
    if (!w0) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "w_0 slice of %zu parameters", count);
    memcpy(w0, net_params(net) + lo, count * sizeof *w0);
    mem_free(s->w0);
    s->w0 = w0;
    s->w0_lo = (size_t)lo;
    s->w0_count = count;
    s->num_params = net_num_params(net);
    return PCNN_OK;
}

/* Serial with four fixed lanes: the same sum on every run, and once per
 * epoch over N/P elements is cheap. */
double sched_local_sq_distance(const pcnn_scheduler *s)
{
    const float *w = net_params(s->net) + s->w0_lo;
    double lane[4] = {0.0, 0.0, 0.0, 0.0};
    size_t i = 0;
    for (; i + 4 <= s->w0_count; i += 4)
        for (int k = 0; k < 4; k++) {
            const double d = (double)s->w0[i + k] - (double)w[i + k];
            lane[k] += d * d;
        }
    for (; i < s->w0_count; i++) {
        const double d = (double)s->w0[i] - (double)w[i];
        lane[0] += d * d;
    }
    return (lane[0] + lane[1]) + (lane[2] + lane[3]);
}
