/* Mutation test of the volume parsers: valid manifests and .npy headers
 * are truncated at random lengths, bit-flipped, and given random bytes
 * inserted or overwritten; each mutant goes through manifest_parse and
 * npy_parse_header in a buffer of exactly its size (so ASan catches any
 * read past the end), and some through pcnn_dataset_open_volumes and a
 * batch read from real files.  Nothing may crash, and every accepted input
 * must satisfy the parser's promises.  Deterministic (fixed seeds); run in
 * the ASan stage with the rest of the 'io' suite.  An argument sets the
 * number of mutants (default 20000). */
#define PCNN_EXPERIMENTAL
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "data/dataset.h"
#include "data/volume.h"
#include "pcnn.h"

static int failures;
#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            failures++;                                                         \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
        }                                                                       \
    } while (0)

static uint64_t state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (uint32_t)(state >> 11);
}

static const char *manifests[] = {
    "a.npy 0.5 -1\nb.raw 1e-3 2\n",
    "# header\n\n/abs/path/x.npy\t1\t2\t3\n  rel/y.raw 4 5 6   \n",
    "z.raw 0.25\r\nw.raw -0.75\r\n",
};

static size_t npy_valid(unsigned char *out, int variant)
{
    static const char *dicts[] = {
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 5, 4, 6), }",
        "{\"shape\": (3,4,5), \"descr\": \"<f8\", \"fortran_order\": False}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (7,), }",
    };
    const char *dict = dicts[variant % 3];
    size_t n = strlen(dict), start = variant % 2 ? 12 : 10;
    size_t total = (start + n + 1 + 63) / 64 * 64, hlen = total - start;
    memcpy(out, "\x93NUMPY", 6);
    out[6] = variant % 2 ? 2 : 1;
    out[7] = 0;
    out[8] = (unsigned char)hlen;
    out[9] = (unsigned char)(hlen >> 8);
    if (start == 12) out[10] = out[11] = 0;
    memcpy(out + start, dict, n);
    memset(out + start + n, ' ', hlen - n - 1);
    out[total - 1] = '\n';
    return total;
}

/* Mutate buf (len bytes, capacity cap) in place; returns the new length. */
static size_t mutate(unsigned char *buf, size_t len, size_t cap)
{
    int rounds = 1 + (int)(rnd() % 4);
    for (int r = 0; r < rounds; r++) {
        switch (rnd() % 5) {
        case 0: /* truncate */
            len = len ? rnd() % (len + 1) : 0;
            break;
        case 1: /* bit flip */
            if (len) buf[rnd() % len] ^= (unsigned char)(1u << (rnd() % 8));
            break;
        case 2: /* overwrite with a random or interesting byte */
            if (len) {
                static const unsigned char pick[] = {0, ' ', '\n', '#', ',', ')', '(', '\'',
                                                     '9', '-', 'e', 0xff, '\t', '}', ':'};
                buf[rnd() % len] = rnd() % 2 ? (unsigned char)rnd() : pick[rnd() % sizeof pick];
            }
            break;
        case 3: /* insert a byte */
            if (len < cap) {
                size_t at = rnd() % (len + 1);
                memmove(buf + at + 1, buf + at, len - at);
                buf[at] = (unsigned char)rnd();
                len++;
            }
            break;
        default: /* duplicate a run */
            if (len && len < cap) {
                size_t at = rnd() % len, run = 1 + rnd() % 16;
                if (run > cap - len) run = cap - len;
                if (run > len - at) run = len - at;
                memmove(buf + at + run, buf + at, len - at);
                len += run;
            }
        }
    }
    return len;
}

static void check_manifest(const unsigned char *src, size_t len)
{
    char *text = malloc(len ? len : 1); /* exactly len bytes: ASan sees overreads */
    memcpy(text, src, len);
    const int targets = 1 + (int)(rnd() % 3);
    manifest_entry *e = NULL;
    int n = 0;
    pcnn_status st = manifest_parse(text, len, rnd() % 2 ? "dir" : NULL, "fuzz", targets, &e, &n);
    if (st == PCNN_OK) {
        CHECK(n >= 1 && e != NULL, "accepted with %d entries", n);
        for (int i = 0; i < n; i++) {
            CHECK(e[i].path && e[i].path[0], "entry %d without a path", i);
            for (int k = 0; k < targets; k++)
                CHECK(isfinite(e[i].targets[k]), "entry %d target %d not finite", i, k);
        }
        manifest_free(e, n);
    } else {
        CHECK(st == PCNN_ERR_CORRUPT, "manifest status %s", pcnn_status_str(st));
        CHECK(strstr(pcnn_last_error(), "fuzz") != NULL, "message %s", pcnn_last_error());
    }
    free(text);
}

