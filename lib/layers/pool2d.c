/* Max and average pooling, PyTorch semantics (floor mode).
 *
 * Max: padding counts as -inf, NaN propagates, the first maximum wins ties;
 * the winner's index within its input plane is kept (int32, persistent) for
 * backward.  Average: count_include_pad=True, so every window divides by
 * K*K.  Like PyTorch we require padding <= kernel/2, which also guarantees
 * that every window covers at least one input pixel.
 *
 * In CNHW each (c, n) plane is independent; one thread owns a plane in
 * backward, so overlapping windows (stride < kernel) add in a fixed order. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../kernels/kernels.h"
#include "layer.h"
#include "layers.h"

typedef struct pool_priv {
    int k, stride, pad;
    int c, h, w, ho, wo;
    int32_t *argmax; /* max pool: C x max_batch x Ho x Wo */
} pool_priv;

/* Clamped input window [*lo, *hi) of output index o along an axis of size n. */
static inline void window(int o, int stride, int pad, int k, int n, int *lo, int *hi)
{
    int a = o * stride - pad, b = a + k;
    *lo = a < 0 ? 0 : a;
    *hi = b > n ? n : b;
}

/* The outputs ow whose window column kw, ow*s-p+kw, lies in [0, w):
 * [*lo, *hi) within [0, wo).  Loops over ow then need no bounds test. */
static inline void valid_cols(int kw, int stride, int pad, int w, int wo, int *lo, int *hi)
{
    int first = pad - kw, last = w - 1 + pad - kw;
    int a = first <= 0 ? 0 : first / stride + (first % stride != 0); /* no first + stride */
    int b = last < 0 ? 0 : last / stride + 1;
    if (a > wo) a = wo;
    if (b > wo) b = wo;
    *lo = a;
    *hi = b < a ? a : b;
}

static pcnn_status maxpool_setup(pcnn_layer *l, const plan_ctx *pc)
{
    pool_priv *p = l->priv;
    size_t n = (size_t)p->c * (size_t)pc->max_batch * (size_t)p->ho * (size_t)p->wo;
    p->argmax = n > SIZE_MAX / sizeof(int32_t) ? NULL : mem_alloc(n * sizeof(int32_t));
    if (p->argmax == NULL) {
        char name[64];
        return error_set(PCNN_ERR_OUT_OF_MEMORY, "pcnn_net_finalize",
                         "%s: cannot allocate %zu argmax indices",
                         layer_name(l, name, sizeof name), n);
    }
    l->buffer_bytes += n * sizeof(int32_t);
    return PCNN_OK;
}

/* One pooling call: unit u is an output row (plane, oh) in forward, a
 * plane in backward. */
typedef struct pool_args {
    const pool_priv *p;
    const float *src;
    float *dst;
    int32_t *arg;
    int planes;
    bool acc;
} pool_args;

/* The common 2x2, stride 2, unpadded case, window element by element in
 * PyTorch's order: the first is taken as is (-inf start), the others if
 * greater or NaN. */
VECTOR_CLONES static void maxpool2_rows(void *varg, size_t u0, size_t u1)
{
    const pool_args *a = varg;
    const pool_priv *p = a->p;
    const int ho = p->ho, wo = p->wo, w = p->w;
    const size_t in_plane = (size_t)p->h * w, out_plane = (size_t)ho * wo;
    for (size_t u = u0; u < u1; u++) {
        const size_t pl = u / (size_t)ho;
        const int oh = (int)(u % (size_t)ho);
        const float *r0 = a->src + pl * in_plane + (size_t)(2 * oh) * w, *r1 = r0 + w;
        float *restrict yr = a->dst + pl * out_plane + (size_t)oh * wo;
        int32_t *restrict ar = a->arg + pl * out_plane + (size_t)oh * wo;
        const int base = 2 * oh * w;
        for (int ow = 0; ow < wo; ow++) {
            const float v0 = r0[2 * ow], v1 = r0[2 * ow + 1], v2 = r1[2 * ow], v3 = r1[2 * ow + 1];
            float m = v0;
            int k = 0;
            if (v1 > m || v1 != v1) m = v1, k = 1;
            if (v2 > m || v2 != v2) m = v2, k = 2;
            if (v3 > m || v3 != v3) m = v3, k = 3;
            yr[ow] = m;
            ar[ow] = base + 2 * ow + (k & 1) + (k >> 1) * w;
        }
    }
}

