/* The checkpoint byte layout: encoding, writing, and a parser that trusts
 * no length field before checking it against the bytes actually present.
 * Multi-byte values are assembled byte by byte, so the format is the same
 * on every host, and no struct is ever dumped raw. */
#include "checkpoint_format.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "../core/error.h"
#include "../graph/option_table.h"
#include "../core/hash.h"
#include "../core/le.h"

uint32_t ckpt_crc32(uint32_t crc, const unsigned char *p, size_t len)
{
    uLong c = crc;
    while (len > 0) { /* zlib takes uInt lengths */
        uInt chunk = len > (1u << 30) ? (1u << 30) : (uInt)len;
        c = crc32(c, p, chunk);
        p += chunk;
        len -= chunk;
    }
    return (uint32_t)c;
}

void ckpt_decode_floats(const unsigned char *src, float *dst, size_t count)
{
    for (size_t i = 0; i < count; i++) dst[i] = le_get_f32(src + 4 * i);
}

uint64_t ckpt_hash_basis(uint32_t version)
{
    return version == 1 ? 1469598103934665603ull : HASH_FNV1A_BASIS;
}

/* ------------------------------------------------------------------ */
/* Writer                                                               */
/* ------------------------------------------------------------------ */

static uint64_t header_bytes(int sections)
{
    return CKPT_HEADER_FIXED + (uint64_t)sections * CKPT_ENTRY_BYTES + 4;
}

void ckpt_begin(ckpt_writer *w, FILE *f, int sections)
{
    *w = (ckpt_writer){.f = f};
    if (sections < 1 || sections > CKPT_MAX_SECTIONS) {
        w->failed = true;
        return;
    }
    w->promised = sections;
    static const unsigned char zeros[CKPT_ENTRY_BYTES] = {0};
    const uint64_t hb = header_bytes(sections);
    for (uint64_t done = 0; done < hb;) {
        size_t n = hb - done < sizeof zeros ? (size_t)(hb - done) : sizeof zeros;
        if (fwrite(zeros, 1, n, f) != n) w->failed = true;
        done += n;
    }
    w->pos = hb;
}

void ckpt_section(ckpt_writer *w, uint32_t id, uint32_t flags)
{
    const int i = w->count;
    if (i >= w->promised) {
        w->failed = true;
        return;
    }
    w->sec[i].id = id;
    w->sec[i].flags = flags;
    w->sec[i].offset = w->pos;
    w->sec[i].length = 0;
    w->sec[i].crc = 0;
    w->count = i + 1;
    w->open = true;
}

void ckpt_put_bytes(ckpt_writer *w, const void *p, size_t len)
{
    if (!w->open || w->failed) {
        w->failed = true;
        return;
    }
    if (len == 0) return;
    if (fwrite(p, 1, len, w->f) != len) w->failed = true;
    int i = w->count - 1;
    w->sec[i].crc = ckpt_crc32(w->sec[i].crc, p, len);
    w->sec[i].length += len;
    w->pos += len;
}

void ckpt_put_floats(ckpt_writer *w, const float *x, size_t count)
{
    unsigned char buf[4096];
    while (count > 0) {
        size_t n = count < sizeof buf / 4 ? count : sizeof buf / 4;
        for (size_t i = 0; i < n; i++) le_put_f32(buf + 4 * i, x[i]);
        ckpt_put_bytes(w, buf, 4 * n);
        x += n;
        count -= n;
    }
}

void ckpt_put_meta(ckpt_writer *w, const ckpt_meta *m)
{
    unsigned char b[CKPT_META_BYTES];
    le_put_u64(b + 0, m->definition_hash);
    le_put_u32(b + 8, m->num_layers);
    le_put_u32(b + 12, m->optimizer);
    le_put_u32(b + 16, m->loss);
    le_put_u32(b + 20, m->ranks);
    le_put_u64(b + 24, m->num_params);
    le_put_u64(b + 32, m->seed);
    le_put_u64(b + 40, m->step);
    le_put_u64(b + 48, m->bn_floats);
    le_put_f64(b + 56, m->learning_rate);
    le_put_f64(b + 64, m->momentum);
    le_put_f64(b + 72, m->weight_decay);
    le_put_f64(b + 80, m->beta1);
    le_put_f64(b + 88, m->beta2);
    le_put_f64(b + 96, m->epsilon);
    le_put_u64(b + 104, m->warmup_steps);
    le_put_u64(b + 112, m->decay_every_steps);
    le_put_f64(b + 120, m->decay_factor);
    ckpt_put_bytes(w, b, sizeof b);
}

