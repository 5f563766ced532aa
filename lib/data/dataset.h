/* Internal view of pcnn_dataset and the IDX reader behind
 * pcnn_dataset_load_idx.  The network trains and evaluates straight from a
 * dataset through dataset_copy_batch / dataset_sample_x, without copying the
 * whole dataset again. */
#ifndef PCNN_DATA_DATASET_H
#define PCNN_DATA_DATASET_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "pcnn.h"

/* Element types of the files behind a dataset (in memory: float32). */
typedef enum data_elem {
    DATA_F32 = 0, DATA_F64, DATA_F16, DATA_I8, DATA_I16, DATA_I32, DATA_U8, DATA_U16
} data_elem;

/* "float32", "int16", ... ("unknown" outside the enum). */
const char *data_elem_name(int elem);

struct pcnn_dataset {
    int n, c, d, h, w;      /* n samples of (c, d, h, w); d == 1 for images */
    size_t sample_floats;   /* c * d * h * w */
    float *x;               /* n * sample_floats, NCDHW, in storage order */
    int32_t *labels;        /* n class labels >= 0, or NULL */
    float *targets;         /* n * target_count floats, or NULL */
    int target_count;       /* 0 with labels */
    int num_classes;        /* max label + 1; 0 without labels */
    int *order;             /* n storage indices: position k holds sample order[k] */
    struct volume_source *vol; /* file-backed volumes (volume.h; x is then NULL), or NULL */
    int elem;               /* data_elem of the files */
    int sharded;            /* pcnn_dataset_set_sharded: this rank's shard of the data */
};

/* Does a (c, d, h, w) sample of positive extents hold at most INT_MAX
 * floats?  Bounded step by step: the plain product of four ints can wrap
 * even a size_t. */
static inline int dataset_shape_fits(int c, int d, int h, int w)
{
    const size_t cd = (size_t)c * (size_t)d; /* < 2^62 */
    return cd <= (size_t)INT_MAX / (size_t)h && cd * (size_t)h <= (size_t)INT_MAX / (size_t)w;
}

/* A dataset of the given shape with zeroed x, labels (if with_labels) or
 * targets (if target_count > 0), and the identity order.  Sizes must be
 * positive; NULL on overflow or allocation failure (no message set). */
pcnn_dataset *dataset_alloc(int n, int c, int h, int w, int with_labels, int target_count);
/* The same for samples of (c, d, h, w). */
pcnn_dataset *dataset_alloc3d(int n, int c, int d, int h, int w, int with_labels,
                              int target_count);
/* Free everything; NULL is a no-op. */
void dataset_free(pcnn_dataset *d);
/* Compute num_classes once the labels are filled in. */
void dataset_finish(pcnn_dataset *d);

/* max label + 1 (0 for a regression dataset). */
int dataset_num_classes(const pcnn_dataset *d);

/* Sample at position k of the current order. */
static inline const float *dataset_sample_x(const pcnn_dataset *d, int k)
{
    return d->x + (size_t)d->order[k] * d->sample_floats;
}

/* Copy positions [start, start + count) of the current order: x as NCHW,
 * labels / targets when the dataset has them and the pointer is non-NULL.
 * No checks: the caller guarantees 0 <= start, count >= 0,
 * start + count <= n, and buffer sizes. */
void dataset_copy_batch(const pcnn_dataset *d, int start, int count, float *x,
                        int32_t *labels, float *targets);

struct volume_box;
/* Read positions [start, start + count) restricted to `box` (D, H, W
 * start/count; NULL: the whole sample) as dataset_copy_batch does, from
 * memory or, for file-backed volumes, from the files (volume.h).  No
 * argument checks (as dataset_copy_batch).  Errors (files only): IO,
 * CORRUPT, and those of the prefetch thread. */
pcnn_status dataset_read_batch(const pcnn_dataset *d, int start, int count,
                               const struct volume_box *box, float *x, int32_t *labels,
                               float *targets);

/* ---- IDX files (idx.c) ------------------------------------------------- */

/* Largest IDX payload accepted, in bytes.  Keeps every count within int;
 * files (after decompression) may add at most the 16-byte header.  Reading
 * and decompression stop at this size, and grow their buffers by doubling,
 * so memory stays proportional to the data actually present whatever the
 * header declares. */
#define IDX_MAX_DATA_BYTES ((size_t)INT32_MAX)
#define IDX_MAX_FILE_BYTES (IDX_MAX_DATA_BYTES + 16)
#define IDX_MAX_DIMS 3

/* An IDX array of unsigned bytes, pointing into the buffer it was parsed
 * from. */
typedef struct idx_array {
    int ndims;
    int dims[IDX_MAX_DIMS];
    size_t count;              /* product of dims */
    const unsigned char *data; /* count bytes */
} idx_array;

/* Validate an in-memory (decompressed) IDX file of unsigned bytes with
 * exactly `ndims` (1..3) dimensions, each >= 1, and exactly count data bytes
 * after the header.  `name` (a path) prefixes error messages.  Allocates
 * nothing; safe on any input.  Errors: CORRUPT, INVALID_ARGUMENT. */
pcnn_status idx_parse(const unsigned char *buf, size_t len, int ndims, const char *name,
                      idx_array *out);

/* Decompress a whole gzip file held in memory (one or more members, nothing
 * after them) into a new buffer (free with mem_free) of at most max_bytes.
 * Errors: CORRUPT (bad, truncated or trailing data, output over max_bytes),
 * OUT_OF_MEMORY. */
pcnn_status idx_gunzip(const unsigned char *in, size_t in_len, size_t max_bytes,
                       const char *name, unsigned char **out, size_t *out_len);

/* Read a whole file into a new buffer (free with mem_free), decompressed if
 * it starts with the gzip magic 0x1f 0x8b.  At most max_bytes are accepted
 * (raw and decompressed); more is CORRUPT.  Errors: IO (message names the
 * path and strerror), CORRUPT, OUT_OF_MEMORY. */
pcnn_status idx_read_file(const char *path, size_t max_bytes, unsigned char **buf,
                          size_t *len);

/* Parse an images file (n, h, w) and a labels file (n) held in memory and
 * build a (1, h, w) dataset, scaling pixels by 1/255 then, if std > 0,
 * normalising with (x - mean) / std.  Names prefix error messages.
 * Errors: INVALID_ARGUMENT (mean/std), CORRUPT, OUT_OF_MEMORY. */
pcnn_status idx_dataset_from_buffers(const unsigned char *images, size_t images_len,
                                     const char *images_name, const unsigned char *labels,
                                     size_t labels_len, const char *labels_name, float mean,
                                     float std, pcnn_dataset **out);

#endif
