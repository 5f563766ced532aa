/* Spatial parallelism on a large-plane 2D network (seed 002 section VI,
 * scaled down): 18-channel fields of size x size, too large a sample to
 * want on one rank, each split over all ranks along H; the network learns
 * to predict four statistics of each field.  One sample per step, so data
 * parallelism alone could not use more than one rank.
 *
 *   mpiexec.mpich -n 2 spatial_mesh [--size 512] [--steps 20] [--split h|w|hw]
 *
 * Every rank builds the same network; pcnn_net_set_distribution splits
 * each sample; every rank passes the whole sample to pcnn_net_train_step
 * and the library keeps its box (pcnn_net_train_step_local takes only the
 * box, for a reader that loads only its part).  Prints the loss, each
 * rank's box, and the timing report with the halo and shuffle times. */
#define PCNN_EXPERIMENTAL
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pcnn.h"

#define CHECK(call)                                                                       \
    do {                                                                                  \
        pcnn_status s_ = (call);                                                          \
        if (s_ != PCNN_OK) {                                                              \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, pcnn_last_error()); \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                 \
        }                                                                                 \
    } while (0)

enum { CHANNELS = 18, TARGETS = 4 };

/* A smooth field: per channel a few waves whose frequencies depend on the
 * sample; the targets are the means of four channel groups' squares. */
static void make_sample(int s, int size, float *x, float *t)
{
    for (int k = 0; k < TARGETS; k++) t[k] = 0.0f;
    for (int c = 0; c < CHANNELS; c++) {
        const double fx = 1.0 + (s * 7 + c) % 5, fy = 1.0 + (s * 3 + 2 * c) % 4;
        double sq = 0.0;
        for (int h = 0; h < size; h++)
            for (int w = 0; w < size; w++) {
                const double v = sin(6.2832 * fx * w / size) * cos(6.2832 * fy * h / size) *
                                 (0.5 + 0.05 * (c % 7));
                x[((size_t)c * size + h) * size + w] = (float)v;
                sq += v * v;
            }
        t[c % TARGETS] += (float)(sq / ((double)size * size));
    }
}

int main(int argc, char **argv)
{
    int provided, rank, ranks;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    int size = 512, steps = 20;
    const char *split = "h";
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help")) {
            if (rank == 0)
                printf("usage: mpiexec.mpich -n 2 spatial_mesh [--size 512] [--steps 20] "
                       "[--split h|w|hw]\n"
                       "  --size N    fields of 18 x N x N (>= 32), one sample per step\n"
                       "  --steps N   training steps\n"
                       "  --split S   split each sample over the ranks along H, W, or both\n"
                       "              (hw: 2 x ranks/2 with an even number of ranks)\n");
            MPI_Finalize();
            return 0;
        }
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--size")) size = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--split")) split = argv[i + 1];
    }
    if (size < 32 || steps < 1) {
        if (rank == 0) fprintf(stderr, "usage: spatial_mesh [--size >= 32] [--steps N]\n");
        MPI_Finalize();
        return 2;
    }

    pcnn_comm *comm;
    pcnn_net *net;
    pcnn_layer *in, *l;
    CHECK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    CHECK(pcnn_net_create(&net));
    CHECK(pcnn_net_set_comm(net, comm));
    CHECK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 0.01));
    CHECK(pcnn_net_set_option(net, PCNN_OPT_TRACE_EVENTS, 0));
    CHECK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_ADAM));
    CHECK(pcnn_net_input(net, CHANNELS, size, size, &in));
    CHECK(pcnn_conv2d(net, in, 16, 3, 1, 1, 1, &l));
    CHECK(pcnn_relu(net, l, &l));
    CHECK(pcnn_conv2d(net, l, 16, 3, 2, 1, 1, &l));
    CHECK(pcnn_relu(net, l, &l));
    CHECK(pcnn_conv2d(net, l, 32, 3, 2, 1, 1, &l));
    CHECK(pcnn_relu(net, l, &l));
    CHECK(pcnn_maxpool2d(net, l, 4, 4, 0, &l));
    CHECK(pcnn_conv2d(net, l, 32, 3, 1, 1, 1, &l));
    CHECK(pcnn_relu(net, l, &l));
    CHECK(pcnn_global_avgpool(net, l, &l)); /* whole samples from here on */
    CHECK(pcnn_dense(net, l, TARGETS, 1, &l));
    CHECK(pcnn_net_set_loss(net, l, PCNN_LOSS_MSE));
    int parts[4] = {1, 1, ranks, 1};
    if (!strcmp(split, "w")) parts[2] = 1, parts[3] = ranks;
    if (!strcmp(split, "hw") && ranks % 2 == 0) parts[2] = 2, parts[3] = ranks / 2;
    CHECK(pcnn_net_set_distribution(net, parts));
    CHECK(pcnn_net_finalize(net, 1));

    int start[3], count[3];
    CHECK(pcnn_layer_local_box(in, start, count));
    size_t bytes;
    CHECK(pcnn_net_memory_bytes(net, &bytes));
    for (int r = 0; r < ranks; r++) {
        if (r == rank)
            printf("rank %d: rows %d..%d, columns %d..%d of %d x %d; %.1f MB planned\n", rank,
                   start[1], start[1] + count[1] - 1, start[2], start[2] + count[2] - 1, size,
                   size, bytes / 1e6);
        fflush(stdout);
        MPI_Barrier(MPI_COMM_WORLD);
    }

    float *x = malloc(sizeof(float) * CHANNELS * size * size), t[TARGETS], loss = 0;
    for (int s = 0; s < steps; s++) {
        make_sample(s % 8, size, x, t);
        CHECK(pcnn_net_train_step(net, 1, x, NULL, t, &loss));
        if (rank == 0 && (s % 5 == 0 || s == steps - 1)) printf("step %3d  loss %.5f\n", s, loss);
    }
    char report[8192];
    CHECK(pcnn_net_timing_report(net, report, sizeof report, NULL));
    if (rank == 0) printf("%s", report);
    free(x);
    CHECK(pcnn_net_destroy(&net));
    CHECK(pcnn_comm_destroy(&comm));
    MPI_Finalize();
    return 0;
}
