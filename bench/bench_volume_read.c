/* Box reads of file-backed volumes against whole-sample reads (seed 003
 * section 6: each rank reads only its part of a sample; WAVE2_SPEC T8: a
 * half box in <= 0.6x the time of the full sample).
 *
 *   bench_volume_read [--width 128] [--samples 4] [--reps 3] [--f64]
 *                     [--dir /tmp/pcnn_volume_bench]
 *
 * Writes SAMPLES universes of 4 x W^3 (.npy, float32 or float64) and a
 * manifest into DIR (kept for later runs of the same shape), then for each
 * box reads every sample once through pcnn_dataset_batch_box, cold (the
 * files' pages dropped from the page cache with posix_fadvise before each
 * pass) and warm (read again at once), best of REPS.  Boxes: the whole
 * sample, half along D (what a {2,1} split reads: whole planes, one pread
 * per channel), half along H (H x W planes: one pread per channel and
 * depth plane), half along W (half rows: one pread per row), and an
 * octant.  One JSON line per box: bytes read, seconds, MB/s and the ratio
 * of its time to the whole sample's. */
#define PCNN_EXPERIMENTAL /* file-backed volumes: pcnn.h section 9 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pcnn.h"
#include "bench_clock.h"

#define CK(call)                                                                          \
    do {                                                                                  \
        pcnn_status s_ = (call);                                                          \
        if (s_ != PCNN_OK) {                                                              \
            fprintf(stderr, "bench_volume_read: %s: %s\n", #call, pcnn_last_error());     \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

static const char *arg_str(int argc, char **argv, const char *name, const char *def)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name)) return argv[i + 1];
    return def;
}

static int has_flag(int argc, char **argv, const char *name)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], name)) return 1;
    return 0;
}

static char sample_path[64][1100];

/* Write the files (fsync'd: clean pages can be dropped) and the manifest. */
static void write_universes(const char *dir, int w, int samples, int f64)
{
    mkdir(dir, 0777);
    char manifest[1100];
    snprintf(manifest, sizeof manifest, "%s/manifest_%d_%s.txt", dir, w, f64 ? "f64" : "f32");
    const size_t n = (size_t)4 * w * w * w, elem = f64 ? 8 : 4;
    char dict[128];
    int len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, "
                       "'shape': (4, %d, %d, %d), }", f64 ? "<f8" : "<f4", w, w, w);
    const int total = (10 + len + 1 + 63) / 64 * 64;
    unsigned char head[128];
    memcpy(head, "\x93NUMPY\x01\x00", 8);
    head[8] = (unsigned char)((total - 10) & 0xff);
    head[9] = (unsigned char)((total - 10) >> 8);
    memcpy(head + 10, dict, (size_t)len);
    memset(head + 10 + len, ' ', (size_t)(total - 10 - len - 1));
    head[total - 1] = '\n';
    FILE *m = fopen(manifest, "w");
    if (!m) exit(1);
    unsigned char *body = malloc(n * elem);
    if (!body) exit(1);
    for (size_t i = 0; i < n * elem; i++) body[i] = (unsigned char)(i * 2654435761u >> 24);
    if (!f64) /* keep the float32 values finite: a small exponent in every 4th byte */
        for (size_t i = 3; i < n * elem; i += 4) body[i] = 0x3f;
    else
        for (size_t i = 7; i < n * elem; i += 8) body[i] = 0x3f;
    for (int s = 0; s < samples; s++) {
        snprintf(sample_path[s], sizeof sample_path[s], "%s/u%d_%d_%s.npy", dir, s, w,
                 f64 ? "f64" : "f32");
        struct stat sb;
        if (stat(sample_path[s], &sb) != 0 || (size_t)sb.st_size != total + n * elem) {
            FILE *f = fopen(sample_path[s], "wb");
            if (!f || fwrite(head, 1, (size_t)total, f) != (size_t)total ||
                fwrite(body, 1, n * elem, f) != n * elem || fflush(f) != 0 ||
                fsync(fileno(f)) != 0 || fclose(f) != 0) {
                fprintf(stderr, "bench_volume_read: cannot write %s\n", sample_path[s]);
                exit(1);
            }
        }
        fprintf(m, "u%d_%d_%s.npy 0 0 0 0\n", s, w, f64 ? "f64" : "f32");
    }
    free(body);
    fclose(m);
}

