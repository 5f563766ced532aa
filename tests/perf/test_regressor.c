/* The per-kernel regressors on given points (lib/perf/regressor.h): the
 * features by hand, a fit that recovers a known function, the byte format
 * (bitwise round trip, every truncation, damage, another version),
 * determinism given the seed, and clear errors for bad inputs. */
#define PCNN_EXPERIMENTAL /* pcnn_conv3d, PCNN_OPT_CONV_ALGORITHM: pcnn.h section 9 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common/expect.h"
#include "core/hash.h"
#include "core/le.h"
#include "core/rng.h"
#include "kernels/conv_direct.h"
#include "perf/regressor.h"
#include "perf/regressor_set.h"
#include "strategy/conv_choice.h"

static int near(double a, double b) { return fabs(a - b) <= 1e-12 * (fabs(b) + 1); }

static void test_features(void)
{
    double f[PERF_MAX_FEATURES];
    int n = -1;
    /* conv2d: 2 samples of 3 x 8 x 8, 4 filters 3x3, stride 1, padding 1. */
    perf_shape c = {.batch = 2, .cin = 3, .cout = 4, .d = 1, .h = 8, .w = 8, .k = 3, .stride = 1,
                    .pad = 1};
    EXPECT(perf_features(PERF_CONV2D_FWD, &c, 1, f, &n) == PCNN_OK, "conv2d features");
    const double want[11] = {log(3), log(4), log(5), log(9), log(9), log(4), log(2), log(2),
                             log1p(2.0 * 2 * 3 * 4 * 9 * 64),          /* flops */
                             log1p(4.0 * (2 * (3 * 64 + 4 * 64) + 108)), /* bytes */
                             log1p(4.0 * 2 * 3 * 9 * 64)};              /* im2col */
    EXPECT(n == 21, "conv2d: %d features, expected 21", n);
    for (int i = 0; i < 11 && n == 21; i++)
        EXPECT(near(f[i], want[i]), "conv2d feature %d: %.17g, expected %.17g", i, f[i], want[i]);
    const conv_geometry g = {.cin = 3, .cout = 4, .k = 3, .stride = 1, .pad = 1, .h = 8, .w = 8,
                             .batch = 2, .threads = 1, .keep_im2col = true,
                             .direct_available = direct_conv_available()};
    conv_choice choice;
    conv_decide(&g, CONV_ALGO_AUTO, &choice);
    EXPECT(n == 21 && f[11] == (choice.algorithm == CONV_ALGO_GEMM) &&
               f[12] == (choice.algorithm == CONV_ALGO_DIRECT) &&
               f[13] == (choice.algorithm == CONV_ALGO_TAPS),
           "conv2d: the one-hot of the algorithm does not match conv_decide");
    const conv_kernel passes[3] = {choice.forward, choice.input_grad, choice.weight_grad};
    for (int i = 0; i < 3 && n == 21; i++)
        EXPECT(f[14 + 2 * i] == (passes[i] == CONV_KERNEL_DIRECT_GRID) &&
                   f[15 + 2 * i] == (passes[i] == CONV_KERNEL_DIRECT_CHANNELS),
               "conv2d: pass %d's kernel does not match conv_decide", i);
    /* 8 x 8 padded by 1, neighbouring rows sharing their padding: a 9 x 9
     * grid per image (direct_grid_init) for 8 x 8 outputs. */
    EXPECT(n == 21 && near(f[20], 64.0 / 81), "conv2d: grid share %.17g, expected 64/81", f[20]);
    /* The backward kinds read the same fields. */
    double b[PERF_MAX_FEATURES];
    int nb;
    EXPECT(perf_features(PERF_CONV2D_BWD_WEIGHTS, &c, 1, b, &nb) == PCNN_OK && nb == n &&
               memcmp(b, f, sizeof(double) * (size_t)n) == 0,
           "conv2d_bwd_weights features differ from the forward's");

    perf_shape d = {.batch = 4, .cin = 10, .cout = 5};
    EXPECT(perf_features(PERF_DENSE_FWD, &d, 1, f, &n) == PCNN_OK && n == 9, "dense: %d", n);
    /* ... then how much of 16-float vectors batch, inputs and outputs fill,
     * and whether the forward goes through sgemv (a small batch). */
    const double wd[9] = {log(5), log(11), log(6), log(401), log(441), 4.0 / 16, 10.0 / 16,
                          5.0 / 16, 1};
    for (int i = 0; i < 9 && n == 9; i++)
        EXPECT(near(f[i], wd[i]), "dense feature %d: %.17g, expected %.17g", i, f[i], wd[i]);
    perf_shape big = {.batch = 64, .cin = 10, .cout = 5};
    EXPECT(perf_features(PERF_DENSE_FWD, &big, 1, f, &n) == PCNN_OK && n == 9 && f[8] == 0,
           "dense over a batch of 64: one sgemm");
    big = (perf_shape){.batch = 8, .cin = 1024, .cout = 256};
    EXPECT(perf_features(PERF_DENSE_FWD, &big, 1, f, &n) == PCNN_OK && n == 9 && f[8] == 0,
           "dense of 2^21 multiply-adds: one sgemm");

    perf_shape u = {.params = 1000, .optimizer = PCNN_OPTIMIZER_ADAM};
    EXPECT(perf_features(PERF_UPDATE, &u, 1, f, &n) == PCNN_OK && n == 4 &&
               near(f[0], log(1001)) && f[1] == 0 && f[2] == 0 && f[3] == 1,
           "update features");

    perf_shape e = {.batch = 2, .cin = 3, .d = 1, .h = 4, .w = 5, .fused_relu = 1};
    EXPECT(perf_features(PERF_BATCHNORM_FWD, &e, 1, f, &n) == PCNN_OK && n == 9 &&
               near(f[5], log(121)) && f[6] == 1 && near(f[7], log(21)) &&
               near(f[8], 20.0 / 32),
           "batchnorm features: %d, elements %.17g, fused %g, plane %.17g filling %g", n, f[5],
           f[6], f[7], f[8]);
    EXPECT(perf_features(PERF_RELU_FWD, &e, 1, f, &n) == PCNN_OK && n == 8,
           "relu: %d features (no fused flag)", n);

    perf_shape p = {.batch = 1, .cin = 2, .d = 1, .h = 6, .w = 6, .k = 2, .stride = 2,
                    .pool_max = 1};
    EXPECT(perf_features(PERF_POOL2D_FWD, &p, 1, f, &n) == PCNN_OK && n == 14 && f[7] == 1 &&
               near(f[8], log1p(2.0 * 9 * 4)),
           "pool2d features: %d, window reads %.17g", n, f[8]);
    /* Max 2x2 stride 2: the kernels of its own; output rows of 3 of 6. */
    EXPECT(n == 14 && f[10] == 1 && near(f[11], log(4)) && near(f[12], 3.0 / 16) &&
               near(f[13], 6.0 / 16),
           "pool2d rows: 2x2 kernel %g, log row %.17g, fills %g %g", f[10], f[11], f[12], f[13]);
    p.pool_max = 0;
    EXPECT(perf_features(PERF_POOL2D_FWD, &p, 1, f, &n) == PCNN_OK && n == 14 && f[10] == 0,
           "average pooling 2x2 runs the general kernel");
}

