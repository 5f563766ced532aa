/* Fitting one kind's model on measured points and predicting with it
 * (regressor.h).  A model is a baseline t0 = c0 + c1 work + c2 bytes
 * (non-negative least squares on relative error: the roofline-like trend
 * that carries most of the variation over five orders of magnitude) times
 * exp(MLP), the MLP predicting log(t / t0) from the log-normalised
 * features and log t0.  The MLP is a libpcnn network: hidden_layers x
 * (dense + ReLU) -> dense 1, plus a linear dense path from the input added
 * to it, trained with Adam (cosine-decayed learning rate, L2 weight
 * decay) on the points not held out (seed 004 §3.1.3, with a fixed
 * schedule instead of early stopping: see train), on the L1 loss by
 * default (perf_calib_config.loss).  A prediction's correction is held to
 * the range seen in training. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/error.h"
#include "../core/hash.h"
#include "../core/memory.h"
#include "../core/rng.h"
#include "regressor_set.h"

/* The MLP: 3 x 64 hidden units trained for 2000 steps fitted the step
 * changes of the kernels (algorithm switches, vector tails, cache sizes)
 * that 2 x 32 for 1000 steps smoothed over: on one machine's 24 kinds of
 * timings, 22 rather than 17 met their held-out target.  They cost about
 * 0.15 ms a step, 0.3 s a kind; a budget too short for them shortens the
 * training (fit_all in regressor_calib.c). */
void perf_calib_defaults(perf_calib_config *c)
{
    *c = (perf_calib_config){.budget_seconds = 5.0, .threads = 1, .seed = 1,
                             .kinds = perf_kinds_resnet(), .max_points = 400, .min_points = 12,
                             .repetitions = 3, .holdout = 0.2, .hidden_layers = 3, .hidden = 64,
                             .members = 3, .steps = 2000, .batch = 64, .learning_rate = 1e-2,
                             .weight_decay = 1e-3, .loss = PCNN_LOSS_L1};
}

static uint32_t family_bits(perf_kind fwd)
{
    uint32_t bits = 0;
    for (int k = 0; k < PERF_KIND_COUNT; k++)
        if (perf_kind_family((perf_kind)k) == fwd) bits |= 1u << k;
    return bits;
}

uint32_t perf_kinds_resnet(void)
{
    return family_bits(PERF_CONV2D_FWD) | family_bits(PERF_BATCHNORM_FWD) |
           family_bits(PERF_ADD_FWD) | family_bits(PERF_RELU_FWD) |
           family_bits(PERF_GLOBAL_AVGPOOL_FWD) | family_bits(PERF_DENSE_FWD) |
           (1u << PERF_UPDATE);
}

uint32_t perf_kinds_all(void) { return (1u << PERF_KIND_COUNT) - 1; }

pcnn_status perf_set_create(int threads, perf_regressors **out)
{
    REQUIRE(threads >= 1, PCNN_ERR_INVALID_ARGUMENT, "threads %d must be >= 1", threads);
    perf_regressors *set = mem_calloc(1, sizeof *set);
    if (!set) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "regressor set");
    set->threads = threads;
    *out = set;
    return PCNN_OK;
}

static void mlp_clear(perf_mlp *m)
{
    for (int i = 0; i < PERF_MAX_MEMBERS; i++) pcnn_net_destroy(&m->net[i]);
    mem_free(m->params);
    memset(m, 0, sizeof *m);
}

void perf_regressors_destroy(perf_regressors **set)
{
    if (!set || !*set) return;
    for (int k = 0; k < PERF_KIND_COUNT; k++) mlp_clear(&(*set)->mlp[k]);
    mem_free(*set);
    *set = NULL;
}

int perf_regressors_threads(const perf_regressors *set) { return set ? set->threads : 0; }

int perf_regressor_has(const perf_regressors *set, perf_kind kind)
{
    return set && perf_kind_name(kind) && set->mlp[kind].fitted;
}

