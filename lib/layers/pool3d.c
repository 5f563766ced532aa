/* Max and average 3D pooling over cubic windows, PyTorch semantics
 * (max_pool3d / avg_pool3d, floor mode), layout C N D H W (layer.h).
 *
 * Max: padding counts as -inf, NaN propagates, the first maximum in
 * (d, h, w) order wins ties; the winner's index within its input volume is
 * kept (int32, persistent) for backward.  Average: count_include_pad=True,
 * so every window divides by K^3.  Like PyTorch, padding <= kernel/2, which
 * also guarantees that every window covers at least one input element.
 *
 * Each (c, n) volume is independent.  Forward splits output rows (volume,
 * od, oh) over threads; backward gives each thread whole volumes, so
 * overlapping windows (stride < kernel) add in a fixed order. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../kernels/kernels.h"
#include "layers.h"

typedef struct pool3d_priv {
    int k, stride, pad;
    int c, d, h, w, od, oh, ow;
    int32_t *argmax; /* max pool: C x max_batch x Do x Ho x Wo */
} pool3d_priv;

static size_t in_volume(const pool3d_priv *p) { return (size_t)p->d * p->h * p->w; }
static size_t out_volume(const pool3d_priv *p) { return (size_t)p->od * p->oh * p->ow; }

/* Clamped input window [*lo, *hi) of output index o along an axis of size n. */
static inline void window(int o, int stride, int pad, int k, int n, int *lo, int *hi)
{
    const int a = o * stride - pad, b = a + k;
    *lo = a < 0 ? 0 : a;
    *hi = b > n ? n : b;
}

/* 1 / K^3 for count_include_pad: K^3 passes INT_MAX from K = 1291. */
static float avg_scale(int k) { return 1.0f / (float)((double)k * k * k); }

/* The window of output (od, oh, ow) as clamped ranges along each axis. */
typedef struct box {
    int d0, d1, h0, h1, w0, w1;
} box;

static box window_of(const pool3d_priv *p, int od, int oh, int ow)
{
    box b;
    window(od, p->stride, p->pad, p->k, p->d, &b.d0, &b.d1);
    window(oh, p->stride, p->pad, p->k, p->h, &b.h0, &b.h1);
    window(ow, p->stride, p->pad, p->k, p->w, &b.w0, &b.w1);
    return b;
}

