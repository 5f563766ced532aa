/* Datasets fail together (mpiexec, 2 or 3 ranks): when the last rank's
 * dataset differs from the others' -- its length, the element type of its
 * HDF5 file, its targets, its order -- or it asks for another batch,
 * train_epoch, evaluate and the scheduler's epoch return
 * PCNN_ERR_MISMATCH on every rank, the message naming rank 0's value and
 * the other's, within the timeout; the network then trains on agreeing
 * datasets as before.  A sample shape the network does not take fails
 * that rank with SHAPE and the others with REMOTE. */
#define PCNN_EXPERIMENTAL
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <unistd.h>

#include "../common/mpi_check.h"
#include "h5_write.h"
#include "pcnn.h"

enum { C = 1, H = 5, W = 4, OUT = 2, MAXB = 4 };

static pcnn_comm *comm_world;

static pcnn_net *build(int max_batch)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_set_comm(net, comm_world));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 3));
    CK(pcnn_net_set_option(net, PCNN_OPT_TIMEOUT_MS, 30000));
    CK(pcnn_net_input(net, C, H, W, &l));
    CK(pcnn_dense(net, l, OUT, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_MSE));
    CK(pcnn_net_finalize(net, max_batch));
    return net;
}

static pcnn_dataset *in_memory(int n, float target_shift)
{
    float *x = malloc((size_t)n * C * H * W * sizeof *x), *t = malloc((size_t)n * OUT * sizeof *t);
    for (int i = 0; i < n * C * H * W; i++) x[i] = (float)(i % 7) / 7.0f;
    for (int i = 0; i < n * OUT; i++) t[i] = (float)(i % 3) + target_shift;
    pcnn_dataset *d;
    CK(pcnn_dataset_create(n, C, H, W, x, NULL, t, OUT, &d));
    free(x);
    free(t);
    return d;
}

/* An HDF5 file of n images of int16 (or float32) values. */
static pcnn_dataset *from_hdf5(int n, bool floats)
{
    char path[128];
    snprintf(path, sizeof path, "/tmp/pcnn_h5mm_%d_r%d.h5", (int)getpid(), rank);
    short xs[64 * C * H * W];
    float xf[64 * C * H * W], t[64 * OUT];
    for (int i = 0; i < n * C * H * W; i++) xs[i] = (short)(i % 7), xf[i] = (float)(i % 7);
    for (int i = 0; i < n * OUT; i++) t[i] = (float)(i % 3);
    const hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t dims[4] = {(hsize_t)n, C, H, W}, tdims[2] = {(hsize_t)n, OUT};
    int bad = floats ? h5w_dataset(f, "full", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 4, dims, NULL, xf)
                     : h5w_dataset(f, "full", H5T_STD_I16LE, H5T_NATIVE_SHORT, 4, dims, NULL, xs);
    bad |= h5w_dataset(f, "unitPar", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, tdims, NULL, t);
    H5Fclose(f);
    if (bad) MPI_Abort(MPI_COMM_WORLD, 2);
    pcnn_dataset *d;
    CK(pcnn_dataset_open_hdf5(path, NULL, NULL, PCNN_HDF5_IMAGES, &d));
    return d;
}

/* Run `what` on every rank; every rank must get MISMATCH naming `first`
 * (rank 0's value) and `other`. */
