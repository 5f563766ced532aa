/* Pixel shuffle (sub-pixel upsampling), as torch.nn.PixelShuffle(r):
 *     out[c][h*r + i][w*r + j] = in[c*r*r + i*r + j][h][w].
 * A pure permutation, so forward and backward each write every element
 * exactly once; one output row (c, n, oh) is the unit of parallel work. */
#include <limits.h>
#include <stdio.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../kernels/kernels.h"
#include "layer.h"
#include "layers.h"

typedef struct shuffle_priv {
    int r;
} shuffle_priv;

typedef struct shuffle_args {
    const float *src;
    float *dst;
    int r, n, h, w;
    bool acc;
} shuffle_args;

/* For output row u = (c, s, oh) of width W*r: the r input rows it
 * interleaves start at in[((c*r*r + i*r + j)*N + s)*H*W + h*W], j = 0..r-1. */
VECTOR_CLONES static void forward_rows(void *arg, size_t u0, size_t u1)
{
    const shuffle_args *a = arg;
    const int r = a->r, n = a->n, h = a->h, w = a->w, ow = w * r, rows = h * r;
    const size_t in_plane = (size_t)h * w, in_ch = (size_t)n * in_plane;
    for (size_t u = u0; u < u1; u++) {
        const int oh = (int)(u % (size_t)rows), s = (int)(u / (size_t)rows % (size_t)n);
        const size_t ci = u / ((size_t)rows * n);
        const int ih = oh / r, i = oh % r;
        float *yr = a->dst + u * (size_t)ow;
        const float *xr = a->src + (ci * r * r + (size_t)i * r) * in_ch + (size_t)s * in_plane +
                          (size_t)ih * w;
        if (r == 2) { /* the common x2: one interleave the compiler vectorises */
            const float *restrict x0 = xr, *restrict x1 = xr + in_ch;
            float *restrict y = yr;
            for (int iw = 0; iw < w; iw++) {
                y[2 * iw] = x0[iw];
                y[2 * iw + 1] = x1[iw];
            }
            continue;
        }
        for (int j = 0; j < r; j++, xr += in_ch)
            for (int iw = 0; iw < w; iw++) yr[(size_t)iw * r + j] = xr[iw];
    }
}

VECTOR_CLONES static void backward_rows(void *arg, size_t u0, size_t u1)
{
    const shuffle_args *a = arg;
    const int r = a->r, n = a->n, h = a->h, w = a->w, ow = w * r, rows = h * r;
    const size_t in_plane = (size_t)h * w, in_ch = (size_t)n * in_plane;
    for (size_t u = u0; u < u1; u++) {
        const int oh = (int)(u % (size_t)rows), s = (int)(u / (size_t)rows % (size_t)n);
        const size_t ci = u / ((size_t)rows * n);
        const int ih = oh / r, i = oh % r;
        const float *gr = a->src + u * (size_t)ow;
        float *dr = a->dst + (ci * r * r + (size_t)i * r) * in_ch + (size_t)s * in_plane +
                    (size_t)ih * w;
        if (r == 2 && !a->acc) { /* the common x2: one de-interleave */
            float *restrict d0 = dr, *restrict d1 = dr + in_ch;
            const float *restrict g = gr;
            for (int iw = 0; iw < w; iw++) {
                d0[iw] = g[2 * iw];
                d1[iw] = g[2 * iw + 1];
            }
            continue;
        }
        for (int j = 0; j < r; j++, dr += in_ch) {
            if (a->acc) {
                for (int iw = 0; iw < w; iw++) dr[iw] += gr[(size_t)iw * r + j];
            } else {
                for (int iw = 0; iw < w; iw++) dr[iw] = gr[(size_t)iw * r + j];
            }
        }
    }
}

static void shuffle_forward(pcnn_layer *l, const run_ctx *ctx)
{
    const shuffle_priv *p = l->priv;
    const shape si = l->inputs[0]->out;
    shuffle_args a = {l->inputs[0]->y, l->y, p->r, ctx->n, si.h, si.w, false};
    const size_t rows = (size_t)l->out.c * ctx->n * si.h * p->r;
    parallel_for(rows, 1, rows * si.w * p->r, ctx->threads, forward_rows, &a);
}

static void shuffle_backward(pcnn_layer *l, const run_ctx *ctx, float *const dx[2])
{
    if (dx[0] == NULL) return;
    const shuffle_priv *p = l->priv;
    const shape si = l->inputs[0]->out;
    shuffle_args a = {l->dy, dx[0], p->r, ctx->n, si.h, si.w, l->accumulate_dx[0]};
    const size_t rows = (size_t)l->out.c * ctx->n * si.h * p->r;
    parallel_for(rows, 1, rows * si.w * p->r, ctx->threads, backward_rows, &a);
}

static void shuffle_describe(const pcnn_layer *l, char *buf, size_t size)
{
    const shuffle_priv *p = l->priv;
    snprintf(buf, size, "r=%d", p->r);
}

static const layer_ops shuffle_ops = {
    .kind = "pixel_shuffle",
    .forward = shuffle_forward,
    .backward = shuffle_backward,
    .describe = shuffle_describe,
    .caps = {.split = LAYER_SPLIT_WHOLE, .cost = LAYER_COST_STREAM},
};

pcnn_status pixel_shuffle_add(layer_list *list, pcnn_layer *in, int upscale, pcnn_layer **out,
                              const char *func)
{
    TRY(layer_check_new(list, &in, 1, out, func));
    const int idx = list->count;
    ADD_REQUIRE(upscale >= 1, PCNN_ERR_INVALID_ARGUMENT,
                "layer %d (pixel_shuffle): upscale %d must be >= 1", idx, upscale);
    const shape s = in->out;
    ADD_REQUIRE(s.d == 1, PCNN_ERR_UNSUPPORTED,
                "layer %d (pixel_shuffle): 2D only, but the input is 3D (depth %d)", idx, s.d);
    const long long rr = (long long)upscale * upscale;
    ADD_REQUIRE(s.c % rr == 0, PCNN_ERR_SHAPE,
                "layer %d (pixel_shuffle): %d channels do not divide by upscale^2 = %lld", idx, s.c,
                rr);
    const long long oh = (long long)s.h * upscale, ow = (long long)s.w * upscale;
    ADD_REQUIRE(oh <= INT_MAX && ow <= INT_MAX && oh * ow <= INT_MAX, PCNN_ERR_SHAPE,
                "layer %d (pixel_shuffle): output %lldx%lld too large", idx, oh, ow);

    shuffle_priv *p = mem_calloc(1, sizeof *p);
    ADD_REQUIRE(p != NULL, PCNN_ERR_OUT_OF_MEMORY, "layer %d (pixel_shuffle): out of memory", idx);
    p->r = upscale;
    pcnn_layer *l = NULL;
    pcnn_status st = layer_append(list, &shuffle_ops, &in, 1,
                                  shape_2d((int)(s.c / rr), (int)oh, (int)ow), 0, p, &l);
    if (st != PCNN_OK) {
        mem_free(p);
        return st;
    }
    *out = l;
    return PCNN_OK;
}
