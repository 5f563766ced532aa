/* The performance model through the public API on one process: compute
 * calibration of a small network, prediction and its per-layer times, a
 * what-if for 64 ranks without any communicator, validation against the
 * network's own measurements, the model file (round trip, damage, another
 * version), and bad inputs with clear errors. */
#define PCNN_EXPERIMENTAL
#include <limits.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/expect.h"
#include "pcnn.h"

#define CK(call)                                                                        \
    do {                                                                                \
        pcnn_status s_ = (call);                                                        \
        if (s_ != PCNN_OK) {                                                            \
            printf("FAIL %s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call,             \
                   pcnn_status_str(s_), pcnn_last_error());                             \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

/* The call fails with `status` and its message contains `word`. */
#define EXPECT_ERR(call, status, word)                                                  \
    do {                                                                                \
        pcnn_status s_ = (call);                                                        \
        EXPECT(s_ == (status) && strstr(pcnn_last_error(), (word)) != NULL,              \
               "%s -> %s: \"%s\" (wanted %s with \"%s\")", #call, pcnn_status_str(s_),   \
               pcnn_last_error(), pcnn_status_str(status), (word));                     \
    } while (0)

static pcnn_net *small_net(int width)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, 3, 16, 16, &l));
    CK(pcnn_conv2d(net, l, width, 3, 1, 1, 1, &l));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_maxpool2d(net, l, 2, 2, 0, &l));
    CK(pcnn_conv2d(net, l, width, 3, 1, 1, 0, &l));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_dense(net, l, 10, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_MOMENTUM));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    CK(pcnn_net_finalize(net, 16));
    return net;
}

static void train(pcnn_net *net, int steps)
{
    const int n = 16;
    float *x = calloc((size_t)n * 3 * 16 * 16, sizeof *x);
    int32_t labels[16];
    /* Varied labels keep gradients away from denormal floats, which would
     * slow some kernels down many times over (not what is modelled). */
    for (int i = 0; i < n * 3 * 16 * 16; i++) x[i] = (float)((i * 7919) % 97) / 97.0f - 0.5f;
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < n; i++) labels[i] = (i * 3 + s) % 10;
        CK(pcnn_net_train_step(net, n, x, labels, NULL, NULL));
    }
    free(x);
}

static void flip_byte(const char *path, long at, int version)
{
    FILE *f = fopen(path, "r+b");
    fseek(f, at, SEEK_SET);
    int c = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(version ? version : c ^ 0x40, f);
    fclose(f);
}

/* The model file at path: read whole, and written back with its checksum
 * (FNV-1a 64 over all but the last 8 bytes) recomputed. */
static size_t read_model_file(const char *path, unsigned char *buf, size_t size)
{
    FILE *f = fopen(path, "rb");
    const size_t n = fread(buf, 1, size, f);
    fclose(f);
    return n;
}

static void write_model_file(const char *path, unsigned char *buf, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len - 8; i++) h = (h ^ buf[i]) * 0x100000001b3ull;
    for (int i = 0; i < 8; i++) buf[len - 8 + i] = (unsigned char)(h >> (8 * i));
    FILE *f = fopen(path, "wb");
    fwrite(buf, 1, len, f);
    fclose(f);
}

/* Rewrite the model file as an older format version wrote it: the link's
 * fields after poll_work (at byte 36: header 16, ranks 4, gamma 8,
 * poll_work 8) are poll_cpu (8 bytes, from version 3) and the memory
 * contention by size (4 doubles, from version 4); the ranks' pace is the
 * double before the collectives' repetition spreads (from version 5),
 * which are the 4 doubles before the checksum (from version 6). */
static void as_version(const char *path, int version)
{
    unsigned char buf[1 << 16];
    size_t n = read_model_file(path, buf, sizeof buf);
    if (version < 6) { /* the collectives' repetition spread */
        memmove(buf + n - 40, buf + n - 8, 8);
        n -= 32;
    }
    if (version < 5) {
        memmove(buf + n - 16, buf + n - 8, 8);
        n -= 8;
    }
    if (version < 4) {
        const size_t from = version == 2 ? 36 : 44, to = 76;
        memmove(buf + from, buf + to, n - to);
        n -= to - from;
    }
    buf[8] = (unsigned char)version;
    write_model_file(path, buf, n);
}

