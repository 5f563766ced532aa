/* A layer's decisions (layer.h's layer_decision) as the one line the
 * summary and the log show: the kind's kernels (or the box dense note),
 * its gradient exchange and who chose it, its halo in place, its halo
 * overlap trials, and first the precision of its products where bf16 is
 * in play ("bf16 (amx)", "fp32"); each room records its fields, only this file writes
 * the text. */
#include <stdio.h>
#include <string.h>

#include "../core/text.h"
#include "../kernels/gemm_bf16.h"
#include "../parallel/exchange.h"
#include "net.h"

void net_note_exchange(pcnn_layer *l, const char *how, const char *why)
{
    layer_decision *d = &l->decision;
    d->exchanged = true; /* a later decision replaces an earlier one */
    d->exchange = (int)l->exchange;
    d->by_columns = l->exchange_by_columns && l->exchange == PCNN_EXCHANGE_ALLTOALL_ALLGATHER;
    snprintf(d->exchange_by, sizeof d->exchange_by, "%s", how);
    snprintf(d->exchange_why, sizeof d->exchange_why, "%s", why);
}

size_t net_decision_text(const pcnn_layer *l, char *buf, size_t size)
{
    const layer_decision *d = &l->decision;
    text t = text_start(buf, size);
    const char *sep = "";
    if (d->precision >= 0) {
        if (d->precision > 0)
            text_put(&t, "bf16 (%s)", gemm_bf16_path_name((gemm_bf16_path)d->bf16_path));
        else
            text_put(&t, "fp32");
        sep = "; ";
    }
    if (d->box_dense) {
        text_put(&t, "%son each rank's box of its input (columns of W; no shuffle)", sep);
        sep = "; ";
    } else if (d->kernel[0]) {
        text_put(&t, "%s%s", sep, d->kernel);
        sep = "; ";
    }
    if (d->exchanged) {
        text_put(&t, "%sexchange %s%s%s%s%s", sep,
                 exchange_kind_name((pcnn_exchange)d->exchange, d->by_columns),
                 d->by_columns ? " (each updates its own)" : "", d->exchange_by,
                 d->exchange_why[0] ? ": " : "", d->exchange_why);
        sep = "; ";
    }
    if (d->halo_in_place) {
        text_put(&t, "%shalo in place", sep);
        sep = "; ";
    }
    if (d->halo_overlap)
        text_put(&t, "%shalo overlap %s (%.3g vs %.3g ms)", sep,
                 d->halo_overlap > 0 ? "on" : "off", d->overlap_ms[0], d->overlap_ms[1]);
    return t.len;
}
