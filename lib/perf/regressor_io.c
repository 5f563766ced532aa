/* The regressor set as bytes (regressor.h): little-endian, versioned,
 * checksummed, so that the performance model's file can embed it. */
#include <math.h>
#include <string.h>

#include "../core/error.h"
#include "../core/hash.h"
#include "../core/le.h"
#include "../core/memory.h"
#include "regressor_set.h"

#define MAGIC "PCNNREG1"
/* The version names the weights' meaning as well as the layout: a set fitted
 * on other features would load and predict nonsense, so it is refused.
 *   1  one MLP per kind; conv3d without its direct passes, conv2d without
 *      dx's and dW's kernels, nothing of vector tails or dense's sgemv
 *   2  (briefly) the features of version 3 in the layout of version 1
 *   3  an ensemble per kind (members, then each member's weights); the
 *      features of perf_features as they are */
#define FORMAT_VERSION 3u
#define HEADER_BYTES (8 + 4 + 4 + 4)
#define TRAILER_BYTES 8

static size_t kind_bytes(const perf_mlp *m)
{
    return 7 * 4 + 8 * 8 + (size_t)m->features * 16 + 8 +
           (size_t)m->members * m->num_params * 4;
}

/* A cursor over a buffer: writes when out is non-NULL, always counts. */
typedef struct cursor {
    unsigned char *out;
    const unsigned char *in;
    size_t at, size;
} cursor;

static void put_u32(cursor *c, uint32_t v)
{
    if (c->out) le_put_u32(c->out + c->at, v);
    c->at += 4;
}
static void put_u64(cursor *c, uint64_t v)
{
    if (c->out) le_put_u64(c->out + c->at, v);
    c->at += 8;
}
static void put_f64(cursor *c, double v)
{
    if (c->out) le_put_f64(c->out + c->at, v);
    c->at += 8;
}

pcnn_status perf_regressors_save(const perf_regressors *set, void *buf, size_t size,
                                 size_t *needed)
{
    REQUIRE_PTR(set);
    REQUIRE_PTR(needed);
    size_t total = HEADER_BYTES + TRAILER_BYTES;
    uint32_t fitted = 0;
    for (int k = 0; k < PERF_KIND_COUNT; k++)
        if (set->mlp[k].fitted) {
            total += kind_bytes(&set->mlp[k]);
            fitted++;
        }
    *needed = total;
    if (!buf && size == 0) return PCNN_OK;
    REQUIRE(buf != NULL, PCNN_ERR_INVALID_ARGUMENT, "buf is NULL but size is %zu", size);
    REQUIRE(size >= total, PCNN_ERR_SHAPE, "buffer of %zu bytes, %zu needed", size, total);
    cursor c = {buf, NULL, 0, size};
    memcpy(c.out, MAGIC, 8);
    c.at = 8;
    put_u32(&c, FORMAT_VERSION);
    put_u32(&c, (uint32_t)set->threads);
    put_u32(&c, fitted);
    for (int k = 0; k < PERF_KIND_COUNT; k++) {
        const perf_mlp *m = &set->mlp[k];
        if (!m->fitted) continue;
        put_u32(&c, (uint32_t)k);
        put_u32(&c, (uint32_t)m->features);
        put_u32(&c, (uint32_t)m->hidden_layers);
        put_u32(&c, (uint32_t)m->hidden);
        put_u32(&c, (uint32_t)m->train_points);
        put_u32(&c, (uint32_t)m->test_points);
        put_u32(&c, (uint32_t)m->members);
        put_f64(&c, m->median_re);
        for (int j = 0; j < 3; j++) put_f64(&c, m->baseline[j]);
        put_f64(&c, m->y_lo);
        put_f64(&c, m->y_hi);
        put_f64(&c, m->y_mean);
        put_f64(&c, m->y_scale);
        for (int f = 0; f < m->features; f++) put_f64(&c, m->mean[f]);
        for (int f = 0; f < m->features; f++) put_f64(&c, m->scale[f]);
        put_u64(&c, (uint64_t)m->num_params);
        for (size_t i = 0; i < (size_t)m->members * m->num_params; i++) {
            le_put_f32(c.out + c.at, m->params[i]);
            c.at += 4;
        }
    }
    put_u64(&c, hash_fnv1a(HASH_FNV1A_BASIS, buf, c.at));
    return PCNN_OK;
}

/* Reading: every get checks that the bytes are there first. */
static bool take(cursor *c, size_t n)
{
    if (c->size - c->at < n) return false;
    c->at += n;
    return true;
}

#define GET(c, width, getter, dst, what)                                                \
    do {                                                                                \
        if (!take((c), (width)))                                                        \
            return FAIL(PCNN_ERR_CORRUPT, "regressors truncated in %s at byte %zu", (what), \
                        (c)->at);                                                       \
        (dst) = getter((c)->in + (c)->at - (width));                                    \
    } while (0)

