/* A host as a user writes one against an installed libpcnn: its own MPI,
 * a communicator, a small network trained on a fixed batch.  Built by the
 * 'install' suite through pkg-config and through CMake's pcnn::pcnn, and
 * run from the installed prefix.  Prints "host ok" and the MPI libpcnn
 * reports; fails unless the loss falls and the library is the header's. */
#define PCNN_EXPERIMENTAL
#include <pcnn.h>

#include <stdio.h>
#include <string.h>

#define CHECK(call)                                                              \
    do {                                                                         \
        if ((call) != PCNN_OK) {                                                 \
            fprintf(stderr, "host: %s failed: %s\n", #call, pcnn_last_error());  \
            return 1;                                                            \
        }                                                                        \
    } while (0)

static int run(void)
{
    if (pcnn_version_number() != PCNN_VERSION_NUMBER) {
        fprintf(stderr, "host: header %d, library %u\n", PCNN_VERSION_NUMBER,
                pcnn_version_number());
        return 1;
    }
    int family = 0;
    const char *built = NULL;
    char library[MPI_MAX_LIBRARY_VERSION_STRING];
    CHECK(pcnn_mpi_info(&family, &built, library, sizeof library));
    if (family != PCNN_MPI_FAMILY) {
        fprintf(stderr, "host: library family %d, header %d\n", family, PCNN_MPI_FAMILY);
        return 1;
    }
    pcnn_comm *comm = NULL;
    CHECK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    pcnn_net *net = NULL;
    pcnn_layer *x = NULL, *y = NULL;
    CHECK(pcnn_net_create(&net));
    CHECK(pcnn_net_input(net, 1, 2, 2, &x));
    CHECK(pcnn_dense(net, x, 2, 1, &y));
    CHECK(pcnn_net_set_loss(net, y, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CHECK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 0.5));
    CHECK(pcnn_net_set_comm(net, comm));
    /* max_batch is the global batch: every rank trains on its 4 samples. */
    int rank = 0, size = 0, level = 0;
    CHECK(pcnn_comm_info(comm, &rank, &size, &level));
    CHECK(pcnn_net_finalize(net, 4 * size));
    /* Class 1 iff the first pixel is lit. */
    const float batch[4 * 4] = {1, 0, 0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1};
    const int32_t labels[4] = {1, 0, 1, 0};
    float first = 0, loss = 0;
    for (int step = 0; step < 30; step++) {
        CHECK(pcnn_net_train_step(net, 4, batch, labels, NULL, &loss));
        if (step == 0) first = loss;
    }
    CHECK(pcnn_net_destroy(&net));
    CHECK(pcnn_comm_destroy(&comm));
    if (!(loss < 0.5f * first)) {
        fprintf(stderr, "host: loss %g after 30 steps, %g at the first\n", loss, first);
        return 1;
    }
    /* The first line of MPI_Get_library_version. */
    library[strcspn(library, "\n")] = '\0';
    printf("host ok: libpcnn %s, loss %.3f -> %.3f, built with %s, running %s\n",
           pcnn_version_string(), first, loss, built, library);
    return 0;
}

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int status = run();
    MPI_Finalize();
    return status;
}
