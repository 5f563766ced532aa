/* Calibration of a regressor set (regressor.h, perf_regressors_calibrate):
 * random shapes per layer family, log-uniform over the ranges CNNs of this
 * library's size use (spec C.2: the benchmark grid of seed 004 shrunk for
 * a small machine), timed on the real layers within a share of the budget,
 * then one MLP fitted per kind. */
#include <math.h>

#include "../core/clock.h"
#include "../core/error.h"
#include "../core/memory.h"
#include "../core/rng.h"
#include "kernel_timing.h"
#include "regressor_set.h"

/* Each family's share of the timing budget, by weight: convolutions need
 * the most points, being the least regular, and 3D ones more than 2D: a
 * third fewer points raised the held-out error of conv3d from 9 to 11 %,
 * of conv2d from 6.5 to 7 % (refits of two calibrations' points over
 * several splits). */
static const struct family {
    perf_kind fwd;
    double weight;
} families[] = {
    {PERF_CONV2D_FWD, 4.5},   {PERF_CONV3D_FWD, 5.5},       {PERF_DENSE_FWD, 2},
    {PERF_POOL2D_FWD, 1.5},   {PERF_POOL3D_FWD, 1.5},       {PERF_GLOBAL_AVGPOOL_FWD, 1},
    {PERF_RELU_FWD, 1},       {PERF_BATCHNORM_FWD, 1.5},    {PERF_ADD_FWD, 1},
    {PERF_DROPOUT_FWD, 1},    {PERF_UPDATE, 0.75},
};
#define FAMILIES ((int)(sizeof families / sizeof families[0]))

/* The part of the budget left for fitting the MLPs after timing. */
#define FIT_SHARE 0.25

/* Work caps per point: the largest shapes take a few milliseconds per pass. */
#define MAX_FLOPS_PER_THREAD 2e8
#define MAX_ELEMENTS 2e6

/* Log-uniform integer in [lo, hi]. */
static int log_uniform(rng *g, int lo, int hi)
{
    const double a = log((double)lo), b = log((double)hi + 1);
    int v = (int)exp(a + (b - a) * rng_uniform(g));
    return v < lo ? lo : v > hi ? hi : v;
}

static int pick(rng *g, const int *values, int count)
{
    return values[rng_below(g, (uint64_t)count)];
}

static int out_extent(int n, int k, int s, int p) { return (n + 2 * p - k) / s + 1; }

/* A convolution shape (2D, or 3D with d > 1) within the work cap. */
static bool draw_conv(rng *g, bool volume, int threads, perf_shape *s)
{
    static const int k2[] = {1, 3, 3, 3, 5, 7}, k3[] = {1, 3, 3, 3, 5}, st[] = {1, 1, 1, 2};
    s->batch = log_uniform(g, 1, volume ? 16 : 64);
    s->cin = log_uniform(g, 1, volume ? 64 : 256);
    s->cout = log_uniform(g, volume ? 2 : 4, volume ? 64 : 256);
    s->h = log_uniform(g, 4, volume ? 32 : 64);
    s->w = rng_below(g, 4) ? s->h : log_uniform(g, 4, volume ? 32 : 64);
    s->d = volume ? s->h : 1;
    s->k = volume ? pick(g, k3, 5) : pick(g, k2, 6);
    s->stride = pick(g, st, 4);
    s->pad = rng_below(g, 4) ? s->k / 2 : 0;
    if (s->k > s->h + 2 * s->pad || s->k > s->w + 2 * s->pad) return false;
    const double taps = (double)s->k * s->k * (volume ? s->k : 1);
    const double out = (double)out_extent(s->h, s->k, s->stride, s->pad) *
                       out_extent(s->w, s->k, s->stride, s->pad) *
                       (volume ? out_extent(s->d, s->k, s->stride, s->pad) : 1);
    const double flops = 2.0 * s->batch * s->cin * s->cout * taps * out;
    return flops >= 2e4 && flops <= MAX_FLOPS_PER_THREAD * threads &&
           s->batch * s->cin * taps * out <= 16e6;
}

