/* The measured convolution choice (strategy/conv_measure.h,
 * graph/conv_measure.c): the pick is a pure function of the timings (the
 * fastest candidate; ties to the rules' choice, then the lower algorithm;
 * a broken timing leaves the rules'), candidates appear only where the
 * rules are unsure, big enough and automatic, and a finalized network
 * takes the pick and shows the times behind it, or keeps the rules' choice
 * when the budget does not cover the layer. */
#define PCNN_EXPERIMENTAL
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../common/expect.h"
#include "kernels/conv_direct.h"
#include "pcnn.h"
#include "strategy/conv_measure.h"

static conv_choice rules_of(conv_algorithm a)
{
    conv_choice c = {.algorithm = a, .num_candidates = 3,
                     .candidates = {CONV_ALGO_GEMM, CONV_ALGO_DIRECT, CONV_ALGO_TAPS}};
    return c;
}

static void check_pick(void)
{
    const conv_choice d = rules_of(CONV_ALGO_DIRECT);
    const double fastest_taps[4] = {0, 3.0, 2.0, 1.0}, fastest_gemm[4] = {0, 1.0, 2.0, 3.0};
    EXPECT(conv_measure_pick(&d, fastest_taps) == CONV_ALGO_TAPS, "the fastest: taps");
    EXPECT(conv_measure_pick(&d, fastest_gemm) == CONV_ALGO_GEMM, "the fastest: gemm");
    const double all_tie[4] = {0, 1.5, 1.5, 1.5}, low_tie[4] = {0, 1.0, 2.0, 1.0};
    EXPECT(conv_measure_pick(&d, all_tie) == CONV_ALGO_DIRECT, "a tie keeps the rules' choice");
    EXPECT(conv_measure_pick(&d, low_tie) == CONV_ALGO_GEMM, "a tie of others: the lower");
    const double broken[4] = {0, NAN, 1.0, 1.0}, zero[4] = {0, 0.0, 2.0, 1.0};
    EXPECT(conv_measure_pick(&d, broken) == CONV_ALGO_DIRECT, "NaN leaves the rules' choice");
    EXPECT(conv_measure_pick(&d, zero) == CONV_ALGO_DIRECT, "0 ms leaves the rules' choice");
    /* Deterministic: the same timings give the same pick, every time. */
    const double close[4] = {0, 1.0000001, 1.0, 1.0000002};
    for (int i = 0; i < 100; i++)
        EXPECT(conv_measure_pick(&d, close) == CONV_ALGO_DIRECT, "close timings, run %d", i);
    char why[64];
    const double ms[4] = {0, 1.8, 1.23, 2.1};
    conv_measure_reason(&d, CONV_ALGO_DIRECT, ms, why, sizeof why);
    EXPECT(strcmp(why, "direct 1.23 ms vs gemm 1.8, taps 2.1 (measured)") == 0, "reason %s", why);
}

static void check_candidates(void)
{
    conv_geometry g = {.cin = 64, .cout = 64, .k = 3, .stride = 1, .pad = 1, .h = 8, .w = 8,
                       .batch = 32, .threads = 1, .keep_im2col = true, .direct_available = true,
                       .measure = true};
    conv_choice c;
    conv_decide(&g, CONV_ALGO_AUTO, &c);
    /* Grid 79 % useful against a threshold of 75 %: unsure. */
    EXPECT(c.algorithm == CONV_ALGO_DIRECT && c.num_candidates == 3, "unsure: %d candidates",
           c.num_candidates);
    conv_decide(&g, CONV_ALGO_DIRECT, &c);
    EXPECT(c.num_candidates == 0, "forced: nothing to time");
    g.measure = false;
    conv_decide(&g, CONV_ALGO_AUTO, &c);
    EXPECT(c.num_candidates == 0 && c.algorithm == CONV_ALGO_DIRECT, "measure off: the rules");
    g.measure = true, g.batch = 1;
    conv_decide(&g, CONV_ALGO_AUTO, &c);
    EXPECT(c.num_candidates == 0, "below the floor (%.0f MFLOP)", conv_geometry_mflop(&g));
    g.batch = 32, g.h = g.w = 64;
    conv_decide(&g, CONV_ALGO_AUTO, &c);
    EXPECT(c.num_candidates == 0 && c.algorithm == CONV_ALGO_DIRECT, "sure: 97 %% useful");
    g.h = g.w = 8, g.k = 1, g.pad = 0;
    conv_decide(&g, CONV_ALGO_AUTO, &c);
    EXPECT(c.num_candidates == 0, "1x1: GEMM, sure");
    g.k = 3, g.pad = 1, g.stride = 2, g.cin = 24, g.batch = 256;
    conv_decide(&g, CONV_ALGO_AUTO, &c); /* Cin*K*K 216 against 160: unsure */
    EXPECT(c.num_candidates == 2 && c.candidates[0] == CONV_ALGO_GEMM &&
               c.candidates[1] == CONV_ALGO_DIRECT,
           "strided: gemm and direct, %d", c.num_candidates);
}

#define CK(call) EXPECT((call) == PCNN_OK, "%s: %s", #call, pcnn_last_error())

/* One unsure layer (64 -> 64, 8x8) in a network: with the test hook making
 * `slow` 1e6 times slower, the pick avoids it and the summary says so. */
static void check_network(conv_algorithm slow, const char *want, double budget_ms)
{
    conv_measure_debug_budget(budget_ms);
    double scale[4] = {1, 1, 1, 1};
    scale[slow] = 1e6;
    if (slow == CONV_ALGO_DIRECT) scale[CONV_ALGO_TAPS] = 1e6; /* GEMM must win */
    conv_measure_debug(scale, true);
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, 64, 8, 8, &l));
    CK(pcnn_conv2d(net, l, 64, 3, 1, 1, 1, &l));
    CK(pcnn_global_avgpool(net, l, &l));
    CK(pcnn_dense(net, l, 4, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    CK(pcnn_net_finalize(net, 4));
    char text[4096];
    CK(pcnn_net_summary(net, text, sizeof text, NULL));
    const char *line = strstr(text, "conv2d");
    const char *mark = line ? strchr(line, '[') : NULL;
    const bool measured = mark && strstr(mark, "(measured)");
    EXPECT(mark && strncmp(mark + 1, want, strlen(want)) == 0 && measured == (budget_ms != 0),
           "slow %d budget %g: want [%s..%s]: %s", (int)slow, budget_ms, want,
           budget_ms != 0 ? "(measured)" : "", line ? line : text);
    pcnn_net_destroy(&net);
    conv_measure_debug(NULL, false);
    conv_measure_debug_budget(-1.0);
}

int main(void)
{
    check_pick();
    check_candidates();
    if (direct_conv_available()) {
        check_network(CONV_ALGO_DIRECT, "gemm ", -1.0);
        check_network(CONV_ALGO_GEMM, "", -1.0);
        /* No budget: the warm-up shows the layer does not fit, the rules decide. */
        check_network(CONV_ALGO_DIRECT, "direct (grid 79 % useful)", 0.0);
    }
    if (failures) printf("%d failures\n", failures);
    else printf("all passed\n");
    return failures != 0;
}
