/* HDF5 volumes under spatial and hybrid splits, mpiexec with 1 to 4 ranks
 * (D, H and W splits of odd sizes, uneven shares, and a hybrid on 4):
 *
 *   1. Two train_epochs (the second with prefetch) and evaluate on an HDF5
 *      file of int16 volumes, scaled and shifted as read, equal, bit for
 *      bit, the same network on the same values in memory.
 *   2. The bytes of samples each rank read during the first epoch
 *      (pcnn_dataset_io_bytes; no read-ahead, whose guesses may read more) are within 10 % of its box's share: its
 *      group's samples x C x its box x 2 bytes, contiguous and chunked by
 *      planes (a D split of a chunked file). */
#define PCNN_EXPERIMENTAL
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/mpi_check.h"
#include "h5_write.h"
#include "pcnn.h"

enum { N = 7, C = 2, D = 7, H = 9, W = 11, OUT = 3, BATCH = 3 };
#define S (C * D * H * W)

static pcnn_comm *comm_world;
static pcnn_layer *input_layer;
static short xs[N * S];
static float xf[N * S], targets[N * OUT];

static pcnn_net *build(pcnn_comm *comm, const int *parts)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    if (comm) CK(pcnn_net_set_comm(net, comm));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 5));
    CK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 0.01));
    CK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_MOMENTUM));
    CK(pcnn_net_input3d(net, C, D, H, W, &l));
    input_layer = l;
    CK(pcnn_conv3d(net, l, 3, 3, 1, 1, 1, &l));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_flatten(net, l, &l));
    CK(pcnn_dense(net, l, OUT, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_MSE));
    if (parts) CK(pcnn_net_set_distribution(net, parts));
    CK(pcnn_net_finalize(net, BATCH));
    return net;
}

static float *params_of(pcnn_net *net, size_t *count)
{
    CK(pcnn_net_num_params(net, count));
    float *p = malloc(*count * sizeof(float));
    CK(pcnn_net_get_params(net, p, *count));
    return p;
}

/* Rank 0 writes the file; the others wait for it. */
static void write_file(const char *path, bool chunked)
{
    if (rank == 0) {
        const hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        const hsize_t dims[5] = {N, C, D, H, W}, chunk[5] = {1, C, 1, H, W};
        const hsize_t tdims[2] = {N, OUT};
        int bad = f < 0 || h5w_dataset(f, "full", H5T_STD_I16LE, H5T_NATIVE_SHORT, 5, dims,
                                       chunked ? chunk : NULL, xs);
        bad |= f < 0 || h5w_dataset(f, "unitPar", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, tdims,
                                    NULL, targets);
        if (f >= 0) H5Fclose(f);
        if (bad) {
            fprintf(stderr, "cannot write %s\n", path);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* The samples this rank's group reads in an epoch of batches of BATCH. */
static long group_samples(const int *parts)
{
    const int groups = parts[0], g = rank / (ranks / groups);
    long total = 0;
    for (int start = 0; start < N; start += BATCH) {
        const int b = N - start < BATCH ? N - start : BATCH;
        total += b / groups + (g < b % groups);
    }
    return total;
}

static void test_split(const int *parts, bool chunked)
{
    char path[128], what[300];
    int pid = (int)getpid();
    MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    snprintf(path, sizeof path, "/tmp/pcnn_h5sp_%d.h5", pid);
    write_file(path, chunked);
    pcnn_net *from_file = build(comm_world, parts);
    pcnn_layer *input = input_layer;
    pcnn_net *in_memory = build(comm_world, parts);
    pcnn_dataset *file, *mem;
    CK(pcnn_dataset_open_hdf5(path, NULL, NULL, PCNN_HDF5_VOLUMES, &file));
    CK(pcnn_dataset_create3d(N, C, D, H, W, xf, NULL, targets, OUT, &mem));
    CK(pcnn_dataset_set_transform(file, -1, 0, 1.0f / 1024.0f, 0.25f));
    int start[3], count[3];
    CK(pcnn_layer_local_box(input, start, count));

    uint64_t before, after;
    double la, lb, ea, eb;
    CK(pcnn_dataset_io_bytes(file, &before, NULL));
    CK(pcnn_net_train_epoch(from_file, file, BATCH, &la));
    CK(pcnn_dataset_io_bytes(file, &after, NULL));
    CK(pcnn_net_train_epoch(in_memory, mem, BATCH, &lb));
    /* The second epoch and evaluate read ahead (what the first epoch's
     * byte count would include: guesses of the next batch, wanted or not). */
    CK(pcnn_dataset_set_prefetch(file, 2));
    double la2, lb2;
    CK(pcnn_net_train_epoch(from_file, file, BATCH, &la2));
    CK(pcnn_net_train_epoch(in_memory, mem, BATCH, &lb2));
    CK(pcnn_net_evaluate(from_file, file, &ea, NULL));
    CK(pcnn_net_evaluate(in_memory, mem, &eb, NULL));
    size_t np;
    float *pa = params_of(from_file, &np), *pb = params_of(in_memory, &np);
    snprintf(what, sizeof what, "parts (%d, %d, %d, %d)%s: train_epoch and evaluate on the "
             "HDF5 file equal the in-memory values bit for bit", parts[0], parts[1], parts[2],
             parts[3], chunked ? ", chunked by planes" : "");
    expect(memcmp(pa, pb, np * sizeof(float)) == 0 && la == lb && la2 == lb2 && ea == eb, what);

    const double share = (double)group_samples(parts) * C * count[0] * count[1] * count[2] * 2;
    const double got = (double)(after - before);
    double worst = share > 0 ? fabs(got / share - 1.0) : got > 0 ? INFINITY : 0.0;
    MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    snprintf(what, sizeof what, "  each rank read its box's share of the sample bytes: "
             "rank %d box (%d, %d, %d) of (%d, %d, %d), %.0f bytes for %.0f, worst rank "
             "off by %.1f %%", rank, count[0], count[1], count[2], D, H, W, got, share,
             100.0 * worst);
    expect(worst <= 0.10, what);
    free(pa);
    free(pb);
    CK(pcnn_dataset_destroy(&file));
    CK(pcnn_dataset_destroy(&mem));
    pcnn_net_destroy(&from_file);
    pcnn_net_destroy(&in_memory);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) remove(path);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm_world));
    uint64_t r = 12345;
    for (int i = 0; i < N * S; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        xs[i] = (short)((int)(r >> 52) - 2048); /* [-2048, 2048): exact in float */
        xf[i] = (1.0f / 1024.0f) * (float)xs[i] + 0.25f; /* the transform set below */
    }
    for (int i = 0; i < N * OUT; i++) targets[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
    /* Every split the rank count allows, one dimension at a time, and the
     * hybrid (2 groups) when there are 4 ranks. */
    for (int dim = 1; dim <= 3; dim++) {
        int parts[4] = {1, 1, 1, 1};
        parts[dim] = ranks;
        test_split(parts, false);
        if (dim == 1) test_split(parts, true);
    }
    if (ranks == 4) {
        const int hybrid[4] = {2, 1, 2, 1}, two_d[4] = {1, 2, 1, 2};
        test_split(hybrid, false);
        test_split(two_d, false);
    }
    if (ranks > 1) {
        const int samples[4] = {ranks, 1, 1, 1};
        test_split(samples, false);
    }
    CK(pcnn_comm_destroy(&comm_world));
    if (rank == 0) printf("%d of %d checks passed\n", checks - failures, checks);
    MPI_Finalize();
    return failures ? 1 : 0;
}