void ckpt_put_layer(ckpt_writer *w, const ckpt_layer *l)
{
    unsigned char b[CKPT_LAYER_BYTES] = {0};
    le_put_u64(b + 0, l->hash);
    le_put_u64(b + 8, l->num_params);
    le_put_u32(b + 16, l->c);
    le_put_u32(b + 20, l->h);
    le_put_u32(b + 24, l->w);
    /* b + 28: reserved, zero */
    size_t n = strnlen(l->kind, CKPT_KIND_BYTES);
    memcpy(b + 32, l->kind, n);
    ckpt_put_bytes(w, b, sizeof b);
}

bool ckpt_finish(ckpt_writer *w)
{
    if (w->failed || w->count < 1 || w->count != w->promised) return false;
    unsigned char h[CKPT_HEADER_FIXED + CKPT_MAX_SECTIONS * CKPT_ENTRY_BYTES + 4] = {0};
    const uint64_t hb = header_bytes(w->count);
    memcpy(h, CKPT_MAGIC, 8);
    le_put_u32(h + 8, CKPT_VERSION);
    le_put_u32(h + 12, (uint32_t)hb);
    le_put_u32(h + 16, (uint32_t)w->count);
    le_put_u32(h + 20, 0); /* flags: none defined */
    le_put_u64(h + 24, w->pos);
    for (int i = 0; i < w->count; i++) {
        unsigned char *e = h + CKPT_HEADER_FIXED + (size_t)i * CKPT_ENTRY_BYTES;
        le_put_u32(e + 0, w->sec[i].id);
        le_put_u32(e + 4, w->sec[i].flags);
        le_put_u64(e + 8, w->sec[i].offset);
        le_put_u64(e + 16, w->sec[i].length);
        le_put_u32(e + 24, w->sec[i].crc);
        /* e + 28: reserved, zero */
    }
    le_put_u32(h + hb - 4, ckpt_crc32(0, h, (size_t)hb - 4));
    if (fseek(w->f, 0, SEEK_SET) != 0) return false;
    if (fwrite(h, 1, (size_t)hb, w->f) != hb) return false;
    return fseek(w->f, 0, SEEK_END) == 0;
}

/* ------------------------------------------------------------------ */
/* Parser                                                               */
/* ------------------------------------------------------------------ */

static const char *section_name(uint32_t id)
{
    switch (id) {
    case CKPT_SEC_META: return "meta";
    case CKPT_SEC_LAYERS: return "layers";
    case CKPT_SEC_PARAMS: return "parameters";
    case CKPT_SEC_OPTIM_M: return "optimizer m";
    case CKPT_SEC_OPTIM_V: return "optimizer v";
    case CKPT_SEC_BN_STATS: return "batch-norm statistics";
    case CKPT_SEC_EXTRA: return "scheduler state";
    }
    return "unknown";
}

static void decode_meta(const unsigned char *b, ckpt_meta *m)
{
    m->definition_hash = le_get_u64(b + 0);
    m->num_layers = le_get_u32(b + 8);
    m->optimizer = le_get_u32(b + 12);
    m->loss = le_get_u32(b + 16);
    m->ranks = le_get_u32(b + 20);
    m->num_params = le_get_u64(b + 24);
    m->seed = le_get_u64(b + 32);
    m->step = le_get_u64(b + 40);
    m->bn_floats = le_get_u64(b + 48);
    m->learning_rate = le_get_f64(b + 56);
    m->momentum = le_get_f64(b + 64);
    m->weight_decay = le_get_f64(b + 72);
    m->beta1 = le_get_f64(b + 80);
    m->beta2 = le_get_f64(b + 88);
    m->epsilon = le_get_f64(b + 96);
    m->warmup_steps = le_get_u64(b + 104);
    m->decay_every_steps = le_get_u64(b + 112);
    m->decay_factor = le_get_f64(b + 120);
}

void ckpt_layer_at(const ckpt_view *v, uint32_t i, ckpt_layer *out)
{
    const unsigned char *b = v->layers + (size_t)i * CKPT_LAYER_BYTES;
    out->hash = le_get_u64(b + 0);
    out->num_params = le_get_u64(b + 8);
    out->c = le_get_u32(b + 16);
    out->h = le_get_u32(b + 20);
    out->w = le_get_u32(b + 24);
    memcpy(out->kind, b + 32, CKPT_KIND_BYTES);
    out->kind[CKPT_KIND_BYTES] = '\0';
}

