/* The calls besides a training step on a spatial network, under mpiexec
 * with 1 to 4 ranks (a pure split on 2 and 3, the hybrid 2 groups x 2 on 4):
 *
 *   1. pcnn_net_compute_loss and pcnn_net_compute_gradients equal one rank
 *      computing them on the whole batch (loss and every weight gradient to
 *      1e-5), change neither the parameters, the running statistics nor
 *      the step, and leave no input gradient.
 *   2. pcnn_net_evaluate equals one rank's, for a regression (MSE) and a
 *      classification network (the accuracy exactly).
 *   3. A file-backed dataset: every rank opens its own copy of the
 *      volumes, NaN everywhere outside its box of the input, with
 *      PCNN_OPT_CHECK_NUMERICS on (any staged NaN fails the call):
 *      train_epoch and evaluate run and equal, bit for bit, the same
 *      network trained on the dataset in memory, and one rank to 1e-5.
 *   4. The batch scheduler trains a spatial network as one rank trains
 *      with the same schedule. */
#define PCNN_EXPERIMENTAL
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/mpi_check.h"
#include "pcnn.h"

static pcnn_comm *comm_world;
static uint64_t rng_state;

static float frand(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng_state >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

enum { C = 2, H = 11, W = 9, OUT = 3 };

/* conv 3x3 -> batch norm -> relu -> max pool 2 -> flatten -> dense OUT;
 * NULL comm: a private one-rank network. */
static pcnn_layer *input_layer; /* of the last network built */

static pcnn_net *build(pcnn_comm *comm, const int *parts, int max_batch, bool classify,
                       int sync_bn)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    if (comm) CK(pcnn_net_set_comm(net, comm));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 11));
    CK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 0.05));
    CK(pcnn_net_set_option(net, PCNN_OPT_CHECK_NUMERICS, 1));
    CK(pcnn_net_set_option(net, PCNN_OPT_SYNC_BATCHNORM, sync_bn));
    CK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_MOMENTUM));
    CK(pcnn_net_input3d(net, C, 1, H, W, &l));
    input_layer = l;
    CK(pcnn_conv2d(net, l, 3, 3, 1, 1, 1, &l));
    CK(pcnn_batchnorm(net, l, 1e-5f, 0.1f, &l));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_maxpool2d(net, l, 2, 2, 0, &l));
    CK(pcnn_flatten(net, l, &l));
    CK(pcnn_dense(net, l, OUT, 1, &l));
    CK(pcnn_net_set_loss(net, l, classify ? PCNN_LOSS_SOFTMAX_CROSS_ENTROPY : PCNN_LOSS_MSE));
    if (parts) CK(pcnn_net_set_distribution(net, parts));
    CK(pcnn_net_finalize(net, max_batch));
    return net;
}

static double rel_diff(const float *a, const float *b, size_t n)
{
    double diff = 0.0, scale = 1e-30;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - (double)b[i]);
        if (d > diff || isnan(d)) diff = isnan(d) ? INFINITY : d;
        if (fabs((double)b[i]) > scale) scale = fabs((double)b[i]);
    }
    return diff / scale;
}

static float *params_of(pcnn_net *net, size_t *count)
{
    CK(pcnn_net_num_params(net, count));
    float *p = malloc(*count * sizeof(float));
    CK(pcnn_net_get_params(net, p, *count));
    return p;
}

/* The samples [*g0, *g0 + *gn) of a batch of B that this rank's group takes. */
static void group_share(const int *parts, int B, int *g0, int *gn)
{
    const int groups = parts[0], g = rank / (ranks / groups);
    *g0 = g * (B / groups) + (g < B % groups ? g : B % groups);
    *gn = B / groups + (g < B % groups);
}

