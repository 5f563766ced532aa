/* A printable model summary, written into the caller's buffer. */
#include <stdio.h>

#include "../core/error.h"
#include "../core/text.h"
#include "../kernels/gemm_path.h"
#include "net.h"

PCNN_API pcnn_status pcnn_net_summary(const pcnn_net *net, char *buf, size_t size, size_t *needed)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    REQUIRE(buf || size == 0, PCNN_ERR_INVALID_ARGUMENT, "buf is NULL but size is %zu", size);
    text t = text_start(buf, size);
    /* Volumes show their depth: (C, D, H, W) where any layer has one. */
    bool volumes = false;
    for (int i = 0; i < net->layers.count; i++) volumes |= net->layers.items[i]->out.d > 1;
    text_put(&t, "%-5s %-15s %-18s %10s  %-12s %s\n", "layer", "kind",
        volumes ? "output (C,D,H,W)" : "output (C,H,W)", "params", "inputs", "config");
    size_t total = 0;
    for (int i = 0; i < net->layers.count; i++) {
        const pcnn_layer *l = net->layers.items[i];
        char shape_txt[40], inputs[24] = "-", config[96] = "";
        if (volumes)
            snprintf(shape_txt, sizeof shape_txt, "(%d, %d, %d, %d)", l->out.c, l->out.d,
                     l->out.h, l->out.w);
        else
            snprintf(shape_txt, sizeof shape_txt, "(%d, %d, %d)", l->out.c, l->out.h, l->out.w);
        for (int j = 0, at = 0; j < l->num_inputs && at < (int)sizeof inputs; j++)
            at += snprintf(inputs + at, sizeof inputs - (size_t)at, "%s%d", j ? ", " : "",
                           l->inputs[j]->index);
        if (l->ops->describe) l->ops->describe(l, config, sizeof config);
        /* What finalize decided for the layer, and why (layer.h's decide). */
        char decided[512];
        const bool chose = net->finalized && net_decision_text(l, decided, sizeof decided) > 0;
        text_put(&t, "%-5d %-15s %-18s %10zu  %-12s %s%s%s%s%s\n", i, l->ops->kind, shape_txt,
            l->num_params, inputs, config, chose ? "  [" : "", chose ? decided : "",
            chose ? "]" : "", l == net->output ? "  <- output" : "");
        total += l->num_params;
    }
    static const char *const losses[] = {"softmax cross entropy", "MSE", "L1"};
    static const char *const optimizers[] = {"SGD", "momentum SGD", "Adam"};
    text_put(&t, "parameters: %zu (%.2f MB)   loss: %s   optimizer: %s\n", total,
        (double)total * sizeof(float) / 1e6, net->has_loss ? losses[net->loss] : "not set",
        optimizers[net->optimizer]);
    if (net->finalized)
        text_put(&t, "memory: %.2f MB planned for batches of up to %d, %d threads\n",
            (double)net->memory_bytes / 1e6, net->max_batch, net->threads);
    else
        text_put(&t, "memory: not planned (finalize first)\n");
    text_put(&t, "gemm: %s\n", gemm_path_get()->why);
    if (net->finalized && net->comm && net->comm->size > 1)
        text_put(&t, "exchange: %d ranks, %d buckets, %.2f MB sent per step, overlap %s, "
                 "engine %s\n", net->comm->size, exchange_num_buckets(net->exchange),
                 (double)exchange_bytes_per_step(net->exchange) / 1e6,
                 net->opt.overlap ? "on" : "off", exchange_engine_reason(net->exchange));
    if (needed) *needed = t.len;
    return PCNN_OK;
}
