/* pcnn_dataset_open_hdf5 in a build without HDF5 returns UNSUPPORTED
 * saying how to enable it; with HDF5, a missing file is IO, not that. */
#define PCNN_EXPERIMENTAL
#include <stdio.h>
#include <string.h>

#include "pcnn.h"

int main(void)
{
    pcnn_dataset *d = NULL;
    const pcnn_status st = pcnn_dataset_open_hdf5("/nonexistent/pcnn.h5", NULL, NULL,
                                                  PCNN_HDF5_VOLUMES, &d);
#ifdef HAVE_HDF5
    const int ok = st == PCNN_ERR_IO && strstr(pcnn_last_error(), "/nonexistent/pcnn.h5");
#else
    const int ok = st == PCNN_ERR_UNSUPPORTED && strstr(pcnn_last_error(), "libhdf5-mpich-dev") &&
                   strstr(pcnn_last_error(), "-Dhdf5=enabled");
#endif
    printf("%s %s -> %s: %s\n", ok ? "PASS" : "FAIL", "open_hdf5 of a missing file",
           pcnn_status_str(st), pcnn_last_error());
    return ok && d == NULL ? 0 : 1;
}
