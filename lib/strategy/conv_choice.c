/* The convolution's algorithm per layer (conv_choice.h).  In this order:
 *
 *   per tap   stride 1, not 1x1: forced, or on planes so small that a
 *             quarter or more of the kernel's products read padding, with
 *             32 or more channels each side
 *   direct    stride 1, k3/k5: forced, or when enough of the grid is
 *             output pixels for the channel count (direct_preferred)
 *   strided   stride > 1, k3/k5: forced, or with short windows and enough
 *             output channels; the channel-lane forward, the direct dW and
 *             GEMMs for dx
 *   GEMM      everything else, 1x1 convolutions and padding >= kernel always,
 *             and every bf16 convolution (the only algorithm with bf16 products)
 *
 * Both direct kinds need AVX-512F. */
#include "conv_choice.h"

#include <stdio.h>

#include "../kernels/conv_direct.h"
#include "../kernels/conv_taps.h"
#include "conv_measure.h"
#include "thresholds.h"

static const char forced[] = "forced by PCNN_OPT_CONV_ALGORITHM";

static int percent(double share) { return (int)(share * 100.0 + 0.5); }

/* Share of the stride-1 grid's positions that are output pixels. */
static double grid_useful(const conv_geometry *g)
{
    direct_grid grid;
    direct_grid_init(&grid, 1, g->h, g->w, g->k, 1, g->pad);
    return (double)grid.ho * grid.wo / ((double)grid.hp * grid.wp);
}

static bool taps_preferred(const conv_geometry *g, const strategy_thresholds *t)
{
    return g->cin >= t->taps_min_channels && g->cout >= t->taps_min_channels &&
           conv_taps_useful(g->h, g->w, g->k, g->pad) <= t->taps_max_useful;
}

static bool direct_preferred(const conv_geometry *g, const strategy_thresholds *t)
{
    const double useful = grid_useful(g);
    return useful >= t->direct_useful ||
           (useful >= t->direct_useful_few_channels && g->cin <= t->direct_few_channels) ||
           (useful >= t->direct_useful_short_window &&
            g->cin * g->k * g->k <= t->direct_short_window);
}

static bool strided_preferred(const conv_geometry *g, const strategy_thresholds *t)
{
    return g->cout >= t->strided_min_out && g->cin * g->k * g->k <= t->strided_max_window;
}

/* The channel-lane kernel for a stride-1 pass with nout output channels
 * onto an oh x ow plane of the layer's grid. */
static bool channels_preferred(int nout, int oh, int ow, const conv_geometry *g,
                               const strategy_thresholds *t)
{
    direct_grid grid;
    direct_grid_init(&grid, 1, g->h, g->w, g->k, 1, g->pad);
    return nout >= t->channels_min_out &&
           (double)oh * ow < t->channels_max_useful * (double)grid.hp * grid.wp;
}

static void choose(conv_choice *c, conv_algorithm algorithm, conv_kernel forward,
                   conv_kernel input_grad, conv_kernel weight_grad)
{
    c->algorithm = algorithm;
    c->forward = forward, c->input_grad = input_grad, c->weight_grad = weight_grad;
}

static void choose_direct(const conv_geometry *g, bool auto_chosen, conv_choice *c)
{
    const strategy_thresholds *t = &strategy_table;
    const int ho = g->h + 2 * g->pad - g->k + 1, wo = g->w + 2 * g->pad - g->k + 1;
    const conv_kernel lanes[2] = {CONV_KERNEL_DIRECT_GRID, CONV_KERNEL_DIRECT_CHANNELS};
    choose(c, CONV_ALGO_DIRECT, lanes[channels_preferred(g->cout, ho, wo, g, t)],
           lanes[channels_preferred(g->cin, g->h, g->w, g, t)],
           g->cout <= t->wgrad_few_max_out ? CONV_KERNEL_DIRECT_GRID
                                           : CONV_KERNEL_DIRECT_CHANNELS);
    if (!auto_chosen) {
        snprintf(c->reason, sizeof c->reason, "direct (%s)", forced);
        return;
    }
    const double useful = grid_useful(g);
    if (useful >= t->direct_useful)
        snprintf(c->reason, sizeof c->reason, "direct (grid %d %% useful)", percent(useful));
    else if (useful >= t->direct_useful_few_channels && g->cin <= t->direct_few_channels)
        snprintf(c->reason, sizeof c->reason, "direct (grid %d %% useful, Cin %d)",
                 percent(useful), g->cin);
    else
        snprintf(c->reason, sizeof c->reason, "direct (grid %d %% useful, Cin*K*K %d)",
                 percent(useful), g->cin * g->k * g->k);
}

