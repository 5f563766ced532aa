/* pcnn_dataset_open_hdf5 on files written with HDF5's C API (one process):
 *
 *   1. Every element type (int8/16/32, uint8/16, float16/32/64, big-endian
 *      too) reads as the C cast of the written values, bit for bit; boxes,
 *      channels-last, images, one file per sample (list and pattern),
 *      labels, the per-channel transform, prefetch.
 *   2. Hostile files: missing file, directory, FIFO (not waited on), not
 *      HDF5, truncated, a dataset missing, of an unsupported type or the
 *      wrong rank, files that disagree, bad labels and targets, a file
 *      replaced after open: a clear status naming file and dataset, and
 *      nothing printed by HDF5 (stderr stays empty). */
#define PCNN_EXPERIMENTAL
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5_write.h"
#include "pcnn.h"

static int failures, checks;
static char dir[64];

static void expect(bool ok, const char *what)
{
    checks++;
    if (!ok) failures++;
    printf("%s %s\n", ok ? "PASS" : "FAIL", what);
    fflush(stdout);
}

#define CK(call)                                                                         \
    do {                                                                                 \
        pcnn_status s_ = (call);                                                         \
        if (s_ != PCNN_OK) {                                                             \
            printf("FAIL %s:%d: %s -> %s\n", __FILE__, __LINE__, #call, pcnn_last_error()); \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

static const char *path_of(const char *name)
{
    static char buf[8][160];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, 160, "%s/%s", dir, name);
    return p;
}

/* A file with dataset "full" (rank dims) and "unitPar" (float targets of
 * tdims), values given in memory types. */
static void write_file(const char *name, hid_t ftype, hid_t mtype, int rank, const hsize_t *dims,
                       const void *x, int trank, const hsize_t *tdims, const float *t)
{
    const hid_t f = H5Fcreate(path_of(name), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    int bad = f < 0 || h5w_dataset(f, "full", ftype, mtype, rank, dims, NULL, x);
    if (t) bad |= h5w_dataset(f, "unitPar", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, trank, tdims, NULL, t);
    if (f >= 0) H5Fclose(f);
    if (bad) {
        printf("FAIL cannot write %s\n", name);
        exit(1);
    }
}

enum { N = 3, C = 2, D = 3, H = 4, W = 5, S = C * D * H * W };

/* 1. Element types. */
static void test_types(void)
{
    const hsize_t dims[5] = {N, C, D, H, W}, tdims[2] = {N, 2};
    float t[N * 2] = {0.5f, -1, 2, 3, 4, 5};
    double src[N * S];
    for (int i = 0; i < N * S; i++) src[i] = (double)((i * 7919) % 251) - 120.0 + (i % 3) * 0.25;
    struct {
        const char *name;
        hid_t ftype;
        bool integer, positive;
    } types[] = {
        {"int8", H5T_STD_I8LE, true, false},      {"int16", H5T_STD_I16LE, true, false},
        {"int32", H5T_STD_I32LE, true, false},    {"uint8", H5T_STD_U8LE, true, true},
        {"uint16", H5T_STD_U16LE, true, true},    {"float32", H5T_IEEE_F32LE, false, false},
        {"float64", H5T_IEEE_F64LE, false, false}, {"int16be", H5T_STD_I16BE, true, false},
        {"float64be", H5T_IEEE_F64BE, false, false},
    };
    for (size_t k = 0; k < sizeof types / sizeof *types; k++) {
        double v[N * S];
        float want[N * S];
        for (int i = 0; i < N * S; i++) {
            v[i] = types[k].integer ? floor(src[i]) : src[i] * 1.000001;
            if (types[k].positive) v[i] = fabs(v[i]);
            if (types[k].ftype == H5T_STD_I8LE) v[i] = fmin(v[i], 127.0); /* what int8 holds */
            want[i] = (float)v[i];
        }
        char name[64];
        snprintf(name, sizeof name, "t_%s.h5", types[k].name);
        write_file(name, types[k].ftype, H5T_NATIVE_DOUBLE, 5, dims, v, 2, tdims, t);
        pcnn_dataset *d;
        CK(pcnn_dataset_open_hdf5(path_of(name), NULL, NULL, PCNN_HDF5_VOLUMES, &d));
        float got[N * S], tg[N * 2];
        CK(pcnn_dataset_batch(d, 0, N, got, NULL, tg));
        char what[160];
        snprintf(what, sizeof what, "%s: the samples read are the C cast of the written "
                 "values, bit for bit; the targets too", types[k].name);
        expect(memcmp(got, want, sizeof got) == 0 && memcmp(tg, t, sizeof t) == 0, what);
        CK(pcnn_dataset_destroy(&d));
    }
    /* float16: HDF5's IEEE half (as numpy's float16), values it holds exactly. */
    const hid_t half = H5Tcopy(H5T_IEEE_F32LE);
    H5Tset_fields(half, 15, 10, 5, 0, 10);
    H5Tset_size(half, 2);
    H5Tset_ebias(half, 15);
    float v[N * S];
    for (int i = 0; i < N * S; i++) v[i] = (float)((i % 64) - 32) * 0.125f;
    v[0] = 65504.0f;         /* the largest half */
    v[1] = 6.103515625e-05f; /* the smallest normal */
    v[2] = 5.9604644775390625e-08f; /* the smallest subnormal */
    write_file("t_float16.h5", half, H5T_NATIVE_FLOAT, 5, dims, v, 2, tdims, t);
    H5Tclose(half);
    pcnn_dataset *d;
    CK(pcnn_dataset_open_hdf5(path_of("t_float16.h5"), NULL, NULL, PCNN_HDF5_VOLUMES, &d));
    float got[N * S];
    CK(pcnn_dataset_batch(d, 0, N, got, NULL, NULL));
    expect(memcmp(got, v, sizeof got) == 0, "float16 (largest, smallest normal and subnormal "
           "included) reads exactly");
    CK(pcnn_dataset_destroy(&d));
}

/* A box of sample k of an NCDHW float array. */
static float at(const float *x, int k, int c, int z, int y, int xx)
{
    return x[((((size_t)k * C + c) * D + z) * H + y) * W + xx];
}

static void test_layouts(void)
{
    const hsize_t tdims[2] = {N, 2};
    const float t[N * 2] = {1, 2, 3, 4, 5, 6};
    float x[N * S], xl[N * S];
    for (int i = 0; i < N * S; i++) x[i] = (float)i;
    /* channels-last copy: [n][z][y][x][c] */
    for (int k = 0; k < N; k++)
        for (int c = 0; c < C; c++)
            for (int z = 0; z < D; z++)
                for (int y = 0; y < H; y++)
                    for (int xx = 0; xx < W; xx++)
                        xl[((((size_t)k * D + z) * H + y) * W + xx) * C + c] = at(x, k, c, z, y, xx);
    const hsize_t cf[5] = {N, C, D, H, W}, cl[5] = {N, D, H, W, C};
    write_file("cf.h5", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 5, cf, x, 2, tdims, t);
    write_file("cl.h5", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 5, cl, xl, 2, tdims, t);
    pcnn_dataset *a, *b;
    CK(pcnn_dataset_open_hdf5(path_of("cf.h5"), "full", "unitPar", PCNN_HDF5_VOLUMES, &a));
    CK(pcnn_dataset_open_hdf5(path_of("cl.h5"), NULL, NULL,
                              PCNN_HDF5_VOLUMES | PCNN_HDF5_CHANNELS_LAST, &b));
    int n, c, dd, h, w;
    CK(pcnn_dataset_info3d(b, &n, &c, &dd, &h, &w));
    expect(n == N && c == C && dd == D && h == H && w == W,
           "channels-last (N, D, H, W, C) opens as (N, C, D, H, W) samples");
    const int bs[3] = {1, 1, 2}, bc[3] = {2, 3, 2};
    float ga[2 * C * 12], gb[2 * C * 12], want[2 * C * 12];
    CK(pcnn_dataset_batch_box(a, 1, 2, bs, bc, ga, NULL, NULL));
    CK(pcnn_dataset_batch_box(b, 1, 2, bs, bc, gb, NULL, NULL));
    int i = 0;
    for (int k = 1; k < 3; k++)
        for (int ch = 0; ch < C; ch++)
            for (int z = 0; z < 2; z++)
                for (int y = 0; y < 3; y++)
                    for (int xx = 0; xx < 2; xx++) want[i++] = at(x, k, ch, 1 + z, 1 + y, 2 + xx);
    expect(memcmp(ga, want, sizeof want) == 0 && memcmp(gb, want, sizeof want) == 0,
           "a box of 2 samples: channels-first and channels-last files give the same values");
    uint64_t bytes, meta;
    CK(pcnn_dataset_io_bytes(a, &bytes, &meta));
    expect(bytes == sizeof want, "the box read exactly its bytes from the contiguous file");

    /* Transform: channel 1 log1p, all scaled; prefetch on. */
    CK(pcnn_dataset_set_transform(a, -1, 0, 0.5f, 1.0f));
    CK(pcnn_dataset_set_transform(a, 1, 1, 2.0f, -1.0f));
    CK(pcnn_dataset_set_prefetch(a, 2));
    float g[N * S];
    for (int r = 0; r < 2; r++) CK(pcnn_dataset_batch(a, 0, N, g, NULL, NULL));
    bool ok = true;
    for (int k = 0; k < N; k++)
        for (int q = 0; q < C * D * H * W; q++) {
            const int ch = q / (D * H * W);
            const float v = x[(size_t)k * S + q];
            const float e = ch == 1 ? 2.0f * log1pf(v) + -1.0f : 0.5f * v + 1.0f;
            ok &= g[(size_t)k * S + q] == e;
        }
    expect(ok, "per-channel transforms (scale and shift, log1p) apply as read, prefetch on");
    float tmp[S];
    pcnn_dataset *mem;
    CK(pcnn_dataset_create3d(1, C, D, H, W, x, NULL, t, 2, &mem));
    expect(pcnn_dataset_set_transform(mem, 0, 1, 1, 0) == PCNN_ERR_INVALID_ARGUMENT &&
               pcnn_dataset_set_transform(a, C, 1, 1, 0) == PCNN_ERR_INVALID_ARGUMENT &&
               pcnn_dataset_set_transform(a, 0, 0, NAN, 0) == PCNN_ERR_INVALID_ARGUMENT,
           "set_transform refuses in-memory datasets, a channel outside [-1, C), NaN");
    (void)tmp;
    CK(pcnn_dataset_destroy(&mem));
    CK(pcnn_dataset_destroy(&a));
    CK(pcnn_dataset_destroy(&b));

    /* One file per sample: (C, D, H, W) and () / (K,) targets; a list and a pattern. */
    char list[600] = "";
    for (int k = 0; k < N; k++) {
        char name[32];
        snprintf(name, sizeof name, "per_%d.h5", k);
        const hsize_t one[4] = {C, D, H, W}, k2[1] = {2};
        write_file(name, H5T_STD_I16LE, H5T_NATIVE_FLOAT, 4, one, x + (size_t)k * S, 1, k2,
                   t + 2 * k);
        strcat(list, path_of(name));
        strcat(list, "\n");
    }
    pcnn_dataset *pl, *pp;
    CK(pcnn_dataset_open_hdf5(list, NULL, NULL, PCNN_HDF5_VOLUMES, &pl));
    CK(pcnn_dataset_open_hdf5(path_of("per_*.h5"), NULL, NULL, PCNN_HDF5_VOLUMES, &pp));
    float la[N * S], lb[N * S], ta[N * 2], tb[N * 2];
    float xr[N * S];
    for (int q = 0; q < N * S; q++) xr[q] = (float)(short)x[q];
    CK(pcnn_dataset_shuffle(pl, 7, 1));
    CK(pcnn_dataset_batch(pp, 0, N, lb, NULL, tb));
    CK(pcnn_dataset_shuffle(pl, 7, 0));
    CK(pcnn_dataset_batch(pl, 0, N, la, NULL, ta));
    int order[N];
    pcnn_dataset *ref;
    CK(pcnn_dataset_create3d(N, C, D, H, W, xr, NULL, t, 2, &ref));
    CK(pcnn_dataset_shuffle(ref, 7, 0));
    float lr[N * S], tr[N * 2];
    CK(pcnn_dataset_batch(ref, 0, N, lr, NULL, tr));
    (void)order;
    expect(memcmp(la, lr, sizeof la) == 0 && memcmp(ta, tr, sizeof ta) == 0 &&
               memcmp(lb, xr, sizeof lb) == 0 && memcmp(tb, t, sizeof tb) == 0,
           "one file per sample, by a list (shuffled) and by a pattern (sorted): the "
           "samples and targets of the files in order");
    CK(pcnn_dataset_destroy(&pl));
    CK(pcnn_dataset_destroy(&pp));
    CK(pcnn_dataset_destroy(&ref));

    /* Images with integer labels. */
    const hsize_t img[4] = {N, 1, H, W}, ldims[1] = {N};
    const int32_t labels[N] = {2, 0, 1};
    const hid_t f = H5Fcreate(path_of("img.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    h5w_dataset(f, "images", H5T_STD_U8LE, H5T_NATIVE_FLOAT, 4, img, NULL, x);
    h5w_dataset(f, "labels", H5T_STD_I64LE, H5T_NATIVE_INT32, 1, ldims, NULL, labels);
    H5Fclose(f);
    pcnn_dataset *im;
    CK(pcnn_dataset_open_hdf5(path_of("img.h5"), "images", "labels", PCNN_HDF5_IMAGES, &im));
    int32_t lg[N];
    float xi[N * H * W];
    int tc, classes;
    CK(pcnn_dataset_batch(im, 0, N, xi, lg, NULL));
    CK(pcnn_dataset_target_info(im, &tc, &classes));
    CK(pcnn_dataset_info(im, &n, &c, &h, &w));
    expect(memcmp(lg, labels, sizeof lg) == 0 && tc == 0 && classes == 3 && n == N && c == 1 &&
               h == H && w == W && xi[5] == 5.0f,
           "2D images (N, 1, H, W) of uint8 with int64 class labels");
    CK(pcnn_dataset_destroy(&im));
    CK(pcnn_dataset_open_hdf5(path_of("img.h5"), "images", "labels",
                              PCNN_HDF5_FLOAT_TARGETS, &im));
    float lf[N];
    CK(pcnn_dataset_target_info(im, &tc, NULL));
    CK(pcnn_dataset_batch(im, 0, N, xi, NULL, lf));
    expect(tc == 1 && lf[0] == 2.0f && lf[2] == 1.0f,
           "PCNN_HDF5_FLOAT_TARGETS reads integer labels as one float target");
    CK(pcnn_dataset_destroy(&im));
}

/* Expect the status and every fragment in the message. */
static void expect_refused(const char *paths, const char *in, const char *tg, int flags,
                           pcnn_status want, const char *frag1, const char *frag2,
                           const char *what)
{
    pcnn_dataset *d = NULL;
    const pcnn_status st = pcnn_dataset_open_hdf5(paths, in, tg, flags, &d);
    const char *msg = pcnn_last_error();
    const bool ok = st == want && d == NULL && (!frag1 || strstr(msg, frag1)) &&
                    (!frag2 || strstr(msg, frag2));
    char text[700];
    snprintf(text, sizeof text, "%s -> %s: %s", what, pcnn_status_str(st), msg);
    expect(ok, text);
    if (d) pcnn_dataset_destroy(&d);
}

static void test_hostile(void)
{
    const hsize_t dims[5] = {N, C, D, H, W}, tdims[2] = {N, 2};
    float x[N * S] = {0}, t[N * 2] = {0};
    write_file("good.h5", H5T_STD_I16LE, H5T_NATIVE_FLOAT, 5, dims, x, 2, tdims, t);
    expect_refused(path_of("missing.h5"), NULL, NULL, 1, PCNN_ERR_IO, "missing.h5",
                   "No such file", "a missing file");
    expect_refused(dir, NULL, NULL, 1, PCNN_ERR_IO, dir, "not a regular file", "a directory");
    mkfifo(path_of("fifo.h5"), 0600);
    expect_refused(path_of("fifo.h5"), NULL, NULL, 1, PCNN_ERR_IO, "fifo.h5",
                   "not a regular file", "a FIFO (refused, not waited on)");
    FILE *junk = fopen(path_of("junk.h5"), "wb");
    fputs("not an HDF5 file at all, just text\n", junk);
    fclose(junk);
    expect_refused(path_of("junk.h5"), NULL, NULL, 1, PCNN_ERR_CORRUPT, "junk.h5",
                   "HDF5: ", "a text file");
    /* Truncated: the good file cut in half. */
    struct stat sb;
    stat(path_of("good.h5"), &sb);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "head -c %lld %s > %s", (long long)sb.st_size / 2,
             path_of("good.h5"), path_of("cut.h5"));
    if (system(cmd) != 0) printf("note: head failed\n");
    expect_refused(path_of("cut.h5"), NULL, NULL, 1, PCNN_ERR_CORRUPT, "cut.h5", "truncated",
                   "a file cut in half");
    expect_refused(path_of("good.h5"), "nothere", NULL, 1, PCNN_ERR_CORRUPT, "good.h5",
                   "no dataset 'nothere'", "a missing input dataset");
    expect_refused(path_of("good.h5"), NULL, "nolabels", 1, PCNN_ERR_CORRUPT, "good.h5",
                   "no dataset 'nolabels'", "a missing target dataset");
    expect_refused(path_of("good.h5"), NULL, NULL, PCNN_HDF5_IMAGES, PCNN_ERR_CORRUPT,
                   "dataset 'full' has shape (3, 2, 3, 4, 5)", "PCNN_HDF5_VOLUMES",
                   "volumes opened as images (wrong rank)");
    int64_t big[N * S] = {0};
    write_file("int64.h5", H5T_STD_I64LE, H5T_NATIVE_INT64, 5, dims, big, 2, tdims, t);
    expect_refused(path_of("int64.h5"), NULL, NULL, 1, PCNN_ERR_CORRUPT, "int64.h5",
                   "holds int64; supported", "an int64 dataset");
    const hsize_t other[5] = {N, C, D, H, W + 1};
    float x2[N * C * D * H * (W + 1)] = {0};
    write_file("wide.h5", H5T_STD_I16LE, H5T_NATIVE_FLOAT, 5, other, x2, 2, tdims, t);
    char two[400];
    snprintf(two, sizeof two, "%s\n%s\n", path_of("good.h5"), path_of("wide.h5"));
    expect_refused(two, NULL, NULL, 1, PCNN_ERR_CORRUPT, "wide.h5", "(3, 2, 3, 4, 6) but",
                   "two files of other shapes");
    write_file("f32.h5", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 5, dims, x, 2, tdims, t);
    snprintf(two, sizeof two, "%s\n%s", path_of("good.h5"), path_of("f32.h5"));
    expect_refused(two, NULL, NULL, 1, PCNN_ERR_CORRUPT, "is float32", "int16",
                   "two files of other element types");
    const hsize_t short_t[2] = {N - 1, 2};
    write_file("fewt.h5", H5T_STD_I16LE, H5T_NATIVE_FLOAT, 5, dims, x, 2, short_t, t);
    expect_refused(path_of("fewt.h5"), NULL, NULL, 1, PCNN_ERR_CORRUPT, "'unitPar' has shape "
                   "(2, 2)", "3 samples", "targets for fewer samples");
    float nan_t[N * 2] = {0, 0, NAN, 0, 0, 0};
    write_file("nant.h5", H5T_STD_I16LE, H5T_NATIVE_FLOAT, 5, dims, x, 2, tdims, nan_t);
    expect_refused(path_of("nant.h5"), NULL, NULL, 1, PCNN_ERR_CORRUPT, "nant.h5", "nan",
                   "a NaN target");
    {
        const hid_t f = H5Fcreate(path_of("neg.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        const int32_t lab[N] = {0, -1, 2};
        const hsize_t ld[1] = {N};
        h5w_dataset(f, "full", H5T_STD_I16LE, H5T_NATIVE_FLOAT, 5, dims, NULL, x);
        h5w_dataset(f, "unitPar", H5T_STD_I32LE, H5T_NATIVE_INT32, 1, ld, NULL, lab);
        H5Fclose(f);
    }
    expect_refused(path_of("neg.h5"), NULL, NULL, 1, PCNN_ERR_CORRUPT, "label -1 of sample 1",
                   NULL, "a negative label");
    expect_refused(path_of("none_*.h5"), NULL, NULL, 1, PCNN_ERR_INVALID_ARGUMENT,
                   "matches no file", NULL, "a pattern matching nothing");
    expect_refused(path_of("good.h5"), NULL, NULL, 64, PCNN_ERR_INVALID_ARGUMENT,
                   "unknown bits", NULL, "unknown flags");

    /* Replaced after open by a file of another shape: the next read says so. */
    write_file("swap.h5", H5T_STD_I16LE, H5T_NATIVE_FLOAT, 5, dims, x, 2, tdims, t);
    pcnn_dataset *d;
    CK(pcnn_dataset_open_hdf5(path_of("swap.h5"), NULL, NULL, 1, &d));
    write_file("swap.h5", H5T_STD_I16LE, H5T_NATIVE_FLOAT, 5, other, x2, 2, tdims, t);
    float got[S];
    pcnn_status st = pcnn_dataset_batch(d, 0, 1, got, NULL, NULL);
    char text[600];
    snprintf(text, sizeof text, "a file replaced after open by one of another shape -> %s: %s",
             pcnn_status_str(st), pcnn_last_error());
    expect(st == PCNN_ERR_CORRUPT && strstr(pcnn_last_error(), "swap.h5") &&
               strstr(pcnn_last_error(), "changed since"), text);
    /* ... and truncated after open, read ahead by the prefetch thread. */
    write_file("swap.h5", H5T_STD_I16LE, H5T_NATIVE_FLOAT, 5, dims, x, 2, tdims, t);
    CK(pcnn_dataset_destroy(&d));
    CK(pcnn_dataset_open_hdf5(path_of("swap.h5"), NULL, NULL, 1, &d));
    CK(pcnn_dataset_batch(d, 0, 1, got, NULL, NULL)); /* opened by this thread */
    stat(path_of("swap.h5"), &sb);
    if (truncate(path_of("swap.h5"), sb.st_size - 200) != 0) printf("note: truncate failed\n");
    st = pcnn_dataset_batch(d, 2, 1, got, NULL, NULL);
    snprintf(text, sizeof text, "a file truncated after open -> %s: %s", pcnn_status_str(st),
             pcnn_last_error());
    expect(st == PCNN_ERR_CORRUPT && strstr(pcnn_last_error(), "swap.h5"), text);
    CK(pcnn_dataset_destroy(&d));
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/pcnn_h5files_%d", (int)getpid());
    mkdir(dir, 0700);
    /* HDF5 must print nothing: stderr goes to a file we read at the end. */
    char errpath[128];
    snprintf(errpath, sizeof errpath, "%s.stderr", dir);
    fflush(stderr);
    const int saved = dup(2);
    const int errfd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(errfd, 2);
    test_types();
    test_layouts();
    test_hostile();
    fflush(stderr);
    dup2(saved, 2);
    struct stat sb;
    stat(errpath, &sb);
    expect(sb.st_size == 0, "HDF5 printed nothing on stderr (its error stack silenced)");
    if (sb.st_size) {
        char cmd[200];
        snprintf(cmd, sizeof cmd, "head -c 2000 %s", errpath);
        if (system(cmd) != 0) printf("note: head failed\n");
    }
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s %s", dir, errpath);
    if (system(cmd) != 0) printf("note: cleanup failed\n");
    printf("%d of %d checks passed\n", checks - failures, checks);
    return failures ? 1 : 0;
}