/* The MLP as a network for batches of max_batch points. */
static pcnn_status mlp_layers(pcnn_net *net, const perf_mlp *m, int max_batch, uint64_t seed,
                              double learning_rate, double weight_decay, pcnn_loss loss)
{
    pcnn_layer *in, *deep, *wide, *out;
    TRY(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    TRY(pcnn_net_set_option(net, PCNN_OPT_SEED, (double)(seed & ((1ull << 53) - 1))));
    TRY(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, learning_rate));
    TRY(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_ADAM));
    TRY(pcnn_net_set_option(net, PCNN_OPT_WEIGHT_DECAY, weight_decay));
    TRY(pcnn_net_input(net, m->features, 1, 1, &in));
    deep = in;
    for (int i = 0; i < m->hidden_layers; i++) {
        TRY(pcnn_dense(net, deep, m->hidden, 1, &deep));
        TRY(pcnn_relu(net, deep, &deep));
    }
    TRY(pcnn_dense(net, in, 1, 1, &wide));
    out = wide;
    if (m->hidden_layers > 0) {
        TRY(pcnn_dense(net, deep, 1, 1, &deep));
        TRY(pcnn_add(net, deep, wide, &out));
    }
    TRY(pcnn_net_set_loss(net, out, loss));
    return pcnn_net_finalize(net, max_batch);
}

static pcnn_status mlp_net(const perf_mlp *m, int max_batch, uint64_t seed, double lr,
                           double weight_decay, pcnn_loss loss, pcnn_net **out)
{
    TRY(pcnn_net_create(out));
    pcnn_status st = mlp_layers(*out, m, max_batch, seed, lr, weight_decay, loss);
    if (st != PCNN_OK) pcnn_net_destroy(out);
    return st;
}

pcnn_status perf_mlp_build_predictor(perf_mlp *m)
{
    for (int i = 0; i < m->members; i++) {
        pcnn_net_destroy(&m->net[i]);
        TRY(mlp_net(m, 1, 0, 1e-3, 0, PCNN_LOSS_L1, &m->net[i])); /* loss unused */
        size_t count;
        TRY(pcnn_net_num_params(m->net[i], &count));
        if (count != m->num_params)
            return FAIL(PCNN_ERR_CORRUPT,
                        "regressor of %zu parameters, its architecture has %zu",
                        m->num_params, count);
        TRY(pcnn_net_set_params(m->net[i], m->params + (size_t)i * count, count));
    }
    return PCNN_OK;
}

/* The baseline's seconds for work terms w (never below a nanosecond, so
 * that its log exists). */
static double baseline_seconds(const double c[3], const double w[2])
{
    const double t = c[0] + c[1] * w[0] + c[2] * w[1];
    return t > 1e-9 ? t : 1e-9;
}

/* Seconds from a row of raw features whose last one is log t0: the
 * members' mean log correction, held to the range seen in training. */
static pcnn_status mlp_eval(perf_mlp *m, const double *raw, double *seconds)
{
    float x[PERF_MAX_FEATURES + 1];
    for (int i = 0; i < m->features; i++) x[i] = (float)((raw[i] - m->mean[i]) / m->scale[i]);
    double sum = 0;
    for (int i = 0; i < m->members; i++) {
        float y;
        TRY(pcnn_net_predict(m->net[i], 1, x, &y, 1));
        sum += y;
    }
    double r = sum / m->members * m->y_scale + m->y_mean;
    r = r < m->y_lo ? m->y_lo : r > m->y_hi ? m->y_hi : r;
    *seconds = exp(r + raw[m->features - 1]);
    return PCNN_OK;
}

pcnn_status perf_regressor_predict(perf_regressors *set, perf_kind kind, const perf_shape *shape,
                                   double *seconds)
{
    REQUIRE_PTR(set);
    REQUIRE_PTR(seconds);
    REQUIRE(perf_kind_name(kind) != NULL, PCNN_ERR_INVALID_ARGUMENT, "unknown kernel kind %d",
            (int)kind);
    perf_mlp *m = &set->mlp[kind];
    REQUIRE(m->fitted, PCNN_ERR_INVALID_STATE, "no regressor for %s: not calibrated",
            perf_kind_name(kind));
    double raw[PERF_MAX_FEATURES + 1], work[2];
    int n;
    TRY(perf_kernel_work(kind, shape, set->threads, raw, &n, work));
    if (n + 1 != m->features)
        return FAIL(PCNN_ERR_INTERNAL, "%s: %d features, the regressor takes %d",
                    perf_kind_name(kind), n + 1, m->features);
    raw[n] = log(baseline_seconds(m->baseline, work));
    return mlp_eval(m, raw, seconds);
}