/* The options of META, each checked against its row of the option table
 * (graph/option_table.c), the ranges pcnn_net_set_option enforces.
 * Counts must also be exact doubles, as every count set_option can set is.
 * Writes why into `why` and returns false for the first one out of range. */
static bool option_field_ok(pcnn_option option, const char *field, double value, uint64_t count,
                            bool is_count, char *why, size_t size)
{
    const option_row *r = option_row_of(option);
    /* A count's range is compared exactly (the rows of counts have integral
     * bounds below 2^63): 2^53 + 1 is out of range, not merely inexact. */
    const bool in_range = r && option_in_range(r, value) &&
                          (!is_count || (count >= (uint64_t)r->lo && count <= (uint64_t)r->hi));
    const bool exact = !is_count || !in_range || (uint64_t)value == count;
    if (in_range && exact) return true;
    char shown[32], range[96] = "values of its range";
    if (is_count) snprintf(shown, sizeof shown, "%llu", (unsigned long long)count);
    else snprintf(shown, sizeof shown, "%.17g", value);
    if (r && r->integer)
        snprintf(range, sizeof range, "integers in [%.0f, %.0f]", r->lo, r->hi);
    else if (r && isinf(r->hi))
        snprintf(range, sizeof range, "finite values %s %g", r->lo_open ? ">" : ">=", r->lo);
    else if (r)
        snprintf(range, sizeof range, "values in %c%g, %g%c", r->lo_open ? '(' : '[', r->lo,
                 r->hi, r->hi_open ? ')' : ']');
    snprintf(why, size, "meta field %s = %s is %s: %s takes %s", field, shown,
             !in_range ? "out of range" : "not exactly a double (no set_option call sets it)",
             r ? r->name : "the option", range);
    return false;
}

