/* 2D convolution: one GEMM per kernel tap, direct kernels on a padded
 * grid, or im2col + GEMM over the whole local batch, in bands or on a kept
 * im2col matrix.
 *
 * At finalize each layer first decides (conv_decide: the rules and their
 * thresholds are in strategy/, PCNN_OPT_CONV_ALGORITHM may force one),
 * then allocates what that decision needs: the repacked weights of the
 * per-tap GEMMs (kernels/conv_taps.h), the kept im2col matrix
 * (conv2d_gemm.c), and a workspace for the direct kernels
 * (conv2d_direct.c) or the GEMM bands.
 *
 * Any padding >= 0, as in PyTorch: windows of pure padding give the bias.
 * The direct kernels and the per-tap GEMMs assume padding < kernel;
 * conv_decide gives larger paddings to im2col + GEMM. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "../kernels/conv_direct.h"
#include "../kernels/conv_taps.h"
#include "clone.h"
#include "conv2d.h"
#include "layers.h"

static pixel_conv pixel_geometry(const conv_priv *p, int n)
{
    pixel_conv s = {n, p->cin, p->cout, p->h, p->w, p->k, p->stride, p->pad, p->ho, p->wo};
    return s;
}

/* The direct algorithm with a stride: the channel-lane forward and the
 * direct dW on a strided grid, GEMM bands for dx. */
static bool strided_direct(const conv_priv *p, const conv_choice *c)
{
    return c->algorithm == CONV_ALGO_DIRECT && p->stride > 1;
}

static size_t choice_workspace(const conv_priv *p, const conv_choice *c, const plan_ctx *pc)
{
    const int threads = pc->threads > 0 ? pc->threads : 1;
    if (p->bf16) return conv_bf16_workspace(p, pc->max_batch, threads);
    if (c->algorithm == CONV_ALGO_TAPS) {
        const pixel_conv s = pixel_geometry(p, pc->max_batch);
        return conv_taps_workspace_floats(&s);
    }
    if (p->pointwise) return 0;
    if (strided_direct(p, c)) {
        /* The direct forward and dW, then dx in GEMM bands (no col kept). */
        const size_t direct = conv_strided_workspace(p, pc->max_batch, threads);
        const size_t bands = conv_gemm_workspace(p, pc->max_batch, true, threads);
        return direct > bands ? direct : bands;
    }
    if (c->algorithm == CONV_ALGO_DIRECT)
        return conv_direct_workspace(p, pc->max_batch, threads);
    return conv_gemm_workspace(p, pc->max_batch, c->keep_col, threads);
}

/* The choice of a forced algorithm a on the layer's geometry. */
static conv_choice forced_choice(const conv_priv *p, conv_algorithm a)
{
    conv_choice c;
    conv_decide(&p->geom, a, &c);
    return c;
}

/* The decided algorithm's, or the most any candidate needs. */
static size_t conv_workspace(const pcnn_layer *l, const plan_ctx *pc)
{
    const conv_priv *p = l->priv;
    size_t need = choice_workspace(p, &p->choice, pc);
    for (int i = 0; i < p->rules.num_candidates; i++) {
        const conv_choice c = forced_choice(p, p->rules.candidates[i]);
        const size_t w = choice_workspace(p, &c, pc);
        if (w > need) need = w;
    }
    return need;
}

/* Decide the algorithm from the layer's geometry alone (allocates nothing). */
static void conv_decide_layer(pcnn_layer *l, const plan_ctx *pc)
{
    conv_priv *p = l->priv;
    const bool bf16 = layer_decide_precision(l, pc);
    p->bf16 = bf16;
    p->geom = (conv_geometry){.cin = p->cin, .cout = p->cout, .k = p->k, .stride = p->stride,
                              .pad = p->pad, .h = p->h, .w = p->w, .batch = pc->max_batch,
                              .threads = pc->threads > 0 ? pc->threads : 1,
                              .keep_im2col = pc->keep_im2col,
                              .direct_available = direct_conv_available(),
                              .measure = pc->measure && !bf16, /* bf16: GEMM only */
                              .bf16 = bf16};
    conv_decide(&p->geom, (conv_algorithm)pc->conv_algorithm, &p->rules);
    p->choice = p->rules;
    conv_choice_describe(&p->choice, l->decision.kernel, sizeof l->decision.kernel);
    l->algorithm = (int)p->choice.algorithm;
}

