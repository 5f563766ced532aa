/* Compare libpcnn with PyTorch on the fixtures written by
 * scripts/make_fixtures.py (format described there): build the fixture's
 * network through the public API, set its initial parameters, and check
 *   grads0        gradients on the first batch (pcnn_net_compute_gradients,
 *                 on a separate network so nothing else is disturbed)
 *   losses        the loss of each training step
 *   final_params  the parameters after the steps
 *   predict       inference output (batch-norm running statistics)
 * against PyTorch's float64 results.  An array passes when every element
 * has |pcnn - ref| <= RTOL * (|ref| + mean |ref| over the array): relative,
 * with elements much smaller than the array's typical size judged against
 * that size.
 *
 * Usage: test_reference [--threads N] fixture.txt...
 */
#define PCNN_EXPERIMENTAL /* pcnn_net_input3d and the 3D layers: pcnn.h section 9 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pcnn.h"

#define RTOL 1e-4
#define MAX_LAYERS 32
#define MAX_ARRAYS 16
#define MAX_OPTIONS 16

#define MAX_INPUTS 8

typedef struct fx_layer {
    char kind[32];
    int num_in;
    int in[MAX_INPUTS];
    double arg[6];
} fx_layer;

typedef struct fx_array {
    char name[32];
    size_t n;
    double *v;
} fx_array;

typedef struct fixture {
    char name[64];
    int c, d, h, w; /* d: 1 for images (input), the depth of volumes (input3d) */
    bool volumes;   /* input3d */
    int num_layers;
    fx_layer layers[MAX_LAYERS];
    char loss[32];
    int loss_layer;
    char optimizer[32];
    int num_options;
    char option_name[MAX_OPTIONS][32];
    double option_value[MAX_OPTIONS];
    int batch, steps;
    int num_arrays;
    fx_array arrays[MAX_ARRAYS];
} fixture;

/* Inputs and arguments of each layer kind, as written by the script. */
static const struct {
    const char *kind;
    int inputs, args;
} kinds[] = {
    {"conv2d", 1, 5},     {"maxpool2d", 1, 3}, {"avgpool2d", 1, 3},  {"global_avgpool", 1, 0},
    {"dense", 1, 2},      {"flatten", 1, 0},   {"relu", 1, 0},       {"leaky_relu", 1, 1},
    {"batchnorm", 1, 2},  {"add", 2, 0},       {"add_scaled", 2, 1}, {"pixel_shuffle", 1, 1},
    {"conv3d", 1, 5},     {"maxpool3d", 1, 3}, {"avgpool3d", 1, 3},  {"sigmoid", 1, 0},
    {"tanh", 1, 0},       {"upsample2d", 1, 2}, {"upsample3d", 1, 2}, {"conv_transpose2d", 1, 6},
    {"conv_transpose3d", 1, 6}, {"concat", -1, 0}, /* -1: the count comes first */
};

static int g_threads = 0;

static void fixture_free(fixture *f)
{
    for (int i = 0; i < f->num_arrays; i++) free(f->arrays[i].v);
    f->num_arrays = 0;
}

static const fx_array *find_array(const fixture *f, const char *name)
{
    for (int i = 0; i < f->num_arrays; i++)
        if (!strcmp(f->arrays[i].name, name)) return &f->arrays[i];
    return NULL;
}

