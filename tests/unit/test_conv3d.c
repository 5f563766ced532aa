/* 3D convolution and 3D pooling through the public API against naive loop
 * references in double: the output, the input gradient and the weight and
 * bias gradients of an MSE loss against zero targets (dL/dy = 2 y / count).
 *
 * Convolutions: odd sizes, unequal D, H, W, strides 1-3, every padding
 * 0..k (k and beyond give windows of pure padding), bias on and off, the
 * vol2col matrix kept and recomputed (which must agree bitwise), on 1 and 2
 * threads.  Pools: max and average, strides 1-3, padding 0..k/2, 1 and 2
 * threads; max pooling's input gradient goes to the first maximum of each
 * window, average pooling divides by k^3 (count_include_pad). */
#define PCNN_EXPERIMENTAL /* the 3D calls and PCNN_OPT_KEEP_IM2COL: pcnn.h section 9 */
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

typedef struct vcase {
    int n, c, d, h, w, cout, k, stride, pad, bias;
} vcase;

typedef struct result {
    float *y, *dx, *grads, *params;
    size_t ny, nx, np;
} result;

static unsigned long long rng_state = 12345;
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

static void result_free(result *r)
{
    free(r->y), free(r->dx), free(r->grads), free(r->params);
}

enum { CONV, MAXPOOL, AVGPOOL };

/* Build input3d -> layer, MSE against zero targets; predict and take the
 * gradients.  Random parameters (bias included) are set before. */
static result run(int kind, const vcase *t, const float *x, int threads, int keep)
{
    pcnn_net *net;
    pcnn_layer *in, *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input3d(net, t->c, t->d, t->h, t->w, &in));
    if (kind == CONV) CK(pcnn_conv3d(net, in, t->cout, t->k, t->stride, t->pad, t->bias, &l));
    else if (kind == MAXPOOL) CK(pcnn_maxpool3d(net, in, t->k, t->stride, t->pad, &l));
    else CK(pcnn_avgpool3d(net, in, t->k, t->stride, t->pad, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_MSE));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, threads));
    CK(pcnn_net_set_option(net, PCNN_OPT_KEEP_IM2COL, keep));
    CK(pcnn_net_finalize(net, t->n));
    result r;
    CK(pcnn_net_num_params(net, &r.np));
    CK(pcnn_net_output_size(net, &r.ny));
    r.ny *= (size_t)t->n;
    r.nx = (size_t)t->n * t->c * t->d * t->h * t->w;
    r.y = floats(r.ny), r.dx = floats(r.nx), r.grads = floats(r.np), r.params = floats(r.np);
    rng_state = 777; /* the same parameters for every run of a case */
    for (size_t i = 0; i < r.np; i++) r.params[i] = 0.3f * uniform();
    if (r.np) CK(pcnn_net_set_params(net, r.params, r.np));
    float *targets = floats(r.ny), loss;
    CK(pcnn_net_predict(net, t->n, x, r.y, r.ny));
    CK(pcnn_net_compute_gradients(net, t->n, x, NULL, targets, &loss));
    if (r.np) CK(pcnn_net_get_grads(net, r.grads, r.np));
    CK(pcnn_net_get_input_grad(net, r.dx, r.nx));
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

static int out_size(int n, int k, int s, int p) { return (n + 2 * p - k) / s + 1; }

