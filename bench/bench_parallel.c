/* Data-parallel training-step benchmark: the thesis's four cases.
 *
 *   mpiexec -n 2 bench_parallel MODEL [GLOBAL_BATCH [ITERS]]
 *       [--exchange allreduce|a2a] [--overlap 0|1] [--engine 0|1|2]
 *       [--threads T] [--bucket-bytes B] [--sync-bn 0|1] [--fc auto|on|off]
 *       [--trace FILE] [--precision fp32|bf16]
 *
 * Builds MODEL (see models.c), splits each synthetic global batch over the
 * ranks, trains with momentum SGD, and prints from rank 0 one JSON line:
 * median/min step time over ITERS steps after 3 warm-ups, and the library's
 * own breakdown per step (forward, backward, update, communication,
 * exposed communication, overlap ratio R of seed 001 eq. 3.8) and the bytes
 * each rank sends per step.  --sync-bn 1 synchronises the batch norms'
 * statistics across ranks (PCNN_OPT_SYNC_BATCHNORM).  --fc sets every dense
 * layer's exchange: on, the FC gradient of seed 001 section 4.1.1; off, the
 * network's exchange; auto (default), eq. 4.8 decides under all-to-all +
 * all-gather.  --trace FILE: every rank's spans of the last steps in one
 * Chrome trace (rank 0 writes it): where a step waits, and for what.
 * --precision bf16: PCNN_OPT_PRECISION bf16 (bf16 on the wire). */
