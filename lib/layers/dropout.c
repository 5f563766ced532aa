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
#include "../kernels/kernels.h"
#include "layer.h"
#include "layers.h"

#define DROPOUT_PURPOSE 0xD809u /* rng key word separating dropout from other streams */
#define GOLDEN 0x9E3779B97F4A7C15ull

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

typedef struct drop_args {
    const float *x; /* forward: input; backward: dy */
    float *out;     /* forward: y; backward: dx */
    const uint64_t *keys;
    uint8_t *mask;
    float scale;
    uint64_t threshold;
    size_t n, s;
} drop_args;

/* Units r = (channel, sample): one plane of s elements. */
static void mask_rows(void *arg, size_t r0, size_t r1)
{
    const drop_args *a = arg;
    const size_t n = a->n, s = a->s;
    for (size_t r = r0; r < r1; r++) {
        size_t ch = r / n, i = r % n, off = r * s;
        uint64_t key = a->keys[i];
        for (size_t j = 0; j < s; j++) {
            uint8_t keep = (draw(key, ch * s + j) >> 32) >= a->threshold;
            a->mask[off + j] = keep;
            a->out[off + j] = keep ? a->x[off + j] * a->scale : 0.0f;
        }
    }
}

/* Multiplying by the 0/1 mask (as PyTorch does) vectorises; a select
 * would not. */
static void unmask(void *arg, size_t lo, size_t hi)
{
    const drop_args *a = arg;
    const float *restrict dy = a->x;
    const uint8_t *restrict mask = a->mask;
    float *restrict g = a->out;
    const float scale = a->scale;
    for (size_t i = lo; i < hi; i++) g[i] = dy[i] * (float)mask[i] * scale;
}

static void unmask_acc(void *arg, size_t lo, size_t hi)
{
    const drop_args *a = arg;
    const float *restrict dy = a->x;
    const uint8_t *restrict mask = a->mask;
    float *restrict g = a->out;
    const float scale = a->scale;
    for (size_t i = lo; i < hi; i++) g[i] += dy[i] * (float)mask[i] * scale;
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
    drop_args a = {.x = x, .out = y, .keys = d->keys, .mask = d->mask, .scale = d->scale,
                   .threshold = threshold, .n = n, .s = s};
    parallel_for(c * n, 1, total, ctx->threads, mask_rows, &a);
}

static void dropout_backward(pcnn_layer *l, const run_ctx *ctx, float *const dx[2])
{
    if (!dx[0]) return;
    dropout_priv *d = l->priv;
    size_t total = shape_size(l->out) * (size_t)ctx->n;
    if (d->p == 0.0f) {
        copy_or_add(l->dy, dx[0], total, l->accumulate_dx[0], ctx->threads);
        return;
    }
    drop_args a = {.x = l->dy, .out = dx[0], .mask = d->mask, .scale = d->scale};
    parallel_for(total, 16, total, ctx->threads, l->accumulate_dx[0] ? unmask_acc : unmask, &a);
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
    .caps = {.split = LAYER_SPLIT_POINTWISE, .cost = LAYER_COST_DROPOUT},
};

pcnn_status dropout_add(layer_list *list, pcnn_layer *in, float p, pcnn_layer **out,
                        const char *func)
{
    TRY(layer_check_new(list, &in, 1, out, func));
    ADD_REQUIRE(p >= 0.0f && p < 1.0f, PCNN_ERR_INVALID_ARGUMENT,
                "layer %d (dropout): p %g must be in [0, 1)", list->count, (double)p);
    dropout_priv *d = mem_calloc(1, sizeof *d);
    if (!d) return ADD_FAIL(PCNN_ERR_OUT_OF_MEMORY, "layer %d (dropout): no memory",
                            list->count);
    d->p = p;
    d->scale = 1.0f / (1.0f - p);
    pcnn_layer *l;
    pcnn_status st = layer_append(list, &dropout_ops, &in, 1, in->out, 0, d, &l);
    if (st != PCNN_OK) {
        mem_free(d);
        return st;
    }
    *out = l;
    return PCNN_OK;
}

/* One rank's box of a spatially split dropout: rows (channel, sample) of
 * the box's points, each keyed by its index in the whole sample. */
typedef struct box_args {
    drop_args a;
    int lo[3], ext[3], h, w; /* the box within the sample (D, H, W), the sample's H and W */
    size_t whole;            /* points of the whole sample */
} box_args;

static void mask_box_rows(void *arg, size_t r0, size_t r1)
{
    const box_args *b = arg;
    const drop_args *a = &b->a;
    const size_t n = a->n, s = a->s;
    for (size_t r = r0; r < r1; r++) {
        const size_t ch = r / n, i = r % n, off = r * s;
        const uint64_t key = a->keys[i];
        size_t j = 0;
        for (int z = 0; z < b->ext[0]; z++)
            for (int y = 0; y < b->ext[1]; y++) {
                const size_t g = ((size_t)(b->lo[0] + z) * (size_t)b->h + (size_t)(b->lo[1] + y)) *
                                     (size_t)b->w + (size_t)b->lo[2];
                for (int x = 0; x < b->ext[2]; x++, j++) {
                    uint8_t keep = (draw(key, ch * b->whole + g + (size_t)x) >> 32) >= a->threshold;
                    a->mask[off + j] = keep;
                    a->out[off + j] = keep ? a->x[off + j] * a->scale : 0.0f;
                }
            }
    }
}

void dropout_forward_box(pcnn_layer *l, const run_ctx *ctx, const int lo[3], const int ext[3])
{
    dropout_priv *d = l->priv;
    const size_t n = (size_t)ctx->n, c = (size_t)l->out.c;
    const size_t s = (size_t)ext[0] * (size_t)ext[1] * (size_t)ext[2], total = c * n * s;
    const float *x = l->inputs[0]->y;
    if (!ctx->train || d->p == 0.0f) {
        copy_or_add(x, l->y, total, false, ctx->threads);
        return;
    }
    uint64_t base = rng_hash(ctx->seed, DROPOUT_PURPOSE, ctx->step, (uint64_t)l->index);
    for (size_t i = 0; i < n; i++)
        d->keys[i] = rng_hash(base, (uint64_t)(ctx->sample_base + (long)i), 0, 0);
    box_args b = {.a = {.x = x, .out = l->y, .keys = d->keys, .mask = d->mask,
                        .scale = d->scale,
                        .threshold = (uint64_t)ceil((double)d->p * 4294967296.0), .n = n, .s = s},
                  .lo = {lo[0], lo[1], lo[2]}, .ext = {ext[0], ext[1], ext[2]},
                  .h = l->out.h, .w = l->out.w, .whole = shape_spatial(l->out)};
    parallel_for(c * n, 1, total, ctx->threads, mask_box_rows, &b);
}

void dropout_backward_box(pcnn_layer *l, const run_ctx *ctx, size_t count, float *dx)
{
    if (!dx) return;
    dropout_priv *d = l->priv;
    if (d->p == 0.0f) {
        copy_or_add(l->dy, dx, count, l->accumulate_dx[0], ctx->threads);
        return;
    }
    drop_args a = {.x = l->dy, .out = dx, .mask = d->mask, .scale = d->scale};
    parallel_for(count, 16, count, ctx->threads, l->accumulate_dx[0] ? unmask_acc : unmask, &a);
}

bool layer_is_dropout(const pcnn_layer *l) { return l->ops == &dropout_ops; }
