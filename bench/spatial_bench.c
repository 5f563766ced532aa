/* Spatial-parallel training-step benchmark (seeds 002 and 003).
 *
 *   mpiexec.mpich -n R spatial_bench MODEL [ITERS] [--threads T] [--split h|w|d|hw|dh]
 *                                           [--batch N] [--size S] [--warmup W]
 *                                           [--report] [--no-overlap] [--trace FILE]
 *                                           [--predict]
 *
 * MODEL: "plane", seed 002's mesh-like large-plane 2D network scaled down
 * (18 channels at S x S, S = 1024 by default: four 3x3 convolutions with
 * max pooling, then a dense head), or "cosmo", CosmoFlow-shaped (4
 * channels at S^3, S = 64 by default: three 3x3x3 convolutions with
 * leaky ReLU and average pooling, then two dense layers).  On R > 1 ranks
 * every sample is split over all of them (P_N = 1) along --split (default:
 * h for plane, d for cosmo; hw and dh split two dimensions in a near-square
 * grid); on one rank the network runs whole.  Prints from rank 0 one JSON
 * line: median and minimum step time over ITERS steps after W warm-ups
 * (6: past the steps in which each overlapped layer times itself with and
 * without overlap and keeps the faster),
 * the library's forward/backward/communication per step, and the memory of
 * rank 0's plan (pcnn_net_memory_bytes, and its activations part).  The runs
 * of the issue (--trace FILE: every rank's spans of the last steps in one
 * Chrome trace, written by rank 0):
 *
 *   B=build/bench/spatial_bench; E="env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1"
 *   $E mpiexec.mpich -n 1 $B plane 5 --threads 1      # 1 rank x 1 thread
 *   mpiexec.mpich -n 1 $B plane 5 --threads 2         # 1 rank x 2 threads
 *   $E mpiexec.mpich -n 2 $B plane 5 --threads 1      # 2 ranks x 1 thread, spatial
 *   (the same with cosmo)
 *
 * --predict: after the warm-up, the performance model calibrates the link
 * and the layers (on a twin of the network without a distribution, on
 * each rank at once, rank 0's shared), then predicts the spatial step
 * (pcnn_perfmodel_predict) and, after the timed steps, compares it with
 * the measurement: "predicted_s" and "step_re" in the JSON line, rank 0's
 * per-layer table on stderr (pcnn_perfmodel_validate).
 */
#define PCNN_EXPERIMENTAL
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pcnn.h"
#include "bench_clock.h"

#define CHECK(call)                                                                       \
    do {                                                                                  \
        pcnn_status s_ = (call);                                                          \
        if (s_ != PCNN_OK) {                                                              \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, pcnn_last_error()); \
            MPI_Abort(MPI_COMM_WORLD, 2);                                                 \
        }                                                                                 \
    } while (0)

/* --report: the library's messages (which layers kept the halo overlap). */
static void log_line(void *user, pcnn_log_level level, const char *message)
{
    (void)user;
    (void)level;
    fprintf(stderr, "log: %s\n", message);
}

static pcnn_layer *build_plane(pcnn_net *net, int s)
{
    pcnn_layer *l;
    CHECK(pcnn_net_input(net, 18, s, s, &l));
    CHECK(pcnn_conv2d(net, l, 16, 3, 1, 1, 1, &l));
    CHECK(pcnn_relu(net, l, &l));
    CHECK(pcnn_conv2d(net, l, 16, 3, 1, 1, 1, &l));
    CHECK(pcnn_relu(net, l, &l));
    CHECK(pcnn_maxpool2d(net, l, 2, 2, 0, &l));
    CHECK(pcnn_conv2d(net, l, 32, 3, 1, 1, 1, &l));
    CHECK(pcnn_relu(net, l, &l));
    CHECK(pcnn_maxpool2d(net, l, 2, 2, 0, &l));
    CHECK(pcnn_conv2d(net, l, 32, 3, 1, 1, 1, &l));
    CHECK(pcnn_relu(net, l, &l));
    CHECK(pcnn_maxpool2d(net, l, 4, 4, 0, &l));
    CHECK(pcnn_flatten(net, l, &l));
    CHECK(pcnn_dense(net, l, 4, 1, &l));
    return l;
}

static pcnn_layer *build_cosmo(pcnn_net *net, int s)
{
    pcnn_layer *l;
    CHECK(pcnn_net_input3d(net, 4, s, s, s, &l));
    static const int widths[3] = {16, 32, 64};
    for (int i = 0; i < 3; i++) {
        CHECK(pcnn_conv3d(net, l, widths[i], 3, 1, 1, 1, &l));
        CHECK(pcnn_leaky_relu(net, l, 0.01f, &l));
        CHECK(pcnn_avgpool3d(net, l, 2, 2, 0, &l));
    }
    CHECK(pcnn_flatten(net, l, &l));
    CHECK(pcnn_dense(net, l, 128, 1, &l));
    CHECK(pcnn_leaky_relu(net, l, 0.01f, &l));
    CHECK(pcnn_dense(net, l, 4, 1, &l));
    return l;
}

