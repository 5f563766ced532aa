/* Upsampling by integer factors, as torch.nn.Upsample(scale_factor=f):
 * nearest (each input value repeated f times along each axis) or linear
 * (bilinear in 2D, trilinear in 3D, align_corners=False: output index o
 * reads the input at (o + 0.5) / f - 0.5, clamped at 0, between its two
 * neighbours, the last one repeated at the far edge).  2D layers have
 * factor 1 along depth, which makes both modes the 2D ones exactly.
 *
 * Planes (c, n) of the CNHW layout are independent: forward and backward
 * run one plane per iteration over the threads, so backward's scatter of
 * the linear weights into dx never races. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../kernels/kernels.h"
#include "layer.h"
#include "layers.h"

typedef struct upsample_priv {
    int f[3]; /* factor along D, H, W (D: 1 in 2D) */
    int mode; /* PCNN_UPSAMPLE_NEAREST or PCNN_UPSAMPLE_LINEAR */
} upsample_priv;

/* The two input indices and their weights that output index o reads
 * along an axis of `len` inputs upsampled by f (linear mode). */
typedef struct tap2 {
    int i0, i1;
    float w0, w1;
} tap2;

static tap2 linear_tap(int o, int f, int len)
{
    float src = ((float)o + 0.5f) / (float)f - 0.5f;
    if (src < 0.0f) src = 0.0f;
    tap2 t;
    t.i0 = (int)src;
    if (t.i0 > len - 1) t.i0 = len - 1;
    t.i1 = t.i0 + (t.i0 < len - 1);
    t.w1 = src - (float)t.i0;
    t.w0 = 1.0f - t.w1;
    return t;
}

typedef struct up_args {
    const upsample_priv *p;
    shape in, out;
    const float *src; /* forward: x; backward: dy */
    float *dst;       /* forward: y; backward: dx */
    bool acc;         /* backward: add into dx */
} up_args;

static void nearest_fwd(const up_args *a, const float *x, float *y)
{
    const int *f = a->p->f;
    const shape o = a->out, i = a->in;
    for (int od = 0; od < o.d; od++)
        for (int oh = 0; oh < o.h; oh++) {
            const float *xr = x + ((size_t)(od / f[0]) * i.h + (size_t)(oh / f[1])) * i.w;
            float *yr = y + ((size_t)od * o.h + oh) * o.w;
            for (int ow = 0; ow < o.w; ow++) yr[ow] = xr[ow / f[2]];
        }
}

static void nearest_bwd(const up_args *a, const float *dy, float *dx)
{
    const int *f = a->p->f;
    const shape o = a->out, i = a->in;
    if (!a->acc) memset(dx, 0, shape_spatial(i) * sizeof *dx);
    for (int od = 0; od < o.d; od++)
        for (int oh = 0; oh < o.h; oh++) {
            float *xr = dx + ((size_t)(od / f[0]) * i.h + (size_t)(oh / f[1])) * i.w;
            const float *yr = dy + ((size_t)od * o.h + oh) * o.w;
            for (int ow = 0; ow < o.w; ow++) xr[ow / f[2]] += yr[ow];
        }
}

static void linear_fwd(const up_args *a, const float *x, float *y)
{
    const int *f = a->p->f;
    const shape o = a->out, i = a->in;
    const size_t plane = (size_t)i.h * i.w;
    for (int od = 0; od < o.d; od++) {
        const tap2 td = linear_tap(od, f[0], i.d);
        for (int oh = 0; oh < o.h; oh++) {
            const tap2 th = linear_tap(oh, f[1], i.h);
            const float *r00 = x + td.i0 * plane + (size_t)th.i0 * i.w;
            const float *r01 = x + td.i0 * plane + (size_t)th.i1 * i.w;
            const float *r10 = x + td.i1 * plane + (size_t)th.i0 * i.w;
            const float *r11 = x + td.i1 * plane + (size_t)th.i1 * i.w;
            const float w00 = td.w0 * th.w0, w01 = td.w0 * th.w1, w10 = td.w1 * th.w0,
                        w11 = td.w1 * th.w1;
            float *yr = y + ((size_t)od * o.h + oh) * o.w;
            for (int ow = 0; ow < o.w; ow++) {
                const tap2 tw = linear_tap(ow, f[2], i.w);
                const float lo = w00 * r00[tw.i0] + w01 * r01[tw.i0] + w10 * r10[tw.i0] +
                                 w11 * r11[tw.i0];
                const float hi = w00 * r00[tw.i1] + w01 * r01[tw.i1] + w10 * r10[tw.i1] +
                                 w11 * r11[tw.i1];
                yr[ow] = tw.w0 * lo + tw.w1 * hi;
            }
        }
    }
}