static void check_npy(const unsigned char *src, size_t len)
{
    unsigned char *buf = malloc(len ? len : 1);
    memcpy(buf, src, len);
    npy_header h;
    pcnn_status st = npy_parse_header(buf, len, "fuzz.npy", &h);
    if (st == PCNN_OK) {
        CHECK(h.elem == 4 || h.elem == 8, "elem %d", h.elem);
        CHECK(h.ndims >= 0 && h.ndims <= NPY_MAX_DIMS, "ndims %d", h.ndims);
        CHECK(h.data_offset <= len && h.data_offset >= 10, "offset %zu of %zu", h.data_offset, len);
        for (int k = 0; k < h.ndims; k++) CHECK(h.dims[k] >= 0, "dim %d", k);
    } else {
        CHECK(st == PCNN_ERR_CORRUPT, "npy status %s", pcnn_status_str(st));
    }
    free(buf);
}

/* A mutated .npy file (header and a short body) and a mutated manifest
 * naming it, through the public open and a read of every sample. */
static void check_files(const char *dir, unsigned char *scratch, size_t cap)
{
    char path[512], manifest[512];
    size_t len = npy_valid(scratch, 0);
    memset(scratch + len, 0x3f, 2 * 5 * 4 * 6 * 4);
    len += 2 * 5 * 4 * 6 * 4;
    if (rnd() % 4) len = mutate(scratch, len, cap);
    snprintf(path, sizeof path, "%s/f.npy", dir);
    FILE *f = fopen(path, "wb");
    fwrite(scratch, 1, len, f);
    fclose(f);
    char text[256];
    size_t tl = (size_t)snprintf(text, sizeof text, "f.npy 0.5 1\nf.npy -1 2\n");
    memcpy(scratch, text, tl);
    if (rnd() % 2) tl = mutate(scratch, tl, 256);
    snprintf(manifest, sizeof manifest, "%s/m.txt", dir);
    f = fopen(manifest, "wb");
    fwrite(scratch, 1, tl, f);
    fclose(f);
    pcnn_dataset *d = NULL;
    pcnn_status st = pcnn_dataset_open_volumes(manifest, 2, 5, 4, 6, PCNN_DTYPE_F32, 2, &d);
    if (st == PCNN_OK) {
        int n = 0;
        pcnn_dataset_info3d(d, &n, NULL, NULL, NULL, NULL);
        float x[2 * 5 * 4 * 6];
        for (int i = 0; i < n; i++) {
            st = pcnn_dataset_batch(d, i, 1, x, NULL, NULL);
            CHECK(st == PCNN_OK || st == PCNN_ERR_IO, "read %d: %s", i, pcnn_last_error());
        }
        pcnn_dataset_destroy(&d);
    } else {
        CHECK(st == PCNN_ERR_CORRUPT || st == PCNN_ERR_IO || st == PCNN_ERR_SHAPE ||
                  st == PCNN_ERR_INVALID_ARGUMENT,
              "open status %s: %s", pcnn_status_str(st), pcnn_last_error());
        CHECK(d == NULL, "out set on failure");
    }
}

int main(int argc, char **argv)
{
    const long mutants = argc > 1 ? atol(argv[1]) : 20000;
    enum { CAP = 4096 };
    static unsigned char buf[CAP];
    char dir[256];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/pcnn_vfuzz_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    long accepted_npy = 0;
    for (long i = 0; i < mutants; i++) {
        const char *m = manifests[i % 3];
        size_t len = strlen(m);
        memcpy(buf, m, len);
        len = mutate(buf, len, 512);
        check_manifest(buf, len);
        len = npy_valid(buf, (int)(i % 6));
        len = mutate(buf, len, 512);
        check_npy(buf, len);
        npy_header h;
        accepted_npy += npy_parse_header(buf, len, "x", &h) == PCNN_OK;
        if (i % 50 == 0) check_files(dir, buf, CAP);
    }
    printf("%ld mutants; %ld npy headers still valid\n", mutants, accepted_npy);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    CHECK(accepted_npy > 0 && accepted_npy < mutants, "the mutations should both keep and break "
          "headers: %ld of %ld kept", accepted_npy, mutants);
    if (failures) printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
