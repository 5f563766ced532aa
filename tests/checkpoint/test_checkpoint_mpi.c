/* Checkpoints across numbers of ranks, run by mpi_resume.sh:
 *
 *   mpiexec -n A test_checkpoint_mpi save DIR     train N steps, save, train M
 *                                                 more, keep the result
 *   mpiexec -n B test_checkpoint_mpi resume DIR   load, train M steps: equals
 *                                                 the uninterrupted run at A
 *                                                 ranks and a sequential run
 *                                                 (relative 1e-5)
 *
 * Cases cover the optimizers, the exchange strategies (whose optimizer state
 * is sliced differently: all-to-all + all-gather slices, FC weight columns,
 * full allreduce state), a resume with another strategy and bucket size,
 * and failures that must reach every rank with the same status. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/mpi_check.h"
#include "pcnn.h"

enum { N_STEPS = 4, M_STEPS = 4, BATCH = 12, SAMPLE = 2 * 9 * 9 };

typedef struct config {
    const char *name;
    pcnn_optimizer optimizer;
    pcnn_exchange save_exchange, resume_exchange;
    int fc_save, fc_resume; /* dense layer 7 uses the FC gradient exchange */
} config;

static const config cases[] = {
    {"momentum_alltoall", PCNN_OPTIMIZER_MOMENTUM, PCNN_EXCHANGE_ALLTOALL_ALLGATHER,
     PCNN_EXCHANGE_ALLTOALL_ALLGATHER, 0, 0},
    {"adam_alltoall", PCNN_OPTIMIZER_ADAM, PCNN_EXCHANGE_ALLTOALL_ALLGATHER,
     PCNN_EXCHANGE_ALLTOALL_ALLGATHER, 0, 0},
    {"adam_allreduce", PCNN_OPTIMIZER_ADAM, PCNN_EXCHANGE_ALLREDUCE, PCNN_EXCHANGE_ALLREDUCE, 0, 0},
    {"sgd_alltoall_to_allreduce", PCNN_OPTIMIZER_SGD, PCNN_EXCHANGE_ALLTOALL_ALLGATHER,
     PCNN_EXCHANGE_ALLREDUCE, 0, 0},
    {"adam_fc", PCNN_OPTIMIZER_ADAM, PCNN_EXCHANGE_ALLTOALL_ALLGATHER,
     PCNN_EXCHANGE_ALLTOALL_ALLGATHER, 1, 1},
    {"momentum_fc_to_alltoall", PCNN_OPTIMIZER_MOMENTUM, PCNN_EXCHANGE_ALLTOALL_ALLGATHER,
     PCNN_EXCHANGE_ALLTOALL_ALLGATHER, 1, 0},
    {"adam_allreduce_to_fc", PCNN_OPTIMIZER_ADAM, PCNN_EXCHANGE_ALLREDUCE,
     PCNN_EXCHANGE_ALLREDUCE, 0, 1},
};
#define NUM_CASES (int)(sizeof cases / sizeof *cases)

/* conv(2->5,k3,p1) relu maxpool conv(5->3,k3) dropout dense(12->7) relu dense(->4):
 * odd parameter counts, so slices are uneven for P = 2 and 3. */
static pcnn_net *build_bn(const config *c, pcnn_comm *comm, pcnn_exchange exchange, int fc,
                          double bucket_bytes, int channels, int bn)
{
    pcnn_net *net;
    pcnn_layer *l, *fc_layer;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, 2, 9, 9, &l));
    CK(pcnn_conv2d(net, l, channels, 3, 1, 1, 1, &l));
    if (bn) CK(pcnn_batchnorm(net, l, 1e-5f, 0.1f, &l));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_maxpool2d(net, l, 2, 2, 0, &l));
    CK(pcnn_conv2d(net, l, 3, 3, 1, 0, 0, &l));
    CK(pcnn_dropout(net, l, 0.25f, &l));
    CK(pcnn_dense(net, l, 7, 1, &fc_layer));
    CK(pcnn_relu(net, fc_layer, &l));
    CK(pcnn_dense(net, l, 4, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_optimizer(net, c->optimizer));
    CK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, c->optimizer == PCNN_OPTIMIZER_ADAM ? 0.01 : 0.1));
    CK(pcnn_net_set_option(net, PCNN_OPT_WEIGHT_DECAY, 1e-3));
    CK(pcnn_net_set_option(net, PCNN_OPT_MOMENTUM, 0.7));
    CK(pcnn_net_set_option(net, PCNN_OPT_WARMUP_STEPS, 2));
    CK(pcnn_net_set_option(net, PCNN_OPT_DECAY_EVERY_STEPS, 5));
    CK(pcnn_net_set_option(net, PCNN_OPT_DECAY_FACTOR, 0.5));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 42));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    CK(pcnn_net_set_option(net, PCNN_OPT_BUCKET_BYTES, bucket_bytes));
    if (comm) {
        CK(pcnn_net_set_comm(net, comm));
        CK(pcnn_net_set_exchange(net, exchange));
        if (fc) CK(pcnn_layer_set_exchange(fc_layer, PCNN_EXCHANGE_FC_GRADIENT));
        CK(pcnn_net_set_option(net, PCNN_OPT_TIMEOUT_MS, 60000));
    }
    CK(pcnn_net_finalize(net, BATCH));
    return net;
}

