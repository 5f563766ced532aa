/* A bounded mutation fuzz of HDF5 files: a small valid file (contiguous
 * and chunked) is mutated thousands of times (bytes set to random or
 * boundary values, runs overwritten, the file cut or grown), and every
 * mutant is opened and, when that succeeds, read whole and by a box.
 * Every call must return a status of the documented set with a message,
 * within the alarm (a hang kills the test), without a crash (run under
 * the ASan build, scripts/sanitize.sh, for memory errors).
 *   fuzz_hdf5 [iterations (3000)] [seed (1)] */
#define PCNN_EXPERIMENTAL
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5_write.h"
#include "pcnn.h"

enum { N = 3, C = 2, H = 5, W = 4, K = 2 };

static uint64_t rng_state;
static uint64_t next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*len + 1);
    if (b && fread(b, 1, *len, f) != *len) free(b), b = NULL;
    fclose(f);
    return b;
}

static int write_seed(const char *path, int chunked)
{
    short x[N * C * H * W];
    float t[N * K];
    for (int i = 0; i < N * C * H * W; i++) x[i] = (short)(i * 37 % 1001 - 500);
    for (int i = 0; i < N * K; i++) t[i] = (float)i / 4.0f;
    const hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t dims[4] = {N, C, H, W}, tdims[2] = {N, K}, chunk[4] = {1, 1, 3, 2};
    int bad = f < 0 || h5w_dataset(f, "full", H5T_STD_I16LE, H5T_NATIVE_SHORT, 4, dims,
                                   chunked ? chunk : NULL, x);
    bad |= h5w_dataset(f, "unitPar", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, tdims, NULL, t);
    if (f >= 0) H5Fclose(f);
    return bad;
}

/* A mutant of seed[0..len) into out (room for 2 * len + 64); its length. */
static size_t mutate(const unsigned char *seed, size_t len, unsigned char *out)
{
    static const unsigned char edge[] = {0x00, 0xff, 0x7f, 0x80, 0x01, 0xfe};
    memcpy(out, seed, len);
    size_t n = len;
    const int edits = 1 + (int)(next() % 8);
    for (int e = 0; e < edits; e++) {
        const uint64_t r = next();
        const size_t at = (size_t)(next() % n);
        switch (r % 10) {
        case 0: /* cut */
            n = at > 0 ? at : 1;
            break;
        case 1: { /* grow by random bytes */
            const size_t add = 1 + (size_t)(next() % 64);
            for (size_t i = 0; i < add; i++) out[n + i] = (unsigned char)next();
            n += add;
            break;
        }
        case 2: { /* overwrite a run */
            const size_t run = 1 + (size_t)(next() % 16);
            for (size_t i = at; i < at + run && i < n; i++) out[i] = (unsigned char)next();
            break;
        }
        case 3: case 4: case 5:
            out[at] = edge[next() % sizeof edge];
            break;
        default:
            out[at] ^= (unsigned char)(1u << (next() % 8));
        }
        if (n > 2 * len) n = 2 * len;
    }
    return n;
}

static int known(pcnn_status st)
{
    return st == PCNN_OK || st == PCNN_ERR_IO || st == PCNN_ERR_CORRUPT || st == PCNN_ERR_SHAPE ||
           st == PCNN_ERR_OUT_OF_MEMORY || st == PCNN_ERR_INVALID_ARGUMENT;
}

int main(int argc, char **argv)
{
    const long iterations = argc > 1 ? atol(argv[1]) : 3000;
    rng_state = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
    char seed_path[2][96], mutant[96];
    snprintf(mutant, sizeof mutant, "/tmp/pcnn_fuzz_%d.h5", (int)getpid());
    unsigned char *seed[2];
    size_t len[2];
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* the seeds' writer only */
    for (int k = 0; k < 2; k++) {
        snprintf(seed_path[k], sizeof seed_path[k], "/tmp/pcnn_fuzz_seed%d_%d.h5", k,
                 (int)getpid());
        if (write_seed(seed_path[k], k) || !(seed[k] = slurp(seed_path[k], &len[k]))) {
            fprintf(stderr, "cannot write the seed file %s\n", seed_path[k]);
            return 1;
        }
        remove(seed_path[k]);
    }
    unsigned char *buf = malloc(2 * (len[0] > len[1] ? len[0] : len[1]) + 64);
    float *x = malloc(sizeof(float) * N * C * H * W * 4096);
    float *t = malloc(sizeof(float) * K * 4096);
    long opened = 0, read_ok = 0, bad = 0, counts[32] = {0};
    for (long it = 0; it < iterations && buf && x && t; it++) {
        const int k = (int)(it % 2);
        const size_t n = mutate(seed[k], len[k], buf);
        FILE *f = fopen(mutant, "wb");
        if (!f || fwrite(buf, 1, n, f) != n) {
            fprintf(stderr, "cannot write %s\n", mutant);
            return 1;
        }
        fclose(f);
        alarm(20); /* a hang ends the test with SIGALRM */
        pcnn_dataset *d = NULL;
        pcnn_status st = pcnn_dataset_open_hdf5(mutant, NULL, NULL, PCNN_HDF5_FLOAT_TARGETS, &d);
        counts[st & 31]++;
        if (!known(st) || (st != PCNN_OK && (d || !*pcnn_last_error()))) {
            fprintf(stderr, "iteration %ld: open -> %s (%s), dataset %p\n", it,
                    pcnn_status_str(st), pcnn_last_error(), (void *)d);
            bad++;
        }
        if (st == PCNN_OK) {
            opened++;
            int count = 0, c = 0, h = 0, w = 0;
            int targets = 0;
            pcnn_dataset_info(d, &count, &c, &h, &w);
            pcnn_dataset_target_info(d, &targets, NULL);
            if (count > 0 && count <= 4096 && (size_t)c * h * w <= (size_t)N * C * H * W &&
                targets <= K) {
                const int box0[3] = {0, 0, 0}, box1[3] = {1, h > 1 ? h / 2 : 1, w};
                st = pcnn_dataset_batch(d, 0, count, x, NULL, t);
                const pcnn_status sb = pcnn_dataset_batch_box(d, 0, count, box0, box1, x, NULL, t);
                if (!known(st) || !known(sb)) {
                    fprintf(stderr, "iteration %ld: read -> %s / %s (%s)\n", it,
                            pcnn_status_str(st), pcnn_status_str(sb), pcnn_last_error());
                    bad++;
                }
                read_ok += st == PCNN_OK;
            }
            pcnn_dataset_destroy(&d);
        }
        alarm(0);
    }
    remove(mutant);
    printf("%ld mutants: %ld opened, %ld read whole; statuses:", iterations, opened, read_ok);
    for (int s = 0; s < 32; s++)
        if (counts[s]) printf(" %s %ld", pcnn_status_str((pcnn_status)s), counts[s]);
    printf("; %ld outside the contract\n", bad);
    free(buf), free(x), free(t), free(seed[0]), free(seed[1]);
    return bad ? 1 : 0;
}
