/* The communicator handle: a duplicate of the host's communicator. */
#include <stdio.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "parallel.h"

pcnn_status mpi_status(int code, const char *func, const char *what)
{
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(code, text, &len);
    return error_set(PCNN_ERR_MPI, func, "%s failed: %s", what, text);
}

static pcnn_status wrap(MPI_Comm host, bool owns_mpi, pcnn_comm **out)
{
    pcnn_comm *c = mem_calloc(1, sizeof *c);
    if (!c) return FAIL(PCNN_ERR_OUT_OF_MEMORY, "communicator handle");
    int code = MPI_Comm_dup(host, &c->comm);
    if (code != MPI_SUCCESS) {
        mem_free(c);
        return mpi_status(code, __func__, "MPI_Comm_dup");
    }
    MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->comm, &c->rank);
    MPI_Comm_size(c->comm, &c->size);
    MPI_Query_thread(&c->thread_level);
    c->owns_mpi = owns_mpi;
    c->gather = mem_calloc((size_t)c->size * 2 + AGREE_SCRATCH, sizeof(double));
    if (!c->gather) {
        const int size = c->size;
        MPI_Comm_free(&c->comm);
        mem_free(c);
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "communicator buffers for %d ranks", size);
    }
    *out = c;
    return PCNN_OK;
}

static pcnn_status check_initialized(const char *func)
{
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized)
        return error_set(PCNN_ERR_INVALID_STATE, func,
                         "MPI is not initialised (or already finalised): call MPI_Init_thread "
                         "first, or use pcnn_comm_create_world");
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_comm_create(MPI_Comm comm, pcnn_comm **out)
{
    API_ENTRY();
    REQUIRE_PTR(out);
    TRY(check_initialized(__func__));
    REQUIRE(comm != MPI_COMM_NULL, PCNN_ERR_INVALID_ARGUMENT, "comm is MPI_COMM_NULL");
    return wrap(comm, false, out);
}

PCNN_API pcnn_status pcnn_comm_create_fortran(MPI_Fint comm, pcnn_comm **out)
{
    API_ENTRY();
    REQUIRE_PTR(out);
    TRY(check_initialized(__func__));
    MPI_Comm c = MPI_Comm_f2c(comm);
    REQUIRE(c != MPI_COMM_NULL, PCNN_ERR_INVALID_ARGUMENT,
            "Fortran handle %d is not a valid communicator", (int)comm);
    return wrap(c, false, out);
}

PCNN_API pcnn_status pcnn_comm_create_world(pcnn_comm **out)
{
    API_ENTRY();
    REQUIRE_PTR(out);
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    REQUIRE(!finalized, PCNN_ERR_INVALID_STATE, "MPI was already finalised");
    bool owns = false;
    if (!initialized) {
        int provided;
        MPI_TRY(MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
        owns = true;
    }
    pcnn_status st = wrap(MPI_COMM_WORLD, owns, out);
    if (st != PCNN_OK && owns) MPI_Finalize();
    return st;
}

PCNN_API pcnn_status pcnn_comm_destroy(pcnn_comm **comm)
{
    API_ENTRY();
    if (!comm || !*comm) return PCNN_OK;
    pcnn_comm *c = *comm;
    REQUIRE(c->users == 0, PCNN_ERR_INVALID_STATE,
            "%d network(s) still use this communicator: destroy them first", c->users);
    /* Freeing a communicator with a given-up agreement in flight is legal
     * (MPI frees it once idle), and MPI_Finalize still returns (MPICH
     * 4.0.2); but MPI may write that agreement's buffer until then. */
    MPI_Comm_free(&c->comm);
    if (c->owns_mpi) MPI_Finalize();
    if (c->failed == PCNN_OK) mem_free(c->gather);
    mem_free(c);
    *comm = NULL;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_comm_info(const pcnn_comm *comm, int *rank, int *size,
                                    int *thread_level)
{
    API_ENTRY();
    REQUIRE_PTR(comm);
    if (rank) *rank = comm->rank;
    if (size) *size = comm->size;
    if (thread_level) *thread_level = comm->thread_level;
    return PCNN_OK;
}