static void expect_mismatch(pcnn_status st, const char *first, const char *other,
                            const char *what)
{
    const char *msg = pcnn_last_error();
    char on0[96], onr[96];
    snprintf(on0, sizeof on0, "%s on rank 0", first);
    snprintf(onr, sizeof onr, "%s on rank %d", other, ranks - 1);
    const bool ok = st == PCNN_ERR_MISMATCH && strstr(msg, on0) && strstr(msg, onr);
    if (!ok) fprintf(stderr, "rank %d: %s -> %s: %s\n", rank, what, pcnn_status_str(st), msg);
    char text[300];
    snprintf(text, sizeof text, "%s: MISMATCH on every rank naming both values (%s)", what,
             rank == 0 ? msg : "");
    expect(ok, text);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm_world));
    const bool last = rank == ranks - 1;
    pcnn_net *net = build(MAXB);
    double loss, acc;

    /* Length: per-rank shards of other lengths (the DDP habit). */
    pcnn_dataset *d = in_memory(last ? 9 : 8, 0.0f);
    expect_mismatch(pcnn_net_train_epoch(net, d, 4, &loss), "8", "9",
                    "train_epoch on datasets of 8 and 9 samples");
    expect_mismatch(pcnn_net_evaluate(net, d, &loss, &acc), "8", "9",
                    "evaluate on datasets of 8 and 9 samples");
    pcnn_net *scheduled = build(4 * ranks); /* room for the scheduler's minimum share */
    pcnn_scheduler *sched;
    CK(pcnn_scheduler_create(scheduled, 2, MAXB, 0.01, &sched));
    expect_mismatch(pcnn_scheduler_train_epoch(sched, d, &loss), "8", "9",
                    "the scheduler's epoch on datasets of 8 and 9 samples");
    CK(pcnn_scheduler_destroy(&sched));
    pcnn_net_destroy(&scheduled);
    CK(pcnn_dataset_destroy(&d));

    d = in_memory(last ? 9 : 8, 0.0f);
    pcnn_status st_sharded;
    /* Sharded mode (pcnn_dataset_set_sharded): shards of other lengths train
     * and evaluate, equal on every rank; a rank in the other mode, a batch
     * without a sample per rank, and the scheduler's min_local are refused
     * on every rank alike. */
    expect(pcnn_dataset_set_sharded(NULL, 1) == PCNN_ERR_INVALID_ARGUMENT &&
               pcnn_dataset_set_sharded(d, 2) == PCNN_ERR_INVALID_ARGUMENT,
           "set_sharded: NULL and 2 are INVALID_ARGUMENT");
    CK(pcnn_dataset_set_sharded(d, 1));
    int mode = -1;
    CK(pcnn_dataset_get_sharded(d, &mode));
    expect(mode == 1, "get_sharded gives the mode set");
    st_sharded = pcnn_net_train_epoch(net, d, MAXB, &loss);
    double ev[2] = {NAN, NAN};
    if (st_sharded == PCNN_OK) st_sharded = pcnn_net_evaluate(net, d, &ev[0], &ev[1]);
    double ev0[2] = {ev[0], ev[1]};
    MPI_Bcast(ev0, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    expect(st_sharded == PCNN_OK && isfinite(loss) && ev[0] == ev0[0],
           "sharded train_epoch and evaluate on shards of 8 and 9: OK, the same loss on "
           "every rank");
    if (ranks > 1) {
        const pcnn_status small = pcnn_net_train_epoch(net, d, 1, &loss);
        expect(small == PCNN_ERR_INVALID_ARGUMENT && strstr(pcnn_last_error(), "per rank"),
               "sharded with a global batch of 1 < ranks: INVALID_ARGUMENT on every rank");
    }
    CK(pcnn_dataset_set_sharded(d, !last));
    expect_mismatch(pcnn_net_evaluate(net, d, &loss, &acc), "1", "0",
                    "evaluate with sharded mode on every rank but the last");
    CK(pcnn_dataset_set_sharded(d, 1));
    pcnn_net *sched_net = build(4 * ranks);
    pcnn_scheduler *sched2;
    CK(pcnn_scheduler_create(sched_net, 2, MAXB, 0.01, &sched2));
    const pcnn_status sst = pcnn_scheduler_train_epoch(sched2, d, &loss);
    expect(sst == PCNN_ERR_UNSUPPORTED || (ranks == 1 && sst == PCNN_OK),
           "the scheduler's min_local on sharded data: UNSUPPORTED on every rank");
    CK(pcnn_scheduler_destroy(&sched2));
    pcnn_net_destroy(&sched_net);
    CK(pcnn_dataset_destroy(&d));

    /* Targets of the same length but other values (each rank its own data). */
    d = in_memory(8, last ? 0.5f : 0.0f);
    pcnn_status st = pcnn_net_train_epoch(net, d, 4, &loss);
    expect(st == PCNN_ERR_MISMATCH && strstr(pcnn_last_error(), "target values"),
           "train_epoch on 8 samples with other targets on one rank: MISMATCH (target values)");
    CK(pcnn_dataset_destroy(&d));

    /* Order: one rank shuffled with another epoch. */
    d = in_memory(8, 0.0f);
    CK(pcnn_dataset_shuffle(d, 1, last ? 2 : 1));
    st = pcnn_net_evaluate(net, d, &loss, &acc);
    expect(st == PCNN_ERR_MISMATCH && strstr(pcnn_last_error(), "sample order"),
           "evaluate after shuffles of other epochs: MISMATCH (sample order)");
    /* The batch plan. */
    CK(pcnn_dataset_shuffle(d, 1, 1));
    expect_mismatch(pcnn_net_train_epoch(net, d, last ? 3 : 4, &loss), "4", "3",
                    "train_epoch with batch 4 and 3");
    /* Agreeing again: the network trains as before. */
    st = pcnn_net_train_epoch(net, d, 4, &loss);
    expect(st == PCNN_OK, "then the same dataset and batch on every rank trains");
    CK(pcnn_dataset_destroy(&d));

    /* Element type: int16 on the other ranks, float32 (same values) on the last. */
    d = from_hdf5(8, last);
    expect_mismatch(pcnn_net_train_epoch(net, d, 4, &loss), "int16", "float32",
                    "train_epoch on HDF5 files of int16 and float32");
    CK(pcnn_dataset_destroy(&d));
    char path[128];
    snprintf(path, sizeof path, "/tmp/pcnn_h5mm_%d_r%d.h5", (int)getpid(), rank);
    remove(path);

    /* A shape the network does not take, on one rank. */
    pcnn_dataset *wrong;
    float x[3 * C * (H + 1) * W] = {0}, t[3 * OUT] = {0};
    CK(pcnn_dataset_create(3, C, last ? H + 1 : H, W, x, NULL, t, OUT, &wrong));
    st = pcnn_net_evaluate(net, wrong, &loss, &acc);
    expect(last ? st == PCNN_ERR_SHAPE : st == PCNN_ERR_REMOTE,
           "a sample shape the network does not take on one rank: SHAPE there, REMOTE "
           "elsewhere");
    CK(pcnn_dataset_destroy(&wrong));

    pcnn_net_destroy(&net);
    CK(pcnn_comm_destroy(&comm_world));
    if (rank == 0) printf("%d of %d checks passed\n", checks - failures, checks);
    MPI_Finalize();
    return failures ? 1 : 0;
}
