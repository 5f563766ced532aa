/* The weight gradient of every convolution algorithm against a float64
 * reference when the sum cancels, as it does under batch norm: batch
 * norm's backward pass hands the convolution a dY with zero mean per
 * channel and no component along the convolution's (normalised) output,
 * so dW = sum over batch x pixels of dY * x is a small difference of large
 * terms, and long float32 running sums lose digits there that a random
 * upstream gradient does not show.
 *
 * To measure the convolution's own rounding and nothing else, the test
 * makes the dY the layer sees exact and known:
 *   - x = a/256 and w = b/64 (small integers a, b), so every partial sum
 *     of the forward pass is a multiple of 2^-14 below 2^10: the output y
 *     is exact in float32 for every algorithm and summation order;
 *   - the upstream gradient has batch norm's form, r = g - mean(g) -
 *     xhat * mean(g * xhat) per channel (g random, xhat = y normalised),
 *     rounded to multiples of 2^-14, and the MSE targets are t = y - r,
 *     also exact, so the loss's d = y - t = r exactly;
 *   - the loss's gradient dY = (2 d) * (1/count) rounded is read back
 *     from a calibration network (input -> 1x1 convolution with weight 1
 *     -> MSE, same count) as its input gradient, so the test does not
 *     copy the loss's formula.
 * The reference sums dY * x in double (per image) and long double.
 *
 * For im2col + GEMM, the direct kernels (PCNN_OPT_CONV_ALGORITHM 2; the
 * grid kernel for Cout <= 8, the channel-lane one above, the strided one)
 * and one GEMM per tap (3), at 1, 2 and 4 threads: the relative error
 * ||dW - ref|| / ||ref|| must be within 2x of im2col + GEMM's (and below
 * 1e-5), and a second run with the same thread count gives the same bits.
 *
 * Usage: test_wgrad_cancel [--table]   (--table prints every error) */
#define PCNN_EXPERIMENTAL /* PCNN_OPT_CONV_ALGORITHM: pcnn.h section 9 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

#define GRID 16384.0   /* 2^14: every value of y and r is a multiple of 1/GRID */
#define MAX_ERR 1e-5   /* no algorithm may be worse than this, whatever GEMM does */

enum { GEMM = 1, DIRECT = 2, TAPS = 3 }; /* PCNN_OPT_CONV_ALGORITHM */

typedef struct wcase {
    const char *name;
    int n, c, h, w, cout, k, stride, pad;
    int images; /* 1: smooth non-negative images (a first layer), 0: ReLU-like activations */
} wcase;

typedef struct geometry {
    int ho, wo;
    size_t po, nx, ny, nw; /* output pixels per plane; floats of x, y, w */
} geometry;

static geometry geometry_of(const wcase *t)
{
    geometry g;
    g.ho = (t->h + 2 * t->pad - t->k) / t->stride + 1;
    g.wo = (t->w + 2 * t->pad - t->k) / t->stride + 1;
    g.po = (size_t)g.ho * g.wo;
    g.nx = (size_t)t->n * t->c * t->h * t->w;
    g.ny = (size_t)t->n * t->cout * g.po;
    g.nw = (size_t)t->cout * t->c * t->k * t->k;
    return g;
}

static unsigned long long rng_state = 2024;
static double uniform(void) /* [0, 1) */
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static void *alloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) exit(2);
    return p;
}

/* Images like Fashion-MNIST's (a zero background, a few smooth blobs), or
 * activations after a ReLU (about a third zeros); multiples of 1/256 in
 * [0, 1). */
static void make_input(const wcase *t, float *x)
{
    const size_t plane = (size_t)t->h * t->w;
    for (int n = 0; n < t->n; n++)
        for (int c = 0; c < t->c; c++) {
            float *p = x + ((size_t)n * t->c + c) * plane;
            for (int i = 0; i < t->h; i++)
                for (int j = 0; j < t->w; j++) {
                    double v = 0.0;
                    if (!t->images) v = fmax(0.0, 1.5 * uniform() - 0.5);
                    p[i * t->w + j] = (float)v;
                }
            for (int b = 0; t->images && b < 3; b++) {
                const double ci = uniform() * t->h, cj = uniform() * t->w;
                const double s = 2.0 + uniform() * t->h / 4.0, a = 0.5 + 0.5 * uniform();
                for (int i = 0; i < t->h; i++)
                    for (int j = 0; j < t->w; j++) {
                        const double d2 = (i - ci) * (i - ci) + (j - cj) * (j - cj);
                        p[i * t->w + j] += (float)(a * exp(-d2 / (2.0 * s * s)));
                    }
            }
            for (size_t i = 0; i < plane; i++)
                p[i] = (float)(fmin(floor(p[i] * 256.0), 255.0) / 256.0);
        }
}

#define XI(n, c, i, j) ((((size_t)(n) * t->c + (c)) * t->h + (i)) * t->w + (j))
#define YI(n, o, p) (((size_t)(n) * t->cout + (o)) * g->po + (p))
#define WI(o, c, p, q) ((((size_t)(o) * t->c + (c)) * t->k + (p)) * t->k + (q))

