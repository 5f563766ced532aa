/* bf16 analytic gradients against fp32 analytic gradients, layer by layer,
 * for every layer kind with bf16 products (conv2d, conv3d, dense, the
 * transposed convolutions) in the
 * shapes that take different code (3x3, strided, 1x1, 5x5, padding >=
 * kernel, a kept im2col matrix, many channels, dense on a flat and on a
 * spatial input, conv3d 3x3x3, strided and 1x1x1), a small CNN trained by
 * cross entropy with its first layer kept fp32 by pcnn_layer_set_precision,
 * on the bf16 path the process takes (PCNN_BF16_PATH: meson runs this
 * test once per path; a path the CPU lacks falls back and says so).
 *
 * Tolerance.  bf16 keeps 8 significant bits: rounding an operand to
 * nearest has relative error at most 2^-9, a product of two rounded
 * operands about 2^-8, and the sums are fp32 (exact by comparison).  Over
 * a sum of many products with independent rounding errors the norm-wise
 * relative error of the result stays near 2^-9..2^-8; the loss gradient
 * dY carries the forward's error into the backward, and dW's rows are
 * sums over whole batches, so a gradient's norm-wise relative error
 * ||g_bf16 - g_fp32|| / ||g_fp32|| should sit below 2^-6 (4x the product's
 * error).  It must also exceed 2^-13: a bf16 layer equal to fp32 to better
 * than that did not run its products in bf16. */
#define PCNN_EXPERIMENTAL /* PCNN_OPT_KEEP_IM2COL, the transposed convolutions */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pcnn.h"
#include "tutil.h"

#define TOL 0x1p-6
#define FLOOR 0x1p-13
#define MAX_LAYERS 16

static int failures;

typedef struct bcase {
    const char *name;
    int c, d, h, w; /* d 0: 2D input */
    int n;
    int keep;       /* PCNN_OPT_KEEP_IM2COL */
    int cnn;        /* the small CNN with labels */
    /* the layer: kind 0 conv2d, 1 conv3d, 2 dense, 3 conv_transpose2d, 4 conv_transpose3d
     * (output padding 1 when stride > 1) */
    int kind, out, k, s, p, bias;
} bcase;

static const bcase cases[] = {
    {"conv2d 3x3", 3, 0, 9, 9, 4, 0, 0, 0, 8, 3, 1, 1, 1},
    {"conv2d 3x3 stride 2", 6, 0, 11, 11, 3, 0, 0, 0, 16, 3, 2, 1, 1},
    {"conv2d 1x1", 8, 0, 6, 5, 4, 0, 0, 0, 12, 1, 1, 0, 1},
    {"conv2d 5x5 no bias", 4, 0, 7, 7, 2, 0, 0, 0, 6, 5, 1, 2, 0},
    {"conv2d padding >= kernel", 3, 0, 5, 5, 2, 0, 0, 0, 4, 1, 1, 1, 1},
    {"conv2d 3x3 kept im2col", 5, 0, 8, 8, 3, 1, 0, 0, 7, 3, 1, 1, 1},
    {"conv2d 40 channels", 32, 0, 6, 6, 2, 0, 0, 0, 40, 3, 1, 1, 1},
    {"dense on a spatial input", 3, 0, 4, 4, 5, 0, 0, 2, 10, 0, 0, 0, 1},
    {"dense on a flat input", 40, 0, 1, 1, 6, 0, 0, 2, 7, 0, 0, 0, 0},
    {"conv3d 3x3x3", 3, 6, 6, 6, 2, 0, 0, 1, 5, 3, 1, 1, 1},
    {"conv3d 3x3x3 stride 2", 4, 7, 6, 5, 2, 0, 0, 1, 6, 3, 2, 1, 0},
    {"conv3d 1x1x1", 6, 4, 4, 4, 2, 0, 0, 1, 5, 1, 1, 0, 1},
    {"conv_transpose2d k3 s2", 4, 0, 5, 6, 3, 0, 0, 3, 5, 3, 2, 1, 1},
    {"conv_transpose2d k2 s1", 6, 0, 4, 4, 2, 0, 0, 3, 3, 2, 1, 0, 0},
    {"conv_transpose3d k2 s2", 3, 3, 4, 3, 2, 0, 0, 4, 4, 2, 2, 0, 1},
    {"small CNN, first conv fp32", 3, 0, 12, 12, 8, 0, 1, 0, 0, 0, 0, 0, 0},
};

