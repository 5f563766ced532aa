/* The model's texts: its report, and the validation of a prediction
 * against a network's measured breakdown (seed 004 eqs. 2-3). */
#include <math.h>

#include "../core/error.h"
#include "../core/text.h"
#include "perf.h"

static const char *coll_name[PERF_COLLECTIVES] = {"send-recv", "all-reduce", "all-to-all",
                                                  "all-gather"};

size_t perf_report(const pcnn_perfmodel *m, char *buf, size_t size)
{
    text t = text_start(buf, size);
    const perf_link *k = &m->link;
    text_put(&t, "link: %s, gamma %.3g s/B (%.2f GB/s summation)\n",
             k->ranks ? "calibrated" : "defaults (not calibrated)", k->gamma,
             1e-9 / k->gamma);
    if (k->ranks) text_put(&t, "  calibrated on %d ranks\n", k->ranks);
    text_put(&t, "  nonblocking collectives advance %.3g ms of link time per poll, %.0f %% "
             "of it the polling thread's own time\n",
             1e3 * k->poll_work, 100 * k->poll_cpu);
    text_put(&t, "  the optimizer's update with every rank updating at once, times as long as "
             "alone:");
    for (int i = 0; i < PERF_CONTENTION_SIZES; i++)
        text_put(&t, " %.2f (%g Mi parameters)", k->mem_contention[i],
                 perf_contention_params(i) / 1048576);
    text_put(&t, "\n");
    for (int c = 0; c < PERF_COLLECTIVES; c++) {
        const perf_curve *cv = &k->curve[c];
        text_put(&t, "  %-10s alpha %8.2f us  beta %.3g s/B (%.2f Gbit/s)  %d points", coll_name[c],
                 1e6 * k->alpha[c], k->beta[c], k->beta[c] > 0 ? 8e-9 / k->beta[c] : INFINITY,
                 cv->count);
        if (cv->count) {
            /* The worst misfit of the line: where the measured curve rules. */
            double worst = 0;
            for (int i = 0; i < cv->count; i++) {
                perf_link line = *k;
                line.curve[c].count = 0;
                const double f = perf_coll_time(&line, (pcnn_collective)c, k->ranks,
                                                cv->bytes[i], 0, -1);
                worst = fmax(worst, fabs(f - cv->seconds[i]) / cv->seconds[i]);
            }
            text_put(&t, ", %.0f B..%.0f B, line misfit up to %.0f %%", cv->bytes[0],
                     cv->bytes[cv->count - 1], 100 * worst);
        }
        text_put(&t, "\n");
    }
    const perf_compute *c = &m->compute;
    if (!c->num_layers) {
        text_put(&t, "compute: not calibrated\n");
    } else {
        text_put(&t, "compute: %d layers, %d threads, batches %d and %d, repetition spread %.1f %%, "
                     "slowest rank's pace %.3f\n",
                 c->num_layers, c->threads, c->batch_lo, c->batch_hi, 100 * c->spread,
                 perf_pace(m));
        text_put(&t, "  update %.3g s per call (%.3g s with a thread team) + %.3g s/param on "
                     "average; sum of received pieces %.3g s/B; input copy + loss %.3g s + "
                     "%.3g s/sample\n",
                 c->update[0], c->update_team, c->update[1], c->sum_gamma, c->overhead[0],
                 c->overhead[1]);
        text_put(&t, "  %5s %-16s %11s %11s %11s %11s %11s %11s   (ms at batch %d)\n", "layer",
                 "kind", "fwd", "bwd_w", "bwd_x", "reg fwd", "reg bwd", "update", c->batch_hi);
        for (int l = 1; l < c->num_layers; l++) {
            const perf_layer *p = &c->layers[l];
            const double n = c->batch_hi;
            text_put(&t, "  %5d %-16s %11.4f %11.4f %11.4f %11.4f %11.4f %11.4f\n", l, p->kind,
                     1e3 * perf_line(p->fwd, n), 1e3 * perf_line(p->bwd_w, n),
                     1e3 * perf_line(p->bwd_x, n), 1e3 * p->reg_fwd, 1e3 * p->reg_bwd,
                     1e3 * p->update);
        }
    }
    char reg[4096];
    perf_regressors_describe(m, reg, sizeof reg);
    text_put(&t, "%s", reg);
    perf_confidence_explain(m, perf_confidence_flags(m, 0), &t);
    const perf_knobs *o = &m->knobs;
    text_put(&t, "knobs: alpha %g, beta %g, link %g Gbit/s, strategy %d, engine %d, "
                 "nonblocking progress %g, compute source %d\n",
             o->alpha, o->beta, o->link_gbits, o->strategy, o->engine, o->nb_progress, o->source);
    return t.len;
}

static const pcnn_time stage_time[3] = {PCNN_TIME_FORWARD, PCNN_TIME_BACKWARD, PCNN_TIME_UPDATE};