static void choose_strided(const conv_geometry *g, bool auto_chosen, conv_choice *c)
{
    choose(c, CONV_ALGO_DIRECT, CONV_KERNEL_DIRECT_CHANNELS, CONV_KERNEL_GEMM,
           CONV_KERNEL_DIRECT_CHANNELS);
    if (auto_chosen)
        snprintf(c->reason, sizeof c->reason, "direct strided (Cin*K*K %d, Cout %d)",
                 g->cin * g->k * g->k, g->cout);
    else
        snprintf(c->reason, sizeof c->reason, "direct strided (%s)", forced);
}

/* Why GEMM, when no rule above took the layer. */
static void gemm_reason(const conv_geometry *g, conv_algorithm requested, conv_choice *c)
{
    const bool pointwise = g->k == 1 && g->stride == 1 && g->pad == 0;
    const bool direct_kernel = g->k == 3 || g->k == 5;
    if (requested == CONV_ALGO_GEMM)
        snprintf(c->reason, sizeof c->reason, "gemm (%s)", forced);
    else if (pointwise)
        snprintf(c->reason, sizeof c->reason, "gemm (1x1: x is the im2col matrix)");
    else if (requested == CONV_ALGO_TAPS)
        snprintf(c->reason, sizeof c->reason, "gemm (taps need stride 1)");
    else if (!direct_kernel)
        snprintf(c->reason, sizeof c->reason, "gemm (no direct kernel for k=%d)", g->k);
    else if (!g->direct_available)
        snprintf(c->reason, sizeof c->reason, "gemm (direct needs AVX-512)");
    else if (g->stride == 1)
        snprintf(c->reason, sizeof c->reason, "gemm (grid %d %% useful, Cin %d)",
                 percent(grid_useful(g)), g->cin);
    else
        snprintf(c->reason, sizeof c->reason, "gemm (strided, Cin*K*K %d, Cout %d)",
                 g->cin * g->k * g->k, g->cout);
}

/* The algorithm the automatic rules give under table t (conv_decide's
 * order, without the reasons). */
static conv_algorithm rule_algorithm(const conv_geometry *g, const strategy_thresholds *t)
{
    const bool pointwise = g->k == 1 && g->stride == 1 && g->pad == 0;
    if (g->pad >= g->k || pointwise) return CONV_ALGO_GEMM;
    if (g->stride == 1 && taps_preferred(g, t)) return CONV_ALGO_TAPS;
    if (!g->direct_available) return CONV_ALGO_GEMM;
    if (direct_conv_supports(g->k, g->stride, g->pad) && direct_preferred(g, t))
        return CONV_ALGO_DIRECT;
    if (g->stride > 1 && (g->k == 3 || g->k == 5) && strided_preferred(g, t))
        return CONV_ALGO_DIRECT;
    return CONV_ALGO_GEMM;
}

/* The table moved by the margin: towards the alternatives to GEMM
 * (loose) or away from them. */
static strategy_thresholds moved_table(const strategy_thresholds *t, bool loose)
{
    const double m = loose ? t->measure_margin : -t->measure_margin;
    const double f = loose ? t->measure_factor : 1.0 / t->measure_factor;
    strategy_thresholds o = *t;
    o.taps_min_channels = (int)(t->taps_min_channels / f);
    o.taps_max_useful = t->taps_max_useful + m;
    o.direct_useful = t->direct_useful - m;
    o.direct_useful_few_channels = t->direct_useful_few_channels - m;
    o.direct_few_channels = (int)(t->direct_few_channels * f);
    o.direct_useful_short_window = t->direct_useful_short_window - m;
    o.direct_short_window = (int)(t->direct_short_window * f);
    o.strided_min_out = (int)(t->strided_min_out / f);
    o.strided_max_window = (int)(t->strided_max_window * f);
    return o;
}

double conv_geometry_mflop(const conv_geometry *g)
{
    const double ho = (g->h + 2.0 * g->pad - g->k) / g->stride + 1;
    const double wo = (g->w + 2.0 * g->pad - g->k) / g->stride + 1;
    return 3.0 * 2.0 * g->batch * g->cout * ho * wo * g->cin * g->k * g->k * 1e-6;
}

/* The candidates of an automatic choice c: when the rules under the two
 * moved tables do not both agree with it, every algorithm that applies. */
