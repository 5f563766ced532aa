/* A halo exchange that times out fails the spatial network, under mpiexec
 * -n 2 with PCNN_OPT_TIMEOUT_MS 1 s.  Two identical networks A and B split
 * along H share the communicator and train a step together; then rank 0
 * trains A while rank 1 trains B: the step's agreement (on the shared
 * communicator) matches, but each network's halos go to a partner that is
 * not there.  Every rank gets PCNN_ERR_TIMEOUT after the timeout (and
 * within 5 s more), pcnn_net_async_error reports it, and every later call
 * on the failed network (train step, compute_loss, evaluate,
 * predict_parallel) returns INVALID_STATE at once saying it timed out;
 * destroy returns, and the communicator still trains a new network.  A
 * hang anywhere is caught by the meson timeout. */
#define PCNN_EXPERIMENTAL
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../common/mpi_check.h"
#include "pcnn.h"

#define TIMEOUT_MS 1000
enum { B = 2, C = 2, H = 10, W = 7, OUT = 2, S = C * H * W };

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static pcnn_net *build(pcnn_comm *comm, int overlap)
{
    const int parts[4] = {1, 1, 2, 1};
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_set_comm(net, comm));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 3));
    CK(pcnn_net_set_option(net, PCNN_OPT_TIMEOUT_MS, TIMEOUT_MS));
    CK(pcnn_net_set_option(net, PCNN_OPT_HALO_OVERLAP, overlap));
    CK(pcnn_net_input(net, C, H, W, &l));
    CK(pcnn_conv2d(net, l, 3, 3, 1, 1, 1, &l));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_conv2d(net, l, 3, 3, 1, 1, 1, &l));
    CK(pcnn_flatten(net, l, &l));
    CK(pcnn_dense(net, l, OUT, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_MSE));
    CK(pcnn_net_set_distribution(net, parts));
    CK(pcnn_net_finalize(net, B));
    return net;
}

static void test_halo_timeout(pcnn_comm *comm, int overlap)
{
    float x[B * S], t[B * OUT], loss;
    for (int i = 0; i < B * S; i++) x[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
    for (int i = 0; i < B * OUT; i++) t[i] = (float)i / 4.0f;
    pcnn_net *a = build(comm, overlap), *b = build(comm, overlap);
    CK(pcnn_net_train_step(a, B, x, NULL, t, &loss));
    CK(pcnn_net_train_step(b, B, x, NULL, t, &loss));

    pcnn_net *mine = rank == 0 ? a : b; /* the partner is on the other network */
    double t0 = now();
    const pcnn_status st = pcnn_net_train_step(mine, B, x, NULL, t, &loss);
    const double took = now() - t0;
    pcnn_status async = PCNN_OK;
    CK(pcnn_net_async_error(mine, &async));
    const bool timed_out = st == PCNN_ERR_TIMEOUT && async == PCNN_ERR_TIMEOUT;
    if (!timed_out)
        printf("rank %d: %s (%s), async %s\n", rank, pcnn_status_str(st), pcnn_last_error(),
               pcnn_status_str(async));
    char what[200];
    snprintf(what, sizeof what, "overlap %d: a halo whose partner is not there times out on "
             "every rank (%.2f s, timeout %.1f s) and the error query reports it", overlap,
             took, TIMEOUT_MS * 1e-3);
    expect(timed_out && took >= 0.9 * TIMEOUT_MS * 1e-3 && took < TIMEOUT_MS * 1e-3 + 5.0,
           what);

    t0 = now();
    bool refused = pcnn_net_train_step(mine, B, x, NULL, t, &loss) == PCNN_ERR_INVALID_STATE &&
                   strstr(pcnn_last_error(), "timed out") != NULL;
    refused &= pcnn_net_compute_loss(mine, B, x, NULL, t, &loss) == PCNN_ERR_INVALID_STATE;
    float y[B * OUT];
    refused &= pcnn_net_predict_parallel(mine, B, x, y, B * OUT) == PCNN_ERR_INVALID_STATE;
    pcnn_dataset *data;
    CK(pcnn_dataset_create(B, C, H, W, x, NULL, t, OUT, &data));
    refused &= pcnn_net_evaluate(mine, data, NULL, NULL) == PCNN_ERR_INVALID_STATE;
    const double after = now() - t0;
    expect(refused && after < 0.5, "later calls on the failed network return INVALID_STATE "
           "at once, saying it timed out");
    CK(pcnn_dataset_destroy(&data));
    pcnn_net_destroy(&a);
    pcnn_net_destroy(&b);

    pcnn_net *fresh = build(comm, overlap);
    expect(pcnn_net_train_step(fresh, B, x, NULL, t, &loss) == PCNN_OK && isfinite(loss),
           "destroy returns, and the communicator trains a new spatial network");
    pcnn_net_destroy(&fresh);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (ranks != 2) {
        if (rank == 0) printf("needs 2 ranks\n");
        MPI_Finalize();
        return 1;
    }
    pcnn_comm *comm;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    test_halo_timeout(comm, 0);
    test_halo_timeout(comm, 1);
    CK(pcnn_comm_destroy(&comm));
    if (rank == 0) printf("%d of %d checks passed\n", checks - failures, checks);
    MPI_Finalize();
    return failures ? 1 : 0;
}