/* Parse a fixture; prints the problem and returns false on a bad file. */
static bool fixture_read(const char *path, fixture *f)
{
    memset(f, 0, sizeof *f);
    FILE *fp = fopen(path, "r");
    if (!fp) {
        fprintf(stderr, "%s: cannot open\n", path);
        return false;
    }
    char key[32];
    int version = 0;
    if (fscanf(fp, "%31s %d", key, &version) != 2 || strcmp(key, "pcnn-fixture") || version != 1)
        goto bad;
    while (fscanf(fp, "%31s", key) == 1) {
        if (!strcmp(key, "end")) {
            fclose(fp);
            return true;
        } else if (!strcmp(key, "name")) {
            if (fscanf(fp, "%63s", f->name) != 1) goto bad;
        } else if (!strcmp(key, "input")) {
            if (fscanf(fp, "%d %d %d", &f->c, &f->h, &f->w) != 3) goto bad;
            f->d = 1;
        } else if (!strcmp(key, "input3d")) {
            if (fscanf(fp, "%d %d %d %d", &f->c, &f->d, &f->h, &f->w) != 4) goto bad;
            f->volumes = true;
        } else if (!strcmp(key, "layer")) {
            if (f->num_layers == MAX_LAYERS) goto bad;
            fx_layer *l = &f->layers[f->num_layers++];
            if (fscanf(fp, "%31s", l->kind) != 1) goto bad;
            int k = -1;
            for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
                if (!strcmp(kinds[i].kind, l->kind)) k = (int)i;
            if (k < 0) goto bad;
            l->num_in = kinds[k].inputs;
            if (l->num_in < 0 && (fscanf(fp, "%d", &l->num_in) != 1 || l->num_in < 1 ||
                                  l->num_in > MAX_INPUTS))
                goto bad;
            for (int i = 0; i < l->num_in; i++)
                if (fscanf(fp, "%d", &l->in[i]) != 1) goto bad;
            for (int i = 0; i < kinds[k].args; i++)
                if (fscanf(fp, "%lf", &l->arg[i]) != 1) goto bad;
        } else if (!strcmp(key, "loss")) {
            if (fscanf(fp, "%31s %d", f->loss, &f->loss_layer) != 2) goto bad;
        } else if (!strcmp(key, "optimizer")) {
            if (fscanf(fp, "%31s", f->optimizer) != 1) goto bad;
        } else if (!strcmp(key, "option")) {
            if (f->num_options == MAX_OPTIONS) goto bad;
            int i = f->num_options++;
            if (fscanf(fp, "%31s %lf", f->option_name[i], &f->option_value[i]) != 2) goto bad;
        } else if (!strcmp(key, "batch")) {
            if (fscanf(fp, "%d", &f->batch) != 1) goto bad;
        } else if (!strcmp(key, "steps")) {
            if (fscanf(fp, "%d", &f->steps) != 1) goto bad;
        } else if (!strcmp(key, "array")) {
            if (f->num_arrays == MAX_ARRAYS) goto bad;
            fx_array *a = &f->arrays[f->num_arrays];
            if (fscanf(fp, "%31s %zu", a->name, &a->n) != 2) goto bad;
            a->v = malloc((a->n + 1) * sizeof *a->v);
            if (!a->v) goto bad;
            f->num_arrays++;
            for (size_t i = 0; i < a->n; i++)
                if (fscanf(fp, "%lf", &a->v[i]) != 1) goto bad;
        } else {
            goto bad;
        }
    }
bad:
    fprintf(stderr, "%s: malformed fixture near '%s'\n", path, key);
    fclose(fp);
    fixture_free(f);
    return false;
}

#define CK(call)                                                                     \
    do {                                                                             \
        pcnn_status ck_s_ = (call);                                                  \
        if (ck_s_ != PCNN_OK) {                                                      \
            printf("  %s: %s -> %s: %s\n", f->name, #call, pcnn_status_str(ck_s_),   \
                   pcnn_last_error());                                               \
            goto fail;                                                               \
        }                                                                            \
    } while (0)

