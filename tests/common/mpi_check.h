/* The small harness shared by the multi-rank tests: CK aborts the job on a
 * failed libpcnn call (printing where and why), expect() counts a check
 * that must hold on every rank and prints PASS/FAIL once, from rank 0.
 * The including file sets rank and ranks after MPI_Init. */
#ifndef PCNN_TESTS_MPI_CHECK_H
#define PCNN_TESTS_MPI_CHECK_H

#include <stdio.h>

#include "pcnn.h"

static int rank, ranks, failures, checks;

#define CK(call)                                                                        \
    do {                                                                                \
        pcnn_status s_ = (call);                                                        \
        if (s_ != PCNN_OK) {                                                            \
            fprintf(stderr, "rank %d: %s:%d: %s -> %s: %s\n", rank, __FILE__, __LINE__, \
                    #call, pcnn_status_str(s_), pcnn_last_error());                     \
            MPI_Abort(MPI_COMM_WORLD, 2);                                               \
        }                                                                               \
    } while (0)

static inline void expect(int ok, const char *what)
{
    int all = ok;
    MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    checks++;
    if (!all) failures++;
    if (rank == 0) printf("%s %s\n", all ? "PASS" : "FAIL", what);
}

#endif