/* The naive reference: for each output, its window in (d, h, w) order. */
static void reference(int kind, const vcase *t, const float *x, const float *params, double *y,
                      double *dx, double *dw)
{
    const int od = out_size(t->d, t->k, t->stride, t->pad);
    const int oh = out_size(t->h, t->k, t->stride, t->pad);
    const int ow = out_size(t->w, t->k, t->stride, t->pad);
    const int cout = kind == CONV ? t->cout : t->c, k = t->k;
    const size_t ny = (size_t)t->n * cout * od * oh * ow;
    const size_t nw = (size_t)t->cout * t->c * k * k * k;
#define XI(n, c, a, b, e) (((((size_t)(n) * t->c + (c)) * t->d + (a)) * t->h + (b)) * t->w + (e))
#define YI(n, o, a, b, e) (((((size_t)(n) * cout + (o)) * od + (a)) * oh + (b)) * ow + (e))
#define WI(o, c, a, b, e) (((((size_t)(o) * t->c + (c)) * k + (a)) * k + (b)) * k + (e))
    for (int pass = 0; pass < 2; pass++)
        for (int n = 0; n < t->n; n++)
            for (int o = 0; o < cout; o++)
                for (int a = 0; a < od; a++)
                    for (int b = 0; b < oh; b++)
                        for (int e = 0; e < ow; e++) {
                            /* pass 0: forward; pass 1: gradients of dL/dy = 2y/count. */
                            const double g = pass ? 2.0 * y[YI(n, o, a, b, e)] / (double)ny : 0;
                            double s = kind == CONV && t->bias ? params[nw + o] : 0.0;
                            double m = -INFINITY;
                            size_t best = (size_t)-1;
                            if (pass && kind == CONV && t->bias) dw[nw + o] += g;
                            /* A convolution reads every channel, a pool its own. */
                            const int c0 = kind == CONV ? 0 : o, c1 = kind == CONV ? t->c : o + 1;
                            for (int c = c0; c < c1; c++)
                                for (int p = 0; p < k; p++)
                                    for (int q = 0; q < k; q++)
                                        for (int r = 0; r < k; r++) {
                                            const int id = a * t->stride - t->pad + p;
                                            const int ih = b * t->stride - t->pad + q;
                                            const int iw = e * t->stride - t->pad + r;
                                            if (id < 0 || id >= t->d || ih < 0 || ih >= t->h ||
                                                iw < 0 || iw >= t->w)
                                                continue;
                                            const size_t xi = XI(n, c, id, ih, iw);
                                            if (kind == CONV) {
                                                const size_t wi = WI(o, c, p, q, r);
                                                s += (double)params[wi] * x[xi];
                                                if (pass) {
                                                    dx[xi] += g * params[wi];
                                                    dw[wi] += g * x[xi];
                                                }
                                            } else if (kind == AVGPOOL) {
                                                s += x[xi];
                                                if (pass) dx[xi] += g / (k * k * k);
                                            } else if (x[xi] > m) {
                                                m = x[xi];
                                                best = xi;
                                            }
                                        }
                            if (pass) {
                                if (kind == MAXPOOL) dx[best] += g;
                                continue;
                            }
                            y[YI(n, o, a, b, e)] = kind == CONV      ? s
                                                   : kind == AVGPOOL ? s / (k * k * k)
                                                                     : m;
                        }
#undef XI
#undef YI
#undef WI
}

