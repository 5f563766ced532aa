/* The optimizer on short runs of gradients at a stride (optim_update_strided,
 * as the box dense layer's columns exchange calls it: CosmoFlow's 8192 runs
 * of 256 parameters at a stride of 512 per rank, the parameters packed)
 * against one contiguous call on as many parameters; every rank at once,
 * median of 21 calls.
 *
 *   E="env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1"
 *   $E mpiexec.mpich -n 1 build/bench/strided_update [LEN [RUNS]]
 *   $E mpiexec.mpich -n 2 build/bench/strided_update         # both ranks at once
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/clock.h"
#include "optim/optim.h"

static int cmp(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const size_t len = argc > 1 ? (size_t)atol(argv[1]) : 256;
    const size_t runs = argc > 2 ? (size_t)atol(argv[2]) : 8192;
    const size_t stride = 2 * len, own = len * runs, span = stride * runs;
    float *p = malloc(own * sizeof *p), *g = malloc(span * sizeof *g);
    float *m = calloc(own, sizeof *m);
    if (!p || !g || !m || len == 0 || runs == 0) {
        fprintf(stderr, "strided_update: bad sizes or out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < span; i++) g[i] = 1e-4f * (float)(i % 5);
    for (size_t i = 0; i < own; i++) p[i] = 1e-3f * (float)(i % 7);
    const optim_hyper h = {.momentum = 0.9};
    enum { REPS = 21 };
    double t[2][REPS];
    for (int r = 0; r < REPS; r++) {
        for (int mode = 0; mode < 2; mode++) {
            MPI_Barrier(MPI_COMM_WORLD);
            const double t0 = clock_now();
            if (mode == 0)
                optim_update_strided(PCNN_OPTIMIZER_MOMENTUM, &h, 1e-3, 0, 1, p, g, m, NULL, len,
                                     stride, runs, 1);
            else
                optim_update(PCNN_OPTIMIZER_MOMENTUM, &h, 1e-3, 0, 1, p, g, m, NULL, own, 1);
            t[mode][r] = clock_now() - t0;
        }
    }
    qsort(t[0], REPS, sizeof(double), cmp);
    qsort(t[1], REPS, sizeof(double), cmp);
    if (rank == 0)
        printf("{\"runs\": %zu, \"len\": %zu, \"strided_ms\": %.3f, \"contiguous_ms\": %.3f, "
               "\"ratio\": %.2f}\n", runs, len, 1e3 * t[0][REPS / 2], 1e3 * t[1][REPS / 2],
               t[0][REPS / 2] / t[1][REPS / 2]);
    free(p);
    free(g);
    free(m);
    MPI_Finalize();
    return 0;
}