/* The conv3d features' direct passes (12, 13, 14: forward, dW, dx) agree
 * with what the layer itself chooses, as its summary shows: the rule is the
 * layer's private one, mirrored in regressor_features.c. */
static void expect_conv3d_passes(const perf_shape *s)
{
    double f[PERF_MAX_FEATURES];
    int n = 0;
    EXPECT(perf_features(PERF_CONV3D_FWD, s, 1, f, &n) == PCNN_OK && n == 18,
           "conv3d features: %d (%s)", n, pcnn_last_error());
    pcnn_net *net = NULL;
    pcnn_layer *x;
    char summary[4096] = "";
    const bool built = pcnn_net_create(&net) == PCNN_OK &&
                       pcnn_net_set_option(net, PCNN_OPT_CONV_ALGORITHM, s->algorithm) == PCNN_OK &&
                       pcnn_net_input3d(net, s->cin, s->d, s->h, s->w, &x) == PCNN_OK &&
                       pcnn_conv3d(net, x, s->cout, s->k, s->stride, s->pad, 1, &x) == PCNN_OK &&
                       pcnn_net_set_loss(net, x, PCNN_LOSS_MSE) == PCNN_OK &&
                       pcnn_net_finalize(net, s->batch) == PCNN_OK &&
                       pcnn_net_summary(net, summary, sizeof summary, NULL) == PCNN_OK;
    EXPECT(built, "conv3d network: %s", pcnn_last_error());
    pcnn_net_destroy(&net);
    if (!built || n != 18) return;
    const char *names[3] = {"forward direct", "dW direct", "dx direct"};
    for (int i = 0; i < 3; i++)
        EXPECT((f[12 + i] == 1) == (strstr(summary, names[i]) != NULL),
               "conv3d %dx%dx%d k%d s%d p%d algorithm %d: feature \"%s\" is %g, the layer "
               "says:\n%s",
               s->d, s->h, s->w, s->k, s->stride, s->pad, s->algorithm, names[i], f[12 + i],
               summary);
}

