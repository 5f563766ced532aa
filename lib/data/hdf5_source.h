/* The HDF5 side of a file-backed dataset (pcnn_dataset_open_hdf5):
 *
 *   hdf5_dataset.c  open: the file list, each file's headers and targets
 *   hdf5_reader.c   a sample's box by a hyperslab, converted to float
 *   hdf5_vfd.c      the read-only POSIX file driver that counts bytes and
 *                   refuses FIFOs, directories and devices
 *   hdf5_errors.c   the library's HDF5 lock, HDF5's error stack silenced
 *                   and folded into our messages
 *
 * HDF5 (Debian's parallel builds are not thread-safe) is only called
 * between h5_enter and h5_leave. */
#ifndef PCNN_DATA_HDF5_SOURCE_H
#define PCNN_DATA_HDF5_SOURCE_H

#include <hdf5.h>

#include "volume.h"

/* Where a file's samples lie, as its input dataset says. */
struct h5_source {
    int files;
    char **paths;
    int *first;         /* files + 1 entries: sample k is in file f when
                         * first[f] <= k < first[f + 1] */
    char *inputs;       /* the input dataset's name */
    int spatial;        /* 2 or 3 */
    int channels_last;
    int has_n;          /* the input dataset has a leading N */
    int rank;           /* of the input dataset */
    hsize_t sample_dims[5]; /* the sample's dims in file order (without N) */
    int elem;           /* data_elem */
};

/* ---- lock and errors (hdf5_errors.c) ----------------------------------- */

/* Take the library's HDF5 lock and turn HDF5's error printing off (the
 * host's setting is kept for h5_leave). */
typedef struct h5_session {
    H5E_auto2_t func;
    void *data;
} h5_session;
void h5_enter(h5_session *s);
void h5_leave(const h5_session *s);

/* HDF5's error stack as text (" (HDF5: <the call's failure>: <its cause>:
 * <minor class>)"), then cleared.  Empty when the stack is. */
const char *h5_error_text(char *buf, size_t size);

/* ---- the file driver (hdf5_vfd.c) ---------------------------------------- */

/* A file access property list of the counting read-only driver: the
 * sample reads (raw data) add to *data, everything else to *meta.
 * Negative on failure (inside a session). */
hid_t h5_fapl(_Atomic uint64_t *data, _Atomic uint64_t *meta);

/* Is path a regular file?  Otherwise why not (errno text or "not a regular
 * file ..."), without waiting on a FIFO. */
int h5_regular_file(const char *path, char *why, size_t why_size);

/* ---- elements (hdf5_reader.c) ------------------------------------------ */

/* The data_elem of an HDF5 datatype, or -1 with its description in
 * what. */
int h5_elem_of(hid_t type, char *what, size_t what_size);

#endif
