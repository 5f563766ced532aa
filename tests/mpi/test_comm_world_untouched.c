/* MPI_COMM_WORLD is the host's: pcnn_comm_create and pcnn_comm_create_fortran
 * never call MPI_Comm_set_errhandler / MPI_Comm_get_errhandler on it (nor on
 * the host's communicator), whatever handle they are given.  Under mpiexec
 * with 1 to 3 ranks:
 *   1. the host sets its own error handler on MPI_COMM_WORLD (it counts its
 *      invocations) and on a sub-communicator; the MPI profiling interface
 *      (this file's MPI_Comm_set_errhandler / MPI_Comm_get_errhandler, which
 *      forward to PMPI_) counts what the library calls on which communicator;
 *   2. a pcnn communicator from the sub-communicator, from its Fortran
 *      handle and from MPI_COMM_WORLD works (a barrier), and no call of the
 *      library set or read an error handler but on its own duplicates;
 *   3. bad handles (MPI_COMM_NULL, handles that name no communicator, with
 *      MPICH in C and Fortran form, with Open MPI Fortran indices beyond its
 *      table and a freed communicator's index) return INVALID_ARGUMENT
 *      without MPI seeing them: the host's handler is never invoked;
 *   4. an intercommunicator (2 ranks or more) is refused the same way;
 *   5. after all of it, MPI_COMM_WORLD's and the sub-communicator's handlers
 *      are still the host's (compared as handles), never invoked. */
#define PCNN_EXPERIMENTAL
#include <mpi.h>
#include <stdint.h>
#include <string.h>

#include "../common/mpi_check.h"

static int world_invoked, sub_invoked;
static MPI_Comm sub = MPI_COMM_NULL;
/* Calls the library made on a communicator that is not one of its own. */
static int set_on_host, get_on_host, set_total;

static int is_host_comm(MPI_Comm c) { return c == MPI_COMM_WORLD || (sub != MPI_COMM_NULL && c == sub); }

int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler)
{
    set_total++;
    if (is_host_comm(comm)) set_on_host++;
    return PMPI_Comm_set_errhandler(comm, errhandler);
}

int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler *errhandler)
{
    if (is_host_comm(comm)) get_on_host++;
    return PMPI_Comm_get_errhandler(comm, errhandler);
}

static void on_world(MPI_Comm *c, int *code, ...)
{
    (void)c;
    (void)code;
    world_invoked++;
}

static void on_sub(MPI_Comm *c, int *code, ...)
{
    (void)c;
    (void)code;
    sub_invoked++;
}

/* Is `comm`'s error handler `want`?  (Read through PMPI: not counted.) */
static int handler_is(MPI_Comm comm, MPI_Errhandler want)
{
    MPI_Errhandler now;
    PMPI_Comm_get_errhandler(comm, &now);
    const int same = now == want;
    MPI_Errhandler_free(&now);
    return same;
}

static int refused(pcnn_status st, pcnn_comm *c, const char *says)
{
    return st == PCNN_ERR_INVALID_ARGUMENT && c == NULL && strstr(pcnn_last_error(), says);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);

    MPI_Errhandler world_handler, sub_handler;
    MPI_Comm_create_errhandler(on_world, &world_handler);
    MPI_Comm_create_errhandler(on_sub, &sub_handler);
    PMPI_Comm_set_errhandler(MPI_COMM_WORLD, world_handler);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &sub);
    PMPI_Comm_set_errhandler(sub, sub_handler);
    set_total = 0;

    /* 2. Good handles. */
    pcnn_comm *a = NULL, *b = NULL, *w = NULL;
    expect(pcnn_comm_create(sub, &a) == PCNN_OK && pcnn_comm_barrier(a, 0) == PCNN_OK,
           "a pcnn communicator from the host's sub-communicator works");
    expect(pcnn_comm_create_fortran(MPI_Comm_c2f(sub), &b) == PCNN_OK &&
               pcnn_comm_barrier(b, 0) == PCNN_OK,
           "from the sub-communicator's Fortran handle too");
    expect(pcnn_comm_create(MPI_COMM_WORLD, &w) == PCNN_OK && pcnn_comm_barrier(w, 0) == PCNN_OK,
           "and from MPI_COMM_WORLD");
    int size = 0;
    CK(pcnn_comm_info(a, NULL, &size, NULL));
    expect(size == (ranks + 1 - rank % 2) / 2, "the sub-communicator's size");
    expect(set_total == 3, "the library set an error handler once per duplicate it owns");
    CK(pcnn_comm_destroy(&a));
    CK(pcnn_comm_destroy(&b));
    CK(pcnn_comm_destroy(&w));

    /* 3. Bad handles, refused before MPI sees them. */
    pcnn_comm *c = NULL;
    expect(refused(pcnn_comm_create(MPI_COMM_NULL, &c), c, "MPI_COMM_NULL"),
           "MPI_COMM_NULL: INVALID_ARGUMENT");
    expect(refused(pcnn_comm_create_fortran(MPI_Comm_c2f(MPI_COMM_NULL), &c), c,
                   "not a valid communicator"),
           "MPI_COMM_NULL's Fortran handle: INVALID_ARGUMENT");
    const uint32_t bad[] = {12345u, 0x44000002u, 0x45000000u, 0x84000008u, 0x84000025u,
                            0xc4ffffffu, 0xc4000400u, 0xffffffffu};
    int all_refused = 1;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        all_refused &= refused(pcnn_comm_create_fortran((MPI_Fint)bad[i], &c), c,
                               "not a valid communicator");
#if defined(MPICH)
        all_refused &= refused(pcnn_comm_create((MPI_Comm)bad[i], &c), c,
                               "not a valid communicator");
#endif
    }
    expect(all_refused, "handles that name no communicator: INVALID_ARGUMENT");
#if defined(OPEN_MPI)
    MPI_Comm gone;
    MPI_Comm_dup(MPI_COMM_SELF, &gone);
    const MPI_Fint gone_f = MPI_Comm_c2f(gone);
    MPI_Comm_free(&gone);
    expect(refused(pcnn_comm_create_fortran(gone_f, &c), c, "not a valid communicator"),
           "a freed communicator's Fortran index: INVALID_ARGUMENT");
#endif

    /* 4. An intercommunicator between the two halves. */
    if (ranks >= 2) {
        MPI_Comm inter;
        MPI_Intercomm_create(sub, 0, MPI_COMM_WORLD, rank % 2 == 0 ? 1 : 0, 7, &inter);
        expect(refused(pcnn_comm_create(inter, &c), c, "intercommunicator") &&
                   refused(pcnn_comm_create_fortran(MPI_Comm_c2f(inter), &c), c,
                           "intercommunicator"),
               "an intercommunicator: INVALID_ARGUMENT");
        MPI_Comm_free(&inter);
    }

    /* 5. The host's state. */
    expect(set_on_host == 0 && get_on_host == 0,
           "the library never set or read an error handler on MPI_COMM_WORLD or the "
           "host's communicator");
    expect(handler_is(MPI_COMM_WORLD, world_handler) && handler_is(sub, sub_handler),
           "MPI_COMM_WORLD's and the sub-communicator's error handlers are the host's");
    expect(world_invoked == 0 && sub_invoked == 0, "the host's error handlers never invoked");

    MPI_Comm_free(&sub);
    MPI_Errhandler_free(&world_handler);
    MPI_Errhandler_free(&sub_handler);
    const int result = failures;
    if (rank == 0) printf("%d of %d checks failed\n", failures, checks);
    MPI_Finalize();
    return result ? 1 : 0;
}