static pcnn_net *build(const config *c, pcnn_comm *comm, pcnn_exchange exchange, int fc,
                       double bucket_bytes, int channels)
{
    return build_bn(c, comm, exchange, fc, bucket_bytes, channels, 0);
}

static void make_batch(int step, float *x, int32_t *y)
{
    unsigned s = 4321u + 613u * (unsigned)step;
    for (int i = 0; i < BATCH * SAMPLE; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)((s >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
    for (int i = 0; i < BATCH; i++) y[i] = (int32_t)((unsigned)(i * 5 + step) % 4u);
}

/* Steps [from, to) with this rank's share (or the whole batch: comm NULL). */
static void train(pcnn_net *net, int from, int to, int whole)
{
    static float x[BATCH * SAMPLE];
    static int32_t y[BATCH];
    const int base = BATCH / ranks, extra = BATCH % ranks;
    const int mine = whole ? BATCH : base + (rank < extra);
    const int first = whole ? 0 : rank * base + (rank < extra ? rank : extra);
    for (int step = from; step < to; step++) {
        make_batch(step, x, y);
        CK(pcnn_net_train_step(net, mine, x + (size_t)first * SAMPLE, y + first, NULL, NULL));
    }
}

static double max_rel_diff(const float *a, const float *b, size_t n)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / (1e-3 + fabs((double)b[i]));
        if (d > worst || isnan(d)) worst = isnan(d) ? INFINITY : d;
    }
    return worst;
}

static float *params_of(pcnn_net *net, size_t *n)
{
    CK(pcnn_net_num_params(net, n));
    float *w = malloc(*n * sizeof(float));
    CK(pcnn_net_get_params(net, w, *n));
    return w;
}

static void file_name(char *out, size_t size, const char *dir, const char *name, const char *ext)
{
    snprintf(out, size, "%s/%s.%s", dir, name, ext);
}

/* Batch norm keeps per-rank running statistics: with as many ranks on
 * resume, each rank gets its own back and the run continues bitwise,
 * inference (which uses them) included. */
static const config bn_case = {"adam_batchnorm", PCNN_OPTIMIZER_ADAM,
                               PCNN_EXCHANGE_ALLTOALL_ALLGATHER,
                               PCNN_EXCHANGE_ALLTOALL_ALLGATHER, 0, 0};

static void write_floats(const char *path, const float *w, size_t n)
{
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(w, sizeof(float), n, f) == n;
    if (f) fclose(f);
    if (!ok) MPI_Abort(MPI_COMM_WORLD, 2);
}

static int read_floats(const char *path, float *w, size_t n)
{
    FILE *f = fopen(path, "rb");
    int ok = f && fread(w, sizeof(float), n, f) == n;
    if (f) fclose(f);
    return ok;
}

/* This rank's inference outputs on a fixed batch (running statistics). */
static void predictions(pcnn_net *net, float *out)
{
    static float x[BATCH * SAMPLE];
    static int32_t y[BATCH];
    make_batch(1000, x, y);
    CK(pcnn_net_predict(net, BATCH, x, out, BATCH * 4));
}

static void save_bn_case(pcnn_comm *comm, const char *dir)
{
    char path[512], name[64];
    pcnn_net *net = build_bn(&bn_case, comm, bn_case.save_exchange, 0, 1048576, 5, 1);
    train(net, 0, N_STEPS, 0);
    file_name(path, sizeof path, dir, bn_case.name, "ckpt");
    CK(pcnn_net_save(net, path));
    train(net, N_STEPS, N_STEPS + M_STEPS, 0);
    size_t n;
    float *w = params_of(net, &n), pred[BATCH * 4];
    file_name(path, sizeof path, dir, bn_case.name, "ref");
    if (rank == 0) write_floats(path, w, n);
    predictions(net, pred);
    snprintf(name, sizeof name, "pred%d", rank);
    file_name(path, sizeof path, dir, bn_case.name, name);
    write_floats(path, pred, BATCH * 4);
    snprintf(path, sizeof path, "%s/ranks", dir);
    if (rank == 0) {
        float r = (float)ranks;
        write_floats(path, &r, 1);
    }
    free(w);
    pcnn_net_destroy(&net);
}