static bool options_ok(const ckpt_meta *m, char *why, size_t size)
{
    const struct {
        pcnn_option option;
        const char *field;
        double value;
        uint64_t count;
        bool is_count;
    } fields[] = {
        {PCNN_OPT_LEARNING_RATE, "learning_rate", m->learning_rate, 0, false},
        {PCNN_OPT_MOMENTUM, "momentum", m->momentum, 0, false},
        {PCNN_OPT_WEIGHT_DECAY, "weight_decay", m->weight_decay, 0, false},
        {PCNN_OPT_ADAM_BETA1, "beta1", m->beta1, 0, false},
        {PCNN_OPT_ADAM_BETA2, "beta2", m->beta2, 0, false},
        {PCNN_OPT_ADAM_EPSILON, "epsilon", m->epsilon, 0, false},
        {PCNN_OPT_DECAY_FACTOR, "decay_factor", m->decay_factor, 0, false},
        {PCNN_OPT_WARMUP_STEPS, "warmup_steps", (double)m->warmup_steps, m->warmup_steps, true},
        {PCNN_OPT_DECAY_EVERY_STEPS, "decay_every_steps", (double)m->decay_every_steps,
         m->decay_every_steps, true},
        {PCNN_OPT_SEED, "seed", (double)m->seed, m->seed, true},
        {PCNN_OPT_STEP, "step", (double)m->step, m->step, true},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (!option_field_ok(fields[i].option, fields[i].field, fields[i].value, fields[i].count,
                             fields[i].is_count, why, size))
            return false;
    return true;
}

/* Section `s` must hold exactly count * unit bytes (overflow-safe). */
static bool holds(size_t bytes, uint64_t count, size_t unit)
{
    return count <= bytes / unit && bytes == count * unit;
}

static pcnn_status check_sections(const ckpt_view *v, const size_t *lens, const char *func)
{
    const ckpt_meta *m = &v->meta;
    if (m->optimizer > PCNN_OPTIMIZER_ADAM)
        return error_set(PCNN_ERR_UNSUPPORTED, func, "optimizer kind %u is unknown to this "
                         "libpcnn", m->optimizer);
    if (m->loss > PCNN_LOSS_BCE_WITH_LOGITS)
        return error_set(PCNN_ERR_UNSUPPORTED, func, "loss kind %u is unknown to this libpcnn",
                         m->loss);
    if (m->ranks == 0 || m->num_layers == 0)
        return error_set(PCNN_ERR_CORRUPT, func, "meta section: %u ranks, %u layers",
                         m->ranks, m->num_layers);
    if (!holds(lens[CKPT_SEC_LAYERS], m->num_layers, CKPT_LAYER_BYTES))
        return error_set(PCNN_ERR_CORRUPT, func, "layers section holds %zu bytes, not %u "
                         "records of %d", lens[CKPT_SEC_LAYERS], m->num_layers, CKPT_LAYER_BYTES);
    if (!holds(lens[CKPT_SEC_PARAMS], m->num_params, 4))
        return error_set(PCNN_ERR_CORRUPT, func, "parameters section holds %zu bytes, not "
                         "%llu floats", lens[CKPT_SEC_PARAMS],
                         (unsigned long long)m->num_params);
    const bool want_m = m->optimizer != PCNN_OPTIMIZER_SGD;
    const bool want_v = m->optimizer == PCNN_OPTIMIZER_ADAM;
    const struct {
        uint32_t id;
        const unsigned char *p;
        bool want;
    } state[2] = {{CKPT_SEC_OPTIM_M, v->m, want_m}, {CKPT_SEC_OPTIM_V, v->v, want_v}};
    for (int k = 0; k < 2; k++) {
        if (state[k].want != (state[k].p != NULL))
            return error_set(PCNN_ERR_CORRUPT, func, "%s section %s for optimizer kind %u",
                             section_name(state[k].id), state[k].want ? "missing" : "unexpected",
                             m->optimizer);
        if (state[k].p && !holds(lens[state[k].id], m->num_params, 4))
            return error_set(PCNN_ERR_CORRUPT, func, "%s section holds %zu bytes, not %llu "
                             "floats", section_name(state[k].id), lens[state[k].id],
                             (unsigned long long)m->num_params);
    }
    if ((m->bn_floats > 0) != (v->bn != NULL))
        return error_set(PCNN_ERR_CORRUPT, func, "batch-norm section %s for %llu statistics",
                         v->bn ? "unexpected" : "missing", (unsigned long long)m->bn_floats);
    if (v->bn && !(m->bn_floats <= lens[CKPT_SEC_BN_STATS] / 4 / m->ranks &&
                   lens[CKPT_SEC_BN_STATS] == m->bn_floats * 4 * m->ranks))
        return error_set(PCNN_ERR_CORRUPT, func, "batch-norm section holds %zu bytes, not %u "
                         "ranks x %llu floats", lens[CKPT_SEC_BN_STATS], m->ranks,
                         (unsigned long long)m->bn_floats);
    char why[256];
    if (!options_ok(m, why, sizeof why)) return error_set(PCNN_ERR_CORRUPT, func, "%s", why);
    uint64_t total = 0;
    for (uint32_t i = 0; i < m->num_layers; i++) {
        ckpt_layer l;
        ckpt_layer_at(v, i, &l);
        const unsigned char *rec = v->layers + (size_t)i * CKPT_LAYER_BYTES;
        bool text = l.kind[0] != '\0';
        for (int k = 0; k < CKPT_KIND_BYTES && l.kind[k]; k++)
            text = text && l.kind[k] >= 0x21 && l.kind[k] <= 0x7e;
        for (size_t k = strlen(l.kind); k < CKPT_KIND_BYTES; k++) text = text && !l.kind[k];
        if (!text || le_get_u32(rec + 28) != 0 || l.num_params > m->num_params - total)
            return error_set(PCNN_ERR_CORRUPT, func, "layers section: record %u is malformed", i);
        total += l.num_params;
    }
    if (total != m->num_params)
        return error_set(PCNN_ERR_CORRUPT, func, "layers hold %llu parameters, meta says %llu",
                         (unsigned long long)total, (unsigned long long)m->num_params);
    return PCNN_OK;
}

/* ------------------------------------------------------------------ */
/* Values                                                               */
/* ------------------------------------------------------------------ */

/* The first of `count` f32 values at p that is not finite, or (nonneg)
 * negative; count if none.  -0 counts as non-negative. */
static size_t first_bad(const unsigned char *p, size_t count, bool nonneg)
{
    for (size_t i = 0; i < count; i++) {
        float x = le_get_f32(p + 4 * i);
        if (!isfinite(x) || (nonneg && x < 0.0f)) return i;
    }
    return count;
}

/* Where flat parameter `index` lives: "layer L (kind), its value J". */
static void locate_param(const ckpt_view *v, uint64_t index, char *out, size_t size)
{
    uint64_t first = 0;
    for (uint32_t i = 0; i < v->meta.num_layers; i++) {
        ckpt_layer l;
        ckpt_layer_at(v, i, &l);
        if (index < first + l.num_params) {
            snprintf(out, size, "layer %u (%s), its value %llu", i, l.kind,
                     (unsigned long long)(index - first));
            return;
        }
        first += l.num_params;
    }
    snprintf(out, size, "no layer");
}

/* Parameters and optimizer state: finite; Adam's second moment also >= 0. */
static pcnn_status check_param_runs(const ckpt_view *v, const char *func)
{
    const struct {
        const unsigned char *p;
        const char *field;
        bool nonneg;
    } runs[] = {
        {v->params, "parameters", false},
        {v->m, v->meta.optimizer == PCNN_OPTIMIZER_ADAM ? "optimizer m (Adam's first moment)"
                                                        : "optimizer m (momentum buffer)", false},
        {v->v, "optimizer v (Adam's second moment)", true},
    };
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        if (!runs[k].p) continue;
        size_t bad = first_bad(runs[k].p, v->meta.num_params, runs[k].nonneg);
        if (bad == v->meta.num_params) continue;
        char where[96];
        locate_param(v, bad, where, sizeof where);
        return error_set(PCNN_ERR_CORRUPT, func, "%s section: value %zu (%s) is %g; it must be "
                         "finite%s", runs[k].field, bad, where, (double)le_get_f32(runs[k].p + 4 * bad),
                         runs[k].nonneg ? " and >= 0" : "");
    }
    return PCNN_OK;
}

