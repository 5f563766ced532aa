/* The convolution layer's two algorithms through the public API, against a
 * naive convolution in double: output, input gradient and weight/bias
 * gradients of an MSE loss.
 *
 * im2col + GEMM (PCNN_OPT_CONV_ALGORITHM 1) works in bands of output rows
 * that may start mid-sample or span samples: it runs with the im2col
 * matrix kept and recomputed (which must agree bitwise), on 1 and 2
 * threads; shapes make the bands 3 rows of 24-row samples (wide input) and
 * about 1.2 samples (narrow input).  The direct kernel (for stride-1
 * k3/k5 convolutions on AVX-512 CPUs; forced here) runs on 1 and 2
 * threads, with channel counts that leave partial register blocks and
 * split the input channels, and with many channels on small planes, where
 * the kernel with channels in the vector lanes takes over.  The GEMMs per
 * kernel tap (stride 1, forced here; chosen on small planes) on 1 and 2
 * threads, including planes smaller than the kernel.  Paddings of the
 * kernel size and more (windows of pure padding), which every forced
 * algorithm leaves to im2col + GEMM.  And the automatic choice per shape (residual blocks, where the input gradient is added to
 * another, are in the gradient checks). */
#define PCNN_EXPERIMENTAL /* PCNN_OPT_KEEP_IM2COL, PCNN_OPT_CONV_ALGORITHM: pcnn.h section 9 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/expect.h"
#include "pcnn.h"

#define CK(call)                                                                      \
    do {                                                                              \
        pcnn_status s_ = (call);                                                      \
        if (s_ != PCNN_OK) {                                                          \
            printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, pcnn_last_error()); \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

typedef struct conv_case {
    int n, c, h, w, cout, k, stride, pad;
} conv_case;

typedef struct result {
    float *y, *dx, *grads, *params;
    float loss;
} result;

static unsigned long long rng_state = 99;
static float uniform(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)(rng_state >> 40) / (float)(1ULL << 24) * 2.0f - 1.0f;
}

static float *floats(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof *p);
    if (!p) exit(2);
    return p;
}

enum { AUTO = 0, GEMM = 1, DIRECT = 2, TAPS = 3 }; /* PCNN_OPT_CONV_ALGORITHM */

static result run(const conv_case *t, const float *x, int threads, int keep, int algorithm)
{
    pcnn_net *net;
    pcnn_layer *in, *conv;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, t->c, t->h, t->w, &in));
    CK(pcnn_conv2d(net, in, t->cout, t->k, t->stride, t->pad, 1, &conv));
    CK(pcnn_net_set_loss(net, conv, PCNN_LOSS_MSE));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, threads));
    CK(pcnn_net_set_option(net, PCNN_OPT_KEEP_IM2COL, keep));
    CK(pcnn_net_set_option(net, PCNN_OPT_CONV_ALGORITHM, algorithm));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 7));
    CK(pcnn_net_finalize(net, t->n));
    size_t np, out;
    CK(pcnn_net_num_params(net, &np));
    CK(pcnn_net_output_size(net, &out));
    result r = {floats(out * t->n), floats((size_t)t->n * t->c * t->h * t->w), floats(np),
                floats(np), 0.0f};
    float *targets = floats(out * t->n); /* zero: dL/dy = 2 y / count */
    CK(pcnn_net_get_params(net, r.params, np));
    CK(pcnn_net_predict(net, t->n, x, r.y, out * t->n));
    CK(pcnn_net_compute_gradients(net, t->n, x, NULL, targets, &r.loss));
    CK(pcnn_net_get_grads(net, r.grads, np));
    CK(pcnn_net_get_input_grad(net, r.dx, (size_t)t->n * t->c * t->h * t->w));
    free(targets);
    pcnn_net_destroy(&net);
    return r;
}

/* Largest |a - b| relative to the largest |b|. */
static double rel_err(const float *a, const double *b, size_t n)
{
    double err = 0.0, mag = 1e-30;
    for (size_t i = 0; i < n; i++) {
        err = fmax(err, fabs(a[i] - b[i]));
        mag = fmax(mag, fabs(b[i]));
    }
    return err / mag;
}

