/* One row per network option (see option_table.h).  Rows are indexed by
 * their pcnn_option value, which the header numbers 0..N-1 without gaps. */
#include "option_table.h"

#include <float.h>
#include <math.h>
#include <stdio.h>

#include "../core/error.h"

#define TWO_POW_53 9007199254740992.0 /* every integer up to it is a double */
#define OFF(field) offsetof(net_options, field)

/* The options kept outside net_options. */
static double get_threads(const pcnn_net *net)
{
    return net->finalized ? net->threads : net->opt.threads; /* resolved at finalize */
}
static double get_step(const pcnn_net *net) { return (double)net->step; }
static void set_step(pcnn_net *net, double v) { net->step = (uint64_t)v; }
static double get_effective_lr(const pcnn_net *net) { return net_effective_lr(net); }
static double get_active_engine(const pcnn_net *net)
{
    return net->exchange ? exchange_active_engine(net->exchange) : 0.0;
}

/* Shorthands for the columns range .. when. */
#define REAL(lo, hi, lo_open, hi_open) lo, hi, lo_open, hi_open, false, NULL
#define INTEGER(lo, hi) lo, hi, false, false, true, NULL
#define CHOICE(hi, text) 0, hi, false, false, true, text
#define FLAG 0, 1, false, false, true, NULL

