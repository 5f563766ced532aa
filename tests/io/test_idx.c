/* IDX loading: malformed files (each with its specific status and message)
 * and the real Fashion-MNIST files.
 *
 *   test_idx malformed   synthetic files in a temporary directory
 *   test_idx fashion     /usr/share/datasets/fashion-mnist (or
 *                        $PCNN_FASHION_MNIST_DIR); exit 77 (skip) if absent
 *   test_idx             both */
#define _DEFAULT_SOURCE /* mkdtemp, getrusage */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "core/memory.h"
#include "data/dataset.h"
#include "pcnn.h"

#define SKIP 77

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

/* A call must fail with `want` and a message containing `text`. */
#define EXPECT_FAIL(call, want, text)                                                     \
    do {                                                                                  \
        pcnn_status got_ = (call);                                                        \
        const char *msg_ = pcnn_last_error();                                             \
        if (getenv("PCNN_TEST_VERBOSE")) printf("  %-12s %s\n", pcnn_status_str(got_), msg_); \
        CHECK(got_ == (want) && strstr(msg_, (text)) != NULL,                             \
              "%s gave %d (%s), message \"%s\"; want %d (%s) mentioning \"%s\"", #call,   \
              (int)got_, pcnn_status_str(got_), msg_, (int)(want), pcnn_status_str(want), \
              (text));                                                                    \
    } while (0)

static char dir[64];

static const char *tmp_path(const char *name)
{
    static char paths[8][128];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, 128, "%s/%s", dir, name);
    return p;
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len)) {
        fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
    fclose(f);
}

