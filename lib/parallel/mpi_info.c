/* Which MPI this libpcnn speaks: the family it was built for (pcnn_config.h)
 * and the MPI library the process actually runs.  Bindings compare them
 * with their own MPI (mpi4py's) before handing over a communicator. */
#include <string.h>

#include "../core/error.h"
#include "parallel.h"

PCNN_API pcnn_status pcnn_mpi_info(int *family, const char **built_with, char *library,
                                   size_t size)
{
    API_ENTRY();
    REQUIRE(library == NULL || size > 0, PCNN_ERR_INVALID_ARGUMENT,
            "library is given with size 0: no room for the terminating NUL");
    if (library) {
        /* One of the few MPI calls allowed before MPI_Init and after
         * MPI_Finalize (MPI-3.0 section 8.7). */
        char text[MPI_MAX_LIBRARY_VERSION_STRING] = "";
        int len = 0;
        int code = MPI_Get_library_version(text, &len);
        if (code != MPI_SUCCESS) return mpi_status(code, __func__, "MPI_Get_library_version");
        size_t n = strlen(text);
        if (n > size - 1) n = size - 1;
        memcpy(library, text, n);
        library[n] = '\0';
    }
    if (family) *family = PCNN_MPI_FAMILY;
    if (built_with) *built_with = PCNN_MPI_NAME " " PCNN_MPI_BUILD_VERSION;
    return PCNN_OK;
}