static void test_conv3d_features(void)
{
    /* Rows of 10 (every pass direct under auto), of 6 (none under auto,
     * all when forced), of 7 from inputs of 9 (dx alone under auto), strided
     * and 1x1x1 (never), each under auto, GEMM and direct. */
    const perf_shape shapes[] = {
        {.batch = 2, .cin = 3, .cout = 5, .d = 10, .h = 10, .w = 10, .k = 3, .stride = 1, .pad = 1},
        {.batch = 1, .cin = 4, .cout = 8, .d = 6, .h = 6, .w = 6, .k = 3, .stride = 1, .pad = 1},
        {.batch = 1, .cin = 2, .cout = 4, .d = 9, .h = 9, .w = 9, .k = 3, .stride = 1, .pad = 0},
        {.batch = 1, .cin = 2, .cout = 4, .d = 12, .h = 12, .w = 12, .k = 3, .stride = 2, .pad = 1},
        {.batch = 1, .cin = 2, .cout = 4, .d = 8, .h = 8, .w = 8, .k = 1, .stride = 1, .pad = 0},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int algorithm = 0; algorithm <= 2; algorithm++) {
            perf_shape s = shapes[i];
            s.algorithm = algorithm;
            expect_conv3d_passes(&s);
        }
    /* Lanes: input rows of 19 (k 3, no padding: output rows of 17) fill 19
     * and 17 of two vectors' 32 lanes, rows of 6 two to a vector 12 of 16;
     * 13 output channels run in two blocks of 8 (vol_direct_block). */
    double f[PERF_MAX_FEATURES];
    int n = 0;
    perf_shape r = {.batch = 1, .cin = 2, .cout = 13, .d = 4, .h = 4, .w = 19, .k = 3,
                    .stride = 1, .pad = 0};
    EXPECT(perf_features(PERF_CONV3D_FWD, &r, 1, f, &n) == PCNN_OK && n == 18 &&
               near(f[15], 17.0 / 32) && near(f[16], 19.0 / 32) && near(f[17], 13.0 / 16),
           "conv3d lanes: %g (17/32), %g (19/32), channel blocks %g (13/16)", f[15], f[16],
           f[17]);
    r.w = 8;
    EXPECT(perf_features(PERF_CONV3D_FWD, &r, 1, f, &n) == PCNN_OK && n == 18 &&
               near(f[15], 6.0 / 8) && near(f[16], 1),
           "conv3d lanes of short rows: %g (6/8), %g (1)", f[15], f[16]);
}

static void expect_status(pcnn_status got, pcnn_status want, const char *needle, const char *what)
{
    EXPECT(got == want, "%s: status %d, expected %d (%s)", what, (int)got, (int)want,
           pcnn_last_error());
    if (got == want && needle)
        EXPECT(strstr(pcnn_last_error(), needle) != NULL, "%s: message \"%s\" lacks \"%s\"", what,
               pcnn_last_error(), needle);
}