static bool draw_pool(rng *g, bool volume, perf_shape *s)
{
    static const int k[] = {2, 2, 3, 3}, st[] = {1, 2, 2};
    s->batch = log_uniform(g, 1, volume ? 16 : 64);
    s->cin = log_uniform(g, 1, volume ? 64 : 256);
    s->h = log_uniform(g, 4, volume ? 32 : 64);
    s->w = rng_below(g, 4) ? s->h : log_uniform(g, 4, volume ? 32 : 64);
    s->d = volume ? s->h : 1;
    s->k = pick(g, k, 4);
    s->stride = pick(g, st, 3);
    s->pad = rng_below(g, 4) ? 0 : s->k / 2;
    s->pool_max = (int)rng_below(g, 2);
    if (s->k > s->h + 2 * s->pad || s->k > s->w + 2 * s->pad) return false;
    const double n = (double)s->batch * s->cin * s->d * s->h * s->w;
    return n >= 256 && n <= MAX_ELEMENTS;
}

/* Element-wise layers and global pooling: mostly 2D, some volumes. */
static bool draw_elementwise(rng *g, perf_shape *s)
{
    s->batch = log_uniform(g, 1, 64);
    s->cin = log_uniform(g, 1, 256);
    s->h = log_uniform(g, 1, 64);
    s->w = rng_below(g, 4) ? s->h : log_uniform(g, 1, 64);
    s->d = rng_below(g, 5) ? 1 : log_uniform(g, 2, 32);
    s->fused_relu = (int)rng_below(g, 2);
    const double n = (double)s->batch * s->cin * s->d * s->h * s->w;
    return n >= 256 && n <= MAX_ELEMENTS;
}

static bool draw(perf_kind family, rng *g, int threads, perf_shape *s)
{
    *s = (perf_shape){.d = 1};
    switch (family) {
    case PERF_CONV2D_FWD: return draw_conv(g, false, threads, s);
    case PERF_CONV3D_FWD: return draw_conv(g, true, threads, s);
    case PERF_POOL2D_FWD: return draw_pool(g, false, s);
    case PERF_POOL3D_FWD: return draw_pool(g, true, s);
    case PERF_DENSE_FWD:
        s->batch = log_uniform(g, 1, 256);
        s->cin = log_uniform(g, 4, 8192);
        s->cout = log_uniform(g, 1, 4096);
        return 2.0 * s->batch * s->cin * s->cout <= MAX_FLOPS_PER_THREAD / 2 * threads &&
               (double)s->cin * s->cout <= MAX_ELEMENTS / 2;
    case PERF_UPDATE:
        s->params = log_uniform(g, 64, 1 << 21);
        s->optimizer = (int)rng_below(g, 3);
        return true;
    default: return draw_elementwise(g, s);
    }
}

/* Measured points of each kind, grown as timing goes (at most cap). */
typedef struct sample_sets {
    perf_sample *s[PERF_KIND_COUNT];
    int n[PERF_KIND_COUNT], cap;
} sample_sets;

static void add_sample(sample_sets *ss, perf_kind kind, const perf_shape *shape, double t)
{
    if (t > 0 && isfinite(t) && ss->n[kind] < ss->cap)
        ss->s[kind][ss->n[kind]++] = (perf_sample){*shape, t};
}

/* Seconds of CPU the calling thread has used. */
static double thread_cpu_seconds(void)
{
    struct timespec t;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) != 0) return 0;
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* One shape's times over up to MAX_ATTEMPTS calls, the fastest of each
 * pass kept.  Two calibrations timing the same shapes disagreed by a median
 * 5-10 % per kind, a tenth of the points by 30-80 %, on a machine shared
 * with a benchmark (1 % and 7-35 % with the attempts below), from two
 * causes:
 *   - preemption: a thread descheduled during the runs (another process on
 *     its core) shows as CPU time short of wall time; such an attempt is
 *     repeated, later, when the other process may have yielded the core;
 *   - the clock: kernels of a few microseconds or less are a few ticks of
 *     overhead and jitter; the fastest of many more runs is repeatable, and
 *     costs little next to building the network.
 * Preemption is read from the calling thread's CPU time, so only when
 * calibrating for one thread: with more, the calling thread may sleep at a
 * barrier while the others work.  Repeating preempted attempts is worth it
 * against a passing burst of load, not against a load that lasts (every
 * attempt is preempted, and repeats only cost points), so repeats may take
 * at most RETRY_SHARE of the time timed so far, and never run past the
 * timing's deadline. */
