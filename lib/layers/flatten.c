/* Flatten (C, H, W) -> (C*H*W, 1, 1).
 *
 * In CNHW this moves data: the input is [c][n][hw] and the output, whose
 * channel is the PyTorch feature index f = c*HW + hw, is [f][n].  Per
 * channel that is an N x HW -> HW x N transpose, done in tiles so that both
 * sides are read and written in cache-line runs.  The dense layer uses the
 * same two functions. */
#include <limits.h>

#include "../core/error.h"
#include "../kernels/kernels.h"
#include "flatten.h"
#include "layer.h"
#include "layers.h"

#define TILE 32

typedef struct flat_args {
    const float *src;
    float *dst;
    size_t n, s, tiles;
    bool acc;
} flat_args;

/* Units u = (channel, tile of TILE samples). */
static void flatten_tiles(void *arg, size_t u0, size_t u1)
{
    const flat_args *a = arg;
    const size_t N = a->n, s = a->s;
    for (size_t u = u0; u < u1; u++) {
        size_t ch = u / a->tiles, i0 = u % a->tiles * TILE;
        size_t i1 = i0 + TILE < N ? i0 + TILE : N;
        const float *src = a->src + ch * N * s;
        float *dst = a->dst + ch * s * N;
        for (size_t s0 = 0; s0 < s; s0 += TILE) {
            size_t s1 = s0 + TILE < s ? s0 + TILE : s;
            for (size_t i = i0; i < i1; i++)
                for (size_t j = s0; j < s1; j++) dst[j * N + i] = src[i * s + j];
        }
    }
}

static void unflatten_tiles(void *arg, size_t u0, size_t u1)
{
    const flat_args *a = arg;
    const size_t N = a->n, s = a->s;
    for (size_t u = u0; u < u1; u++) {
        size_t ch = u / a->tiles, i0 = u % a->tiles * TILE;
        size_t i1 = i0 + TILE < N ? i0 + TILE : N;
        const float *src = a->src + ch * s * N;
        float *dst = a->dst + ch * N * s;
        for (size_t s0 = 0; s0 < s; s0 += TILE) {
            size_t s1 = s0 + TILE < s ? s0 + TILE : s;
            for (size_t i = i0; i < i1; i++) {
                if (a->acc)
                    for (size_t j = s0; j < s1; j++) dst[i * s + j] += src[j * N + i];
                else
                    for (size_t j = s0; j < s1; j++) dst[i * s + j] = src[j * N + i];
            }
        }
    }
}

/* xf[(ch*S + s)*N + i] = x[(ch*N + i)*S + s]. */
void flatten_cnhw(const float *x, float *xf, int c, int n, size_t s, int threads)
{
    flat_args a = {x, xf, (size_t)n, s, ((size_t)n + TILE - 1) / TILE, false};
    parallel_for((size_t)c * a.tiles, 1, (size_t)c * n * s, threads, flatten_tiles, &a);
}

/* The adjoint: x[(ch*N + i)*S + s] = (or +=) xf[(ch*S + s)*N + i]. */
void unflatten_cnhw(const float *xf, float *x, int c, int n, size_t s, bool accumulate,
                    int threads)
{
    flat_args a = {xf, x, (size_t)n, s, ((size_t)n + TILE - 1) / TILE, accumulate};
    parallel_for((size_t)c * a.tiles, 1, (size_t)c * n * s, threads, unflatten_tiles, &a);
}

static void flatten_forward(pcnn_layer *l, const run_ctx *ctx)
{
    const pcnn_layer *in = l->inputs[0];
    size_t s = shape_spatial(in->out);
    if (s == 1)
        copy_or_add(in->y, l->y, (size_t)in->out.c * (size_t)ctx->n, false, ctx->threads);
    else
        flatten_cnhw(in->y, l->y, in->out.c, ctx->n, s, ctx->threads);
}

static void flatten_backward(pcnn_layer *l, const run_ctx *ctx, float *const dx[2])
{
    if (!dx[0]) return;
    const pcnn_layer *in = l->inputs[0];
    size_t s = shape_spatial(in->out);
    if (s == 1)
        copy_or_add(l->dy, dx[0], (size_t)in->out.c * (size_t)ctx->n, l->accumulate_dx[0],
                    ctx->threads);
    else
        unflatten_cnhw(l->dy, dx[0], in->out.c, ctx->n, s, l->accumulate_dx[0], ctx->threads);
}

static pcnn_status flatten_twin(const pcnn_layer *l, layer_list *list, pcnn_layer *const *in,
                                twin_opts o, pcnn_layer **out, const char *func)
{
    (void)l, (void)o;
    return flatten_add(list, in[0], out, func);
}

static const layer_ops flatten_ops = {
    .kind = "flatten",
    .forward = flatten_forward,
    .backward = flatten_backward,
    .caps = {.split = LAYER_SPLIT_WHOLE,
             .cost = LAYER_COST_STREAM,
             .twin = flatten_twin,
             .folds_into_dense = true},
};

pcnn_status flatten_add(layer_list *list, pcnn_layer *in, pcnn_layer **out, const char *func)
{
    TRY(layer_check_new(list, &in, 1, out, func));
    size_t features = shape_size(in->out);
    ADD_REQUIRE(features <= INT_MAX, PCNN_ERR_SHAPE,
                "layer %d (flatten): %zu features exceed %d", list->count, features, INT_MAX);
    pcnn_layer *l;
    TRY(layer_append(list, &flatten_ops, &in, 1, shape_2d((int)features, 1, 1), 0, NULL, &l));
    *out = l;
    return PCNN_OK;
}
