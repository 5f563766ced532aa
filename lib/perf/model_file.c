/* The model file: "PCNNPERF", format version (u32), reserved (u32), the
 * link, knobs, compute table and regressors in little-endian fields, then
 * the FNV-1a hash of every byte before it (u64).  Written atomically, as
 * checkpoints are. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../core/atomic_file.h"
#include "../core/error.h"
#include "../core/hash.h"
#include "../core/le.h"
#include "../core/memory.h"
#include "perf.h"

#define MAGIC "PCNNPERF"
#define MAX_FILE ((size_t)1 << 30)

typedef struct writer {
    unsigned char *buf;
    size_t len, cap;
    bool failed;
} writer;

static unsigned char *room(writer *w, size_t n)
{
    if (w->failed) return NULL;
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 4096;
        while (cap < w->len + n) cap *= 2;
        unsigned char *grown = mem_realloc(w->buf, cap);
        if (!grown) {
            w->failed = true;
            return NULL;
        }
        w->buf = grown;
        w->cap = cap;
    }
    unsigned char *p = w->buf + w->len;
    w->len += n;
    return p;
}

static void put_u32(writer *w, uint32_t v) { unsigned char *p = room(w, 4); if (p) le_put_u32(p, v); }
static void put_i32(writer *w, int v) { unsigned char *p = room(w, 4); if (p) le_put_i32(p, v); }
static void put_u64(writer *w, uint64_t v) { unsigned char *p = room(w, 8); if (p) le_put_u64(p, v); }
static void put_f64(writer *w, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    put_u64(w, bits);
}
static void put_bytes(writer *w, const void *b, size_t n)
{
    unsigned char *p = room(w, n);
    if (p && n) memcpy(p, b, n);
}

typedef struct reader {
    const unsigned char *p;
    size_t left;
    bool short_read;
    uint32_t version; /* of the file: older ones lack later fields */
} reader;

static const unsigned char *take(reader *r, size_t n)
{
    if (r->short_read || r->left < n) {
        r->short_read = true;
        return NULL;
    }
    const unsigned char *p = r->p;
    r->p += n;
    r->left -= n;
    return p;
}

