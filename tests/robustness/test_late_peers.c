/* Collectives left in flight by aborted engines, on ranks that started
 * different numbers of them, are settled inside MPI_Finalize
 * (lib/parallel/late_peers.h); under mpiexec -n 2 or 3, argv[1] the engine
 * (1 thread, 2 nonblocking), argv[2] "bf16" for 2-byte collectives (the
 * allreduce then the engine's bf16 one: an all-to-all of pieces, then an
 * all-gather of sums, either of which may be left in flight).
 *
 * On one communicator the last rank starts a large allreduce that no other
 * rank ever starts; on a second, rank 0 starts an allreduce, an all-to-all
 * and an all-gather (hundreds of kB each, so that MPI cannot finish them
 * eagerly) while the others start only the allreduce.  The rank ahead
 * starts its extra ones late, while the others may be in MPI_Finalize.  Every engine is
 * aborted and retired, and MPI_Finalize must return: without the settling
 * it hangs (MPICH 4.0.2), which the meson timeout catches. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/mpi_check.h"
#include "parallel/engine.h"

#define COUNT (1 << 17) /* floats: 512 kB */

static float reduce_a[COUNT], reduce_b[COUNT];
static float a2a_send[4 * COUNT], a2a_recv[4 * COUNT], gathered[4 * COUNT];
static int scounts[4], sdispls[4], rcounts[4], rdispls[4], gcounts[4], gdispls[4];
/* bf16 allreduces: slices of COUNT, the pieces of this rank's. */
static int slice_counts[4], slice_displs[4], piece_counts[4], piece_displs[4];
static uint16_t wire_send[2][COUNT], wire_pieces[2][COUNT], wire_gather[2][COUNT];

static void make_bf16(request *r, int k)
{
    r->bf16 = true;
    if (r->kind != REQ_ALLREDUCE) return;
    r->scounts = slice_counts;
    r->sdispls = slice_displs;
    r->rcounts = piece_counts;
    r->rdispls = piece_displs;
    r->wire_send = wire_send[k];
    r->wire_pieces = wire_pieces[k];
    r->wire_gather = wire_gather[k];
    r->rank = rank;
    r->ranks = ranks;
}

static void pause_ms(long ms)
{
    const struct timespec t = {ms / 1000, ms % 1000 * 1000000L};
    nanosleep(&t, NULL);
}

/* Post the `common` requests every rank posts; the rank ahead then posts
 * the others (up to n) late, when the other ranks may be inside
 * MPI_Finalize already (the case that hangs); abort and retire. */
static void leave_in_flight(engine_kind kind, request *reqs, int common, int n, bool *kept)
{
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    engine *e;
    CK(engine_create(&e, kind, comm, 4, -1, 0));
    for (int i = 0; i < common; i++) engine_post(e, &reqs[i]);
    if (n > common) {
        pause_ms(300);
        for (int i = common; i < n; i++) engine_post(e, &reqs[i]);
    }
    engine_abort(e);
    engine_retire(e, kept);
    if (!*kept) MPI_Comm_free(&comm);
}

int main(int argc, char **argv)
{
    const int kind = argc > 1 ? atoi(argv[1]) : 2;
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (ranks < 2 || ranks > 4 || (kind == 1 && provided < MPI_THREAD_MULTIPLE)) {
        if (rank == 0) fprintf(stderr, "needs 2 to 4 ranks (and MULTIPLE for engine 1)\n");
        MPI_Finalize();
        return 77;
    }
    for (int p = 0; p < ranks; p++) {
        scounts[p] = rcounts[p] = gcounts[p] = COUNT;
        sdispls[p] = rdispls[p] = gdispls[p] = p * COUNT;
    }
    const bool bf16 = argc > 2 && strcmp(argv[2], "bf16") == 0;
    for (int p = 0, at = 0; p < ranks; p++) {
        slice_counts[p] = COUNT / ranks + (p < COUNT % ranks);
        slice_displs[p] = at;
        at += slice_counts[p];
    }
    for (int p = 0; p < ranks; p++) {
        piece_counts[p] = slice_counts[rank];
        piece_displs[p] = p * slice_counts[rank];
    }

    /* 1. Only the last rank starts the allreduce. */
    request only = {.kind = REQ_ALLREDUCE, .send = reduce_a, .count = COUNT};
    if (bf16) make_bf16(&only, 0);
    bool kept1 = false;
    leave_in_flight((engine_kind)kind, &only, 0, rank == ranks - 1 ? 1 : 0, &kept1);

    /* 2. Rank 0 is two collectives ahead of the others. */
    request three[3] = {
        {.kind = REQ_ALLREDUCE, .send = reduce_b, .count = COUNT},
        {.kind = REQ_ALLTOALLV, .send = a2a_send, .recv = a2a_recv, .scounts = scounts,
         .sdispls = sdispls, .rcounts = rcounts, .rdispls = rdispls},
        {.kind = REQ_ALLGATHERV, .recv = gathered, .rcounts = gcounts, .rdispls = gdispls}};
    for (int i = 0; bf16 && i < 3; i++) make_bf16(&three[i], 1);
    bool kept2 = false;
    leave_in_flight((engine_kind)kind, three, 1, rank == 0 ? 3 : 1, &kept2);

    /* Local checks only: a collective on MPI_COMM_WORLD here would let MPI
     * progress what the engines left. */
    if (!kept1 || !kept2) {
        fprintf(stderr, "rank %d: an aborted engine did not hand its communicator over\n", rank);
        failures++;
    }
    printf("rank %d: engines retired, calling MPI_Finalize\n", rank);
    fflush(stdout);
    MPI_Finalize(); /* must return */
    printf("rank %d: MPI_Finalize returned; %s\n", rank, failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
