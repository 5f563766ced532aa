/* bf16 training of a small CNN learns, and tracks fp32: the same network,
 * seed and batches (a bright blob in one of four quadrants under noise,
 * the quadrant its class) trained in both precisions.  bf16's loss must
 * fall below a quarter of its start, every step's loss stay within 5 % of
 * the start's of fp32's (bf16 perturbs each gradient by ~2^-8 relative;
 * the trajectories drift apart slowly, not by their size), and both must
 * classify held-out batches at >= 85 %, within 5 points of each other. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "../common/expect.h"
#include "pcnn.h"

#define CK(call)                                                                          \
    do {                                                                                  \
        pcnn_status s_ = (call);                                                          \
        if (s_ != PCNN_OK) {                                                              \
            printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, pcnn_last_error()); \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

#define B 16
#define S 12
#define STEPS 40

static pcnn_net *build(int precision)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, 1, S, S, &l));
    CK(pcnn_conv2d(net, l, 8, 3, 1, 1, 1, &l));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_maxpool2d(net, l, 2, 2, 0, &l));
    CK(pcnn_conv2d(net, l, 16, 3, 1, 1, 1, &l));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_flatten(net, l, &l));
    CK(pcnn_dense(net, l, 4, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_MOMENTUM));
    CK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 0.02));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 11));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 2));
    CK(pcnn_net_set_option(net, PCNN_OPT_PRECISION, precision));
    CK(pcnn_net_finalize(net, B));
    return net;
}

static void batch(unsigned seed, float *x, int32_t *y)
{
    unsigned s = seed;
    for (int n = 0; n < B; n++) {
        s = s * 1664525u + 1013904223u;
        const int c = (int)(s >> 28) & 3;
        y[n] = c;
        const int oy = (c / 2) * 6 + 1, ox = (c % 2) * 6 + 1;
        for (int i = 0; i < S * S; i++) {
            s = s * 1664525u + 1013904223u;
            const int r = i / S, q = i % S;
            const bool blob = r >= oy && r < oy + 4 && q >= ox && q < ox + 4;
            x[n * S * S + i] = (float)((s >> 8) & 0xffff) / 65536.0f - 0.5f + (blob ? 0.3f : 0.0f);
        }
    }
}

static double accuracy(pcnn_net *net)
{
    static float x[B * S * S], out[B * 4];
    int32_t y[B];
    int right = 0;
    for (int k = 0; k < 4; k++) {
        batch(777u + (unsigned)k, x, y);
        CK(pcnn_net_predict(net, B, x, out, B * 4));
        for (int n = 0; n < B; n++) {
            int best = 0;
            for (int c = 1; c < 4; c++)
                if (out[n * 4 + c] > out[n * 4 + best]) best = c;
            right += best == y[n];
        }
    }
    return right / (4.0 * B);
}

int main(void)
{
    static float x[B * S * S];
    int32_t y[B];
    pcnn_net *f = build(PCNN_PRECISION_FP32), *h = build(PCNN_PRECISION_BF16);
    float first_f = 0, first_h = 0, lf = 0, lh = 0;
    double worst = 0.0;
    for (int step = 0; step < STEPS; step++) {
        batch(1000u + (unsigned)step, x, y);
        CK(pcnn_net_train_step(f, B, x, y, NULL, &lf));
        CK(pcnn_net_train_step(h, B, x, y, NULL, &lh));
        if (step == 0) first_f = lf, first_h = lh;
        worst = fmax(worst, fabs((double)lh - lf));
    }
    const double af = accuracy(f), ah = accuracy(h);
    printf("loss fp32 %.4f -> %.4f, bf16 %.4f -> %.4f; worst step difference %.4f (%.2f %% of "
           "the start); held-out accuracy fp32 %.1f %%, bf16 %.1f %%\n",
           first_f, lf, first_h, lh, worst, 100.0 * worst / first_f, 100 * af, 100 * ah);
    EXPECT(lh < 0.25f * first_h, "bf16 did not learn: loss %.4f -> %.4f", first_h, lh);
    EXPECT(worst <= 0.05 * first_f, "bf16's losses left fp32's by %.4f", worst);
    EXPECT(af >= 0.85 && ah >= 0.85 && fabs(af - ah) <= 0.05, "held-out accuracy fp32 %.3f bf16 %.3f",
           af, ah);
    pcnn_net_destroy(&f);
    pcnn_net_destroy(&h);
    if (failures) return 1;
    printf("bf16 training learns and tracks fp32\n");
    return 0;
}