static void test_case(const conv_case *t)
{
    const int ho = (t->h + 2 * t->pad - t->k) / t->stride + 1;
    const int wo = (t->w + 2 * t->pad - t->k) / t->stride + 1;
    const size_t nx = (size_t)t->n * t->c * t->h * t->w, ny = (size_t)t->n * t->cout * ho * wo;
    const size_t nw = (size_t)t->cout * t->c * t->k * t->k;
    float *x = floats(nx);
    for (size_t i = 0; i < nx; i++) x[i] = uniform();
    result r = run(t, x, 1, 1, GEMM);

    /* The direct convolution and its adjoints, NCHW, in double. */
    double *y = calloc(ny, sizeof *y), *dx = calloc(nx, sizeof *dx);
    double *dw = calloc(nw + t->cout, sizeof *dw);
    if (!y || !dx || !dw) exit(2);
    const float *w = r.params, *b = r.params + nw;
#define XI(n, c, i, j) ((((size_t)(n) * t->c + (c)) * t->h + (i)) * t->w + (j))
#define YI(n, o, i, j) ((((size_t)(n) * t->cout + (o)) * ho + (i)) * wo + (j))
#define WI(o, c, i, j) ((((size_t)(o) * t->c + (c)) * t->k + (i)) * t->k + (j))
    for (int n = 0; n < t->n; n++)
        for (int o = 0; o < t->cout; o++)
            for (int i = 0; i < ho; i++)
                for (int j = 0; j < wo; j++) {
                    double s = b[o];
                    for (int c = 0; c < t->c; c++)
                        for (int p = 0; p < t->k; p++)
                            for (int q = 0; q < t->k; q++) {
                                const int ih = i * t->stride - t->pad + p;
                                const int iw = j * t->stride - t->pad + q;
                                if (ih >= 0 && ih < t->h && iw >= 0 && iw < t->w)
                                    s += (double)w[WI(o, c, p, q)] * x[XI(n, c, ih, iw)];
                            }
                    y[YI(n, o, i, j)] = s;
                }
    const double scale = 2.0 / (double)ny; /* MSE mean over all outputs */
    for (int n = 0; n < t->n; n++)
        for (int o = 0; o < t->cout; o++)
            for (int i = 0; i < ho; i++)
                for (int j = 0; j < wo; j++) {
                    const double g = scale * y[YI(n, o, i, j)];
                    dw[nw + o] += g;
                    for (int c = 0; c < t->c; c++)
                        for (int p = 0; p < t->k; p++)
                            for (int q = 0; q < t->k; q++) {
                                const int ih = i * t->stride - t->pad + p;
                                const int iw = j * t->stride - t->pad + q;
                                if (ih < 0 || ih >= t->h || iw < 0 || iw >= t->w) continue;
                                dx[XI(n, c, ih, iw)] += g * w[WI(o, c, p, q)];
                                dw[WI(o, c, p, q)] += g * x[XI(n, c, ih, iw)];
                            }
                }
    char label[96];
    snprintf(label, sizeof label, "N=%d C=%d %dx%d -> %d k%d s%d p%d", t->n, t->c, t->h, t->w,
             t->cout, t->k, t->stride, t->pad);
    EXPECT(rel_err(r.y, y, ny) < 1e-5, "%s: output rel err %.3g", label, rel_err(r.y, y, ny));
    EXPECT(rel_err(r.dx, dx, nx) < 1e-5, "%s: input grad rel err %.3g", label,
          rel_err(r.dx, dx, nx));
    EXPECT(rel_err(r.grads, dw, nw + t->cout) < 1e-4, "%s: weight grad rel err %.3g", label,
          rel_err(r.grads, dw, nw + t->cout));

    /* Recomputing col gives the same bits; 2 threads agree closely. */
    result q = run(t, x, 1, 0, GEMM), two = run(t, x, 2, 1, GEMM);
    EXPECT(memcmp(q.y, r.y, ny * sizeof *q.y) == 0 && memcmp(q.dx, r.dx, nx * sizeof *q.dx) == 0 &&
              memcmp(q.grads, r.grads, (nw + t->cout) * sizeof *q.grads) == 0,
          "%s: keep_im2col 0 and 1 differ", label);
    EXPECT(rel_err(two.y, y, ny) < 1e-5 && rel_err(two.dx, dx, nx) < 1e-5 &&
              rel_err(two.grads, dw, nw + t->cout) < 1e-4,
          "%s: 2 threads disagree with the reference", label);
    /* The direct kernel and the GEMMs per tap (where they apply), 1 and 2
     * threads, and the automatic choice. */
    result d[5] = {run(t, x, 1, 1, DIRECT), run(t, x, 2, 1, DIRECT), run(t, x, 1, 1, TAPS),
                   run(t, x, 2, 1, TAPS), run(t, x, 2, 1, AUTO)};
    const char *how[5] = {"direct, 1 thread", "direct, 2 threads", "taps, 1 thread",
                          "taps, 2 threads", "automatic, 2 threads"};
    for (int i = 0; i < 5; i++)
        EXPECT(rel_err(d[i].y, y, ny) < 1e-5 && rel_err(d[i].dx, dx, nx) < 1e-5 &&
                  rel_err(d[i].grads, dw, nw + t->cout) < 1e-4,
              "%s: %s: rel err output %.3g input grad %.3g weight grad %.3g", label, how[i],
              rel_err(d[i].y, y, ny), rel_err(d[i].dx, dx, nx),
              rel_err(d[i].grads, dw, nw + t->cout));
    result *all[8] = {&r, &q, &two, &d[0], &d[1], &d[2], &d[3], &d[4]};
    for (int i = 0; i < 8; i++) free(all[i]->y), free(all[i]->dx), free(all[i]->grads),
                                free(all[i]->params);
    free(x), free(y), free(dx), free(dw);
}

