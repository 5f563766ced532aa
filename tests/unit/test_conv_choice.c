/* The convolution's algorithm choice (strategy/conv_choice.h) against the
 * rules it replaced: the predicates below are copied from conv2d.c's
 * conv_setup and the kernels' direct_conv_preferred,
 * direct_channels_preferred and direct_wgrad_few_preferred as they were
 * before the choice moved to strategy/.  A grid of shapes, every
 * requested algorithm, with and without AVX-512 and a kept im2col matrix,
 * must give the same algorithm and the same kernel for every pass; the
 * grid must reach every branch.  Then the reasons for a few known shapes,
 * and the summary of a finalized network. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../common/expect.h"
#include "kernels/conv_direct.h"
#include "kernels/conv_taps.h"
#include "pcnn.h"
#include "strategy/conv_choice.h"

/* ---- The old rules, verbatim but for names. ---- */

static bool old_direct_conv_preferred(int cin, int h, int w, int k, int pad)
{
    direct_grid g;
    direct_grid_init(&g, 1, h, w, k, 1, pad);
    const double useful = (double)g.ho * g.wo / ((double)g.hp * g.wp);
    return useful >= 0.75 || (useful >= 0.6 && cin <= 64) ||
           (useful >= 0.45 && cin * k * k <= 256);
}

static bool old_direct_channels_preferred(int nout, int oh, int ow, const direct_grid *g)
{
    return nout >= 64 && (double)oh * ow < 0.85 * (double)g->hp * g->wp;
}

static bool old_direct_wgrad_few_preferred(int cout) { return cout <= 8; }

static bool old_direct_conv_supports(int k, int stride, int pad)
{
    return stride == 1 && (k == 3 || k == 5) && pad >= 0 && pad < k;
}

static bool old_taps_preferred(int cin, int cout, int h, int w, int k, int pad)
{
    return cin >= 32 && cout >= 32 && conv_taps_useful(h, w, k, pad) <= 0.75;
}

static bool old_strided_preferred(int cin, int cout, int k)
{
    return cout >= 32 && cin * k * k <= 160;
}

typedef struct old_choice {
    bool taps, direct, strided, forward_channels, dx_channels, few, col;
} old_choice;

/* conv_setup's decisions (and conv2d_direct.c's few), with
 * direct_conv_available() as `available`. */
static old_choice old_setup(const conv_geometry *g, int conv_algorithm, bool available)
{
    old_choice p = {0};
    const bool pointwise = g->k == 1 && g->stride == 1 && g->pad == 0;
    const int ho = (g->h + 2 * g->pad - g->k) / g->stride + 1;
    const int wo = (g->w + 2 * g->pad - g->k) / g->stride + 1;
    p.taps = g->stride == 1 && !pointwise &&
             (conv_algorithm == 3 ||
              (conv_algorithm == 0 && old_taps_preferred(g->cin, g->cout, g->h, g->w, g->k,
                                                         g->pad)));
    if (p.taps) return p;
    p.direct = (conv_algorithm == 0 || conv_algorithm == 2) &&
               old_direct_conv_supports(g->k, g->stride, g->pad) &&
               (conv_algorithm == 2 ||
                old_direct_conv_preferred(g->cin, g->h, g->w, g->k, g->pad)) &&
               available;
    if (p.direct) {
        direct_grid grid;
        direct_grid_init(&grid, 1, g->h, g->w, g->k, 1, g->pad);
        p.forward_channels = old_direct_channels_preferred(g->cout, ho, wo, &grid);
        p.dx_channels = old_direct_channels_preferred(g->cin, g->h, g->w, &grid);
        p.few = old_direct_wgrad_few_preferred(g->cout);
    }
    p.strided = g->stride > 1 && (g->k == 3 || g->k == 5) &&
                (conv_algorithm == 2 ||
                 (conv_algorithm == 0 && old_strided_preferred(g->cin, g->cout, g->k))) &&
                available;
    p.col = g->keep_im2col && !pointwise && !p.direct && !p.strided;
    return p;
}

/* ---- The grid. ---- */

enum { N_OUTCOMES = 14 };
static const char *const outcome_names[N_OUTCOMES] = {
    "taps auto", "taps forced", "direct auto", "direct forced", "strided auto",
    "strided forced", "gemm auto", "gemm forced", "gemm fallback of a forced one",
    "forward channels", "dx channels", "dW few", "dW channels", "kept col"};