/* The double at byte `at` of the model file set to v (at < 0: from the
 * end).  The first memory contention factor is at byte 44, the ranks'
 * pace is at -48 (before the 4 spreads and the checksum). */
static void set_double(const char *path, long at, double v)
{
    unsigned char buf[1 << 16];
    const size_t n = read_model_file(path, buf, sizeof buf);
    const size_t where = at < 0 ? n - (size_t)-at : (size_t)at;
    uint64_t bits;
    memcpy(&bits, &v, 8);
    for (int i = 0; i < 8; i++) buf[where + i] = (unsigned char)(bits >> (8 * i));
    write_model_file(path, buf, n);
}

/* Knob `param` saved with a mark value, then the mark rewritten to `bad`
 * (the checksum made to fit): load refuses it. */
static void refused_in_file(pcnn_perfmodel *m, const char *path, pcnn_perf_param param, double bad)
{
    const double mark = 0.0009765625; /* in range for every knob here */
    double was;
    CK(pcnn_perfmodel_get_param(m, param, &was));
    CK(pcnn_perfmodel_set_param(m, param, mark));
    CK(pcnn_perfmodel_save(m, path));
    CK(pcnn_perfmodel_set_param(m, param, param == PCNN_PERF_ALPHA_S ? -1 : was));
    static unsigned char buf[1 << 16];
    const size_t len = read_model_file(path, buf, sizeof buf);
    size_t at = 16;
    while (at + 8 <= len && memcmp(buf + at, &mark, 8) != 0) at++;
    EXPECT(at + 8 <= len, "knob %d's value found in the file", (int)param);
    if (at + 8 > len) return;
    memcpy(buf + at, &bad, 8);
    write_model_file(path, buf, len);
    pcnn_perfmodel *back = NULL;
    EXPECT_ERR(pcnn_perfmodel_load(path, &back), PCNN_ERR_CORRUPT,
               "a parameter (pcnn_perfmodel_set_param) out of range");
    EXPECT(back == NULL, "knob %d = %g in a file: nothing loaded", (int)param, bad);
}