/* y = conv(x, w) in double ([n][co][pixel]): exact by construction. */
static void forward(const wcase *t, const geometry *g, const float *x, const float *w, double *y)
{
    for (int n = 0; n < t->n; n++)
        for (int o = 0; o < t->cout; o++)
            for (int i = 0; i < g->ho; i++)
                for (int j = 0; j < g->wo; j++) {
                    double s = 0.0;
                    for (int c = 0; c < t->c; c++)
                        for (int p = 0; p < t->k; p++) {
                            const int ih = i * t->stride - t->pad + p;
                            if (ih < 0 || ih >= t->h) continue;
                            for (int q = 0; q < t->k; q++) {
                                const int iw = j * t->stride - t->pad + q;
                                if (iw >= 0 && iw < t->w)
                                    s += (double)w[WI(o, c, p, q)] * x[XI(n, c, ih, iw)];
                            }
                        }
                    y[YI(n, o, (size_t)i * g->wo + j)] = s;
                }
}

/* Targets t = y - r, r of batch norm's backward form, both on the grid. */
static void make_targets(const wcase *t, const geometry *g, const double *y, float *targets)
{
    const size_t m = (size_t)t->n * g->po;
    double *gr = alloc(g->ny, sizeof *gr);
    for (int n = 0; n < t->n; n++) {
        const double image = 2.0 * uniform() - 1.0; /* this sample's share of the loss */
        for (size_t i = 0; i < (size_t)t->cout * g->po; i++)
            gr[(size_t)n * t->cout * g->po + i] = image + 0.25 * (2.0 * uniform() - 1.0);
    }
    for (int o = 0; o < t->cout; o++) {
        double mean = 0.0, var = 0.0, mg = 0.0, mgx = 0.0;
        for (int n = 0; n < t->n; n++)
            for (size_t p = 0; p < g->po; p++) mean += y[YI(n, o, p)];
        mean /= (double)m;
        for (int n = 0; n < t->n; n++)
            for (size_t p = 0; p < g->po; p++) var += pow(y[YI(n, o, p)] - mean, 2.0);
        const double istd = 1.0 / sqrt(var / (double)m + 1e-5);
        for (int n = 0; n < t->n; n++)
            for (size_t p = 0; p < g->po; p++) {
                const size_t at = YI(n, o, p);
                mg += gr[at], mgx += gr[at] * (y[at] - mean) * istd;
            }
        mg /= (double)m, mgx /= (double)m;
        for (int n = 0; n < t->n; n++)
            for (size_t p = 0; p < g->po; p++) {
                const size_t at = YI(n, o, p);
                const double r = 32.0 * (gr[at] - mg - (y[at] - mean) * istd * mgx);
                const double target = y[at] - round(r * GRID) / GRID;
                if (fabs(target) >= 1024.0) {
                    printf("FAIL %s: target %g off the exact grid\n", t->name, target);
                    exit(1);
                }
                targets[at] = (float)target;
            }
    }
    free(gr);
}

/* The loss's gradient for outputs y and these targets, as the library
 * computes it: the input gradient of input -> 1x1 conv (weight 1) -> MSE
 * with the same number of outputs per sample. */
static void loss_gradient(const wcase *t, const geometry *g, const double *y,
                          const float *targets, float *dy)
{
    const int per_sample = (int)((size_t)t->cout * g->po);
    float *in = alloc(g->ny, sizeof *in), one = 1.0f, loss;
    for (size_t i = 0; i < g->ny; i++) in[i] = (float)y[i];
    pcnn_net *net;
    pcnn_layer *x, *id;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, 1, 1, per_sample, &x));
    CK(pcnn_conv2d(net, x, 1, 1, 1, 0, 0, &id));
    CK(pcnn_net_set_loss(net, id, PCNN_LOSS_MSE));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    CK(pcnn_net_finalize(net, t->n));
    CK(pcnn_net_set_params(net, &one, 1));
    CK(pcnn_net_compute_gradients(net, t->n, in, NULL, targets, &loss));
    CK(pcnn_net_get_input_grad(net, dy, g->ny));
    pcnn_net_destroy(&net);
    free(in);
}

/* dW = sum dY * x: each image's sum in double, the images' in long double. */
static void reference(const wcase *t, const geometry *g, const float *x, const float *dy,
                      double *dw)
{
    long double *total = alloc(g->nw, sizeof *total);
    double *part = alloc(g->nw, sizeof *part);
    for (int n = 0; n < t->n; n++) {
        memset(part, 0, g->nw * sizeof *part);
        for (int o = 0; o < t->cout; o++)
            for (int i = 0; i < g->ho; i++)
                for (int j = 0; j < g->wo; j++) {
                    const double d = dy[YI(n, o, (size_t)i * g->wo + j)];
                    for (int c = 0; c < t->c; c++)
                        for (int p = 0; p < t->k; p++) {
                            const int ih = i * t->stride - t->pad + p;
                            if (ih < 0 || ih >= t->h) continue;
                            for (int q = 0; q < t->k; q++) {
                                const int iw = j * t->stride - t->pad + q;
                                if (iw >= 0 && iw < t->w)
                                    part[WI(o, c, p, q)] += d * x[XI(n, c, ih, iw)];
                            }
                        }
                }
        for (size_t i = 0; i < g->nw; i++) total[i] += part[i];
    }
    for (size_t i = 0; i < g->nw; i++) dw[i] = (double)total[i];
    free(total), free(part);
}

