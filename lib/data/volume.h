/* File-backed volumes (seed 003 section 4.4): a dataset whose samples stay
 * in raw or .npy files listed by a manifest and are read batch by batch,
 * possibly only a box of each, possibly ahead of time on a helper thread.
 *
 *   volume_manifest.c  the manifest parser (one sample per line)
 *   volume_npy.c       the .npy header parser
 *   volume.c           open, box reads (pread of contiguous runs, f64 -> f32)
 *   volume_prefetch.c  the helper thread reading the next batches ahead
 */
#ifndef PCNN_DATA_VOLUME_H
#define PCNN_DATA_VOLUME_H

#include <stddef.h>
#include <stdint.h>

#include "pcnn.h"

typedef struct volume_prefetch volume_prefetch;

/* The buffers one reading thread needs (~150 KiB: the runs of a box
 * waiting to be read and a bounce buffer), allocated once, at open for
 * the caller's thread and with the prefetch thread: a box read then keeps
 * little on the stack (a thread's stack may be 128 KiB) and allocates
 * nothing.  volume_scratch_new gives NULL when out of memory. */
typedef struct volume_scratch volume_scratch;
volume_scratch *volume_scratch_new(void);
void volume_scratch_free(volume_scratch *s);
/* The thread's open HDF5 file (hdf5_reader.c), kept between its reads. */
typedef struct h5_cache h5_cache;
h5_cache **volume_scratch_h5(volume_scratch *s);

/* One sample's file: where its C-order [C][D][H][W] array starts. */
typedef struct volume_file {
    char *path;         /* as opened: relative paths joined to the manifest's directory */
    uint64_t offset;    /* first byte of the array (0 for raw, after the header for .npy) */
} volume_file;

/* Bytes read from the files (pcnn_dataset_io_bytes), by whichever thread
 * reads: the samples' arrays and the rest (headers, metadata, targets). */
typedef struct volume_io {
    _Atomic uint64_t data_bytes, meta_bytes;
} volume_io;

/* A channel's transform as read: scale * (log1p ? log1pf(x) : x) + shift. */
typedef struct volume_transform {
    int log1p;
    float scale, shift;
} volume_transform;

typedef struct h5_source h5_source;

/* The file side of a file-backed pcnn_dataset (pcnn_dataset.vol). */
typedef struct volume_source {
    int c, d, h, w;
    pcnn_dtype dtype;
    size_t elem;        /* 4 or 8 bytes */
    int count;          /* number of samples: of files for raw and .npy */
    volume_file *files; /* raw and .npy; NULL for HDF5 */
    h5_source *h5;      /* HDF5 files (hdf5_source.h), or NULL */
    volume_io *io;
    volume_transform *transform; /* c entries, or NULL: the identity */
    volume_scratch *scratch;   /* for reads on the caller's thread */
    volume_prefetch *prefetch; /* NULL when off */
} volume_source;

/* A box of a sample: start and count along D, H and W. */
typedef struct volume_box {
    int start[3], count[3];
} volume_box;

static inline size_t volume_box_floats(int c, const volume_box *b)
{
    return (size_t)c * (size_t)b->count[0] * (size_t)b->count[1] * (size_t)b->count[2];
}

/* ---- manifest (volume_manifest.c) -------------------------------------- */

/* One parsed manifest line. */
typedef struct manifest_entry {
    char *path;         /* joined to the manifest's directory when relative */
    float *targets;     /* target_count values */
} manifest_entry;

/* Parse a manifest held in memory: lines "<path> <t_1> ... <t_k>" separated
 * by spaces or tabs, k = target_count; blank lines and lines starting with
 * '#' are skipped; a path may not contain spaces.  Relative paths are
 * joined to `dir` (NULL or "" : kept as they are).  `name` (the manifest's
 * path) and the 1-based line number prefix errors.  On success *entries
 * (free with manifest_free) holds *count >= 1 entries.  Safe on any input.
 * Errors: CORRUPT (bad line, no sample, non-finite target, text after the
 * targets, NUL byte), OUT_OF_MEMORY. */