static const option_row rows[] = {
    [PCNN_OPT_LEARNING_RATE] = {"learning_rate", "learning rate", REAL(0, INFINITY, true, true),
                                OPTION_ANYTIME, 0.01, OPTION_DOUBLE, OFF(learning_rate), NULL, NULL},
    [PCNN_OPT_MOMENTUM] = {"momentum", "momentum", REAL(0, 1, false, true), OPTION_ANYTIME, 0.9,
                           OPTION_DOUBLE, OFF(hyper.momentum), NULL, NULL},
    [PCNN_OPT_WEIGHT_DECAY] = {"weight_decay", "weight decay", REAL(0, INFINITY, false, true),
                               OPTION_ANYTIME, 0, OPTION_DOUBLE, OFF(weight_decay), NULL, NULL},
    [PCNN_OPT_ADAM_BETA1] = {"adam_beta1", "Adam beta", REAL(0, 1, false, true), OPTION_ANYTIME,
                             0.9, OPTION_DOUBLE, OFF(hyper.beta1), NULL, NULL},
    [PCNN_OPT_ADAM_BETA2] = {"adam_beta2", "Adam beta", REAL(0, 1, false, true), OPTION_ANYTIME,
                             0.999, OPTION_DOUBLE, OFF(hyper.beta2), NULL, NULL},
    [PCNN_OPT_ADAM_EPSILON] = {"adam_epsilon", "Adam epsilon", REAL(0, INFINITY, true, true),
                               OPTION_ANYTIME, 1e-8, OPTION_DOUBLE, OFF(hyper.epsilon), NULL, NULL},
    [PCNN_OPT_SEED] = {"seed", "seed", INTEGER(0, TWO_POW_53), OPTION_BEFORE_FINALIZE, 0,
                       OPTION_U64, OFF(seed), NULL, NULL},
    [PCNN_OPT_WARMUP_STEPS] = {"warmup_steps", "warm-up step count", INTEGER(0, 4e18),
                               OPTION_ANYTIME, 0, OPTION_LONG, OFF(warmup_steps), NULL, NULL},
    [PCNN_OPT_DECAY_EVERY_STEPS] = {"decay_every_steps", "decay interval step count",
                                    INTEGER(0, 4e18), OPTION_ANYTIME, 0, OPTION_LONG,
                                    OFF(decay_every_steps), NULL, NULL},
    [PCNN_OPT_DECAY_FACTOR] = {"decay_factor", "decay factor", REAL(0, 1, true, false),
                               OPTION_ANYTIME, 0.1, OPTION_DOUBLE, OFF(decay_factor), NULL, NULL},
    [PCNN_OPT_THREADS] = {"threads", "threads", INTEGER(0, 4096), OPTION_BEFORE_FINALIZE, 0,
                          OPTION_INT, OFF(threads), get_threads, NULL},
    [PCNN_OPT_KEEP_IM2COL] = {"keep_im2col", "keep_im2col", FLAG, OPTION_BEFORE_FINALIZE, 1,
                              OPTION_BOOL, OFF(keep_im2col), NULL, NULL},
    [PCNN_OPT_CHECK_NUMERICS] = {"check_numerics", "check_numerics", FLAG, OPTION_ANYTIME, 1,
                                 OPTION_BOOL, OFF(check_numerics), NULL, NULL},
    [PCNN_OPT_STEP] = {"step", "step", INTEGER(0, TWO_POW_53), OPTION_ANYTIME, 0,
                       OPTION_ELSEWHERE, 0, get_step, set_step},
    [PCNN_OPT_EFFECTIVE_LEARNING_RATE] = {"effective_learning_rate", "effective learning rate",
                                          REAL(0, INFINITY, false, true), OPTION_READ_ONLY, 0,
                                          OPTION_ELSEWHERE, 0, get_effective_lr, NULL},
    [PCNN_OPT_BUCKET_BYTES] = {"bucket_bytes", "bucket_bytes", INTEGER(0, 8589934592.0),
                               OPTION_BEFORE_FINALIZE, 1048576, OPTION_SIZE, OFF(bucket_bytes), NULL, NULL},
    [PCNN_OPT_OVERLAP] = {"overlap", "overlap", FLAG, OPTION_BEFORE_FINALIZE, 1, OPTION_BOOL,
                          OFF(overlap), NULL, NULL},
    [PCNN_OPT_ENGINE] = {"engine", "engine", CHOICE(2, "0 (auto), 1 (thread) or 2 (nonblocking)"),
                         OPTION_BEFORE_FINALIZE, 0, OPTION_INT, OFF(engine), NULL, NULL},
    [PCNN_OPT_ACTIVE_ENGINE] = {"active_engine", "active engine", INTEGER(0, 2),
                                OPTION_READ_ONLY, 0, OPTION_ELSEWHERE, 0, get_active_engine,
                                NULL},
    [PCNN_OPT_COMM_CORE] = {"comm_core", "comm_core", INTEGER(-1, 65535), OPTION_BEFORE_FINALIZE,
                            -1, OPTION_INT, OFF(comm_core), NULL, NULL},
    [PCNN_OPT_TIMEOUT_MS] = {"timeout_ms", "timeout_ms", INTEGER(0, TWO_POW_53), OPTION_ANYTIME, 0,
                             OPTION_LONG, OFF(timeout_ms), NULL, NULL},
    [PCNN_OPT_TRACE_EVENTS] = {"trace_events", "trace_events", INTEGER(0, 1e8),
                               OPTION_BEFORE_FINALIZE, 0, OPTION_SIZE, OFF(trace_events), NULL, NULL},
    [PCNN_OPT_CONV_ALGORITHM] = {"conv_algorithm", "conv_algorithm",
                                 CHOICE(3, "0 (automatic), 1 (im2col + GEMM), 2 (direct) or "
                                           "3 (taps)"),
                                 OPTION_BEFORE_FINALIZE, 0, OPTION_INT, OFF(conv_algorithm), NULL, NULL},
    [PCNN_OPT_SYNC_BATCHNORM] = {"sync_batchnorm", "sync_batchnorm", FLAG,
                                 OPTION_BEFORE_FINALIZE, 0, OPTION_BOOL, OFF(sync_batchnorm), NULL,
                                 NULL},
    [PCNN_OPT_HALO_OVERLAP] = {"halo_overlap", "halo_overlap", FLAG, OPTION_BEFORE_FINALIZE, 1,
                               OPTION_BOOL, OFF(halo_overlap), NULL, NULL},
    [PCNN_OPT_BN_SCOPE] = {"bn_scope", "bn_scope", FLAG, OPTION_BEFORE_FINALIZE, 1, OPTION_BOOL,
                           OFF(bn_scope), NULL, NULL},
    [PCNN_OPT_SPATIAL_FALLBACK] = {"spatial_fallback", "spatial_fallback", FLAG,
                                   OPTION_BEFORE_FINALIZE, 0, OPTION_BOOL, OFF(spatial_fallback),
                                   NULL, NULL},
    [PCNN_OPT_HALO_SCHEDULE] = {"halo_schedule", "halo schedule",
                                CHOICE(1, "0 (dimension by dimension) or 1 (all neighbours)"),
                                OPTION_BEFORE_FINALIZE, 0, OPTION_INT, OFF(halo_schedule), NULL,
                                NULL},
    [PCNN_OPT_PLAN_MAX_SPATIAL] = {"plan_max_spatial", "plan_max_spatial", INTEGER(0, 1 << 20),
                                   OPTION_BEFORE_FINALIZE, 0, OPTION_INT, OFF(plan_max_spatial),
                                   NULL, NULL},
    [PCNN_OPT_PLAN_SPATIAL_DIMS] = {"plan_spatial_dims", "plan_spatial_dims",
                                    CHOICE(7, "a mask of 1 (depth), 2 (height), 4 (width)"),
                                    OPTION_BEFORE_FINALIZE, 7, OPTION_INT,
                                    OFF(plan_spatial_dims), NULL, NULL},
    [PCNN_OPT_PLAN_MIXED] = {"plan_mixed", "plan_mixed", FLAG, OPTION_BEFORE_FINALIZE, 1,
                             OPTION_BOOL, OFF(plan_mixed), NULL, NULL},
    [PCNN_OPT_MEMORY_LIMIT_MIB] = {"memory_limit_mib", "memory_limit_mib",
                                   REAL(0, INFINITY, false, true), OPTION_BEFORE_FINALIZE, 0,
                                   OPTION_DOUBLE, OFF(memory_limit_mib), NULL, NULL},
    [PCNN_OPT_PRECISION] = {"precision", "precision", CHOICE(1, "0 (fp32) or 1 (bf16)"),
                            OPTION_BEFORE_FINALIZE, 0, OPTION_INT, OFF(precision), NULL, NULL},
};