pcnn_status perf_regressor_error(const perf_regressors *set, perf_kind kind, double *median_re,
                                 int *train_points, int *test_points)
{
    REQUIRE_PTR(set);
    REQUIRE(perf_kind_name(kind) != NULL, PCNN_ERR_INVALID_ARGUMENT, "unknown kernel kind %d",
            (int)kind);
    const perf_mlp *m = &set->mlp[kind];
    REQUIRE(m->fitted, PCNN_ERR_INVALID_STATE, "no regressor for %s: not calibrated",
            perf_kind_name(kind));
    if (median_re) *median_re = m->median_re;
    if (train_points) *train_points = m->train_points;
    if (test_points) *test_points = m->test_points;
    return PCNN_OK;
}

/* ------------------------------------------------------------------------ */
/* Fitting                                                                  */
/* ------------------------------------------------------------------------ */

static int compare_doubles(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define ROW (PERF_MAX_FEATURES + 1)

typedef struct fit_data {
    int count, features;
    double *x;    /* count x PERF_MAX_FEATURES + 1 raw (log) features, shuffled order;
                     the last is log t0, once the baseline is fitted */
    double *work; /* count x 2: the baseline's terms */
    double *y;    /* log seconds */
    double *seconds;
    int ntest, ntrain; /* [0, ntest) held out, then training */
    float *xs, *ys;          /* normalised, same order */
} fit_data;

static void fit_data_free(fit_data *d)
{
    mem_free(d->x);
    mem_free(d->work);
    mem_free(d->y);
    mem_free(d->seconds);
    mem_free(d->xs);
    mem_free(d->ys);
}

pcnn_status perf_calib_check(const perf_calib_config *c)
{
    REQUIRE_PTR(c);
    REQUIRE(c->threads >= 1, PCNN_ERR_INVALID_ARGUMENT, "threads %d must be >= 1", c->threads);
    REQUIRE(c->holdout >= 0.05 && c->holdout <= 0.5, PCNN_ERR_INVALID_ARGUMENT,
            "holdout %g must be in [0.05, 0.5]", c->holdout);
    REQUIRE(c->min_points >= 8 && c->max_points >= c->min_points, PCNN_ERR_INVALID_ARGUMENT,
            "min_points %d must be >= 8 and <= max_points %d", c->min_points, c->max_points);
    REQUIRE(c->repetitions >= 1, PCNN_ERR_INVALID_ARGUMENT, "repetitions %d must be >= 1",
            c->repetitions);
    REQUIRE(c->hidden_layers >= 0 && c->hidden_layers <= PERF_MAX_HIDDEN_LAYERS &&
                c->hidden >= 1 && c->hidden <= PERF_MAX_HIDDEN,
            PCNN_ERR_INVALID_ARGUMENT, "MLP of %d x %d hidden units: at most %d x %d",
            c->hidden_layers, c->hidden, PERF_MAX_HIDDEN_LAYERS, PERF_MAX_HIDDEN);
    REQUIRE(c->members >= 1 && c->members <= PERF_MAX_MEMBERS, PCNN_ERR_INVALID_ARGUMENT,
            "members %d must be in 1 .. %d", c->members, PERF_MAX_MEMBERS);
    REQUIRE(c->steps >= 1 && c->batch >= 1, PCNN_ERR_INVALID_ARGUMENT,
            "steps %d and batch %d must be >= 1", c->steps, c->batch);
    REQUIRE(isfinite(c->learning_rate) && c->learning_rate > 0, PCNN_ERR_INVALID_ARGUMENT,
            "learning rate %g must be finite and > 0", c->learning_rate);
    REQUIRE(c->loss == PCNN_LOSS_MSE || c->loss == PCNN_LOSS_L1, PCNN_ERR_INVALID_ARGUMENT,
            "loss %d: MSE (%d) or L1 (%d)", c->loss, PCNN_LOSS_MSE, PCNN_LOSS_L1);
    REQUIRE(isfinite(c->weight_decay) && c->weight_decay >= 0, PCNN_ERR_INVALID_ARGUMENT,
            "weight decay %g must be finite and >= 0", c->weight_decay);
    REQUIRE(isfinite(c->budget_seconds) && c->budget_seconds > 0, PCNN_ERR_INVALID_ARGUMENT,
            "budget %g s must be finite and > 0", c->budget_seconds);
    return PCNN_OK;
}

/* A shape's group: every field but the batch (points timed on one
 * network at several batches are one group). */
static uint64_t group_key(const perf_shape *s)
{
    const int64_t v[13] = {s->cin, s->cout, s->d, s->h, s->w, s->k, s->stride, s->pad,
                           s->algorithm, s->pool_max, s->fused_relu, s->optimizer, s->params};
    uint64_t h = HASH_FNV1A_BASIS;
    for (int i = 0; i < 13; i++) h = hash_fnv1a_u64(h, (uint64_t)v[i]);
    return h;
}

typedef struct keyed {
    uint64_t key;
    int index;
} keyed;

static int compare_keyed(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* A seeded random order of the samples that keeps each group together, so
 * that the held-out points are shapes the fit has not seen at another
 * batch (at most one group straddles the split). */
static pcnn_status group_order(const perf_sample *samples, int count, uint64_t seed, int *order)
{
    keyed *k = mem_alloc((size_t)count * sizeof *k);
    if (!k) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "ordering %d samples", count);
    for (int i = 0; i < count; i++)
        k[i] = (keyed){rng_hash(seed, group_key(&samples[i].shape), 0x67726f7570ull, 0), i};
    qsort(k, (size_t)count, sizeof *k, compare_keyed);
    for (int i = 0; i < count; i++) order[i] = k[i].index;
    mem_free(k);
    return PCNN_OK;
}

/* Features and log times in a seeded random order; the splits. */
static pcnn_status fit_prepare(perf_kind kind, const perf_sample *samples, int count,
                               const perf_calib_config *c, int threads, fit_data *d)
{
    for (int i = 0; i < count; i++) {
        const double t = samples[i].seconds;
        REQUIRE(isfinite(t) && t > 0, PCNN_ERR_INVALID_ARGUMENT,
                "%s: sample %d has time %g s: must be finite and > 0", perf_kind_name(kind), i, t);
    }
    int *order = mem_alloc((size_t)count * sizeof *order);
    d->x = mem_alloc((size_t)count * ROW * sizeof *d->x);
    d->work = mem_alloc((size_t)count * 2 * sizeof *d->work);
    d->y = mem_alloc((size_t)count * sizeof *d->y);
    d->seconds = mem_alloc((size_t)count * sizeof *d->seconds);
    d->xs = mem_alloc_floats((size_t)count * ROW);
    d->ys = mem_alloc_floats((size_t)count);
    if (!order || !d->x || !d->work || !d->y || !d->seconds || !d->xs || !d->ys) {
        mem_free(order);
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "fitting %d samples", count);
    }
    pcnn_status st = group_order(samples, count, c->seed ^ ((uint64_t)kind << 56), order);
    for (int i = 0; i < count && st == PCNN_OK; i++) {
        const perf_sample *s = &samples[order[i]];
        int n;
        st = perf_kernel_work(kind, &s->shape, threads, d->x + (size_t)i * ROW, &n,
                              d->work + 2 * i);
        if (st == PCNN_OK && i > 0 && n + 1 != d->features)
            st = FAIL(PCNN_ERR_INTERNAL, "feature count %d != %d", n, d->features);
        d->features = n + 1; /* and log t0 */
        d->y[i] = log(s->seconds);
        d->seconds[i] = s->seconds;
    }
    mem_free(order);
    TRY(st);
    d->count = count;
    d->ntest = (int)lround(c->holdout * count);
    if (d->ntest < 1) d->ntest = 1;
    d->ntrain = count - d->ntest;
    REQUIRE(d->ntrain >= 4, PCNN_ERR_INVALID_ARGUMENT, "%s: %d samples leave %d to train on",
            perf_kind_name(kind), count, d->ntrain);
    return PCNN_OK;
}