static int conv_candidates(const pcnn_layer *l, int *algos)
{
    const conv_priv *p = l->priv;
    for (int i = 0; i < p->rules.num_candidates; i++) algos[i] = (int)p->rules.candidates[i];
    return p->rules.num_candidates;
}

static void conv_use_algorithm(pcnn_layer *l, int algorithm, const char *why)
{
    conv_priv *p = l->priv;
    p->choice = algorithm < 0 || algorithm == (int)p->rules.algorithm ? p->rules
                                                     : forced_choice(p, (conv_algorithm)algorithm);
    if (why) { /* final: a kept matrix only GEMM reads goes */
        if (!p->choice.keep_col && p->col) {
            mem_free(p->col);
            p->col = NULL;
            l->buffer_bytes -= conv_col_floats(p, p->geom.batch) * sizeof(float);
        }
        if (why[0]) snprintf(p->choice.reason, sizeof p->choice.reason, "%s", why);
        conv_choice_describe(&p->choice, l->decision.kernel, sizeof l->decision.kernel);
    }
    l->algorithm = (int)p->choice.algorithm;
}

/* Whether the decided algorithm or a candidate repacks the weights for
 * the taps, or keeps the im2col matrix. */
static bool any_taps(const conv_priv *p)
{
    for (int i = 0; i < p->rules.num_candidates; i++)
        if (p->rules.candidates[i] == CONV_ALGO_TAPS) return true;
    return p->choice.algorithm == CONV_ALGO_TAPS;
}

static bool any_keep_col(const conv_priv *p)
{
    for (int i = 0; i < p->rules.num_candidates; i++)
        if (forced_choice(p, p->rules.candidates[i]).keep_col) return true;
    return p->choice.keep_col;
}

/* A buffer the layer keeps from finalize to destroy, counted as its own. */
static pcnn_status conv_buffer(pcnn_layer *l, size_t n, const char *what, float **out)
{
    char name[64];
    *out = n == SIZE_MAX ? NULL : mem_alloc_floats(n);
    if (*out == NULL)
        return error_set(PCNN_ERR_OUT_OF_MEMORY, "pcnn_net_finalize",
                         "%s: cannot allocate the %zu-float %s", layer_name(l, name, sizeof name),
                         n, what);
    l->buffer_bytes += n * sizeof(float);
    return PCNN_OK;
}

/* Allocate what the decided algorithm keeps: the per-tap GEMMs' repacked
 * weights, or the kept im2col matrix. */
static pcnn_status conv_setup(pcnn_layer *l, const plan_ctx *pc)
{
    conv_priv *p = l->priv;
    char name[64];
    /* GEMM sizes are ints: the batch's column count must fit. */
    long long np = (long long)pc->max_batch * p->ho * p->wo;
    if (np > INT_MAX)
        return error_set(PCNN_ERR_INVALID_ARGUMENT, "pcnn_net_finalize",
                         "%s: max_batch %d x %dx%d outputs exceeds %d columns",
                         layer_name(l, name, sizeof name), pc->max_batch, p->ho, p->wo,
                         INT_MAX);
    if (p->bf16) return conv_bf16_setup(l, pc);
    if (any_taps(p)) {
        const pixel_conv s = pixel_geometry(p, pc->max_batch);
        TRY(conv_buffer(l, conv_taps_weight_floats(&s), "repacked weights", &p->wt));
    }
    if (!any_keep_col(p)) return PCNN_OK;
    return conv_buffer(l, conv_col_floats(p, pc->max_batch), "im2col buffer", &p->col);
}

