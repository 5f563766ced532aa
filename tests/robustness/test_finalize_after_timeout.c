/* MPI_Finalize after a timeout inside a step, under mpiexec -n 2 or 3;
 * argv[1] is the progress engine (1 thread, 2 nonblocking).
 *
 * PCNN_OPT_TIMEOUT_MS is 20 ms while the last rank takes far longer per
 * step than the others (a batch 1000 times theirs), so the fast ranks give
 * up inside the gradient exchange while the slow one is still computing,
 * and the slow one gives up later, at another collective.  Each rank has
 * then left different collectives in flight.  Every rank destroys the
 * network and the communicator and calls MPI_Finalize, which must return
 * (pcnn.h section 5): a hang is caught by the meson timeout.  The gradient
 * buckets are large (hundreds of kB) so that MPI cannot finish them
 * eagerly on its own. */
#define PCNN_EXPERIMENTAL /* PCNN_OPT_ENGINE: pcnn.h section 9 */
#include <stdio.h>
#include <stdlib.h>

#include <mpi.h>

#include "pcnn.h"

/* Checks stay local: a check collective on MPI_COMM_WORLD would drive MPI's
 * progress for the ranks and hide what the library left behind. */
static int rank, ranks, failures;

#define CK(call)                                                                        \
    do {                                                                                \
        pcnn_status s_ = (call);                                                        \
        if (s_ != PCNN_OK) {                                                            \
            fprintf(stderr, "rank %d: %s:%d: %s -> %s: %s\n", rank, __FILE__, __LINE__, \
                    #call, pcnn_status_str(s_), pcnn_last_error());                     \
            MPI_Abort(MPI_COMM_WORLD, 2);                                               \
        }                                                                               \
    } while (0)

static void expect(int ok, const char *what)
{
    if (!ok) failures++;
    printf("rank %d: %s %s\n", rank, ok ? "PASS" : "FAIL", what);
}

#define FEATURES 512
#define FAST_BATCH 1
#define SLOW_BATCH 1000

static pcnn_net *build(pcnn_comm *comm, int engine)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, FEATURES, 1, 1, &l));
    for (int k = 0; k < 4; k++) { /* 4 buckets of 1 MB or more */
        CK(pcnn_dense(net, l, 512, 1, &l));
        if (k % 2) CK(pcnn_layer_set_exchange(l, PCNN_EXCHANGE_ALLTOALL_ALLGATHER));
        CK(pcnn_relu(net, l, &l));
    }
    CK(pcnn_dense(net, l, 3, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 3));
    CK(pcnn_net_set_option(net, PCNN_OPT_ENGINE, engine));
    CK(pcnn_net_set_option(net, PCNN_OPT_BUCKET_BYTES, 1 << 18));
    CK(pcnn_net_set_option(net, PCNN_OPT_TIMEOUT_MS, 20000)); /* finalize in peace */
    CK(pcnn_net_set_comm(net, comm));
    CK(pcnn_net_finalize(net, SLOW_BATCH * ranks)); /* max_batch is per rank * ranks */
    return net;
}

int main(int argc, char **argv)
{
    const int engine = argc > 1 ? atoi(argv[1]) : 2;
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (ranks < 2 || (engine == 1 && provided < MPI_THREAD_MULTIPLE)) {
        if (rank == 0) fprintf(stderr, "needs 2 ranks or more (and MULTIPLE for engine 1)\n");
        MPI_Finalize();
        return 77;
    }
    const int slow = rank == ranks - 1;
    const int n = slow ? SLOW_BATCH : FAST_BATCH;
    float *x = malloc((size_t)n * FEATURES * sizeof *x);
    int32_t *labels = malloc((size_t)n * sizeof *labels);
    for (int i = 0; i < n * FEATURES; i++) x[i] = (float)((i * 29) % 83) / 83.0f - 0.5f;
    for (int i = 0; i < n; i++) labels[i] = i % 3;

    pcnn_comm *comm;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    pcnn_net *net = build(comm, engine);
    float loss;
    CK(pcnn_net_train_step(net, n, x, labels, NULL, &loss)); /* warm, no limit yet */
    CK(pcnn_net_set_option(net, PCNN_OPT_TIMEOUT_MS, 20));
    pcnn_status st = PCNN_OK;
    for (int s = 0; s < 20 && st == PCNN_OK; s++)
        st = pcnn_net_train_step(net, n, x, labels, NULL, &loss);
    /* Every rank fails: by its own timeout, or by learning of another's. */
    expect(st == PCNN_ERR_TIMEOUT || st == PCNN_ERR_REMOTE || st == PCNN_ERR_INVALID_STATE,
           "the step fails on every rank once the slow rank is past the timeout");
    if (!slow) expect(st == PCNN_ERR_TIMEOUT, "a fast rank gave up waiting (PCNN_ERR_TIMEOUT)");
    expect(pcnn_net_destroy(&net) == PCNN_OK && net == NULL, "destroy after the timeout");
    expect(pcnn_comm_destroy(&comm) == PCNN_OK && comm == NULL, "the communicator is destroyed");
    free(x);
    free(labels);
    const int result = failures;
    printf("rank %d: %d checks failed (engine %d, %d ranks): %s\n", rank, failures, engine,
           ranks, pcnn_status_str(st));
    fflush(stdout);
    MPI_Finalize(); /* must return */
    return result ? 1 : 0;
}