static void check_case(int kind, const vcase *t)
{
    static const char *names[] = {"conv3d", "maxpool3d", "avgpool3d"};
    char label[160];
    snprintf(label, sizeof label, "%s N=%d C=%d %dx%dx%d -> %d k%d s%d p%d%s", names[kind], t->n,
             t->c, t->d, t->h, t->w, kind == CONV ? t->cout : t->c, t->k, t->stride, t->pad,
             kind == CONV && t->bias ? " bias" : "");
    const size_t nx = (size_t)t->n * t->c * t->d * t->h * t->w;
    float *x = floats(nx);
    for (size_t i = 0; i < nx; i++) x[i] = uniform();
    result r = run(kind, t, x, 1, 1);
    double *y = calloc(r.ny, sizeof *y), *dx = calloc(nx, sizeof *dx);
    double *dw = calloc(r.np + 1, sizeof *dw);
    if (!y || !dx || !dw) exit(2);
    reference(kind, t, x, r.params, y, dx, dw);
    EXPECT(rel_err(r.y, y, r.ny) < 1e-5, "%s: output rel err %.3g", label, rel_err(r.y, y, r.ny));
    EXPECT(rel_err(r.dx, dx, nx) < 1e-5, "%s: input grad rel err %.3g", label,
           rel_err(r.dx, dx, nx));
    if (r.np)
        EXPECT(rel_err(r.grads, dw, r.np) < 1e-4, "%s: weight grad rel err %.3g", label,
               rel_err(r.grads, dw, r.np));
    /* The reference must see something: a zero output would pass trivially. */
    double mag = 0;
    for (size_t i = 0; i < r.ny; i++) mag = fmax(mag, fabs(y[i]));
    EXPECT(mag > 1e-3, "%s: the reference output is all zero", label);

    /* Recomputing the vol2col matrix gives the same bits; 2 threads agree. */
    result q = run(kind, t, x, 1, 0), two = run(kind, t, x, 2, 0);
    EXPECT(memcmp(q.y, r.y, r.ny * sizeof *r.y) == 0 &&
               memcmp(q.dx, r.dx, nx * sizeof *r.dx) == 0 &&
               (r.np == 0 || memcmp(q.grads, r.grads, r.np * sizeof *r.grads) == 0),
           "%s: keep_im2col 0 and 1 differ", label);
    EXPECT(rel_err(two.y, y, r.ny) < 1e-5 && rel_err(two.dx, dx, nx) < 1e-5 &&
               (r.np == 0 || rel_err(two.grads, dw, r.np) < 1e-4),
           "%s: 2 threads disagree with the reference", label);
    result_free(&r), result_free(&q), result_free(&two);
    free(x), free(y), free(dx), free(dw);
}

int main(void)
{
    /* n, c, d, h, w, cout, k, stride, pad, bias */
    static const vcase convs[] = {
        {2, 3, 5, 7, 6, 4, 3, 1, 1, 1},  /* "same" */
        {2, 3, 5, 7, 6, 4, 3, 1, 0, 0},  /* valid */
        {3, 2, 7, 5, 9, 3, 3, 2, 1, 1},  /* CosmoFlow's strided conv4, odd sizes */
        {2, 2, 6, 7, 5, 3, 3, 3, 2, 0},  /* stride 3 */
        {2, 3, 4, 5, 6, 2, 3, 1, 3, 1},  /* padding = kernel: pure-padding windows */
        {1, 2, 3, 4, 5, 3, 2, 2, 2, 1},  /* even kernel, padding = kernel */
        {2, 4, 5, 3, 4, 5, 1, 1, 0, 1},  /* 1x1x1: x is its own col */
        {2, 4, 5, 3, 4, 5, 1, 2, 1, 0},  /* 1x1x1 strided and padded */
        {1, 3, 9, 8, 7, 2, 5, 2, 2, 1},  /* k5 */
        {2, 1, 3, 3, 3, 2, 3, 1, 2, 0},  /* padding 2 of k3 */
        {3, 5, 1, 6, 7, 3, 3, 1, 1, 1},  /* depth 1 padded */
    };
    for (size_t i = 0; i < sizeof convs / sizeof convs[0]; i++) check_case(CONV, &convs[i]);
    static const vcase pools[] = {
        {2, 3, 6, 7, 5, 0, 2, 2, 0, 0}, {2, 3, 7, 6, 9, 0, 3, 2, 1, 0},
        {2, 2, 5, 5, 6, 0, 3, 1, 1, 0}, {1, 2, 9, 8, 7, 0, 3, 3, 0, 0},
        {2, 2, 7, 8, 9, 0, 5, 2, 2, 0}, {3, 2, 4, 4, 4, 0, 2, 1, 1, 0},
    };
    for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++) {
        check_case(MAXPOOL, &pools[i]);
        check_case(AVGPOOL, &pools[i]);
    }
    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf("conv3d and pool3d reference tests passed\n");
    return 0;
}
