/* Banded vol2col: a 3D convolution whose vol2col matrix exceeds the budget
 * runs in bands of output planes of one sample.  Networks with the budget
 * lowered (one plane per band; three planes, the last band partial; the
 * default, which runs whole-batch) must give the same outputs, gradients
 * (weights, bias and, through a shared input, accumulated input gradients)
 * and parameters after Adam steps, to float rounding.  Strides 1 and 2,
 * padding 0-2, bias on and off. */
#define PCNN_EXPERIMENTAL
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/net.h"
#include "layers/layer.h"
#include "layers/layers.h"
#include "pcnn.h"

static int failures;
#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            failures++;                                                         \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                         \
            printf(__VA_ARGS__);                                                \
            printf("\n");                                                       \
        }                                                                       \
    } while (0)
#define OK(call)                                                                          \
    do {                                                                                  \
        pcnn_status s_ = (call);                                                          \
        if (s_ != PCNN_OK) {                                                              \
            printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, pcnn_last_error()); \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

enum { N = 3, C = 2, D = 9, H = 7, W = 6, OUT = 3 };

typedef struct conf {
    int k, stride, pad, bias;
} conf;

/* input -> conv t -> (conv a, conv b) -> add -> flatten -> dense(OUT), MSE:
 * t's input gradient is the sum of a's and b's (accumulated). */
static pcnn_net *build(const conf *cf, size_t budget, pcnn_layer **probe)
{
    pcnn_net *net;
    pcnn_layer *x, *t, *a, *b, *y;
    OK(pcnn_net_create(&net));
    OK(pcnn_net_input3d(net, C, D, H, W, &x));
    OK(pcnn_conv3d(net, x, 3, 3, 1, 1, 1, &t));
    OK(pcnn_conv3d(net, t, 4, cf->k, cf->stride, cf->pad, cf->bias, &a));
    OK(pcnn_conv3d(net, t, 4, cf->k, cf->stride, cf->pad, !cf->bias, &b));
    OK(pcnn_add(net, a, b, &y));
    OK(pcnn_flatten(net, y, &y));
    OK(pcnn_dense(net, y, OUT, 1, &y));
    OK(pcnn_net_set_loss(net, y, PCNN_LOSS_MSE));
    OK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_ADAM));
    OK(pcnn_net_set_option(net, PCNN_OPT_SEED, 7));
    net->opt.conv3d_col_budget = budget; /* this network's only */
    OK(pcnn_net_finalize(net, N));
    *probe = a;
    return net;
}

static double max_rel(const float *a, const float *b, size_t n)
{
    double scale = 1e-3, diff = 0.0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(b[i]));
    for (size_t i = 0; i < n; i++) diff = fmax(diff, fabs((double)a[i] - b[i]));
    return diff / scale;
}

typedef struct run {
    float *pred, *grads, *params;
    size_t np;
    char choice[160];
} run;

static run train(const conf *cf, size_t budget, const float *x, const float *t)
{
    pcnn_layer *probe;
    pcnn_net *net = build(cf, budget, &probe);
    run r;
    snprintf(r.choice, sizeof r.choice, "%s", probe->decision.kernel);
    OK(pcnn_net_num_params(net, &r.np));
    r.pred = malloc(N * OUT * sizeof(float));
    r.grads = malloc(r.np * sizeof(float));
    r.params = malloc(r.np * sizeof(float));
    OK(pcnn_net_predict(net, N, x, r.pred, N * OUT));
    float loss;
    OK(pcnn_net_compute_gradients(net, N, x, NULL, t, &loss));
    OK(pcnn_net_get_grads(net, r.grads, r.np));
    for (int s = 0; s < 3; s++) OK(pcnn_net_train_step(net, N, x, NULL, t, &loss));
    OK(pcnn_net_get_params(net, r.params, r.np));
    pcnn_net_destroy(&net);
    return r;
}

static void run_free(run *r)
{
    free(r->pred), free(r->grads), free(r->params);
}

int main(void)
{
    static const conf confs[] = {
        {3, 1, 1, 1}, {3, 2, 1, 0}, {3, 1, 0, 1}, {2, 2, 2, 1}, {3, 3, 2, 0},
    };
    float x[N * C * D * H * W], t[N * OUT];
    unsigned long long st = 99;
    for (size_t i = 0; i < sizeof x / sizeof *x; i++) {
        st = st * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)(st >> 40) / (float)(1 << 24) * 2 - 1;
    }
    for (int i = 0; i < N * OUT; i++) t[i] = (float)sin(i);
    for (size_t c = 0; c < sizeof confs / sizeof *confs; c++) {
        const conf *cf = &confs[c];
        run whole = train(cf, CONV3D_COL_BUDGET_FLOATS, x, t);
        CHECK(strstr(whole.choice, "bands") == NULL, "conf %zu whole: %s", c, whole.choice);
        /* 1: one plane per band; 3 planes of C*K^3 x Ho*Wo: partial last band. */
        const int pad = cf->pad, k = cf->k, s = cf->stride;
        const size_t plane = (size_t)3 * k * k * k * ((H + 2 * pad - k) / s + 1) *
                             ((W + 2 * pad - k) / s + 1);
        const size_t budgets[2] = {1, 3 * plane};
        for (int b = 0; b < 2; b++) {
            run band = train(cf, budgets[b], x, t);
            char want[64];
            snprintf(want, sizeof want, "bands of %d output planes", b == 0 ? 1 : 3);
            CHECK(strstr(band.choice, want) != NULL, "conf %zu budget %zu: %s", c, budgets[b],
                  band.choice);
            double ep = max_rel(band.pred, whole.pred, N * OUT);
            double eg = max_rel(band.grads, whole.grads, whole.np);
            double ew = max_rel(band.params, whole.params, whole.np);
            CHECK(ep < 1e-5 && eg < 1e-5 && ew < 1e-5,
                  "conf %zu budget %zu: relative errors pred %.2g grads %.2g params %.2g", c,
                  budgets[b], ep, eg, ew);
            /* The gradients are not trivially zero. */
            double norm = 0;
            for (size_t i = 0; i < whole.np; i++) norm += fabs(whole.grads[i]);
            CHECK(norm > 1e-3, "conf %zu: gradients vanish", c);
            run_free(&band);
        }
        run_free(&whole);
    }
    if (failures) printf("%d failure(s)\n", failures);
    else printf("banded vol2col matches the whole-batch path\n");
    return failures ? 1 : 0;
}
