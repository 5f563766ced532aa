/* A traced training run on the ranks of MPI_COMM_WORLD, for check_trace.py:
 * 4 steps through pcnn_net_train_epoch and 2 through pcnn_net_train_step,
 * then one merged trace (pcnn_net_write_trace_merged) and one per rank
 * (pcnn_net_write_trace) in the directory argv[1].  Also checks here the
 * merged call's errors: a NULL path on one rank fails every rank (the
 * others with REMOTE), and tracing off is INVALID_STATE everywhere.
 * Prints "steps N" on rank 0 for the checker. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pcnn.h"
#include "../common/mpi_check.h"

static pcnn_net *build(pcnn_comm *comm, int trace_events)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, 3, 8, 8, &l));
    CK(pcnn_conv2d(net, l, 4, 3, 1, 1, 1, &l));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_flatten(net, l, &l));
    CK(pcnn_dense(net, l, 10, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_comm(net, comm));
    CK(pcnn_net_set_option(net, PCNN_OPT_TRACE_EVENTS, trace_events));
    CK(pcnn_net_finalize(net, 8));
    return net;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (argc != 2) {
        fprintf(stderr, "usage: test_trace DIR\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    pcnn_comm *comm;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    pcnn_net *net = build(comm, 4096);

    enum { N = 32 };
    float *x = malloc(sizeof(float) * N * 3 * 8 * 8);
    int32_t labels[N];
    for (int i = 0; i < N * 3 * 8 * 8; i++) x[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    for (int i = 0; i < N; i++) labels[i] = i % 10;
    pcnn_dataset *data;
    CK(pcnn_dataset_create(N, 3, 8, 8, x, labels, NULL, 0, &data));
    double mean;
    CK(pcnn_net_train_epoch(net, data, 8, &mean));
    int first, count = 0;
    for (int s = 0; s < 2; s++) {
        first = rank * 2; /* two samples per rank */
        count = 2;
        float loss;
        CK(pcnn_net_train_step(net, count, x + (size_t)first * 3 * 8 * 8, labels + first, NULL,
                               &loss));
    }

    char path[4096];
    snprintf(path, sizeof path, "%s/merged.json", argv[1]);
    CK(pcnn_net_write_trace_merged(net, path));
    snprintf(path, sizeof path, "%s/rank%d.json", argv[1], rank);
    CK(pcnn_net_write_trace(net, path));

    /* Errors agree across ranks. */
    snprintf(path, sizeof path, "%s/never.json", argv[1]);
    pcnn_status st = pcnn_net_write_trace_merged(net, rank == ranks - 1 ? NULL : path);
    expect(rank == ranks - 1 ? st == PCNN_ERR_INVALID_ARGUMENT : st == PCNN_ERR_REMOTE,
           "a NULL path on the last rank fails every rank");
    pcnn_net *quiet = build(comm, 0);
    st = pcnn_net_write_trace_merged(quiet, path);
    expect(st == PCNN_ERR_INVALID_STATE && strstr(pcnn_last_error(), "tracing is off"),
           "tracing off: INVALID_STATE on every rank");
    CK(pcnn_net_destroy(&quiet));

    double steps;
    CK(pcnn_net_get_option(net, PCNN_OPT_STEP, &steps));
    if (rank == 0) printf("steps %.0f\n", steps);
    CK(pcnn_dataset_destroy(&data));
    CK(pcnn_net_destroy(&net));
    CK(pcnn_comm_destroy(&comm));
    free(x);
    MPI_Finalize();
    return failures ? 1 : 0;
}