typedef struct built {
    pcnn_net *net;
    pcnn_layer *with_params[MAX_LAYERS];
    int count;
    size_t in_size, out_size;
} built;

static void note(built *b, pcnn_layer *l)
{
    size_t np = 0;
    pcnn_layer_num_params(l, &np);
    if (np && b->count < MAX_LAYERS) b->with_params[b->count++] = l;
}

static pcnn_status build(const bcase *t, int precision, built *b)
{
    pcnn_layer *x, *l;
    memset(b, 0, sizeof *b);
    CK(pcnn_net_create(&b->net));
    if (t->d)
        CK(pcnn_net_input3d(b->net, t->c, t->d, t->h, t->w, &x));
    else
        CK(pcnn_net_input(b->net, t->c, t->h, t->w, &x));
    if (t->cnn) {
        pcnn_layer *first;
        CK(pcnn_conv2d(b->net, x, 6, 3, 1, 1, 1, &first));
        CK(pcnn_layer_set_precision(first, PCNN_PRECISION_FP32));
        note(b, first);
        CK(pcnn_tanh(b->net, first, &l));
        CK(pcnn_avgpool2d(b->net, l, 2, 2, 0, &l));
        CK(pcnn_conv2d(b->net, l, 10, 3, 1, 1, 1, &l));
        note(b, l);
        CK(pcnn_tanh(b->net, l, &l));
        CK(pcnn_flatten(b->net, l, &l));
        CK(pcnn_dense(b->net, l, 5, 1, &l));
        note(b, l);
        CK(pcnn_net_set_loss(b->net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    } else {
        if (t->kind == 0)
            CK(pcnn_conv2d(b->net, x, t->out, t->k, t->s, t->p, t->bias, &l));
        else if (t->kind == 1)
            CK(pcnn_conv3d(b->net, x, t->out, t->k, t->s, t->p, t->bias, &l));
        else if (t->kind == 2)
            CK(pcnn_dense(b->net, x, t->out, t->bias, &l));
        else if (t->kind == 3)
            CK(pcnn_conv_transpose2d(b->net, x, t->out, t->k, t->s, t->p, t->s > 1, t->bias,
                                     &l));
        else
            CK(pcnn_conv_transpose3d(b->net, x, t->out, t->k, t->s, t->p, t->s > 1, t->bias,
                                     &l));
        note(b, l);
        CK(pcnn_net_set_loss(b->net, l, PCNN_LOSS_MSE));
    }
    CK(pcnn_net_set_option(b->net, PCNN_OPT_SEED, 7));
    CK(pcnn_net_set_option(b->net, PCNN_OPT_THREADS, 2));
    CK(pcnn_net_set_option(b->net, PCNN_OPT_KEEP_IM2COL, t->keep));
    CK(pcnn_net_set_option(b->net, PCNN_OPT_PRECISION, precision));
    CK(pcnn_net_finalize(b->net, t->n));
    CK(pcnn_net_output_size(b->net, &b->out_size)); /* per sample */
    b->out_size *= (size_t)t->n;
    b->in_size = (size_t)t->n * t->c * (t->d ? t->d : 1) * t->h * t->w;
    return PCNN_OK;
fail:
    return PCNN_ERR_INTERNAL;
}

static double rel_diff(const float *a, const float *b, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

static void check(const char *what, const char *name, double rel, bool bf16)
{
    const bool ok = rel <= TOL && (!bf16 || rel >= FLOOR);
    printf("  %-30s %-22s rel %.2e (2^%.1f)%s\n", name, what, rel, rel > 0 ? log2(rel) : -999.0,
           ok ? "" : "  FAIL");
    if (!ok) failures++;
}

/* The gradients of both precisions on the same data and parameters. */
static void run_case(const bcase *t, const char *path)
{
    built f, h;
    if (build(t, PCNN_PRECISION_FP32, &f) != PCNN_OK || build(t, PCNN_PRECISION_BF16, &h) !=
                                                            PCNN_OK) {
        printf("FAIL %s: build\n", t->name);
        failures++;
        return;
    }
    float *x = malloc(f.in_size * sizeof *x), *tg = malloc(f.out_size * sizeof *tg);
    float *dxf = malloc(f.in_size * sizeof *x), *dxh = malloc(f.in_size * sizeof *x);
    int32_t labels[64];
    trng r = {1234};
    for (size_t i = 0; i < f.in_size; i++) x[i] = trng_range(&r, -1, 1);
    for (size_t i = 0; i < f.out_size; i++) tg[i] = trng_range(&r, -1, 1);
    for (int i = 0; i < t->n; i++) labels[i] = trng_below(&r, 5);
    float lf, lh;
    CK(pcnn_net_compute_gradients(f.net, t->n, x, t->cnn ? labels : NULL, t->cnn ? NULL : tg,
                                  &lf));
    CK(pcnn_net_compute_gradients(h.net, t->n, x, t->cnn ? labels : NULL, t->cnn ? NULL : tg,
                                  &lh));
    printf("%s: loss fp32 %.6f bf16 %.6f\n", t->name, lf, lh);
    /* The summary names the precision and the path of each layer. */
    char summary[8192];
    char want[48];
    snprintf(want, sizeof want, "bf16 (%s)", path);
    CK(pcnn_net_summary(h.net, summary, sizeof summary, NULL));
    if (!strstr(summary, want)) {
        printf("FAIL %s: the summary does not say %s:\n%s\n", t->name, want, summary);
        failures++;
    }
    if (t->cnn && !strstr(summary, "fp32")) {
        printf("FAIL %s: the summary does not say fp32 for the first conv:\n%s\n", t->name,
               summary);
        failures++;
    }
    for (int i = 0; i < f.count; i++) {
        size_t np = 0;
        CK(pcnn_layer_num_params(f.with_params[i], &np));
        float *pf = malloc(np * sizeof *pf), *ph = malloc(np * sizeof *ph);
        CK(pcnn_layer_get_params(f.with_params[i], pf, np));
        CK(pcnn_layer_get_params(h.with_params[i], ph, np));
        if (memcmp(pf, ph, np * sizeof *pf) != 0) {
            printf("FAIL %s: the two networks' parameters differ\n", t->name);
            failures++;
        }
        free(pf), free(ph);
    }
    /* Whole-network gradients, split at each layer's parameter count. */
    size_t total = 0;
    CK(pcnn_net_num_params(f.net, &total));
    float *gf = malloc(total * sizeof *gf), *gh = malloc(total * sizeof *gh);
    CK(pcnn_net_get_grads(f.net, gf, total));
    CK(pcnn_net_get_grads(h.net, gh, total));
    size_t at = 0;
    for (int i = 0; i < f.count; i++) {
        size_t np = 0;
        int index;
        const char *kind;
        CK(pcnn_layer_num_params(f.with_params[i], &np));
        CK(pcnn_layer_info(f.with_params[i], &index, &kind));
        char what[48];
        snprintf(what, sizeof what, "layer %d %s dW", index, kind);
        /* The small CNN's first conv is fp32 but sees bf16 gradients from above. */
        check(what, t->name, rel_diff(gh + at, gf + at, np), true);
        at += np;
    }
    CK(pcnn_net_get_input_grad(f.net, dxf, f.in_size));
    CK(pcnn_net_get_input_grad(h.net, dxh, f.in_size));
    check("dx", t->name, rel_diff(dxh, dxf, f.in_size), true);
    free(gf), free(gh);
    goto done;
fail:
    failures++;
done:
    free(x), free(tg), free(dxf), free(dxh);
    pcnn_net_destroy(&f.net);
    pcnn_net_destroy(&h.net);
}

/* pcnn_layer_set_precision's refusals: other values, layers without
 * products, after finalize; -1 gives the network's precision back. */
static void check_setter(void)
{
    pcnn_net *net = NULL;
    pcnn_layer *x, *c, *r;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, 2, 5, 5, &x));
    CK(pcnn_conv2d(net, x, 3, 3, 1, 1, 1, &c));
    CK(pcnn_relu(net, c, &r));
    const struct {
        pcnn_layer *l;
        int value;
        pcnn_status want;
    } calls[] = {{c, 2, PCNN_ERR_INVALID_ARGUMENT}, {c, -2, PCNN_ERR_INVALID_ARGUMENT},
                 {r, 1, PCNN_ERR_INVALID_ARGUMENT}, {x, 0, PCNN_ERR_INVALID_ARGUMENT},
                 {c, 0, PCNN_OK},                   {c, -1, PCNN_OK},
                 {c, 1, PCNN_OK}};
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        const pcnn_status st = pcnn_layer_set_precision(calls[i].l, calls[i].value);
        if (st != calls[i].want) {
            printf("FAIL set_precision call %zu (%d): %s, expected %s\n", i, calls[i].value,
                   pcnn_status_str(st), pcnn_status_str(calls[i].want));
            failures++;
        }
    }
    if (pcnn_layer_set_precision(NULL, 1) == PCNN_OK) {
        printf("FAIL set_precision(NULL) accepted\n");
        failures++;
    }
    CK(pcnn_net_set_loss(net, r, PCNN_LOSS_MSE));
    CK(pcnn_net_finalize(net, 2));
    char summary[2048];
    CK(pcnn_net_summary(net, summary, sizeof summary, NULL));
    if (!strstr(summary, "bf16 (")) {
        printf("FAIL: a layer set to bf16 in an fp32 network does not say bf16:\n%s\n", summary);
        failures++;
    }
    if (pcnn_layer_set_precision(c, 0) != PCNN_ERR_INVALID_STATE) {
        printf("FAIL set_precision after finalize is not INVALID_STATE\n");
        failures++;
    }
    goto done;
fail:
    failures++;
done:
    pcnn_net_destroy(&net);
}