#define NUM_ROWS (sizeof rows / sizeof rows[0])

const option_row *option_row_of(pcnn_option option)
{
    const unsigned i = (unsigned)option; /* negative values wrap past the end */
    return i < NUM_ROWS && rows[i].name ? &rows[i] : NULL;
}

bool option_in_range(const option_row *r, double v)
{
    if (isnan(v)) return false; /* an infinite bound is open: the value must be finite */
    if (r->lo_open ? v <= r->lo : v < r->lo) return false;
    if (r->hi_open ? v >= r->hi : v > r->hi) return false;
    return !r->integer || v == floor(v);
}

void option_bounds(const option_row *r, double *min, double *max)
{
    *min = r->lo_open ? nextafter(r->lo, INFINITY) : r->lo;
    *max = isinf(r->hi) ? DBL_MAX : r->hi_open ? nextafter(r->hi, -INFINITY) : r->hi;
}

pcnn_status option_range_error(const option_row *r, double v, const char *func)
{
    const pcnn_status bad = PCNN_ERR_INVALID_ARGUMENT;
    if (r->store == OPTION_BOOL)
        return error_set(bad, func, "%s is a flag: 0 or 1, not %g", r->label, v);
    if (r->choices) return error_set(bad, func, "%s %g must be %s", r->label, v, r->choices);
    if (r->integer)
        return error_set(bad, func, "%s %g must be an integer in [%.0f, %.0f]", r->label, v,
                         r->lo, r->hi);
    if (isinf(r->hi))
        return error_set(bad, func, "%s %g must be finite and %s %g", r->label, v,
                         r->lo_open ? ">" : ">=", r->lo);
    return error_set(bad, func, "%s %g must be in %c%g, %g%c", r->label, v, r->lo_open ? '(' : '[',
                     r->lo, r->hi, r->hi_open ? ')' : ']');
}

static void store(net_options *o, const option_row *r, double v)
{
    char *at = (char *)o + r->offset;
    switch (r->store) {
    case OPTION_DOUBLE: *(double *)at = v; break;
    case OPTION_U64: *(uint64_t *)at = (uint64_t)v; break;
    case OPTION_LONG: *(long *)at = (long)v; break;
    case OPTION_INT: *(int *)at = (int)v; break;
    case OPTION_BOOL: *(bool *)at = v != 0; break;
    case OPTION_SIZE: *(size_t *)at = (size_t)v; break;
    case OPTION_ELSEWHERE: break;
    }
}

static double load(const net_options *o, const option_row *r)
{
    const char *at = (const char *)o + r->offset;
    switch (r->store) {
    case OPTION_DOUBLE: return *(const double *)at;
    case OPTION_U64: return (double)*(const uint64_t *)at;
    case OPTION_LONG: return (double)*(const long *)at;
    case OPTION_INT: return *(const int *)at;
    case OPTION_BOOL: return *(const bool *)at;
    case OPTION_SIZE: return (double)*(const size_t *)at;
    case OPTION_ELSEWHERE: break;
    }
    return 0;
}

double option_read(const pcnn_net *net, const option_row *r)
{
    return r->get ? r->get(net) : load(&net->opt, r);
}

void option_write(pcnn_net *net, const option_row *r, double v)
{
    if (r->set) r->set(net, v);
    else store(&net->opt, r, v);
}

void net_options_defaults(net_options *o)
{
    for (size_t i = 0; i < NUM_ROWS; i++)
        if (rows[i].name) store(o, &rows[i], rows[i].default_value);
    o->exchange = PCNN_EXCHANGE_ALLTOALL_ALLGATHER;
}

bool option_value_ok(pcnn_option option, double v)
{
    const option_row *r = option_row_of(option);
    return r && option_in_range(r, v);
}
