/* Accuracy of the performance model's collectives (issue 15 target: median
 * |RE| < 10 % for messages >= 1 MiB): calibrate the link, then time
 * all-reduce, all-to-all and all-gather at sizes from 1 MiB to 48 MiB --
 * most of them between the calibration's points (8 B * 4^k and 64 MiB) --
 * and compare each with pcnn_perfmodel_collective_time.
 *
 *   OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
 *     mpiexec.mpich -n 2 ./build/bench/perfmodel_collectives [--budget 2] [--reps 9]
 *
 * One JSON line per (collective, size), then a summary line and a table.
 * Each time is the median of the repetitions after a warm-up, the largest
 * over the ranks, through the same nonblocking calls the exchange posts. */
#define PCNN_EXPERIMENTAL
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pcnn.h"

#define CHECK(call)                                                                        \
    do {                                                                                   \
        if ((call) != PCNN_OK) {                                                           \
            fprintf(stderr, "perfmodel_collectives: %s: %s\n", #call, pcnn_last_error());  \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                  \
        }                                                                                  \
    } while (0)

static int cmp(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One collective of `bytes` as the model counts them (all-reduce: the
 * vector; all-to-all: what one rank sends; all-gather: the total). */
static void run(pcnn_collective k, size_t bytes, int P, void *send, void *recv)
{
    MPI_Request req;
    const int per = (int)(bytes / (size_t)P);
    if (k == PCNN_COLL_ALLREDUCE)
        MPI_Iallreduce(send, recv, (int)(bytes / 4), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
    else if (k == PCNN_COLL_ALLTOALL)
        MPI_Ialltoall(send, per, MPI_BYTE, recv, per, MPI_BYTE, MPI_COMM_WORLD, &req);
    else
        MPI_Iallgather(send, per, MPI_BYTE, recv, per, MPI_BYTE, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
}

int main(int argc, char **argv)
{
    int provided, rank, ranks;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    double budget = 2;
    int reps = 9;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--budget")) budget = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    }
    if (ranks < 2 || reps < 1 || reps > 100 || !(budget > 0)) {
        if (rank == 0)
            fprintf(stderr, "usage: mpiexec.mpich -n 2.. perfmodel_collectives [--budget S] "
                            "[--reps N (1..100)]\n");
        MPI_Finalize();
        return 1;
    }
    pcnn_comm *comm;
    CHECK(pcnn_comm_create(MPI_COMM_WORLD, &comm));
    pcnn_perfmodel *m;
    CHECK(pcnn_perfmodel_create(&m));
    CHECK(pcnn_perfmodel_calibrate_comm(m, comm, budget));

    static const size_t mib[] = {1, 2, 3, 6, 8, 12, 24, 32, 48};
    enum { SIZES = sizeof mib / sizeof mib[0] };
    static const pcnn_collective colls[3] = {PCNN_COLL_ALLREDUCE, PCNN_COLL_ALLTOALL,
                                             PCNN_COLL_ALLGATHER};
    static const char *names[3] = {"allreduce", "alltoall", "allgather"};
    const size_t most = (size_t)48 << 20;
    unsigned char *send = calloc(most, 1), *recv = calloc(most, 1);
    double re[3][SIZES], t[100];
    for (int c = 0; c < 3; c++)
        for (int s = 0; s < SIZES; s++) {
            const size_t bytes = mib[s] << 20;
            run(colls[c], bytes, ranks, send, recv); /* warm-up */
            MPI_Barrier(MPI_COMM_WORLD);
            for (int r = 0; r < reps; r++) {
                const double t0 = MPI_Wtime();
                run(colls[c], bytes, ranks, send, recv);
                t[r] = MPI_Wtime() - t0;
            }
            double measured = median(t, reps), predicted;
            MPI_Allreduce(MPI_IN_PLACE, &measured, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            /* The bytes as posted (all-to-all, all-gather: whole blocks per rank). */
            const double modelled = colls[c] == PCNN_COLL_ALLREDUCE
                                        ? (double)(bytes / 4 * 4)
                                        : (double)(bytes / (size_t)ranks * (size_t)ranks);
            CHECK(pcnn_perfmodel_collective_time(m, colls[c], ranks, modelled, &predicted));
            re[c][s] = (predicted - measured) / measured;
            if (rank == 0)
                printf("{\"collective\": \"%s\", \"ranks\": %d, \"mib\": %zu, \"measured_ms\": "
                       "%.3f, \"predicted_ms\": %.3f, \"re\": %.4f}\n",
                       names[c], ranks, mib[s], 1e3 * measured, 1e3 * predicted, re[c][s]);
        }
    if (rank == 0) {
        double all[3 * SIZES], per[3];
        int n = 0;
        for (int c = 0; c < 3; c++) {
            double v[SIZES];
            for (int s = 0; s < SIZES; s++) v[s] = all[n++] = fabs(re[c][s]);
            per[c] = median(v, SIZES);
        }
        const double overall = median(all, n);
        printf("{\"summary\": true, \"ranks\": %d, \"median_abs_re\": %.4f, "
               "\"median_abs_re_allreduce\": %.4f, \"median_abs_re_alltoall\": %.4f, "
               "\"median_abs_re_allgather\": %.4f}\n",
               ranks, overall, per[0], per[1], per[2]);
        printf("\ncollectives >= 1 MiB on %d ranks: median |RE| %.1f %% (target < 10 %%); "
               "all-reduce %.1f %%, all-to-all %.1f %%, all-gather %.1f %%\n",
               ranks, 100 * overall, 100 * per[0], 100 * per[1], 100 * per[2]);
    }
    free(send);
    free(recv);
    CHECK(pcnn_perfmodel_destroy(&m));
    CHECK(pcnn_comm_destroy(&comm));
    MPI_Finalize();
    return 0;
}