static void test_compute(const int *parts)
{
    enum { B = 5, S = C * H * W };
    const int sync = parts[0] > 1; /* batch norm over the whole batch, as one rank */
    pcnn_net *sp = build(comm_world, parts, B, false, sync);
    pcnn_net *one = build(NULL, NULL, B, false, 0);
    float x[B * S], t[B * OUT], loss_one, loss_sp;
    rng_state = 99;
    for (int i = 0; i < B * S; i++) x[i] = frand();
    for (int i = 0; i < B * OUT; i++) t[i] = frand();
    int g0, gn;
    group_share(parts, B, &g0, &gn);
    /* A step first, so that the parameters and running statistics moved. */
    CK(pcnn_net_train_step(one, B, x, NULL, t, &loss_one));
    CK(pcnn_net_train_step(sp, gn, x + (size_t)g0 * S, NULL, t + g0 * OUT, &loss_sp));
    size_t np;
    float *before = params_of(sp, &np);
    double step_before, step_after;
    CK(pcnn_net_get_option(sp, PCNN_OPT_STEP, &step_before));
    /* The running statistics, through inference under the distribution. */
    float ya[B * OUT], yb[B * OUT];
    CK(pcnn_net_predict_parallel(sp, gn, x + (size_t)g0 * S, ya, (size_t)gn * OUT));

    CK(pcnn_net_compute_loss(one, B, x, NULL, t, &loss_one));
    CK(pcnn_net_compute_loss(sp, gn, x + (size_t)g0 * S, NULL, t + g0 * OUT, &loss_sp));
    const double dl = fabs((double)loss_one - loss_sp) / fabs((double)loss_one);
    float l2_one, l2_sp;
    CK(pcnn_net_compute_gradients(one, B, x, NULL, t, &l2_one));
    CK(pcnn_net_compute_gradients(sp, gn, x + (size_t)g0 * S, NULL, t + g0 * OUT, &l2_sp));
    float *ga = malloc(np * sizeof(float)), *gb = malloc(np * sizeof(float));
    CK(pcnn_net_get_grads(one, ga, np));
    CK(pcnn_net_get_grads(sp, gb, np));
    const double dg = rel_diff(gb, ga, np);
    double gmax = 0.0;
    for (size_t i = 0; i < np; i++) gmax = fmax(gmax, fabs((double)ga[i]));
    char what[200];
    snprintf(what, sizeof what, "compute_loss and compute_gradients equal one rank on the "
             "whole batch: loss %.2g, loss %.2g, gradients %.2g", dl,
             fabs((double)l2_one - l2_sp) / fabs((double)l2_one), dg);
    expect(dl <= 1e-5 && fabs((double)l2_one - l2_sp) <= 1e-5 * fabs((double)l2_one) &&
               dg <= 1e-5 && gmax > 0.0, what);
    /* Again: the summed gradients of the first call (every rank's columns
     * of a box dense layer) must not enter the second's sum. */
    CK(pcnn_net_compute_gradients(one, B, x, NULL, t, &l2_one));
    CK(pcnn_net_compute_gradients(sp, gn, x + (size_t)g0 * S, NULL, t + g0 * OUT, &l2_sp));
    CK(pcnn_net_get_grads(one, ga, np));
    CK(pcnn_net_get_grads(sp, gb, np));
    const double dg2 = rel_diff(gb, ga, np);
    snprintf(what, sizeof what, "compute_gradients twice in a row: the second equals one rank's "
             "too (gradients %.2g)", dg2);
    expect(dg2 <= 1e-5, what);

    float *after = params_of(sp, &np);
    CK(pcnn_net_get_option(sp, PCNN_OPT_STEP, &step_after));
    CK(pcnn_net_predict_parallel(sp, gn, x + (size_t)g0 * S, yb, (size_t)gn * OUT));
    float grad_x[B * S];
    const pcnn_status in_grad = pcnn_net_get_input_grad(sp, grad_x, (size_t)gn * S);
    const bool refused = ranks == 1 || (in_grad == PCNN_ERR_INVALID_STATE &&
                                        strstr(pcnn_last_error(), "its box") != NULL);
    expect(memcmp(before, after, np * sizeof(float)) == 0 && step_before == step_after &&
               memcmp(ya, yb, (size_t)gn * OUT * sizeof(float)) == 0 && refused,
           "they change neither the parameters, the running statistics nor the step, and "
           "leave no input gradient (a rank holds only its box: refused, saying so)");
    free(before);
    free(after);
    free(ga);
    free(gb);
    pcnn_net_destroy(&sp);
    pcnn_net_destroy(&one);
}

