/* libFuzzer harness for the checkpoint parser (lib/io/checkpoint_format.c),
 * the code that reads untrusted bytes.  Each input is parsed twice: as
 * is, and with its checksums recomputed wherever the section table points
 * inside the input, so that mutations also reach the checks behind the
 * CRCs (sizes, counts, ranges).  When it parses, every section is decoded
 * and the file is verified against two expectations (its own description,
 * and a different one), so the mismatch paths run too.  Any crash,
 * sanitizer report, over-read or broken invariant (trap) is a bug.
 *
 * Seeds: tests/checkpoint/corpus, one pair of files per format version
 * (test_checkpoint corpus DIR writes the current version's).
 *
 * clang -g -O1 -fsanitize=fuzzer,address,undefined -I/usr/include/x86_64-linux-gnu/mpich \
 *   -Iinclude -Ilib tests/checkpoint/fuzz_checkpoint.c lib/io/checkpoint_format.c \
 *   lib/core/error.c -lz -lm -o fuzz_checkpoint && \
 *   ./fuzz_checkpoint -max_total_time=60 tests/checkpoint/corpus */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/le.h"
#include "io/checkpoint_format.h"
#include "pcnn.h"

#define EXPECT(cond)                   \
    do {                               \
        if (!(cond)) __builtin_trap(); \
    } while (0)

static int inside(const unsigned char *p, size_t n, const unsigned char *buf, size_t len)
{
    return p >= buf && n <= len && (size_t)(p - buf) <= len - n;
}

/* Recompute section and header CRCs where the table allows it. */
static void fix_checksums(unsigned char *buf, size_t len)
{
    if (len < CKPT_HEADER_FIXED) return;
    uint32_t hb = le_get_u32(buf + 12), n = le_get_u32(buf + 16);
    if (hb < CKPT_PREFIX_BYTES + 4 || hb > len) return;
    for (uint32_t i = 0; i < n && i < CKPT_MAX_SECTIONS; i++) {
        size_t at = CKPT_HEADER_FIXED + (size_t)i * CKPT_ENTRY_BYTES;
        if (at + CKPT_ENTRY_BYTES > hb - 4) break;
        uint64_t off = le_get_u64(buf + at + 8), length = le_get_u64(buf + at + 16);
        if (off <= len && length <= len - off)
            le_put_u32(buf + at + 24, ckpt_crc32(0, buf + off, (size_t)length));
    }
    le_put_u32(buf + hb - 4, ckpt_crc32(0, buf, hb - 4));
}

static void one(unsigned char *buf, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A private copy, exactly `size` bytes long: ASan sees any over-read. */
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    one(buf, size);
    memcpy(buf, data, size);
    fix_checksums(buf, size);
    one(buf, size);
    free(buf);
    return 0;
}

static void one(unsigned char *buf, size_t size)
{
    ckpt_view v;
    pcnn_status st = ckpt_parse(buf, size, "fuzz", &v);
    EXPECT(st == PCNN_OK || st == PCNN_ERR_CORRUPT || st == PCNN_ERR_UNSUPPORTED);
    if (st != PCNN_OK) return;
    const ckpt_meta *m = &v.meta;
    EXPECT(v.version >= 1 && v.version <= CKPT_VERSION && v.version == le_get_u32(buf + 8));
    /* Every section lies inside the buffer, sized as META says. */
    EXPECT(inside(v.layers, (size_t)m->num_layers * CKPT_LAYER_BYTES, buf, size));
    EXPECT(m->num_params <= size / 4 && inside(v.params, 4 * m->num_params, buf, size));
    if (v.m) EXPECT(inside(v.m, 4 * m->num_params, buf, size));
    if (v.v) EXPECT(inside(v.v, 4 * m->num_params, buf, size));
    if (v.bn) EXPECT(inside(v.bn, 4 * m->bn_floats * m->ranks, buf, size));
    if (v.extra) EXPECT(inside(v.extra, v.extra_bytes, buf, size));

    /* Decode everything the loader would. */
    float *w = malloc(4 * m->num_params + 4);
    ckpt_layer *layers = malloc((size_t)m->num_layers * sizeof *layers + 1);
    EXPECT(w && layers);
    ckpt_decode_floats(v.params, w, m->num_params);
    if (v.m) ckpt_decode_floats(v.m, w, m->num_params);
    if (v.v) ckpt_decode_floats(v.v, w, m->num_params);
    uint64_t total = 0;
    for (uint32_t i = 0; i < m->num_layers; i++) {
        ckpt_layer_at(&v, i, &layers[i]);
        EXPECT(strlen(layers[i].kind) <= CKPT_KIND_BYTES);
        total += layers[i].num_params;
    }
    EXPECT(total == m->num_params);

    /* Its own description fits; another network does not. */
    ckpt_expect e = {.definition_hash = m->definition_hash, .num_params = m->num_params,
                     .seed = m->seed, .bn_floats = m->bn_floats, .num_layers = m->num_layers,
                     .optimizer = m->optimizer, .loss = m->loss, .layers = layers};
    EXPECT(ckpt_verify(&v, &e, "fuzz") == PCNN_OK);
    e.num_layers = m->num_layers > 1 ? m->num_layers - 1 : 1;
    e.seed ^= 1;
    if (m->num_layers > 0) layers[0].hash ^= 1;
    EXPECT(ckpt_verify(&v, &e, "fuzz") == PCNN_ERR_MISMATCH);
    free(layers);
    free(w);
}