/* Windows are visited row by row: for each input row ih of the output
 * row's window and each kernel column kw, one pass over the whole output
 * row.  Each output still sees its window in row-major order (so ties and
 * sums come out as in PyTorch), but the inner loops are long and branch-free
 * instead of K-element loops per output. */
static void maxpool_rows(void *varg, size_t u0, size_t u1)
{
    const pool_args *a = varg;
    const pool_priv *p = a->p;
    const int ho = p->ho, wo = p->wo, h = p->h, w = p->w;
    const int k = p->k, st = p->stride, pad = p->pad;
    const size_t in_plane = (size_t)h * w, out_plane = (size_t)ho * wo;
    for (size_t u = u0; u < u1; u++) {
        const size_t pl = u / (size_t)ho;
        const int oh = (int)(u % (size_t)ho);
        const float *xp = a->src + pl * in_plane;
        float *yr = a->dst + pl * out_plane + (size_t)oh * wo;
        int32_t *ar = a->arg + pl * out_plane + (size_t)oh * wo;
        int h0, h1;
        window(oh, st, pad, k, h, &h0, &h1);
        /* PyTorch starts from -inf at the window's first valid element. */
        for (int ow = 0; ow < wo; ow++) {
            int w0, w1;
            window(ow, st, pad, k, w, &w0, &w1);
            yr[ow] = -INFINITY;
            ar[ow] = h0 * w + w0;
        }
        for (int ih = h0; ih < h1; ih++) {
            for (int kw = 0; kw < k; kw++) {
                int lo, hi;
                valid_cols(kw, st, pad, w, wo, &lo, &hi);
                if (hi <= lo) continue;
                const int base = ih * w + lo * st - pad + kw; /* input of output lo */
                const float *xr = xp + base;
                float *ym = yr + lo;
                int32_t *am = ar + lo;
                for (int i = 0; i < hi - lo; i++) {
                    /* PyTorch's rule: take v if v > max or v is NaN. */
                    const float v = xr[(size_t)i * st], m = ym[i];
                    const int take = (v > m) | (v != v);
                    ym[i] = take ? v : m;
                    am[i] = take ? base + i * st : am[i];
                }
            }
        }
    }
}

static void maxpool_forward(pcnn_layer *l, const run_ctx *ctx)
{
    const pool_priv *p = l->priv;
    pool_args a = {p, l->inputs[0]->y, l->y, p->argmax, p->c * ctx->n, false};
    const size_t rows = (size_t)a.planes * p->ho;
    const bool two = p->k == 2 && p->stride == 2 && p->pad == 0;
    parallel_for(rows, 1, rows * p->wo * p->k * p->k, ctx->threads,
                 two ? maxpool2_rows : maxpool_rows, &a);
}

/* Backward of the 2x2 stride-2 case without accumulation: the windows tile
 * the input (a trailing odd row or column belongs to none), so each input
 * element is written once, with no zeroing pass and no scatter. */
