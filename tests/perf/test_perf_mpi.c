/* Link calibration on two ranks within a short budget: every rank holds
 * the same model (the same bits in every modelled time and the same
 * report), the fitted numbers are sane, the measured curve is close to a
 * fresh measurement, a model shared from one rank is the same everywhere
 * (and bad roots fail on every rank), and a data-parallel network's step
 * is predicted and validated on both ranks. */
#define PCNN_EXPERIMENTAL
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/mpi_check.h"
#include "pcnn.h"

static uint64_t fnv(const void *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 0x100000001b3ull;
    return h;
}

static int same_everywhere(uint64_t h)
{
    uint64_t lo = h, hi = h;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    pcnn_comm *comm;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    pcnn_perfmodel *m;
    CK(pcnn_perfmodel_create(&m));
    const double t0 = MPI_Wtime();
    CK(pcnn_perfmodel_calibrate_comm(m, comm, 2.0));
    const double spent = MPI_Wtime() - t0;
    if (rank == 0) printf("calibration took %.2f s\n", spent);
    expect(spent < 20.0, "calibration keeps to its 2 s budget (a full sweep takes ~30 s; load adds)");

    double times[4][6];
    const double sizes[6] = {8, 1024, 65536, 1 << 20, 8 << 20, 1e9};
    for (int c = 0; c < 4; c++)
        for (int s = 0; s < 6; s++)
            CK(pcnn_perfmodel_collective_time(m, (pcnn_collective)c, ranks, sizes[s], &times[c][s]));
    expect(same_everywhere(fnv(times, sizeof times)), "every rank models the same times");
    char report[16384];
    CK(pcnn_perfmodel_report(m, report, sizeof report, NULL));
    expect(same_everywhere(fnv(report, strlen(report))), "every rank reports the same link");
    if (rank == 0) printf("%s", report);
    /* Timings on a machine shared with other jobs vary many times over from
     * one moment to the next: the checks below hold whatever the load. */
    int positive = 1, larger = 1;
    for (int c = 0; c < 4; c++)
        for (int s = 0; s < 6; s++) positive &= times[c][s] > 0 && isfinite(times[c][s]);
    for (int c = 0; c < 4; c++) larger &= times[c][5] > times[c][0]; /* 1 GB vs 8 B */
    expect(positive, "modelled times are positive and finite");
    expect(larger, "1 GB takes longer than 8 B");
    double contention;
    CK(pcnn_perfmodel_get_param(m, PCNN_PERF_MEMORY_CONTENTION, &contention));
    expect(contention >= 1 && contention < 100 && same_everywhere(fnv(&contention, 8)),
           "memory contention: >= 1, the same on every rank");
    expect(strstr(report, "every rank updating at once") != NULL, "the report names it");
    double alpha, beta;
    CK(pcnn_perfmodel_get_param(m, PCNN_PERF_ALPHA_S, &alpha));
    CK(pcnn_perfmodel_get_param(m, PCNN_PERF_BETA_S_PER_BYTE, &beta));
    if (rank == 0) printf("ping-pong: alpha %.3g s, beta %.3g s/B\n", alpha, beta);
    expect(alpha >= 0 && isfinite(alpha) && beta > 0 && beta < 1e-7,
           "ping-pong: alpha >= 0, bandwidth > 10 MB/s on shared memory");

    /* The curve against a fresh measurement of a 1 MiB all-reduce. */
    const int count = (1 << 20) / 4;
    float *a = calloc((size_t)count, sizeof *a), *b = calloc((size_t)count, sizeof *b);
    MPI_Allreduce(a, b, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double w = MPI_Wtime();
    for (int i = 0; i < 10; i++) MPI_Allreduce(a, b, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    w = (MPI_Wtime() - w) / 10;
    MPI_Allreduce(MPI_IN_PLACE, &w, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("1 MiB all-reduce: modelled %.3g s, measured now %.3g s\n", times[1][3], w);
    expect(times[1][3] > 1e-6 && times[1][3] < 10, "1 MiB all-reduce: between 1 us and 10 s");
    free(a);
    free(b);

    /* A data-parallel network: calibrate, train, predict, validate. */
    pcnn_net *net;
    pcnn_layer *l;
    CK(pcnn_net_create(&net));
    CK(pcnn_net_input(net, 3, 16, 16, &l));
    CK(pcnn_conv2d(net, l, 8, 3, 1, 1, 1, &l));
    CK(pcnn_relu(net, l, &l));
    CK(pcnn_dense(net, l, 10, 1, &l));
    CK(pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY));
    CK(pcnn_net_set_comm(net, comm));
    CK(pcnn_net_finalize(net, 16));
    CK(pcnn_perfmodel_calibrate_compute(m, net, 0.5));

    const int root = ranks - 1;
    /* The ranks' pace: the slowest rank's compute over this one's, so at
     * least 1 everywhere and exactly 1 on the slowest; on every rank the
     * same slowest total (this rank's total times its pace). */
    double pace, step_own, step_paced;
    CK(pcnn_perfmodel_get_param(m, PCNN_PERF_RANK_PACE, &pace));
    expect(pace == 1, "pace 1 before it is calibrated");
    CK(pcnn_perfmodel_predict(m, net, 16, 1, 0, &step_own));
    CK(pcnn_perfmodel_calibrate_pace(m, comm));
    CK(pcnn_perfmodel_get_param(m, PCNN_PERF_RANK_PACE, &pace));
    double lowest = pace;
    MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    printf("rank %d: pace %.4f\n", rank, pace);
    expect(pace >= 1 && lowest == 1, "pace >= 1 on every rank, the slowest rank's 1");
    /* One rank's step waits for nobody: not paced. */
    CK(pcnn_perfmodel_predict(m, net, 16, 1, 0, &step_paced));
    expect(step_paced == step_own, "one rank: no pace");
    /* A network other ranks did not calibrate, or no calibration at all:
     * an error on every rank, no hang. */
    pcnn_perfmodel *fresh;
    CK(pcnn_perfmodel_create(&fresh));
    pcnn_status bad = pcnn_perfmodel_calibrate_pace(rank == root ? fresh : m, comm);
    expect(ranks < 2 || (rank == root ? bad == PCNN_ERR_INVALID_STATE : bad == PCNN_ERR_REMOTE),
           "calibrate_pace: a rank without a compute table fails every rank");
    pcnn_net *other;
    pcnn_layer *ol;
    CK(pcnn_net_create(&other));
    CK(pcnn_net_input(other, 3, 8, 8, &ol));
    CK(pcnn_dense(other, ol, 4, 1, &ol));
    CK(pcnn_net_set_loss(other, ol, PCNN_LOSS_MSE));
    CK(pcnn_net_finalize(other, 4));
    CK(pcnn_perfmodel_calibrate_compute(fresh, other, 0.1));
    bad = pcnn_perfmodel_calibrate_pace(rank == root ? fresh : m, comm);
    expect(ranks < 2 || (bad == PCNN_ERR_MISMATCH && strstr(pcnn_last_error(), "another network")),
           "calibrate_pace: ranks with different networks get a MISMATCH");
    bad = pcnn_perfmodel_calibrate_pace(rank == root ? NULL : m, comm);
    expect(ranks < 2 || (rank == root ? bad == PCNN_ERR_INVALID_ARGUMENT : bad == PCNN_ERR_REMOTE),
           "calibrate_pace: a NULL model on one rank fails every rank, no hang");
    CK(pcnn_net_destroy(&other));
    CK(pcnn_perfmodel_destroy(&fresh));

    /* Sharing: the last rank's model (a knob of its own) on every rank. */
    CK(pcnn_perfmodel_set_param(m, PCNN_PERF_LINK_GBITS, rank == root ? 3.0 : 7.0));
    CK(pcnn_perfmodel_report(m, report, sizeof report, NULL));
    const int differed = !same_everywhere(fnv(report, strlen(report)));
    bad = pcnn_perfmodel_share(m, comm, ranks);
    expect(bad == PCNN_ERR_INVALID_ARGUMENT, "share: a root outside the communicator is refused "
           "on every rank");
    bad = pcnn_perfmodel_share(m, comm, rank == 0 ? 0 : root);
    expect(ranks < 2 || (bad == PCNN_ERR_MISMATCH && strstr(pcnn_last_error(), "root")),
           "share: ranks naming different roots get a MISMATCH, no hang");
    /* A NULL model on one rank fails share on every rank, at once. */
    bad = pcnn_perfmodel_share(rank == root ? NULL : m, comm, root);
    expect(ranks < 2 || (rank == root ? bad == PCNN_ERR_INVALID_ARGUMENT
                                      : bad == PCNN_ERR_REMOTE),
           "share: a NULL model on one rank fails on every rank, no hang");
    /* Budgets that differ would cut the sweeps differently: refused. */
    bad = pcnn_perfmodel_calibrate_comm(m, comm, rank == root ? 0.3 : 0.2);
    expect(ranks < 2 || (bad == PCNN_ERR_MISMATCH && strstr(pcnn_last_error(), "budgets")),
           "calibrate_comm: ranks passing different budgets get a MISMATCH, no hang");
    bad = pcnn_perfmodel_calibrate_comm(m, comm, rank == root ? -1.0 : 0.2);
    expect(ranks < 2 || (rank == root ? bad == PCNN_ERR_INVALID_ARGUMENT
                                      : bad == PCNN_ERR_REMOTE),
           "calibrate_comm: a bad budget on one rank fails on every rank, no hang");
    CK(pcnn_perfmodel_share(m, comm, root));
    double gbits;
    CK(pcnn_perfmodel_get_param(m, PCNN_PERF_LINK_GBITS, &gbits));
    CK(pcnn_perfmodel_report(m, report, sizeof report, NULL));
    expect((ranks < 2 || differed) && gbits == 3.0 &&
               same_everywhere(fnv(report, strlen(report))),
           "share: every rank holds the root's model (its knob, its compute table)");
    CK(pcnn_perfmodel_set_param(m, PCNN_PERF_LINK_GBITS, 0));
    float *x = calloc(8 * 3 * 16 * 16, sizeof *x);
    int32_t labels[8] = {0};
    for (int i = 0; i < 8 * 3 * 16 * 16; i++) x[i] = (float)((i * 7919) % 97) / 97.0f - 0.5f;
    for (int s = 0; s < 13; s++) {
        if (s == 3) CK(pcnn_net_reset_timing(net));
        for (int i = 0; i < 8; i++) labels[i] = (i * 3 + s + rank) % 10;
        CK(pcnn_net_train_step(net, 8, x, labels, NULL, NULL));
    }
    double step, re, wre[3], comm_t;
    CK(pcnn_perfmodel_predict(m, net, 16, ranks, 1, &step));
    CK(pcnn_perfmodel_layer_time(m, -1, PCNN_TIME_COMM, &comm_t));
    char table[8192];
    CK(pcnn_perfmodel_validate(m, net, &re, wre, table, sizeof table, NULL));
    if (rank == 0) printf("%s", table);
    expect(step > 0 && comm_t > 0, "a two-rank step has communication");
    expect(isfinite(re) && re > -1, "step RE finite (accuracy: bench/perfmodel_accuracy)");
    expect(wre[0] >= 0 && wre[1] >= 0 && wre[2] >= 0, "WRE^T computed");
    free(x);
    CK(pcnn_net_destroy(&net));
    CK(pcnn_perfmodel_destroy(&m));
    CK(pcnn_comm_destroy(&comm));
    MPI_Finalize();
    return failures ? 1 : 0;
}
