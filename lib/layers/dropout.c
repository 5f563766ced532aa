/* Inverted dropout.  Whether element (sample, feature) is kept is a pure
 * function of (seed, step, layer index, global sample index, feature
 * index), so masks do not depend on the thread count, on how the global
 * batch is split over ranks, or on the layout.  The mask is kept (one byte
 * per element) for backward. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../core/rng.h"
#include "../graph/net.h"
#include "../kernels/kernels.h"
#include "layer.h"

#define DROPOUT_PURPOSE 0xD809u /* rng key word separating dropout from other streams */
#define GOLDEN 0x9E3779B97F4A7C15ull
#define PAR_MIN 16384

typedef struct dropout_priv {
    float p, scale;    /* drop probability, 1/(1-p) */
    uint64_t *keys;    /* per-sample stream keys of the current batch */
    uint8_t *mask;     /* 1 = kept, CNHW, max_batch samples */
} dropout_priv;

/* The f-th draw of the stream keyed by `key` (rng_next's output function,
 * inlined: this runs once per element). */
static inline uint64_t draw(uint64_t key, uint64_t f)
{
    uint64_t x = key + (f + 1) * GOLDEN;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static pcnn_status dropout_setup(pcnn_layer *l, const plan_ctx *p)
{
    dropout_priv *d = l->priv;
    size_t n = (size_t)p->max_batch, count = n * shape_size(l->out);
    size_t bytes = n * sizeof(uint64_t) + count;
    /* One block: the keys first (aligned), then the mask bytes. */
    d->keys = mem_alloc(bytes);
    if (!d->keys) {
        char name[64];
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "%s: %zu bytes of mask",
                    layer_name(l, name, sizeof name), bytes);
    }
    d->mask = (uint8_t *)(d->keys + n);
    l->buffer_bytes += bytes;
    return PCNN_OK;
}

static void dropout_forward(pcnn_layer *l, const run_ctx *ctx)
{
    dropout_priv *d = l->priv;
    size_t n = (size_t)ctx->n, s = shape_spatial(l->out), c = (size_t)l->out.c;
    size_t total = c * n * s;
    const float *x = l->inputs[0]->y;
    float *y = l->y;
    if (!ctx->train || d->p == 0.0f) {
        copy_or_add(x, y, total, false, ctx->threads);
        return;
    }
    uint64_t base = rng_hash(ctx->seed, DROPOUT_PURPOSE, ctx->step, (uint64_t)l->index);
    for (size_t i = 0; i < n; i++)
        d->keys[i] = rng_hash(base, (uint64_t)(ctx->sample_base + (long)i), 0, 0);
    /* Drop when the top 32 bits, as a fraction of 2^32, fall below p. */
    uint64_t threshold = (uint64_t)ceil((double)d->p * 4294967296.0);
    const uint64_t *keys = d->keys;
    uint8_t *mask = d->mask;
    float scale = d->scale;
    long rows = (long)(c * n);
#pragma omp parallel for num_threads(ctx->threads) if (total >= PAR_MIN) schedule(static)
    for (long r = 0; r < rows; r++) {
        size_t ch = (size_t)r / n, i = (size_t)r % n, off = (size_t)r * s;
        uint64_t key = keys[i];
        for (size_t j = 0; j < s; j++) {
            uint8_t keep = (draw(key, ch * s + j) >> 32) >= threshold;
            mask[off + j] = keep;
            y[off + j] = keep ? x[off + j] * scale : 0.0f;
        }
    }
}

static void dropout_backward(pcnn_layer *l, const run_ctx *ctx, float *const dx[2])
{
    if (!dx[0]) return;
    dropout_priv *d = l->priv;
    size_t total = shape_size(l->out) * (size_t)ctx->n;
    const float *dy = l->dy;
    float *g = dx[0];
    if (d->p == 0.0f) {
        copy_or_add(dy, g, total, l->accumulate_dx[0], ctx->threads);
        return;
    }
    const uint8_t *mask = d->mask;
    float scale = d->scale;
    /* Multiplying by the 0/1 mask (as PyTorch does) vectorises; a select
     * would not. */
    if (l->accumulate_dx[0]) {
#pragma omp parallel for num_threads(ctx->threads) if (total >= PAR_MIN) schedule(static)
        for (size_t i = 0; i < total; i++) g[i] += dy[i] * (float)mask[i] * scale;
    } else {
#pragma omp parallel for num_threads(ctx->threads) if (total >= PAR_MIN) schedule(static)
        for (size_t i = 0; i < total; i++) g[i] = dy[i] * (float)mask[i] * scale;
    }
}

static void dropout_destroy(pcnn_layer *l)
{
    dropout_priv *d = l->priv;
    if (d) mem_free(d->keys);
    mem_free(d);
    l->priv = NULL;
}

static void dropout_describe(const pcnn_layer *l, char *buf, size_t size)
{
    const dropout_priv *d = l->priv;
    snprintf(buf, size, "p=%.9g", (double)d->p);
}

static const layer_ops dropout_ops = {
    .kind = "dropout",
    .setup = dropout_setup,
    .forward = dropout_forward,
    .backward = dropout_backward,
    .destroy = dropout_destroy,
    .describe = dropout_describe,
};

PCNN_API pcnn_status pcnn_dropout(pcnn_net *net, pcnn_layer *in, float p, pcnn_layer **out)
{
    TRY(layer_check_new(net, &in, 1, out, __func__));
    REQUIRE(p >= 0.0f && p < 1.0f, PCNN_ERR_INVALID_ARGUMENT,
            "layer %d (dropout): p %g must be in [0, 1)", net->num_layers, (double)p);
    dropout_priv *d = mem_calloc(1, sizeof *d);
    if (!d) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "layer %d (dropout): no memory",
                        net->num_layers);
    d->p = p;
    d->scale = 1.0f / (1.0f - p);
    pcnn_layer *l;
    pcnn_status st = layer_append(net, &dropout_ops, &in, 1, in->out, 0, d, &l);
    if (st != PCNN_OK) {
        mem_free(d);
        return st;
    }
    *out = l;
    return PCNN_OK;
}
