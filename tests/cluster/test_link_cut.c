/* A host's network link is cut during training: every rank must get an
 * error from pcnn_net_train_step within PCNN_OPT_TIMEOUT_MS (plus a margin)
 * instead of hanging.  Driven by tests/cluster/cluster_test.sh:
 *
 *   link_cut DIR TIMEOUT_MS ENGINE
 *
 * trains a small network for ever (ENGINE: 1 thread, 2 nonblocking); rank 0
 * creates DIR/training after a few steps, the driver then cuts a host's
 * link.  Each rank writes DIR/rank<R> once its step fails:
 *   status <name> ms <duration of the failing call> step <n> destroy_ms <t>
 *   message <pcnn_last_error()>
 * then destroys the network and the communicator (which must not wait
 * either) and leaves without MPI_Finalize, which would wait for the
 * unreachable rank.  The driver judges the files. */
#define PCNN_EXPERIMENTAL /* PCNN_OPT_ENGINE */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pcnn.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static void check(pcnn_status s, const char *what, int rank)
{
    if (s == PCNN_OK) return;
    fprintf(stderr, "rank %d: %s: %s (%s)\n", rank, what, pcnn_last_error(), pcnn_status_str(s));
    MPI_Abort(MPI_COMM_WORLD, 2);
}

int main(int argc, char **argv)
{
    int provided, rank, ranks;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (argc != 4) {
        if (rank == 0) fprintf(stderr, "usage: link_cut DIR TIMEOUT_MS ENGINE\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *dir = argv[1];
    const double timeout_ms = atof(argv[2]);
    const int engine = atoi(argv[3]);

    pcnn_comm *comm;
    pcnn_net *net;
    pcnn_layer *l;
    check(pcnn_comm_create(MPI_COMM_WORLD, &comm), "pcnn_comm_create", rank);
    check(pcnn_net_create(&net), "pcnn_net_create", rank);
    check(pcnn_net_input(net, 3, 16, 16, &l), "input", rank);
    check(pcnn_conv2d(net, l, 16, 3, 1, 1, 1, &l), "conv2d", rank);
    check(pcnn_relu(net, l, &l), "relu", rank);
    check(pcnn_maxpool2d(net, l, 2, 2, 0, &l), "maxpool2d", rank);
    check(pcnn_dense(net, l, 64, 1, &l), "dense", rank);
    check(pcnn_relu(net, l, &l), "relu", rank);
    check(pcnn_dense(net, l, 10, 1, &l), "dense", rank);
    check(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY), "set_loss", rank);
    check(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1), "threads", rank);
    check(pcnn_net_set_comm(net, comm), "set_comm", rank);
    check(pcnn_net_set_option(net, PCNN_OPT_ENGINE, engine), "engine", rank);
    check(pcnn_net_set_option(net, PCNN_OPT_TIMEOUT_MS, timeout_ms), "timeout", rank);
    check(pcnn_net_finalize(net, 8), "finalize", rank);

    float x[4 * 3 * 16 * 16];
    int32_t y[4];
    for (size_t i = 0; i < sizeof x / sizeof *x; i++) x[i] = (float)((i * 37 + (size_t)rank) % 101) / 101.0f;
    for (int i = 0; i < 4; i++) y[i] = (i + rank) % 10;

    char path[4096];
    pcnn_status st = PCNN_OK;
    double took = 0.0;
    long step = 0;
    const double give_up = now_ms() + 120e3; /* the driver's deadline is far shorter */
    while (now_ms() < give_up) {
        double t0 = now_ms();
        st = pcnn_net_train_step(net, 4, x, y, NULL, NULL);
        took = now_ms() - t0;
        if (st != PCNN_OK) break;
        if (++step == 5 && rank == 0) {
            snprintf(path, sizeof path, "%s/training", dir);
            FILE *f = fopen(path, "w");
            if (f) fclose(f);
        }
    }
    char message[1024];
    snprintf(message, sizeof message, "%s", st == PCNN_OK ? "no failure" : pcnn_last_error());
    double t0 = now_ms();
    pcnn_status destroyed = pcnn_net_destroy(&net);
    if (destroyed == PCNN_OK) destroyed = pcnn_comm_destroy(&comm);
    double destroy_ms = now_ms() - t0;

    snprintf(path, sizeof path, "%s/rank%d", dir, rank);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "status %s ms %.0f step %ld destroy %s destroy_ms %.0f\nmessage %s\n",
                pcnn_status_str(st), took, step, pcnn_status_str(destroyed), destroy_ms, message);
        fclose(f);
    }
    fflush(stdout);
    _exit(st == PCNN_OK ? 1 : 0);
}