/* Batch-norm statistics: per saving rank, per batch-norm layer, running
 * mean[C] (finite) then running variance[C] (finite, >= 0).  The layer
 * kinds that keep running statistics: "batchnorm" alone. */
static pcnn_status check_bn(const ckpt_view *v, const char *func)
{
    if (!v->bn) return PCNN_OK;
    uint64_t per_rank = 0;
    for (uint32_t i = 0; i < v->meta.num_layers; i++) {
        ckpt_layer l;
        ckpt_layer_at(v, i, &l);
        if (strcmp(l.kind, "batchnorm") == 0) per_rank += 2 * (uint64_t)l.c;
    }
    if (per_rank != v->meta.bn_floats)
        return error_set(PCNN_ERR_CORRUPT, func, "meta field bn_floats = %llu, but the "
                         "batch-norm layers keep %llu running statistics",
                         (unsigned long long)v->meta.bn_floats, (unsigned long long)per_rank);
    const unsigned char *p = v->bn;
    for (uint32_t r = 0; r < v->meta.ranks; r++)
        for (uint32_t i = 0; i < v->meta.num_layers; i++) {
            ckpt_layer l;
            ckpt_layer_at(v, i, &l);
            if (strcmp(l.kind, "batchnorm") != 0) continue;
            for (int half = 0; half < 2; half++, p += 4 * (size_t)l.c) {
                size_t bad = first_bad(p, l.c, half == 1);
                if (bad < l.c)
                    return error_set(PCNN_ERR_CORRUPT, func, "batch-norm statistics section: "
                                     "rank %u, layer %u (batchnorm), running %s of channel %zu "
                                     "is %g; it must be finite%s", r, i,
                                     half ? "variance" : "mean", bad,
                                     (double)le_get_f32(p + 4 * bad), half ? " and >= 0" : "");
            }
        }
    return PCNN_OK;
}