static pcnn_status read_kind(cursor *c, perf_regressors *set)
{
    uint32_t kind, features, layers, hidden, train, test, members;
    GET(c, 4, le_get_u32, kind, "a kind's header");
    if (kind >= PERF_KIND_COUNT)
        return FAIL(PCNN_ERR_CORRUPT, "regressors: unknown kernel kind %u", kind);
    perf_mlp *m = &set->mlp[kind];
    if (m->fitted)
        return FAIL(PCNN_ERR_CORRUPT, "regressors: kind %s appears twice", perf_kind_name(kind));
    GET(c, 4, le_get_u32, features, "a kind's header");
    GET(c, 4, le_get_u32, layers, "a kind's header");
    GET(c, 4, le_get_u32, hidden, "a kind's header");
    GET(c, 4, le_get_u32, train, "a kind's header");
    GET(c, 4, le_get_u32, test, "a kind's header");
    GET(c, 4, le_get_u32, members, "a kind's header");
    if (features < 2 || features > PERF_MAX_FEATURES + 1 || layers > PERF_MAX_HIDDEN_LAYERS ||
        hidden < 1 || hidden > PERF_MAX_HIDDEN || train > INT32_MAX || test > INT32_MAX ||
        members < 1 || members > PERF_MAX_MEMBERS)
        return FAIL(PCNN_ERR_CORRUPT,
                    "regressors: %s has %u features and %u member(s) of %u x %u hidden units "
                    "(out of range)",
                    perf_kind_name(kind), features, members, layers, hidden);
    m->features = (int)features;
    m->hidden_layers = (int)layers;
    m->hidden = (int)hidden;
    m->train_points = (int)train;
    m->test_points = (int)test;
    m->members = (int)members;
    GET(c, 8, le_get_f64, m->median_re, "a kind's error");
    for (int j = 0; j < 3; j++) GET(c, 8, le_get_f64, m->baseline[j], "a kind's baseline");
    GET(c, 8, le_get_f64, m->y_lo, "a kind's normalisation");
    GET(c, 8, le_get_f64, m->y_hi, "a kind's normalisation");
    GET(c, 8, le_get_f64, m->y_mean, "a kind's normalisation");
    GET(c, 8, le_get_f64, m->y_scale, "a kind's normalisation");
    for (uint32_t f = 0; f < features; f++) GET(c, 8, le_get_f64, m->mean[f], "normalisation");
    for (uint32_t f = 0; f < features; f++) GET(c, 8, le_get_f64, m->scale[f], "normalisation");
    bool finite = isfinite(m->y_mean) && isfinite(m->y_scale) && m->y_scale > 0 &&
                  isfinite(m->y_lo) && isfinite(m->y_hi) && m->y_lo <= m->y_hi;
    for (int j = 0; j < 3; j++) finite = finite && isfinite(m->baseline[j]) && m->baseline[j] >= 0;
    for (uint32_t f = 0; f < features; f++)
        finite = finite && isfinite(m->mean[f]) && isfinite(m->scale[f]) && m->scale[f] > 0;
    if (!finite)
        return FAIL(PCNN_ERR_CORRUPT, "regressors: %s has a non-finite or negative baseline or normalisation",
                    perf_kind_name(kind));
    uint64_t count;
    GET(c, 8, le_get_u64, count, "a kind's parameter count");
    if (count > (c->size - c->at) / 4 / members)
        return FAIL(PCNN_ERR_CORRUPT, "regressors truncated: %s needs %u x %llu parameters",
                    perf_kind_name(kind), members, (unsigned long long)count);
    m->num_params = (size_t)count;
    const size_t total = (size_t)members * m->num_params;
    m->params = mem_alloc_floats(total);
    if (!m->params) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "%zu parameters", total);
    for (size_t i = 0; i < total; i++) {
        m->params[i] = le_get_f32(c->in + c->at);
        c->at += 4;
        if (!isfinite(m->params[i])) {
            mem_free(m->params);
            m->params = NULL;
            return FAIL(PCNN_ERR_CORRUPT, "regressors: %s has a non-finite weight (%zu of %zu)",
                        perf_kind_name(kind), i, total);
        }
    }
    TRY(perf_mlp_build_predictor(m));
    m->fitted = true;
    return PCNN_OK;
}

static pcnn_status read_set(cursor *c, perf_regressors *set, uint32_t kinds)
{
    for (uint32_t i = 0; i < kinds; i++) TRY(read_kind(c, set));
    if (c->at != c->size)
        return FAIL(PCNN_ERR_CORRUPT, "regressors: %zu bytes left over after %u kinds",
                    c->size - c->at, kinds);
    return PCNN_OK;
}

pcnn_status perf_regressors_load(const void *buf, size_t size, perf_regressors **out)
{
    REQUIRE_PTR(buf);
    REQUIRE_PTR(out);
    const unsigned char *b = buf;
    if (size < HEADER_BYTES + TRAILER_BYTES)
        return FAIL(PCNN_ERR_CORRUPT, "regressors truncated: %zu bytes, the header alone is %d",
                    size, HEADER_BYTES + TRAILER_BYTES);
    if (memcmp(b, MAGIC, 8) != 0)
        return FAIL(PCNN_ERR_CORRUPT, "not a regressor set (bad magic)");
    const uint32_t version = le_get_u32(b + 8);
    if (version != FORMAT_VERSION)
        return FAIL(PCNN_ERR_UNSUPPORTED,
                    "regressor format version %u, this library reads %u (its features differ: "
                    "calibrate the regressors again)",
                    version, FORMAT_VERSION);
    const size_t body = size - TRAILER_BYTES;
    if (hash_fnv1a(HASH_FNV1A_BASIS, b, body) != le_get_u64(b + body))
        return FAIL(PCNN_ERR_CORRUPT, "regressors: checksum mismatch (truncated or damaged)");
    const uint32_t threads = le_get_u32(b + 12), kinds = le_get_u32(b + 16);
    if (threads < 1 || threads > 65536 || kinds > PERF_KIND_COUNT)
        return FAIL(PCNN_ERR_CORRUPT, "regressors: %u threads, %u kinds (out of range)", threads,
                    kinds);
    perf_regressors *set;
    TRY(perf_set_create((int)threads, &set));
    cursor c = {NULL, b, HEADER_BYTES, body};
    pcnn_status st = read_set(&c, set, kinds);
    if (st != PCNN_OK) {
        perf_regressors_destroy(&set);
        return st;
    }
    *out = set;
    return PCNN_OK;
}