static void test_bad_shapes(void)
{
    double f[PERF_MAX_FEATURES];
    int n;
    perf_shape c = {.batch = 2, .cin = 3, .cout = 4, .d = 1, .h = 8, .w = 8, .k = 3, .stride = 1};
    perf_shape bad = c;
    bad.batch = -1;
    expect_status(perf_features(PERF_CONV2D_FWD, &bad, 1, f, &n), PCNN_ERR_SHAPE, "batch -1",
                  "negative batch");
    bad = c;
    bad.k = 11;
    expect_status(perf_features(PERF_CONV2D_FWD, &bad, 1, f, &n), PCNN_ERR_SHAPE, "kernel 11",
                  "kernel larger than the input");
    bad = c;
    bad.d = 2;
    expect_status(perf_features(PERF_CONV2D_FWD, &bad, 1, f, &n), PCNN_ERR_SHAPE, "depth 2",
                  "2D convolution with depth");
    bad = c;
    bad.pad = 2;
    bad.k = 3;
    expect_status(perf_features(PERF_POOL2D_FWD, &bad, 1, f, &n), PCNN_ERR_SHAPE, "padding 2",
                  "pool padding beyond kernel/2");
    perf_shape u = {.params = -5, .optimizer = 0};
    expect_status(perf_features(PERF_UPDATE, &u, 1, f, &n), PCNN_ERR_SHAPE, "params -5",
                  "negative parameter count");
    expect_status(perf_features((perf_kind)99, &c, 1, f, &n), PCNN_ERR_INVALID_ARGUMENT,
                  "unknown kernel kind 99", "unknown kind");
    expect_status(perf_features(PERF_CONV2D_FWD, &c, 0, f, &n), PCNN_ERR_INVALID_ARGUMENT,
                  "threads 0", "zero threads");
    EXPECT(perf_kind_name((perf_kind)PERF_KIND_COUNT) == NULL, "a name for an unknown kind");
    EXPECT(strcmp(perf_kind_name(PERF_CONV2D_BWD_WEIGHTS), "conv2d_bwd_weights") == 0,
           "kind name");
}

/* Dense shapes, log-uniform, with time = 1 us + flops / 50 GFlop/s and a
 * relative noise of `noise` (normal). */
static void dense_samples(perf_sample *s, int count, double noise, uint64_t seed)
{
    rng g = rng_make(seed, 1, 2, 3);
    for (int i = 0; i < count; i++) {
        perf_shape sh = {.batch = 1 + (int)exp(rng_uniform(&g) * log(128.0)),
                         .cin = 4 + (int)exp(rng_uniform(&g) * log(2048.0)),
                         .cout = 1 + (int)exp(rng_uniform(&g) * log(1024.0))};
        const double flops = 2.0 * sh.batch * sh.cin * sh.cout;
        s[i].shape = sh;
        s[i].seconds = (1e-6 + flops / 5e10) * (1 + noise * rng_normal(&g));
    }
}

static size_t saved_bytes(const perf_regressors *set, unsigned char **out)
{
    size_t need = 0;
    EXPECT(perf_regressors_save(set, NULL, 0, &need) == PCNN_OK, "save size: %s",
           pcnn_last_error());
    *out = malloc(need);
    EXPECT(perf_regressors_save(set, *out, need, &need) == PCNN_OK, "save: %s",
           pcnn_last_error());
    return need;
}