static pcnn_status add_layer(pcnn_net *net, pcnn_layer **h, const fx_layer *l, pcnn_layer **o)
{
    pcnn_layer *a = h[l->in[0]], *b = h[l->in[1]];
    const double *g = l->arg;
    const char *k = l->kind;
    if (!strcmp(k, "conv2d"))
        return pcnn_conv2d(net, a, (int)g[0], (int)g[1], (int)g[2], (int)g[3], (int)g[4], o);
    if (!strcmp(k, "maxpool2d")) return pcnn_maxpool2d(net, a, (int)g[0], (int)g[1], (int)g[2], o);
    if (!strcmp(k, "avgpool2d")) return pcnn_avgpool2d(net, a, (int)g[0], (int)g[1], (int)g[2], o);
    if (!strcmp(k, "global_avgpool")) return pcnn_global_avgpool(net, a, o);
    if (!strcmp(k, "dense")) return pcnn_dense(net, a, (int)g[0], (int)g[1], o);
    if (!strcmp(k, "flatten")) return pcnn_flatten(net, a, o);
    if (!strcmp(k, "relu")) return pcnn_relu(net, a, o);
    if (!strcmp(k, "leaky_relu")) return pcnn_leaky_relu(net, a, (float)g[0], o);
    if (!strcmp(k, "batchnorm")) return pcnn_batchnorm(net, a, (float)g[0], (float)g[1], o);
    if (!strcmp(k, "add")) return pcnn_add(net, a, b, o);
    if (!strcmp(k, "add_scaled")) return pcnn_add_scaled(net, a, b, (float)g[0], o);
    if (!strcmp(k, "pixel_shuffle")) return pcnn_pixel_shuffle(net, a, (int)g[0], o);
    if (!strcmp(k, "conv3d"))
        return pcnn_conv3d(net, a, (int)g[0], (int)g[1], (int)g[2], (int)g[3], (int)g[4], o);
    if (!strcmp(k, "maxpool3d")) return pcnn_maxpool3d(net, a, (int)g[0], (int)g[1], (int)g[2], o);
    if (!strcmp(k, "avgpool3d")) return pcnn_avgpool3d(net, a, (int)g[0], (int)g[1], (int)g[2], o);
    if (!strcmp(k, "sigmoid")) return pcnn_sigmoid(net, a, o);
    if (!strcmp(k, "tanh")) return pcnn_tanh(net, a, o);
    if (!strcmp(k, "concat")) {
        pcnn_layer *ins[MAX_INPUTS];
        for (int i = 0; i < l->num_in; i++) ins[i] = h[l->in[i]];
        return pcnn_concat(net, ins, l->num_in, o);
    }
    if (!strcmp(k, "upsample2d"))
        return pcnn_upsample2d(net, a, (int)g[0], (pcnn_upsample_mode)g[1], o);
    if (!strcmp(k, "upsample3d"))
        return pcnn_upsample3d(net, a, (int)g[0], (pcnn_upsample_mode)g[1], o);
    if (!strcmp(k, "conv_transpose2d"))
        return pcnn_conv_transpose2d(net, a, (int)g[0], (int)g[1], (int)g[2], (int)g[3],
                                     (int)g[4], (int)g[5], o);
    if (!strcmp(k, "conv_transpose3d"))
        return pcnn_conv_transpose3d(net, a, (int)g[0], (int)g[1], (int)g[2], (int)g[3],
                                     (int)g[4], (int)g[5], o);
    return PCNN_ERR_INVALID_ARGUMENT;
}

/* Build, configure and finalize the fixture's network with its initial
 * parameters. */