VECTOR_CLONES static void maxpool2_back_planes(void *varg, size_t u0, size_t u1)
{
    const pool_args *a = varg;
    const pool_priv *p = a->p;
    const int ho = p->ho, wo = p->wo, h = p->h, w = p->w;
    const size_t in_plane = (size_t)h * w, out_plane = (size_t)ho * wo;
    for (size_t pl = u0; pl < u1; pl++) {
        float *dp = a->dst + pl * in_plane;
        const float *gp = a->src + pl * out_plane;
        const int32_t *ap = a->arg + pl * out_plane;
        for (int oh = 0; oh < ho; oh++) {
            float *restrict d0 = dp + (size_t)(2 * oh) * w, *restrict d1 = d0 + w;
            const int base = 2 * oh * w;
            for (int ow = 0; ow < wo; ow++) {
                const int at = ap[(size_t)oh * wo + ow] - base - 2 * ow;
                const float g = gp[(size_t)oh * wo + ow];
                d0[2 * ow] = at == 0 ? g : 0.0f;
                d0[2 * ow + 1] = at == 1 ? g : 0.0f;
                d1[2 * ow] = at == w ? g : 0.0f;
                d1[2 * ow + 1] = at == w + 1 ? g : 0.0f;
            }
            if (w > 2 * wo) d0[w - 1] = d1[w - 1] = 0.0f;
        }
        if (h > 2 * ho) memset(dp + (size_t)(h - 1) * w, 0, (size_t)w * sizeof *dp);
    }
}

static void maxpool_back_planes(void *varg, size_t u0, size_t u1)
{
    const pool_args *a = varg;
    const pool_priv *p = a->p;
    const size_t in_plane = (size_t)p->h * p->w, out_plane = (size_t)p->ho * p->wo;
    for (size_t pl = u0; pl < u1; pl++) {
        float *dp = a->dst + pl * in_plane;
        const float *gp = a->src + pl * out_plane;
        const int32_t *ap = a->arg + pl * out_plane;
        if (!a->acc) memset(dp, 0, in_plane * sizeof *dp);
        for (size_t o = 0; o < out_plane; o++) dp[ap[o]] += gp[o];
    }
}

static void maxpool_backward(pcnn_layer *l, const run_ctx *ctx, float *const dx[2])
{
    if (dx[0] == NULL) return;
    const pool_priv *p = l->priv;
    const bool acc = l->accumulate_dx[0];
    pool_args a = {p, l->dy, dx[0], p->argmax, p->c * ctx->n, acc};
    const size_t in_plane = (size_t)p->h * p->w, out_plane = (size_t)p->ho * p->wo;
    const bool two = p->k == 2 && p->stride == 2 && p->pad == 0 && !acc;
    parallel_for((size_t)a.planes, 1, (size_t)a.planes * (in_plane + out_plane), ctx->threads,
                 two ? maxpool2_back_planes : maxpool_back_planes, &a);
}

VECTOR_CLONES static void avgpool_rows(void *varg, size_t u0, size_t u1)
{
    const pool_args *a = varg;
    const pool_priv *p = a->p;
    const int ho = p->ho, wo = p->wo, h = p->h, w = p->w;
    const int k = p->k, st = p->stride, pad = p->pad;
    const size_t in_plane = (size_t)h * w, out_plane = (size_t)ho * wo;
    const float scale = 1.0f / (float)((double)k * k); /* k * k may pass INT_MAX */
    for (size_t u = u0; u < u1; u++) {
        const size_t pl = u / (size_t)ho;
        const int oh = (int)(u % (size_t)ho);
        const float *xp = a->src + pl * in_plane;
        float *yr = a->dst + pl * out_plane + (size_t)oh * wo;
        int h0, h1;
        window(oh, st, pad, k, h, &h0, &h1);
        for (int ow = 0; ow < wo; ow++) yr[ow] = 0.0f;
        for (int ih = h0; ih < h1; ih++) {
            for (int kw = 0; kw < k; kw++) {
                int lo, hi;
                valid_cols(kw, st, pad, w, wo, &lo, &hi);
                if (hi <= lo) continue;
                const float *xr = xp + (size_t)ih * w + (lo * st - pad + kw);
                float *ys = yr + lo;
                for (int i = 0; i < hi - lo; i++) ys[i] += xr[(size_t)i * st];
            }
        }
        for (int ow = 0; ow < wo; ow++) yr[ow] *= scale;
    }
}

static void avgpool_forward(pcnn_layer *l, const run_ctx *ctx)
{
    const pool_priv *p = l->priv;
    pool_args a = {p, l->inputs[0]->y, l->y, NULL, p->c * ctx->n, false};
    const size_t rows = (size_t)a.planes * p->ho;
    parallel_for(rows, 1, rows * p->wo * p->k * p->k, ctx->threads, avgpool_rows, &a);
}