static void resume_bn_case(pcnn_comm *comm, const char *dir)
{
    char path[512], name[64], what[200];
    float saved_ranks = 0;
    snprintf(path, sizeof path, "%s/ranks", dir);
    if (!read_floats(path, &saved_ranks, 1)) MPI_Abort(MPI_COMM_WORLD, 2);
    pcnn_net *net = build_bn(&bn_case, comm, bn_case.resume_exchange, 0, 1048576, 5, 1);
    file_name(path, sizeof path, dir, bn_case.name, "ckpt");
    pcnn_status st = pcnn_net_load(net, path);
    if ((int)saved_ranks != ranks) { /* statistics averaged: it must load */
        snprintf(what, sizeof what, "np=%d %s saved at np=%d loads (%s)", ranks, bn_case.name,
                 (int)saved_ranks, pcnn_status_str(st));
        expect(st == PCNN_OK, what);
        pcnn_net_destroy(&net);
        return;
    }
    CK(st);
    train(net, N_STEPS, N_STEPS + M_STEPS, 0);
    size_t n;
    float *w = params_of(net, &n), *ref = malloc(n * sizeof(float));
    float pred[BATCH * 4], pred_ref[BATCH * 4];
    file_name(path, sizeof path, dir, bn_case.name, "ref");
    int ok = read_floats(path, ref, n) && memcmp(w, ref, n * sizeof(float)) == 0;
    predictions(net, pred);
    snprintf(name, sizeof name, "pred%d", rank);
    file_name(path, sizeof path, dir, bn_case.name, name);
    int pred_ok = read_floats(path, pred_ref, BATCH * 4) && memcmp(pred, pred_ref, sizeof pred) == 0;
    snprintf(what, sizeof what, "np=%d %s: resumed == uninterrupted bitwise (parameters %d, "
             "every rank's predictions %d)", ranks, bn_case.name, ok, pred_ok);
    expect(ok && pred_ok, what);
    free(ref);
    free(w);
    pcnn_net_destroy(&net);
}