int main(void)
{
    pcnn_perfmodel *m = NULL;
    CK(pcnn_perfmodel_create(&m));

    /* Bad inputs. */
    double v;
    EXPECT_ERR(pcnn_perfmodel_set_param(m, PCNN_PERF_LINK_GBITS, NAN), PCNN_ERR_INVALID_ARGUMENT,
               "NaN");
    EXPECT_ERR(pcnn_perfmodel_set_param(m, PCNN_PERF_LINK_GBITS, -1), PCNN_ERR_INVALID_ARGUMENT,
               "link bandwidth");
    EXPECT_ERR(pcnn_perfmodel_set_param(m, PCNN_PERF_GAMMA_S_PER_BYTE, 0),
               PCNN_ERR_INVALID_ARGUMENT, "gamma");
    EXPECT_ERR(pcnn_perfmodel_set_param(m, (pcnn_perf_param)99, 1), PCNN_ERR_INVALID_ARGUMENT,
               "unknown parameter");
    EXPECT_ERR(pcnn_perfmodel_collective_time(m, PCNN_COLL_ALLREDUCE, 4, -8, &v),
               PCNN_ERR_INVALID_ARGUMENT, "bytes -8");
    EXPECT_ERR(pcnn_perfmodel_collective_time(m, PCNN_COLL_ALLREDUCE, 4, NAN, &v),
               PCNN_ERR_INVALID_ARGUMENT, "bytes nan");
    EXPECT_ERR(pcnn_perfmodel_collective_time(m, (pcnn_collective)7, 4, 8, &v),
               PCNN_ERR_INVALID_ARGUMENT, "unknown collective");
    EXPECT_ERR(pcnn_perfmodel_collective_time(m, PCNN_COLL_ALLREDUCE, 0, 8, &v),
               PCNN_ERR_INVALID_ARGUMENT, "ranks 0");
    EXPECT_ERR(pcnn_perfmodel_layer_time(m, -1, PCNN_TIME_STEP, &v), PCNN_ERR_INVALID_STATE,
               "no prediction");
    EXPECT(strstr(pcnn_last_error(), "pcnn_perfmodel_layer_time") != NULL,
           "messages name the public call: %s", pcnn_last_error());

    /* A collective's time through the API, with a link override. */
    CK(pcnn_perfmodel_set_param(m, PCNN_PERF_LINK_GBITS, 1));
    CK(pcnn_perfmodel_set_param(m, PCNN_PERF_ALPHA_S, 0));
    CK(pcnn_perfmodel_collective_time(m, PCNN_COLL_ALLGATHER, 4, 1e6, &v));
    EXPECT(fabs(v - 0.75 * 1e6 * 8e-9) < 1e-12, "all-gather of 1 MB on 1 Gbit/s: %g s", v);
    CK(pcnn_perfmodel_get_param(m, PCNN_PERF_BETA_S_PER_BYTE, &v));
    EXPECT(fabs(v - 8e-9) < 1e-20, "beta follows the link: %g", v);
    CK(pcnn_perfmodel_set_param(m, PCNN_PERF_LINK_GBITS, 0));
    CK(pcnn_perfmodel_set_param(m, PCNN_PERF_ALPHA_S, -1));

    /* Calibrate a network, predict, what-if without a communicator. */
    pcnn_net *net = small_net(16);
    EXPECT_ERR(pcnn_perfmodel_predict(m, net, 16, 1, 0, &v), PCNN_ERR_INVALID_STATE,
               "calibrat");
    EXPECT_ERR(pcnn_perfmodel_calibrate_compute(m, net, -1), PCNN_ERR_INVALID_ARGUMENT,
               "budget");
    CK(pcnn_perfmodel_calibrate_compute(m, net, 1.0));
    EXPECT_ERR(pcnn_perfmodel_predict(m, net, -16, 1, 0, &v), PCNN_ERR_INVALID_ARGUMENT,
               "global_batch -16");
    EXPECT_ERR(pcnn_perfmodel_predict(m, net, 16, 0, 0, &v), PCNN_ERR_INVALID_ARGUMENT,
               "ranks 0");
    EXPECT_ERR(pcnn_perfmodel_predict(m, net, 16, 1, 2, &v), PCNN_ERR_INVALID_ARGUMENT,
               "overlap 2");
    /* Knobs beyond any machine are refused (they made predict loop
     * forever on 2 ranks); at the slowest machine allowed the prediction
     * is finite, and a collective too large for it an error, not inf. */
    EXPECT_ERR(pcnn_perfmodel_set_param(m, PCNN_PERF_BETA_S_PER_BYTE, 1e308),
               PCNN_ERR_INVALID_ARGUMENT, "beta 1e+308 s/byte: must be in [0, 0.001]");
    EXPECT_ERR(pcnn_perfmodel_set_param(m, PCNN_PERF_LINK_GBITS, 1e-314),
               PCNN_ERR_INVALID_ARGUMENT, "must be in [1e-06, 1e+06]");
    EXPECT_ERR(pcnn_perfmodel_set_param(m, PCNN_PERF_GAMMA_S_PER_BYTE, 1e300),
               PCNN_ERR_INVALID_ARGUMENT, "gamma");
    EXPECT_ERR(pcnn_perfmodel_set_param(m, PCNN_PERF_ALPHA_S, 1e300), PCNN_ERR_INVALID_ARGUMENT,
               "alpha");
    CK(pcnn_perfmodel_set_param(m, PCNN_PERF_BETA_S_PER_BYTE, 1e-3));
    CK(pcnn_perfmodel_predict(m, net, 64, 2, 1, &v));
    EXPECT(isfinite(v) && v > 0, "beta 1e-3 s/byte on 2 ranks: a finite step (%g s)", v);
    for (int r = 2; r <= 64; r *= 2) {
        v = 0;
        const pcnn_status cs = pcnn_perfmodel_collective_time(m, PCNN_COLL_ALLTOALL, r, DBL_MAX, &v);
        EXPECT(cs == PCNN_OK ? isfinite(v) : cs == PCNN_ERR_NUMERIC,
               "an all-to-all of DBL_MAX bytes on %d ranks: %s, %g s", r, pcnn_status_str(cs), v);
    }
    CK(pcnn_perfmodel_set_param(m, PCNN_PERF_BETA_S_PER_BYTE, 0));
    /* ceil(global_batch / ranks) near INT_MAX: one sample per rank. */
    double one_each, tiny;
    CK(pcnn_perfmodel_predict(m, net, 2, INT_MAX, 0, &one_each));
    CK(pcnn_perfmodel_layer_time(m, -1, PCNN_TIME_FORWARD, &tiny));
    EXPECT(isfinite(one_each) && tiny > 0, "2 samples on INT_MAX ranks: forward %g s", tiny);
    EXPECT_ERR(pcnn_perfmodel_calibrate_compute(m, net, NAN), PCNN_ERR_INVALID_ARGUMENT,
               "budget_seconds nan");
    EXPECT_ERR(pcnn_perfmodel_set_param(m, PCNN_PERF_STRATEGY, 7), PCNN_ERR_INVALID_ARGUMENT,
               "strategy 7");
    double step1, fwd = 0, bwd = 0, upd = 0, comm = 0;
    CK(pcnn_perfmodel_predict(m, net, 16, 1, 1, &step1));
    CK(pcnn_perfmodel_layer_time(m, -1, PCNN_TIME_FORWARD, &fwd));
    CK(pcnn_perfmodel_layer_time(m, -1, PCNN_TIME_BACKWARD, &bwd));
    CK(pcnn_perfmodel_layer_time(m, -1, PCNN_TIME_UPDATE, &upd));
    CK(pcnn_perfmodel_layer_time(m, -1, PCNN_TIME_COMM, &comm));
    EXPECT(fwd > 0 && bwd > 0 && upd > 0 && comm == 0, "one rank: fwd %g bwd %g upd %g comm %g",
           fwd, bwd, upd, comm);
    EXPECT(step1 >= fwd + bwd + upd && step1 < 1.5 * (fwd + bwd + upd) + 1e-3,
           "step %g = compute %g + input copy and loss", step1, fwd + bwd + upd);
    double step64, comm64;
    CK(pcnn_perfmodel_set_param(m, PCNN_PERF_LINK_GBITS, 10));
    CK(pcnn_perfmodel_predict(m, net, 16 * 64, 64, 1, &step64));
    CK(pcnn_perfmodel_layer_time(m, -1, PCNN_TIME_COMM, &comm64));
    EXPECT(comm64 > 0 && step64 > step1 * 0.5, "64 ranks (no communicator): step %g, comm %g",
           step64, comm64);
    double slow;
    CK(pcnn_perfmodel_set_param(m, PCNN_PERF_LINK_GBITS, 0.1));
    CK(pcnn_perfmodel_predict(m, net, 16 * 64, 64, 0, &slow));
    EXPECT(slow > step64, "a slower link, no overlap: %g > %g", slow, step64);
    for (int s = 0; s <= 2; s++) {
        double t;
        CK(pcnn_perfmodel_set_param(m, PCNN_PERF_STRATEGY, s));
        CK(pcnn_perfmodel_predict(m, net, 16 * 64, 64, 1, &t));
        EXPECT(t > 0 && isfinite(t), "strategy %d: %g", s, t);
    }
    CK(pcnn_perfmodel_set_param(m, PCNN_PERF_STRATEGY, -1));
    CK(pcnn_perfmodel_set_param(m, PCNN_PERF_LINK_GBITS, 0));

    /* Memory contention: the ranks' simultaneous updates (and the
     * all-to-all's sums) take that many times as long; one rank's do not. */
    EXPECT_ERR(pcnn_perfmodel_set_param(m, PCNN_PERF_MEMORY_CONTENTION, 0.5),
               PCNN_ERR_INVALID_ARGUMENT, "memory contention 0.5: must be >= 1");
    double contention = 0;
    CK(pcnn_perfmodel_get_param(m, PCNN_PERF_MEMORY_CONTENTION, &contention));
    EXPECT(contention == 1, "one rank's calibration: contention %g", contention);
    for (int s = PCNN_EXCHANGE_ALLREDUCE; s <= PCNN_EXCHANGE_ALLTOALL_ALLGATHER; s++) {
        double upd_free[2], upd_busy[2], t;
        CK(pcnn_perfmodel_set_param(m, PCNN_PERF_STRATEGY, s));
        for (int f = 1; f <= 2; f++) {
            CK(pcnn_perfmodel_set_param(m, PCNN_PERF_MEMORY_CONTENTION, f));
            for (int k = 0; k < 2; k++) {
                CK(pcnn_perfmodel_predict(m, net, 16 * (k ? 64 : 1), k ? 64 : 1, 1, &t));
                CK(pcnn_perfmodel_layer_time(m, -1, PCNN_TIME_UPDATE,
                                             f == 1 ? &upd_free[k] : &upd_busy[k]));
            }
        }
        EXPECT(upd_busy[0] == upd_free[0], "strategy %d, one rank: update %g vs %g", s,
               upd_busy[0], upd_free[0]);
        EXPECT(fabs(upd_busy[1] - 2 * upd_free[1]) <= 1e-12 * upd_busy[1] && upd_free[1] > 0,
               "strategy %d, 64 ranks: update %g with contention 2, %g without", s, upd_busy[1],
               upd_free[1]);
    }
    CK(pcnn_perfmodel_get_param(m, PCNN_PERF_MEMORY_CONTENTION, &contention));
    EXPECT(contention == 2, "contention read back %g", contention);
    CK(pcnn_perfmodel_set_param(m, PCNN_PERF_MEMORY_CONTENTION, 1));
    CK(pcnn_perfmodel_set_param(m, PCNN_PERF_STRATEGY, -1));

    /* Validation against the network's own measurement. */
    train(net, 3);
    CK(pcnn_perfmodel_predict(m, net, 16, 1, 1, &step1));
    double re = NAN, wre[3];
    size_t need = 0;
    /* Other processes share this machine: the best of three measurements. */
    for (int attempt = 0; attempt < 3 && !(fabs(re) < 0.25); attempt++) {
        CK(pcnn_net_reset_timing(net));
        train(net, 10);
        CK(pcnn_perfmodel_validate(m, net, &re, wre, NULL, 0, &need));
    }
    char *table = malloc(need + 1);
    CK(pcnn_perfmodel_validate(m, net, &re, wre, table, need + 1, NULL));
    printf("%s", table);
    EXPECT(strstr(table, "WRE^T") && strstr(table, "conv2d"), "validation table");
    /* The metrics by hand from both sides' numbers (seed 004 eqs. 2-3). */
    double meas_step, pred_step;
    CK(pcnn_net_time(net, -1, PCNN_TIME_STEP, &meas_step));
    CK(pcnn_perfmodel_layer_time(m, -1, PCNN_TIME_STEP, &pred_step));
    EXPECT(fabs(re - (pred_step - meas_step) / meas_step) < 1e-12, "step RE %.4f by hand %.4f",
           re, (pred_step - meas_step) / meas_step);
    const pcnn_time stage[3] = {PCNN_TIME_FORWARD, PCNN_TIME_BACKWARD, PCNN_TIME_UPDATE};
    for (int s = 0; s < 3; s++) {
        double err = 0, sum = 0;
        for (int l = 1; l < 7; l++) {
            double p, q;
            if (s == 2 && (l == 2 || l == 3 || l == 5)) continue; /* no parameters */
            CK(pcnn_perfmodel_layer_time(m, l, stage[s], &p));
            CK(pcnn_net_time(net, l, stage[s], &q));
            err += fabs(p - q);
            sum += q;
        }
        EXPECT(fabs(wre[s] - err / sum) < 1e-9, "WRE^T[%d] = %.4f, by hand %.4f", s, wre[s],
               err / sum);
    }
    /* Accuracy proper is the benchmark's (bench/perfmodel_accuracy.c, on a
     * quiet machine); here only a sanity bound that load cannot break. */
    EXPECT(isfinite(re) && re > -1 && re < 3.0, "step RE %.3f", re);
    free(table);

    /* Another network: its prediction needs its own calibration. */
    pcnn_net *other = small_net(4);
    EXPECT_ERR(pcnn_perfmodel_predict(m, other, 16, 1, 0, &v), PCNN_ERR_MISMATCH,
               "another network");
    EXPECT_ERR(pcnn_perfmodel_validate(m, other, &re, wre, NULL, 0, NULL), PCNN_ERR_MISMATCH,
               "another network");

    /* The file: round trip (same report, same prediction to the bit). */
    const char *path = "perf_api_test.model";
    CK(pcnn_perfmodel_save(m, path));
    pcnn_perfmodel *back = NULL;
    CK(pcnn_perfmodel_load(path, &back));
    double again;
    CK(pcnn_perfmodel_predict(back, net, 16 * 8, 8, 1, &again));
    CK(pcnn_perfmodel_predict(m, net, 16 * 8, 8, 1, &step1));
    EXPECT(memcmp(&again, &step1, sizeof again) == 0, "loaded model predicts %.17g vs %.17g",
           again, step1);
    char r1[8192], r2[8192];
    CK(pcnn_perfmodel_report(m, r1, sizeof r1, NULL));
    CK(pcnn_perfmodel_report(back, r2, sizeof r2, NULL));
    EXPECT(strcmp(r1, r2) == 0, "same report after the round trip");
    EXPECT(strstr(r1, "all-reduce") && strstr(r1, "compute: 7 layers"), "report:\n%s", r1);
    CK(pcnn_perfmodel_destroy(&back));
    EXPECT(back == NULL, "destroy clears the handle");

    flip_byte(path, 100, 0);
    EXPECT_ERR(pcnn_perfmodel_load(path, &back), PCNN_ERR_CORRUPT, "checksum");
    CK(pcnn_perfmodel_save(m, path));
    flip_byte(path, 8, 1); /* format version 1: before the per-layer update timings */
    EXPECT_ERR(pcnn_perfmodel_load(path, &back), PCNN_ERR_UNSUPPORTED,
               "version 1; this library reads versions 2 to 6 (calibrate again");
    /* Versions 2 (no poll_cpu) and 3 (no memory contention) still load:
     * the same predictions (this model's poll_cpu is 0 and its contention
     * 1, a one-rank calibration's). */
    for (int version = 2; version <= 5; version++) {
        CK(pcnn_perfmodel_save(m, path));
        as_version(path, version);
        CK(pcnn_perfmodel_load(path, &back));
        CK(pcnn_perfmodel_predict(back, net, 16 * 8, 8, 1, &again));
        EXPECT(memcmp(&again, &step1, sizeof again) == 0,
               "a version %d file predicts %.17g vs %.17g", version, again, step1);
        CK(pcnn_perfmodel_destroy(&back));
    }
    /* The factor of the smallest size is read (this network's updates are
     * all below it: 1.5 makes a 64-rank prediction's update 1.5 times);
     * one below 1 is no model of a machine. */
    CK(pcnn_perfmodel_save(m, path));
    set_double(path, 44, 1.5); /* the first memory contention factor */
    CK(pcnn_perfmodel_load(path, &back));
    double upd_file, upd_model;
    CK(pcnn_perfmodel_predict(back, net, 16 * 64, 64, 1, &again));
    CK(pcnn_perfmodel_layer_time(back, -1, PCNN_TIME_UPDATE, &upd_file));
    CK(pcnn_perfmodel_predict(m, net, 16 * 64, 64, 1, &again));
    CK(pcnn_perfmodel_layer_time(m, -1, PCNN_TIME_UPDATE, &upd_model));
    EXPECT(fabs(upd_file - 1.5 * upd_model) <= 1e-12 * upd_file,
           "contention 1.5 read from the file: update %g vs %g", upd_file, upd_model);
    CK(pcnn_perfmodel_destroy(&back));
    set_double(path, 44, 0.5);
    EXPECT_ERR(pcnn_perfmodel_load(path, &back), PCNN_ERR_CORRUPT,
               "a memory contention factor below 1");

    /* The ranks' pace: several ranks' step runs at the slowest rank's, its
     * layers' computation pace times this table's.  Without overlap the
     * step is one sequence, so it grows by (pace - 1) x the computation
     * exactly, waited as exposed communication; the layers keep their own
     * times; one rank waits for nobody. */
    double pace;
    CK(pcnn_perfmodel_get_param(m, PCNN_PERF_RANK_PACE, &pace));
    EXPECT(pace == 1, "pace 1 by default (%g)", pace);
    EXPECT_ERR(pcnn_perfmodel_set_param(m, PCNN_PERF_RANK_PACE, 0.5), PCNN_ERR_INVALID_ARGUMENT,
               "rank pace 0.5");
    double t1[4], t2[4], s1, s2, one1, one2;
    const pcnn_time kinds[4] = {PCNN_TIME_FORWARD, PCNN_TIME_BACKWARD, PCNN_TIME_UPDATE,
                                PCNN_TIME_EXPOSED};
    CK(pcnn_perfmodel_predict(m, net, 16, 1, 0, &one1));
    CK(pcnn_perfmodel_predict(m, net, 16 * 4, 4, 0, &s1));
    for (int k = 0; k < 4; k++) CK(pcnn_perfmodel_layer_time(m, -1, kinds[k], &t1[k]));
    CK(pcnn_perfmodel_set_param(m, PCNN_PERF_RANK_PACE, 1.25));
    CK(pcnn_perfmodel_predict(m, net, 16, 1, 0, &one2));
    CK(pcnn_perfmodel_predict(m, net, 16 * 4, 4, 0, &s2));
    for (int k = 0; k < 4; k++) CK(pcnn_perfmodel_layer_time(m, -1, kinds[k], &t2[k]));
    const double computed = t1[0] + t1[1] + t1[2];
    EXPECT(one1 == one2, "one rank: no pace (%g vs %g)", one2, one1);
    EXPECT(fabs(s2 - s1 - 0.25 * computed) <= 1e-9 * s2,
           "pace 1.25: the step grows by a quarter of its computation (%g -> %g, %g)", s1, s2,
           computed);
    EXPECT(t2[0] == t1[0] && t2[1] == t1[1] && t2[2] == t1[2] &&
               fabs(t2[3] - t1[3] - (s2 - s1)) <= 1e-9 * s2,
           "the layers keep their times; the wait is exposed (%g -> %g)", t1[3], t2[3]);
    /* Saved and read back; older files and a new compute table: pace 1. */
    CK(pcnn_perfmodel_save(m, path));
    CK(pcnn_perfmodel_load(path, &back));
    CK(pcnn_perfmodel_get_param(back, PCNN_PERF_RANK_PACE, &pace));
    CK(pcnn_perfmodel_predict(back, net, 16 * 4, 4, 0, &again));
    EXPECT(pace == 1.25 && again == s2, "pace %g from the file predicts %g vs %g", pace, again,
           s2);
    CK(pcnn_perfmodel_destroy(&back));
    set_double(path, -48, 0.5); /* the ranks' pace */
    EXPECT_ERR(pcnn_perfmodel_load(path, &back), PCNN_ERR_CORRUPT, "pace out of range");
    CK(pcnn_perfmodel_save(m, path));
    set_double(path, -16, -0.25); /* the all-gather's repetition spread */
    EXPECT_ERR(pcnn_perfmodel_load(path, &back), PCNN_ERR_CORRUPT, "spread out of range");
    CK(pcnn_perfmodel_save(m, path));
    as_version(path, 4);
    CK(pcnn_perfmodel_load(path, &back));
    CK(pcnn_perfmodel_get_param(back, PCNN_PERF_RANK_PACE, &pace));
    EXPECT(pace == 1, "a version 4 file: pace 1 (%g)", pace);
    CK(pcnn_perfmodel_destroy(&back));
    CK(pcnn_perfmodel_calibrate_compute(m, net, 0.2));
    CK(pcnn_perfmodel_get_param(m, PCNN_PERF_RANK_PACE, &pace));
    EXPECT(pace == 1, "a new compute table: pace 1 again (%g)", pace);
    /* A file written to fit its checksum is held to what set_param and the
     * calibrations produce: a knob out of range, a NaN link time. */
    double progress;
    CK(pcnn_perfmodel_get_param(m, PCNN_PERF_NONBLOCKING_PROGRESS, &progress));
    CK(pcnn_perfmodel_set_param(m, PCNN_PERF_NONBLOCKING_PROGRESS, 0.3125));
    CK(pcnn_perfmodel_save(m, path));
    CK(pcnn_perfmodel_set_param(m, PCNN_PERF_NONBLOCKING_PROGRESS, progress));
    static unsigned char crafted[1 << 16];
    const size_t len = read_model_file(path, crafted, sizeof crafted);
    const double mark = 0.3125, seven = 7.0, nan_value = NAN;
    size_t at = 16;
    while (at + 8 <= len && memcmp(crafted + at, &mark, 8) != 0) at++;
    EXPECT(at + 8 <= len, "the knob's value found in the file");
    if (at + 8 <= len) {
        memcpy(crafted + at, &seven, 8);
        write_model_file(path, crafted, len);
        EXPECT_ERR(pcnn_perfmodel_load(path, &back), PCNN_ERR_CORRUPT,
                   "a parameter (pcnn_perfmodel_set_param) out of range");
        memcpy(crafted + at, &mark, 8);
    }
    /* Values set_param refuses are refused in a file too: a link of
     * 1e-314 Gbit/s, 1e308 s/byte (predict looped on them), gamma 0. */
    refused_in_file(m, path, PCNN_PERF_LINK_GBITS, 1e-314);
    refused_in_file(m, path, PCNN_PERF_BETA_S_PER_BYTE, 1e308);
    refused_in_file(m, path, PCNN_PERF_ALPHA_S, 1e300);
    CK(pcnn_perfmodel_save(m, path));
    read_model_file(path, crafted, sizeof crafted);
    const double zero = 0.0, gamma_big = 1e300;
    memcpy(crafted + 20, &zero, 8); /* the link's gamma: header 16, ranks 4 */
    write_model_file(path, crafted, len);
    EXPECT_ERR(pcnn_perfmodel_load(path, &back), PCNN_ERR_CORRUPT,
               "a link calibration out of range");
    memcpy(crafted + 20, &gamma_big, 8);
    write_model_file(path, crafted, len);
    EXPECT_ERR(pcnn_perfmodel_load(path, &back), PCNN_ERR_CORRUPT,
               "a link calibration out of range");
    memcpy(crafted + 20, &nan_value, 8);
    write_model_file(path, crafted, len);
    EXPECT_ERR(pcnn_perfmodel_load(path, &back), PCNN_ERR_CORRUPT,
               "a link calibration out of range");
    /* A FIFO is refused at once (reading it would wait for a writer). */
    remove(path);
    if (mkfifo(path, 0600) == 0)
        EXPECT_ERR(pcnn_perfmodel_load(path, &back), PCNN_ERR_IO, "not a regular file");
    remove(path);
    FILE *f = fopen(path, "wb");
    fputs("not a model at all, just text", f);
    fclose(f);
    EXPECT_ERR(pcnn_perfmodel_load(path, &back), PCNN_ERR_CORRUPT, "not a performance model");
    EXPECT_ERR(pcnn_perfmodel_load("/nonexistent/dir/x.model", &back), PCNN_ERR_IO, "cannot open");
    EXPECT(back == NULL, "failed loads leave *out alone");
    remove(path);

    /* A budget too small to time any kind's shapes fits nothing: an
     * error, and the model keeps what it had. */
    char before[16384], after[16384];
    CK(pcnn_perfmodel_report(m, before, sizeof before, NULL));
    EXPECT_ERR(pcnn_perfmodel_fit_regressors(m, 1, 1e-6, 7), PCNN_ERR_TIMEOUT, "nothing fitted");
    CK(pcnn_perfmodel_report(m, after, sizeof after, NULL));
    EXPECT(strcmp(before, after) == 0, "a fit that timed out leaves the model as it was");

    CK(pcnn_net_destroy(&other));
    CK(pcnn_net_destroy(&net));
    CK(pcnn_perfmodel_destroy(&m));
    if (failures) printf("%d failures\n", failures);
    else printf("perf api: all checks passed\n");
    return failures ? 1 : 0;
}
