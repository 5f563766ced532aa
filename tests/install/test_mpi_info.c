/* pcnn_mpi_info: the build's MPI family and version as pcnn_config.h
 * recorded them, and the running MPI library's own description, before
 * MPI_Init as the binding's check calls it; truncation and the refusal of
 * a buffer without room. */
#define PCNN_EXPERIMENTAL
#include <pcnn.h>

#include <stdio.h>
#include <string.h>

#define EXPECT(cond)                                                   \
    do {                                                               \
        if (!(cond)) {                                                 \
            fprintf(stderr, "FAIL line %d: %s\n", __LINE__, #cond);    \
            return 1;                                                  \
        }                                                              \
    } while (0)

int main(void)
{
    int family = -1;
    const char *built = NULL;
    char text[MPI_MAX_LIBRARY_VERSION_STRING];
    EXPECT(pcnn_mpi_info(&family, &built, text, sizeof text) == PCNN_OK);
    EXPECT(family == PCNN_MPI_FAMILY);
    EXPECT(strcmp(built, PCNN_MPI_NAME " " PCNN_MPI_BUILD_VERSION) == 0);
#if PCNN_MPI_FAMILY == PCNN_MPI_FAMILY_MPICH
    EXPECT(strncmp(built, "MPICH ", 6) == 0 && strstr(text, "MPICH") != NULL);
    EXPECT(strstr(text, MPICH_VERSION) != NULL);
#else
    EXPECT(strncmp(built, "Open MPI ", 9) == 0 && strstr(text, "Open MPI") != NULL);
#endif
    /* Truncated to size - 1 characters, NUL-terminated. */
    char small[8];
    memset(small, 'x', sizeof small);
    EXPECT(pcnn_mpi_info(NULL, NULL, small, sizeof small) == PCNN_OK);
    EXPECT(strlen(small) == 7 && strncmp(small, text, 7) == 0);
    char one[1] = {'x'};
    EXPECT(pcnn_mpi_info(NULL, NULL, one, 1) == PCNN_OK && one[0] == '\0');
    /* No room for the NUL: refused, nothing written. */
    family = -1;
    EXPECT(pcnn_mpi_info(&family, NULL, small, 0) == PCNN_ERR_INVALID_ARGUMENT);
    EXPECT(family == -1);
    EXPECT(strstr(pcnn_last_error(), "pcnn_mpi_info") != NULL);
    EXPECT(pcnn_mpi_info(NULL, NULL, NULL, 0) == PCNN_OK);
    printf("mpi_info ok: built with %s, running %.40s...\n", built, text);
    return 0;
}