/* Solve the n x n system a x = b in place (Gaussian elimination with
 * partial pivoting); false when singular. */
static bool solve(double a[3][3], double b[3], int n)
{
    for (int i = 0; i < n; i++) {
        int p = i;
        for (int r = i + 1; r < n; r++)
            if (fabs(a[r][i]) > fabs(a[p][i])) p = r;
        if (fabs(a[p][i]) < 1e-300) return false;
        for (int c = 0; c < n; c++) {
            const double t = a[i][c];
            a[i][c] = a[p][c];
            a[p][c] = t;
        }
        const double t = b[i];
        b[i] = b[p];
        b[p] = t;
        for (int r = i + 1; r < n; r++) {
            const double f = a[r][i] / a[i][i];
            for (int c = i; c < n; c++) a[r][c] -= f * a[i][c];
            b[r] -= f * b[i];
        }
    }
    for (int i = n - 1; i >= 0; i--) {
        for (int c = i + 1; c < n; c++) b[i] -= a[i][c] * b[c];
        b[i] /= a[i][i];
    }
    return true;
}

/* The baseline c[0] + c[1] work + c[2] bytes, c >= 0, minimising the
 * squared relative error over the training rows: least squares on each
 * subset of the three terms (columns scaled to unit size for the
 * conditioning), the best solution that is non-negative. */