#define PCNN_EXPERIMENTAL /* PCNN_OPT_ACTIVE_ENGINE, ENGINE, SYNC_BATCHNORM: pcnn.h section 9 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "models.h"
#include "pcnn.h"
#include "bench_clock.h"

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    const char *exchange = "a2a", *fc = "auto", *trace = NULL, *precision = "fp32";
    int overlap = 1, engine = 0, threads = 0, sync_bn = 0;
    double bucket_bytes = -1;
    char *pos[3] = {NULL, NULL, NULL};
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--exchange") && i + 1 < argc) exchange = argv[++i];
        else if (!strcmp(argv[i], "--overlap") && i + 1 < argc) overlap = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--engine") && i + 1 < argc) engine = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--sync-bn") && i + 1 < argc) sync_bn = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--bucket-bytes") && i + 1 < argc) bucket_bytes = atof(argv[++i]);
        else if (!strcmp(argv[i], "--fc") && i + 1 < argc) fc = argv[++i];
        else if (!strcmp(argv[i], "--trace") && i + 1 < argc) trace = argv[++i];
        else if (!strcmp(argv[i], "--precision") && i + 1 < argc) precision = argv[++i];
        else if (npos < 3) pos[npos++] = argv[i];
    }
    const model *m = pos[0] ? model_find(pos[0]) : NULL;
    if (!m) {
        fprintf(stderr, "usage: bench_parallel MODEL [GLOBAL_BATCH [ITERS]] [options]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const int batch = pos[1] ? atoi(pos[1]) : m->default_batch;
    const int iters = pos[2] ? atoi(pos[2]) : 10;

    pcnn_comm *comm;
    int rank, ranks;
    CHECK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    CHECK(pcnn_comm_info(comm, &rank, &ranks, NULL));

    const bool allreduce = !strcmp(exchange, "allreduce");
    builder b = {0};
    if (!strcmp(fc, "on")) b.dense_exchange = 1 + PCNN_EXCHANGE_FC_GRADIENT;
    if (!strcmp(fc, "off"))
        b.dense_exchange = 1 + (allreduce ? PCNN_EXCHANGE_ALLREDUCE : PCNN_EXCHANGE_ALLTOALL_ALLGATHER);
    pcnn_layer *in;
    CHECK(pcnn_net_create(&b.net));
    if (m->d > 1) CHECK(pcnn_net_input3d(b.net, m->c, m->d, m->h, m->w, &in));
    else CHECK(pcnn_net_input(b.net, m->c, m->h, m->w, &in));
    pcnn_layer *out = m->build(&b, in);
    CHECK(pcnn_net_set_loss(b.net, out, m->loss));
    CHECK(pcnn_net_set_optimizer(b.net, PCNN_OPTIMIZER_MOMENTUM));
    CHECK(pcnn_net_set_option(b.net, PCNN_OPT_THREADS, threads));
    CHECK(pcnn_net_set_comm(b.net, comm));
    CHECK(pcnn_net_set_exchange(b.net, allreduce ? PCNN_EXCHANGE_ALLREDUCE
                                                 : PCNN_EXCHANGE_ALLTOALL_ALLGATHER));
    CHECK(pcnn_net_set_option(b.net, PCNN_OPT_OVERLAP, overlap));
    CHECK(pcnn_net_set_option(b.net, PCNN_OPT_ENGINE, engine));
    CHECK(pcnn_net_set_option(b.net, PCNN_OPT_SYNC_BATCHNORM, sync_bn));
    CHECK(pcnn_net_set_option(b.net, PCNN_OPT_PRECISION,
                              strcmp(precision, "bf16") ? PCNN_PRECISION_FP32
                                                        : PCNN_PRECISION_BF16));
    if (bucket_bytes >= 0) CHECK(pcnn_net_set_option(b.net, PCNN_OPT_BUCKET_BYTES, bucket_bytes));
    if (trace) CHECK(pcnn_net_set_option(b.net, PCNN_OPT_TRACE_EVENTS, 65536));
    CHECK(pcnn_net_finalize(b.net, batch));

    /* This rank's share of the global batch. */
    const int base = batch / ranks, extra = batch % ranks;
    const int mine = base + (rank < extra);
    size_t in_size = (size_t)m->c * m->d * m->h * m->w, out_size;
    CHECK(pcnn_net_output_size(b.net, &out_size));
    float *x = malloc(sizeof(float) * in_size * (size_t)(mine ? mine : 1));
    float *t = malloc(sizeof(float) * out_size * (size_t)(mine ? mine : 1));
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)(mine ? mine : 1));
    for (int i = 0; i <= rank; i++) randn(x, in_size * (size_t)mine); /* rank-specific data */
    randn(t, out_size * (size_t)mine);
    for (int j = 0; j < mine; j++) labels[j] = (int32_t)(next_u64() % out_size);
    const bool ce = m->loss == PCNN_LOSS_SOFTMAX_CROSS_ENTROPY;

    /* Steps back to back, as a training loop runs them: a barrier between
     * steps would give MPI time to finish the exchange outside the timed
     * step (the all-gathers still in flight when a step returns drain
     * into it: the step's median then fell to ~55 % of the wall time per
     * step on a 200 Mbit/s link). */
    double *times = malloc(sizeof(double) * (size_t)iters);
    double wall0 = 0;
    for (int i = 0; i < 3 + iters; i++) {
        if (i == 3) {
            CHECK(pcnn_net_reset_timing(b.net));
            wall0 = now();
        }
        double t0 = now();
        CHECK(pcnn_net_train_step(b.net, mine, x, ce ? labels : NULL, ce ? NULL : t, NULL));
        if (i >= 3) times[i - 3] = now() - t0;
    }
    double mean = (now() - wall0) / iters;
    MPI_Allreduce(MPI_IN_PLACE, &mean, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    /* Every rank's median; report the slowest (the step ends for all). */
    qsort(times, (size_t)iters, sizeof *times, cmp_double);
    double med = times[iters / 2], best = times[0];
    MPI_Allreduce(MPI_IN_PLACE, &med, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &best, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double part[6], r, active;
    const pcnn_time kinds[6] = {PCNN_TIME_STEP, PCNN_TIME_FORWARD, PCNN_TIME_BACKWARD,
                                PCNN_TIME_UPDATE, PCNN_TIME_COMM, PCNN_TIME_EXPOSED};
    for (int k = 0; k < 6; k++) CHECK(pcnn_net_time(b.net, -1, kinds[k], &part[k]));
    CHECK(pcnn_net_overlap_ratio(b.net, &r));
    CHECK(pcnn_net_get_option(b.net, PCNN_OPT_ACTIVE_ENGINE, &active));
    uint64_t bytes;
    CHECK(pcnn_net_exchange_bytes(b.net, &bytes));
    if (rank == 0)
        printf("{\"model\": \"%s\", \"ranks\": %d, \"global_batch\": %d, \"exchange\": \"%s%s\", "
               "\"overlap\": %d, \"engine\": \"%s\", \"sync_bn\": %d, \"median_ms\": %.2f, "
               "\"min_ms\": %.2f, \"mean_ms\": %.2f, "
               "\"forward_ms\": %.2f, \"backward_ms\": %.2f, \"update_ms\": %.2f, "
               "\"comm_ms\": %.2f, \"exposed_ms\": %.2f, \"exposed_pct\": %.1f, "
               "\"overlap_ratio\": %.1f, \"mb_per_step\": %.2f, \"fc\": \"%s\", "
               "\"precision\": \"%s\"}\n",
               m->name, ranks, batch, exchange,
               allreduce || strcmp(fc, "auto") ? "" : " (+fc by eq. 4.8)", overlap,
               active == 1 ? "thread" : active == 2 ? "nonblocking" : "none", sync_bn, med * 1e3,
               best * 1e3, mean * 1e3, part[1] * 1e3, part[2] * 1e3, part[3] * 1e3, part[4] * 1e3,
               part[5] * 1e3, 100.0 * part[5] / part[0], r, (double)bytes / 1e6, fc, precision);
    fflush(stdout); /* the figures are out even if MPI_Finalize never returns */
    if (trace) CHECK(pcnn_net_write_trace_merged(b.net, trace));
    free(times);
    free(x);
    free(t);
    free(labels);
    CHECK(pcnn_net_destroy(&b.net));
    CHECK(pcnn_comm_destroy(&comm));
    MPI_Finalize();
    return 0;
}