pcnn_status ckpt_parse(const unsigned char *buf, size_t len, const char *func, ckpt_view *out)
{
    *out = (ckpt_view){0};
    if (!buf || len < CKPT_PREFIX_BYTES)
        return error_set(PCNN_ERR_CORRUPT, func, "truncated: %zu bytes, shorter than the "
                         "%d-byte header prefix", len, CKPT_PREFIX_BYTES);
    if (memcmp(buf, CKPT_MAGIC, 8) != 0)
        return error_set(PCNN_ERR_CORRUPT, func, "not a libpcnn checkpoint (bad magic)");
    const uint32_t version = le_get_u32(buf + 8), hb = le_get_u32(buf + 12);
    if (hb < CKPT_PREFIX_BYTES + 4 || hb > len)
        return error_set(PCNN_ERR_CORRUPT, func, "truncated or damaged header: %u header "
                         "bytes in a %zu-byte file", hb, len);
    if (le_get_u32(buf + hb - 4) != ckpt_crc32(0, buf, hb - 4))
        return error_set(PCNN_ERR_CORRUPT, func, "header checksum mismatch");
    /* The header is intact: an unknown version is a newer file, not damage. */
    if (version < 1 || version > CKPT_VERSION)
        return error_set(PCNN_ERR_UNSUPPORTED, func, "format version %u; this libpcnn reads "
                         "versions 1 to %u", version, CKPT_VERSION);
    const uint32_t sections = hb >= CKPT_HEADER_FIXED ? le_get_u32(buf + 16) : 0;
    if (sections == 0 || sections > CKPT_MAX_SECTIONS ||
        hb != CKPT_HEADER_FIXED + sections * CKPT_ENTRY_BYTES + 4)
        return error_set(PCNN_ERR_CORRUPT, func, "section table: %u sections in a %u-byte "
                         "header", sections, hb);
    /* No header flag is defined: one set is a newer writer's, whose meaning
     * this reader cannot honour (the header checksum held: not damage). */
    if (hb >= CKPT_HEADER_FIXED && le_get_u32(buf + 20) != 0)
        return error_set(PCNN_ERR_UNSUPPORTED, func, "header flags 0x%x: none is known to "
                         "this libpcnn", le_get_u32(buf + 20));
    const uint64_t file_bytes = le_get_u64(buf + 24);
    if (file_bytes > len)
        return error_set(PCNN_ERR_CORRUPT, func, "truncated: %zu of %llu bytes", len,
                         (unsigned long long)file_bytes);
    if (file_bytes < len)
        return error_set(PCNN_ERR_CORRUPT, func, "%llu trailing bytes after the checkpoint",
                         (unsigned long long)(len - file_bytes));
    const unsigned char *where[CKPT_SEC_EXTRA + 1] = {0};
    size_t lens[CKPT_SEC_EXTRA + 1] = {0};
    uint64_t pos = hb;
    for (uint32_t i = 0; i < sections; i++) {
        const unsigned char *e = buf + CKPT_HEADER_FIXED + (size_t)i * CKPT_ENTRY_BYTES;
        const uint32_t id = le_get_u32(e), flags = le_get_u32(e + 4);
        const uint64_t offset = le_get_u64(e + 8), length = le_get_u64(e + 16);
        if (offset != pos || length > len - pos || le_get_u32(e + 28) != 0)
            return error_set(PCNN_ERR_CORRUPT, func, "section table entry %u (%s): offset "
                             "%llu, %llu bytes in a %zu-byte file", i, section_name(id),
                             (unsigned long long)offset, (unsigned long long)length, len);
        if (le_get_u32(e + 24) != ckpt_crc32(0, buf + pos, (size_t)length))
            return error_set(PCNN_ERR_CORRUPT, func, "section %u (%s): checksum mismatch", i,
                             section_name(id));
        pos += length;
        if (id == 0 || id > CKPT_SEC_EXTRA) {
            if (flags & CKPT_FLAG_REQUIRED)
                return error_set(PCNN_ERR_UNSUPPORTED, func, "required section id %u is "
                                 "unknown to this libpcnn", id);
            continue; /* optional and unknown: skipped */
        }
        if (where[id])
            return error_set(PCNN_ERR_CORRUPT, func, "section %s appears twice",
                             section_name(id));
        where[id] = buf + offset;
        lens[id] = (size_t)length;
    }
    if (pos != len)
        return error_set(PCNN_ERR_CORRUPT, func, "%llu bytes after the last section",
                         (unsigned long long)(len - pos));
    for (uint32_t id = CKPT_SEC_META; id <= CKPT_SEC_PARAMS; id++)
        if (!where[id])
            return error_set(PCNN_ERR_CORRUPT, func, "%s section missing", section_name(id));
    if (lens[CKPT_SEC_META] != CKPT_META_BYTES)
        return error_set(PCNN_ERR_CORRUPT, func, "meta section of %zu bytes, not %d",
                         lens[CKPT_SEC_META], CKPT_META_BYTES);
    ckpt_view v = {.version = version};
    decode_meta(where[CKPT_SEC_META], &v.meta);
    v.layers = where[CKPT_SEC_LAYERS];
    v.params = where[CKPT_SEC_PARAMS];
    v.m = where[CKPT_SEC_OPTIM_M];
    v.v = where[CKPT_SEC_OPTIM_V];
    v.bn = where[CKPT_SEC_BN_STATS];
    v.extra = where[CKPT_SEC_EXTRA];
    v.extra_bytes = lens[CKPT_SEC_EXTRA];
    TRY(check_sections(&v, lens, func));
    TRY(check_param_runs(&v, func));
    TRY(check_bn(&v, func));
    *out = v;
    return PCNN_OK;
}