/* The convolution's dW after one gradient computation with this algorithm
 * and thread count. */
static void run(const wcase *t, const geometry *g, const float *x, const float *w,
                const float *targets, int algorithm, int threads, float *dw)
{
    pcnn_net *net;
    pcnn_layer *in, *conv;
    float loss;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, t->c, t->h, t->w, &in));
    CK(pcnn_conv2d(net, in, t->cout, t->k, t->stride, t->pad, 0, &conv));
    CK(pcnn_net_set_loss(net, conv, PCNN_LOSS_MSE));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, threads));
    CK(pcnn_net_set_option(net, PCNN_OPT_CONV_ALGORITHM, algorithm));
    CK(pcnn_net_finalize(net, t->n));
    CK(pcnn_net_set_params(net, w, g->nw));
    CK(pcnn_net_compute_gradients(net, t->n, x, NULL, targets, &loss));
    CK(pcnn_net_get_grads(net, dw, g->nw));
    pcnn_net_destroy(&net);
}

/* ||a - b|| / ||b||. */
static double rel_err(const float *a, const double *b, size_t n)
{
    double e = 0.0, r = 1e-300;
    for (size_t i = 0; i < n; i++) e += (a[i] - b[i]) * (a[i] - b[i]), r += b[i] * b[i];
    return sqrt(e / r);
}

static int table;

static void check_case(const wcase *t)
{
    const geometry g = geometry_of(t);
    float *x = alloc(g.nx, sizeof *x), *w = alloc(g.nw, sizeof *w);
    float *targets = alloc(g.ny, sizeof *targets), *dy = alloc(g.ny, sizeof *dy);
    float *dw = alloc(g.nw, sizeof *dw), *again = alloc(g.nw, sizeof *again);
    double *y = alloc(g.ny, sizeof *y), *ref = alloc(g.nw, sizeof *ref);
    make_input(t, x);
    for (size_t i = 0; i < g.nw; i++) w[i] = (float)((int)(uniform() * 65.0) - 32) / 64.0f;
    forward(t, &g, x, w, y);
    make_targets(t, &g, y, targets);
    loss_gradient(t, &g, y, targets, dy);
    reference(t, &g, x, dy, ref);

    static const int threads[3] = {1, 2, 4};
    static const int algos[3] = {GEMM, DIRECT, TAPS};
    static const char *names[3] = {"gemm", "direct", "taps"};
    for (int ti = 0; ti < 3; ti++) {
        double gemm_err = 0.0;
        for (int ai = 0; ai < 3; ai++) {
            if (algos[ai] == TAPS && t->stride > 1) continue; /* taps: stride 1 only */
            run(t, &g, x, w, targets, algos[ai], threads[ti], dw);
            const double e = rel_err(dw, ref, g.nw);
            if (algos[ai] == GEMM) gemm_err = e;
            if (table)
                printf("%-26s %-6s %d thread(s): rel err %.2e (%.1fx gemm)\n", t->name,
                       names[ai], threads[ti], e, e / gemm_err);
            const double bound = fmin(2.0 * gemm_err, MAX_ERR);
            EXPECT(e <= bound, "%s: %s, %d thread(s): dW rel err %.3g > %.3g (gemm %.3g)",
                   t->name, names[ai], threads[ti], e, bound, gemm_err);
            run(t, &g, x, w, targets, algos[ai], threads[ti], again);
            EXPECT(memcmp(dw, again, g.nw * sizeof *dw) == 0,
                   "%s: %s, %d thread(s): two runs differ", t->name, names[ai], threads[ti]);
        }
    }
    free(x), free(w), free(targets), free(dy), free(dw), free(again), free(y), free(ref);
}

int main(int argc, char **argv)
{
    table = argc > 1 && strcmp(argv[1], "--table") == 0;
    static const wcase cases[] = {
        /* The issue's: the first layer of a Fashion-MNIST conv-BN-ReLU-pool
         * network, with few output channels (the grid kernel) and more
         * (channels in the vector lanes). */
        {"1->6 k5p2 28x28 N64", 64, 1, 28, 28, 6, 5, 1, 2, 1},
        {"1->32 k5p2 28x28 N64", 64, 1, 28, 28, 32, 5, 1, 2, 1},
        {"3->16 k3p1 32x32 N32", 32, 3, 32, 32, 16, 3, 1, 1, 1},
        {"64->64 k3p1 16x16 N32", 32, 64, 16, 16, 64, 3, 1, 1, 0},
        {"32->64 k3s2p1 16x16 N32", 32, 32, 16, 16, 64, 3, 2, 1, 0}, /* strided */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);
    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf("weight gradients of cancelling sums: every algorithm within 2x of im2col + GEMM\n");
    return 0;
}