/* One thread per plane: overlapping windows add in a fixed order. */
VECTOR_CLONES static void avgpool_back_planes(void *varg, size_t u0, size_t u1)
{
    const pool_args *a = varg;
    const pool_priv *p = a->p;
    const int ho = p->ho, wo = p->wo, h = p->h, w = p->w;
    const int k = p->k, st = p->stride, pad = p->pad;
    const size_t in_plane = (size_t)h * w, out_plane = (size_t)ho * wo;
    const float scale = 1.0f / (float)((double)k * k); /* k * k may pass INT_MAX */
    for (size_t pl = u0; pl < u1; pl++) {
        float *dp = a->dst + pl * in_plane;
        const float *gp = a->src + pl * out_plane;
        if (!a->acc) memset(dp, 0, in_plane * sizeof *dp);
        for (int oh = 0; oh < ho; oh++) {
            const float *gr = gp + (size_t)oh * wo;
            int h0, h1;
            window(oh, st, pad, k, h, &h0, &h1);
            for (int ih = h0; ih < h1; ih++) {
                for (int kw = 0; kw < k; kw++) {
                    int lo, hi;
                    valid_cols(kw, st, pad, w, wo, &lo, &hi);
                    if (hi <= lo) continue;
                    float *dr = dp + (size_t)ih * w + (lo * st - pad + kw);
                    const float *gs = gr + lo;
                    for (int i = 0; i < hi - lo; i++) dr[(size_t)i * st] += gs[i] * scale;
                }
            }
        }
    }
}

static void avgpool_backward(pcnn_layer *l, const run_ctx *ctx, float *const dx[2])
{
    if (dx[0] == NULL) return;
    const pool_priv *p = l->priv;
    pool_args a = {p, l->dy, dx[0], NULL, p->c * ctx->n, l->accumulate_dx[0]};
    const size_t work = (size_t)a.planes * p->ho * p->wo * p->k * p->k;
    parallel_for((size_t)a.planes, 1, work, ctx->threads, avgpool_back_planes, &a);
}

static void pool_destroy(pcnn_layer *l)
{
    pool_priv *p = l->priv;
    if (p) mem_free(p->argmax);
    mem_free(p);
    l->priv = NULL;
}

static void pool_describe(const pcnn_layer *l, char *buf, size_t size)
{
    const pool_priv *p = l->priv;
    snprintf(buf, size, "k=%d s=%d p=%d", p->k, p->stride, p->pad);
}

static void pool_max_window(const pcnn_layer *l, layer_window *w)
{
    const pool_priv *p = l->priv;
    *w = layer_window_cube(p->k, p->stride, p->pad, false, -INFINITY);
}

static void pool_avg_window(const pcnn_layer *l, layer_window *w)
{
    const pool_priv *p = l->priv;
    *w = layer_window_cube(p->k, p->stride, p->pad, false, 0.0f);
}

/* Twins have no padding: the staged halo holds it. */
static pcnn_status pool_max_twin(const pcnn_layer *l, layer_list *list, pcnn_layer *const *in,
                                twin_opts o, pcnn_layer **out, const char *func)
{
    const pool_priv *p = l->priv;
    (void)o;
    return maxpool2d_add(list, in[0], p->k, p->stride, 0, out, func);
}

static pcnn_status pool_avg_twin(const pcnn_layer *l, layer_list *list, pcnn_layer *const *in,
                                twin_opts o, pcnn_layer **out, const char *func)
{
    const pool_priv *p = l->priv;
    (void)o;
    return avgpool2d_add(list, in[0], p->k, p->stride, 0, out, func);
}

/* Average pooling's backward reads nothing forward kept. */
static bool pool_avg_recomputable(const pcnn_layer *l)
{
    (void)l;
    return true;
}

