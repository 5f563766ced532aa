/* Trains a small 2D or 3D network under the options given and prints the
 * FNV-1a hash of its parameters after training, of its summary, and the
 * losses: run against two builds to show they train byte for byte alike.
 * Usage: param_hash DIM EXCHANGE OPTIMIZER OVERLAP ENGINE SPLIT HALO_OVERLAP KEEP_IM2COL
 *   DIM 2 or 3; SPLIT 0: data parallel, 1: H split over the ranks, 2: W
 *   (3D: 1 is D); HALO_OVERLAP -1 leaves the default. */
#define PCNN_EXPERIMENTAL
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pcnn.h"

#define CK(call)                                                                  \
    do {                                                                          \
        if ((call) != PCNN_OK) {                                                  \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call,          \
                    pcnn_last_error());                                           \
            MPI_Abort(MPI_COMM_WORLD, 1);                                         \
        }                                                                         \
    } while (0)

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static uint64_t state = 99;
static float frand(void)
{
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(state >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc != 9) {
        fprintf(stderr, "usage: param_hash DIM EXCHANGE OPTIMIZER OVERLAP ENGINE SPLIT "
                        "HALO_OVERLAP KEEP_IM2COL\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const int dim = atoi(argv[1]), exch = atoi(argv[2]), opt = atoi(argv[3]),
              overlap = atoi(argv[4]), engine = atoi(argv[5]), split = atoi(argv[6]),
              halo = atoi(argv[7]), keep = atoi(argv[8]);
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    pcnn_comm *comm;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    pcnn_net *net;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_set_comm(net, comm));
    CK(pcnn_net_set_option(net, PCNN_OPT_SEED, 11));
    CK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 0.02));
    CK(pcnn_net_set_option(net, PCNN_OPT_OVERLAP, overlap));
    CK(pcnn_net_set_option(net, PCNN_OPT_ENGINE, engine));
    CK(pcnn_net_set_option(net, PCNN_OPT_KEEP_IM2COL, keep));
    if (halo >= 0) CK(pcnn_net_set_option(net, PCNN_OPT_HALO_OVERLAP, halo));
    /* EXCHANGE 0 allreduce, 1 all-to-all + all-gather, 2 the FC gradient
     * on the dense layers (all-to-all elsewhere), 3 PCNN_EXCHANGE_AUTO. */
    CK(pcnn_net_set_exchange(net, exch == 3   ? PCNN_EXCHANGE_AUTO
                                  : exch == 2 ? PCNN_EXCHANGE_ALLTOALL_ALLGATHER
                                              : (pcnn_exchange)exch));
    CK(pcnn_net_set_optimizer(net, (pcnn_optimizer)opt));
    pcnn_layer *l, *r, *c;
    int in_c, in_d, in_h, in_w, out;
    if (dim == 2) {
        in_c = 3, in_d = 1, in_h = 13, in_w = 11, out = 5;
        CK(pcnn_net_input(net, in_c, in_h, in_w, &l));
        CK(pcnn_conv2d(net, l, 8, 3, 1, 1, 1, &l));
        CK(pcnn_batchnorm(net, l, 1e-5f, 0.1f, &l));
        CK(pcnn_relu(net, l, &r));
        CK(pcnn_conv2d(net, r, 8, 3, 1, 1, 1, &c));
        CK(pcnn_add(net, r, c, &l));
        CK(pcnn_maxpool2d(net, l, 3, 2, 1, &l));
        CK(pcnn_avgpool2d(net, l, 3, 1, 1, &l));
        CK(pcnn_leaky_relu(net, l, 0.1f, &l));
        CK(pcnn_dropout(net, l, 0.2f, &l));
        CK(pcnn_conv2d(net, l, 6, 3, 2, 1, 1, &l));
        CK(pcnn_relu(net, l, &l));
        CK(pcnn_flatten(net, l, &l));
        CK(pcnn_dense(net, l, 10, 1, &l));
        if (exch == 2) CK(pcnn_layer_set_exchange(l, PCNN_EXCHANGE_FC_GRADIENT));
        CK(pcnn_relu(net, l, &l));
        CK(pcnn_dense(net, l, out, 1, &l));
        if (exch == 2) CK(pcnn_layer_set_exchange(l, PCNN_EXCHANGE_FC_GRADIENT));
        CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    } else {
        in_c = 2, in_d = 8, in_h = 9, in_w = 10, out = 4;
        CK(pcnn_net_input3d(net, in_c, in_d, in_h, in_w, &l));
        CK(pcnn_conv3d(net, l, 4, 3, 1, 1, 1, &l));
        CK(pcnn_relu(net, l, &l));
        CK(pcnn_maxpool3d(net, l, 2, 2, 0, &l));
        CK(pcnn_avgpool3d(net, l, 3, 1, 1, &l));
        CK(pcnn_batchnorm(net, l, 1e-5f, 0.1f, &l));
        CK(pcnn_conv3d(net, l, 3, 3, 1, 1, 1, &l));
        CK(pcnn_flatten(net, l, &l));
        CK(pcnn_dense(net, l, out, 1, &l));
        if (exch == 2 && !split) CK(pcnn_layer_set_exchange(l, PCNN_EXCHANGE_FC_GRADIENT));
        CK(pcnn_net_set_loss(net, l, PCNN_LOSS_MSE));
    }
    if (split) {
        int parts[4] = {1, 1, 1, 1};
        parts[dim == 3 && split == 1 ? 1 : split == 1 ? 2 : 3] = ranks;
        CK(pcnn_net_set_distribution(net, parts));
    }
    const int max_batch = 8;
    CK(pcnn_net_finalize(net, max_batch));
    const size_t sample = (size_t)in_c * in_d * in_h * in_w;
    float *x = malloc(sizeof(float) * sample * max_batch);
    float *t = malloc(sizeof(float) * (size_t)out * max_batch);
    int32_t labels[8];
    const int batches[] = {8, 7, 8, 5, 8, 3}; /* uneven batches too */
    /* Under the halo overlap's trials (steps 1-4 alternate with and
     * without it, then each layer keeps the faster) the steps after them
     * depend on timings: stop before. */
    const int steps = halo == 1 && split ? 5 : 6;
    for (int s = 0; s < steps; s++) {
        const int n = batches[s];
        for (size_t i = 0; i < sample * (size_t)n; i++) x[i] = frand();
        for (size_t i = 0; i < (size_t)out * n; i++) t[i] = frand();
        for (int i = 0; i < n; i++) labels[i] = (int32_t)((unsigned)(i * 7 + s) % (unsigned)out);
        /* Data parallel: each rank its share; spatial: every rank the batch. */
        int first = 0, count = n;
        if (!split) {
            first = n * rank / ranks;
            count = n * (rank + 1) / ranks - first;
        }
        float loss;
        CK(pcnn_net_train_step(net, count, count ? x + (size_t)first * sample : NULL,
                               dim == 2 ? labels + first : NULL,
                               dim == 3 ? t + (size_t)first * out : NULL, &loss));
        if (rank == 0) printf("step %d loss %.9g\n", s, (double)loss);
    }
    size_t np;
    CK(pcnn_net_num_params(net, &np));
    float *p = malloc(sizeof(float) * np);
    CK(pcnn_net_get_params(net, p, np));
    char summary[16384];
    CK(pcnn_net_summary(net, summary, sizeof summary, NULL));
    if (rank == 0) {
        printf("params %zu hash %016llx\n", np, (unsigned long long)fnv(14695981039346656037ull, p, np * sizeof *p));
        /* The halo overlap's trials write their times into the summary. */
        if (halo != 1) printf("summary hash %016llx\n", (unsigned long long)fnv(14695981039346656037ull, summary, strlen(summary)));
        if (getenv("SHOW_SUMMARY")) printf("%s", summary);
    }
    free(p), free(x), free(t);
    pcnn_net_destroy(&net);
    pcnn_comm_destroy(&comm);
    MPI_Finalize();
    return 0;
}
