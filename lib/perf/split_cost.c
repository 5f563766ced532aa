/* A layer under a distribution (spec A.10, C.7; seed 002 section V): its
 * box on the rank holding the most, its computation scaled to that box,
 * its halo exchanges and the shuffle of an output between two
 * distributions.  The planner (plan room) prices candidates with these;
 * the simulator's tables (split_sim.c) price the network as finalized. */
#include <math.h>
#include <string.h>

#include "../core/error.h"
#include "../layers/layer.h"
#include "../parallel/halo.h"
#include "perf.h"

static int ceil_div(int a, int b) { return a / b + (a % b != 0); } /* a, b >= 1; no overflow */

static double nonneg(double x) { return x > 0 ? x : 0; }

bool perf_split_geometry(const pcnn_layer *l, const int *parts, int batch, perf_geometry *g)
{
    memset(g, 0, sizeof *g);
    const shape out = l->out;
    const shape in = l->num_inputs ? l->inputs[0]->out : l->out;
    const int Y[3] = {out.d, out.h, out.w}, X[3] = {in.d, in.h, in.w};
    layer_window w;
    const bool windowed = layer_window_of(l, &w);
    g->n = ceil_div(batch, parts[LAYOUT_N]);
    g->interior = 1;
    for (int dim = 0; dim < 3; dim++) {
        const int G = parts[dim + 1];
        if (G > Y[dim] || G > X[dim]) return false;
        g->out[dim] = ceil_div(Y[dim], G);
        g->in[dim] = ceil_div(X[dim], G);
        if (G == 1 || !windowed) continue; /* a 2D layer's D is never split: G > Y */
        const int k = w.kernel[dim], s = w.stride[dim], p = w.padding[dim];
        int inner = Y[dim];
        for (int q = 0; q < G; q++) {
            int a0, a1, b0, b1, lo, hi, i0, i1, blo, bhi;
            layout_block(X[dim], G, q, &a0, &a1);
            layout_block(Y[dim], G, q, &b0, &b1);
            halo_forward_widths(X[dim], a0, a1, b0, b1, k, s, p, &lo, &hi);
            /* The halo comes from the immediate neighbours only. */
            int n0, n1;
            if (q > 0) {
                layout_block(X[dim], G, q - 1, &n0, &n1);
                if (lo > n1 - n0) return false;
            }
            if (q + 1 < G) {
                layout_block(X[dim], G, q + 1, &n0, &n1);
                if (hi > n1 - n0) return false;
            }
            halo_backward_widths(Y[dim], a0, a1, b0, b1, k, s, p, &blo, &bhi);
            halo_interior(X[dim], a0, a1, b0, b1, k, s, p, &i0, &i1);
            if (lo + hi > g->halo_fwd[dim]) g->halo_fwd[dim] = lo + hi;
            if (blo + bhi > g->halo_bwd[dim]) g->halo_bwd[dim] = blo + bhi;
            const int own = i1 > i0 ? i1 - i0 : 0;
            if (own < inner) inner = own;
        }
        g->interior *= (double)inner / (double)g->out[dim];
    }
    double in_box = 1, out_box = 1;
    for (int dim = 0; dim < 3; dim++) {
        in_box *= g->in[dim] + g->halo_fwd[dim];
        out_box *= g->out[dim];
    }
    g->in_floats = (double)g->n * in.c * in_box;
    g->bytes = 4.0 * g->n * ((double)out.c * out_box * 2 + (double)in.c * in_box) +
               16.0 * (double)l->num_params;
    return true;
}

double perf_box_share(const pcnn_layer *l, const perf_geometry *g)
{
    const shape out = l->out;
    return (double)g->out[0] / out.d * g->out[1] / out.h * g->out[2] / out.w;
}

double perf_link_beta(const pcnn_perfmodel *m)
{
    return m->knobs.beta > 0         ? m->knobs.beta
           : m->knobs.link_gbits > 0 ? 8e-9 / m->knobs.link_gbits
                                     : 0;
}

double perf_coll(const pcnn_perfmodel *m, pcnn_collective c, int ranks, double bytes)
{
    return perf_coll_time(&m->link, c, ranks, bytes, perf_link_beta(m), m->knobs.alpha);
}

