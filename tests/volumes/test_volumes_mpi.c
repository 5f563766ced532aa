/* File-backed volumes under data parallelism: on P ranks, training and
 * evaluation read from the files give bitwise the losses of the same data
 * in memory (each rank reads only its share of each batch, with the
 * prefetch thread on); a file that fails on one rank only fails the epoch
 * and the evaluation on every rank, within the call, instead of leaving the
 * others waiting in a collective. */
#define PCNN_EXPERIMENTAL
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/mpi_check.h"

enum { C = 2, D = 6, H = 5, W = 4, S = C * D * H * W, N = 11, T = 3, BATCH = 4 };

static pcnn_net *build(pcnn_comm *comm)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input3d(net, C, D, H, W, &l));
    CK(pcnn_conv3d(net, l, 3, 3, 1, 1, 0, &l));
    CK(pcnn_leaky_relu(net, l, 0.01f, &l));
    CK(pcnn_avgpool3d(net, l, 3, 2, 1, &l));
    CK(pcnn_flatten(net, l, &l));
    CK(pcnn_dense(net, l, T, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_MSE));
    CK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_ADAM));
    CK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 1e-3));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 3));
    CK(pcnn_net_set_comm(net, comm));
    CK(pcnn_net_finalize(net, BATCH));
    return net;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    char dir[256] = "";
    if (rank == 0) {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/pcnn_vmpi_XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir)) MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    static float x[N * S], t[N * T];
    for (int i = 0; i < N * S; i++) x[i] = (float)sin(i * 0.37) + (float)(i / S) * 0.1f;
    for (int i = 0; i < N * T; i++) t[i] = (float)cos(i * 1.3);
    /* Every rank writes its own copy of the files and its own manifest, so
     * that one rank's files can be broken alone. */
    char path[512], manifest[512];
    snprintf(manifest, sizeof manifest, "%s/m%d.txt", dir, rank);
    FILE *m = fopen(manifest, "w");
    for (int k = 0; k < N; k++) {
        snprintf(path, sizeof path, "%s/r%d_s%d.raw", dir, rank, k);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(x + k * S, sizeof(float), S, f) != S || fclose(f) != 0)
            MPI_Abort(MPI_COMM_WORLD, 1);
        fprintf(m, "r%d_s%d.raw %.9g %.9g %.9g\n", rank, k, t[k * T], t[k * T + 1], t[k * T + 2]);
    }
    fclose(m);

    pcnn_comm *comm;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    pcnn_dataset *mem, *files;
    CK(pcnn_dataset_create3d(N, C, D, H, W, x, NULL, t, T, &mem));
    CK(pcnn_dataset_open_volumes(manifest, C, D, H, W, PCNN_DTYPE_F32, T, &files));
    CK(pcnn_dataset_set_prefetch(files, 2));
    pcnn_net *a = build(comm), *b = build(comm);
    int same = 1;
    for (int e = 0; e < 3; e++) {
        double la, lb;
        CK(pcnn_dataset_shuffle(mem, 4, (uint64_t)e));
        CK(pcnn_dataset_shuffle(files, 4, (uint64_t)e));
        CK(pcnn_net_train_epoch(a, mem, BATCH, &la));
        CK(pcnn_net_train_epoch(b, files, BATCH, &lb));
        same &= la == lb && isfinite(la);
    }
    expect(same, "train_epoch from files equals from memory (3 epochs)");
    double ea, eb;
    CK(pcnn_net_evaluate(a, mem, &ea, NULL));
    CK(pcnn_net_evaluate(b, files, &eb, NULL));
    expect(ea == eb, "evaluate from files equals from memory");

    /* The last rank's copy of the last sample is cut: that rank reads it in
     * evaluate (its share ends the dataset) and in the last batch. */
    CK(pcnn_dataset_shuffle(files, 4, 0));
    CK(pcnn_dataset_set_prefetch(files, 0));
    float probe[S];
    CK(pcnn_dataset_batch(files, N - 1, 1, probe, NULL, NULL));
    int last = -1;
    for (int k = 0; k < N; k++)
        if (memcmp(probe, x + k * S, sizeof probe) == 0) last = k;
    if (rank == ranks - 1) {
        snprintf(path, sizeof path, "%s/r%d_s%d.raw", dir, rank, last);
        if (truncate(path, 16) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    pcnn_status se = pcnn_net_evaluate(b, files, &eb, NULL);
    char cut[64];
    snprintf(cut, sizeof cut, "r%d_s%d.raw", rank, last);
    int named = rank != ranks - 1 || (se == PCNN_ERR_CORRUPT && strstr(pcnn_last_error(), cut));
    if (!named) fprintf(stderr, "rank %d: %s: %s\n", rank, pcnn_status_str(se), pcnn_last_error());
    pcnn_status st = pcnn_net_train_epoch(b, files, BATCH, &eb);
    const double took = MPI_Wtime() - t0;
    expect(se != PCNN_OK, "a file cut on one rank fails evaluate on every rank");
    expect(st != PCNN_OK, "and the epoch on every rank");
    expect(named, "the failing rank reports CORRUPT naming the file");
    expect(took < 30.0, "without waiting for a timeout");

    pcnn_net_destroy(&a);
    pcnn_net_destroy(&b);
    pcnn_dataset_destroy(&mem);
    pcnn_dataset_destroy(&files);
    pcnn_comm_destroy(&comm);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    }
    MPI_Finalize();
    return failures ? 1 : 0;
}