static long outcomes[N_OUTCOMES];

static conv_kernel lanes(bool channels)
{
    return channels ? CONV_KERNEL_DIRECT_CHANNELS : CONV_KERNEL_DIRECT_GRID;
}

static void check_one(const conv_geometry *g, int requested)
{
    const old_choice o = old_setup(g, requested, g->direct_available);
    conv_choice c;
    memset(&c, 0x5a, sizeof c); /* every field must be written */
    conv_decide(g, (conv_algorithm)requested, &c);
    conv_algorithm algorithm = CONV_ALGO_GEMM;
    conv_kernel f = CONV_KERNEL_GEMM, dx = CONV_KERNEL_GEMM, dw = CONV_KERNEL_GEMM;
    if (o.taps) {
        algorithm = CONV_ALGO_TAPS, f = dx = dw = CONV_KERNEL_TAPS;
    } else if (o.direct) {
        algorithm = CONV_ALGO_DIRECT;
        f = lanes(o.forward_channels), dx = lanes(o.dx_channels), dw = lanes(!o.few);
    } else if (o.strided) {
        algorithm = CONV_ALGO_DIRECT;
        f = dw = CONV_KERNEL_DIRECT_CHANNELS;
    }
    const bool same = c.algorithm == algorithm && c.forward == f && c.input_grad == dx &&
                      c.weight_grad == dw && c.keep_col == o.col;
    EXPECT(same,
           "cin %d cout %d k%d s%d p%d %dx%d requested %d avx512 %d keep %d: chose %d "
           "(%d %d %d col %d), the old rules %d (%d %d %d col %d)",
           g->cin, g->cout, g->k, g->stride, g->pad, g->h, g->w, requested,
           g->direct_available, g->keep_im2col, c.algorithm, c.forward, c.input_grad,
           c.weight_grad, c.keep_col, algorithm, f, dx, dw, o.col);
    const size_t len = strnlen(c.reason, sizeof c.reason);
    static const char *const names[] = {"?", "gemm", "direct", "taps"};
    EXPECT(len > 0 && len < sizeof c.reason &&
               strncmp(c.reason, names[algorithm], strlen(names[algorithm])) == 0,
           "reason \"%.*s\" for algorithm %d", (int)len, c.reason, algorithm);
    const bool forced = strstr(c.reason, "forced") != NULL;
    EXPECT(forced == (requested != 0 && (int)algorithm == requested),
           "reason \"%s\": requested %d, chose %d", c.reason, requested, algorithm);

    const bool automatic = requested == 0;
    if (o.taps) outcomes[automatic ? 0 : 1]++;
    if (o.direct) outcomes[automatic ? 2 : 3]++;
    if (o.strided) outcomes[automatic ? 4 : 5]++;
    if (algorithm == CONV_ALGO_GEMM) outcomes[automatic ? 6 : requested == 1 ? 7 : 8]++;
    if (o.forward_channels) outcomes[9]++;
    if (o.dx_channels) outcomes[10]++;
    if (o.direct && o.few) outcomes[11]++;
    if (o.direct && !o.few) outcomes[12]++;
    if (o.col) outcomes[13]++;
}

static void walk_grid(void)
{
    static const int channels[] = {1, 3, 8, 9, 17, 31, 32, 63, 64, 65, 256};
    static const int planes[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 14, 16, 28, 32, 56};
    const int nc = sizeof channels / sizeof *channels, np = sizeof planes / sizeof *planes;
    long shapes = 0;
    for (int k = 1; k <= 7; k++)
        for (int stride = 1; stride <= 3; stride++)
            for (int pad = 0; pad < k; pad++)
                for (int hi = 0; hi < np; hi++)
                    for (int wi = hi; wi < np && wi <= hi + 2; wi++) {
                        const int h = planes[hi], w = planes[wi];
                        if (k > h + 2 * pad || k > w + 2 * pad) continue; /* rejected */
                        for (int ci = 0; ci < nc; ci++)
                            for (int co = 0; co < nc; co++)
                                for (int flags = 0; flags < 4; flags++) {
                                    const conv_geometry g = {
                                        .cin = channels[ci], .cout = channels[co], .k = k,
                                        .stride = stride, .pad = pad, .h = h, .w = w,
                                        .batch = 8, .threads = 2, .keep_im2col = flags & 1,
                                        .direct_available = (flags & 2) != 0};
                                    for (int requested = 0; requested <= 3; requested++)
                                        check_one(&g, requested);
                                    shapes++;
                                }
                    }
    printf("%ld geometries x 4 requests\n", shapes);
    for (int i = 0; i < N_OUTCOMES; i++) {
        printf("  %-30s %ld\n", outcome_names[i], outcomes[i]);
        EXPECT(outcomes[i] > 0, "the grid never reaches \"%s\"", outcome_names[i]);
    }
}