#define MAX_ATTEMPTS 3
#define MIN_CPU_SHARE 0.9   /* of wall time: less means the thread was descheduled */
#define RETRY_SHARE 0.25    /* of the time timed so far, on repeating preempted attempts */
#define QUICK_SECONDS 20e-6 /* a pass faster than this is re-timed with more runs */
#define QUICK_REPETITIONS 8 /* times c->repetitions */

typedef struct retry_allowance {
    double start, deadline; /* of the timing */
    double retrying;        /* seconds spent repeating preempted attempts */
} retry_allowance;

/* Whether an attempt that took `wall` seconds and `cpu` seconds of the
 * calling thread was descheduled (never decided with more than one thread). */
static bool preempted(const perf_calib_config *c, double wall, double cpu)
{
    return c->threads == 1 && cpu < MIN_CPU_SHARE * wall;
}

typedef struct attempt {
    int number, reps;
    bool repeat_preempted; /* this attempt repeats a preempted one: its time is a retry's */
} attempt;

/* After an attempt of `wall` and `cpu` seconds whose fastest pass so far
 * took `slowest` seconds: whether to time again, and how (a). */
static bool time_again(const perf_calib_config *c, retry_allowance *r, double wall, double cpu,
                       double slowest, attempt *a)
{
    if (a->repeat_preempted) r->retrying += wall;
    if (++a->number >= MAX_ATTEMPTS) return false;
    if (a->reps == c->repetitions && slowest < QUICK_SECONDS) {
        a->reps = c->repetitions * QUICK_REPETITIONS;
        a->repeat_preempted = false;
        return true;
    }
    const double now = clock_now();
    a->repeat_preempted = preempted(c, wall, cpu) && now < r->deadline &&
                          r->retrying < RETRY_SHARE * (now - r->start);
    return a->repeat_preempted;
}

static double slowest_pass(const perf_layer_times *t)
{
    const double m = t->fwd > t->bwd ? t->fwd : t->bwd;
    return m > t->bwd_weights ? m : t->bwd_weights;
}

static void keep_fastest(perf_layer_times *best, const perf_layer_times *t, int count)
{
    for (int i = 0; i < count; i++) {
        if (t[i].fwd < best[i].fwd) best[i].fwd = t[i].fwd;
        if (t[i].bwd < best[i].bwd) best[i].bwd = t[i].bwd;
        if (t[i].bwd_weights < best[i].bwd_weights) best[i].bwd_weights = t[i].bwd_weights;
    }
}

static pcnn_status time_batches_robust(perf_kind family, const perf_shape *s,
                                       const perf_calib_config *c, retry_allowance *r,
                                       const int *batches, int count, perf_layer_times *best)
{
    perf_layer_times t[4];
    attempt a = {0, c->repetitions, false};
    double wall, cpu;
    do {
        const double wall0 = clock_now(), cpu0 = thread_cpu_seconds();
        TRY(perf_time_layer_batches(family, s, c->threads, a.reps, batches, count,
                                    a.number ? t : best));
        wall = clock_now() - wall0, cpu = thread_cpu_seconds() - cpu0;
        if (a.number) keep_fastest(best, t, count);
        /* batches[0] is the largest: the others are faster still. */
    } while (time_again(c, r, wall, cpu, slowest_pass(&best[0]), &a));
    return PCNN_OK;
}

/* perf_time_update likewise. */
static pcnn_status time_update_robust(const perf_shape *s, const perf_calib_config *c,
                                      retry_allowance *r, double *best)
{
    attempt a = {0, c->repetitions, false};
    double wall, cpu;
    do {
        double t;
        const double wall0 = clock_now(), cpu0 = thread_cpu_seconds();
        TRY(perf_time_update(s, c->threads, a.reps, &t));
        wall = clock_now() - wall0, cpu = thread_cpu_seconds() - cpu0;
        if (!a.number || t < *best) *best = t;
    } while (time_again(c, r, wall, cpu, *best, &a));
    return PCNN_OK;
}

/* One drawn shape timed for every kind of its family, at its batch and
 * at a half, a quarter and an eighth of it on the same network (up to four
 * points for one network's setup, whose fresh memory costs more than the
 * runs on a virtual machine); *taken counts the points (0: shape refused). */