static void find_candidates(const conv_geometry *g, const strategy_thresholds *t, conv_choice *c)
{
    if (!g->measure || conv_geometry_mflop(g) < conv_measure_floor_mflop()) return;
    const strategy_thresholds loose = moved_table(t, true), tight = moved_table(t, false);
    if (rule_algorithm(g, &loose) == c->algorithm && rule_algorithm(g, &tight) == c->algorithm)
        return;
    const bool pointwise = g->k == 1 && g->stride == 1 && g->pad == 0;
    const bool direct = g->direct_available && (direct_conv_supports(g->k, g->stride, g->pad) ||
                                                (g->stride > 1 && (g->k == 3 || g->k == 5)));
    int n = 0;
    c->candidates[n++] = CONV_ALGO_GEMM;
    if (direct) c->candidates[n++] = CONV_ALGO_DIRECT;
    if (g->stride == 1 && !pointwise) c->candidates[n++] = CONV_ALGO_TAPS;
    c->num_candidates = n > 1 ? n : 0;
}

static void decide(const conv_geometry *g, conv_algorithm requested, conv_choice *c)
{
    const strategy_thresholds *t = &strategy_table;
    const bool pointwise = g->k == 1 && g->stride == 1 && g->pad == 0;
    const bool automatic = requested == CONV_ALGO_AUTO;
    *c = (conv_choice){.algorithm = CONV_ALGO_GEMM};
    if (g->bf16) {
        /* The direct and per-tap kernels are fp32; a 1x1 convolution too
         * makes a (bf16) col of x. */
        choose(c, CONV_ALGO_GEMM, CONV_KERNEL_GEMM, CONV_KERNEL_GEMM, CONV_KERNEL_GEMM);
        c->keep_col = g->keep_im2col;
        snprintf(c->reason, sizeof c->reason, "gemm (bf16 products)");
        return;
    }
    if (g->pad >= g->k) {
        /* Windows of pure padding: only im2col + GEMM handles them (the
         * direct kernels and the per-tap GEMMs assume padding < kernel). */
        choose(c, CONV_ALGO_GEMM, CONV_KERNEL_GEMM, CONV_KERNEL_GEMM, CONV_KERNEL_GEMM);
        c->keep_col = g->keep_im2col;
        snprintf(c->reason, sizeof c->reason, "gemm (padding %d >= kernel %d)", g->pad, g->k);
        return;
    }
    if (g->stride == 1 && !pointwise &&
        (requested == CONV_ALGO_TAPS || (automatic && taps_preferred(g, t)))) {
        choose(c, CONV_ALGO_TAPS, CONV_KERNEL_TAPS, CONV_KERNEL_TAPS, CONV_KERNEL_TAPS);
        if (automatic)
            snprintf(c->reason, sizeof c->reason, "taps (padding %d %% of work)",
                     percent(1.0 - conv_taps_useful(g->h, g->w, g->k, g->pad)));
        else
            snprintf(c->reason, sizeof c->reason, "taps (%s)", forced);
        return;
    }
    const bool direct_asked = automatic || requested == CONV_ALGO_DIRECT;
    if (direct_asked && g->direct_available && direct_conv_supports(g->k, g->stride, g->pad) &&
        (!automatic || direct_preferred(g, t))) {
        choose_direct(g, automatic, c);
        return;
    }
    if (direct_asked && g->direct_available && g->stride > 1 && (g->k == 3 || g->k == 5) &&
        (!automatic || strided_preferred(g, t))) {
        choose_strided(g, automatic, c);
        return;
    }
    choose(c, CONV_ALGO_GEMM, CONV_KERNEL_GEMM, CONV_KERNEL_GEMM, CONV_KERNEL_GEMM);
    c->keep_col = g->keep_im2col && !pointwise;
    gemm_reason(g, requested, c);
}

void conv_decide(const conv_geometry *g, conv_algorithm requested, conv_choice *c)
{
    decide(g, requested, c);
    if (requested == CONV_ALGO_AUTO) find_candidates(g, &strategy_table, c);
}

const char *conv_kernel_name(conv_kernel k)
{
    switch (k) {
    case CONV_KERNEL_GEMM: return "gemm";
    case CONV_KERNEL_TAPS: return "taps";
    case CONV_KERNEL_DIRECT_GRID: return "grid";
    case CONV_KERNEL_DIRECT_CHANNELS: return "channels";
    }
    return "?";
}

int conv_choice_describe(const conv_choice *c, char *buf, size_t size)
{
    if (c->algorithm != CONV_ALGO_DIRECT) return snprintf(buf, size, "%s", c->reason);
    return snprintf(buf, size, "%s fwd %s, dx %s, dW %s", c->reason,
                    conv_kernel_name(c->forward), conv_kernel_name(c->input_grad),
                    conv_kernel_name(c->weight_grad));
}