/* ---- Known shapes: the decision and its words. ---- */

static void expect_choice(int cin, int cout, int k, int stride, int pad, int hw, bool avx512,
                          int requested, conv_algorithm algorithm, const char *text)
{
    const conv_geometry g = {.cin = cin, .cout = cout, .k = k, .stride = stride, .pad = pad,
                             .h = hw, .w = hw, .batch = 32, .threads = 2,
                             .direct_available = avx512};
    conv_choice c;
    conv_decide(&g, (conv_algorithm)requested, &c);
    char line[128];
    conv_choice_describe(&c, line, sizeof line);
    EXPECT(c.algorithm == algorithm && strcmp(line, text) == 0,
           "%d -> %d k%d s%d p%d on %dx%d: %d \"%s\", expected %d \"%s\"", cin, cout, k, stride,
           pad, hw, hw, c.algorithm, line, algorithm, text);
}

static void known_shapes(void)
{
    /* 8x8 "same": 64 of 81 grid positions are pixels; 64 channels fill
     * the channel-lane tile. */
    expect_choice(64, 64, 3, 1, 1, 8, true, 0, CONV_ALGO_DIRECT,
                  "direct (grid 79 % useful) fwd channels, dx channels, dW channels");
    /* 32x32: the grid kernel; 3 output channels: dW with grid lanes. */
    expect_choice(64, 3, 3, 1, 1, 32, true, 0, CONV_ALGO_DIRECT,
                  "direct (grid 94 % useful) fwd grid, dx grid, dW grid");
    /* 4x4 with 64 input channels: 16 of 25 grid positions. */
    expect_choice(64, 16, 3, 1, 1, 4, true, 0, CONV_ALGO_DIRECT,
                  "direct (grid 64 % useful, Cin 64) fwd grid, dx channels, dW channels");
    /* LeNet's valid 5x5 on 28x28: 24x24 of 28x28. */
    expect_choice(1, 6, 5, 1, 0, 28, true, 0, CONV_ALGO_DIRECT,
                  "direct (grid 73 % useful, Cin 1) fwd grid, dx grid, dW grid");
    expect_choice(128, 128, 5, 1, 0, 14, true, 0, CONV_ALGO_GEMM,
                  "gemm (grid 51 % useful, Cin 128)");
    /* 3x3 "same" on 4x4: 31 % of the products read padding. */
    expect_choice(256, 256, 3, 1, 1, 4, true, 0, CONV_ALGO_TAPS, "taps (padding 31 % of work)");
    expect_choice(256, 256, 3, 1, 1, 4, false, 0, CONV_ALGO_TAPS, "taps (padding 31 % of work)");
    expect_choice(16, 32, 3, 2, 1, 32, true, 0, CONV_ALGO_DIRECT,
                  "direct strided (Cin*K*K 144, Cout 32) fwd channels, dx gemm, dW channels");
    expect_choice(64, 128, 3, 2, 1, 32, true, 0, CONV_ALGO_GEMM,
                  "gemm (strided, Cin*K*K 576, Cout 128)");
    expect_choice(64, 64, 3, 1, 1, 32, false, 0, CONV_ALGO_GEMM, "gemm (direct needs AVX-512)");
    expect_choice(64, 64, 7, 2, 3, 32, true, 0, CONV_ALGO_GEMM, "gemm (no direct kernel for k=7)");
    expect_choice(64, 64, 1, 1, 0, 32, true, 0, CONV_ALGO_GEMM,
                  "gemm (1x1: x is the im2col matrix)");
    expect_choice(64, 64, 3, 1, 1, 32, true, 1, CONV_ALGO_GEMM,
                  "gemm (forced by PCNN_OPT_CONV_ALGORITHM)");
    expect_choice(64, 64, 3, 1, 1, 32, true, 3, CONV_ALGO_TAPS,
                  "taps (forced by PCNN_OPT_CONV_ALGORITHM)");
    expect_choice(64, 64, 3, 2, 1, 32, true, 3, CONV_ALGO_GEMM, "gemm (taps need stride 1)");
    expect_choice(8, 8, 3, 2, 1, 32, true, 2, CONV_ALGO_DIRECT,
                  "direct strided (forced by PCNN_OPT_CONV_ALGORITHM) fwd channels, dx gemm, "
                  "dW channels");
    /* Padding >= kernel: windows of pure padding, whatever was asked for. */
    for (int requested = 0; requested <= 3; requested++) {
        expect_choice(64, 64, 1, 1, 1, 8, true, requested, CONV_ALGO_GEMM,
                      "gemm (padding 1 >= kernel 1)");
        expect_choice(256, 256, 3, 1, 3, 4, true, requested, CONV_ALGO_GEMM,
                      "gemm (padding 3 >= kernel 3)");
        expect_choice(16, 32, 3, 2, 4, 32, true, requested, CONV_ALGO_GEMM,
                      "gemm (padding 4 >= kernel 3)");
    }
    /* bf16 products: im2col + GEMM, whatever was asked for (the direct
     * and per-tap kernels are fp32), the im2col matrix kept as asked. */
    for (int requested = 0; requested <= 3; requested++)
        for (int keep = 0; keep <= 1; keep++) {
            const conv_geometry g = {.cin = 64, .cout = 64, .k = 3, .stride = 1, .pad = 1,
                                     .h = 8, .w = 8, .batch = 32, .threads = 2,
                                     .keep_im2col = keep, .direct_available = true,
                                     .bf16 = true};
            conv_choice c;
            conv_decide(&g, (conv_algorithm)requested, &c);
            EXPECT(c.algorithm == CONV_ALGO_GEMM && c.forward == CONV_KERNEL_GEMM &&
                       c.input_grad == CONV_KERNEL_GEMM && c.weight_grad == CONV_KERNEL_GEMM &&
                       c.keep_col == (keep != 0) && strcmp(c.reason, "gemm (bf16 products)") == 0,
                   "bf16, requested %d, keep %d: algorithm %d \"%s\"", requested, keep,
                   c.algorithm, c.reason);
        }
}

