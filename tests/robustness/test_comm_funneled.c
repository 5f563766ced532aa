/* A host that initialises MPI with MPI_THREAD_FUNNELED (under mpiexec -n 2):
 * pcnn.h promises that FUNNELED is enough.  The automatic engine must be
 * the nonblocking one (PCNN_OPT_ACTIVE_ENGINE == 2) and train correctly;
 * asking for the communication thread (PCNN_OPT_ENGINE = 1) must fail at
 * finalize with PCNN_ERR_UNSUPPORTED on every rank, naming the thread
 * level, and leave the network unusable but destroyable. */
#define PCNN_EXPERIMENTAL /* PCNN_OPT_ACTIVE_ENGINE, PCNN_OPT_ENGINE: pcnn.h section 9 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/mpi_check.h"
#include "pcnn.h"

static pcnn_net *build(pcnn_comm *comm, int engine)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, 1, 5, 5, &l));
    CK(pcnn_conv2d(net, l, 2, 3, 1, 0, 1, &l));
    CK(pcnn_dense(net, l, 3, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    CK(pcnn_net_set_option(net, PCNN_OPT_ENGINE, engine));
    CK(pcnn_net_set_option(net, PCNN_OPT_TIMEOUT_MS, 60000));
    CK(pcnn_net_set_comm(net, comm));
    return net;
}

int main(void)
{
    int provided;
    MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (provided != MPI_THREAD_FUNNELED) {
        if (rank == 0) printf("MPI provided level %d, not FUNNELED: skipped\n", provided);
        MPI_Finalize();
        return 77;
    }
    pcnn_comm *comm;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    int level = -1;
    CK(pcnn_comm_info(comm, NULL, NULL, &level));
    expect(level == MPI_THREAD_FUNNELED, "pcnn_comm_info reports MPI_THREAD_FUNNELED");

    /* Automatic choice: the nonblocking engine, and it trains. */
    pcnn_net *net = build(comm, 0);
    CK(pcnn_net_finalize(net, 2 * ranks));
    double active = -1;
    CK(pcnn_net_get_option(net, PCNN_OPT_ACTIVE_ENGINE, &active));
    expect(active == 2, "engine 0 (auto) under FUNNELED runs the nonblocking engine");
    float x[4 * 25], loss = -1;
    int32_t y[4];
    for (int i = 0; i < 4 * 25; i++) x[i] = (float)((i * 13 + rank * 7) % 17) / 17.0f;
    for (int i = 0; i < 4; i++) y[i] = (i + rank) % 3;
    for (int s = 0; s < 3; s++) CK(pcnn_net_train_step(net, 2, x, y, NULL, &loss));
    size_t np;
    CK(pcnn_net_num_params(net, &np));
    float *p = malloc(np * sizeof *p), *q = malloc(np * sizeof *q);
    CK(pcnn_net_get_params(net, p, np));
    memcpy(q, p, np * sizeof *p);
    MPI_Bcast(q, (int)np, MPI_FLOAT, 0, MPI_COMM_WORLD);
    expect(memcmp(p, q, np * sizeof *p) == 0 && loss > 0,
           "three nonblocking-engine steps: parameters identical on every rank");
    free(p);
    free(q);
    CK(pcnn_net_destroy(&net));

    /* Explicitly nonblocking. */
    net = build(comm, 2);
    CK(pcnn_net_finalize(net, 2 * ranks));
    CK(pcnn_net_get_option(net, PCNN_OPT_ACTIVE_ENGINE, &active));
    expect(active == 2, "engine 2 under FUNNELED runs the nonblocking engine");
    CK(pcnn_net_destroy(&net));

    /* The communication thread needs MPI_THREAD_MULTIPLE. */
    net = build(comm, 1);
    pcnn_status st = pcnn_net_finalize(net, 2 * ranks);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", pcnn_last_error());
    expect(st == PCNN_ERR_UNSUPPORTED && strstr(msg, "pcnn_net_finalize") &&
               strstr(msg, "MPI_THREAD_MULTIPLE"),
           "engine 1 under FUNNELED: finalize fails with UNSUPPORTED on every rank");
    if (st != PCNN_ERR_UNSUPPORTED || !strstr(msg, "pcnn_net_finalize"))
        fprintf(stderr, "rank %d: %s: %s\n", rank, pcnn_status_str(st), msg);
    st = pcnn_net_train_step(net, 1, x, y, NULL, &loss);
    expect(st == PCNN_ERR_INVALID_STATE, "the network that failed to finalize cannot train");
    /* Nothing was planned: choosing another engine makes it usable. */
    CK(pcnn_net_set_option(net, PCNN_OPT_ENGINE, 0));
    CK(pcnn_net_finalize(net, 2 * ranks));
    CK(pcnn_net_get_option(net, PCNN_OPT_ACTIVE_ENGINE, &active));
    CK(pcnn_net_train_step(net, 2, x, y, NULL, &loss));
    expect(active == 2, "after UNSUPPORTED, engine 0 finalizes the same network");
    CK(pcnn_net_destroy(&net));
    CK(pcnn_comm_destroy(&comm));
    expect(comm == NULL, "the communicator is destroyed after its networks");
    MPI_Finalize();
    if (rank == 0) printf("%d passed, %d failed\n", checks - failures, failures);
    return failures ? 1 : 0;
}