pcnn_status perf_box_compute(pcnn_perfmodel *m, const pcnn_layer *l, bool table, int n,
                             double frac, double t[3], const char *func)
{
    if (table) {
        const perf_layer *p = &m->compute.layers[l->index];
        const double x = n * frac;
        const double lo = m->compute.batch_lo;
        t[0] = perf_line_at(p->fwd, x, lo);
        t[1] = perf_line_at(p->bwd_w, x, lo);
        t[2] = perf_line_at(p->bwd_x, x, lo);
        return PCNN_OK;
    }
    const bool dx = l->num_inputs && !layer_is_input(l->inputs[0]);
    const double f = perf_regressor_time(m, l, n, 0, dx);
    const double w = perf_regressor_time(m, l, n, 1, false);
    const double full = perf_regressor_time(m, l, n, 1, dx);
    if (isnan(f) || isnan(w) || isnan(full)) {
        char name[64];
        return func ? error_set(PCNN_ERR_INVALID_STATE, func,
                                "%s: the model has no compute calibration of this network "
                                "(pcnn_perfmodel_calibrate_compute on a finalized twin) and no "
                                "regressor for it", layer_name(l, name, sizeof name))
                    : PCNN_ERR_INVALID_STATE;
    }
    t[0] = nonneg(f) * frac;
    t[1] = nonneg(w) * frac;
    t[2] = nonneg(full - w) * frac;
    return PCNN_OK;
}

double perf_halo_seconds(const pcnn_perfmodel *m, const perf_geometry *g, bool backward,
                         int channels, double value)
{
    const int *widths = backward ? g->halo_bwd : g->halo_fwd;
    const int *box = backward ? g->out : g->in;
    double t = 0;
    for (int dim = 0; dim < 3; dim++) {
        if (!widths[dim]) continue;
        double face = value * g->n * channels;
        for (int o = 0; o < 3; o++)
            if (o != dim) face *= box[o];
        t += 2 * perf_coll(m, PCNN_COLL_SENDRECV, 2, face * widths[dim] / 2.0);
    }
    return t;
}

double perf_shuffle_seconds(const pcnn_perfmodel *m, const pcnn_layer *l, const int *a,
                            const int *b, int batch, int groups, int ranks)
{
    if (memcmp(a, b, LAYOUT_DIMS * sizeof(int)) == 0) return 0;
    /* Every sample group lays its ranks out alike, the first (its ranks
     * first: N is the outermost coordinate) with the most samples: the
     * rank that moves most is among its ranks, which read only its block. */
    int lo, hi;
    layout_block(batch, groups, 0, &lo, &hi);
    const int start = lo, count = hi - lo;
    const sample_split split = {.groups = groups, .start = &start, .count = &count};
    double worst = 0;
    for (int r = 0; r < ranks / groups; r++) {
        const box x = layout_box(a, r, &split, l->out.d, l->out.h, l->out.w);
        const box y = layout_box(b, r, &split, l->out.d, l->out.h, l->out.w);
        box both;
        const double kept = box_intersect(&x, &y, &both) ? (double)box_volume(&both) : 0;
        const double sent = (double)box_volume(&x) - kept, got = (double)box_volume(&y) - kept;
        if (sent > worst) worst = sent;
        if (got > worst) worst = got;
    }
    /* One way: the output forward or its gradient backward, point to point
     * within the sample group (parallel/box_move.c), as an all-to-all of
     * its ranks. */
    return perf_coll(m, PCNN_COLL_ALLTOALL, ranks / groups, 4.0 * l->out.c * worst);
}

perf_halo perf_halo_terms(const pcnn_perfmodel *m, const pcnn_layer *l, const perf_geometry *g,
                          const double t[3], const perf_halo_how *how)
{
    perf_halo h = {0};
    const double hf = perf_halo_seconds(m, g, false, l->inputs[0]->out.c, how->bf16_fwd ? 2.0 : 4.0);
    const double hb = perf_halo_seconds(m, g, true, l->out.c, 4.0);
    /* Seed 002's overlap (spec A.10): the forward halo hides behind the
     * interior (in place: the whole block), the backward one behind the
     * weight gradient. */
    const double hidden = how->in_place ? t[0] : g->interior * t[0];
    h.fwd = how->overlap ? nonneg(hf - hidden) : hf;
    h.bwd = how->overlap ? nonneg(hb - t[1]) : hb;
    h.duration = hf + hb;
    if (how->in_place) { /* no copy: the border cells are computed again, on the halo */
        h.border_fwd = (1 - g->interior) * t[0];
        h.border_bwd = (1 - g->interior) * (t[1] + t[2]);
    } else if (how->staged) {
        /* The halo-extended input box copied in, its gradient back, at about
         * the summation's speed; where the box is not kept, copied and its
         * halo exchanged again before backward. */
        const double copy = m->link.gamma * 4.0 * g->in_floats;
        h.fwd += copy;
        h.bwd += copy;
        h.duration += 2 * copy; /* timed as the halo's, as the move makes them */
        if (!how->keeps_input) {
            h.bwd += copy + hf;
            h.duration += copy + hf;
        }
    }
    return h;
}