/* ---- The summary of a finalized network shows each convolution's choice. ---- */

static void summary_shows_choices(void)
{
    pcnn_net *net = NULL;
    pcnn_layer *l, *conv_a, *conv_b;
    char text[4096];
    EXPECT(pcnn_net_create(&net) == PCNN_OK, "create: %s", pcnn_last_error());
    pcnn_net_input(net, 64, 4, 4, &l);
    pcnn_conv2d(net, l, 64, 3, 1, 1, 0, &conv_a); /* per tap on any CPU */
    pcnn_relu(net, conv_a, &l);
    pcnn_conv2d(net, l, 8, 1, 1, 0, 1, &conv_b);
    pcnn_net_set_loss(net, conv_b, PCNN_LOSS_MSE);
    pcnn_net_summary(net, text, sizeof text, NULL);
    EXPECT(strchr(text, '[') == NULL, "choices before finalize:\n%s", text);
    EXPECT(pcnn_net_finalize(net, 4) == PCNN_OK, "finalize: %s", pcnn_last_error());
    pcnn_net_summary(net, text, sizeof text, NULL);
    printf("%s", text);
    EXPECT(strstr(text, "k=3 s=1 p=1  [taps (padding 31 % of work)]") != NULL,
           "no taps choice in:\n%s", text);
    EXPECT(strstr(text, "k=1 s=1 p=0 bias  [gemm (1x1: x is the im2col matrix)]") != NULL,
           "no 1x1 choice in:\n%s", text);
    int brackets = 0;
    for (const char *s = text; (s = strchr(s, '[')) != NULL; s++) brackets++;
    EXPECT(brackets == 2, "%d choices shown for 2 convolutions", brackets);
    pcnn_net_destroy(&net);
}

int main(void)
{
    walk_grid();
    known_shapes();
    summary_shows_choices();
    if (failures) printf("%d failure(s)\n", failures);
    else printf("conv choice: all checks passed\n");
    return failures ? 1 : 0;
}