static void test_evaluate(const int *parts, bool classify)
{
    enum { N = 9, S = C * H * W, BATCH = 4 };
    const int sync = parts[0] > 1;
    pcnn_net *sp = build(comm_world, parts, BATCH, classify, sync);
    pcnn_net *one = build(NULL, NULL, BATCH, classify, 0);
    float x[N * S], t[N * OUT];
    int32_t labels[N];
    rng_state = 5150;
    for (int i = 0; i < N * S; i++) x[i] = frand();
    for (int i = 0; i < N * OUT; i++) t[i] = frand();
    for (int i = 0; i < N; i++) labels[i] = (int32_t)((rng_state >> 33) % OUT), frand();
    pcnn_dataset *data;
    CK(pcnn_dataset_create(N, C, H, W, x, classify ? labels : NULL, classify ? NULL : t,
                           classify ? 0 : OUT, &data));
    double la, lb, aa, ab;
    CK(pcnn_net_train_epoch(one, data, BATCH, NULL));
    CK(pcnn_net_train_epoch(sp, data, BATCH, NULL));
    CK(pcnn_net_evaluate(one, data, &la, &aa));
    CK(pcnn_net_evaluate(sp, data, &lb, &ab));
    char what[200];
    snprintf(what, sizeof what, "evaluate (%s, 9 samples) equals one rank: loss %.2g%s",
             classify ? "cross entropy" : "MSE", fabs(la - lb) / fabs(la),
             classify ? ", accuracy exactly" : "");
    expect(fabs(la - lb) <= 1e-5 * fabs(la) && (classify ? aa == ab : isnan(ab)), what);
    CK(pcnn_dataset_destroy(&data));
    pcnn_net_destroy(&sp);
    pcnn_net_destroy(&one);
}

/* Every rank writes its own copy of the N samples, NaN outside its box of
 * the input; the path of its manifest goes to manifest. */
static void write_volumes(const float *x, int N, const int *start, const int *count,
                          char *manifest, size_t size, const float *t)
{
    int pid = (int)getpid();
    MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    snprintf(manifest, size, "/tmp/pcnn_spvol_%d_r%d.txt", pid, rank);
    FILE *m = fopen(manifest, "w");
    float sample[C * H * W];
    for (int k = 0; m && k < N; k++) {
        for (int ch = 0; ch < C; ch++)
            for (int h = 0; h < H; h++)
                for (int w = 0; w < W; w++) {
                    const bool in = h >= start[1] && h < start[1] + count[1] && w >= start[2] &&
                                    w < start[2] + count[2];
                    const size_t at = ((size_t)ch * H + h) * W + w;
                    sample[at] = in ? x[(size_t)k * C * H * W + at] : NAN;
                }
        char path[160];
        snprintf(path, sizeof path, "/tmp/pcnn_spvol_%d_r%d_s%d.raw", pid, rank, k);
        FILE *f = fopen(path, "wb");
        if (f) {
            fwrite(sample, sizeof(float), C * H * W, f);
            fclose(f);
        }
        fprintf(m, "%s", path);
        for (int j = 0; j < OUT; j++) fprintf(m, " %.9g", (double)t[k * OUT + j]);
        fprintf(m, "\n");
    }
    if (m) fclose(m);
}

static void remove_volumes(const char *manifest, int N)
{
    char path[160];
    strcpy(path, manifest);
    char *dot = strstr(path, ".txt");
    for (int k = 0; dot && k < N; k++) {
        sprintf(dot, "_s%d.raw", k);
        remove(path);
    }
    remove(manifest);
}

static void test_file_boxes(const int *parts)
{
    enum { N = 7, S = C * H * W, BATCH = 3 };
    const int sync = parts[0] > 1; /* batch norm over the whole batch, as one rank */
    pcnn_net *from_files = build(comm_world, parts, BATCH, false, sync);
    pcnn_layer *input = input_layer;
    pcnn_net *in_memory = build(comm_world, parts, BATCH, false, sync);
    pcnn_net *one = build(NULL, NULL, BATCH, false, 0);
    float x[N * S], t[N * OUT];
    rng_state = 2718;
    for (int i = 0; i < N * S; i++) x[i] = frand();
    for (int i = 0; i < N * OUT; i++) t[i] = frand();
    int start[3], count[3];
    CK(pcnn_layer_local_box(input, start, count));
    char manifest[128];
    write_volumes(x, N, start, count, manifest, sizeof manifest, t);
    pcnn_dataset *vol, *mem;
    CK(pcnn_dataset_open_volumes(manifest, C, 1, H, W, PCNN_DTYPE_F32, OUT, &vol));
    CK(pcnn_dataset_create(N, C, H, W, x, NULL, t, OUT, &mem));
    /* The test can fail: outside the box, this rank's files hold NaN. */
    float whole[S];
    CK(pcnn_dataset_batch(vol, 0, 1, whole, NULL, NULL));
    bool poisoned = false;
    for (int i = 0; i < S; i++) poisoned |= isnan(whole[i]);
    expect(poisoned == (count[1] < H || count[2] < W),
           "each rank's volume files hold NaN outside its box (when it has an outside)");

    double la, lb, lc, ea, eb, ec;
    CK(pcnn_net_train_epoch(from_files, vol, BATCH, &la));
    CK(pcnn_net_train_epoch(in_memory, mem, BATCH, &lb));
    CK(pcnn_net_train_epoch(one, mem, BATCH, &lc));
    CK(pcnn_net_evaluate(from_files, vol, &ea, NULL));
    CK(pcnn_net_evaluate(in_memory, mem, &eb, NULL));
    CK(pcnn_net_evaluate(one, mem, &ec, NULL));
    size_t np;
    float *pa = params_of(from_files, &np), *pb = params_of(in_memory, &np),
          *pc = params_of(one, &np);
    const double d = rel_diff(pa, pc, np);
    char what[220];
    snprintf(what, sizeof what, "train_epoch and evaluate on volume files read only each "
             "rank's box: bit for bit the in-memory path; one rank: parameters %.2g, loss "
             "%.2g, evaluation %.2g", d, fabs(la - lc) / fabs(lc), fabs(ea - ec) / fabs(ec));
    expect(memcmp(pa, pb, np * sizeof(float)) == 0 && la == lb && ea == eb && d <= 1e-5 &&
               fabs(la - lc) <= 1e-5 * fabs(lc) && fabs(ea - ec) <= 1e-5 * fabs(ec), what);
    free(pa);
    free(pb);
    free(pc);
    CK(pcnn_dataset_destroy(&vol));
    CK(pcnn_dataset_destroy(&mem));
    remove_volumes(manifest, N);
    pcnn_net_destroy(&from_files);
    pcnn_net_destroy(&in_memory);
    pcnn_net_destroy(&one);
}