static void conv_init(pcnn_layer *l, uint64_t seed)
{
    const conv_priv *p = l->priv;
    size_t nw = (size_t)p->cout * p->ckk;
    size_t kk = (size_t)p->k * p->k;
    layer_init_weights(l, l->params, nw, (size_t)p->cin * kk, (size_t)p->cout * kk, seed);
    if (p->bias) memset(l->params + nw, 0, (size_t)p->cout * sizeof(float));
}

static void conv_forward(pcnn_layer *l, const run_ctx *ctx)
{
    const conv_priv *p = l->priv;
    if (p->bf16) {
        conv_bf16_forward(l, ctx);
    } else if (p->choice.algorithm == CONV_ALGO_TAPS) {
        const pixel_conv s = pixel_geometry(p, ctx->n);
        conv_taps_forward(&s, l->inputs[0]->y, l->params, conv_bias(l), p->wt, l->y,
                          ctx->workspace, ctx->threads);
    } else if (strided_direct(p, &p->choice)) {
        conv_strided_forward(l, ctx);
    } else if (p->choice.algorithm == CONV_ALGO_DIRECT) {
        conv_direct_forward(l, ctx);
    } else {
        conv_gemm_forward(l, ctx);
    }
}

static void conv_backward(pcnn_layer *l, const run_ctx *ctx, float *const dx[2])
{
    const conv_priv *p = l->priv;
    if (p->bf16) {
        conv_bf16_backward(l, ctx, dx[0]);
    } else if (p->choice.algorithm == CONV_ALGO_TAPS) {
        const pixel_conv s = pixel_geometry(p, ctx->n);
        conv_taps_backward(&s, l->inputs[0]->y, l->dy, p->wt, l->grads, dx[0],
                           l->accumulate_dx[0], ctx->workspace, ctx->threads);
    } else if (p->choice.algorithm == CONV_ALGO_DIRECT && !strided_direct(p, &p->choice)) {
        conv_direct_backward(l, ctx, dx[0]);
    } else {
        if (strided_direct(p, &p->choice))
            conv_strided_weight_grad(l, ctx);
        else
            conv_gemm_weight_grad(l, ctx);
        if (dx[0]) conv_gemm_input_grad(l, ctx, dx[0]);
    }
    if (p->bias) conv_bias_grad(l, ctx);
}

static void conv_destroy(pcnn_layer *l)
{
    conv_priv *p = l->priv;
    if (p) mem_free(p->col), mem_free(p->wt), mem_free(p->wb), mem_free(p->colb);
    mem_free(p);
    l->priv = NULL;
}

static void conv_describe(const pcnn_layer *l, char *buf, size_t size)
{
    const conv_priv *p = l->priv;
    snprintf(buf, size, "k=%d s=%d p=%d%s", p->k, p->stride, p->pad, p->bias ? " bias" : "");
}

static void conv_window(const pcnn_layer *l, layer_window *w)
{
    const conv_priv *p = l->priv;
    *w = layer_window_cube(p->k, p->stride, p->pad, false, 0.0f);
}

static pcnn_status conv_twin(const pcnn_layer *l, layer_list *list, pcnn_layer *const *in,
                             twin_opts o, pcnn_layer **out, const char *func)
{
    const conv_priv *p = l->priv;
    return conv2d_add(list, in[0], p->cout, p->k, p->stride, o.keep_padding ? p->pad : 0,
                      p->bias && !o.no_bias, out, func);
}

/* Backward reads a kept im2col matrix that forward made, if any. */
static bool conv_recomputable(const pcnn_layer *l)
{
    const conv_priv *p = l->priv;
    return p->col == NULL && p->colb == NULL;
}

static const layer_ops conv_ops = {
    .kind = "conv2d",
    .workspace_floats = conv_workspace,
    .decide = conv_decide_layer,
    .candidates = conv_candidates,
    .use_algorithm = conv_use_algorithm,
    .setup = conv_setup,
    .init_params = conv_init,
    .forward = conv_forward,
    .backward = conv_backward,
    .destroy = conv_destroy,
    .describe = conv_describe,
    .caps = {.split = LAYER_SPLIT_WINDOWED,
             .cost = LAYER_COST_CONV2D,
             .window = conv_window,
             .twin = conv_twin,
             .recomputable = conv_recomputable,
             .in_place = true,
             .weights_alone = true,
             .bf16 = true},
};