static pcnn_status time_point(perf_kind family, const perf_shape *s, const perf_calib_config *c,
                              retry_allowance *r, sample_sets *ss, int *taken)
{
    *taken = 0;
    if (family == PERF_UPDATE) {
        double t;
        TRY(time_update_robust(s, c, r, &t));
        add_sample(ss, PERF_UPDATE, s, t);
        *taken = 1;
        return PCNN_OK;
    }
    const int candidates[4] = {s->batch, (s->batch + 1) / 2, (s->batch + 3) / 4,
                               (s->batch + 7) / 8};
    int batches[4], count = 0;
    for (int i = 0; i < 4; i++)
        if (count == 0 || candidates[i] < batches[count - 1]) batches[count++] = candidates[i];
    perf_layer_times t[4];
    const pcnn_status st = time_batches_robust(family, s, c, r, batches, count, t);
    if (st == PCNN_ERR_SHAPE || st == PCNN_ERR_OUT_OF_MEMORY) { /* too big or refused: skip */
        error_clear();
        return PCNN_OK;
    }
    TRY(st);
    for (int i = 0; i < count; i++) {
        perf_shape at = *s;
        at.batch = batches[i];
        for (int k = 0; k < PERF_KIND_COUNT; k++) {
            if (perf_kind_family((perf_kind)k) != family) continue;
            const bool weights_only = k == PERF_CONV2D_BWD_WEIGHTS ||
                                      k == PERF_CONV3D_BWD_WEIGHTS || k == PERF_DENSE_BWD_WEIGHTS;
            const bool backward = k != (int)family;
            add_sample(ss, (perf_kind)k, &at,
                       weights_only ? t[i].bwd_weights : backward ? t[i].bwd : t[i].fwd);
        }
    }
    *taken = count;
    return PCNN_OK;
}

static bool family_wanted(perf_kind family, uint32_t kinds)
{
    for (int k = 0; k < PERF_KIND_COUNT; k++)
        if (perf_kind_family((perf_kind)k) == family && (kinds >> k & 1u)) return true;
    return false;
}

/* Time the wanted families within the timing budget: first every family
 * up to min_points, then always the one furthest behind its share (time
 * spent / weight), so that a slow shape delays every family a little
 * rather than starving the last ones. */
static pcnn_status time_families(const perf_calib_config *c, sample_sets *ss)
{
    const double start = clock_now(), timing_budget = c->budget_seconds * (1 - FIT_SHARE);
    retry_allowance retries = {start, start + timing_budget, 0};
    double spent[FAMILIES] = {0};
    uint64_t draws[FAMILIES] = {0};
    int points[FAMILIES] = {0};
    for (;;) {
        int next = -1;
        for (int f = 0; f < FAMILIES; f++) {
            if (!family_wanted(families[f].fwd, c->kinds) || points[f] >= c->max_points) continue;
            /* A family short of min_points first (fewest points), so that a
             * stall in one slow run cannot leave a kind uncalibrated. */
            const bool short_f = points[f] < c->min_points;
            const bool short_n = next >= 0 && points[next] < c->min_points;
            if (next < 0 || (short_f && !short_n) ||
                (short_f && short_n && points[f] < points[next]) ||
                (!short_f && !short_n &&
                 spent[f] / families[f].weight < spent[next] / families[next].weight))
                next = f;
        }
        if (next < 0 || clock_now() - start >= timing_budget) return PCNN_OK;
        const perf_kind fam = families[next].fwd;
        const double t0 = clock_now();
        rng g = rng_make(c->seed, 0x64726177ull, (uint64_t)fam, draws[next]++);
        perf_shape s;
        if (draw(fam, &g, c->threads, &s)) {
            int taken;
            TRY(time_point(fam, &s, c, &retries, ss, &taken));
            points[next] += taken;
        }
        spent[next] += clock_now() - t0;
    }
}

