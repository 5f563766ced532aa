/* Which source costs a layer's computation (spec C.5, C.2): the network's
 * own timings, measured at the layer's exact shapes and algorithms at two
 * local batches, or the per-kernel regressors, which know every shape but
 * only to their held-out error.
 *
 * Between the two timed batches the timings are the truth up to timing
 * noise, so they win.  Outside them (a what-if whose local batch is
 * smaller or larger) the line through two points extrapolates badly where
 * a fixed overhead dominates (a local batch of 1 or 2): there the
 * regressor knows how the kernel scales with the batch, and its bias on
 * this shape is known from the nearest timed batch, so the estimate is the
 * timing there scaled by the regressor's ratio between the two batches.
 * Without a regressor for the kind the line is all there is. */
#include <math.h>

#include "../core/error.h"
#include "perf.h"

static double nonneg(double x) { return x > 0 ? x : 0; }

/* The regressors' forward, backward without the input gradient, and full
 * backward of l at n samples (NaN where they cannot say). */
static void regressor_parts(pcnn_perfmodel *m, const pcnn_layer *l, int n, bool dx, double r[3])
{
    r[0] = perf_regressor_time(m, l, n, 0, dx);
    r[1] = perf_regressor_time(m, l, n, 1, false);
    r[2] = perf_regressor_time(m, l, n, 1, dx);
}

static void table_parts(const perf_compute *c, const perf_layer *p, double n, double t[3])
{
    t[0] = perf_line_at(p->fwd, n, c->batch_lo);
    t[1] = perf_line_at(p->bwd_w, n, c->batch_lo);
    t[2] = t[1] + perf_line_at(p->bwd_x, n, c->batch_lo);
}

static bool usable(double x) { return isfinite(x) && x > 0; }

pcnn_status perf_layer_compute(pcnn_perfmodel *m, const pcnn_layer *l, bool table, int n,
                               double t[3], const char *func)
{
    const bool dx = l->num_inputs && !layer_is_input(l->inputs[0]);
    double parts[3];
    if (table) {
        const perf_compute *c = &m->compute;
        const perf_layer *p = &c->layers[l->index];
        table_parts(c, p, n, parts);
        const int anchor = n > c->batch_hi ? c->batch_hi : n < c->batch_lo ? c->batch_lo : n;
        if (m->knobs.source == 0 && anchor != n && m->regressors) {
            double at[3], r_n[3], r_a[3];
            table_parts(c, p, anchor, at);
            regressor_parts(m, l, n, dx, r_n);
            regressor_parts(m, l, anchor, dx, r_a);
            for (int k = 0; k < 3; k++)
                if (usable(r_n[k]) && usable(r_a[k])) parts[k] = at[k] * r_n[k] / r_a[k];
        }
    } else {
        regressor_parts(m, l, n, dx, parts);
        if (isnan(parts[0]) || isnan(parts[1]) || isnan(parts[2])) {
            char name[64];
            return error_set(PCNN_ERR_INVALID_STATE, func,
                             "%s: no compute calibration of this network "
                             "(pcnn_perfmodel_calibrate_compute) and no regressor for it",
                             layer_name(l, name, sizeof name));
        }
    }
    t[0] = nonneg(parts[0]);
    t[1] = nonneg(parts[1]);
    t[2] = nonneg(parts[2] - parts[1]);
    return PCNN_OK;
}