static const layer_ops maxpool_ops = {
    .kind = "maxpool2d",
    .setup = maxpool_setup,
    .forward = maxpool_forward,
    .backward = maxpool_backward,
    .destroy = pool_destroy,
    .describe = pool_describe,
    .caps = {.split = LAYER_SPLIT_WINDOWED,
             .cost = LAYER_COST_MAXPOOL2D,
             .window = pool_max_window,
             .twin = pool_max_twin},
};

static const layer_ops avgpool_ops = {
    .kind = "avgpool2d",
    .forward = avgpool_forward,
    .backward = avgpool_backward,
    .destroy = pool_destroy,
    .describe = pool_describe,
    .caps = {.split = LAYER_SPLIT_WINDOWED,
             .cost = LAYER_COST_AVGPOOL2D,
             .window = pool_avg_window,
             .twin = pool_avg_twin,
             .recomputable = pool_avg_recomputable},
};

/* Shared adder; `func` names the public function in messages. */
static pcnn_status pool_add(const layer_ops *ops, const char *func, layer_list *list,
                            pcnn_layer *in, int kernel, int stride, int padding,
                            pcnn_layer **out)
{
    TRY(layer_check_new(list, &in, 1, out, func));
    const int idx = list->count;
    const char *me = ops->kind;
    if (kernel < 1)
        return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "layer %d (%s): kernel %d must be >= 1",
                         idx, me, kernel);
    if (stride < 1)
        return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "layer %d (%s): stride %d must be >= 1",
                         idx, me, stride);
    if (padding < 0 || padding > kernel / 2)
        return error_set(PCNN_ERR_INVALID_ARGUMENT, func,
                         "layer %d (%s): padding %d must be in [0, kernel/2 = %d]", idx, me,
                         padding, kernel / 2);
    const shape s = in->out;
    if (s.d != 1)
        return error_set(PCNN_ERR_SHAPE, func,
                         "layer %d (%s): input is 3D (depth %d): use the 3D pooling", idx, me,
                         s.d);
    const long long ph = (long long)s.h + 2LL * padding, pw = (long long)s.w + 2LL * padding;
    if (kernel > ph || kernel > pw)
        return error_set(PCNN_ERR_SHAPE, func,
                         "layer %d (%s): kernel %d larger than padded input %lldx%lld", idx, me,
                         kernel, ph, pw);
    const long long ho = (ph - kernel) / stride + 1, wo = (pw - kernel) / stride + 1;
    /* Argmax indices are int32 within a plane; output planes index as ints. */
    if (ph > INT_MAX || pw > INT_MAX || ho * wo > INT_MAX || (long long)s.h * s.w > INT_MAX)
        return error_set(PCNN_ERR_SHAPE, func, "layer %d (%s): plane %dx%d too large", idx, me,
                         s.h, s.w);

    pool_priv *p = mem_calloc(1, sizeof *p);
    if (p == NULL)
        return error_set(PCNN_ERR_OUT_OF_MEMORY, func, "layer %d (%s): out of memory", idx, me);
    *p = (pool_priv){.k = kernel, .stride = stride, .pad = padding, .c = s.c, .h = s.h,
                     .w = s.w, .ho = (int)ho, .wo = (int)wo};
    pcnn_layer *l = NULL;
    pcnn_status st = layer_append(list, ops, &in, 1, shape_2d(s.c, (int)ho, (int)wo), 0, p, &l);
    if (st != PCNN_OK) {
        mem_free(p);
        return st;
    }
    *out = l;
    return PCNN_OK;
}

pcnn_status maxpool2d_add(layer_list *list, pcnn_layer *in, int kernel, int stride, int padding,
                          pcnn_layer **out, const char *func)
{
    return pool_add(&maxpool_ops, func, list, in, kernel, stride, padding, out);
}

pcnn_status avgpool2d_add(layer_list *list, pcnn_layer *in, int kernel, int stride, int padding,
                          pcnn_layer **out, const char *func)
{
    return pool_add(&avgpool_ops, func, list, in, kernel, stride, padding, out);
}