pcnn_status conv2d_add(layer_list *list, pcnn_layer *in, int out_channels, int kernel,
                       int stride, int padding, int bias, pcnn_layer **out, const char *func)
{
    TRY(layer_check_new(list, &in, 1, out, func));
    const int idx = list->count;
    const char *me = "conv2d";
    ADD_REQUIRE(out_channels >= 1, PCNN_ERR_INVALID_ARGUMENT,
                "layer %d (%s): out_channels %d must be >= 1", idx, me, out_channels);
    ADD_REQUIRE(kernel >= 1, PCNN_ERR_INVALID_ARGUMENT, "layer %d (%s): kernel %d must be >= 1",
                idx, me, kernel);
    ADD_REQUIRE(stride >= 1, PCNN_ERR_INVALID_ARGUMENT, "layer %d (%s): stride %d must be >= 1",
                idx, me, stride);
    ADD_REQUIRE(padding >= 0, PCNN_ERR_INVALID_ARGUMENT,
                "layer %d (%s): padding %d must be >= 0", idx, me, padding);

    const shape s = in->out;
    ADD_REQUIRE(s.d == 1, PCNN_ERR_SHAPE, "layer %d (%s): input is 3D (depth %d): use pcnn_conv3d",
                idx, me, s.d);
    const long long ph = (long long)s.h + 2LL * padding, pw = (long long)s.w + 2LL * padding;
    ADD_REQUIRE(kernel <= ph && kernel <= pw, PCNN_ERR_SHAPE,
                "layer %d (%s): kernel %d larger than padded input %lldx%lld", idx, me, kernel, ph,
                pw);
    const long long ho = (ph - kernel) / stride + 1, wo = (pw - kernel) / stride + 1;
    const long long ck = (long long)s.c * kernel; /* C*K*K could pass 2^63: bound it first */
    const long long ckk = ck <= INT_MAX / kernel ? ck * kernel : LLONG_MAX;
    /* Index arithmetic is int: padded extents, CKK and one output plane must fit. */
    ADD_REQUIRE(ph <= INT_MAX && pw <= INT_MAX && ckk <= INT_MAX && ho * wo <= INT_MAX &&
                    out_channels * ho * wo <= INT_MAX,
                PCNN_ERR_SHAPE,
                "layer %d (%s): sizes overflow (%d channels x kernel %d, output %d x %lldx%lld)",
                idx, me, s.c, kernel, out_channels, ho, wo);
    const long long nparams = out_channels * ckk + (bias ? out_channels : 0);
    ADD_REQUIRE(nparams <= INT_MAX, PCNN_ERR_SHAPE,
                "layer %d (%s): %lld parameters is too many", idx, me, nparams);

    conv_priv *p = mem_calloc(1, sizeof *p);
    ADD_REQUIRE(p != NULL, PCNN_ERR_OUT_OF_MEMORY, "layer %d (%s): out of memory", idx, me);
    *p = (conv_priv){.cout = out_channels, .k = kernel, .stride = stride, .pad = padding,
                     .bias = bias != 0, .cin = s.c, .h = s.h, .w = s.w, .ho = (int)ho,
                     .wo = (int)wo, .ckk = (int)ckk};
    p->pointwise = kernel == 1 && stride == 1 && padding == 0;

    pcnn_layer *l = NULL;
    pcnn_status st = layer_append(list, &conv_ops, &in, 1, shape_2d(out_channels, (int)ho, (int)wo),
                                  (size_t)nparams, p, &l);
    if (st != PCNN_OK) {
        mem_free(p);
        return st;
    }
    l->has_weights = true;
    *out = l;
    return PCNN_OK;
}
