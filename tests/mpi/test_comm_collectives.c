/* pcnn_comm_barrier and pcnn_comm_bcast (pcnn.h section 9), under mpiexec
 * with 1 to 3 ranks:
 *   1. a broadcast from each root gives every rank the root's bytes, in
 *      one piece and of 0 bytes;
 *   2. sizes or roots that differ between ranks fail every rank with
 *      MISMATCH naming them; a root outside the communicator and a NULL
 *      buffer fail every rank together (INVALID_ARGUMENT here, REMOTE on
 *      the others), and the communicator stays usable;
 *   3. ranks in different calls (a barrier against a broadcast) get
 *      MISMATCH;
 *   4. a barrier that the other ranks reach too late returns TIMEOUT on
 *      the waiting rank, whose communicator then refuses every collective
 *      with INVALID_STATE. */
#define PCNN_EXPERIMENTAL
#include <mpi.h>
#include <string.h>
#include <time.h>

#include "../common/mpi_check.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    pcnn_comm *comm;
    CK(pcnn_comm_create(MPI_COMM_WORLD, &comm));

    int all_ok = 1;
    for (int root = 0; root < ranks; root++) {
        unsigned char buf[1000];
        for (int i = 0; i < (int)sizeof buf; i++)
            buf[i] = (unsigned char)(rank == root ? (i * 7 + root) & 0xff : 0xee);
        all_ok &= pcnn_comm_bcast(comm, buf, sizeof buf, root, 0) == PCNN_OK;
        for (int i = 0; i < (int)sizeof buf; i++)
            all_ok &= buf[i] == (unsigned char)((i * 7 + root) & 0xff);
    }
    expect(all_ok, "bcast from every root: the root's 1000 bytes on every rank");
    expect(pcnn_comm_bcast(comm, NULL, 0, 0, 1000) == PCNN_OK, "bcast of 0 bytes, buf NULL");
    expect(pcnn_comm_barrier(comm, 0) == PCNN_OK && pcnn_comm_barrier(comm, 5000) == PCNN_OK,
           "barrier, with and without a timeout");

    if (ranks > 1) {
        char buf[16] = "";
        pcnn_status st = pcnn_comm_bcast(comm, buf, rank == ranks - 1 ? 8 : 16, 0, 0);
        expect(st == PCNN_ERR_MISMATCH && strstr(pcnn_last_error(), "different sizes") &&
                   strstr(pcnn_last_error(), "16 on rank 0, 8 on rank"),
               "sizes that differ: MISMATCH on every rank, naming them");
        st = pcnn_comm_bcast(comm, buf, sizeof buf, rank == 0 ? 1 : 0, 0);
        expect(st == PCNN_ERR_MISMATCH && strstr(pcnn_last_error(), "different roots"),
               "roots that differ: MISMATCH on every rank");
        st = pcnn_comm_bcast(comm, rank == 1 ? NULL : buf, sizeof buf, 0, 0);
        expect(rank == 1 ? st == PCNN_ERR_INVALID_ARGUMENT : st == PCNN_ERR_REMOTE,
               "a NULL buffer on rank 1: INVALID_ARGUMENT there, REMOTE on the others");
        st = rank == 0 ? pcnn_comm_barrier(comm, 0) : pcnn_comm_bcast(comm, buf, 4, 0, 0);
        expect(st == PCNN_ERR_MISMATCH && strstr(pcnn_last_error(), "pcnn_comm_barrier") &&
                   strstr(pcnn_last_error(), "pcnn_comm_bcast"),
               "a barrier against a broadcast: MISMATCH naming both");
    }
    pcnn_status st = pcnn_comm_bcast(comm, &all_ok, sizeof all_ok, ranks, 0);
    expect(st == PCNN_ERR_INVALID_ARGUMENT && strstr(pcnn_last_error(), "not a rank"),
           "a root outside the communicator: INVALID_ARGUMENT");
    expect(pcnn_comm_barrier(comm, -1) == PCNN_ERR_INVALID_ARGUMENT &&
               pcnn_comm_barrier(NULL, 0) == PCNN_ERR_INVALID_ARGUMENT,
           "a negative timeout and a NULL comm are refused");
    expect(pcnn_comm_barrier(comm, 0) == PCNN_OK, "the communicator is still usable");

    if (ranks > 1) {
        pcnn_comm *late;
        CK(pcnn_comm_create(MPI_COMM_WORLD, &late));
        if (rank != 0) nanosleep(&(struct timespec){0, 800 * 1000 * 1000}, NULL);
        st = pcnn_comm_barrier(late, rank == 0 ? 100 : 0);
        int refused = rank != 0 || pcnn_comm_barrier(late, 0) == PCNN_ERR_INVALID_STATE;
        expect((rank == 0 ? st == PCNN_ERR_TIMEOUT : st == PCNN_OK) && refused,
               "a barrier reached late: TIMEOUT on the waiting rank, its communicator unusable");
        CK(pcnn_comm_destroy(&late));
    }
    CK(pcnn_comm_destroy(&comm));
    if (rank == 0) printf("%d/%d checks passed\n", checks - failures, checks);
    MPI_Finalize();
    return failures ? 1 : 0;
}
