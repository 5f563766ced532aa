/* The direct 3D convolution (lib/kernels/vol_direct*.c) against vol2col +
 * GEMM (PCNN_OPT_CONV_ALGORITHM 1) and naive loops in double, in all three
 * passes: the output, the input gradient and the weight and bias gradients
 * of an MSE loss against zero targets (dL/dy = 2 y / count).  Output rows
 * shorter than, equal to and longer than one and two vectors (masked
 * tails, rows of several tiles, two rows stacked in one tile, rows of 5-8
 * paired in one vector, an odd number of them), kernels 2, 3 and 5,
 * padding 0-3 (3 of k3: dx falls back to GEMM while dW stays direct),
 * every output-channel block (4, 8, 12 forward; 4, 8 for dW) with partial
 * blocks, bias on and off, 1 and 2 threads, whose results must be the same
 * bits.  A second network feeds one input to two convolutions added, so
 * that the second adds its dx into the first's.  Whole batch and in bands
 * (the GEMM passes left); dx on a box of the input alone.  Skipped (77) on a
 * CPU without AVX-512F. */
#define PCNN_EXPERIMENTAL
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/net.h"
#include "kernels/kernels.h"
#include "kernels/vol_direct.h"
#include "layers/layer.h"
#include "layers/layers.h"
#include "pcnn.h"