static void test_fit_known_function(void)
{
    enum { N = 240 };
    static perf_sample s[N];
    dense_samples(s, N, 0.02, 7);
    perf_calib_config c;
    perf_calib_defaults(&c);
    perf_regressors *set = NULL;
    EXPECT(perf_regressors_fit(&set, PERF_DENSE_FWD, s, N, &c) == PCNN_OK, "fit: %s",
           pcnn_last_error());
    if (!set) return;
    double re;
    int train, test;
    EXPECT(perf_regressor_error(set, PERF_DENSE_FWD, &re, &train, &test) == PCNN_OK, "error");
    EXPECT(test == 48 && train == 192, "split %d / %d, expected 192 / 48", train, test);
    /* 2 % noise: the median |RE| of perfect predictions is 1.35 %. */
    EXPECT(re <= 0.04, "held-out median |RE| %.4f > 4 %% on a known function", re);
    /* Fresh shapes, noise-free truth: within a few per cent. */
    double worst = 0, sum = 0;
    rng g = rng_make(99, 0, 0, 0);
    for (int i = 0; i < 50; i++) {
        perf_shape sh = {.batch = 2 + (int)rng_below(&g, 100), .cin = 16 + (int)rng_below(&g, 1000),
                         .cout = 8 + (int)rng_below(&g, 500)};
        double t;
        EXPECT(perf_regressor_predict(set, PERF_DENSE_FWD, &sh, &t) == PCNN_OK, "predict");
        const double truth = 1e-6 + 2.0 * sh.batch * sh.cin * sh.cout / 5e10;
        const double e = fabs(t - truth) / truth;
        sum += e;
        if (e > worst) worst = e;
    }
    EXPECT(sum / 50 <= 0.04, "mean |RE| %.4f on fresh shapes > 4 %%", sum / 50);
    /* Far from every timed shape, the MLP's correction stays within the
     * range it saw in training. */
    const perf_shape far = {.batch = 1, .cin = 1 << 24, .cout = 1};
    const perf_mlp *m = &set->mlp[PERF_DENSE_FWD];
    double feats[PERF_MAX_FEATURES], work[2], t_far;
    int nf;
    EXPECT(perf_kernel_work(PERF_DENSE_FWD, &far, 1, feats, &nf, work) == PCNN_OK &&
               perf_regressor_predict(set, PERF_DENSE_FWD, &far, &t_far) == PCNN_OK,
           "far shape: %s", pcnn_last_error());
    const double t0 = m->baseline[0] + m->baseline[1] * work[0] + m->baseline[2] * work[1];
    EXPECT(m->y_lo <= m->y_hi && log(t_far / t0) >= m->y_lo - 1e-9 &&
               log(t_far / t0) <= m->y_hi + 1e-9,
           "far shape: correction %g outside [%g, %g]", log(t_far / t0), m->y_lo, m->y_hi);
    EXPECT(worst <= 0.15, "worst |RE| %.4f on fresh shapes > 15 %%", worst);
    EXPECT(perf_regressor_has(set, PERF_DENSE_FWD) && !perf_regressor_has(set, PERF_DENSE_BWD),
           "has: only the fitted kind");
    EXPECT(perf_regressors_threads(set) == 1, "threads %d", perf_regressors_threads(set));
    /* Seed 004's loss recovers it as well. */
    perf_calib_config mse = c;
    mse.loss = PCNN_LOSS_MSE;
    perf_regressors *by_mse = NULL;
    EXPECT(perf_regressors_fit(&by_mse, PERF_DENSE_FWD, s, N, &mse) == PCNN_OK, "fit with MSE");
    EXPECT(perf_regressor_error(by_mse, PERF_DENSE_FWD, &re, NULL, NULL) == PCNN_OK && re <= 0.04,
           "MSE fit: held-out median |RE| %.4f > 4 %%", re);
    perf_regressors_destroy(&by_mse);

    /* Deterministic given the seed: the same bytes; another seed: others. */
    perf_regressors *again = NULL, *other = NULL;
    EXPECT(perf_regressors_fit(&again, PERF_DENSE_FWD, s, N, &c) == PCNN_OK, "refit");
    c.seed = 2;
    EXPECT(perf_regressors_fit(&other, PERF_DENSE_FWD, s, N, &c) == PCNN_OK, "fit seed 2");
    unsigned char *a, *b, *o;
    const size_t na = saved_bytes(set, &a), nb = saved_bytes(again, &b), no = saved_bytes(other, &o);
    EXPECT(na == nb && memcmp(a, b, na) == 0, "two fits with one seed differ");
    EXPECT(na != no || memcmp(a, o, na) != 0, "fits with seeds 1 and 2 are identical");
    free(a);
    free(b);
    free(o);
    perf_regressors_destroy(&again);
    perf_regressors_destroy(&other);
    perf_regressors_destroy(&set);
    EXPECT(set == NULL, "destroy leaves the handle");
}

