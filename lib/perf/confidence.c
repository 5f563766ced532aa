/* How far a model's figures can be trusted: flags computed from what its
 * calibrations recorded (points, range, repetition spread) and the knobs,
 * never from the prediction itself, so report(), predict's callers and
 * the examples say the same thing. */
#include <stdio.h>

#include "../core/error.h"
#include "../core/text.h"
#include "perf.h"

/* Beyond these the figures are flagged (measured on shared 2-core VMs: a
 * quiet machine's repetitions of one size agree within about 20 %, a
 * loaded one's differ by 2x and more). */
#define NOISY_SPREAD 0.5
#define FEW_POINTS 3
#define SHORT_RANGE_BYTES 1048576.0

static const char *const coll_name[PERF_COLLECTIVES] = {"send-recv", "all-reduce",
                                                        "all-to-all", "all-gather"};

/* The user named the link's latency or bandwidth: not a calibration's. */
static bool link_set_by_hand(const pcnn_perfmodel *m)
{
    return m->knobs.alpha >= 0 || m->knobs.beta > 0 || m->knobs.link_gbits > 0;
}

unsigned perf_confidence_flags(const pcnn_perfmodel *m, int ranks)
{
    unsigned flags = 0;
    const perf_link *k = &m->link;
    if (ranks != 1 && !link_set_by_hand(m)) {
        if (!k->ranks) flags |= PCNN_PERF_FLAG_LINK_DEFAULTS;
        for (int c = 0; k->ranks && c < PERF_COLLECTIVES; c++) {
            const perf_curve *cv = &k->curve[c];
            if (cv->count < FEW_POINTS) flags |= PCNN_PERF_FLAG_LINK_FEW_POINTS;
            if (cv->count && cv->bytes[cv->count - 1] < SHORT_RANGE_BYTES)
                flags |= PCNN_PERF_FLAG_LINK_SHORT_RANGE;
            if (k->spread[c] > NOISY_SPREAD) flags |= PCNN_PERF_FLAG_LINK_NOISY;
        }
    }
    const perf_compute *c = &m->compute;
    if (!c->num_layers) flags |= PCNN_PERF_FLAG_COMPUTE_ESTIMATED;
    else if (c->spread > NOISY_SPREAD) flags |= PCNN_PERF_FLAG_COMPUTE_NOISY;
    return flags;
}

void perf_confidence_explain(const pcnn_perfmodel *m, unsigned flags, text *t)
{
    const perf_link *k = &m->link;
    if (!flags) {
        text_put(t, "confidence: no flag (calibrated, enough points, repetitions agree)\n");
        return;
    }
    text_put(t, "confidence: do not trust these figures blindly:\n");
    if (flags & PCNN_PERF_FLAG_LINK_DEFAULTS)
        text_put(t, "  LINK_DEFAULTS: the links were never calibrated; every collective uses "
                    "the defaults (5 us, 10 Gbit/s): pcnn_perfmodel_calibrate_comm\n");
    if (flags & (PCNN_PERF_FLAG_LINK_FEW_POINTS | PCNN_PERF_FLAG_LINK_SHORT_RANGE)) {
        text_put(t, "  %s%s%s: the budget ended the sweeps early (",
                 flags & PCNN_PERF_FLAG_LINK_FEW_POINTS ? "LINK_FEW_POINTS" : "",
                 (flags & PCNN_PERF_FLAG_LINK_FEW_POINTS) &&
                         (flags & PCNN_PERF_FLAG_LINK_SHORT_RANGE) ? ", " : "",
                 flags & PCNN_PERF_FLAG_LINK_SHORT_RANGE ? "LINK_SHORT_RANGE" : "");
        for (int c = 0; c < PERF_COLLECTIVES; c++) {
            const perf_curve *cv = &k->curve[c];
            text_put(t, "%s%s %d point%s", c ? ", " : "", coll_name[c], cv->count,
                     cv->count == 1 ? "" : "s");
            if (cv->count) text_put(t, " up to %.0f B", cv->bytes[cv->count - 1]);
        }
        text_put(t, "); a fit from fewer than %d sizes or below %.0f MiB extrapolates to "
                    "the gradients' sizes: calibrate with a larger budget\n",
                 FEW_POINTS, SHORT_RANGE_BYTES / 1048576);
    }
    if (flags & PCNN_PERF_FLAG_LINK_NOISY) {
        text_put(t, "  LINK_NOISY: the repetitions of one size disagreed (spread");
        for (int c = 0; c < PERF_COLLECTIVES; c++)
            text_put(t, " %s %.0f %%", coll_name[c], 100 * k->spread[c]);
        text_put(t, "; above %.0f %% is flagged): a loaded machine; calibrate when it is "
                    "quiet\n", 100 * NOISY_SPREAD);
    }
    if (flags & PCNN_PERF_FLAG_COMPUTE_NOISY)
        text_put(t, "  COMPUTE_NOISY: the layers' timed repetitions disagreed (spread %.0f %%, "
                    "above %.0f %% is flagged): a loaded machine; calibrate when it is quiet\n",
                 100 * m->compute.spread, 100 * NOISY_SPREAD);
    if (flags & PCNN_PERF_FLAG_COMPUTE_ESTIMATED)
        text_put(t, "  COMPUTE_ESTIMATED: no compute calibration; layers are costed by the "
                    "regressors (estimates for shapes never timed), if any: "
                    "pcnn_perfmodel_calibrate_compute\n");
}

PCNN_API pcnn_status pcnn_perfmodel_confidence(const pcnn_perfmodel *model, int ranks,
                                               int *flags, char *buf, size_t size,
                                               size_t *needed)
{
    API_ENTRY();
    REQUIRE_PTR(model);
    REQUIRE(ranks >= 0, PCNN_ERR_INVALID_ARGUMENT, "ranks %d: must be >= 0 (0: any)", ranks);
    REQUIRE(buf || size == 0, PCNN_ERR_INVALID_ARGUMENT, "buf is NULL but size is %zu", size);
    const unsigned f = perf_confidence_flags(model, ranks);
    text t = text_start(buf, size);
    perf_confidence_explain(model, f, &t);
    if (flags) *flags = (int)f;
    if (needed) *needed = t.len;
    return PCNN_OK;
}
