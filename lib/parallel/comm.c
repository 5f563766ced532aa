/* The communicator handle: a duplicate of the host's communicator. */
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

bool mpi_is_finalized(void)
{
    int finalized = 0;
    MPI_Finalized(&finalized); /* callable at any time */
    return finalized != 0;
}

/* Ranks sharing this node (MPI_Comm_split_type is collective and has no
 * nonblocking form: asked once here, where MPI_Comm_dup blocks anyway). */
static int ranks_on_node(MPI_Comm comm)
{
    int local = 1;
    MPI_Comm node;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
        MPI_Comm_size(node, &local);
        MPI_Comm_free(&node);
    }
    return local;
}

static void free_handle(pcnn_comm *c)
{
    mem_free(c->records);
    mem_free(c->batches);
    mem_free(c);
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
    c->ranks_on_node = ranks_on_node(c->comm);
    c->owns_mpi = owns_mpi;
    c->records = mem_calloc((size_t)(c->size + 1) * AGREE_RECORD, sizeof(double));
    c->batches = mem_calloc((size_t)c->size, sizeof(int));
    if (!c->records || !c->batches) {
        const int size = c->size;
        MPI_Comm_free(&c->comm);
        free_handle(c);
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
    TRY(comm_check_handle(comm, __func__));
    return wrap(comm, false, out);
}

PCNN_API pcnn_status pcnn_comm_create_fortran(MPI_Fint comm, pcnn_comm **out)
{
    API_ENTRY();
    REQUIRE_PTR(out);
    TRY(check_initialized(__func__));
    MPI_Comm c;
    TRY(comm_check_fortran_handle(comm, &c, __func__));
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
     * 4.0.2); but MPI may write that agreement's buffer until then.  After
     * the host's MPI_Finalize no MPI call is allowed: only memory is freed. */
    if (!mpi_is_finalized()) {
        MPI_Comm_free(&c->comm);
        if (c->owns_mpi) MPI_Finalize();
    }
    if (c->failed != PCNN_OK) c->records = NULL; /* MPI's for good */
    free_handle(c);
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