static void test_round_trip(void)
{
    enum { N = 60 };
    static perf_sample s[N], u[N];
    dense_samples(s, N, 0.05, 3);
    rng g = rng_make(4, 0, 0, 0);
    for (int i = 0; i < N; i++) {
        u[i].shape = (perf_shape){.params = 100 + (int64_t)rng_below(&g, 1000000),
                                  .optimizer = (int)rng_below(&g, 3)};
        u[i].seconds = 1e-7 + 1e-9 * (double)u[i].shape.params * (1 + u[i].shape.optimizer);
    }
    perf_calib_config c;
    perf_calib_defaults(&c);
    /* Small MLPs of two members: every truncation of the bytes is loaded
     * below, each rebuilding the networks of the kinds read so far. */
    c.steps = 200;
    c.hidden_layers = 1;
    c.hidden = 8;
    c.members = 2;
    perf_regressors *set = NULL, *back = NULL;
    EXPECT(perf_regressors_fit(&set, PERF_DENSE_BWD, s, N, &c) == PCNN_OK, "fit dense");
    EXPECT(perf_regressors_fit(&set, PERF_UPDATE, u, N, &c) == PCNN_OK, "fit update");
    if (!set) return;
    unsigned char *bytes;
    const size_t size = saved_bytes(set, &bytes);
    EXPECT(memcmp(bytes, "PCNNREG1", 8) == 0 && le_get_u32(bytes + 8) == 3, "magic, version");
    EXPECT(set->mlp[PERF_UPDATE].members == c.members && c.members > 1,
           "an ensemble of %d members, asked %d", set->mlp[PERF_UPDATE].members, c.members);
    size_t small = 0;
    expect_status(perf_regressors_save(set, bytes, size - 1, &small), PCNN_ERR_SHAPE, "needed",
                  "save into a short buffer");
    EXPECT(small == size, "needed %zu, expected %zu", small, size);
    EXPECT(perf_regressors_load(bytes, size, &back) == PCNN_OK, "load: %s", pcnn_last_error());
    if (back) {
        unsigned char *again;
        const size_t n2 = saved_bytes(back, &again);
        EXPECT(n2 == size && memcmp(again, bytes, size) == 0, "save(load(bytes)) != bytes");
        free(again);
        for (int i = 0; i < N; i++) {
            double t1, t2, p1, p2;
            perf_regressor_predict(set, PERF_DENSE_BWD, &s[i].shape, &t1);
            perf_regressor_predict(back, PERF_DENSE_BWD, &s[i].shape, &t2);
            perf_regressor_predict(set, PERF_UPDATE, &u[i].shape, &p1);
            perf_regressor_predict(back, PERF_UPDATE, &u[i].shape, &p2);
            EXPECT(memcmp(&t1, &t2, sizeof t1) == 0 && memcmp(&p1, &p2, sizeof p1) == 0,
                   "point %d: loaded set predicts %.17g / %.17g, saved %.17g / %.17g", i, t2, p2,
                   t1, p1);
        }
        double r1, r2;
        perf_regressor_error(set, PERF_UPDATE, &r1, NULL, NULL);
        perf_regressor_error(back, PERF_UPDATE, &r2, NULL, NULL);
        EXPECT(r1 == r2, "held-out error changed in the round trip");
        EXPECT(!perf_regressor_has(back, PERF_DENSE_FWD), "an unfitted kind came back fitted");
        perf_regressors_destroy(&back);
    }
    /* Every truncation is refused, never read past. */
    int refused = 0;
    for (size_t cut = 0; cut < size; cut++) {
        perf_regressors *t = NULL;
        pcnn_status st = perf_regressors_load(bytes, cut, &t);
        refused += st == PCNN_ERR_CORRUPT && t == NULL;
        perf_regressors_destroy(&t);
    }
    EXPECT(refused == (int)size, "%d of %zu truncations refused as corrupt", refused, size);
    expect_status(perf_regressors_load(bytes, 10, &back), PCNN_ERR_CORRUPT, "truncated",
                  "10 bytes");
    /* One flipped bit anywhere: the checksum. */
    bytes[size / 2] ^= 0x10;
    expect_status(perf_regressors_load(bytes, size, &back), PCNN_ERR_CORRUPT, "checksum",
                  "flipped bit");
    bytes[size / 2] ^= 0x10;
    /* Another version, with a valid checksum: unsupported, the older ones
     * (fitted on other features) and a newer one alike. */
    const uint32_t versions[3] = {1, 2, 4};
    for (int i = 0; i < 3; i++) {
        const uint32_t v = versions[i];
        le_put_u32(bytes + 8, v);
        le_put_u64(bytes + size - 8, hash_fnv1a(HASH_FNV1A_BASIS, bytes, size - 8));
        char what[32];
        snprintf(what, sizeof what, "version %u", v);
        expect_status(perf_regressors_load(bytes, size, &back), PCNN_ERR_UNSUPPORTED,
                      v < 3 ? "calibrate the regressors again" : what, what);
    }
    memcpy(bytes, "NOTREGS!", 8);
    expect_status(perf_regressors_load(bytes, size, &back), PCNN_ERR_CORRUPT, "magic", "magic");
    free(bytes);
    perf_regressors_destroy(&set);
}

