/* File-backed volumes: manifests of raw and .npy files (float32 and
 * float64), box reads against slices of the same data in memory, the
 * prefetch thread (same bytes as without it, whatever the order; its errors
 * come back on the next call), malformed manifests and files, and training
 * / evaluation from files matching the in-memory dataset exactly. */
#define PCNN_EXPERIMENTAL /* pcnn.h section 9 */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

#define OK(call)                                                                          \
    do {                                                                                  \
        pcnn_status s_ = (call);                                                          \
        if (s_ != PCNN_OK) {                                                              \
            fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call,            \
                    pcnn_last_error());                                                   \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

#define EXPECT_FAIL(call, want, text)                                                     \
    do {                                                                                  \
        pcnn_status got_ = (call);                                                        \
        const char *msg_ = pcnn_last_error();                                             \
        if (getenv("PCNN_TEST_VERBOSE")) printf("  %-12s %s\n", pcnn_status_str(got_), msg_); \
        CHECK(got_ == (want) && strstr(msg_, (text)) != NULL,                             \
              "%s gave %s, message \"%s\"; want %s mentioning \"%s\"", #call,             \
              pcnn_status_str(got_), msg_, pcnn_status_str(want), (text));                \
    } while (0)

/* Samples of (2, 5, 4, 6); N of them; 2 targets each. */
enum { C = 2, D = 5, H = 4, W = 6, S = C * D * H * W, N = 7, T = 2 };

static char dir[256];
static float data[N * S], targets[N * T];

static float value(int n, int i) { return (float)(n * 1000 + i) * 0.25f + 0.125f; }

static void write_file(const char *name, const void *bytes, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(bytes, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

static void write_text(const char *name, const char *text) { write_file(name, text, strlen(text)); }

/* A .npy v1.0 header for `shape` (descr given), padded to 64 bytes as numpy
 * does; returns its length. */
static size_t write_npy_header(unsigned char *out, const char *descr, const char *order,
                         const char *shape)
{
    char dict[256];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }",
                     descr, order, shape);
    size_t total = 10 + (size_t)n + 1;
    size_t padded = (total + 63) / 64 * 64;
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    size_t hlen = padded - 10;
    out[8] = (unsigned char)(hlen & 0xff);
    out[9] = (unsigned char)(hlen >> 8);
    memcpy(out + 10, dict, (size_t)n);
    memset(out + 10 + n, ' ', padded - 10 - (size_t)n - 1);
    out[padded - 1] = '\n';
    return padded;
}

/* Sample k as raw f32, raw f64, npy f32 or npy f64 (kind k % 2 within a
 * dtype: raw for even, npy for odd). */
static void write_sample(int k, int f64, const char *name)
{
    unsigned char *buf = malloc(256 + (size_t)S * 8);
    size_t off = 0;
    if (k % 2) off = write_npy_header(buf, f64 ? "<f8" : "<f4", "False", "(2, 5, 4, 6)");
    for (int i = 0; i < S; i++) {
        if (f64) {
            double v = (double)data[k * S + i];
            memcpy(buf + off + (size_t)i * 8, &v, 8);
        } else {
            memcpy(buf + off + (size_t)i * 4, &data[k * S + i], 4);
        }
    }
    write_file(name, buf, off + (size_t)S * (f64 ? 8 : 4));
    free(buf);
}

/* Files s<k>_<dtype>.{raw,npy} and the manifest m_<dtype>.txt (relative
 * paths, a comment and a blank line). */
static void write_dataset(int f64)
{
    char manifest[4096] = "# path t1 t2\n\n", name[64], line[128];
    for (int k = 0; k < N; k++) {
        snprintf(name, sizeof name, "s%d_%s.%s", k, f64 ? "f64" : "f32", k % 2 ? "npy" : "raw");
        write_sample(k, f64, name);
        snprintf(line, sizeof line, "%s\t%.9g %.9g\n", name, targets[k * T], targets[k * T + 1]);
        strcat(manifest, line);
    }
    write_text(f64 ? "m_f64.txt" : "m_f32.txt", manifest);
}

static const char *path_of(const char *name)
{
    static char path[8][512];
    static int next;
    char *p = path[next++ % 8];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

/* Box reads of a file-backed dataset equal the in-memory slices. */
static void test_boxes(pcnn_dataset *files, pcnn_dataset *mem, const char *what)
{
    static const int boxes[][6] = {
        {0, 0, 0, D, H, W}, {1, 0, 0, 3, H, W}, {0, 1, 0, D, 2, W},
        {2, 1, 3, 2, 3, 3}, {4, 3, 5, 1, 1, 1}, {0, 0, 1, D, H, 5},
    };
    float *a = malloc(sizeof(float) * 3 * S), *b = malloc(sizeof(float) * 3 * S);
    float ta[3 * T], tb[3 * T];
    for (size_t q = 0; q < sizeof boxes / sizeof boxes[0]; q++) {
        const int *bs = boxes[q], *bc = boxes[q] + 3;
        const size_t floats = (size_t)3 * C * bc[0] * bc[1] * bc[2];
        memset(a, 0xff, floats * sizeof *a);
        OK(pcnn_dataset_batch_box(files, 2, 3, bs, bc, a, NULL, ta));
        OK(pcnn_dataset_batch_box(mem, 2, 3, bs, bc, b, NULL, tb));
        CHECK(memcmp(a, b, floats * sizeof *a) == 0, "%s box %zu differs", what, q);
        CHECK(memcmp(ta, tb, sizeof ta) == 0, "%s targets differ", what);
        /* The in-memory slice against the definition. */
        int bad = 0;
        for (int k = 0; k < 3; k++)
            for (int c = 0; c < C; c++)
                for (int z = 0; z < bc[0]; z++)
                    for (int y = 0; y < bc[1]; y++)
                        for (int x = 0; x < bc[2]; x++) {
                            int i = ((c * D + bs[0] + z) * H + bs[1] + y) * W + bs[2] + x;
                            size_t o = ((((size_t)k * C + c) * bc[0] + z) * bc[1] + y) * bc[2] + x;
                            bad += b[o] != value(2 + k, i);
                        }
        CHECK(bad == 0, "%s box %zu: %d values wrong", what, q, bad);
    }
    free(a);
    free(b);
}

static void test_open_and_read(void)
{
    pcnn_dataset *mem, *f32, *f64;
    OK(pcnn_dataset_create3d(N, C, D, H, W, data, NULL, targets, T, &mem));
    OK(pcnn_dataset_open_volumes(path_of("m_f32.txt"), C, D, H, W, PCNN_DTYPE_F32, T, &f32));
    OK(pcnn_dataset_open_volumes(path_of("m_f64.txt"), C, D, H, W, PCNN_DTYPE_F64, T, &f64));
    int n, c, d, h, w;
    OK(pcnn_dataset_info3d(f32, &n, &c, &d, &h, &w));
    CHECK(n == N && c == C && d == D && h == H && w == W, "info3d %d %d %d %d %d", n, c, d, h, w);
    test_boxes(f32, mem, "f32");
    test_boxes(f64, mem, "f64");

    /* Whole batches, also after the same shuffle. */
    float *a = malloc(sizeof(float) * N * S), *b = malloc(sizeof(float) * N * S);
    float ta[N * T], tb[N * T];
    OK(pcnn_dataset_shuffle(mem, 5, 1));
    OK(pcnn_dataset_shuffle(f64, 5, 1));
    OK(pcnn_dataset_batch(f64, 0, N, a, NULL, ta));
    OK(pcnn_dataset_batch(mem, 0, N, b, NULL, tb));
    CHECK(memcmp(a, b, sizeof(float) * N * S) == 0, "shuffled batch differs");
    CHECK(memcmp(ta, tb, sizeof ta) == 0, "shuffled targets differ");

    /* Argument checks. */
    int bs[3] = {0, 0, 0}, bc[3] = {D, H, W + 1};
    EXPECT_FAIL(pcnn_dataset_batch_box(f32, 0, 1, bs, bc, a, NULL, NULL),
                PCNN_ERR_INVALID_ARGUMENT, "width");
    bc[2] = W;
    bs[0] = -1;
    EXPECT_FAIL(pcnn_dataset_batch_box(f32, 0, 1, bs, bc, a, NULL, NULL),
                PCNN_ERR_INVALID_ARGUMENT, "depth");
    EXPECT_FAIL(pcnn_dataset_batch_box(f32, 0, 1, NULL, bc, a, NULL, NULL),
                PCNN_ERR_INVALID_ARGUMENT, "both");
    EXPECT_FAIL(pcnn_dataset_batch_box(f32, 5, 3, NULL, NULL, a, NULL, NULL),
                PCNN_ERR_INVALID_ARGUMENT, "count");
    int32_t labels[N];
    EXPECT_FAIL(pcnn_dataset_batch_box(f32, 0, 1, NULL, NULL, a, labels, NULL),
                PCNN_ERR_INVALID_ARGUMENT, "labels");
    EXPECT_FAIL(pcnn_dataset_set_prefetch(f32, 65), PCNN_ERR_INVALID_ARGUMENT, "batches");
    /* A sample of 2^64 floats (a size_t product wraps to 0) over an empty
     * file: refused up front, not opened as 0-float samples. */
    write_file("empty.raw", "", 0);
    write_text("empty.txt", "empty.raw 1 2\n");
    pcnn_dataset *huge = NULL;
    EXPECT_FAIL(pcnn_dataset_open_volumes(path_of("empty.txt"), 4194304, 4194304, 1048576, 1,
                                          PCNN_DTYPE_F32, T, &huge),
                PCNN_ERR_INVALID_ARGUMENT, "(4194304, 4194304, 1048576, 1) exceeds INT_MAX");
    CHECK(huge == NULL, "no dataset on failure");
    pcnn_dataset_destroy(&huge);
    EXPECT_FAIL(pcnn_dataset_open_volumes(path_of("m_f32.txt"), 65536, 65536, 65536, 65536,
                                          PCNN_DTYPE_F64, T, &huge),
                PCNN_ERR_INVALID_ARGUMENT, "exceeds INT_MAX");
    OK(pcnn_dataset_set_prefetch(mem, 2)); /* in memory: nothing to do */
    free(a);
    free(b);
    pcnn_dataset_destroy(&mem);
    pcnn_dataset_destroy(&f32);
    pcnn_dataset_destroy(&f64);
}

static pcnn_status open_manifest(const char *text, pcnn_dataset **d)
{
    write_text("bad.txt", text);
    *d = NULL;
    pcnn_status st = pcnn_dataset_open_volumes(path_of("bad.txt"), C, D, H, W, PCNN_DTYPE_F32,
                                               T, d);
    if (st == PCNN_OK) pcnn_dataset_destroy(d);
    return st;
}

static void test_malformed(void)
{
    pcnn_dataset *d;
    EXPECT_FAIL(open_manifest("s0_f32.raw 1 2\ns2_f32.raw 1\n", &d), PCNN_ERR_CORRUPT,
                "bad.txt line 2: 2 targets expected after the path, found 1");
    EXPECT_FAIL(open_manifest("# c\ns0_f32.raw 1 2\n\ns2_f32.raw 1 x\n", &d), PCNN_ERR_CORRUPT,
                "line 4: target 2 is not a number");
    EXPECT_FAIL(open_manifest("s0_f32.raw 1 2 3\n", &d), PCNN_ERR_CORRUPT,
                "line 1: text after the 2 targets");
    /* target_count INT_MAX: refused from the line's length, before 8 GiB
     * of targets were allocated and touched (37-65 s, or the OOM killer). */
    write_text("huge.txt", "s0_f32.raw 1 2\n");
    d = NULL;
    EXPECT_FAIL(pcnn_dataset_open_volumes(path_of("huge.txt"), C, D, H, W, PCNN_DTYPE_F32,
                                          INT_MAX, &d),
                PCNN_ERR_CORRUPT, "line 1: 2147483647 targets expected after the path, found 2");
    CHECK(d == NULL, "nothing opened");
    EXPECT_FAIL(open_manifest("s0_f32.raw 1 nan\n", &d), PCNN_ERR_CORRUPT,
                "line 1: target 2 is not a finite float");
    EXPECT_FAIL(open_manifest("s0_f32.raw 1 1e300\n", &d), PCNN_ERR_CORRUPT, "finite");
    EXPECT_FAIL(open_manifest("s0_f32.raw 1 -3.5e38\n", &d), PCNN_ERR_CORRUPT,
                "target 2 is not a finite float");
    /* Up to FLT_MAX (as %.9g prints it, a little above) targets are finite floats. */
    write_text("fltmax.txt", "s0_f32.raw 3.3e38 -3.40282347e+38\n");
    OK(pcnn_dataset_open_volumes(path_of("fltmax.txt"), C, D, H, W, PCNN_DTYPE_F32, T, &d));
    float tmax[T], xmax[S];
    OK(pcnn_dataset_batch(d, 0, 1, xmax, NULL, tmax));
    CHECK(tmax[0] == 3.3e38f && tmax[1] == -FLT_MAX, "targets %g %g", tmax[0], tmax[1]);
    pcnn_dataset_destroy(&d);
    EXPECT_FAIL(open_manifest("# nothing\n\n", &d), PCNN_ERR_CORRUPT, "no sample");
    write_file("nul.txt", "s0_f32.raw 1 2\0\n", 16);
    EXPECT_FAIL(pcnn_dataset_open_volumes(path_of("nul.txt"), C, D, H, W, PCNN_DTYPE_F32, T, &d),
                PCNN_ERR_CORRUPT, "NUL byte at offset 14");
    EXPECT_FAIL(open_manifest("missing.raw 1 2\n", &d), PCNN_ERR_IO, "missing.raw");
    /* Sizes: a raw file of the wrong length; f64 npy opened as f32. */
    EXPECT_FAIL(open_manifest("s0_f64.raw 1 2\n", &d), PCNN_ERR_CORRUPT,
                "s0_f64.raw has 1920 bytes");
    EXPECT_FAIL(open_manifest("s1_f64.npy 1 2\n", &d), PCNN_ERR_INVALID_ARGUMENT, "float64");
    EXPECT_FAIL(pcnn_dataset_open_volumes(path_of("m_f32.txt"), C, D, H, W + 1,
                                          PCNN_DTYPE_F32, T, &d),
                PCNN_ERR_CORRUPT, "s0_f32.raw has 960 bytes; 1120 bytes of float32 data");
    write_text("npyonly.txt", "s1_f32.npy 1 2\n");
    EXPECT_FAIL(pcnn_dataset_open_volumes(path_of("npyonly.txt"), C, D, H, W + 1,
                                          PCNN_DTYPE_F32, T, &d),
                PCNN_ERR_SHAPE, "(2, 5, 4, 6) but the dataset's samples are (2, 5, 4, 7)");
    EXPECT_FAIL(pcnn_dataset_open_volumes(path_of("nope.txt"), C, D, H, W, PCNN_DTYPE_F32, T,
                                          &d),
                PCNN_ERR_IO, "nope.txt");
    EXPECT_FAIL(pcnn_dataset_open_volumes(path_of("m_f32.txt"), C, D, H, W, (pcnn_dtype)7, T,
                                          &d),
                PCNN_ERR_INVALID_ARGUMENT, "dtype");
    EXPECT_FAIL(pcnn_dataset_open_volumes(path_of("m_f32.txt"), C, D, H, W, PCNN_DTYPE_F32, 0,
                                          &d),
                PCNN_ERR_INVALID_ARGUMENT, "target_count");

    /* .npy headers: Fortran order, other dtypes, cut off. */
    unsigned char buf[256 + S * 4];
    memset(buf, 0, sizeof buf);
    size_t off = write_npy_header(buf, "<f4", "True", "(2, 5, 4, 6)");
    write_file("fortran.npy", buf, off + S * 4);
    EXPECT_FAIL(open_manifest("fortran.npy 1 2\n", &d), PCNN_ERR_CORRUPT, "Fortran order");
    off = write_npy_header(buf, ">f4", "False", "(2, 5, 4, 6)");
    write_file("big.npy", buf, off + S * 4);
    EXPECT_FAIL(open_manifest("big.npy 1 2\n", &d), PCNN_ERR_CORRUPT, "dtype '>f4'");
    /* A NUL inside descr ('<f4\\0x'): numpy refuses it; it read as '<f4'. */
    off = write_npy_header(buf, "<f4Qx", "False", "(2, 5, 4, 6)");
    for (size_t i = 0; i + 3 < off; i++)
        if (memcmp(buf + i, "<f4Q", 4) == 0) buf[i + 3] = '\0';
    write_file("nul.npy", buf, off + S * 4);
    EXPECT_FAIL(open_manifest("nul.npy 1 2\n", &d), PCNN_ERR_CORRUPT, "descr is not a string");
    off = write_npy_header(buf, "<f4", "False", "(2, 5, 4, 6)");
    write_file("cut.npy", buf, 40);
    EXPECT_FAIL(open_manifest("cut.npy 1 2\n", &d), PCNN_ERR_CORRUPT, "runs past");
    write_file("short.npy", buf, off + S * 4 - 1);
    EXPECT_FAIL(open_manifest("short.npy 1 2\n", &d), PCNN_ERR_CORRUPT, "short.npy has");
    off = write_npy_header(buf, "<f4", "False", "(1, 2, 5, 4, 6)");
    write_file("dims.npy", buf, off + S * 4);
    EXPECT_FAIL(open_manifest("dims.npy 1 2\n", &d), PCNN_ERR_SHAPE, "(1, 2, 5, 4, 6)");

    /* A file cut after open: the read names it and the offset. */
    write_sample(0, 0, "later.raw");
    write_text("later.txt", "later.raw 1 2\n");
    OK(pcnn_dataset_open_volumes(path_of("later.txt"), C, D, H, W, PCNN_DTYPE_F32, T, &d));
    CHECK(truncate(path_of("later.raw"), 100) == 0, "truncate");
    float x[S];
    EXPECT_FAIL(pcnn_dataset_batch(d, 0, 1, x, NULL, NULL), PCNN_ERR_CORRUPT,
                "later.raw: the file ends at offset 100");
    pcnn_dataset_destroy(&d);
}

/* The prefetch thread gives the same bytes in sequential, shuffled and
 * data-parallel-like (stride > count) patterns, also with boxes that change. */
static void test_prefetch(void)
{
    pcnn_dataset *plain, *ahead;
    OK(pcnn_dataset_open_volumes(path_of("m_f64.txt"), C, D, H, W, PCNN_DTYPE_F64, T, &plain));
    OK(pcnn_dataset_open_volumes(path_of("m_f64.txt"), C, D, H, W, PCNN_DTYPE_F64, T, &ahead));
    OK(pcnn_dataset_set_prefetch(ahead, 3));
    float a[2 * S], b[2 * S], ta[2 * T], tb[2 * T];
    const int bs[3] = {1, 0, 2}, bc[3] = {3, H, 4};
    for (int epoch = 0; epoch < 4; epoch++) {
        OK(pcnn_dataset_shuffle(plain, 9, (uint64_t)epoch));
        OK(pcnn_dataset_shuffle(ahead, 9, (uint64_t)epoch));
        const int step = epoch == 2 ? 3 : 2, off = epoch == 2 ? 1 : 0;
        for (int s = off; s + 2 <= N; s += step) {
            const int *bs_ = epoch == 3 ? bs : NULL, *bc_ = epoch == 3 ? bc : NULL;
            OK(pcnn_dataset_batch_box(ahead, s, 2, bs_, bc_, a, NULL, ta));
            OK(pcnn_dataset_batch_box(plain, s, 2, bs_, bc_, b, NULL, tb));
            size_t floats = epoch == 3 ? (size_t)2 * C * 3 * H * 4 : (size_t)2 * S;
            CHECK(memcmp(a, b, floats * sizeof *a) == 0, "epoch %d start %d differs", epoch, s);
            CHECK(memcmp(ta, tb, sizeof ta) == 0, "targets epoch %d start %d", epoch, s);
        }
    }
    /* An error on the helper thread comes back on the next call, whatever
     * it reads: restart the thread (empty slots), cut the file at position
     * 4, read 0-1 (queues 2-3) and 2-3 (queues 4-5, which fails on the
     * thread), wait for the thread, then read 0-1 again. */
    OK(pcnn_dataset_set_prefetch(ahead, 0));
    OK(pcnn_dataset_set_prefetch(ahead, 1));
    OK(pcnn_dataset_shuffle(ahead, 9, 0));
    OK(pcnn_dataset_shuffle(plain, 9, 0));
    float probe[S];
    int victim = -1;
    OK(pcnn_dataset_batch(plain, 4, 1, probe, NULL, NULL));
    for (int i = 0; i < N; i++)
        if (probe[0] == value(i, 0)) victim = i;
    CHECK(victim >= 0, "position 4 not found");
    char name[64], saved[512];
    snprintf(name, sizeof name, "s%d_f64.%s", victim, victim % 2 ? "npy" : "raw");
    snprintf(saved, sizeof saved, "%s", path_of(name));
    CHECK(truncate(saved, 64) == 0, "truncate");
    OK(pcnn_dataset_batch(ahead, 0, 2, a, NULL, NULL));
    OK(pcnn_dataset_batch(ahead, 2, 2, a, NULL, NULL));
    volume_prefetch_wait_idle(ahead->vol);
    EXPECT_FAIL(pcnn_dataset_batch(ahead, 0, 1, a, NULL, NULL), PCNN_ERR_CORRUPT,
                "(read ahead)");
    CHECK(strstr(pcnn_last_error(), name) != NULL, "the message names %s: %s", name,
          pcnn_last_error());
    /* Reported once: the batch itself still fails, directly this time. */
    EXPECT_FAIL(pcnn_dataset_batch(ahead, 4, 2, a, NULL, NULL), PCNN_ERR_CORRUPT, name);
    write_sample(victim, 1, name); /* restore */
    OK(pcnn_dataset_batch(ahead, 4, 2, a, NULL, NULL));
    OK(pcnn_dataset_batch(plain, 4, 2, b, NULL, NULL));
    CHECK(memcmp(a, b, sizeof a) == 0, "after restore");
    pcnn_dataset_destroy(&ahead); /* stops the thread with work queued */
    pcnn_dataset_destroy(&plain);
}

/* Larger samples: narrow boxes join thousands of row runs through the
 * bounce buffer (its size and piece limits are crossed), wide ones read
 * directly; float64 raw, compared with the same data in memory. */
static void test_big_boxes(void)
{
    enum { BC = 2, BD = 40, BH = 64, BW = 16, BS = BC * BD * BH * BW, BN = 2 };
    float *x = malloc(sizeof(float) * BN * BS), *a = malloc(sizeof(float) * BS),
          *b = malloc(sizeof(float) * BS), tg[BN] = {0.5f, -0.5f};
    double *raw = malloc(sizeof(double) * BS);
    char manifest[256] = "", line[64];
    for (int k = 0; k < BN; k++) {
        for (int i = 0; i < BS; i++) {
            x[k * BS + i] = (float)(k * 1000003 + i) * 0.5f;
            raw[i] = x[k * BS + i];
        }
        snprintf(line, sizeof line, "big%d.raw", k);
        write_file(line, raw, sizeof(double) * BS);
        snprintf(line, sizeof line, "big%d.raw %g\n", k, tg[k]);
        strcat(manifest, line);
    }
    write_text("big.txt", manifest);
    pcnn_dataset *mem, *files;
    OK(pcnn_dataset_create3d(BN, BC, BD, BH, BW, x, NULL, tg, 1, &mem));
    OK(pcnn_dataset_open_volumes(path_of("big.txt"), BC, BD, BH, BW, PCNN_DTYPE_F64, 1, &files));
    static const int boxes[][6] = {
        {0, 0, 5, BD, BH, 1}, {3, 2, 0, 30, 60, 15}, {0, 0, 0, BD, BH, BW},
        {1, 7, 3, 39, 50, 9}, {0, 0, 0, 20, BH, BW}, {5, 10, 0, 1, 1, BW},
    };
    for (size_t q = 0; q < sizeof boxes / sizeof boxes[0]; q++) {
        const size_t floats = (size_t)BC * boxes[q][3] * boxes[q][4] * boxes[q][5];
        for (int k = 0; k < BN; k++) {
            OK(pcnn_dataset_batch_box(files, k, 1, boxes[q], boxes[q] + 3, a, NULL, NULL));
            OK(pcnn_dataset_batch_box(mem, k, 1, boxes[q], boxes[q] + 3, b, NULL, NULL));
            CHECK(memcmp(a, b, floats * sizeof *a) == 0, "big box %zu sample %d differs", q, k);
        }
    }
    pcnn_dataset_destroy(&mem);
    pcnn_dataset_destroy(&files);
    free(x), free(a), free(b), free(raw);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The call failed with IO within two seconds, saying why. */
#define EXPECT_REFUSED(call, text)                                                        \
    do {                                                                                  \
        const double t0_ = now();                                                         \
        EXPECT_FAIL(call, PCNN_ERR_IO, text);                                             \
        CHECK(now() - t0_ < 2.0, "%s took %.1f s", #call, now() - t0_);                   \
    } while (0)

/* FIFOs, directories and devices as the manifest or as samples, also a
 * sample turned into a FIFO after open (read directly and by the prefetch
 * thread): refused at once, never waited on.  An alarm turns a hang into
 * a failure. */
static void test_special_files(void)
{
    alarm(30);
    char fifo[512], sample1[512];
    snprintf(fifo, sizeof fifo, "%s", path_of("fifo"));
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo %s", fifo);
    pcnn_dataset *d = NULL;
    EXPECT_REFUSED(pcnn_dataset_open_volumes(fifo, C, D, H, W, PCNN_DTYPE_F32, T, &d),
                   "cannot open the manifest");
    CHECK(strstr(pcnn_last_error(), "not a regular file"), "%s", pcnn_last_error());
    EXPECT_REFUSED(pcnn_dataset_open_volumes(dir, C, D, H, W, PCNN_DTYPE_F32, T, &d),
                   "not a regular file");
    EXPECT_REFUSED(open_manifest("fifo 1 2\n", &d), "fifo (sample 0 of");
    EXPECT_REFUSED(open_manifest("s0_f32.raw 1 2\n/dev/zero 1 2\n", &d),
                   "/dev/zero (sample 1 of");
    /* /dev/zero as the manifest: not read up to the 1 GiB limit first. */
    EXPECT_REFUSED(pcnn_dataset_open_volumes("/dev/zero", C, D, H, W, PCNN_DTYPE_F32, T, &d),
                   "/dev/zero: not a regular file");
    EXPECT_REFUSED(open_manifest("/tmp 1 2\n", &d), "/tmp (sample 0");
    CHECK(strstr(pcnn_last_error(), "not a regular file"), "%s", pcnn_last_error());

    /* Swapped for a FIFO after open: the direct read, then the read ahead. */
    write_sample(0, 0, "sp0.raw");
    write_sample(2, 0, "sp1.raw");
    write_text("sp.txt", "sp0.raw 1 2\nsp1.raw 3 4\n");
    snprintf(sample1, sizeof sample1, "%s", path_of("sp1.raw"));
    pcnn_dataset *direct, *ahead;
    OK(pcnn_dataset_open_volumes(path_of("sp.txt"), C, D, H, W, PCNN_DTYPE_F32, T, &direct));
    OK(pcnn_dataset_open_volumes(path_of("sp.txt"), C, D, H, W, PCNN_DTYPE_F32, T, &ahead));
    CHECK(unlink(sample1) == 0 && mkfifo(sample1, 0600) == 0, "swap %s", sample1);
    float x[S];
    EXPECT_REFUSED(pcnn_dataset_batch(direct, 1, 1, x, NULL, NULL), "sp1.raw: not a regular");
    OK(pcnn_dataset_set_prefetch(ahead, 1));
    OK(pcnn_dataset_batch(ahead, 0, 1, x, NULL, NULL)); /* queues position 1 */
    volume_prefetch_wait_idle(ahead->vol);
    EXPECT_REFUSED(pcnn_dataset_batch(ahead, 1, 1, x, NULL, NULL), "sp1.raw: not a regular");
    const double t0 = now();
    pcnn_dataset_destroy(&ahead);
    pcnn_dataset_destroy(&direct);
    CHECK(now() - t0 < 2.0, "destroy took %.1f s", now() - t0);
    unlink(sample1);
    unlink(fifo);
    alarm(0);
}

/* Box reads keep their buffers off the stack: a thread with a 128 KiB
 * stack (musl's default) reads narrow boxes (runs joined through the
 * bounce buffer) and whole float64 samples (converted in chunks), equal
 * to the same reads on the main thread.  Uses test_big_boxes' files. */
typedef struct stack_job {
    pcnn_dataset *d;
    const int *start, *count;
    float *x;
    pcnn_status status;
} stack_job;

static void *read_on_small_stack(void *arg)
{
    stack_job *j = arg;
    j->status = pcnn_dataset_batch_box(j->d, 0, 2, j->start, j->count, j->x, NULL, NULL);
    return NULL;
}

static void test_small_stack(void)
{
    enum { BC = 2, BD = 40, BH = 64, BW = 16, BS = BC * BD * BH * BW };
    static const int boxes[][6] = {
        {0, 0, 5, BD, BH, 1}, {0, 0, 0, BD, BH, BW}, {1, 2, 3, 30, 50, 2}};
    pcnn_dataset *files;
    OK(pcnn_dataset_open_volumes(path_of("big.txt"), BC, BD, BH, BW, PCNN_DTYPE_F64, 1, &files));
    float *a = malloc(sizeof(float) * 2 * BS), *b = malloc(sizeof(float) * 2 * BS);
    for (size_t q = 0; q < sizeof boxes / sizeof boxes[0]; q++) {
        const size_t floats = (size_t)2 * BC * boxes[q][3] * boxes[q][4] * boxes[q][5];
        stack_job j = {files, boxes[q], boxes[q] + 3, a, PCNN_ERR_INTERNAL};
        pthread_attr_t attr;
        pthread_t t;
        CHECK(pthread_attr_init(&attr) == 0 && pthread_attr_setstacksize(&attr, 128 << 10) == 0 &&
                  pthread_create(&t, &attr, read_on_small_stack, &j) == 0 &&
                  pthread_join(t, NULL) == 0,
              "small-stack thread");
        pthread_attr_destroy(&attr);
        CHECK(j.status == PCNN_OK, "box %zu on a small stack: %s", q, pcnn_status_str(j.status));
        OK(pcnn_dataset_batch_box(files, 0, 2, boxes[q], boxes[q] + 3, b, NULL, NULL));
        CHECK(memcmp(a, b, floats * sizeof *a) == 0, "box %zu differs on a small stack", q);
    }
    free(a);
    free(b);
    pcnn_dataset_destroy(&files);
}

/* A tiny 3D regression net: training and evaluation from files equal the
 * same from memory, bit for bit (the same batches reach the same steps). */
static void build(pcnn_net **out)
{
    pcnn_net *net;
    pcnn_layer *l;
    OK(pcnn_net_create(&net));
    OK(pcnn_net_input3d(net, C, D, H, W, &l));
    OK(pcnn_conv3d(net, l, 3, 3, 1, 1, 1, &l));
    OK(pcnn_leaky_relu(net, l, 0.01f, &l));
    OK(pcnn_avgpool3d(net, l, 3, 2, 1, &l));
    OK(pcnn_flatten(net, l, &l));
    OK(pcnn_dense(net, l, T, 1, &l));
    OK(pcnn_net_set_loss(net, l, PCNN_LOSS_MSE));
    OK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_ADAM));
    OK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 1e-3));
    OK(pcnn_net_finalize(net, 3));
    *out = net;
}