static void fit_baseline(perf_mlp *m, const fit_data *d)
{
    const int first = d->ntest;
    double scale[3] = {1, 0, 0}, best = INFINITY;
    for (int i = first; i < d->count; i++)
        for (int j = 0; j < 2; j++)
            if (d->work[2 * i + j] / d->seconds[i] > scale[j + 1])
                scale[j + 1] = d->work[2 * i + j] / d->seconds[i];
    scale[0] = 0;
    for (int i = first; i < d->count; i++)
        if (1 / d->seconds[i] > scale[0]) scale[0] = 1 / d->seconds[i];
    m->baseline[0] = m->baseline[1] = m->baseline[2] = 0;
    for (int mask = 1; mask < 8; mask++) {
        int cols[3], n = 0;
        for (int j = 0; j < 3; j++)
            if (mask >> j & 1) cols[n++] = j;
        double a[3][3] = {{0}}, b[3] = {0};
        for (int i = first; i < d->count; i++) {
            const double term[3] = {1, d->work[2 * i], d->work[2 * i + 1]};
            double row[3];
            for (int k = 0; k < n; k++)
                row[k] = term[cols[k]] / d->seconds[i] / (scale[cols[k]] > 0 ? scale[cols[k]] : 1);
            for (int r = 0; r < n; r++) {
                for (int c = 0; c < n; c++) a[r][c] += row[r] * row[c];
                b[r] += row[r];
            }
        }
        if (!solve(a, b, n)) continue;
        double c[3] = {0, 0, 0};
        bool ok = true;
        for (int k = 0; k < n; k++) {
            c[cols[k]] = b[k] / (scale[cols[k]] > 0 ? scale[cols[k]] : 1);
            ok = ok && c[cols[k]] >= 0 && isfinite(c[cols[k]]);
        }
        if (!ok) continue;
        double cost = 0;
        for (int i = first; i < d->count; i++) {
            const double e = baseline_seconds(c, d->work + 2 * i) / d->seconds[i] - 1;
            cost += e * e;
        }
        if (cost < best) {
            best = cost;
            memcpy(m->baseline, c, sizeof c);
        }
    }
}

