/* A libpcnn built without HDF5 (-Dhdf5=disabled, or no parallel HDF5 of
 * its MPI found): pcnn_dataset_open_hdf5 says how to get it.  No
 * h5_source is ever made, so the reader's hooks are never reached. */
#include "../core/error.h"
#include "volume.h"

PCNN_API pcnn_status pcnn_dataset_open_hdf5(const char *paths, const char *inputs,
                                            const char *targets, int flags, pcnn_dataset **out)
{
    API_ENTRY();
    (void)paths, (void)inputs, (void)targets, (void)flags, (void)out;
    return FAIL(PCNN_ERR_UNSUPPORTED,
                "this libpcnn was built without HDF5: install the parallel HDF5 of its MPI "
                "(Debian: libhdf5-mpich-dev, or libhdf5-openmpi-dev for -Dmpi=openmpi; "
                "scripts/install_deps.sh does), then rebuild with meson setup --reconfigure "
                "-Dhdf5=enabled");
}

pcnn_status h5_read_box(const volume_source *v, volume_scratch *s, int sample,
                        const volume_box *box, float *x, char *msg, size_t msg_size)
{
    (void)v, (void)s, (void)sample, (void)box, (void)x, (void)msg, (void)msg_size;
    return PCNN_ERR_UNSUPPORTED;
}

void h5_cache_free(h5_cache *c) { (void)c; }

void h5_source_free(h5_source *h) { (void)h; }