static void linear_bwd(const up_args *a, const float *dy, float *dx)
{
    const int *f = a->p->f;
    const shape o = a->out, i = a->in;
    const size_t plane = (size_t)i.h * i.w;
    if (!a->acc) memset(dx, 0, shape_spatial(i) * sizeof *dx);
    for (int od = 0; od < o.d; od++) {
        const tap2 td = linear_tap(od, f[0], i.d);
        for (int oh = 0; oh < o.h; oh++) {
            const tap2 th = linear_tap(oh, f[1], i.h);
            float *r00 = dx + td.i0 * plane + (size_t)th.i0 * i.w;
            float *r01 = dx + td.i0 * plane + (size_t)th.i1 * i.w;
            float *r10 = dx + td.i1 * plane + (size_t)th.i0 * i.w;
            float *r11 = dx + td.i1 * plane + (size_t)th.i1 * i.w;
            const float w00 = td.w0 * th.w0, w01 = td.w0 * th.w1, w10 = td.w1 * th.w0,
                        w11 = td.w1 * th.w1;
            const float *yr = dy + ((size_t)od * o.h + oh) * o.w;
            for (int ow = 0; ow < o.w; ow++) {
                const tap2 tw = linear_tap(ow, f[2], i.w);
                const float g0 = tw.w0 * yr[ow], g1 = tw.w1 * yr[ow];
                r00[tw.i0] += w00 * g0, r00[tw.i1] += w00 * g1;
                r01[tw.i0] += w01 * g0, r01[tw.i1] += w01 * g1;
                r10[tw.i0] += w10 * g0, r10[tw.i1] += w10 * g1;
                r11[tw.i0] += w11 * g0, r11[tw.i1] += w11 * g1;
            }
        }
    }
}

static void fwd_planes(void *arg, size_t lo, size_t hi)
{
    const up_args *a = arg;
    const size_t si = shape_spatial(a->in), so = shape_spatial(a->out);
    for (size_t q = lo; q < hi; q++) {
        if (a->p->mode == PCNN_UPSAMPLE_LINEAR) linear_fwd(a, a->src + q * si, a->dst + q * so);
        else nearest_fwd(a, a->src + q * si, a->dst + q * so);
    }
}

static void bwd_planes(void *arg, size_t lo, size_t hi)
{
    const up_args *a = arg;
    const size_t si = shape_spatial(a->in), so = shape_spatial(a->out);
    for (size_t q = lo; q < hi; q++) {
        if (a->p->mode == PCNN_UPSAMPLE_LINEAR) linear_bwd(a, a->src + q * so, a->dst + q * si);
        else nearest_bwd(a, a->src + q * so, a->dst + q * si);
    }
}

static void upsample_forward(pcnn_layer *l, const run_ctx *ctx)
{
    up_args a = {l->priv, l->inputs[0]->out, l->out, l->inputs[0]->y, l->y, false};
    const size_t planes = (size_t)l->out.c * (size_t)ctx->n;
    parallel_for(planes, 1, planes * shape_spatial(l->out) * 4, ctx->threads, fwd_planes, &a);
}

static void upsample_backward(pcnn_layer *l, const run_ctx *ctx, float *const dx[2])
{
    if (!dx[0]) return;
    up_args a = {l->priv, l->inputs[0]->out, l->out, l->dy, dx[0], l->accumulate_dx[0]};
    const size_t planes = (size_t)l->out.c * (size_t)ctx->n;
    parallel_for(planes, 1, planes * shape_spatial(l->out) * 4, ctx->threads, bwd_planes, &a);
}