/* Mean and scale over the training part, then the normalised copies. */
static void fit_normalise(perf_mlp *m, fit_data *d)
{
    const int first = d->ntest, F = d->features;
    for (int i = 0; i < d->count; i++) {
        const double log_t0 = log(baseline_seconds(m->baseline, d->work + 2 * i));
        d->x[(size_t)i * ROW + F - 1] = log_t0;
        d->y[i] = log(d->seconds[i]) - log_t0;
    }
    for (int f = 0; f < F; f++) {
        double s = 0, s2 = 0;
        for (int i = first; i < d->count; i++) s += d->x[(size_t)i * ROW + f];
        const double mean = s / d->ntrain;
        for (int i = first; i < d->count; i++) {
            const double e = d->x[(size_t)i * ROW + f] - mean;
            s2 += e * e;
        }
        const double sd = sqrt(s2 / d->ntrain);
        m->mean[f] = mean;
        m->scale[f] = sd > 1e-9 ? sd : 1.0;
    }
    double s = 0, s2 = 0;
    for (int i = first; i < d->count; i++) s += d->y[i];
    m->y_mean = s / d->ntrain;
    m->y_lo = m->y_hi = d->y[first];
    for (int i = first; i < d->count; i++) {
        if (d->y[i] < m->y_lo) m->y_lo = d->y[i];
        if (d->y[i] > m->y_hi) m->y_hi = d->y[i];
    }
    for (int i = first; i < d->count; i++) s2 += (d->y[i] - m->y_mean) * (d->y[i] - m->y_mean);
    m->y_scale = sqrt(s2 / d->ntrain) > 1e-9 ? sqrt(s2 / d->ntrain) : 1.0;
    for (int i = 0; i < d->count; i++) {
        for (int f = 0; f < F; f++)
            d->xs[(size_t)i * F + f] =
                (float)((d->x[(size_t)i * ROW + f] - m->mean[f]) / m->scale[f]);
        d->ys[i] = (float)((d->y[i] - m->y_mean) / m->y_scale);
    }
}

typedef struct train_buffers {
    float *bx, *by;
    int *order;
} train_buffers;

/* c->steps Adam steps on minibatches of the training rows (a fresh
 * seeded order each pass), the learning rate falling from c->learning_rate
 * to 1 % of it along a cosine: on a few hundred points a fixed schedule
 * fits better than early stopping on a validation split, whose few points
 * are dominated by the one that extrapolates. */
static pcnn_status train(pcnn_net *net, const fit_data *d, const perf_calib_config *c,
                         perf_kind kind, int member, int batch, train_buffers *b)
{
    const int first = d->ntest, F = d->features;
    int at = d->ntrain, pass = 0;
    for (int step = 0; step < c->steps; step++) {
        if (step % 25 == 0) {
            const double lr = c->learning_rate *
                              (0.01 + 0.99 * 0.5 * (1 + cos(3.14159265358979323846 * step / c->steps)));
            TRY(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, lr));
        }
        if (at + batch > d->ntrain) { /* a new pass in a new order */
            for (int i = 0; i < d->ntrain; i++) b->order[i] = first + i;
            rng g = rng_make(c->seed, 0x65706f6368ull + (uint64_t)member, (uint64_t)kind,
                             (uint64_t)pass++);
            for (int i = d->ntrain - 1; i > 0; i--) {
                const int j = (int)rng_below(&g, (uint64_t)i + 1), t = b->order[i];
                b->order[i] = b->order[j];
                b->order[j] = t;
            }
            at = 0;
        }
        for (int i = 0; i < batch; i++) {
            memcpy(b->bx + (size_t)i * F, d->xs + (size_t)b->order[at + i] * F,
                   (size_t)F * sizeof(float));
            b->by[i] = d->ys[b->order[at + i]];
        }
        at += batch;
        TRY(pcnn_net_train_step(net, batch, b->bx, NULL, b->by, NULL));
    }
    return PCNN_OK;
}

/* Held-out median |RE| of the fitted predictor on the test rows. */
static pcnn_status test_error(perf_mlp *m, const fit_data *d)
{
    double *re = mem_alloc((size_t)d->ntest * sizeof *re);
    if (!re) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "test errors");
    pcnn_status st = PCNN_OK;
    for (int i = 0; i < d->ntest && st == PCNN_OK; i++) {
        double t = 0;
        st = mlp_eval(m, d->x + (size_t)i * ROW, &t);
        re[i] = fabs(t - d->seconds[i]) / d->seconds[i];
    }
    if (st == PCNN_OK) {
        qsort(re, (size_t)d->ntest, sizeof *re, compare_doubles);
        const int n = d->ntest;
        m->median_re = n % 2 ? re[n / 2] : 0.5 * (re[n / 2 - 1] + re[n / 2]);
    }
    mem_free(re);
    return st;
}

/* Member `member` of the ensemble: a network of its own initialisation,
 * trained in its own minibatch order, its weights into m->params.  The
 * first member sizes m->params for all of them. */