static pcnn_net *build(const fixture *f)
{
    pcnn_net *net = NULL;
    pcnn_layer *h[MAX_LAYERS + 1] = {0};
    pcnn_loss loss;
    pcnn_optimizer opt;
    if (!strcmp(f->loss, "cross_entropy")) loss = PCNN_LOSS_SOFTMAX_CROSS_ENTROPY;
    else if (!strcmp(f->loss, "mse")) loss = PCNN_LOSS_MSE;
    else if (!strcmp(f->loss, "l1")) loss = PCNN_LOSS_L1;
    else if (!strcmp(f->loss, "bce_logits")) loss = PCNN_LOSS_BCE_WITH_LOGITS;
    else {
        printf("  %s: unknown loss %s\n", f->name, f->loss);
        return NULL;
    }
    if (!strcmp(f->optimizer, "sgd")) opt = PCNN_OPTIMIZER_SGD;
    else if (!strcmp(f->optimizer, "momentum")) opt = PCNN_OPTIMIZER_MOMENTUM;
    else if (!strcmp(f->optimizer, "adam")) opt = PCNN_OPTIMIZER_ADAM;
    else {
        printf("  %s: unknown optimizer %s\n", f->name, f->optimizer);
        return NULL;
    }
    CK(pcnn_net_create(&net));
    if (f->volumes) CK(pcnn_net_input3d(net, f->c, f->d, f->h, f->w, &h[0]));
    else CK(pcnn_net_input(net, f->c, f->h, f->w, &h[0]));
    for (int i = 0; i < f->num_layers; i++) CK(add_layer(net, h, &f->layers[i], &h[i + 1]));
    if (f->loss_layer < 0 || f->loss_layer > f->num_layers) goto fail;
    CK(pcnn_net_set_loss(net, h[f->loss_layer], loss));
    CK(pcnn_net_set_optimizer(net, opt));
    static const struct {
        const char *name;
        pcnn_option opt;
    } options[] = {
        {"learning_rate", PCNN_OPT_LEARNING_RATE}, {"momentum", PCNN_OPT_MOMENTUM},
        {"weight_decay", PCNN_OPT_WEIGHT_DECAY},   {"adam_beta1", PCNN_OPT_ADAM_BETA1},
        {"adam_beta2", PCNN_OPT_ADAM_BETA2},       {"adam_epsilon", PCNN_OPT_ADAM_EPSILON},
    };
    for (int i = 0; i < f->num_options; i++) {
        int k = -1;
        for (size_t j = 0; j < sizeof options / sizeof options[0]; j++)
            if (!strcmp(options[j].name, f->option_name[i])) k = (int)j;
        if (k < 0) {
            printf("  %s: unknown option %s\n", f->name, f->option_name[i]);
            goto fail;
        }
        CK(pcnn_net_set_option(net, options[k].opt, f->option_value[i]));
    }
    if (g_threads > 0) CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, g_threads));
    CK(pcnn_net_finalize(net, f->batch));

    const fx_array *p = find_array(f, "params");
    size_t np = 0;
    CK(pcnn_net_num_params(net, &np));
    if (!p || p->n != np) {
        printf("  %s: network has %zu parameters, fixture %zu\n", f->name, np, p ? p->n : 0);
        goto fail;
    }
    float *buf = malloc((np + 1) * sizeof *buf);
    if (!buf) goto fail;
    for (size_t i = 0; i < np; i++) buf[i] = (float)p->v[i];
    pcnn_status s = pcnn_net_set_params(net, buf, np);
    free(buf);
    CK(s);
    return net;
fail:
    pcnn_net_destroy(&net);
    return NULL;
}

/* Compare n values with the reference array; print one line; true if ok. */
static bool compare(const fixture *f, const char *what, const float *got, const fx_array *ref,
                    size_t n)
{
    if (!ref || ref->n != n) {
        printf("  %-22s %-14s missing or wrong size in fixture\n", f->name, what);
        return false;
    }
    double mean = 0, max_abs = 0, max_rel = 0, worst = 0;
    size_t worst_i = 0;
    for (size_t i = 0; i < n; i++) mean += fabs(ref->v[i]) / (double)n;
    for (size_t i = 0; i < n; i++) {
        double r = ref->v[i], e = fabs((double)got[i] - r);
        double ratio = e / (RTOL * (fabs(r) + mean));
        max_abs = fmax(max_abs, e);
        max_rel = fmax(max_rel, e / fmax(fabs(r), 1e-30));
        if (!(ratio <= worst)) {
            worst = ratio;
            worst_i = i;
        }
    }
    bool ok = worst <= 1.0;
    printf("  %-22s %-14s n=%-5zu max abs %9.3g  max rel %9.3g  worst/tol %7.3f  %s", f->name,
           what, n, max_abs, max_rel, worst, ok ? "PASS" : "FAIL");
    if (!ok) printf("  [%zu]: got %.8g want %.8g", worst_i, (double)got[worst_i], ref->v[worst_i]);
    printf("\n");
    return ok;
}

