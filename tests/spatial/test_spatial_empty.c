/* A hybrid distribution with a sample group left without samples (4 ranks,
 * parts 2 x 1 x 2 x 1, a batch of 1: group 1 passes n = 0), through the
 * public API only:
 *   1. pcnn_net_compute_loss and pcnn_net_compute_gradients accept n = 0
 *      on the empty group (collective, as pcnn_net_train_step is) and give
 *      every rank the loss and the gradients of a private one-rank network
 *      on the one sample, to 1e-5 relative;
 *   2. a batch no group has (n = 0 everywhere) and n < 0 are refused with
 *      INVALID_ARGUMENT on every rank;
 *   3. pcnn_net_get_input_grad returns INVALID_STATE, as pcnn.h says. */
#define PCNN_EXPERIMENTAL
#include <math.h>
#include <mpi.h>
#include <stdlib.h>

#include "../common/mpi_check.h"

enum { C = 2, H = 8, W = 6, CLASSES = 3, PARAMS_MAX = 4096 };

static pcnn_net *build(pcnn_comm *comm)
{
    pcnn_net *net;
    pcnn_layer *l, *out;
    CK(pcnn_net_create(&net));
    if (comm) CK(pcnn_net_set_comm(net, comm));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 11));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    CK(pcnn_net_input(net, C, H, W, &l));
    CK(pcnn_conv2d(net, l, 3, 3, 1, 1, 1, &l));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_dense(net, l, CLASSES, 1, &out));
    CK(pcnn_net_set_loss(net, out, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    if (comm) CK(pcnn_net_set_distribution(net, (const int[4]){2, 1, 2, 1}));
    CK(pcnn_net_finalize(net, 2));
    return net;
}

static int close_to(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (fabsf(a[i] - b[i]) > 1e-5f * (1.0f + fabsf(b[i]))) return 0;
    return 1;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (ranks != 4) {
        if (rank == 0) printf("SKIP: needs 4 ranks\n");
        MPI_Finalize();
        return 77;
    }
    float x[C * H * W];
    for (int i = 0; i < C * H * W; i++) x[i] = (float)((i * 37) % 17) / 8.0f - 1.0f;
    const int32_t label = 2;

    pcnn_comm *comm;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    pcnn_net *net = build(comm), *ref = build(NULL);
    int group, groups;
    CK(pcnn_net_group_info(net, &group, &groups, NULL, NULL));
    const int n = group == 0 ? 1 : 0; /* group 1 has no sample */
    expect(groups == 2, "two sample groups");

    size_t count, ref_count;
    CK(pcnn_net_num_params(net, &count));
    CK(pcnn_net_num_params(ref, &ref_count));
    expect(count == ref_count && count <= PARAMS_MAX, "the same parameter count");
    static float params[PARAMS_MAX], grads[PARAMS_MAX], ref_grads[PARAMS_MAX];
    CK(pcnn_net_get_params(ref, params, count));
    CK(pcnn_net_set_params(net, params, count));

    float loss = -1, grad_loss = -1, ref_loss = -2;
    pcnn_status st = pcnn_net_compute_loss(net, n, n ? x : NULL, n ? &label : NULL, NULL, &loss);
    if (st != PCNN_OK) printf("rank %d: compute_loss: %s\n", rank, pcnn_last_error());
    CK(pcnn_net_compute_loss(ref, 1, x, &label, NULL, &ref_loss));
    expect(st == PCNN_OK && fabsf(loss - ref_loss) <= 1e-5f * fabsf(ref_loss),
           "compute_loss with n = 0 on the empty group: the one sample's loss on every rank");

    st = pcnn_net_compute_gradients(net, n, n ? x : NULL, n ? &label : NULL, NULL, &grad_loss);
    if (st != PCNN_OK) printf("rank %d: compute_gradients: %s\n", rank, pcnn_last_error());
    CK(pcnn_net_compute_gradients(ref, 1, x, &label, NULL, &ref_loss));
    int grads_ok = 0;
    if (st == PCNN_OK) {
        CK(pcnn_net_get_grads(net, grads, count));
        CK(pcnn_net_get_grads(ref, ref_grads, count));
        grads_ok = close_to(grads, ref_grads, count);
    }
    expect(st == PCNN_OK && fabsf(grad_loss - ref_loss) <= 1e-5f * fabsf(ref_loss) && grads_ok,
           "compute_gradients with n = 0 on the empty group: the one sample's gradients");

    float g[C * H * W];
    st = pcnn_net_get_input_grad(net, g, sizeof g / sizeof g[0]);
    expect(st == PCNN_ERR_INVALID_STATE,
           "get_input_grad on a spatial network: INVALID_STATE, as pcnn.h says");

    st = pcnn_net_compute_loss(net, 0, NULL, NULL, NULL, &loss);
    expect(st == PCNN_ERR_INVALID_ARGUMENT, "no sample on any group: INVALID_ARGUMENT");
    st = pcnn_net_compute_gradients(net, rank == 3 ? -1 : n, n ? x : NULL, n ? &label : NULL,
                                    NULL, &loss);
    expect(st != PCNN_OK, "n < 0 on one rank fails every rank");

    /* The network still trains afterwards. */
    st = pcnn_net_train_step(net, n, n ? x : NULL, n ? &label : NULL, NULL, &loss);
    expect(st == PCNN_OK, "a training step after the refused calls");

    CK(pcnn_net_destroy(&ref));
    CK(pcnn_net_destroy(&net));
    CK(pcnn_comm_destroy(&comm));
    if (rank == 0) printf("%d/%d checks passed\n", checks - failures, checks);
    MPI_Finalize();
    return failures ? 1 : 0;
}