static pcnn_status train_member(perf_mlp *m, perf_kind kind, const fit_data *d,
                                const perf_calib_config *c, int member, int batch,
                                train_buffers *b)
{
    pcnn_net *net = NULL;
    TRY(mlp_net(m, batch, rng_hash(c->seed, 0x696e6974ull, (uint64_t)kind, (uint64_t)member),
                c->learning_rate, c->weight_decay, (pcnn_loss)c->loss, &net));
    size_t nparams = 0;
    pcnn_status st = pcnn_net_num_params(net, &nparams);
    if (st == PCNN_OK && member == 0) {
        m->num_params = nparams;
        m->params = mem_alloc_floats((size_t)c->members * nparams);
        if (!m->params) st = FAIL(PCNN_ERR_OUT_OF_MEMORY, "%d x %zu parameters", c->members, nparams);
    }
    if (st == PCNN_OK && nparams != m->num_params)
        st = FAIL(PCNN_ERR_INTERNAL, "member %d of %zu parameters, not %zu", member, nparams,
                  m->num_params);
    if (st == PCNN_OK) st = train(net, d, c, kind, member, batch, b);
    if (st == PCNN_OK)
        st = pcnn_net_get_params(net, m->params + (size_t)member * nparams, nparams);
    pcnn_net_destroy(&net);
    return st;
}

/* Several members rather than one larger or longer-trained MLP: on a few
 * hundred points an MLP fits its training points closely (conv3d: 0.7 %
 * median) and makes up the rest between them (10 % on held-out shapes);
 * members from other seeds make it up otherwise, and their mean cut
 * conv3d's held-out error from 9.9 to 9.1 % (two calibrations' points,
 * four splits each; 5 members: 9.0 %). */
static pcnn_status fit_kind(perf_mlp *m, perf_kind kind, fit_data *d, const perf_calib_config *c)
{
    m->features = d->features;
    m->hidden_layers = c->hidden_layers;
    m->hidden = c->hidden;
    m->members = c->members;
    fit_baseline(m, d);
    fit_normalise(m, d);
    const int batch = d->ntrain < c->batch ? d->ntrain : c->batch;
    train_buffers b = {mem_alloc_floats((size_t)batch * d->features), mem_alloc_floats(batch),
                       mem_alloc((size_t)d->ntrain * sizeof(int))};
    pcnn_status st = PCNN_OK;
    if (!b.bx || !b.by || !b.order) st = FAIL(PCNN_ERR_OUT_OF_MEMORY, "training buffers");
    for (int i = 0; i < c->members && st == PCNN_OK; i++)
        st = train_member(m, kind, d, c, i, batch, &b);
    mem_free(b.bx);
    mem_free(b.by);
    mem_free(b.order);
    if (st == PCNN_OK) {
        m->train_points = d->ntrain;
        m->test_points = d->ntest;
        st = perf_mlp_build_predictor(m);
    }
    if (st == PCNN_OK) st = test_error(m, d);
    if (st == PCNN_OK) m->fitted = true;
    return st;
}

pcnn_status perf_regressors_fit(perf_regressors **set, perf_kind kind, const perf_sample *samples,
                                int count, const perf_calib_config *c)
{
    REQUIRE_PTR(set);
    REQUIRE_PTR(samples);
    TRY(perf_calib_check(c));
    REQUIRE(perf_kind_name(kind) != NULL, PCNN_ERR_INVALID_ARGUMENT, "unknown kernel kind %d",
            (int)kind);
    REQUIRE(count >= c->min_points, PCNN_ERR_INVALID_ARGUMENT,
            "%s: %d samples, at least %d needed", perf_kind_name(kind), count, c->min_points);
    REQUIRE(!*set || (*set)->threads == c->threads, PCNN_ERR_INVALID_ARGUMENT,
            "set calibrated for %d threads, config has %d", *set ? (*set)->threads : 0,
            c->threads);
    fit_data d = {0};
    pcnn_status st = fit_prepare(kind, samples, count, c, c->threads, &d);
    perf_mlp m = {0};
    if (st == PCNN_OK) st = fit_kind(&m, kind, &d, c);
    fit_data_free(&d);
    if (st == PCNN_OK && !*set) st = perf_set_create(c->threads, set);
    if (st != PCNN_OK) {
        mlp_clear(&m);
        return st;
    }
    mlp_clear(&(*set)->mlp[kind]);
    (*set)->mlp[kind] = m;
    return PCNN_OK;
}