static pcnn_status maxpool3d_setup(pcnn_layer *l, const plan_ctx *pc)
{
    pool3d_priv *p = l->priv;
    const size_t n = (size_t)p->c * (size_t)pc->max_batch * out_volume(p);
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

typedef struct pool3d_call {
    const pool3d_priv *p;
    const float *src;
    float *dst;
    int32_t *arg;
    bool acc;
} pool3d_call;

/* Units u = output rows (volume v, od, oh). */
static void maxpool3d_rows(void *varg, size_t u0, size_t u1)
{
    const pool3d_call *a = varg;
    const pool3d_priv *p = a->p;
    const size_t rows = (size_t)p->od * p->oh;
    for (size_t u = u0; u < u1; u++) {
        const size_t v = u / rows;
        const int od = (int)(u % rows / (size_t)p->oh), oh = (int)(u % (size_t)p->oh);
        const float *xv = a->src + v * in_volume(p);
        const size_t at = v * out_volume(p) + ((size_t)od * p->oh + oh) * p->ow;
        for (int ow = 0; ow < p->ow; ow++) {
            const box b = window_of(p, od, oh, ow);
            /* PyTorch starts from -inf at the window's first element and
             * takes v if v > max or v is NaN. */
            float m = -INFINITY;
            int32_t best = (int32_t)(((size_t)b.d0 * p->h + b.h0) * p->w + b.w0);
            for (int id = b.d0; id < b.d1; id++)
                for (int ih = b.h0; ih < b.h1; ih++) {
                    const size_t row = ((size_t)id * p->h + ih) * p->w;
                    for (int iw = b.w0; iw < b.w1; iw++) {
                        const float x = xv[row + iw];
                        if (x > m || x != x) {
                            m = x;
                            best = (int32_t)(row + iw);
                        }
                    }
                }
            a->dst[at + ow] = m;
            a->arg[at + ow] = best;
        }
    }
}

static void maxpool3d_forward(pcnn_layer *l, const run_ctx *ctx)
{
    const pool3d_priv *p = l->priv;
    pool3d_call a = {p, l->inputs[0]->y, l->y, p->argmax, false};
    const size_t rows = (size_t)p->c * ctx->n * p->od * p->oh;
    parallel_for(rows, 1, rows * p->ow * p->k * p->k * p->k, ctx->threads, maxpool3d_rows, &a);
}

/* Units u = volumes: each input element gets the gradients of the outputs
 * whose maximum it was. */
static void maxpool3d_back_volumes(void *varg, size_t u0, size_t u1)
{
    const pool3d_call *a = varg;
    const pool3d_priv *p = a->p;
    const size_t nin = in_volume(p), nout = out_volume(p);
    for (size_t v = u0; v < u1; v++) {
        float *dv = a->dst + v * nin;
        const float *gv = a->src + v * nout;
        const int32_t *av = a->arg + v * nout;
        if (!a->acc) memset(dv, 0, nin * sizeof *dv);
        for (size_t o = 0; o < nout; o++) dv[av[o]] += gv[o];
    }
}

static void maxpool3d_backward(pcnn_layer *l, const run_ctx *ctx, float *const dx[2])
{
    if (dx[0] == NULL) return;
    const pool3d_priv *p = l->priv;
    pool3d_call a = {p, l->dy, dx[0], p->argmax, l->accumulate_dx[0]};
    const size_t volumes = (size_t)p->c * ctx->n;
    parallel_for(volumes, 1, volumes * (in_volume(p) + out_volume(p)), ctx->threads,
                 maxpool3d_back_volumes, &a);
}

static void avgpool3d_rows(void *varg, size_t u0, size_t u1)
{
    const pool3d_call *a = varg;
    const pool3d_priv *p = a->p;
    const size_t rows = (size_t)p->od * p->oh;
    const float scale = avg_scale(p->k);
    for (size_t u = u0; u < u1; u++) {
        const size_t v = u / rows;
        const int od = (int)(u % rows / (size_t)p->oh), oh = (int)(u % (size_t)p->oh);
        const float *xv = a->src + v * in_volume(p);
        float *y = a->dst + v * out_volume(p) + ((size_t)od * p->oh + oh) * p->ow;
        for (int ow = 0; ow < p->ow; ow++) {
            const box b = window_of(p, od, oh, ow);
            float s = 0.0f;
            for (int id = b.d0; id < b.d1; id++)
                for (int ih = b.h0; ih < b.h1; ih++) {
                    const float *row = xv + ((size_t)id * p->h + ih) * p->w;
                    for (int iw = b.w0; iw < b.w1; iw++) s += row[iw];
                }
            y[ow] = s * scale;
        }
    }
}

static void avgpool3d_forward(pcnn_layer *l, const run_ctx *ctx)
{
    const pool3d_priv *p = l->priv;
    pool3d_call a = {p, l->inputs[0]->y, l->y, NULL, false};
    const size_t rows = (size_t)p->c * ctx->n * p->od * p->oh;
    parallel_for(rows, 1, rows * p->ow * p->k * p->k * p->k, ctx->threads, avgpool3d_rows, &a);
}

static void avgpool3d_back_volumes(void *varg, size_t u0, size_t u1)
{
    const pool3d_call *a = varg;
    const pool3d_priv *p = a->p;
    const size_t nin = in_volume(p), nout = out_volume(p);
    const float scale = avg_scale(p->k);
    for (size_t v = u0; v < u1; v++) {
        float *dv = a->dst + v * nin;
        const float *gv = a->src + v * nout;
        if (!a->acc) memset(dv, 0, nin * sizeof *dv);
        for (int od = 0; od < p->od; od++)
            for (int oh = 0; oh < p->oh; oh++)
                for (int ow = 0; ow < p->ow; ow++) {
                    const box b = window_of(p, od, oh, ow);
                    const float g = gv[((size_t)od * p->oh + oh) * p->ow + ow] * scale;
                    for (int id = b.d0; id < b.d1; id++)
                        for (int ih = b.h0; ih < b.h1; ih++) {
                            float *row = dv + ((size_t)id * p->h + ih) * p->w;
                            for (int iw = b.w0; iw < b.w1; iw++) row[iw] += g;
                        }
                }
    }
}

static void avgpool3d_backward(pcnn_layer *l, const run_ctx *ctx, float *const dx[2])
{
    if (dx[0] == NULL) return;
    const pool3d_priv *p = l->priv;
    pool3d_call a = {p, l->dy, dx[0], NULL, l->accumulate_dx[0]};
    const size_t volumes = (size_t)p->c * ctx->n;
    parallel_for(volumes, 1, volumes * out_volume(p) * p->k * p->k * p->k, ctx->threads,
                 avgpool3d_back_volumes, &a);
}

static void pool3d_destroy(pcnn_layer *l)
{
    pool3d_priv *p = l->priv;
    if (p) mem_free(p->argmax);
    mem_free(p);
    l->priv = NULL;
}

static void pool3d_describe(const pcnn_layer *l, char *buf, size_t size)
{
    const pool3d_priv *p = l->priv;
    snprintf(buf, size, "k=%d s=%d p=%d", p->k, p->stride, p->pad);
}

static void pool3d_max_window(const pcnn_layer *l, layer_window *w)
{
    const pool3d_priv *p = l->priv;
    *w = layer_window_cube(p->k, p->stride, p->pad, true, -INFINITY);
}

static void pool3d_avg_window(const pcnn_layer *l, layer_window *w)
{
    const pool3d_priv *p = l->priv;
    *w = layer_window_cube(p->k, p->stride, p->pad, true, 0.0f);
}

/* Twins have no padding: the staged halo holds it. */
static pcnn_status pool3d_max_twin(const pcnn_layer *l, layer_list *list, pcnn_layer *const *in,
                                twin_opts o, pcnn_layer **out, const char *func)
{
    const pool3d_priv *p = l->priv;
    (void)o;
    return maxpool3d_add(list, in[0], p->k, p->stride, 0, out, func);
}

static pcnn_status pool3d_avg_twin(const pcnn_layer *l, layer_list *list, pcnn_layer *const *in,
                                twin_opts o, pcnn_layer **out, const char *func)
{
    const pool3d_priv *p = l->priv;
    (void)o;
    return avgpool3d_add(list, in[0], p->k, p->stride, 0, out, func);
}

/* Average pooling's backward reads nothing forward kept. */
static bool pool3d_avg_recomputable(const pcnn_layer *l)
{
    (void)l;
    return true;
}

static const layer_ops maxpool3d_ops = {
    .kind = "maxpool3d",
    .setup = maxpool3d_setup,
    .forward = maxpool3d_forward,
    .backward = maxpool3d_backward,
    .destroy = pool3d_destroy,
    .describe = pool3d_describe,
    .caps = {.split = LAYER_SPLIT_WINDOWED,
             .cost = LAYER_COST_MAXPOOL3D,
             .window = pool3d_max_window,
             .twin = pool3d_max_twin},
};

static const layer_ops avgpool3d_ops = {
    .kind = "avgpool3d",
    .forward = avgpool3d_forward,
    .backward = avgpool3d_backward,
    .destroy = pool3d_destroy,
    .describe = pool3d_describe,
    .caps = {.split = LAYER_SPLIT_WINDOWED,
             .cost = LAYER_COST_AVGPOOL3D,
             .window = pool3d_avg_window,
             .twin = pool3d_avg_twin,
             .recomputable = pool3d_avg_recomputable},
};

static pcnn_status pool3d_add(const layer_ops *ops, const char *func, layer_list *list,
                              pcnn_layer *in, int kernel, int stride, int padding,
                              pcnn_layer **out)
{
    TRY(layer_check_new(list, &in, 1, out, func));
    const int idx = list->count;
    const char *me = ops->kind;
    ADD_REQUIRE(kernel >= 1, PCNN_ERR_INVALID_ARGUMENT, "layer %d (%s): kernel %d must be >= 1",
                idx, me, kernel);
    ADD_REQUIRE(stride >= 1, PCNN_ERR_INVALID_ARGUMENT, "layer %d (%s): stride %d must be >= 1",
                idx, me, stride);
    ADD_REQUIRE(padding >= 0 && padding <= kernel / 2, PCNN_ERR_INVALID_ARGUMENT,
                "layer %d (%s): padding %d must be in [0, kernel/2 = %d]", idx, me, padding,
                kernel / 2);
    const shape s = in->out;
    const long long pd = (long long)s.d + 2LL * padding, ph = (long long)s.h + 2LL * padding,
                    pw = (long long)s.w + 2LL * padding;
    ADD_REQUIRE(kernel <= pd && kernel <= ph && kernel <= pw, PCNN_ERR_SHAPE,
                "layer %d (%s): kernel %d larger than padded input %lldx%lldx%lld", idx, me,
                kernel, pd, ph, pw);
    const long long od = (pd - kernel) / stride + 1, oh = (ph - kernel) / stride + 1,
                    ow = (pw - kernel) / stride + 1;
    /* Argmax indices are int32 within a volume. */
    ADD_REQUIRE(pd <= INT_MAX && ph <= INT_MAX && pw <= INT_MAX &&
                    (long long)s.d * s.h * s.w <= INT32_MAX,
                PCNN_ERR_SHAPE, "layer %d (%s): volume %dx%dx%d too large", idx, me, s.d, s.h,
                s.w);

    pool3d_priv *p = mem_calloc(1, sizeof *p);
    ADD_REQUIRE(p != NULL, PCNN_ERR_OUT_OF_MEMORY, "layer %d (%s): out of memory", idx, me);
    *p = (pool3d_priv){.k = kernel, .stride = stride, .pad = padding, .c = s.c, .d = s.d,
                       .h = s.h, .w = s.w, .od = (int)od, .oh = (int)oh, .ow = (int)ow};
    const shape o = {s.c, (int)od, (int)oh, (int)ow};
    pcnn_layer *l = NULL;
    pcnn_status st = layer_append(list, ops, &in, 1, o, 0, p, &l);
    if (st != PCNN_OK) {
        mem_free(p);
        return st;
    }
    *out = l;
    return PCNN_OK;
}

pcnn_status maxpool3d_add(layer_list *list, pcnn_layer *in, int kernel, int stride, int padding,
                          pcnn_layer **out, const char *func)
{
    return pool3d_add(&maxpool3d_ops, func, list, in, kernel, stride, padding, out);
}

pcnn_status avgpool3d_add(layer_list *list, pcnn_layer *in, int kernel, int stride, int padding,
                          pcnn_layer **out, const char *func)
{
    return pool3d_add(&avgpool3d_ops, func, list, in, kernel, stride, padding, out);
}