pcnn_status perf_regressors_measure(const perf_calib_config *c, perf_sample *samples[],
                                    int counts[])
{
    REQUIRE_PTR(c);
    REQUIRE_PTR(samples);
    REQUIRE_PTR(counts);
    TRY(perf_calib_check(c));
    REQUIRE(c->kinds != 0 && (c->kinds & ~perf_kinds_all()) == 0, PCNN_ERR_INVALID_ARGUMENT,
            "kinds 0x%x: no kind, or unknown bits", (unsigned)c->kinds);
    sample_sets ss = {.cap = c->max_points};
    pcnn_status st = PCNN_OK;
    for (int k = 0; k < PERF_KIND_COUNT && st == PCNN_OK; k++) {
        ss.s[k] = mem_alloc((size_t)c->max_points * sizeof(perf_sample));
        if (!ss.s[k]) st = FAIL(PCNN_ERR_OUT_OF_MEMORY, "samples of %d points", c->max_points);
    }
    if (st == PCNN_OK) st = time_families(c, &ss);
    for (int k = 0; k < PERF_KIND_COUNT; k++) {
        if (st != PCNN_OK) {
            mem_free(ss.s[k]);
            ss.s[k] = NULL;
            ss.n[k] = 0;
        }
        samples[k] = ss.s[k];
        counts[k] = ss.n[k];
    }
    return st;
}

/* Fit every kind with enough points within what is left of the budget:
 * a machine slower than expected (or shared) trains fewer members of each
 * ensemble, then each for fewer steps, never under MIN_STEPS, rather than
 * overrun.  Members go first: one MLP trained in full fits better than
 * several half-trained. */
#define MIN_STEPS 200

static void fit_within(const perf_calib_config *c, double share, double per_step,
                       perf_calib_config *fit)
{
    *fit = *c;
    if (per_step <= 0) return; /* not measured yet: the first fit (one member, fit_all) */
    const double steps = share / per_step; /* over all members */
    if (steps >= (double)c->members * c->steps) return;
    fit->members = (int)(steps / c->steps);
    if (fit->members >= 1) return;
    fit->members = 1;
    fit->steps = steps > MIN_STEPS ? (int)steps : MIN_STEPS;
}

/* The first kind is fitted with one member, which measures what a step
 * costs on this machine now, before any fit commits to an ensemble the
 * budget cannot pay for (on a machine shared with other processes a step
 * may cost ten times what it does idle); it is fitted again with the whole
 * ensemble at the end if the budget has room. */
static pcnn_status fit_all(const perf_calib_config *c, double start, perf_sample *samples[],
                           const int counts[], perf_regressors *set)
{
    int left = 0, first = -1;
    for (int k = 0; k < PERF_KIND_COUNT; k++)
        left += (c->kinds >> k & 1u) && counts[k] >= c->min_points;
    double per_step = 0; /* seconds per member and step, measured on the first fit */
    for (int k = 0; k < PERF_KIND_COUNT; k++) {
        if (!(c->kinds >> k & 1u) || counts[k] < c->min_points) continue;
        perf_calib_config fit;
        const double share = (c->budget_seconds - (clock_now() - start)) / left--;
        fit_within(c, share, per_step, &fit);
        if (first < 0) fit.members = 1;
        const double t0 = clock_now();
        TRY(perf_regressors_fit(&set, (perf_kind)k, samples[k], counts[k], &fit));
        if (first < 0) {
            first = k;
            per_step = (clock_now() - t0) / fit.steps;
        }
    }
    const double rest = c->budget_seconds - (clock_now() - start);
    if (first >= 0 && c->members > 1 && rest >= per_step * c->members * c->steps)
        TRY(perf_regressors_fit(&set, (perf_kind)first, samples[first], counts[first], c));
    return PCNN_OK;
}

pcnn_status perf_regressors_calibrate(const perf_calib_config *c, perf_regressors **out)
{
    REQUIRE_PTR(c);
    REQUIRE_PTR(out);
    const double start = clock_now();
    perf_sample *samples[PERF_KIND_COUNT];
    int counts[PERF_KIND_COUNT];
    TRY(perf_regressors_measure(c, samples, counts));
    perf_regressors *set = NULL;
    pcnn_status st = perf_set_create(c->threads, &set);
    if (st == PCNN_OK) st = fit_all(c, start, samples, counts, set);
    for (int k = 0; k < PERF_KIND_COUNT; k++) mem_free(samples[k]);
    if (st != PCNN_OK) {
        perf_regressors_destroy(&set);
        return st;
    }
    *out = set;
    return PCNN_OK;
}
