/* Train LeNet-5 on Fashion-MNIST, on one or several MPI ranks: the
 * flagship example.
 *
 *   mpiexec -n 2 fashion_mnist [--epochs 5] [--batch 64] [--lr 0.05]
 *       [--threads 0] [--exchange a2a|allreduce] [--seed 0] [--csv curves.csv]
 *       [--data /usr/share/datasets/fashion-mnist]
 *
 * Builds the `lenet` model of the peer benchmarks layer for layer, trains
 * with momentum SGD on global batches of --batch samples split over the
 * ranks, and prints (on rank 0) per-epoch loss, test accuracy and time.
 * The host owns MPI: it initialises it and hands libpcnn a communicator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pcnn.h"

#define CHECK(call)                                                                       \
    do {                                                                                  \
        pcnn_status s_ = (call);                                                          \
        if (s_ != PCNN_OK) {                                                              \
            fprintf(stderr, "error: %s (%s)\n", pcnn_last_error(), pcnn_status_str(s_)); \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                 \
        }                                                                                 \
    } while (0)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* LeNet-5 as in the peers' models.py: conv5(pad 2) relu pool, conv5 relu
 * pool, dense 120, 84, 10. */
static pcnn_net *build_lenet(pcnn_comm *comm, pcnn_exchange exchange, int batch, double lr,
                             int threads, int seed)
{
    pcnn_net *net;
    pcnn_layer *l;
    CHECK(pcnn_net_create(&net));
    CHECK(pcnn_net_input(net, 1, 28, 28, &l));
    CHECK(pcnn_conv2d(net, l, 6, 5, 1, 2, 1, &l));
    CHECK(pcnn_relu(net, l, &l));
    CHECK(pcnn_maxpool2d(net, l, 2, 2, 0, &l));
    CHECK(pcnn_conv2d(net, l, 16, 5, 1, 0, 1, &l));
    CHECK(pcnn_relu(net, l, &l));
    CHECK(pcnn_maxpool2d(net, l, 2, 2, 0, &l));
    CHECK(pcnn_dense(net, l, 120, 1, &l));
    CHECK(pcnn_relu(net, l, &l));
    CHECK(pcnn_dense(net, l, 84, 1, &l));
    CHECK(pcnn_relu(net, l, &l));
    CHECK(pcnn_dense(net, l, 10, 1, &l));
    CHECK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CHECK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_MOMENTUM));
    CHECK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, lr));
    CHECK(pcnn_net_set_option(net, PCNN_OPT_MOMENTUM, 0.9));
    CHECK(pcnn_net_set_option(net, PCNN_OPT_SEED, seed));
    CHECK(pcnn_net_set_option(net, PCNN_OPT_THREADS, threads));
    CHECK(pcnn_net_set_comm(net, comm));
    CHECK(pcnn_net_set_exchange(net, exchange));
    CHECK(pcnn_net_finalize(net, batch));
    return net;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int epochs = 5, batch = 64, threads = 0, seed = 0;
    pcnn_exchange exchange = PCNN_EXCHANGE_ALLTOALL_ALLGATHER;
    double lr = 0.05;
    const char *dir = "/usr/share/datasets/fashion-mnist", *csv = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--epochs")) epochs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--lr")) lr = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed")) seed = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--data")) dir = argv[i + 1];
        else if (!strcmp(argv[i], "--csv")) csv = argv[i + 1];
        else if (!strcmp(argv[i], "--exchange"))
            exchange = strcmp(argv[i + 1], "allreduce") ? PCNN_EXCHANGE_ALLTOALL_ALLGATHER
                                                        : PCNN_EXCHANGE_ALLREDUCE;
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    char xtr[512], ytr[512], xte[512], yte[512];
    snprintf(xtr, sizeof xtr, "%s/train-images-idx3-ubyte.gz", dir);
    snprintf(ytr, sizeof ytr, "%s/train-labels-idx1-ubyte.gz", dir);
    snprintf(xte, sizeof xte, "%s/t10k-images-idx3-ubyte.gz", dir);
    snprintf(yte, sizeof yte, "%s/t10k-labels-idx1-ubyte.gz", dir);
    pcnn_dataset *train, *test;
    /* The same normalisation as the peer script (mean 0.2860, std 0.3530). */
    CHECK(pcnn_dataset_load_idx(xtr, ytr, 0.2860f, 0.3530f, &train));
    CHECK(pcnn_dataset_load_idx(xte, yte, 0.2860f, 0.3530f, &test));

    pcnn_comm *comm;
    int rank, ranks;
    CHECK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    CHECK(pcnn_comm_info(comm, &rank, &ranks, NULL));
    pcnn_net *net = build_lenet(comm, exchange, batch, lr, threads, seed);
    char summary[4096];
    CHECK(pcnn_net_summary(net, summary, sizeof summary, NULL));
    if (rank == 0)
        printf("libpcnn %s — LeNet-5 on Fashion-MNIST, %d rank(s), global batch %d, %s exchange\n%s",
               pcnn_version_string(), ranks, batch,
               exchange == PCNN_EXCHANGE_ALLREDUCE ? "allreduce" : "all-to-all + all-gather",
               summary);

    FILE *curves = csv && rank == 0 ? fopen(csv, "w") : NULL;
    if (curves) fprintf(curves, "epoch,train_loss,test_loss,test_accuracy,epoch_seconds\n");
    double total = 0.0, acc = 0.0;
    for (int e = 1; e <= epochs; e++) {
        CHECK(pcnn_dataset_shuffle(train, (uint64_t)seed, (uint64_t)e));
        double t0 = now(), train_loss, test_loss;
        CHECK(pcnn_net_train_epoch(net, train, batch, &train_loss));
        double dt = now() - t0;
        total += dt;
        CHECK(pcnn_net_evaluate(net, test, &test_loss, &acc));
        if (rank == 0) {
            printf("epoch %d/%d  train loss %.4f  test loss %.4f  test accuracy %.2f%%  %.2f s\n",
                   e, epochs, train_loss, test_loss, 100 * acc, dt);
            fflush(stdout);
        }
        if (curves) fprintf(curves, "%d,%.6f,%.6f,%.6f,%.3f\n", e, train_loss, test_loss, acc, dt);
    }
    if (rank == 0)
        printf("trained %d epochs in %.2f s; final test accuracy %.2f%%\n", epochs, total,
               100 * acc);
    if (curves) fclose(curves);
    pcnn_net_destroy(&net);
    pcnn_comm_destroy(&comm);
    pcnn_dataset_destroy(&train);
    pcnn_dataset_destroy(&test);
    MPI_Finalize();
    return 0;
}