static void drop_cache(int samples)
{
    for (int s = 0; s < samples; s++) {
        int fd = open(sample_path[s], O_RDONLY);
        if (fd < 0) continue;
        fdatasync(fd);
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
}

int main(int argc, char **argv)
{
    if (has_flag(argc, argv, "--help")) {
        printf("usage: %s [--width 128] [--samples 4] [--reps 3] [--f64] [--dir DIR]\n",
               argv[0]);
        return 0;
    }
    const int w = atoi(arg_str(argc, argv, "--width", "128"));
    const int samples = atoi(arg_str(argc, argv, "--samples", "4"));
    const int reps = atoi(arg_str(argc, argv, "--reps", "3"));
    const int f64 = has_flag(argc, argv, "--f64");
    const char *dir = arg_str(argc, argv, "--dir", "/tmp/pcnn_volume_bench");
    if (w < 2 || samples < 1 || samples > 64 || reps < 1) {
        fprintf(stderr, "bench_volume_read: bad arguments\n");
        return 2;
    }
    write_universes(dir, w, samples, f64);
    char manifest[1100];
    snprintf(manifest, sizeof manifest, "%s/manifest_%d_%s.txt", dir, w, f64 ? "f64" : "f32");
    pcnn_dataset *d;
    CK(pcnn_dataset_open_volumes(manifest, 4, w, w, w, f64 ? PCNN_DTYPE_F64 : PCNN_DTYPE_F32, 4,
                                 &d));
    const int h = w / 2;
    const struct {
        const char *name;
        int start[3], count[3];
    } boxes[] = {
        {"whole", {0, 0, 0}, {w, w, w}},
        {"half_d", {0, 0, 0}, {h, w, w}},
        {"half_h", {0, 0, 0}, {w, h, w}},
        {"half_w", {0, 0, 0}, {w, w, h}},
        {"octant", {h, h, h}, {h, h, h}},
    };
    float *x = malloc((size_t)4 * w * w * w * sizeof *x), t[4];
    if (!x) return 1;
    double whole[2] = {0, 0};
    for (size_t b = 0; b < sizeof boxes / sizeof boxes[0]; b++) {
        double best[2] = {1e30, 1e30}; /* cold, warm */
        for (int r = 0; r < reps; r++) {
            drop_cache(samples);
            for (int pass = 0; pass < 2; pass++) {
                const double t0 = now();
                for (int s = 0; s < samples; s++)
                    CK(pcnn_dataset_batch_box(d, s, 1, boxes[b].start, boxes[b].count, x, NULL,
                                              t));
                const double dt = now() - t0;
                if (dt < best[pass]) best[pass] = dt;
            }
        }
        if (b == 0) whole[0] = best[0], whole[1] = best[1];
        const double bytes = (double)samples * 4 * boxes[b].count[0] * boxes[b].count[1] *
                             boxes[b].count[2] * (f64 ? 8 : 4);
        printf("{\"box\": \"%s\", \"width\": %d, \"dtype\": \"%s\", \"samples\": %d, "
               "\"mb_read\": %.1f, \"cold_s\": %.4f, \"warm_s\": %.4f, \"cold_mb_per_s\": %.0f, "
               "\"warm_mb_per_s\": %.0f, \"cold_vs_whole\": %.3f, \"warm_vs_whole\": %.3f}\n",
               boxes[b].name, w, f64 ? "float64" : "float32", samples, bytes / 1e6, best[0],
               best[1], bytes / 1e6 / best[0], bytes / 1e6 / best[1], best[0] / whole[0],
               best[1] / whole[1]);
        fflush(stdout);
    }
    free(x);
    CK(pcnn_dataset_destroy(&d));
    return 0;
}