static void test_training(void)
{
    pcnn_dataset *mem, *files;
    OK(pcnn_dataset_create3d(N, C, D, H, W, data, NULL, targets, T, &mem));
    OK(pcnn_dataset_open_volumes(path_of("m_f64.txt"), C, D, H, W, PCNN_DTYPE_F64, T, &files));
    OK(pcnn_dataset_set_prefetch(files, 2));
    pcnn_net *a, *b;
    build(&a);
    build(&b);
    double la[3], lb[3], ea, eb;
    for (int e = 0; e < 3; e++) {
        OK(pcnn_dataset_shuffle(mem, 1, (uint64_t)e));
        OK(pcnn_dataset_shuffle(files, 1, (uint64_t)e));
        OK(pcnn_net_train_epoch(a, mem, 3, &la[e]));
        OK(pcnn_net_train_epoch(b, files, 3, &lb[e]));
        CHECK(la[e] == lb[e], "epoch %d: loss %.9g from memory, %.9g from files", e, la[e],
              lb[e]);
    }
    CHECK(la[2] < la[0], "the loss fell: %g -> %g", la[0], la[2]);
    OK(pcnn_net_evaluate(a, mem, &ea, NULL));
    OK(pcnn_net_evaluate(b, files, &eb, NULL));
    CHECK(ea == eb && ea > 0, "evaluate %.9g vs %.9g", ea, eb);
    /* A file cut mid-way fails the epoch with the file's name. */
    CHECK(truncate(path_of("s3_f64.npy"), 200) == 0, "truncate");
    EXPECT_FAIL(pcnn_net_evaluate(b, files, &eb, NULL), PCNN_ERR_CORRUPT, "s3_f64.npy");
    write_sample(3, 1, "s3_f64.npy");
    pcnn_net_destroy(&a);
    pcnn_net_destroy(&b);
    pcnn_dataset_destroy(&mem);
    pcnn_dataset_destroy(&files);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/pcnn_volumes_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    for (int k = 0; k < N; k++)
        for (int i = 0; i < S; i++) data[k * S + i] = value(k, i);
    for (int k = 0; k < N * T; k++) targets[k] = (float)sin(k * 0.7) * 0.5f;
    write_dataset(0);
    write_dataset(1);

    test_open_and_read();
    test_malformed();
    test_prefetch();
    test_big_boxes();
    test_small_stack();
    test_special_files();
    test_training();

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    if (failures) printf("%d failure(s)\n", failures);
    else printf("all volume tests passed\n");
    return failures ? 1 : 0;
}