static bool run_fixture(const fixture *f)
{
    bool ok = true;
    pcnn_net *net = NULL, *gnet = NULL;
    float *buf = NULL, *tgt = NULL, *xs = NULL, *losses = NULL;
    int32_t *lab = NULL;
    size_t sample = (size_t)f->c * f->d * f->h * f->w, np = 0, no = 0;
    const fx_array *x = find_array(f, "x"), *labels = find_array(f, "labels"),
                   *targets = find_array(f, "targets"), *x_eval = find_array(f, "x_eval");
    size_t per_step = (size_t)f->batch * sample;
    if (!x || x->n != (size_t)f->steps * per_step || (!labels && !targets) || !x_eval ||
        x_eval->n % sample) {
        printf("  %s: inputs missing or of the wrong size\n", f->name);
        return false;
    }
    gnet = build(f);
    net = build(f);
    if (!net || !gnet) goto fail;
    CK(pcnn_net_num_params(net, &np));
    CK(pcnn_net_output_size(net, &no));
    size_t n_eval = x_eval->n / sample;
    size_t big = np > n_eval * no ? np : n_eval * no;
    buf = malloc((big + 1) * sizeof *buf);
    xs = malloc((x->n > x_eval->n ? x->n : x_eval->n) * sizeof *xs);
    losses = malloc((size_t)f->steps * sizeof *losses);
    lab = malloc(((size_t)f->steps * f->batch + 1) * sizeof *lab);
    tgt = malloc(((size_t)f->steps * f->batch * no + 1) * sizeof *tgt);
    if (!buf || !xs || !losses || !lab || !tgt) goto fail;
    if (labels) {
        if (labels->n != (size_t)f->steps * f->batch) goto fail;
        for (size_t i = 0; i < labels->n; i++) lab[i] = (int32_t)labels->v[i];
    } else {
        if (targets->n != (size_t)f->steps * f->batch * no) {
            printf("  %s: targets: %zu in fixture, network output needs %zu\n", f->name,
                   targets->n, (size_t)f->steps * f->batch * no);
            goto fail;
        }
        for (size_t i = 0; i < targets->n; i++) tgt[i] = (float)targets->v[i];
    }
    for (size_t i = 0; i < x->n; i++) xs[i] = (float)x->v[i];

    /* Gradients at the initial parameters, first batch. */
    float l0;
    CK(pcnn_net_compute_gradients(gnet, f->batch, xs, labels ? lab : NULL,
                                  labels ? NULL : tgt, &l0));
    CK(pcnn_net_get_grads(gnet, buf, np));
    ok &= compare(f, "grads0", buf, find_array(f, "grads0"), np);

    for (int s = 0; s < f->steps; s++)
        CK(pcnn_net_train_step(net, f->batch, xs + (size_t)s * per_step,
                               labels ? lab + (size_t)s * f->batch : NULL,
                               labels ? NULL : tgt + (size_t)s * f->batch * no, &losses[s]));
    ok &= compare(f, "losses", losses, find_array(f, "losses"), (size_t)f->steps);
    CK(pcnn_net_get_params(net, buf, np));
    ok &= compare(f, "final_params", buf, find_array(f, "final_params"), np);

    for (size_t i = 0; i < x_eval->n; i++) xs[i] = (float)x_eval->v[i];
    CK(pcnn_net_predict(net, (int)n_eval, xs, buf, n_eval * no));
    ok &= compare(f, "predict", buf, find_array(f, "predict"), n_eval * no);
    goto done;
fail:
    ok = false;
done:
    free(buf);
    free(xs);
    free(losses);
    free(lab);
    free(tgt);
    pcnn_net_destroy(&net);
    pcnn_net_destroy(&gnet);
    return ok;
}

int main(int argc, char **argv)
{
    int failed = 0, run = 0;
    printf("reference: rtol %g (|pcnn - torch| <= rtol * (|torch| + mean |torch|))\n", RTOL);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            g_threads = atoi(argv[++i]);
            continue;
        }
        fixture f;
        run++;
        if (!fixture_read(argv[i], &f)) {
            failed++;
            continue;
        }
        bool ok = run_fixture(&f);
        printf("%-24s %s\n", f.name, ok ? "PASS" : "FAIL");
        if (!ok) failed++;
        fixture_free(&f);
    }
    if (run == 0) {
        fprintf(stderr, "usage: test_reference [--threads N] fixture.txt...\n");
        return 2;
    }
    printf("reference: %d of %d fixtures failed\n", failed, run);
    return failed ? 1 : 0;
}