pcnn_status manifest_parse(const char *text, size_t len, const char *dir, const char *name,
                           int target_count, manifest_entry **entries, int *count);
void manifest_free(manifest_entry *entries, int count);

/* ---- .npy header (volume_npy.c) ---------------------------------------- */

#define NPY_MAX_DIMS 8

typedef struct npy_header {
    int elem;            /* 4 (<f4) or 8 (<f8) */
    int ndims;
    int64_t dims[NPY_MAX_DIMS];
    size_t data_offset;  /* bytes before the array */
} npy_header;

/* Parse the start of a .npy file (versions 1.0, 2.0 and 3.0): magic,
 * version, header length and the dictionary {'descr': '<f4' or '<f8',
 * 'fortran_order': False, 'shape': (...)}.  `len` bytes are available;
 * the header must lie within them.  `name` prefixes errors.  Allocates
 * nothing; safe on any input.  Errors: CORRUPT (bad magic, truncated or
 * malformed header, Fortran order, other dtypes, negative dims). */
pcnn_status npy_parse_header(const unsigned char *buf, size_t len, const char *name,
                             npy_header *out);

/* ---- reading (volume.c) ----------------------------------------------- */

/* Read `box` of the file's sample into x (c * box floats, C-order), as
 * float32, with the calling thread's scratch.  Reads only the box, by
 * pread of maximal contiguous runs.  Safe to call from several threads at
 * once, each with its own scratch.  Errors: IO (open/read failure, not a
 * regular file), CORRUPT (the file ended before the run at some offset).
 * With a NULL `msg`, the message goes to the thread's error; otherwise it
 * is written into msg (msg_size bytes) and the thread's error is left
 * alone (the helper thread). */
pcnn_status volume_read_box(const volume_source *v, volume_scratch *s, int file,
                            const volume_box *box, float *x, char *msg, size_t msg_size);

/* Free the files (and stop the prefetch); NULL is a no-op. */
void volume_source_free(volume_source *v);

/* A volume_source of count samples of (c, d, h, w), its counters and
 * scratch allocated, nothing else (files, h5: the caller's).  NULL when out
 * of memory. */
volume_source *volume_source_new(int count, int c, int d, int h, int w);

/* Apply v's transform (file_transform.c) to n samples of `box` in x. */
void volume_apply_transform(const volume_source *v, const volume_box *box, int n, float *x);

/* ---- HDF5 (hdf5_reader.c; stubs in hdf5_none.c) ------------------------ */

/* Read `box` of sample `sample` as volume_read_box does (same reporting). */
pcnn_status h5_read_box(const volume_source *v, volume_scratch *s, int sample,
                        const volume_box *box, float *x, char *msg, size_t msg_size);
/* Close a thread's open file; NULL is a no-op. */
void h5_cache_free(h5_cache *c);
void h5_source_free(h5_source *h);

/* ---- prefetch (volume_prefetch.c) ------------------------------------- */

/* Start (batches >= 1) or stop (0) reading ahead.  Errors: OUT_OF_MEMORY,
 * INTERNAL (no thread). */
pcnn_status volume_prefetch_set(volume_source *v, int batches);

/* Read the samples at positions [start, start + count) of `order` (n
 * entries) restricted to `box` into x (count * box floats): from a batch
 * the helper thread read ahead when one matches, else directly; then queue
 * the batches predicted next (same box and count, positions advancing by
 * the distance between the last two calls).  First reports an error the
 * helper thread met since the last call.  Without prefetch, reads
 * directly.  Call from one thread at a time. */
pcnn_status volume_read_batch(volume_source *v, const int *order, int n, int start, int count,
                              const volume_box *box, float *x);

void volume_prefetch_free(volume_prefetch *p);
/* The batches v reads ahead (0: no prefetch thread). */
int volume_prefetch_slots(const volume_source *v);

/* Block until the helper thread has no queued or running read (tests: a
 * read-ahead failure is then recorded, whatever the machine's load). */
void volume_prefetch_wait_idle(volume_source *v);

#endif
