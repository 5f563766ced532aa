/* The measured convolution choice across ranks (graph/conv_measure.c): the
 * test hook makes each rank's own timings favour another algorithm; every
 * rank must still pick the one the summed timings favour, say so in its
 * summary, and after training steps hold parameters bitwise equal to the
 * other ranks' and to a network forced to that algorithm. */
#define PCNN_EXPERIMENTAL
#include <stdlib.h>
#include <string.h>

#include "../common/mpi_check.h"
#include "kernels/conv_direct.h"
#include "strategy/conv_measure.h"

#define BATCH 8
#define STEPS 3

/* One unsure layer (64 -> 64, 3x3 on 8x8) between the input and the head. */
static pcnn_net *build(pcnn_comm *comm, int algorithm)
{
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, 64, 8, 8, &l));
    CK(pcnn_conv2d(net, l, 64, 1, 1, 0, 0, &l));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_conv2d(net, l, 64, 3, 1, 1, 1, &l));
    CK(pcnn_global_avgpool(net, l, &l));
    CK(pcnn_dense(net, l, 4, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_option(net, PCNN_OPT_THREADS, 1));
    CK(pcnn_net_set_option(net, PCNN_OPT_CONV_ALGORITHM, algorithm));
    CK(pcnn_net_set_comm(net, comm));
    CK(pcnn_net_finalize(net, BATCH));
    return net;
}

/* The parameters after STEPS steps on this rank's share of a fixed batch. */
static float *train(pcnn_net *net, size_t *count)
{
    static float x[BATCH * 64 * 8 * 8];
    int32_t y[BATCH];
    for (int i = 0; i < BATCH * 64 * 64; i++) x[i] = (float)((i * 37) % 17) / 17.0f - 0.5f;
    for (int i = 0; i < BATCH; i++) y[i] = i % 4;
    const int local = BATCH / ranks;
    for (int s = 0; s < STEPS; s++)
        CK(pcnn_net_train_step(net, local, x + (size_t)rank * local * 64 * 64, y + rank * local,
                               NULL, NULL));
    CK(pcnn_net_num_params(net, count));
    float *p = malloc(*count * sizeof *p);
    CK(pcnn_net_get_params(net, p, *count));
    return p;
}

/* The third layer's bracket in the summary starts with want and is measured. */
static int summary_says(pcnn_net *net, const char *want)
{
    char text[8192];
    CK(pcnn_net_summary(net, text, sizeof text, NULL));
    const char *line = strstr(text, "\n3 ");
    const char *mark = line ? strchr(line, '[') : NULL;
    const int ok = mark && strncmp(mark + 1, want, strlen(want)) == 0 &&
                   strstr(mark, "(measured)") != NULL;
    if (!ok) printf("rank %d: want [%s ... (measured)] in\n%s", rank, want, text);
    return ok;
}

/* scale[r]: rank r's factors per algorithm (gemm, direct, taps). */
static void scenario(pcnn_comm *comm, const double scale[2][3], int expected, const char *name)
{
    const double mine[4] = {1, scale[rank % 2][0], scale[rank % 2][1], scale[rank % 2][2]};
    conv_measure_debug(mine, true);
    pcnn_net *net = build(comm, 0);
    conv_measure_debug(NULL, false);
    char what[160];
    snprintf(what, sizeof what, "%s: every rank picks %s, measured", name,
             expected == 1 ? "gemm" : "direct");
    expect(summary_says(net, expected == 1 ? "gemm " : "direct "), what);
    size_t n, nf;
    float *p = train(net, &n);
    pcnn_net *forced = build(comm, expected);
    float *q = train(forced, &nf);
    float *root = malloc(n * sizeof *root);
    memcpy(root, p, n * sizeof *p);
    MPI_Bcast(root, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    snprintf(what, sizeof what, "%s: parameters bitwise equal on every rank", name);
    expect(memcmp(root, p, n * sizeof *p) == 0, what);
    snprintf(what, sizeof what, "%s: bitwise equal to the forced algorithm", name);
    expect(n == nf && memcmp(p, q, n * sizeof *p) == 0, what);
    free(root), free(p), free(q);
    pcnn_net_destroy(&net);
    pcnn_net_destroy(&forced);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    pcnn_comm *comm;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    if (direct_conv_available()) {
        /* Alone rank 0 would take gemm and rank 1 direct; the sums say
         * direct (1e4 d + d against g + 1e6 g). */
        const double to_direct[2][3] = {{1, 1e4, 1e4}, {1e6, 1, 1e6}};
        scenario(comm, to_direct, 2, "skewed towards direct");
        /* Alone rank 0 would take direct and rank 1 gemm; the sums say gemm. */
        const double to_gemm[2][3] = {{1e4, 1, 1e6}, {1, 1e6, 1e6}};
        scenario(comm, to_gemm, 1, "skewed towards gemm");
    } else if (rank == 0) {
        printf("SKIP no AVX-512: no direct kernel, nothing to choose between\n");
    }
    CK(pcnn_comm_destroy(&comm));
    if (rank == 0) printf("%d of %d checks failed\n", failures, checks);
    MPI_Finalize();
    return failures != 0;
}