static void upsample_describe(const pcnn_layer *l, char *buf, size_t size)
{
    const upsample_priv *p = l->priv;
    snprintf(buf, size, "factor=%d %s", p->f[1],
             p->mode == PCNN_UPSAMPLE_LINEAR ? "linear" : "nearest");
}

static const layer_ops upsample2d_ops = {
    .kind = "upsample2d",
    .forward = upsample_forward,
    .backward = upsample_backward,
    .describe = upsample_describe,
    /* not yet split spatially: its halo is a fraction of a point */
    .caps = {.split = LAYER_SPLIT_WHOLE, .cost = LAYER_COST_STREAM},
};

static const layer_ops upsample3d_ops = {
    .kind = "upsample3d",
    .forward = upsample_forward,
    .backward = upsample_backward,
    .describe = upsample_describe,
    /* not yet split spatially: its halo is a fraction of a point */
    .caps = {.split = LAYER_SPLIT_WHOLE, .cost = LAYER_COST_STREAM},
};

/* Both adders: volume selects the 3D kind (factor along depth too). */
static pcnn_status upsample_add(layer_list *list, pcnn_layer *in, int factor, int mode,
                                bool volume, pcnn_layer **out, const char *func)
{
    TRY(layer_check_new(list, &in, 1, out, func));
    const int idx = list->count;
    const char *me = volume ? "upsample3d" : "upsample2d";
    ADD_REQUIRE(factor >= 1, PCNN_ERR_INVALID_ARGUMENT,
                "layer %d (%s): factor %d must be >= 1", idx, me, factor);
    ADD_REQUIRE(mode == PCNN_UPSAMPLE_NEAREST || mode == PCNN_UPSAMPLE_LINEAR,
                PCNN_ERR_INVALID_ARGUMENT,
                "layer %d (%s): mode %d is neither PCNN_UPSAMPLE_NEAREST (0) nor "
                "PCNN_UPSAMPLE_LINEAR (1)", idx, me, mode);
    const shape s = in->out;
    ADD_REQUIRE(volume || s.d == 1, PCNN_ERR_SHAPE,
                "layer %d (%s): the input is a volume (depth %d): use pcnn_upsample3d", idx,
                me, s.d);
    const int fd = volume ? factor : 1;
    const long long od = (long long)s.d * fd, oh = (long long)s.h * factor,
                    ow = (long long)s.w * factor;
    ADD_REQUIRE(od <= INT_MAX && oh <= INT_MAX && ow <= INT_MAX && od * oh <= INT_MAX / ow,
                PCNN_ERR_SHAPE, "layer %d (%s): output %lldx%lldx%lld overflows", idx, me, od,
                oh, ow);
    upsample_priv *p = mem_calloc(1, sizeof *p);
    ADD_REQUIRE(p != NULL, PCNN_ERR_OUT_OF_MEMORY, "layer %d (%s): out of memory", idx, me);
    *p = (upsample_priv){{fd, factor, factor}, mode};
    const shape o = {s.c, (int)od, (int)oh, (int)ow};
    pcnn_layer *l = NULL;
    pcnn_status st =
        layer_append(list, volume ? &upsample3d_ops : &upsample2d_ops, &in, 1, o, 0, p, &l);
    if (st != PCNN_OK) {
        mem_free(p);
        return st;
    }
    *out = l;
    return PCNN_OK;
}

pcnn_status upsample2d_add(layer_list *list, pcnn_layer *in, int factor, int mode,
                           pcnn_layer **out, const char *func)
{
    return upsample_add(list, in, factor, mode, false, out, func);
}

pcnn_status upsample3d_add(layer_list *list, pcnn_layer *in, int factor, int mode,
                           pcnn_layer **out, const char *func)
{
    return upsample_add(list, in, factor, mode, true, out, func);
}