static int get_i32(reader *r) { const unsigned char *p = take(r, 4); return p ? le_get_i32(p) : 0; }
static uint64_t get_u64(reader *r) { const unsigned char *p = take(r, 8); return p ? le_get_u64(p) : 0; }
static double get_f64(reader *r)
{
    const uint64_t bits = get_u64(r);
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

static void put_shape(writer *w, shape s)
{
    put_i32(w, s.c), put_i32(w, s.d), put_i32(w, s.h), put_i32(w, s.w);
}

static shape get_shape(reader *r)
{
    shape s;
    s.c = get_i32(r), s.d = get_i32(r), s.h = get_i32(r), s.w = get_i32(r);
    return s;
}

static void write_model(writer *w, const pcnn_perfmodel *m)
{
    put_bytes(w, MAGIC, 8);
    put_u32(w, PERF_FORMAT_VERSION);
    put_u32(w, 0);
    const perf_link *k = &m->link;
    put_i32(w, k->ranks);
    put_f64(w, k->gamma);
    put_f64(w, k->poll_work);
    put_f64(w, k->poll_cpu);
    for (int i = 0; i < PERF_CONTENTION_SIZES; i++) put_f64(w, k->mem_contention[i]);
    for (int c = 0; c < PERF_COLLECTIVES; c++) {
        put_f64(w, k->alpha[c]);
        put_f64(w, k->beta[c]);
        put_i32(w, k->curve[c].count);
        for (int i = 0; i < k->curve[c].count; i++) {
            put_f64(w, k->curve[c].bytes[i]);
            put_f64(w, k->curve[c].seconds[i]);
        }
    }
    const perf_knobs *o = &m->knobs;
    put_f64(w, o->alpha), put_f64(w, o->beta), put_f64(w, o->link_gbits);
    put_i32(w, o->strategy), put_i32(w, o->engine), put_f64(w, o->nb_progress);
    put_i32(w, o->source);
    const perf_compute *c = &m->compute;
    put_i32(w, c->num_layers);
    put_u64(w, c->fingerprint);
    put_i32(w, c->threads), put_i32(w, c->batch_lo), put_i32(w, c->batch_hi);
    put_i32(w, c->optimizer);
    for (int i = 0; i < 2; i++) put_f64(w, c->update[i]);
    put_f64(w, c->update_team);
    put_f64(w, c->sum_gamma);
    for (int i = 0; i < 2; i++) put_f64(w, c->overhead[i]);
    put_f64(w, c->spread);
    for (int l = 0; l < c->num_layers; l++) {
        const perf_layer *p = &c->layers[l];
        put_bytes(w, p->kind, PERF_KIND_LEN);
        put_shape(w, p->in);
        put_shape(w, p->out);
        put_u64(w, p->num_params);
        for (int i = 0; i < 2; i++) put_f64(w, p->fwd[i]), put_f64(w, p->bwd_w[i]), put_f64(w, p->bwd_x[i]);
        put_f64(w, p->reg_fwd), put_f64(w, p->reg_bwd);
        put_f64(w, p->update);
    }
    const size_t reg = perf_regressors_bytes(m);
    put_u64(w, reg);
    unsigned char *p = room(w, reg);
    if (p) perf_regressors_write(m, p, reg);
    put_f64(w, c->pace);
    for (int i = 0; i < PERF_COLLECTIVES; i++) put_f64(w, k->spread[i]);
    put_u64(w, w->failed ? 0 : hash_fnv1a(HASH_FNV1A_BASIS, w->buf, w->len));
}

pcnn_status perf_encode(const pcnn_perfmodel *m, unsigned char **out, size_t *len,
                        const char *func)
{
    writer w = {0};
    write_model(&w, m);
    if (w.failed) {
        mem_free(w.buf);
        return error_set(PCNN_ERR_OUT_OF_MEMORY, func, "model file of %zu bytes", w.len);
    }
    *out = w.buf;
    *len = w.len;
    return PCNN_OK;
}

pcnn_status perf_save(const pcnn_perfmodel *m, const char *path, const char *func)
{
    unsigned char *buf = NULL;
    size_t len = 0;
    TRY(perf_encode(m, &buf, &len, func));
    atomic_file f;
    pcnn_status st = atomic_file_open(&f, path);
    if (st == PCNN_OK) {
        if (fwrite(buf, 1, len, f.stream) != len) {
            atomic_file_abort(&f);
            st = error_set(PCNN_ERR_IO, func, "writing %s failed", path);
        } else {
            st = atomic_file_commit(&f);
        }
    }
    mem_free(buf);
    return st;
}

static pcnn_status corrupt(const char *func, const char *path, const char *why)
{
    return error_set(PCNN_ERR_CORRUPT, func, "%s: %s", path, why);
}

static bool finite_at_least(double v, double lo) { return isfinite(v) && v >= lo; }
static bool within(double v, double lo, double hi) { return v >= lo && v <= hi; } /* NaN: no */

/* A timing a + b n, fitted through two measured batches: possible where it
 * was measured. */
static bool line_possible(const double ab[2], int lo, int hi)
{
    return within(ab[0] + ab[1] * lo, 0, PERF_MAX_SECONDS) &&
           within(ab[0] + ab[1] * hi, 0, PERF_MAX_SECONDS);
}

/* A checksum guards against damage, not against a file written to fit
 * one: every value is held to what pcnn_perfmodel_set_param and the
 * calibrations can produce (NULL: plausible; else the reason). */
static const char *implausible(const pcnn_perfmodel *m)
{
    const perf_link *k = &m->link;
    if (k->ranks < 0 || !(k->gamma > 0 && k->gamma <= PERF_MAX_S_PER_BYTE) ||
        !within(k->poll_work, 0, PERF_MAX_SECONDS) || !within(k->poll_cpu, 0, PERF_MAX_SECONDS))
        return "a link calibration out of range";
    for (int c = 0; c < PERF_COLLECTIVES; c++) {
        if (!within(k->alpha[c], 0, PERF_MAX_LATENCY_S) ||
            !within(k->beta[c], 0, PERF_MAX_S_PER_BYTE))
            return "a collective's latency or time per byte out of range";
        for (int i = 0; i < k->curve[c].count; i++)
            if (!finite_at_least(k->curve[c].bytes[i], 1) ||
                !within(k->curve[c].seconds[i], 0, PERF_MAX_SECONDS) ||
                (i > 0 && !(k->curve[c].bytes[i] > k->curve[c].bytes[i - 1])))
                return "a collective's measured curve out of range";
    }
    const perf_knobs *o = &m->knobs;
    if (!(o->alpha == -1 || within(o->alpha, 0, PERF_MAX_LATENCY_S)) ||
        !within(o->beta, 0, PERF_MAX_S_PER_BYTE) ||
        !(o->link_gbits == 0 || within(o->link_gbits, PERF_MIN_LINK_GBITS, PERF_MAX_LINK_GBITS)) ||
        o->strategy < -1 ||
        o->strategy > PCNN_EXCHANGE_FC_GRADIENT || o->engine < 0 || o->engine > 2 ||
        !(o->nb_progress >= 0 && o->nb_progress <= 1) || o->source < 0 || o->source > 2)
        return "a parameter (pcnn_perfmodel_set_param) out of range";
    const perf_compute *c = &m->compute;
    bool ok = c->threads >= 0 && c->batch_lo >= 0 && c->batch_hi >= c->batch_lo &&
              within(c->update_team, 0, PERF_MAX_SECONDS) && finite_at_least(c->sum_gamma, 0) &&
              isfinite(c->spread);
    for (int i = 0; i < 2; i++) ok = ok && within(c->update[i], 0, PERF_MAX_SECONDS);
    ok = ok && line_possible(c->overhead, c->batch_lo, c->batch_hi);
    for (int l = 0; l < c->num_layers && ok; l++) {
        const perf_layer *p = &c->layers[l];
        ok = line_possible(p->fwd, c->batch_lo, c->batch_hi) &&
             line_possible(p->bwd_w, c->batch_lo, c->batch_hi) &&
             line_possible(p->bwd_x, c->batch_lo, c->batch_hi);
        /* reg_*: NaN where no regressor priced the layer. */
        ok = ok && (isnan(p->reg_fwd) || within(p->reg_fwd, 0, PERF_MAX_SECONDS)) &&
             (isnan(p->reg_bwd) || within(p->reg_bwd, 0, PERF_MAX_SECONDS)) &&
             within(p->update, 0, PERF_MAX_SECONDS);
    }
    return ok ? NULL : "a compute timing out of range";
}

static pcnn_status read_model(reader *r, pcnn_perfmodel *m, const char *path, const char *func)
{
    perf_link *k = &m->link;
    k->ranks = get_i32(r);
    k->gamma = get_f64(r);
    k->poll_work = get_f64(r);
    k->poll_cpu = r->version >= 3 ? get_f64(r) : 0;
    for (int i = 0; i < PERF_CONTENTION_SIZES; i++) {
        k->mem_contention[i] = r->version >= 4 ? get_f64(r) : 1;
        if (!(k->mem_contention[i] >= 1 && k->mem_contention[i] < 1e3))
            return corrupt(func, path, "a memory contention factor below 1");
    }
    for (int c = 0; c < PERF_COLLECTIVES; c++) {
        k->alpha[c] = get_f64(r);
        k->beta[c] = get_f64(r);
        const int n = get_i32(r);
        if (n < 0 || n > PERF_CURVE_MAX) return corrupt(func, path, "a curve of impossible length");
        k->curve[c].count = n;
        for (int i = 0; i < n; i++) {
            k->curve[c].bytes[i] = get_f64(r);
            k->curve[c].seconds[i] = get_f64(r);
        }
    }
    perf_knobs *o = &m->knobs;
    o->alpha = get_f64(r), o->beta = get_f64(r), o->link_gbits = get_f64(r);
    o->strategy = get_i32(r), o->engine = get_i32(r), o->nb_progress = get_f64(r);
    o->source = get_i32(r);
    perf_compute *c = &m->compute;
    const int L = get_i32(r);
    if (L < 0 || (size_t)L > r->left / 64) return corrupt(func, path, "a layer count beyond the file");
    c->fingerprint = get_u64(r);
    c->threads = get_i32(r), c->batch_lo = get_i32(r), c->batch_hi = get_i32(r);
    c->optimizer = get_i32(r);
    for (int i = 0; i < 2; i++) c->update[i] = get_f64(r);
    c->update_team = get_f64(r);
    c->sum_gamma = get_f64(r);
    for (int i = 0; i < 2; i++) c->overhead[i] = get_f64(r);
    c->spread = get_f64(r);
    c->layers = L ? mem_calloc((size_t)L, sizeof *c->layers) : NULL;
    if (L && !c->layers) return error_set(PCNN_ERR_OUT_OF_MEMORY, func, "compute table");
    c->num_layers = L;
    for (int l = 0; l < L; l++) {
        perf_layer *p = &c->layers[l];
        const unsigned char *kind = take(r, PERF_KIND_LEN);
        if (kind) memcpy(p->kind, kind, PERF_KIND_LEN);
        p->kind[PERF_KIND_LEN - 1] = '\0';
        p->in = get_shape(r);
        p->out = get_shape(r);
        p->num_params = get_u64(r);
        for (int i = 0; i < 2; i++) p->fwd[i] = get_f64(r), p->bwd_w[i] = get_f64(r), p->bwd_x[i] = get_f64(r);
        p->reg_fwd = get_f64(r), p->reg_bwd = get_f64(r);
        p->update = get_f64(r);
    }
    if (r->short_read) return corrupt(func, path, "truncated");
    const char *why = implausible(m);
    if (why) return corrupt(func, path, why);
    const uint64_t reg = get_u64(r);
    if (reg > r->left) return corrupt(func, path, "truncated (regressors)");
    const unsigned char *bytes = take(r, (size_t)reg);
    c->pace = r->version >= 5 ? get_f64(r) : 1;
    for (int i = 0; i < PERF_COLLECTIVES; i++) {
        k->spread[i] = r->version >= 6 ? get_f64(r) : 0;
        if (!(k->spread[i] >= 0 && k->spread[i] < 1e6))
            return corrupt(func, path, "a collective's repetition spread out of range");
    }
    if (r->short_read) return corrupt(func, path, "truncated");
    if (!(c->pace == 0 || (c->pace >= 1 && c->pace < 1e3)))
        return corrupt(func, path, "the ranks' pace out of range");
    return perf_regressors_read(m, bytes, (size_t)reg);
}

pcnn_status perf_decode(const unsigned char *buf, size_t size, pcnn_perfmodel *m,
                        const char *path, const char *func)
{
    pcnn_status st = PCNN_OK;
    if (size < 16 || memcmp(buf, MAGIC, 8) != 0) {
        st = corrupt(func, path, "not a performance model file (no PCNNPERF header)");
    } else if (le_get_u32(buf + 8) < PERF_FORMAT_OLDEST ||
               le_get_u32(buf + 8) > PERF_FORMAT_VERSION) {
        st = error_set(PCNN_ERR_UNSUPPORTED, func,
                       "%s: performance model format version %u; this library reads versions "
                       "%u to %u (calibrate again and save)",
                       path, le_get_u32(buf + 8), PERF_FORMAT_OLDEST, PERF_FORMAT_VERSION);
    } else if (size < 24 ||
               hash_fnv1a(HASH_FNV1A_BASIS, buf, size - 8) != le_get_u64(buf + size - 8)) {
        st = corrupt(func, path, "checksum mismatch (damaged or truncated)");
    } else {
        reader r = {buf + 16, size - 24, false, le_get_u32(buf + 8)};
        st = read_model(&r, m, path, func);
        if (st == PCNN_OK && r.left != 0) st = corrupt(func, path, "trailing bytes");
    }
    return st;
}

pcnn_status perf_load(const char *path, pcnn_perfmodel *m, const char *func)
{
    unsigned char *buf = NULL;
    size_t size = 0;
    TRY(file_read_whole(path, MAX_FILE, &buf, &size, func));
    const pcnn_status st = perf_decode(buf, size, m, path, func);
    mem_free(buf);
    return st;
}