static void write_gz(const char *path, const void *data, size_t len)
{
    gzFile g = gzopen(path, "wb");
    if (!g || (len && gzwrite(g, data, (unsigned)len) != (int)len) || gzclose(g) != Z_OK) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

static unsigned char *read_whole(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) exit(1);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    if (!b || fread(b, 1, (size_t)n, f) != (size_t)n) exit(1);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* An IDX file with the given magic and dims followed by `data_len` bytes
 * (data may be NULL: then bytes are i * 37 mod 256).  Returns its length. */
static size_t make_idx(unsigned char *buf, uint32_t magic, int ndims, const uint32_t *dims,
                       const unsigned char *data, size_t data_len)
{
    put32(buf, magic);
    for (int d = 0; d < ndims; d++) put32(buf + 4 + 4 * d, dims[d]);
    size_t h = 4 + 4 * (size_t)ndims;
    for (size_t i = 0; i < data_len; i++) buf[h + i] = data ? data[i] : (unsigned char)(i * 37);
    return h + data_len;
}

static long max_rss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* --- synthetic files ---------------------------------------------------- */

enum { N = 3, H = 2, W = 4 };
static unsigned char img[64], lbl[16];
static size_t img_len, lbl_len;
static const unsigned char labels3[N] = {0, 7, 255};

static void check_small_dataset(pcnn_dataset *d, float mean, float std, const char *what)
{
    int n = 0, c = 0, h = 0, w = 0;
    CHECK(pcnn_dataset_info(d, &n, &c, &h, &w) == PCNN_OK, "%s: info", what);
    CHECK(n == N && c == 1 && h == H && w == W, "%s: shape %d %d %d %d", what, n, c, h, w);
    float x[N * H * W];
    int32_t l[N];
    CHECK(pcnn_dataset_batch(d, 0, N, x, l, NULL) == PCNN_OK, "%s: batch: %s", what,
          pcnn_last_error());
    for (int i = 0; i < N * H * W; i++) {
        float v = (float)img[16 + i] / 255.0f;
        if (std > 0) v = (v - mean) / std;
        CHECK(x[i] == v, "%s: pixel %d is %.9g, want %.9g", what, i, x[i], v);
    }
    for (int i = 0; i < N; i++)
        CHECK(l[i] == labels3[i], "%s: label %d is %d", what, i, (int)l[i]);
    CHECK(dataset_num_classes(d) == 256, "%s: %d classes", what, dataset_num_classes(d));
}

static void test_valid(void)
{
    pcnn_dataset *d = NULL;
    write_file(tmp_path("img"), img, img_len);
    write_file(tmp_path("lbl"), lbl, lbl_len);
    CHECK(pcnn_dataset_load_idx(tmp_path("img"), tmp_path("lbl"), 0, 0, &d) == PCNN_OK,
          "plain: %s", pcnn_last_error());
    if (d) check_small_dataset(d, 0, 0, "plain");
    pcnn_dataset_destroy(&d);
    CHECK(pcnn_dataset_load_idx(tmp_path("img"), tmp_path("lbl"), 0.5f, 0.25f, &d) == PCNN_OK,
          "normalised: %s", pcnn_last_error());
    if (d) check_small_dataset(d, 0.5f, 0.25f, "normalised");
    pcnn_dataset_destroy(&d);
    /* std == 0 means no normalisation whatever the mean. */
    CHECK(pcnn_dataset_load_idx(tmp_path("img"), tmp_path("lbl"), 3.0f, 0, &d) == PCNN_OK,
          "std 0: %s", pcnn_last_error());
    if (d) check_small_dataset(d, 3.0f, 0, "std 0");
    pcnn_dataset_destroy(&d);

    /* gzip, detected from the content whatever the name; one file gzipped
     * and the other plain. */
    write_gz(tmp_path("img.gz"), img, img_len);
    CHECK(pcnn_dataset_load_idx(tmp_path("img.gz"), tmp_path("lbl"), 0, 0, &d) == PCNN_OK,
          "gzip: %s", pcnn_last_error());
    if (d) check_small_dataset(d, 0, 0, "gzip");
    pcnn_dataset_destroy(&d);

    /* Concatenated gzip members are one valid gzip file. */
    write_gz(tmp_path("a.gz"), img, 10);
    write_gz(tmp_path("b.gz"), img + 10, img_len - 10);
    size_t la, lb;
    unsigned char *a = read_whole(tmp_path("a.gz"), &la), *b = read_whole(tmp_path("b.gz"), &lb);
    unsigned char cat[512];
    memcpy(cat, a, la);
    memcpy(cat + la, b, lb);
    write_file(tmp_path("cat.gz"), cat, la + lb);
    CHECK(pcnn_dataset_load_idx(tmp_path("cat.gz"), tmp_path("lbl"), 0, 0, &d) == PCNN_OK,
          "multi-member gzip: %s", pcnn_last_error());
    if (d) check_small_dataset(d, 0, 0, "multi-member gzip");
    pcnn_dataset_destroy(&d);

    /* gzip followed by garbage is not accepted silently. */
    memcpy(cat + la, "junk", 4);
    write_file(tmp_path("trail.gz"), cat, la + 4);
    EXPECT_FAIL(pcnn_dataset_load_idx(tmp_path("trail.gz"), tmp_path("lbl"), 0, 0, &d),
                PCNN_ERR_CORRUPT, "trailing garbage after the gzip stream");
    /* Truncated gzip stream. */
    write_file(tmp_path("trunc.gz"), b, lb - 5);
    EXPECT_FAIL(pcnn_dataset_load_idx(tmp_path("trunc.gz"), tmp_path("lbl"), 0, 0, &d),
                PCNN_ERR_CORRUPT, "truncated gzip stream");
    /* Corrupted CRC. */
    memcpy(cat, b, lb);
    cat[lb - 6] ^= 0x55;
    write_file(tmp_path("crc.gz"), cat, lb);
    EXPECT_FAIL(pcnn_dataset_load_idx(tmp_path("crc.gz"), tmp_path("lbl"), 0, 0, &d),
                PCNN_ERR_CORRUPT, "bad gzip data");
    free(a);
    free(b);
}

static void test_malformed(void)
{
    pcnn_dataset *const sentinel = (pcnn_dataset *)&failures;
    pcnn_dataset *d = sentinel;
    unsigned char buf[256];
    /* tmp_path's buffers rotate: keep copies of the paths used throughout. */
    char good_img[128], good_lbl[128], missing[128];
    snprintf(good_img, sizeof good_img, "%s", tmp_path("good_img"));
    snprintf(good_lbl, sizeof good_lbl, "%s", tmp_path("good_lbl"));
    snprintf(missing, sizeof missing, "%s", tmp_path("does-not-exist"));
    write_file(good_img, img, img_len);
    write_file(good_lbl, lbl, lbl_len);

    /* Missing file: IO, naming the path and the system's reason. */
    EXPECT_FAIL(pcnn_dataset_load_idx(missing, good_lbl, 0, 0, &d), PCNN_ERR_IO, missing);
    EXPECT_FAIL(pcnn_dataset_load_idx(good_img, missing, 0, 0, &d), PCNN_ERR_IO,
                "No such file or directory");
    /* A directory opens but cannot be read. */
    EXPECT_FAIL(pcnn_dataset_load_idx(dir, good_lbl, 0, 0, &d), PCNN_ERR_IO, dir);

    /* Empty file. */
    write_file(tmp_path("empty"), "", 0);
    EXPECT_FAIL(pcnn_dataset_load_idx(tmp_path("empty"), good_lbl, 0, 0, &d), PCNN_ERR_CORRUPT,
                "too short");
    /* Wrong magic: not IDX at all, wrong element type, wrong dims (a labels
     * file given as images and vice versa). */
    write_file(tmp_path("text"), "hello, world\n", 13);
    EXPECT_FAIL(pcnn_dataset_load_idx(tmp_path("text"), good_lbl, 0, 0, &d), PCNN_ERR_CORRUPT,
                "not an IDX file");
    memcpy(buf, img, img_len);
    buf[2] = 0x0d; /* float */
    write_file(tmp_path("float"), buf, img_len);
    EXPECT_FAIL(pcnn_dataset_load_idx(tmp_path("float"), good_lbl, 0, 0, &d), PCNN_ERR_CORRUPT,
                "not unsigned byte");
    EXPECT_FAIL(pcnn_dataset_load_idx(good_lbl, good_lbl, 0, 0, &d), PCNN_ERR_CORRUPT,
                "1 dimensions, expected 3");
    EXPECT_FAIL(pcnn_dataset_load_idx(good_img, good_img, 0, 0, &d), PCNN_ERR_CORRUPT,
                "3 dimensions, expected 1");
    uint32_t dims2[2] = {N, H * W};
    size_t len = make_idx(buf, 0x00000802, 2, dims2, img + 16, N * H * W);
    write_file(tmp_path("dims2"), buf, len);
    EXPECT_FAIL(pcnn_dataset_load_idx(tmp_path("dims2"), good_lbl, 0, 0, &d), PCNN_ERR_CORRUPT,
                "bad magic 0x00000802");

    /* Truncated data, truncated header, trailing garbage. */
    write_file(tmp_path("short"), img, img_len - 1);
    EXPECT_FAIL(pcnn_dataset_load_idx(tmp_path("short"), good_lbl, 0, 0, &d), PCNN_ERR_CORRUPT,
                "truncated: 23 data bytes, header declares 24");
    write_file(tmp_path("hdr"), img, 10);
    EXPECT_FAIL(pcnn_dataset_load_idx(tmp_path("hdr"), good_lbl, 0, 0, &d), PCNN_ERR_CORRUPT,
                "truncated header");
    memcpy(buf, lbl, lbl_len);
    buf[lbl_len] = 1;
    write_file(tmp_path("long_lbl"), buf, lbl_len + 1);
    EXPECT_FAIL(pcnn_dataset_load_idx(good_img, tmp_path("long_lbl"), 0, 0, &d),
                PCNN_ERR_CORRUPT, "1 bytes of trailing garbage");

    /* Count mismatch. */
    uint32_t two = 2;
    len = make_idx(buf, 0x00000801, 1, &two, labels3, 2);
    write_file(tmp_path("lbl2"), buf, len);
    EXPECT_FAIL(pcnn_dataset_load_idx(good_img, tmp_path("lbl2"), 0, 0, &d), PCNN_ERR_CORRUPT,
                "count mismatch");
    CHECK(strstr(pcnn_last_error(), "3 images") && strstr(pcnn_last_error(), "2 labels"),
          "mismatch message \"%s\" lacks the counts", pcnn_last_error());

    /* Zero dimension. */
    uint32_t zero[3] = {N, 0, W};
    len = make_idx(buf, 0x00000803, 3, zero, NULL, 0);
    write_file(tmp_path("zero"), buf, len);
    EXPECT_FAIL(pcnn_dataset_load_idx(tmp_path("zero"), good_lbl, 0, 0, &d), PCNN_ERR_CORRUPT,
                "dimension 1 is 0");

    /* Huge declared sizes: over the limit, and under it but absent.  Neither
     * may allocate what the header declares. */
    long rss0 = max_rss_kib();
    uint32_t huge[3] = {0xffffffffu, 0xffffffffu, 0xffffffffu};
    len = make_idx(buf, 0x00000803, 3, huge, NULL, 8);
    write_file(tmp_path("huge"), buf, len);
    EXPECT_FAIL(pcnn_dataset_load_idx(tmp_path("huge"), good_lbl, 0, 0, &d), PCNN_ERR_CORRUPT,
                "exceeds the limit");
    uint32_t big[3] = {65536, 256, 256}; /* 2^32 bytes: over by the product only */
    len = make_idx(buf, 0x00000803, 3, big, NULL, 8);
    write_file(tmp_path("big"), buf, len);
    EXPECT_FAIL(pcnn_dataset_load_idx(tmp_path("big"), good_lbl, 0, 0, &d), PCNN_ERR_CORRUPT,
                "exceeds the limit");
    uint32_t fits[3] = {1, 32768, 65535}; /* 2147450880 bytes: allowed, but absent */
    len = make_idx(buf, 0x00000803, 3, fits, NULL, 100);
    write_file(tmp_path("fits"), buf, len);
    EXPECT_FAIL(pcnn_dataset_load_idx(tmp_path("fits"), good_lbl, 0, 0, &d), PCNN_ERR_CORRUPT,
                "truncated: 100 data bytes, header declares 2147450880");
    write_gz(tmp_path("fits.gz"), buf, len);
    EXPECT_FAIL(pcnn_dataset_load_idx(tmp_path("fits.gz"), good_lbl, 0, 0, &d),
                PCNN_ERR_CORRUPT, "truncated: 100 data bytes");
    long grew = max_rss_kib() - rss0;
    CHECK(grew < 32 * 1024, "huge declared sizes grew the peak RSS by %ld KiB", grew);

    /* gzip magic followed by garbage. */
    unsigned char garbage[200] = {0x1f, 0x8b};
    for (int i = 2; i < 200; i++) garbage[i] = (unsigned char)(i * 97 + 13);
    write_file(tmp_path("garbage.gz"), garbage, sizeof garbage);
    EXPECT_FAIL(pcnn_dataset_load_idx(tmp_path("garbage.gz"), good_lbl, 0, 0, &d),
                PCNN_ERR_CORRUPT, "bad gzip data");
    write_file(tmp_path("magic.gz"), garbage, 2);
    EXPECT_FAIL(pcnn_dataset_load_idx(tmp_path("magic.gz"), good_lbl, 0, 0, &d),
                PCNN_ERR_CORRUPT, "truncated gzip stream");
    /* A valid gzip of a wrong IDX file is reported as the IDX problem. */
    write_gz(tmp_path("text.gz"), "hello, world\n", 13);
    EXPECT_FAIL(pcnn_dataset_load_idx(tmp_path("text.gz"), good_lbl, 0, 0, &d),
                PCNN_ERR_CORRUPT, "not an IDX file");

    /* Arguments. */
    EXPECT_FAIL(pcnn_dataset_load_idx(NULL, good_lbl, 0, 0, &d), PCNN_ERR_INVALID_ARGUMENT,
                "images_path");
    EXPECT_FAIL(pcnn_dataset_load_idx(good_img, NULL, 0, 0, &d), PCNN_ERR_INVALID_ARGUMENT,
                "labels_path");
    EXPECT_FAIL(pcnn_dataset_load_idx(good_img, good_lbl, 0, 0, NULL), PCNN_ERR_INVALID_ARGUMENT,
                "out");
    EXPECT_FAIL(pcnn_dataset_load_idx(good_img, good_lbl, 0, -1, &d), PCNN_ERR_INVALID_ARGUMENT,
                "std -1");
    EXPECT_FAIL(pcnn_dataset_load_idx(good_img, good_lbl, 0, NAN, &d), PCNN_ERR_INVALID_ARGUMENT,
                "std nan");
    EXPECT_FAIL(pcnn_dataset_load_idx(good_img, good_lbl, 0, INFINITY, &d),
                PCNN_ERR_INVALID_ARGUMENT, "std inf");
    EXPECT_FAIL(pcnn_dataset_load_idx(good_img, good_lbl, NAN, 1, &d), PCNN_ERR_INVALID_ARGUMENT,
                "mean nan");
    /* Arguments are checked before any file is touched. */
    EXPECT_FAIL(pcnn_dataset_load_idx(missing, good_lbl, NAN, 1, &d), PCNN_ERR_INVALID_ARGUMENT,
                "mean");
    CHECK(d == sentinel, "out was written by a failing call");
}

/* The internal pieces the fuzzer drives, at their edges. */
static void test_internal(void)
{
    idx_array a;
    EXPECT_FAIL(idx_parse(NULL, 0, 1, "nothing", &a), PCNN_ERR_CORRUPT, "'nothing': 0 bytes");
    EXPECT_FAIL(idx_parse(img, img_len, 4, "x", &a), PCNN_ERR_INVALID_ARGUMENT, "bad arguments");
    CHECK(idx_parse(img, img_len, 3, "img", &a) == PCNN_OK, "%s", pcnn_last_error());
    CHECK(a.ndims == 3 && a.dims[0] == N && a.dims[1] == H && a.dims[2] == W &&
              a.count == N * H * W && a.data == img + 16,
          "parsed %d dims %d %d %d count %zu", a.ndims, a.dims[0], a.dims[1], a.dims[2],
          a.count);
    /* A one-byte labels file with label 255 is fine. */
    unsigned char one[9] = {0, 0, 8, 1, 0, 0, 0, 1, 255};
    CHECK(idx_parse(one, 9, 1, "one", &a) == PCNN_OK && a.count == 1 && a.data[0] == 255,
          "%s", pcnn_last_error());

    /* Decompression is capped exactly. */
    unsigned char zeros[4096] = {0};
    write_gz(tmp_path("zeros.gz"), zeros, sizeof zeros);
    size_t zlen;
    unsigned char *z = read_whole(tmp_path("zeros.gz"), &zlen);
    unsigned char *out = NULL;
    size_t out_len = 0;
    CHECK(idx_gunzip(z, zlen, 4096, "zeros", &out, &out_len) == PCNN_OK && out_len == 4096,
          "gunzip at the cap: %s", pcnn_last_error());
    mem_free(out);
    out = NULL;
    EXPECT_FAIL(idx_gunzip(z, zlen, 4095, "zeros", &out, &out_len), PCNN_ERR_CORRUPT,
                "decompresses to more than 4095 bytes");
    CHECK(out == NULL, "out written on failure");
    EXPECT_FAIL(idx_gunzip(z, 0, 100, "empty", &out, &out_len), PCNN_ERR_CORRUPT,
                "truncated gzip");
    free(z);

    /* Reading is capped too. */
    write_file(tmp_path("1000"), zeros, 1000);
    CHECK(idx_read_file(tmp_path("1000"), 1000, &out, &out_len) == PCNN_OK && out_len == 1000,
          "read at the cap: %s", pcnn_last_error());
    mem_free(out);
    EXPECT_FAIL(idx_read_file(tmp_path("1000"), 999, &out, &out_len), PCNN_ERR_CORRUPT,
                "larger than the limit of 999 bytes");

    /* Buffers straight to a dataset. */
    pcnn_dataset *d = NULL;
    CHECK(idx_dataset_from_buffers(img, img_len, "i", lbl, lbl_len, "l", 0, 0, &d) == PCNN_OK,
          "%s", pcnn_last_error());
    if (d) check_small_dataset(d, 0, 0, "from buffers");
    pcnn_dataset_destroy(&d);
}

static int run_malformed(void)
{
    snprintf(dir, sizeof dir, "%s", "/tmp/pcnn_test_idx_XXXXXX");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    uint32_t dims[3] = {N, H, W};
    img_len = make_idx(img, 0x00000803, 3, dims, NULL, N * H * W);
    uint32_t n = N;
    lbl_len = make_idx(lbl, 0x00000801, 1, &n, labels3, N);

    test_malformed(); /* first: its peak-RSS check wants a small baseline */
    test_valid();
    test_internal();

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return failures;
}

/* --- Fashion-MNIST ------------------------------------------------------ */

struct known_pixel {
    int sample, row, col, value;
};

static void check_fashion(const char *root, const char *prefix, int n_want,
                          const int first_labels[10], const struct known_pixel *px, int npx,
                          double pixel_sum)
{
    char ip[512], lp[512];
    snprintf(ip, sizeof ip, "%s/%s-images-idx3-ubyte.gz", root, prefix);
    snprintf(lp, sizeof lp, "%s/%s-labels-idx1-ubyte.gz", root, prefix);
    pcnn_dataset *d = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pcnn_status st = pcnn_dataset_load_idx(ip, lp, 0, 0, &d);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK(st == PCNN_OK, "%s: %s", prefix, pcnn_last_error());
    if (st != PCNN_OK) return;
    printf("%s: loaded in %.3f s\n", prefix,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    int n, c, h, w;
    pcnn_dataset_info(d, &n, &c, &h, &w);
    CHECK(n == n_want && c == 1 && h == 28 && w == 28, "%s: shape %d x %d x %d x %d", prefix, n,
          c, h, w);
    CHECK(dataset_num_classes(d) == 10, "%s: %d classes", prefix, dataset_num_classes(d));

    float *x = malloc((size_t)n * 784 * sizeof *x);
    int32_t *l = malloc((size_t)n * sizeof *l);
    if (!x || !l) exit(1);
    CHECK(pcnn_dataset_batch(d, 0, n, x, l, NULL) == PCNN_OK, "%s", pcnn_last_error());
    for (int i = 0; i < 10; i++)
        CHECK(l[i] == first_labels[i], "%s: label %d is %d, want %d", prefix, i, (int)l[i],
              first_labels[i]);
    int hist[10] = {0}, bad = 0;
    for (int i = 0; i < n; i++) {
        if (l[i] >= 0 && l[i] < 10) hist[l[i]]++;
        else bad++;
    }
    CHECK(bad == 0, "%s: %d labels outside 0..9", prefix, bad);
    for (int k = 0; k < 10; k++)
        CHECK(hist[k] == n / 10, "%s: class %d has %d samples", prefix, k, hist[k]);
    for (int i = 0; i < npx; i++) {
        float v = x[(size_t)px[i].sample * 784 + (size_t)px[i].row * 28 + (size_t)px[i].col];
        CHECK(v == (float)px[i].value / 255.0f, "%s: sample %d (%d, %d) is %.9g, want %d/255",
              prefix, px[i].sample, px[i].row, px[i].col, v, px[i].value);
    }
    double sum = 0;
    int off_grid = 0;
    for (size_t i = 0; i < (size_t)n * 784; i++) {
        float b = roundf(x[i] * 255.0f);
        if (x[i] != b / 255.0f) off_grid++;
        sum += b;
    }
    CHECK(off_grid == 0, "%s: %d pixels are not k/255", prefix, off_grid);
    CHECK(sum == pixel_sum, "%s: pixel byte sum %.0f, want %.0f", prefix, sum, pixel_sum);
    pcnn_dataset_destroy(&d);

    /* Normalised as torchvision's Normalize((0.2860,), (0.3530,)). */
    const float mean = 0.2860f, std = 0.3530f;
    CHECK(pcnn_dataset_load_idx(ip, lp, mean, std, &d) == PCNN_OK, "%s normalised: %s", prefix,
          pcnn_last_error());
    if (d) {
        float s[784];
        for (int i = 0; i < npx; i++) {
            pcnn_dataset_batch(d, px[i].sample, 1, s, NULL, NULL);
            float want = ((float)px[i].value / 255.0f - mean) / std;
            float v = s[px[i].row * 28 + px[i].col];
            CHECK(v == want, "%s normalised: sample %d is %.9g, want %.9g", prefix, px[i].sample,
                  v, want);
        }
    }
    pcnn_dataset_destroy(&d);
    free(x);
    free(l);
}

static int run_fashion(void)
{
    const char *root = getenv("PCNN_FASHION_MNIST_DIR");
    if (!root) root = "/usr/share/datasets/fashion-mnist";
    char probe[512];
    snprintf(probe, sizeof probe, "%s/train-images-idx3-ubyte.gz", root);
    struct stat sb;
    if (stat(probe, &sb) != 0) {
        printf("SKIP: %s absent\n", probe);
        return SKIP;
    }
    /* Values read with python3's gzip module. */
    static const int train_labels[10] = {9, 0, 0, 3, 0, 2, 7, 2, 5, 5};
    static const struct known_pixel train_px[] = {
        {0, 0, 0, 0}, {0, 14, 14, 217}, {0, 10, 20, 210}, {1, 5, 5, 226},
        {12345, 20, 7, 191}, {30000, 14, 14, 218}, {59999, 14, 14, 0}};
    static const int test_labels[10] = {9, 2, 1, 1, 6, 1, 4, 6, 5, 7};
    static const struct known_pixel test_px[] = {
        {0, 14, 14, 110}, {0, 10, 20, 157}, {1, 5, 5, 248}, {2345, 14, 14, 217},
        {2345, 10, 10, 35}, {9999, 14, 14, 132}};
    int before = failures;
    check_fashion(root, "train", 60000, train_labels, train_px, 7, 3431114169.0);
    check_fashion(root, "t10k", 10000, test_labels, test_px, 6, 573469082.0);
    return failures - before;
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "all";
    int all = strcmp(which, "all") == 0;
    int rc = 0;
    if (all || strcmp(which, "malformed") == 0) rc |= run_malformed() != 0;
    if (all || strcmp(which, "fashion") == 0) {
        int r = run_fashion();
        if (r == SKIP && !all) return SKIP;
        if (r != SKIP) rc |= r != 0;
    }
    if (!all && strcmp(which, "malformed") && strcmp(which, "fashion")) {
        fprintf(stderr, "usage: %s [malformed|fashion]\n", argv[0]);
        return 2;
    }
    printf("%s\n", rc ? "FAILED" : "ok");
    return rc;
}
