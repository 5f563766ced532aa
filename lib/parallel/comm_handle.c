/* Validating the communicator handle a host hands in, without touching
 * MPI_COMM_WORLD.
 *
 * MPI reports an invalid communicator handle through MPI_COMM_WORLD's error
 * handler (MPICH and Open MPI alike), fatal by default, and that handler is
 * the host's: the library neither swaps nor reads it.  So what can be judged
 * without MPI is judged first, and refused with INVALID_ARGUMENT; only a
 * handle that passes is given to MPI (MPI_Comm_test_inter, to refuse an
 * intercommunicator).  A handle that passes yet names no live communicator
 * (one the host freed, a slot never allocated) is MPI's to report the way the
 * host chose: an abort under the default handler, INVALID_ARGUMENT here when
 * the host set MPI_ERRORS_RETURN; the same as any MPI call of the host's own
 * with that handle. */
#include <stdint.h>
#include <stdio.h>

#include "../core/error.h"
#include "parallel.h"

#if defined(MPICH)
/* MPICH's handles are ints with this layout (the same for C and Fortran:
 * MPI_Comm_c2f is a cast): bits 30-31 the kind (1 built-in, 2 direct, 3
 * indirect), bits 26-29 the object (that of MPI_COMM_WORLD for a
 * communicator), bits 0-25 the index.  MPICH's later checks assert (abort
 * the process) on a built-in handle that names no built-in communicator,
 * read outside its table for a direct handle beyond it, and report an
 * indirect one outside its blocks through MPI_COMM_WORLD; all refused here. */
static bool mpich_handle_plausible(uint32_t h)
{
    const uint32_t world = (uint32_t)MPI_COMM_WORLD, self = (uint32_t)MPI_COMM_SELF;
    if (((h >> 26) & 0xFu) != ((world >> 26) & 0xFu)) return false; /* not a communicator */
    switch (h >> 30) {
    case 1: /* built-in */
        return h == world || h == self;
    case 2: /* direct: MPICH's table of preallocated communicators holds 8
             * (MPIR_COMM_PREALLOC, MPICH 3 and 4); beyond it MPICH reads
             * other objects (9 and 10 alias the built-ins) or garbage that
             * asserts or hangs (35, 37, 181, 200 with MPICH 4.0) */
        return (h & 0x03FFFFFFu) < 8;
    case 3: /* indirect: block in bits 12-25, at most 8192 blocks
             * (HANDLE_NUM_BLOCKS), 1024 communicators in each
             * (HANDLE_NUM_INDICES), MPICH 3 and 4 */
        return ((h >> 12) & 0x3FFFu) < 8192 && (h & 0xFFFu) < 1024;
    default:
        return false;
    }
}
#endif

/* Is `comm`, a handle that passed the checks above, an intracommunicator? */
static pcnn_status check_intra(MPI_Comm comm, const char *func, const char *what)
{
    int inter = 0;
    if (MPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS)
        return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "%s is not a valid communicator", what);
    if (inter)
        return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "%s is an intercommunicator; pcnn "
                         "needs an intracommunicator", what);
    return PCNN_OK;
}

pcnn_status comm_check_handle(MPI_Comm comm, const char *func)
{
    if (comm == MPI_COMM_NULL)
        return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "comm is MPI_COMM_NULL");
#if defined(MPICH)
    if (!mpich_handle_plausible((uint32_t)comm))
        return error_set(PCNN_ERR_INVALID_ARGUMENT, func,
                         "comm (0x%08x) is not a valid communicator", (unsigned)comm);
#elif defined(OPEN_MPI)
    /* A pointer: only NULL is recognisable (any other value is read by MPI). */
    if (comm == NULL)
        return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "comm is NULL, not a communicator");
#endif
    return check_intra(comm, func, "comm");
}

pcnn_status comm_check_fortran_handle(MPI_Fint f, MPI_Comm *out, const char *func)
{
    if (f == MPI_Comm_c2f(MPI_COMM_NULL))
        return error_set(PCNN_ERR_INVALID_ARGUMENT, func,
                         "Fortran handle %d is not a valid communicator (MPI_COMM_NULL)", (int)f);
#if defined(MPICH)
    /* MPI_Comm_f2c checks nothing in MPICH (a cast). */
    const bool plausible = mpich_handle_plausible((uint32_t)f);
#else
    /* Open MPI's Fortran handles are indices into its table of communicators:
     * MPI_Comm_f2c gives NULL (not MPI_COMM_NULL) for an index beyond it or
     * for a freed communicator's slot, without an error handler. */
    const bool plausible = f >= 0;
#endif
    MPI_Comm c = plausible ? MPI_Comm_f2c(f) : MPI_COMM_NULL;
#if defined(OPEN_MPI)
    if (c == NULL) c = MPI_COMM_NULL;
#endif
    if (c == MPI_COMM_NULL)
        return error_set(PCNN_ERR_INVALID_ARGUMENT, func,
                         "Fortran handle %d (0x%08x) is not a valid communicator", (int)f,
                         (unsigned)f);
    char what[48];
    snprintf(what, sizeof what, "Fortran handle %d", (int)f);
    TRY(check_intra(c, func, what));
    *out = c;
    return PCNN_OK;
}
