/* A performance model with a made-up compute table for a network (the
 * tests' control over which plan is cheapest): each layer costs `scale`
 * seconds per multiply-add of one sample forward, twice that backward
 * (half for the weights, half for the input gradient), nothing fixed. */
#ifndef PCNN_TESTS_PLAN_SYNTHETIC_MODEL_H
#define PCNN_TESTS_PLAN_SYNTHETIC_MODEL_H

#include <string.h>

#include "core/memory.h"
#include "layers/layer.h"
#include "perf/perf.h"

static double layer_work(const pcnn_layer *l)
{
    const double out = (double)shape_size(l->out);
    if (!l->num_inputs) return 0;
    const shape in = l->inputs[0]->out;
    layer_window w;
    if (layer_window_of(l, &w)) {
        const double window = (double)w.kernel[0] * w.kernel[1] * w.kernel[2];
        return out * (l->num_params ? (double)in.c * window : window);
    }
    if (l->num_params > 2 * (size_t)l->out.c) return (double)l->num_params; /* dense */
    return out;
}

/* Fill m's compute table for net (before or after finalize). */
static void synthetic_model(pcnn_perfmodel *m, const pcnn_net *net, double scale)
{
    const layer_list *ll = net_layer_list(net);
    mem_free(m->compute.layers);
    m->compute.layers = mem_calloc((size_t)ll->count, sizeof *m->compute.layers);
    m->compute.num_layers = ll->count;
    m->compute.fingerprint = perf_fingerprint(ll);
    m->compute.threads = 1;
    m->compute.batch_lo = 1;
    m->compute.batch_hi = 2;
    for (int i = 0; i < ll->count; i++) {
        const pcnn_layer *l = ll->items[i];
        perf_layer *p = &m->compute.layers[i];
        strncpy(p->kind, l->ops->kind, PERF_KIND_LEN - 1);
        p->out = l->out;
        p->in = l->num_inputs ? l->inputs[0]->out : l->out;
        p->num_params = l->num_params;
        const double w = scale * layer_work(l);
        p->fwd[1] = w;
        p->bwd_w[1] = l->num_params ? w : 0;
        p->bwd_x[1] = w;
    }
}

#endif