static void test_scheduler(const int *parts)
{
    enum { N = 10, S = C * H * W, MAXB = 4 };
    /* At least 2 samples per computing group (the default): batch 3 goes
     * to one group, so the network holds 3 (finalize with 5 over 2 groups). */
    pcnn_net *sp = build(comm_world, parts, MAXB + 1, false, parts[0] > 1);
    pcnn_net *one = build(NULL, NULL, MAXB, false, 0);
    float x[N * S], t[N * OUT];
    rng_state = 1618;
    for (int i = 0; i < N * S; i++) x[i] = frand();
    for (int i = 0; i < N * OUT; i++) t[i] = frand();
    pcnn_dataset *data;
    CK(pcnn_dataset_create(N, C, H, W, x, NULL, t, OUT, &data));
    pcnn_scheduler *sa, *sb;
    CK(pcnn_scheduler_create(one, 2, MAXB, 0.05, &sa));
    CK(pcnn_scheduler_create(sp, 2, MAXB, 0.05, &sb));
    double la = 0, lb = 0;
    for (int e = 0; e < 3; e++) {
        CK(pcnn_scheduler_train_epoch(sa, data, &la));
        CK(pcnn_scheduler_train_epoch(sb, data, &lb));
    }
    double ba, bb;
    CK(pcnn_scheduler_get_option(sa, PCNN_SCHED_BATCH, &ba));
    CK(pcnn_scheduler_get_option(sb, PCNN_SCHED_BATCH, &bb));
    int first, n;
    CK(pcnn_scheduler_share(sb, 5, &first, &n));
    int g0, gn;
    group_share(parts, 5, &g0, &gn);
    size_t np;
    float *pa = params_of(one, &np), *pb = params_of(sp, &np);
    const double d = rel_diff(pb, pa, np);
    char what[200];
    snprintf(what, sizeof what, "the scheduler trains a spatial network as one rank: 3 epochs, "
             "batch %g and %g, parameters %.2g, loss %.2g; its share is the group's", ba, bb, d,
             fabs(la - lb) / fabs(la));
    expect(ba == bb && d <= 1e-5 && fabs(la - lb) <= 1e-5 * fabs(la) && first == g0 && n == gn,
           what);
    free(pa);
    free(pb);
    CK(pcnn_scheduler_destroy(&sa));
    CK(pcnn_scheduler_destroy(&sb));
    CK(pcnn_dataset_destroy(&data));
    pcnn_net_destroy(&sp);
    pcnn_net_destroy(&one);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm_world));
    int parts[4] = {1, 1, ranks, 1};
    if (ranks == 4) parts[0] = 2, parts[2] = 1, parts[3] = 2; /* hybrid 2 x (1 x 2) */
    test_compute(parts);
    test_evaluate(parts, false);
    test_evaluate(parts, true);
    test_file_boxes(parts);
    test_scheduler(parts);
    CK(pcnn_comm_destroy(&comm_world));
    if (rank == 0) printf("%d of %d checks passed\n", checks - failures, checks);
    MPI_Finalize();
    return failures ? 1 : 0;
}