/* The network of MODEL: with a communicator and a distribution it is the
 * spatial one, without them its twin for calibration. */
static pcnn_net *build_net(bool cosmo, int size, int threads, pcnn_comm *comm, const int *parts,
                           int overlap, bool log)
{
    pcnn_net *net;
    CHECK(pcnn_net_create(&net));
    if (comm) CHECK(pcnn_net_set_comm(net, comm));
    CHECK(pcnn_net_set_option(net, PCNN_OPT_THREADS, threads));
    if (log) CHECK(pcnn_net_set_log_callback(net, log_line, NULL));
    CHECK(pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_MOMENTUM));
    /* Timing only: a small step keeps the loss finite on random data. */
    CHECK(pcnn_net_set_option(net, PCNN_OPT_LEARNING_RATE, 1e-6));
    pcnn_layer *out = cosmo ? build_cosmo(net, size) : build_plane(net, size);
    CHECK(pcnn_net_set_loss(net, out, PCNN_LOSS_MSE));
    if (parts) {
        CHECK(pcnn_net_set_distribution(net, parts));
        CHECK(pcnn_net_set_option(net, PCNN_OPT_HALO_OVERLAP, overlap));
    }
    return net;
}

/* The model for --predict: the link, then the layers timed on a twin. */
static pcnn_perfmodel *calibrate(bool cosmo, int size, int threads, int batch, pcnn_comm *comm,
                                 const float *x, const float *t)
{
    pcnn_perfmodel *m;
    CHECK(pcnn_perfmodel_create(&m));
    if (comm) CHECK(pcnn_perfmodel_calibrate_comm(m, comm, 2.0));
    pcnn_net *twin = build_net(cosmo, size, threads, NULL, NULL, 1, false);
    CHECK(pcnn_net_finalize(twin, batch));
    for (int s = 0; s < 2; s++) CHECK(pcnn_net_train_step(twin, batch, x, NULL, t, NULL));
    CHECK(pcnn_perfmodel_calibrate_compute(m, twin, 3.0));
    CHECK(pcnn_net_destroy(&twin));
    if (comm) CHECK(pcnn_perfmodel_share(m, comm, 0));
    return m;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    const char *model = NULL, *split = NULL, *trace = NULL;
    int iters = 5, threads = 1, batch = 1, size = 0, npos = 0, report = 0, overlap = 1;
    bool predict = false;
    int warmup = 6; /* past the halo overlap's trial steps (graph/spatial_run.c) */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--split") && i + 1 < argc) split = argv[++i];
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--size") && i + 1 < argc) size = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--report")) report = 1;
        else if (!strcmp(argv[i], "--no-overlap")) overlap = 0;
        else if (!strcmp(argv[i], "--predict")) predict = true;
        else if (!strcmp(argv[i], "--trace") && i + 1 < argc) trace = argv[++i];
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = atoi(argv[++i]);
        else if (npos == 0) model = argv[i], npos++;
        else if (npos == 1) iters = atoi(argv[i]), npos++;
    }
    const bool cosmo = model && !strcmp(model, "cosmo");
    if (!model || (!cosmo && strcmp(model, "plane")) || iters < 1 || batch < 1) {
        if (rank == 0)
            fprintf(stderr, "usage: spatial_bench plane|cosmo [ITERS] [--threads T] "
                            "[--split h|w|d|hw|dh] [--batch N] [--size S] [--report] "
                            "[--no-overlap] [--warmup W] [--predict]\n");
        MPI_Finalize();
        return 2;
    }
    if (size <= 0) size = cosmo ? 64 : 1024;
    if (!split) split = cosmo ? "d" : "h";

    pcnn_comm *comm = NULL;
    if (ranks > 1) CHECK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    int parts[4] = {1, 1, 1, 1};
    if (ranks > 1) {
        int a = 1;
        while ((a + 1) * (a + 1) <= ranks) a++;
        while (ranks % a) a--;
        const int two[2] = {ranks / a, a};
        if (!strcmp(split, "h")) parts[2] = ranks;
        else if (!strcmp(split, "w")) parts[3] = ranks;
        else if (!strcmp(split, "d")) parts[1] = ranks;
        else if (!strcmp(split, "hw")) parts[2] = two[0], parts[3] = two[1];
        else if (!strcmp(split, "dh")) parts[1] = two[0], parts[2] = two[1];
    }
    pcnn_net *net = build_net(cosmo, size, threads, comm, ranks > 1 ? parts : NULL, overlap,
                              report && rank == 0);
    if (trace) CHECK(pcnn_net_set_option(net, PCNN_OPT_TRACE_EVENTS, 65536));
    CHECK(pcnn_net_finalize(net, batch));

    const size_t sample = cosmo ? (size_t)4 * size * size * size : (size_t)18 * size * size;
    float *x = malloc(sample * (size_t)batch * sizeof(float));
    float t[4 * 64];
    unsigned seed = 12345;
    for (size_t i = 0; i < sample * (size_t)batch; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
    for (int i = 0; i < 4 * batch; i++) t[i] = 0.1f * (float)i;
    /* Steps back to back, as a training loop runs them (one barrier before
     * the timed ones), as bench_parallel times them: a barrier after each
     * step would move the all-gathers the next forward pass overlaps in or
     * out of the timed step.  Each rank's median, the slowest of them, and
     * the wall time per step. */
    double *times = malloc(sizeof(double) * (size_t)iters);
    double wall0 = 0, predicted = 0, step_re = 0;
    pcnn_perfmodel *m = NULL;
    for (int it = -warmup; it < iters; it++) {
        if (it == 0 && predict) {
            m = calibrate(cosmo, size, threads, batch, comm, x, t);
            CHECK(pcnn_perfmodel_predict(m, net, batch, ranks, 1, &predicted));
        }
        if (it == 0) {
            CHECK(pcnn_net_reset_timing(net));
            MPI_Barrier(MPI_COMM_WORLD);
            wall0 = now();
        }
        const double t0 = now();
        float loss;
        CHECK(pcnn_net_train_step(net, batch, x, NULL, t, &loss));
        if (it >= 0) times[it] = now() - t0;
    }
    double mean = (now() - wall0) / iters;
    MPI_Allreduce(MPI_IN_PLACE, &mean, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    qsort(times, (size_t)iters, sizeof(double), cmp_double);
    MPI_Allreduce(MPI_IN_PLACE, times, iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double fwd, bwd, comm_s, exposed, halo, halo_exposed, shuffle;
    CHECK(pcnn_net_time(net, -1, PCNN_TIME_HALO, &halo));
    CHECK(pcnn_net_time(net, -1, PCNN_TIME_HALO_EXPOSED, &halo_exposed));
    CHECK(pcnn_net_time(net, -1, PCNN_TIME_SHUFFLE, &shuffle));
    CHECK(pcnn_net_time(net, -1, PCNN_TIME_FORWARD, &fwd));
    CHECK(pcnn_net_time(net, -1, PCNN_TIME_BACKWARD, &bwd));
    CHECK(pcnn_net_time(net, -1, PCNN_TIME_COMM, &comm_s));
    CHECK(pcnn_net_time(net, -1, PCNN_TIME_EXPOSED, &exposed));
    if (m) {
        static char table[1 << 15];
        CHECK(pcnn_perfmodel_validate(m, net, &step_re, NULL, table, sizeof table, NULL));
        if (rank == 0) fputs(table, stderr);
        CHECK(pcnn_perfmodel_destroy(&m));
    }
    size_t bytes, activations;
    CHECK(pcnn_net_memory_bytes(net, &bytes));
    CHECK(pcnn_net_memory_part(net, PCNN_MEMORY_ACTIVATIONS, &activations));
    if (rank == 0)
        printf("{\"model\": \"%s\", \"size\": %d, \"batch\": %d, \"ranks\": %d, \"threads\": %d, "
               "\"parts\": [%d, %d, %d, %d], \"median_s\": %.6f, \"min_s\": %.6f, "
               "\"mean_s\": %.6f, "
               "\"forward_s\": %.6f, \"backward_s\": %.6f, \"comm_s\": %.6f, "
               "\"exposed_s\": %.6f, \"halo_s\": %.6f, \"halo_exposed_s\": %.6f, "
               "\"shuffle_s\": %.6f, \"memory_bytes_rank0\": %zu, "
               "\"activation_bytes_rank0\": %zu, \"predicted_s\": %.6f, \"step_re\": %.4f}\n",
               model, size, batch, ranks, threads, parts[0], parts[1], parts[2], parts[3],
               times[iters / 2], times[0], mean, fwd, bwd, comm_s, exposed, halo, halo_exposed,
               shuffle, bytes, activations, predicted, step_re);
    /* Each rank's per-layer breakdown in turn (imbalance shows as one
     * rank's "other": waiting in the step's agreement), then rank 0's
     * summary of each layer's algorithms. */
    for (int r = 0; report && r < ranks; r++) {
        static char text[1 << 16];
        size_t needed;
        if (r == rank) {
            CHECK(pcnn_net_timing_report(net, text, sizeof text, &needed));
            fprintf(stderr, "rank %d:\n%s", rank, text);
            if (rank == 0) CHECK(pcnn_net_summary(net, text, sizeof text, &needed));
            if (rank == 0) fputs(text, stderr);
            fflush(stderr);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (trace && comm) CHECK(pcnn_net_write_trace_merged(net, trace));
    else if (trace) CHECK(pcnn_net_write_trace(net, trace));
    free(times);
    free(x);
    CHECK(pcnn_net_destroy(&net));
    if (comm) CHECK(pcnn_comm_destroy(&comm));
    MPI_Finalize();
    return 0;
}