int main(void)
{
    check_setter();
    const char *env = getenv("PCNN_BF16_PATH");
    const char *path = env && *env ? env : "auto";
    /* The expected name: the forced path when this CPU has it.  Which one
     * it has shows in the summary; `auto` and a path the CPU lacks are
     * taken from the first summary instead. */
    char seen[32] = "";
    {
        built b;
        if (build(&cases[0], PCNN_PRECISION_BF16, &b) == PCNN_OK) {
            char s[4096];
            if (pcnn_net_summary(b.net, s, sizeof s, NULL) == PCNN_OK) {
                const char *at = strstr(s, "bf16 (");
                if (at) sscanf(at + 6, "%31[^)]", seen);
            }
            pcnn_net_destroy(&b.net);
        }
    }
    printf("PCNN_BF16_PATH=%s: the products take %s\n", path, seen[0] ? seen : "?");
    if (!seen[0]) {
        printf("FAIL: no bf16 path in the summary\n");
        return 1;
    }
    if (strcmp(path, "portable") == 0 && strcmp(seen, "portable") != 0) {
        printf("FAIL: PCNN_BF16_PATH=portable took %s\n", seen);
        return 1;
    }
    if (strcmp(path, "auto") != 0 && strcmp(path, seen) != 0)
        printf("note: this CPU has no %s path; it fell back to %s\n", path, seen);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], seen);
    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf("bf16 gradients within 2^-6 of fp32 (and not equal to them) on %s\n", seen);
    return 0;
}