static int failures, checked;
#define OK(call)                                                                          \
    do {                                                                                  \
        pcnn_status s_ = (call);                                                          \
        if (s_ != PCNN_OK) {                                                              \
            printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, pcnn_last_error()); \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

typedef struct vcase {
    int n, c, d, h, w, cout, k, pad, bias;
} vcase;

typedef struct result {
    float *y, *dx, *grads;
    size_t ny, nx, np;
    char choice[160];
} result;

static void result_free(result *r) { free(r->y), free(r->dx), free(r->grads); }

/* input3d -> conv3d (or, with branches, input3d -> 1x1x1 conv3d -> two
 * conv3d added) -> MSE against zero targets: the output, the input
 * gradient and every parameter's gradient. */
static size_t col_budget = CONV3D_COL_BUDGET_FLOATS; /* floats of vol2col per network */

static result run(const vcase *v, int algorithm, int threads, const float *x,
                  const float *params, bool branches)
{
    pcnn_net *net;
    pcnn_layer *in, *conv, *other, *sum;
    OK(pcnn_net_create(&net));
    OK(pcnn_net_input3d(net, v->c, v->d, v->h, v->w, &in));
    if (branches) OK(pcnn_conv3d(net, in, v->c, 1, 1, 0, 0, &in));
    OK(pcnn_conv3d(net, in, v->cout, v->k, 1, v->pad, v->bias, &conv));
    sum = conv;
    if (branches) {
        OK(pcnn_conv3d(net, in, v->cout, v->k, 1, v->pad, v->bias, &other));
        OK(pcnn_add(net, conv, other, &sum));
    }
    OK(pcnn_net_set_loss(net, sum, PCNN_LOSS_MSE));
    OK(pcnn_net_set_option(net, PCNN_OPT_CONV_ALGORITHM, algorithm));
    OK(pcnn_net_set_option(net, PCNN_OPT_THREADS, threads));
    net->opt.conv3d_col_budget = col_budget; /* this network's only */
    OK(pcnn_net_finalize(net, v->n));
    result r;
    size_t out;
    OK(pcnn_net_num_params(net, &r.np));
    OK(pcnn_net_set_params(net, params, r.np));
    OK(pcnn_net_output_size(net, &out));
    r.ny = out * v->n;
    r.nx = (size_t)v->n * v->c * v->d * v->h * v->w;
    r.y = malloc(r.ny * sizeof *r.y), r.dx = malloc(r.nx * sizeof *r.dx);
    r.grads = malloc(r.np * sizeof *r.grads);
    float *targets = calloc(r.ny, sizeof *targets), loss;
    if (!r.y || !r.dx || !r.grads || !targets) exit(2);
    OK(pcnn_net_predict(net, v->n, x, r.y, r.ny));
    OK(pcnn_net_compute_gradients(net, v->n, x, NULL, targets, &loss));
    OK(pcnn_net_get_grads(net, r.grads, r.np));
    OK(pcnn_net_get_input_grad(net, r.dx, r.nx));
    snprintf(r.choice, sizeof r.choice, "%s", conv->decision.kernel);
    free(targets);
    pcnn_net_destroy(&net);
    return r;
}

/* The single convolution in double (host NCDHW): y, then dx and dW (bias
 * last) of dL/dy = 2 y / ny. */
static void naive(const vcase *v, const float *x, const float *w, double *y, double *dx,
                  double *dw)
{
    const int k = v->k, od = v->d + 2 * v->pad - k + 1, oh = v->h + 2 * v->pad - k + 1,
              ow = v->w + 2 * v->pad - k + 1;
    const size_t nw = (size_t)v->cout * v->c * k * k * k;
    const size_t ny = (size_t)v->n * v->cout * od * oh * ow;
#define XI(n_, c_, a_, b_, e_) \
    (((((size_t)(n_) * v->c + (c_)) * v->d + (a_)) * v->h + (b_)) * v->w + (e_))
#define YI(n, o, a, b, e) (((((size_t)(n) * v->cout + (o)) * od + (a)) * oh + (b)) * ow + (e))
#define WI(o_, c_, a_, b_, e_) (((((size_t)(o_) * v->c + (c_)) * k + (a_)) * k + (b_)) * k + (e_))
    for (int pass = 0; pass < 2; pass++)
        for (int n = 0; n < v->n; n++)
            for (int co = 0; co < v->cout; co++)
                for (int z = 0; z < od; z++)
                    for (int yo = 0; yo < oh; yo++)
                        for (int xo = 0; xo < ow; xo++) {
                            const size_t yi = YI(n, co, z, yo, xo);
                            const double g = pass ? 2.0 * y[yi] / (double)ny : 0.0;
                            double s = v->bias ? w[nw + co] : 0.0;
                            if (pass && v->bias) dw[nw + co] += g;
                            for (int ci = 0; ci < v->c; ci++)
                                for (int a = 0; a < k; a++)
                                    for (int b = 0; b < k; b++)
                                        for (int c = 0; c < k; c++) {
                                            const int iz = z + a - v->pad, iy = yo + b - v->pad,
                                                      ix = xo + c - v->pad;
                                            if (iz < 0 || iz >= v->d || iy < 0 || iy >= v->h ||
                                                ix < 0 || ix >= v->w)
                                                continue;
                                            const size_t wi = WI(co, ci, a, b, c);
                                            const size_t xi = XI(n, ci, iz, iy, ix);
                                            if (pass) {
                                                dx[xi] += g * w[wi];
                                                dw[wi] += g * x[xi];
                                            } else {
                                                s += (double)w[wi] * x[xi];
                                            }
                                        }
                            if (!pass) y[yi] = s;
                        }
#undef XI
#undef YI
#undef WI
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

static double rel_err_f(const float *a, const float *b, size_t n)
{
    double err = 0.0, mag = 1e-30;
    for (size_t i = 0; i < n; i++) {
        err = fmax(err, fabs(a[i] - b[i]));
        mag = fmax(mag, fabs(b[i]));
    }
    return err / mag;
}

static bool same_bits(const result *a, const result *b)
{
    return a->ny == b->ny && a->np == b->np &&
           !memcmp(a->y, b->y, a->ny * sizeof *a->y) &&
           !memcmp(a->dx, b->dx, a->nx * sizeof *a->dx) &&
           !memcmp(a->grads, b->grads, a->np * sizeof *a->grads);
}

static void fill(float *p, size_t n, float scale, float shift, unsigned long long *st)
{
    for (size_t j = 0; j < n; j++) {
        *st = *st * 6364136223846793005ULL + 1442695040888963407ULL;
        p[j] = (float)(*st >> 40) / (float)(1 << 24) * scale + shift;
    }
}

static const char *mode = "whole batch"; /* or "bands" of one output plane */

static void fail(const char *what, size_t i, int threads, const char *detail)
{
    printf("FAIL %s case %zu threads %d: %s %s\n", mode, i, threads, what, detail);
    failures++;
}

/* One case under the column budget in force: every pass direct (or dx by
 * GEMM where padding > k - 1) against GEMM and the naive loops. */
static void check_case(size_t i, const vcase *v, unsigned long long *rng)
{
    const size_t nx = (size_t)v->n * v->c * v->d * v->h * v->w;
    const size_t nw = (size_t)v->cout * v->c * v->k * v->k * v->k;
    const size_t np = nw + (v->bias ? v->cout : 0);
    float *x = malloc(nx * sizeof *x), *p = malloc((2 * np + (size_t)v->c * v->c) * sizeof *p);
    if (!x || !p) exit(2);
    fill(x, nx, 2.0f, -1.0f, rng);
    fill(p, 2 * np + (size_t)v->c * v->c, 1.0f, -0.5f, rng);
    const bool dx_direct = v->pad <= v->k - 1;
    result first = {0};
    for (int threads = 1; threads <= 2; threads++) {
        char msg[400];
        result direct = run(v, 2, threads, x, p, false);
        result gemm = run(v, 1, threads, x, p, false);
        checked++;
        if (!strstr(direct.choice, "forward direct") || !strstr(direct.choice, "dW direct") ||
            !strstr(direct.choice, dx_direct ? "dx direct" : "dx gemm") ||
            strstr(gemm.choice, "direct")) {
            snprintf(msg, sizeof msg, "\"%s\" / \"%s\"", direct.choice, gemm.choice);
            fail("choices", i, threads, msg);
        }
        double *y = calloc(direct.ny, sizeof *y), *dx = calloc(nx, sizeof *dx);
        double *dw = calloc(np, sizeof *dw);
        if (!y || !dx || !dw) exit(2);
        naive(v, x, p, y, dx, dw);
        const double e[6] = {rel_err_f(direct.y, gemm.y, direct.ny),
                             rel_err(direct.y, y, direct.ny),
                             rel_err_f(direct.dx, gemm.dx, nx), rel_err(direct.dx, dx, nx),
                             rel_err_f(direct.grads, gemm.grads, np),
                             rel_err(direct.grads, dw, np)};
        if (direct.ny != gemm.ny || e[0] > 1e-5 || e[1] > 1e-5 || e[2] > 1e-5 ||
            e[3] > 1e-5 || e[4] > 1e-4 || e[5] > 1e-4) {
            snprintf(msg, sizeof msg,
                     "y %.3g / %.3g, dx %.3g / %.3g, dW %.3g / %.3g (vs gemm / naive)",
                     e[0], e[1], e[2], e[3], e[4], e[5]);
            fail("direct", i, threads, msg);
        }
        /* The thread count changes no bit of the direct passes. */
        if (threads == 1) first = direct;
        else if (dx_direct && !same_bits(&first, &direct))
            fail("1 and 2 threads differ", i, threads, "");
        /* dx added into another's: two branches, against GEMM. */
        result db = run(v, 2, threads, x, p, true);
        result gb = run(v, 1, threads, x, p, true);
        const double eb[3] = {rel_err_f(db.y, gb.y, db.ny), rel_err_f(db.dx, gb.dx, nx),
                              rel_err_f(db.grads, gb.grads, db.np)};
        if (eb[0] > 1e-5 || eb[1] > 1e-5 || eb[2] > 1e-4) {
            snprintf(msg, sizeof msg, "y %.3g, dx %.3g, grads %.3g", eb[0], eb[1], eb[2]);
            fail("branches vs gemm", i, threads, msg);
        }
        result_free(&db), result_free(&gb);
        if (threads == 2) result_free(&direct), result_free(&first);
        result_free(&gemm);
        free(y), free(dx), free(dw);
    }
    free(x);
    free(p);
}

/* The input gradient on a box of the input (a spatial twin's part inside
 * the sample) against the whole dx: the same bits on the box, the rest of
 * dx untouched, added when asked; boxes at every corner and in the middle. */
static void check_box_dx(size_t i, const vcase *v, unsigned long long *rng)
{
    const int od = v->d + 2 * v->pad - v->k + 1, oh = v->h + 2 * v->pad - v->k + 1,
              ow = v->w + 2 * v->pad - v->k + 1;
    const vol_shape g = {v->c, v->n, v->d, v->h, v->w, v->k, 1, v->pad, od, oh, ow};
    if (!vol_direct_data_supports(&g) || od < 1 || oh < 1 || ow < 1 || v->w < 5) return;
    const size_t nw = (size_t)v->cout * v->c * v->k * v->k * v->k;
    const size_t ny = (size_t)v->cout * v->n * od * oh * ow;
    const size_t nx = (size_t)v->c * v->n * v->d * v->h * v->w;
    float *w = malloc(nw * sizeof *w), *dy = malloc(ny * sizeof *dy);
    float *packed = malloc(vol_direct_packed_floats(v->c, v->cout, v->k) * sizeof(float));
    const vol_shape t = vol_direct_adjoint(&g, v->cout);
    float *dyp = malloc(vol_direct_pad_floats(&t) * sizeof(float));
    float *whole = malloc(nx * sizeof *whole), *dx = malloc(nx * sizeof *dx);
    fill(w, nw, 0.5f, 0.0f, rng);
    fill(dy, ny, 1.0f, 0.0f, rng);
    vol_direct_pack_flipped(w, v->cout, v->c, v->k, packed);
    vol_direct_backward_data(dy, &g, packed, v->cout, dyp, whole, false, 1);
    const int dims[3] = {v->d, v->h, v->w};
    for (int at = 0; at < 3; at++) { /* low corner, middle, high corner */
        int lo[3], ext[3];
        for (int k = 0; k < 3; k++) {
            ext[k] = k == 2 ? dims[k] - 1 : (dims[k] + 1) / 2;
            lo[k] = at == 0 ? 0 : at == 2 ? dims[k] - ext[k] : (dims[k] - ext[k]) / 2;
        }
        float *scratch = malloc(vol_direct_box_scratch_floats(&g, v->cout, ext) * sizeof(float));
        for (int accumulate = 0; accumulate <= 1; accumulate++) {
            for (size_t j = 0; j < nx; j++) dx[j] = 0.25f;
            vol_direct_backward_data_box(dy, &g, packed, v->cout, lo, ext, scratch, dx,
                                         accumulate, 2);
            size_t bad = 0;
            for (size_t j = 0; j < nx; j++) {
                const size_t row = j / (size_t)v->w;
                const int x = (int)(j % (size_t)v->w), y = (int)(row % (size_t)v->h),
                          z = (int)(row / (size_t)v->h % (size_t)v->d);
                const bool in = z >= lo[0] && z < lo[0] + ext[0] && y >= lo[1] &&
                                y < lo[1] + ext[1] && x >= lo[2] && x < lo[2] + ext[2];
                const float want = !in ? 0.25f : accumulate ? 0.25f + whole[j] : whole[j];
                if (dx[j] != want) bad++;
            }
            checked++;
            if (bad) {
                char detail[120];
                snprintf(detail, sizeof detail, "dx on box at %d (%s): %zu values differ", at,
                         accumulate ? "added" : "written", bad);
                fail("box dx", i, 2, detail);
            }
        }
        free(scratch);
    }
    free(w), free(dy), free(packed), free(dyp), free(whole), free(dx);
}

int main(void)
{
    if (!vol_direct_available()) {
        printf("skipped: no AVX-512F\n");
        return 77;
    }
    static const vcase cases[] = {
        {2, 3, 5, 4, 8, 5, 3, 1, 1},   {1, 2, 3, 3, 16, 16, 3, 1, 0},
        {2, 4, 4, 3, 17, 12, 3, 1, 1}, {1, 3, 3, 4, 32, 13, 3, 1, 0},
        {2, 2, 4, 3, 33, 24, 3, 1, 1}, {1, 5, 3, 3, 45, 8, 3, 2, 1},
        {2, 3, 4, 4, 11, 4, 2, 0, 0},  {1, 2, 6, 6, 12, 30, 5, 2, 1},
        {2, 4, 3, 5, 20, 1, 3, 0, 1},  {1, 1, 4, 4, 70, 9, 3, 1, 0},
        {2, 3, 4, 5, 16, 12, 3, 1, 0}, {2, 2, 3, 4, 10, 6, 3, 3, 1},
        {2, 3, 3, 5, 5, 6, 3, 1, 1},   {1, 2, 4, 3, 7, 9, 3, 0, 0},
        {2, 4, 4, 4, 8, 16, 3, 1, 0},
    };
    /* The whole batch, then bands of one output plane (the GEMM passes that
     * remain run banded beside the direct ones). */
    for (int banded = 0; banded <= 1; banded++) {
        col_budget = banded ? 1 : CONV3D_COL_BUDGET_FLOATS;
        mode = banded ? "bands" : "whole batch";
        unsigned long long st = 7;
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(i, &cases[i], &st);
    }
    unsigned long long st = 11;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_box_dx(i, &cases[i], &st);
    printf("%d of %d direct conv3d checks failed\n", failures, checked);
    return failures ? 1 : 0;
}
