/* Every network option against what include/pcnn.h documents for it:
 * pcnn_net_option_info's name, bounds and integer-ness, the default of a
 * new network, set/get round trips at both bounds, rejection just outside
 * them and of fractions where integers are required, and which options are
 * fixed at finalize or read-only.  The expectations below are written out
 * from the header, independently of the library's option table. */
#define PCNN_EXPERIMENTAL /* the tuning knobs of section 9 are options too */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pcnn.h"

enum when { ANYTIME, BEFORE_FINALIZE, READ_ONLY };

typedef struct expected {
    pcnn_option option;
    const char *name;
    double min, max; /* inclusive */
    int is_integer;
    enum when when;
    double default_value;
} expected;

#define BELOW_1 0x1.fffffffffffffp-1 /* the largest double < 1 */
#define POW_53 9007199254740992.0

static const expected options[] = {
    {PCNN_OPT_LEARNING_RATE, "learning_rate", DBL_TRUE_MIN, DBL_MAX, 0, ANYTIME, 0.01},
    {PCNN_OPT_MOMENTUM, "momentum", 0, BELOW_1, 0, ANYTIME, 0.9},
    {PCNN_OPT_WEIGHT_DECAY, "weight_decay", 0, DBL_MAX, 0, ANYTIME, 0},
    {PCNN_OPT_ADAM_BETA1, "adam_beta1", 0, BELOW_1, 0, ANYTIME, 0.9},
    {PCNN_OPT_ADAM_BETA2, "adam_beta2", 0, BELOW_1, 0, ANYTIME, 0.999},
    {PCNN_OPT_ADAM_EPSILON, "adam_epsilon", DBL_TRUE_MIN, DBL_MAX, 0, ANYTIME, 1e-8},
    {PCNN_OPT_SEED, "seed", 0, POW_53, 1, BEFORE_FINALIZE, 0},
    {PCNN_OPT_WARMUP_STEPS, "warmup_steps", 0, 4e18, 1, ANYTIME, 0},
    {PCNN_OPT_DECAY_EVERY_STEPS, "decay_every_steps", 0, 4e18, 1, ANYTIME, 0},
    {PCNN_OPT_DECAY_FACTOR, "decay_factor", DBL_TRUE_MIN, 1, 0, ANYTIME, 0.1},
    {PCNN_OPT_THREADS, "threads", 0, 4096, 1, BEFORE_FINALIZE, 0},
    {PCNN_OPT_KEEP_IM2COL, "keep_im2col", 0, 1, 1, BEFORE_FINALIZE, 1},
    {PCNN_OPT_CHECK_NUMERICS, "check_numerics", 0, 1, 1, ANYTIME, 1},
    {PCNN_OPT_STEP, "step", 0, POW_53, 1, ANYTIME, 0},
    {PCNN_OPT_EFFECTIVE_LEARNING_RATE, "effective_learning_rate", 0, DBL_MAX, 0, READ_ONLY,
     0.01},
    {PCNN_OPT_BUCKET_BYTES, "bucket_bytes", 0, 8589934592.0, 1, BEFORE_FINALIZE, 1048576},
    {PCNN_OPT_OVERLAP, "overlap", 0, 1, 1, BEFORE_FINALIZE, 1},
    {PCNN_OPT_ENGINE, "engine", 0, 2, 1, BEFORE_FINALIZE, 0},
    {PCNN_OPT_ACTIVE_ENGINE, "active_engine", 0, 2, 1, READ_ONLY, 0},
    {PCNN_OPT_COMM_CORE, "comm_core", -1, 65535, 1, BEFORE_FINALIZE, -1},
    {PCNN_OPT_TIMEOUT_MS, "timeout_ms", 0, POW_53, 1, ANYTIME, 0},
    {PCNN_OPT_TRACE_EVENTS, "trace_events", 0, 1e8, 1, BEFORE_FINALIZE, 0},
    {PCNN_OPT_CONV_ALGORITHM, "conv_algorithm", 0, 3, 1, BEFORE_FINALIZE, 0},
    {PCNN_OPT_SYNC_BATCHNORM, "sync_batchnorm", 0, 1, 1, BEFORE_FINALIZE, 0},
    {PCNN_OPT_HALO_OVERLAP, "halo_overlap", 0, 1, 1, BEFORE_FINALIZE, 1},
    {PCNN_OPT_HALO_SCHEDULE, "halo_schedule", 0, 1, 1, BEFORE_FINALIZE, 0},
    {PCNN_OPT_BN_SCOPE, "bn_scope", 0, 1, 1, BEFORE_FINALIZE, 1},
    {PCNN_OPT_SPATIAL_FALLBACK, "spatial_fallback", 0, 1, 1, BEFORE_FINALIZE, 0},
    {PCNN_OPT_PLAN_MAX_SPATIAL, "plan_max_spatial", 0, 1048576, 1, BEFORE_FINALIZE, 0},
    {PCNN_OPT_PLAN_SPATIAL_DIMS, "plan_spatial_dims", 0, 7, 1, BEFORE_FINALIZE, 7},
    {PCNN_OPT_PLAN_MIXED, "plan_mixed", 0, 1, 1, BEFORE_FINALIZE, 1},
    {PCNN_OPT_MEMORY_LIMIT_MIB, "memory_limit_mib", 0, DBL_MAX, 0, BEFORE_FINALIZE, 0},
    {PCNN_OPT_PRECISION, "precision", 0, 1, 1, BEFORE_FINALIZE, 0},
};
#define NUM_OPTIONS (int)(sizeof options / sizeof options[0])