static void test_bad_fits(void)
{
    enum { N = 40 };
    static perf_sample s[N];
    dense_samples(s, N, 0, 5);
    perf_calib_config c;
    perf_calib_defaults(&c);
    perf_regressors *set = NULL;
    s[7].seconds = NAN;
    expect_status(perf_regressors_fit(&set, PERF_DENSE_FWD, s, N, &c), PCNN_ERR_INVALID_ARGUMENT,
                  "sample 7", "NaN time");
    s[7].seconds = -1e-3;
    expect_status(perf_regressors_fit(&set, PERF_DENSE_FWD, s, N, &c), PCNN_ERR_INVALID_ARGUMENT,
                  "sample 7", "negative time");
    s[7].seconds = 1e-3;
    s[9].shape.cout = 0;
    expect_status(perf_regressors_fit(&set, PERF_DENSE_FWD, s, N, &c), PCNN_ERR_SHAPE,
                  "output features 0", "bad shape in a sample");
    s[9].shape.cout = 3;
    expect_status(perf_regressors_fit(&set, PERF_DENSE_FWD, s, 5, &c), PCNN_ERR_INVALID_ARGUMENT,
                  "at least", "too few samples");
    c.holdout = 0.9;
    expect_status(perf_regressors_fit(&set, PERF_DENSE_FWD, s, N, &c), PCNN_ERR_INVALID_ARGUMENT,
                  "holdout", "holdout 0.9");
    perf_calib_defaults(&c);
    c.loss = PCNN_LOSS_SOFTMAX_CROSS_ENTROPY;
    expect_status(perf_regressors_fit(&set, PERF_DENSE_FWD, s, N, &c), PCNN_ERR_INVALID_ARGUMENT,
                  "loss 0", "cross entropy for a regression");
    perf_calib_defaults(&c);
    c.learning_rate = NAN;
    expect_status(perf_regressors_fit(&set, PERF_DENSE_FWD, s, N, &c), PCNN_ERR_INVALID_ARGUMENT,
                  "learning rate", "NaN learning rate");
    perf_calib_defaults(&c);
    c.members = 0;
    expect_status(perf_regressors_fit(&set, PERF_DENSE_FWD, s, N, &c), PCNN_ERR_INVALID_ARGUMENT,
                  "members 0", "an ensemble of none");
    c.members = PERF_MAX_MEMBERS + 1;
    expect_status(perf_regressors_fit(&set, PERF_DENSE_FWD, s, N, &c), PCNN_ERR_INVALID_ARGUMENT,
                  "members 9", "an ensemble beyond the format's");
    EXPECT(set == NULL, "a failed fit created a set");
    perf_calib_defaults(&c);
    c.steps = 50;
    EXPECT(perf_regressors_fit(&set, PERF_DENSE_FWD, s, N, &c) == PCNN_OK, "fit");
    double t;
    expect_status(perf_regressor_predict(set, PERF_CONV2D_FWD, &s[0].shape, &t),
                  PCNN_ERR_INVALID_STATE, "not calibrated", "predict an uncalibrated kind");
    perf_shape neg = s[0].shape;
    neg.batch = -3;
    expect_status(perf_regressor_predict(set, PERF_DENSE_FWD, &neg, &t), PCNN_ERR_SHAPE,
                  "batch -3", "predict a negative batch");
    expect_status(perf_regressor_predict(set, (perf_kind)-1, &neg, &t), PCNN_ERR_INVALID_ARGUMENT,
                  "unknown", "predict an unknown kind");
    c.threads = 2;
    expect_status(perf_regressors_fit(&set, PERF_DENSE_BWD, s, N, &c), PCNN_ERR_INVALID_ARGUMENT,
                  "threads", "a fit for another thread count into the set");
    perf_regressors_destroy(&set);
}

int main(void)
{
    test_features();
    test_conv3d_features();
    test_bad_shapes();
    test_fit_known_function();
    test_round_trip();
    test_bad_fits();
    if (failures) printf("%d failure(s)\n", failures);
    else printf("all regressor checks passed\n");
    return failures ? 1 : 0;
}