pcnn_status perf_validate(const pcnn_perfmodel *m, const pcnn_net *net, double *step_re,
                          double *wre, char *buf, size_t size, size_t *needed,
                          const char *func)
{
    TRY(net_check_ready(net, func));
    const layer_list *ll = net_layer_list(net);
    if (!m->last)
        return error_set(PCNN_ERR_INVALID_STATE, func, "no prediction yet: call pcnn_perfmodel_predict");
    if (m->last_layers != ll->count || m->last_fingerprint != perf_fingerprint(ll))
        return error_set(PCNN_ERR_MISMATCH, func, "the last prediction was for another network");
    const pcnn_comm *comm = net_comm(net);
    const int ranks = comm ? comm->size : 1;
    if (m->last_ranks != ranks)
        return error_set(PCNN_ERR_MISMATCH, func,
                         "the last prediction was for %d ranks; the network runs on %d: predict "
                         "it on %d to compare with its measurement", m->last_ranks, ranks, ranks);
    double step = 0;
    TRY(pcnn_net_time(net, -1, PCNN_TIME_STEP, &step));
    if (!(step > 0))
        return error_set(PCNN_ERR_INVALID_STATE, func,
                         "the network has no measured training step (train, then validate)");
    const int L = ll->count;
    /* A spatial network's halo exchanges and shuffles have columns too. */
    net_layer_split split;
    const bool spatial = net_layer_split_of(net, 0, &split);
    const int columns = spatial ? 8 : 5;
    static const pcnn_time shown[8] = {PCNN_TIME_FORWARD, PCNN_TIME_BACKWARD, PCNN_TIME_UPDATE,
                                       PCNN_TIME_COMM, PCNN_TIME_EXPOSED, PCNN_TIME_HALO,
                                       PCNN_TIME_HALO_EXPOSED, PCNN_TIME_SHUFFLE};
    /* The calling thread's time: computation and waiting. */
    static const pcnn_time on_thread[6] = {PCNN_TIME_FORWARD, PCNN_TIME_BACKWARD,
                                           PCNN_TIME_UPDATE, PCNN_TIME_EXPOSED,
                                           PCNN_TIME_HALO_EXPOSED, PCNN_TIME_SHUFFLE};
    double err[3] = {0}, sum[3] = {0}, covered[2] = {0}; /* predicted, measured */
    double halo[2] = {0}, shuffle[2] = {0};
    text t = text_start(buf, size);
    text_put(&t, "%5s %-16s %17s %17s %17s %17s %17s", "layer", "kind", "forward", "backward",
             "update", "comm", "exposed");
    if (spatial) text_put(&t, " %17s %17s %17s", "halo", "halo exposed", "shuffle");
    text_put(&t, "   ms/step predicted|measured\n");
    for (int l = 1; l < L; l++) {
        double meas[PCNN_TIME_SHUFFLE + 1] = {0};
        for (int w = 0; w < columns; w++)
            TRY(pcnn_net_time(net, l, shown[w], &meas[shown[w]]));
        for (int w = 0; w < 6; w++) {
            covered[0] += m->last[l][on_thread[w]];
            covered[1] += meas[on_thread[w]];
        }
        halo[0] += m->last[l][PCNN_TIME_HALO_EXPOSED];
        halo[1] += meas[PCNN_TIME_HALO_EXPOSED];
        shuffle[0] += m->last[l][PCNN_TIME_SHUFFLE];
        shuffle[1] += meas[PCNN_TIME_SHUFFLE];
        for (int s = 0; s < 3; s++) {
            if (s == 2 && ll->items[l]->num_params == 0) continue;
            err[s] += fabs(m->last[l][stage_time[s]] - meas[stage_time[s]]);
            sum[s] += meas[stage_time[s]];
        }
        text_put(&t, "%5d %-16s", l, ll->items[l]->ops->kind);
        for (int w = 0; w < columns; w++)
            text_put(&t, " %8.3f|%-8.3f", 1e3 * m->last[l][shown[w]], 1e3 * meas[shown[w]]);
        text_put(&t, "\n");
    }
    const double re = (m->last_step - step) / step;
    double w3[3];
    for (int s = 0; s < 3; s++) w3[s] = sum[s] > 0 ? err[s] / sum[s] : 0;
    text_put(&t, "step: predicted %.3f ms, measured %.3f ms, RE %+.1f %%\n", 1e3 * m->last_step,
             1e3 * step, 100 * re);
    /* What no layer's columns hold: input copy, loss, agreements, launching. */
    text_put(&t, "other (input, loss, agreement): predicted %.3f ms, measured %.3f ms\n",
             1e3 * (m->last_step - covered[0]), 1e3 * (step - covered[1]));
    if (spatial)
        text_put(&t, "exposed halo: predicted %.3f ms, measured %.3f ms; shuffles: predicted "
                     "%.3f ms, measured %.3f ms\n", 1e3 * halo[0], 1e3 * halo[1],
                 1e3 * shuffle[0], 1e3 * shuffle[1]);
    text_put(&t, "WRE^T: forward %.1f %%, backward %.1f %%, update %.1f %%\n", 100 * w3[0],
             100 * w3[1], 100 * w3[2]);
    if (step_re) *step_re = re;
    if (wre)
        for (int s = 0; s < 3; s++) wre[s] = w3[s];
    if (needed) *needed = t.len;
    return PCNN_OK;
}
