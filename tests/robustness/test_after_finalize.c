/* The host calls MPI_Finalize before destroying the network and the
 * communicator (as C++ destructors and Fortran finalizers run after it),
 * under mpiexec -n 2; argv[1] is the progress engine.  Right after a step
 * (its all-gathers may be in flight) MPI is finalised; then every call that
 * would communicate returns INVALID_STATE, pcnn_net_destroy and
 * pcnn_comm_destroy release local memory and return PCNN_OK, and the
 * process exits normally.  The same for a network with a batch norm
 * synchronised over the communicator and for a spatially split one whose
 * batch norm reduces over its sample group (both hold a reduction
 * communicator of their own).  No MPI call is possible after MPI_Finalize,
 * so each rank checks alone and exits non-zero on a failure. */
#define PCNN_EXPERIMENTAL /* PCNN_OPT_ENGINE: pcnn.h section 9 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/mpi_check.h"
#include "pcnn.h"

#define SAMPLE (2 * 6 * 6)

static int failed_checks;

static void check(bool ok, const char *what)
{
    printf("rank %d: %s %s\n", rank, ok ? "PASS" : "FAIL", what);
    if (!ok) failed_checks++;
}

/* conv, batch norm, relu, dense; its batch norm synchronised over every
 * rank (parts NULL) or reducing over the sample group of `parts`. */
static pcnn_net *bn_net(pcnn_comm *comm, int engine, const int *parts)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, 2, 6, 6, &l));
    CK(pcnn_conv2d(net, l, 3, 3, 1, 1, 1, &l));
    CK(pcnn_batchnorm(net, l, 1e-5f, 0.1f, &l));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_dense(net, l, 3, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    CK(pcnn_net_set_option(net, PCNN_OPT_ENGINE, engine));
    CK(pcnn_net_set_option(net, PCNN_OPT_TIMEOUT_MS, 5000));
    CK(pcnn_net_set_comm(net, comm));
    if (parts) {
        CK(pcnn_net_set_distribution(net, parts));
        CK(pcnn_net_set_option(net, PCNN_OPT_BN_SCOPE, 1));
    } else {
        CK(pcnn_net_set_option(net, PCNN_OPT_SYNC_BATCHNORM, 1));
    }
    CK(pcnn_net_finalize(net, parts ? 2 : 2 * ranks));
    return net;
}

int main(int argc, char **argv)
{
    const int engine = argc > 1 ? atoi(argv[1]) : 2;
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (engine == 1 && provided < MPI_THREAD_MULTIPLE) {
        MPI_Finalize();
        return 77;
    }
    static float x[2 * SAMPLE];
    int32_t labels[2] = {0, 2};
    for (int i = 0; i < 2 * SAMPLE; i++) x[i] = (float)((i * 37 + rank) % 97) / 97.0f - 0.5f;

    pcnn_comm *comm;
    pcnn_net *net, *unfinished;
    pcnn_layer *l;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, 2, 6, 6, &l));
    CK(pcnn_conv2d(net, l, 3, 3, 1, 1, 1, &l));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_dense(net, l, 3, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    CK(pcnn_net_set_option(net, PCNN_OPT_ENGINE, engine));
    CK(pcnn_net_set_option(net, PCNN_OPT_TIMEOUT_MS, 5000));
    CK(pcnn_net_set_comm(net, comm));
    CK(pcnn_net_finalize(net, 2 * ranks));
    CK(pcnn_net_create(&unfinished));
    CK(pcnn_net_input(unfinished, 2, 6, 6, &l));
    CK(pcnn_net_set_comm(unfinished, comm));
    float loss;
    for (int s = 0; s < 2; s++) CK(pcnn_net_train_step(net, 2, x, labels, NULL, &loss));
    /* Batch norm over the global batch; and over the group of a split along
     * H (every rank of the group passes the group's samples). */
    static float group_x[2 * SAMPLE];
    for (int i = 0; i < 2 * SAMPLE; i++) group_x[i] = (float)((i * 29) % 89) / 89.0f - 0.5f;
    pcnn_net *synced = bn_net(comm, engine, NULL);
    const int parts[4] = {1, 1, ranks, 1};
    pcnn_net *spatial = bn_net(comm, engine, parts);
    for (int s = 0; s < 2; s++) {
        CK(pcnn_net_train_step(synced, 2, x, labels, NULL, &loss));
        CK(pcnn_net_train_step(spatial, 2, group_x, labels, NULL, &loss));
    }

    MPI_Finalize(); /* the all-gathers of the last step may be in flight */

    float params[4];
    pcnn_status st = pcnn_net_train_step(net, 2, x, labels, NULL, &loss);
    check(st == PCNN_ERR_INVALID_STATE && strstr(pcnn_last_error(), "finalised"),
          "train_step after MPI_Finalize: INVALID_STATE naming MPI_Finalize");
    st = pcnn_net_get_params(net, params, 4);
    check(st == PCNN_ERR_INVALID_STATE, "get_params after MPI_Finalize: INVALID_STATE");
    pcnn_comm *again = NULL;
    st = pcnn_comm_create(MPI_COMM_WORLD, &again);
    check(st == PCNN_ERR_INVALID_STATE && again == NULL,
          "pcnn_comm_create after MPI_Finalize: INVALID_STATE");
    st = pcnn_comm_destroy(&comm);
    check(st == PCNN_ERR_INVALID_STATE && comm != NULL,
          "pcnn_comm_destroy with networks attached: still refused");
    check(pcnn_net_destroy(&net) == PCNN_OK && net == NULL,
          "pcnn_net_destroy after MPI_Finalize: OK");
    check(pcnn_net_destroy(&synced) == PCNN_OK && synced == NULL,
          "pcnn_net_destroy of a synchronised batch norm's network after MPI_Finalize: OK");
    check(pcnn_net_destroy(&spatial) == PCNN_OK && spatial == NULL,
          "pcnn_net_destroy of a spatial network with a group batch norm after MPI_Finalize: OK");
    check(pcnn_net_destroy(&unfinished) == PCNN_OK && unfinished == NULL,
          "pcnn_net_destroy of a network never finalized, after MPI_Finalize: OK");
    check(pcnn_comm_destroy(&comm) == PCNN_OK && comm == NULL,
          "pcnn_comm_destroy after MPI_Finalize: OK");
    return failed_checks ? 1 : 0;
}