static int failures;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            failures++;                                                        \
            fprintf(stderr, "FAIL line %d: ", __LINE__);                       \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
        }                                                                      \
    } while (0)

#define OK(call)                                                               \
    do {                                                                       \
        pcnn_status ok_st_ = (call);                                           \
        if (ok_st_ != PCNN_OK) {                                               \
            fprintf(stderr, "setup failed at line %d: %s: %s\n", __LINE__, #call, \
                    pcnn_last_error());                                        \
            return 1;                                                          \
        }                                                                      \
    } while (0)

static double get(const pcnn_net *net, pcnn_option o)
{
    double v = NAN;
    pcnn_status st = pcnn_net_get_option(net, o, &v);
    CHECK(st == PCNN_OK, "get option %d: %s", (int)o, pcnn_last_error());
    return v;
}

/* Setting `v` fails with `want`, names pcnn_net_set_option, and leaves the
 * option as it was. */
static void rejects(pcnn_net *net, const expected *e, double v, pcnn_status want)
{
    const double before = get(net, e->option);
    pcnn_status st = pcnn_net_set_option(net, e->option, v);
    const char *msg = pcnn_last_error();
    CHECK(st == want, "%s = %.17g: status %s, want %s", e->name, v, pcnn_status_str(st),
          pcnn_status_str(want));
    CHECK(msg && strncmp(msg, "pcnn_net_set_option: ", 21) == 0, "%s = %.17g: message \"%s\"",
          e->name, v, msg ? msg : "(null)");
    const double after = get(net, e->option);
    CHECK(after == before || (isnan(after) && isnan(before)), "%s changed by a rejected %.17g",
          e->name, v);
}

static void accepts(pcnn_net *net, const expected *e, double v)
{
    pcnn_status st = pcnn_net_set_option(net, e->option, v);
    CHECK(st == PCNN_OK, "%s = %.17g refused: %s", e->name, v, pcnn_last_error());
    const double got = get(net, e->option);
    CHECK(got == v, "%s = %.17g reads back %.17g", e->name, v, got);
}

/* option_info describes every option as the header does, and nothing past
 * the last one. */
static void check_info(void)
{
    for (int i = 0; i < NUM_OPTIONS; i++) {
        const expected *e = &options[i];
        CHECK((int)e->option == i, "options are not numbered 0..N-1 at %s", e->name);
        double lo = NAN, hi = NAN;
        int integer = -1;
        const char *name = NULL;
        pcnn_status st = pcnn_net_option_info(e->option, &lo, &hi, &integer, &name);
        CHECK(st == PCNN_OK, "option_info(%s): %s", e->name, pcnn_last_error());
        CHECK(name && strcmp(name, e->name) == 0, "option %d is named %s, want %s", i,
              name ? name : "(null)", e->name);
        CHECK(lo == e->min, "%s: min %.17g, want %.17g", e->name, lo, e->min);
        CHECK(hi == e->max, "%s: max %.17g, want %.17g", e->name, hi, e->max);
        CHECK(integer == e->is_integer, "%s: is_integer %d, want %d", e->name, integer,
              e->is_integer);
        CHECK(pcnn_net_option_info(e->option, NULL, NULL, NULL, NULL) == PCNN_OK,
              "%s: NULL outputs refused", e->name);
    }
    /* PCNN_OPT_PRECISION is the header's last option. */
    CHECK(NUM_OPTIONS == PCNN_OPT_PRECISION + 1, "the expectations miss options");
    double lo = -7.25;
    const char *name = "untouched";
    pcnn_status st = pcnn_net_option_info((pcnn_option)NUM_OPTIONS, &lo, NULL, NULL, &name);
    CHECK(st == PCNN_ERR_INVALID_ARGUMENT, "option %d past the last: %s", NUM_OPTIONS,
          pcnn_status_str(st));
    CHECK(lo == -7.25 && strcmp(name, "untouched") == 0, "a failed option_info wrote outputs");
    CHECK(strstr(pcnn_last_error(), "pcnn_net_option_info: unknown option") != NULL,
          "message \"%s\"", pcnn_last_error());
}