static void phase_save(pcnn_comm *comm, const char *dir)
{
    for (int k = 0; k < NUM_CASES; k++) {
        const config *c = &cases[k];
        char path[512], ref[512];
        file_name(path, sizeof path, dir, c->name, "ckpt");
        file_name(ref, sizeof ref, dir, c->name, "ref");
        pcnn_net *net = build(c, comm, c->save_exchange, c->fc_save, 1048576, 5);
        train(net, 0, N_STEPS, 0);
        CK(pcnn_net_save(net, path));
        train(net, N_STEPS, N_STEPS + M_STEPS, 0);
        size_t n;
        float *w = params_of(net, &n);
        if (rank == 0) {
            FILE *f = fopen(ref, "wb");
            int ok = f && fwrite(w, sizeof(float), n, f) == n;
            if (f) fclose(f);
            if (!ok) MPI_Abort(MPI_COMM_WORLD, 2);
        }
        char what[160];
        snprintf(what, sizeof what, "np=%d %s: trained %d steps, saved, trained %d more",
                 ranks, c->name, N_STEPS, M_STEPS);
        expect(1, what);
        free(w);
        pcnn_net_destroy(&net);
    }
    save_bn_case(comm, dir);
    /* A write that fails on rank 0 fails everywhere, with rank 0's status. */
    pcnn_net *net = build(&cases[0], comm, cases[0].save_exchange, 0, 1048576, 5);
    char path[512];
    snprintf(path, sizeof path, "%s/no-such-dir/x.ckpt", dir);
    pcnn_status st = pcnn_net_save(net, path);
    int mine = st, lo, hi;
    MPI_Allreduce(&mine, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&mine, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    char what[200];
    snprintf(what, sizeof what, "np=%d save into a missing directory: IO on every rank (%s)",
             ranks, pcnn_last_error());
    expect(lo == PCNN_ERR_IO && hi == PCNN_ERR_IO, what);
    pcnn_net_destroy(&net);
}

/* Every rank must fail with `want`. */
static void expect_all(pcnn_status st, pcnn_status want, const char *what)
{
    int mine = st, lo, hi;
    MPI_Allreduce(&mine, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&mine, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    char line[400];
    snprintf(line, sizeof line, "np=%d %s: %s on every rank (rank %d: %s)", ranks, what,
             pcnn_status_str(want), rank, pcnn_last_error());
    expect(lo == (int)want && hi == (int)want, line);
}

static void phase_resume(pcnn_comm *comm, const char *dir)
{
    for (int k = 0; k < NUM_CASES; k++) {
        const config *c = &cases[k];
        char path[512], ref_path[512];
        file_name(path, sizeof path, dir, c->name, "ckpt");
        file_name(ref_path, sizeof ref_path, dir, c->name, "ref");
        /* Another bucket size, too: 200 bytes splits layers into buckets. */
        pcnn_net *net = build(c, comm, c->resume_exchange, c->fc_resume, 200, 5);
        CK(pcnn_net_load(net, path));
        double step;
        CK(pcnn_net_get_option(net, PCNN_OPT_STEP, &step));
        train(net, N_STEPS, N_STEPS + M_STEPS, 0);
        size_t n;
        float *w = params_of(net, &n);

        float *ref = malloc(n * sizeof(float));
        FILE *f = fopen(ref_path, "rb");
        int read_ok = f && fread(ref, sizeof(float), n, f) == n;
        if (f) fclose(f);
        pcnn_net *seq = build(c, NULL, c->resume_exchange, 0, 1048576, 5);
        train(seq, 0, N_STEPS + M_STEPS, 1);
        size_t ns;
        float *ws = params_of(seq, &ns);
        double vs_saved = read_ok ? max_rel_diff(w, ref, n) : INFINITY;
        double vs_seq = max_rel_diff(w, ws, n);
        float *r0 = malloc(n * sizeof(float));
        memcpy(r0, w, n * sizeof(float));
        MPI_Bcast(r0, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
        int identical = memcmp(r0, w, n * sizeof(float)) == 0;
        char what[300];
        snprintf(what, sizeof what, "resumed at np=%d %-26s step %g; rel diff vs uninterrupted "
                 "run %.2e, vs sequential %.2e; ranks identical %d",
                 ranks, c->name, step, vs_saved, vs_seq, identical);
        expect(step == N_STEPS && vs_saved < 1e-5 && vs_seq < 1e-5 && identical, what);
        free(r0);
        free(ws);
        free(ref);
        free(w);
        pcnn_net_destroy(&seq);
        pcnn_net_destroy(&net);
    }

    resume_bn_case(comm, dir);

    /* Failures reach every rank with the same status. */
    const config *c = &cases[1];
    char good[512], bad[512], missing[512];
    file_name(good, sizeof good, dir, c->name, "ckpt");
    file_name(bad, sizeof bad, dir, "truncated", "ckpt");
    file_name(missing, sizeof missing, dir, "missing", "ckpt");
    if (rank == 0) { /* only rank 0 reads: only it needs the file */
        FILE *in = fopen(good, "rb"), *out = fopen(bad, "wb");
        char buf[700];
        size_t got = in ? fread(buf, 1, sizeof buf, in) : 0;
        if (!out || fwrite(buf, 1, got, out) != got) MPI_Abort(MPI_COMM_WORLD, 2);
        if (in) fclose(in);
        fclose(out);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    pcnn_net *net = build(c, comm, c->resume_exchange, 0, 1048576, 5);
    expect_all(pcnn_net_load(net, bad), PCNN_ERR_CORRUPT, "truncated file");
    expect_all(pcnn_net_load(net, missing), PCNN_ERR_IO, "missing file");
    double step;
    CK(pcnn_net_get_option(net, PCNN_OPT_STEP, &step));
    expect(step == 0, "failed loads left the network untouched");
    pcnn_net *other = build(c, comm, c->resume_exchange, 0, 1048576, 6);
    expect_all(pcnn_net_load(other, good), PCNN_ERR_MISMATCH, "network with 6 channels");
    pcnn_net_destroy(&other);
    pcnn_net_destroy(&net);
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "save") && strcmp(argv[1], "resume"))) {
        fprintf(stderr, "usage: %s save|resume DIR\n", argv[0]);
        return 2;
    }
    pcnn_comm *comm;
    CK(pcnn_comm_create_world(&comm));
    CK(pcnn_comm_info(comm, &rank, &ranks, NULL));
    if (strcmp(argv[1], "save") == 0) phase_save(comm, argv[2]);
    else phase_resume(comm, argv[2]);
    if (rank == 0) printf("%d failure(s)\n", failures);
    int fails = failures;
    CK(pcnn_comm_destroy(&comm));
    return fails ? 1 : 0;
}
