/* lib/core/hash (FNV-1a 64) and lib/core/le (little-endian codec) against
 * references written here from the published definitions: FNV-1a's own
 * loop with the constants in decimal, its published test vectors, and
 * byte strings spelled out by hand.  Prints every failure; nonzero exit if
 * there was one. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../common/expect.h"
#include "core/hash.h"
#include "core/le.h"

/* FNV-1a 64 as published: offset basis 14695981039346656037, prime
 * 1099511628211; for each byte, xor then multiply (mod 2^64). */
static uint64_t ref_fnv1a(const unsigned char *p, size_t n)
{
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

static void test_vectors(void)
{
    EXPECT(HASH_FNV1A_BASIS == 14695981039346656037ull, "basis %llx",
           (unsigned long long)HASH_FNV1A_BASIS);
    EXPECT(HASH_FNV1A_PRIME == 1099511628211ull, "prime %llx",
           (unsigned long long)HASH_FNV1A_PRIME);
    static const struct {
        const char *text;
        uint64_t hash;
    } published[] = {{"", 0xcbf29ce484222325ull},
                     {"a", 0xaf63dc4c8601ec8cull},
                     {"foobar", 0x85944171f73967e8ull}};
    for (size_t i = 0; i < sizeof published / sizeof *published; i++) {
        const char *t = published[i].text;
        uint64_t lib = hash_fnv1a(HASH_FNV1A_BASIS, t, strlen(t));
        uint64_t ref = ref_fnv1a((const unsigned char *)t, strlen(t));
        EXPECT(lib == published[i].hash && ref == published[i].hash,
               "FNV-1a 64 of \"%s\": lib %016llx, reference %016llx, published %016llx", t,
               (unsigned long long)lib, (unsigned long long)ref,
               (unsigned long long)published[i].hash);
    }
    EXPECT(hash_fnv1a(HASH_FNV1A_BASIS, NULL, 0) == HASH_FNV1A_BASIS, "no bytes: the basis");
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Records like the checkpoint's layer hashes: a NUL-terminated kind and
 * configuration, then numbers.  The library hashes them piece by piece
 * (hash_fnv1a_u64 for numbers); the reference lays the record out as bytes,
 * numbers as 8 little-endian bytes by division, and hashes it at once. */
static void test_records(void)
{
    static const char *kinds[] = {"input", "conv2d", "batchnorm", "dense", "dropout", ""};
    int bad = 0;
    for (int r = 0; r < 500; r++) {
        const char *kind = kinds[next_u64() % 6];
        char config[40];
        const size_t config_len = next_u64() % 30;
        for (size_t i = 0; i < config_len; i++) config[i] = (char)(0x20 + next_u64() % 95);
        config[config_len] = '\0';
        uint64_t numbers[9];
        const int count = (int)(next_u64() % 10);
        for (int i = 0; i < count; i++)
            numbers[i] = i % 3 == 0 ? next_u64() : i % 3 == 1 ? next_u64() % 300 : UINT64_MAX - i;

        uint64_t lib = hash_fnv1a(HASH_FNV1A_BASIS, kind, strlen(kind) + 1);
        lib = hash_fnv1a(lib, config, strlen(config) + 1);
        for (int i = 0; i < count; i++) lib = hash_fnv1a_u64(lib, numbers[i]);

        unsigned char bytes[128];
        size_t n = 0;
        memcpy(bytes + n, kind, strlen(kind) + 1);
        n += strlen(kind) + 1;
        memcpy(bytes + n, config, config_len + 1);
        n += config_len + 1;
        for (int i = 0; i < count; i++) {
            uint64_t v = numbers[i];
            for (int k = 0; k < 8; k++, v /= 256) bytes[n++] = (unsigned char)(v % 256);
        }
        const uint64_t ref = ref_fnv1a(bytes, n);
        /* Feeding in two pieces at any split equals feeding at once. */
        const size_t split = (size_t)(next_u64() % (n + 1));
        const uint64_t two = hash_fnv1a(hash_fnv1a(HASH_FNV1A_BASIS, bytes, split),
                                        bytes + split, n - split);
        if ((lib != ref || two != ref) && bad++ < 3)
            printf("FAIL record %d (%s, \"%s\", %d numbers): lib %016llx, split at %zu "
                   "%016llx, reference %016llx\n", r, kind, config, count,
                   (unsigned long long)lib, split, (unsigned long long)two,
                   (unsigned long long)ref);
    }
    EXPECT(bad == 0, "%d of 500 records hash differently from the reference", bad);
}

/* Put writes exactly the spelled-out bytes (at an odd offset: no
 * alignment needed) and nothing around them; get reads the value back. */
static int bytes_are(const unsigned char *buf, const unsigned char *want, size_t n)
{
    return buf[0] == 0xaa && memcmp(buf + 1, want, n) == 0 && buf[1 + n] == 0xaa;
}

static void test_codec(void)
{
    unsigned char buf[16];
#define ENCODES(type, value, ...)                                                         \
    do {                                                                                  \
        static const unsigned char want_[] = {__VA_ARGS__};                               \
        memset(buf, 0xaa, sizeof buf);                                                    \
        le_put_##type(buf + 1, value);                                                    \
        EXPECT(bytes_are(buf, want_, sizeof want_), "le_put_" #type "(" #value ") bytes"); \
        EXPECT(le_get_##type(buf + 1) == (value), "le_get_" #type " of " #value);        \
    } while (0)
    ENCODES(u16, 0x0102, 0x02, 0x01);
    ENCODES(u16, 0xfffe, 0xfe, 0xff);
    ENCODES(u32, 0x01020304u, 0x04, 0x03, 0x02, 0x01);
    ENCODES(u32, 0xdeadbeefu, 0xef, 0xbe, 0xad, 0xde);
    ENCODES(u64, 0x0102030405060708ull, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01);
    ENCODES(u64, UINT64_MAX, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff);
    ENCODES(i32, -2, 0xfe, 0xff, 0xff, 0xff);
    ENCODES(i32, INT32_MIN, 0x00, 0x00, 0x00, 0x80);
    ENCODES(i32, INT32_MAX, 0xff, 0xff, 0xff, 0x7f);
    ENCODES(i32, 300, 0x2c, 0x01, 0x00, 0x00);
    ENCODES(i64, -1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff);
    ENCODES(i64, INT64_MIN, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80);
    ENCODES(i64, -4294967296ll, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff);
    ENCODES(f32, 1.0f, 0x00, 0x00, 0x80, 0x3f);
    ENCODES(f32, -0.15625f, 0x00, 0x00, 0x20, 0xbe);
    ENCODES(f64, 1.0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf0, 0x3f);
    ENCODES(f64, -2.5, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0xc0);
#undef ENCODES

    /* Bit patterns survive: negative zero and a NaN payload. */
    static const unsigned char nan32[4] = {0x01, 0x00, 0xa0, 0x7f};
    float x = le_get_f32(nan32);
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    memset(buf, 0, sizeof buf);
    le_put_f32(buf, x);
    EXPECT(isnan(x) && bits == 0x7fa00001u && memcmp(buf, nan32, 4) == 0,
           "f32 NaN payload 0x7fa00001 kept (got %08x)", (unsigned)bits);
    le_put_f64(buf, -0.0);
    EXPECT(buf[7] == 0x80 && buf[0] == 0 && buf[6] == 0 && signbit(le_get_f64(buf)),
           "f64 negative zero");

    /* Round trips of random values of every width. */
    int bad = 0;
    for (int i = 0; i < 10000; i++) {
        const uint64_t v = next_u64();
        le_put_u64(buf + 3, v);
        bad += le_get_u64(buf + 3) != v;
        bad += le_get_u32(buf + 3) != (uint32_t)v; /* the low half comes first */
        bad += le_get_u16(buf + 3) != (uint16_t)v;
        le_put_u32(buf + 1, (uint32_t)v);
        bad += le_get_u32(buf + 1) != (uint32_t)v;
        le_put_i64(buf + 5, (int64_t)(v >> 1) - (int64_t)(v >> 2));
        bad += le_get_i64(buf + 5) != (int64_t)(v >> 1) - (int64_t)(v >> 2);
        le_put_i32(buf + 2, (int32_t)(v >> 33) - (int32_t)(v >> 34));
        bad += le_get_i32(buf + 2) != (int32_t)(v >> 33) - (int32_t)(v >> 34);
    }
    EXPECT(bad == 0, "%d round-trip failures of random values", bad);

    /* hash_fnv1a_u64 feeds exactly the 8 bytes le_put_u64 writes. */
    le_put_u64(buf, 0x0123456789abcdefull);
    EXPECT(hash_fnv1a_u64(77, 0x0123456789abcdefull) == hash_fnv1a(77, buf, 8),
           "hash_fnv1a_u64 hashes the little-endian bytes");
}

int main(void)
{
    test_vectors();
    test_records();
    test_codec();
    printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