/* On a network that is never finalized: defaults, both bounds, just
 * outside them, fractions of integers. */
static int check_ranges(void)
{
    for (int i = 0; i < NUM_OPTIONS; i++) {
        const expected *e = &options[i];
        pcnn_net *net = NULL;
        OK(pcnn_net_create(&net));
        const double d = get(net, e->option);
        CHECK(d == e->default_value, "%s: default %.17g, want %.17g", e->name, d,
              e->default_value);
        if (e->when == READ_ONLY) {
            rejects(net, e, d, PCNN_ERR_INVALID_STATE);
            rejects(net, e, e->max, PCNN_ERR_INVALID_STATE);
            CHECK(strstr(pcnn_last_error(), "read-only") != NULL, "%s: message \"%s\"", e->name,
                  pcnn_last_error());
        } else {
            accepts(net, e, e->min);
            accepts(net, e, e->max);
            accepts(net, e, d);
            rejects(net, e, nextafter(e->min, -INFINITY), PCNN_ERR_INVALID_ARGUMENT);
            rejects(net, e, nextafter(e->max, INFINITY), PCNN_ERR_INVALID_ARGUMENT);
            rejects(net, e, -INFINITY, PCNN_ERR_INVALID_ARGUMENT);
            rejects(net, e, INFINITY, PCNN_ERR_INVALID_ARGUMENT);
            rejects(net, e, NAN, PCNN_ERR_INVALID_ARGUMENT);
            const double mid = e->min + 0.5;
            if (e->is_integer) rejects(net, e, mid, PCNN_ERR_INVALID_ARGUMENT);
            else accepts(net, e, mid < e->max ? mid : e->max / 2);
        }
        OK(pcnn_net_destroy(&net));
    }
    return 0;
}

/* After finalize: options fixed at finalize refuse any value (and keep
 * theirs), the others still change, the read-only ones stay read-only. */
static int check_finalize_rules(void)
{
    pcnn_net *net = NULL;
    pcnn_layer *in, *out;
    OK(pcnn_net_create(&net));
    OK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    OK(pcnn_net_input(net, 1, 2, 2, &in));
    OK(pcnn_dense(net, in, 3, 1, &out));
    OK(pcnn_net_set_loss(net, out, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CHECK(get(net, PCNN_OPT_THREADS) == 1, "threads before finalize");
    OK(pcnn_net_finalize(net, 2));
    CHECK(get(net, PCNN_OPT_THREADS) == 1, "threads after finalize");
    CHECK(get(net, PCNN_OPT_ACTIVE_ENGINE) == 0, "active engine of one process");
    for (int i = 0; i < NUM_OPTIONS; i++) {
        const expected *e = &options[i];
        const double now = get(net, e->option);
        const double other = now == e->min ? e->max : e->min;
        switch (e->when) {
        case BEFORE_FINALIZE:
            rejects(net, e, now, PCNN_ERR_INVALID_STATE);
            rejects(net, e, other, PCNN_ERR_INVALID_STATE);
            CHECK(strstr(pcnn_last_error(), "before finalize") != NULL, "%s: message \"%s\"",
                  e->name, pcnn_last_error());
            break;
        case ANYTIME:
            accepts(net, e, other);
            accepts(net, e, now);
            rejects(net, e, nextafter(e->max, INFINITY), PCNN_ERR_INVALID_ARGUMENT);
            break;
        case READ_ONLY: rejects(net, e, now, PCNN_ERR_INVALID_STATE); break;
        }
    }
    /* The read-only effective learning rate follows the schedule. */
    OK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 0.5));
    OK(pcnn_net_set_option(net, PCNN_OPT_WARMUP_STEPS, 4));
    OK(pcnn_net_set_option(net, PCNN_OPT_STEP, 1));
    CHECK(get(net, PCNN_OPT_EFFECTIVE_LEARNING_RATE) == 0.5 * 2 / 4, "effective learning rate");
    OK(pcnn_net_destroy(&net));
    return 0;
}

int main(void)
{
    check_info();
    if (check_ranges() || check_finalize_rules()) return 1;
    printf("%d options checked, %d failures\n", NUM_OPTIONS, failures);
    return failures ? 1 : 0;
}
