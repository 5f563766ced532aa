/* The direct forward 3D convolution (lib/kernels/vol_direct.c) against
 * vol2col + GEMM (PCNN_OPT_CONV_ALGORITHM 1) and a naive loop: output rows
 * shorter than, equal to and longer than one and two vectors (masked
 * tails, rows of several tiles), kernels 2, 3 and 5, padding 0-2, every
 * output-channel block (4, 8, 12) with partial blocks, bias on and off,
 * 1 and 2 threads.  Skipped (77) on a CPU without AVX-512F. */
#define PCNN_EXPERIMENTAL
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "layers/layer.h"
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

static float *run(const vcase *v, int algorithm, int threads, const float *x,
                  const float *params, size_t *ny, char *choice)
{
    pcnn_net *net;
    pcnn_layer *in, *conv;
    OK(pcnn_net_create(&net));
    OK(pcnn_net_input3d(net, v->c, v->d, v->h, v->w, &in));
    OK(pcnn_conv3d(net, in, v->cout, v->k, 1, v->pad, v->bias, &conv));
    OK(pcnn_net_set_loss(net, conv, PCNN_LOSS_MSE));
    OK(pcnn_net_set_option(net, PCNN_OPT_CONV_ALGORITHM, algorithm));
    OK(pcnn_net_set_option(net, PCNN_OPT_THREADS, threads));
    OK(pcnn_net_finalize(net, v->n));
    size_t np, out;
    OK(pcnn_net_num_params(net, &np));
    OK(pcnn_net_set_params(net, params, np));
    OK(pcnn_net_output_size(net, &out));
    *ny = out * v->n;
    float *y = malloc(*ny * sizeof *y);
    OK(pcnn_net_predict(net, v->n, x, y, *ny));
    snprintf(choice, 160, "%s", conv->choice);
    pcnn_net_destroy(&net);
    return y;
}

/* y[n][co][z][y][x] (the host's NCDHW) in double. */
static double naive(const vcase *v, const float *x, const float *w, int n, int co, int z, int y,
                    int xo)
{
    const int k = v->k;
    double s = v->bias ? w[(size_t)v->cout * v->c * k * k * k + co] : 0.0;
    for (int ci = 0; ci < v->c; ci++)
        for (int a = 0; a < k; a++)
            for (int b = 0; b < k; b++)
                for (int c = 0; c < k; c++) {
                    const int iz = z + a - v->pad, iy = y + b - v->pad, ix = xo + c - v->pad;
                    if (iz < 0 || iz >= v->d || iy < 0 || iy >= v->h || ix < 0 || ix >= v->w)
                        continue;
                    s += (double)w[((((size_t)co * v->c + ci) * k + a) * k + b) * k + c] *
                         x[((((size_t)n * v->c + ci) * v->d + iz) * v->h + iy) * v->w + ix];
                }
    return s;
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
    };
    unsigned long long st = 7;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const vcase *v = &cases[i];
        const size_t nx = (size_t)v->n * v->c * v->d * v->h * v->w;
        const size_t np = (size_t)v->cout * v->c * v->k * v->k * v->k + (v->bias ? v->cout : 0);
        float *x = malloc(nx * sizeof *x), *p = malloc(np * sizeof *p);
        for (size_t j = 0; j < nx; j++) {
            st = st * 6364136223846793005ULL + 1442695040888963407ULL;
            x[j] = (float)(st >> 40) / (float)(1 << 24) * 2 - 1;
        }
        for (size_t j = 0; j < np; j++) {
            st = st * 6364136223846793005ULL + 1442695040888963407ULL;
            p[j] = (float)(st >> 40) / (float)(1 << 24) - 0.5f;
        }
        for (int threads = 1; threads <= 2; threads++) {
            size_t na, nb;
            char ca[160], cb[160];
            float *direct = run(v, 2, threads, x, p, &na, ca);
            float *gemm = run(v, 1, threads, x, p, &nb, cb);
            if (!strstr(ca, "direct") || strstr(cb, "direct")) {
                printf("FAIL case %zu: choices \"%s\" / \"%s\"\n", i, ca, cb);
                failures++;
            }
            const int od = v->d + 2 * v->pad - v->k + 1, oh = v->h + 2 * v->pad - v->k + 1,
                      ow = v->w + 2 * v->pad - v->k + 1;
            double worst = 0, worst_naive = 0;
            for (size_t j = 0; j < na; j++) worst = fmax(worst, fabs(direct[j] - gemm[j]));
            size_t j = 0;
            for (int n = 0; n < v->n; n++)
                for (int co = 0; co < v->cout; co++)
                    for (int z = 0; z < od; z++)
                        for (int y = 0; y < oh; y++)
                            for (int xo = 0; xo < ow; xo++, j++)
                                worst_naive = fmax(worst_naive,
                                                   fabs(direct[j] - naive(v, x, p, n, co, z, y, xo)));
            checked++;
            if (na != nb || worst > 1e-4 || worst_naive > 1e-4) {
                printf("FAIL case %zu threads %d: direct vs gemm %.3g, vs naive %.3g\n", i,
                       threads, worst, worst_naive);
                failures++;
            }
            free(direct);
            free(gemm);
        }
        free(x);
        free(p);
    }
    printf("%d of %d direct conv3d checks failed\n", failures, checked);
    return failures ? 1 : 0;
}
