/* The plan as text (pcnn_net_plan_report): per layer its candidates and
 * their modelled costs, the chosen one, the shuffles, the predicted step. */
#include <math.h>

#include "../core/text.h"
#include "../parallel/exchange.h"
#include "plan.h"

static const char *role_name(plan_role r)
{
    return r == PLAN_FREE ? "chooses" : r == PLAN_INHERIT ? "inherits" : "sample-parallel";
}

/* PCNN_EXCHANGE_AUTO's choices: per layer every kind's cost, the chosen
 * one marked. */
static void describe_exchanges(text *t, const plan_record *r, const layer_list *layers)
{
    if (!r->exchange_count) return;
    text_put(t, "gradient exchange chosen by the model for global batch %d on %d ranks "
             "(ms per step: collectives and update):\n", r->exchange_batch, r->ranks);
    for (int c = 0; c < r->exchange_count; c++) {
        const plan_exchange_choice *e = &r->exchanges[c];
        char name[64];
        text_put(t, "%s:", e->layer < layers->count
                               ? layer_name(layers->items[e->layer], name, sizeof name)
                               : "?");
        for (int k = 0; k < 3; k++)
            if (isfinite(e->cost[k]))
                text_put(t, "  %s %s %.4f", (int)e->chosen == k ? "*" : " ",
                         exchange_kind_name((pcnn_exchange)k, false), 1e3 * e->cost[k]);
        text_put(t, "\n");
    }
}

size_t plan_describe(const plan_record *r, const layer_list *layers, char *buf, size_t size)
{
    text t = text_start(buf, size);
    if (!r->per) {
        describe_exchanges(&t, r, layers);
        return t.len;
    }
    if (r->replan)
        text_put(&t, "re-plan for a scheduler's batch (its gradient exchanges applied; the "
                 "network keeps the distribution it was finalized with); today's rule, sample "
                 "parallelism on "
                 "%d ranks with the others idle: %.3f ms\n",
                 r->batch < r->ranks ? r->batch : r->ranks, 1e3 * r->idle);
    text_put(&t, "plan: %d ranks, global batch %d, %s, input in %d sample group%s\n", r->ranks,
             r->batch, r->mixed ? "per-layer distributions" : "one distribution",
             r->groups, r->groups == 1 ? "" : "s");
    text_put(&t, "predicted step %.3f ms (pure sample parallelism %.3f ms), %s search over "
             "%d variant%s\n", 1e3 * r->predicted, 1e3 * r->sample_only,
             r->method == 0 ? "exact" : "longest-path", r->variants,
             r->variants == 1 ? "" : "s");
    text_put(&t, "costs in ms per step: compute + exposed halo + gradient exchange = total\n");
    for (int i = 0; i < r->layers && i < layers->count; i++) {
        const plan_layer_record *p = &r->per[i];
        char name[64];
        const pcnn_layer *l = layers->items[i];
        text_put(&t, "%s (%s):\n", layer_name(l, name, sizeof name),
                 role_name(p->role));
        for (int c = 0; c < p->count; c++) {
            const plan_candidate *k = &p->candidates[c];
            text_put(&t, "  %s {%d, %d, %d, %d}  %.4f + %.4f + %.4f = %.4f  (%.1f MiB)\n",
                     c == p->chosen ? "*" : " ", k->parts[0], k->parts[1], k->parts[2],
                     k->parts[3], 1e3 * k->compute, 1e3 * k->halo, 1e3 * k->gradient,
                     1e3 * plan_candidate_cost(k), k->bytes / 1048576.0);
        }
        if (p->shuffle_in > 0)
            text_put(&t, "  shuffle into it: %.4f ms (forward and backward)\n",
                     1e3 * p->shuffle_in);
    }
    for (int v = 0; v < r->uniform_count; v++) {
        const int *q = r->uniform_parts[v];
        if (isfinite(r->uniform_total[v]))
            text_put(&t, "uniform {%d, %d, %d, %d}: %.4f ms\n", q[0], q[1], q[2], q[3],
                     1e3 * r->uniform_total[v]);
        else
            text_put(&t, "uniform {%d, %d, %d, %d}: does not fit\n", q[0], q[1], q[2], q[3]);
    }
    text_put(&t, "chosen path:");
    for (int i = 0; i < r->layers; i++) {
        const int *q = r->per[i].candidates[r->per[i].chosen].parts;
        text_put(&t, " %d:{%d,%d,%d,%d}", i, q[0], q[1], q[2], q[3]);
    }
    text_put(&t, "\n");
    describe_exchanges(&t, r, layers);
    return t.len;
}