int main(void)
{
    static const conv_case cases[] = {
        {3, 128, 24, 24, 4, 3, 1, 1}, /* bands of 3 rows inside 24-row samples */
        {5, 16, 20, 20, 4, 3, 1, 1},  /* bands of 34 rows across 20-row samples */
        {3, 64, 15, 13, 6, 3, 2, 1},  /* strided, odd sizes */
        {2, 70, 9, 11, 19, 3, 1, 1},  /* direct: blocks of 8, 8, 2, 1; 64 + 6 inputs */
        {3, 5, 13, 10, 13, 5, 1, 2},  /* direct k5: blocks of 8, 4, 1 */
        {4, 16, 8, 8, 16, 3, 1, 1},   /* direct: several samples per tile */
        {1, 8, 3, 40, 3, 3, 1, 1},    /* direct: plane narrower than a tile's rows */
        {3, 6, 14, 14, 16, 5, 1, 0},  /* direct, no padding (LeNet's second) */
        {2, 5, 9, 7, 11, 3, 1, 2},    /* direct, padding k-1: output larger */
        {2, 4, 10, 12, 9, 5, 1, 1},   /* direct, padding below (k-1)/2 */
        {2, 3, 6, 9, 5, 5, 1, 4},     /* direct, padding k-1 of k5 */
        {2, 130, 6, 5, 140, 3, 1, 1}, /* direct, channels in the lanes: 3+3+3 vectors, */
        {1, 129, 5, 4, 131, 5, 1, 2}, /* two input blocks, pixel tails */
        {3, 130, 4, 4, 140, 3, 1, 1}, /* 4x4: channel lanes when forced, else taps */
        {3, 40, 2, 2, 36, 3, 1, 1},   /* 2x2: taps, every block a single pixel */
        {2, 33, 1, 1, 34, 3, 1, 1},   /* 1x1 plane: only the centre tap reads */
        {2, 48, 3, 5, 40, 5, 1, 2},   /* taps, k5 wider than the plane */
        {3, 16, 9, 8, 20, 3, 2, 1},   /* stride 2, odd height */
        {2, 20, 8, 8, 12, 1, 2, 0},   /* 1x1 stride 2 */
        {2, 17, 11, 10, 5, 5, 3, 2},  /* stride 3, k5, windows overlapping unevenly */
        {2, 3, 6, 5, 4, 1, 1, 1},     /* 1x1 with padding 1: a border of bias */
        {2, 4, 7, 6, 3, 3, 1, 3},     /* padding = kernel: every algorithm falls back */
        {3, 40, 4, 4, 36, 3, 1, 4},   /* padding > kernel on a small plane (not taps) */
        {2, 3, 8, 7, 5, 3, 2, 4},     /* strided, padding > kernel */
        {2, 6, 9, 9, 8, 5, 1, 5},     /* k5, padding = kernel (not direct) */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_case(&cases[i]);
    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf("conv band tests passed\n");
    return 0;
}