/* ------------------------------------------------------------------ */
/* Does it fit the network?                                             */
/* ------------------------------------------------------------------ */

static const char *optimizer_name(uint32_t k)
{
    static const char *names[] = {"SGD", "momentum", "Adam"};
    return k <= PCNN_OPTIMIZER_ADAM ? names[k] : "unknown";
}

static const char *loss_name(uint32_t k)
{
    static const char *names[] = {"softmax cross entropy", "MSE", "L1", "BCE on logits"};
    return k <= PCNN_LOSS_BCE_WITH_LOGITS ? names[k] : "unknown";
}

static pcnn_status layer_differs(uint32_t i, const ckpt_layer *f, const ckpt_layer *n,
                                 const char *func)
{
    if (strcmp(f->kind, n->kind) != 0 || f->c != n->c || f->h != n->h || f->w != n->w ||
        f->num_params != n->num_params)
        return error_set(PCNN_ERR_MISMATCH, func, "layer %u differs: the file has %s with "
                         "output %ux%ux%u and %llu parameters, this network %s with output "
                         "%ux%ux%u and %llu parameters", i, f->kind, f->c, f->h, f->w,
                         (unsigned long long)f->num_params, n->kind, n->c, n->h, n->w,
                         (unsigned long long)n->num_params);
    /* The records carry no depth; the hash does. */
    return error_set(PCNN_ERR_MISMATCH, func, "layer %u (%s) differs in its configuration "
                     "(kernel, stride, padding, bias, rate, ...), its output depth, its "
                     "inputs, or in being the network's output", i, n->kind);
}

pcnn_status ckpt_verify(const ckpt_view *v, const ckpt_expect *e, const char *func)
{
    const ckpt_meta *m = &v->meta;
    const uint32_t common = m->num_layers < e->num_layers ? m->num_layers : e->num_layers;
    for (uint32_t i = 0; i < common; i++) {
        ckpt_layer f;
        ckpt_layer_at(v, i, &f);
        /* The hash and the record both: a record edited under a kept hash (a
         * kind, a parameter count moved to the next layer) is refused too. */
        const ckpt_layer *n = &e->layers[i];
        if (f.hash != n->hash || strcmp(f.kind, n->kind) != 0 || f.c != n->c || f.h != n->h ||
            f.w != n->w || f.num_params != n->num_params)
            return layer_differs(i, &f, n, func);
    }
    if (m->num_layers != e->num_layers)
        return error_set(PCNN_ERR_MISMATCH, func, "the file's network has %u layers, this one "
                         "%u (the first %u agree)", m->num_layers, e->num_layers, common);
    if (m->loss != e->loss)
        return error_set(PCNN_ERR_MISMATCH, func, "loss differs: the file was trained with %s, "
                         "this network uses %s", loss_name(m->loss), loss_name(e->loss));
    if (m->optimizer != e->optimizer)
        return error_set(PCNN_ERR_MISMATCH, func, "optimizer differs: the file holds %s state, "
                         "this network uses %s", optimizer_name(m->optimizer),
                         optimizer_name(e->optimizer));
    if (m->seed != e->seed)
        return error_set(PCNN_ERR_MISMATCH, func, "seed differs: the file was trained with "
                         "seed %llu, this network has %llu (set PCNN_OPT_SEED before finalize: "
                         "dropout masks depend on it)", (unsigned long long)m->seed,
                         (unsigned long long)e->seed);
    if (m->num_params != e->num_params || m->bn_floats != e->bn_floats ||
        m->definition_hash != e->definition_hash)
        return error_set(PCNN_ERR_MISMATCH, func, "network definition differs (hash %016llx in "
                         "the file, %016llx here; %llu and %llu parameters)",
                         (unsigned long long)m->definition_hash,
                         (unsigned long long)e->definition_hash,
                         (unsigned long long)m->num_params, (unsigned long long)e->num_params);
    return PCNN_OK;
}
