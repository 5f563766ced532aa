/* Reading a box of one sample from an HDF5 file: a hyperslab of the input
 * dataset (only the box's elements are asked of HDF5, which converts them
 * to float), transposed from channels-last when the file is.  Each
 * reading thread keeps its last file open (h5_cache, in its scratch). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "dataset.h"
#include "hdf5_source.h"

struct h5_cache {
    int file;           /* index in the h5_source, -1 none */
    hid_t fid, did;
    void *bounce;       /* elements in the file's type, before conversion */
    size_t bounce_cap;  /* bytes */
};

int h5_elem_of(hid_t type, char *what, size_t what_size)
{
    const H5T_class_t cls = H5Tget_class(type);
    const size_t size = H5Tget_size(type);
    if (cls == H5T_INTEGER) {
        const int sign = H5Tget_sign(type) == H5T_SGN_2;
        if (sign && size == 1) return DATA_I8;
        if (sign && size == 2) return DATA_I16;
        if (sign && size == 4) return DATA_I32;
        if (!sign && size == 1) return DATA_U8;
        if (!sign && size == 2) return DATA_U16;
        snprintf(what, what_size, "%sint%zu", sign ? "" : "u", size * 8);
        return -1;
    }
    if (cls == H5T_FLOAT) {
        if (size == 2) return DATA_F16;
        if (size == 4) return DATA_F32;
        if (size == 8) return DATA_F64;
        snprintf(what, what_size, "float%zu", size * 8);
        return -1;
    }
    static const char *const names[] = {"integer", "float", "time", "string", "bitfield",
                                        "opaque", "compound", "reference", "enum",
                                        "variable-length", "array"};
    snprintf(what, what_size, "an HDF5 %s type",
             cls >= 0 && cls < (int)(sizeof names / sizeof *names) ? names[cls] : "unknown");
    return -1;
}

static void close_file(h5_cache *c)
{
    if (c->did >= 0) H5Dclose(c->did);
    if (c->fid >= 0) H5Fclose(c->fid);
    c->did = c->fid = -1;
    c->file = -1;
}

void h5_cache_free(h5_cache *c)
{
    if (!c) return;
    h5_session s;
    h5_enter(&s);
    close_file(c);
    h5_leave(&s);
    mem_free(c->bounce);
    mem_free(c);
}

void h5_source_free(h5_source *h)
{
    if (!h) return;
    if (h->paths)
        for (int i = 0; i < h->files; i++) mem_free(h->paths[i]);
    mem_free(h->paths);
    mem_free(h->first);
    mem_free(h->inputs);
    mem_free(h);
}

/* Report into msg when given (the helper thread), else as the thread's
 * error (as volume.c). */
static pcnn_status PCNN_PRINTF(4, 5)
    report(char *msg, size_t msg_size, pcnn_status status, const char *fmt, ...)
{
    char buf[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (msg) {
        snprintf(msg, msg_size, "%s", buf);
        return status;
    }
    return FAIL(status, "%s", buf);
}

/* The file holding sample k (binary search of first[]). */
static int file_of(const h5_source *h, int k)
{
    int lo = 0, hi = h->files - 1;
    while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (h->first[mid] <= k) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* Open file f's input dataset into the cache, checking it is still what it
 * was at open (a file replaced since). */
static pcnn_status open_file(const volume_source *v, h5_cache *c, int f, char *msg,
                             size_t msg_size)
{
    const h5_source *h = v->h5;
    const char *path = h->paths[f];
    char why[256], what[64];
    close_file(c);
    if (!h5_regular_file(path, why, sizeof why))
        return report(msg, msg_size, PCNN_ERR_IO, "cannot open %s: %s", path, why);
    const hid_t fapl = h5_fapl(&v->io->data_bytes, &v->io->meta_bytes);
    c->fid = fapl < 0 ? -1 : H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (c->fid < 0) h5_error_text(why, sizeof why); /* before the next call clears it */
    if (fapl >= 0) H5Pclose(fapl);
    if (c->fid < 0)
        return report(msg, msg_size, PCNN_ERR_CORRUPT, "cannot open %s as an HDF5 file%s",
                      path, why);
    c->did = H5Dopen2(c->fid, h->inputs, H5P_DEFAULT);
    if (c->did < 0) {
        report(msg, msg_size, PCNN_ERR_CORRUPT, "%s: no dataset '%s' any more%s", path,
               h->inputs, h5_error_text(why, sizeof why));
        close_file(c);
        return PCNN_ERR_CORRUPT;
    }
    const hid_t type = H5Dget_type(c->did), space = H5Dget_space(c->did);
    hsize_t dims[8];
    const int rank = space < 0 ? -1 : H5Sget_simple_extent_ndims(space);
    int same = type >= 0 && h5_elem_of(type, what, sizeof what) == h->elem && rank == h->rank &&
               rank <= 8 && H5Sget_simple_extent_dims(space, dims, NULL) == rank;
    const int lead = h->has_n;
    if (same && lead) same = dims[0] == (hsize_t)(h->first[f + 1] - h->first[f]);
    for (int k = 0; same && k < rank - lead; k++) same = dims[lead + k] == h->sample_dims[k];
    if (type >= 0) H5Tclose(type);
    if (space >= 0) H5Sclose(space);
    H5Eclear2(H5E_DEFAULT);
    if (!same) {
        close_file(c);
        return report(msg, msg_size, PCNN_ERR_CORRUPT, "%s: dataset '%s' changed since the "
                      "dataset was opened (shape or element type)", path, h->inputs);
    }
    c->file = f;
    return PCNN_OK;
}

/* The native type HDF5 reads an element type as, without converting
 * its class (only the byte order); float16 has none: HDF5 converts it. */
static hid_t native_type(int elem, size_t *size)
{
    switch (elem) {
    case DATA_I8: *size = 1; return H5T_NATIVE_SCHAR;
    case DATA_U8: *size = 1; return H5T_NATIVE_UCHAR;
    case DATA_I16: *size = 2; return H5T_NATIVE_SHORT;
    case DATA_U16: *size = 2; return H5T_NATIVE_USHORT;
    case DATA_I32: *size = 4; return H5T_NATIVE_INT;
    case DATA_F64: *size = 8; return H5T_NATIVE_DOUBLE;
    default: *size = 4; return H5T_NATIVE_FLOAT; /* float32, float16 */
    }
}

/* Convert n elements to float (a C cast), from channels-last
 * (.., D, H, W, C) to channels-first (C, D, H, W) when c > 1: one pass. */
#define CONVERT(T)                                                                          \
    do {                                                                                    \
        const T *p = src;                                                                   \
        if (c == 1)                                                                         \
            for (size_t i = 0; i < n; i++) dst[i] = (float)p[i];                            \
        else                                                                                \
            for (size_t i = 0; i < plane; i++)                                              \
                for (int k = 0; k < c; k++)                                                 \
                    dst[(size_t)k * plane + i] = (float)p[i * (size_t)c + (size_t)k];       \
    } while (0)

static void convert(int elem, const void *src, size_t n, int c, float *dst)
{
    const size_t plane = n / (size_t)c;
    switch (elem) {
    case DATA_I8: CONVERT(signed char); break;
    case DATA_U8: CONVERT(unsigned char); break;
    case DATA_I16: CONVERT(short); break;
    case DATA_U16: CONVERT(unsigned short); break;
    case DATA_I32: CONVERT(int); break;
    case DATA_F64: CONVERT(double); break;
    default: CONVERT(float); break;
    }
}

static pcnn_status read_locked(const volume_source *v, h5_cache *c, int sample,
                               const volume_box *box, float *x, char *msg, size_t msg_size)
{
    const h5_source *h = v->h5;
    const int f = file_of(h, sample);
    if (c->file != f) TRY(open_file(v, c, f, msg, msg_size));
    const int index = sample - h->first[f];

    /* The hyperslab, in file order: [n,] (C, [D,] H, W) or ([D,] H, W, C). */
    hsize_t start[6], count[6];
    int r = 0;
    if (h->has_n) start[r] = (hsize_t)index, count[r++] = 1;
    if (!h->channels_last) start[r] = 0, count[r++] = (hsize_t)v->c;
    if (h->spatial == 3) start[r] = (hsize_t)box->start[0], count[r++] = (hsize_t)box->count[0];
    for (int k = 1; k < 3; k++) start[r] = (hsize_t)box->start[k], count[r++] = (hsize_t)box->count[k];
    if (h->channels_last) start[r] = 0, count[r++] = (hsize_t)v->c;

    /* HDF5 reads the file's elements in their own (native) type and we
     * convert them, transposing channels-last boxes in the same pass:
     * HDF5's conversion path costs more than the read.  float32 in
     * channels-first order goes straight into x. */
    const size_t floats = volume_box_floats(v->c, box);
    size_t esize;
    const hid_t mtype = native_type(h->elem, &esize);
    const int direct = esize == 4 && mtype == H5T_NATIVE_FLOAT && (!h->channels_last || v->c == 1);
    void *dst = x;
    if (!direct) {
        if (c->bounce_cap < floats * esize) {
            void *b = mem_realloc(c->bounce, floats * esize);
            if (!b)
                return report(msg, msg_size, PCNN_ERR_OUT_OF_MEMORY, "cannot allocate %zu "
                              "bytes to convert a box of %s", floats * esize, h->paths[f]);
            c->bounce = b;
            c->bounce_cap = floats * esize;
        }
        dst = c->bounce;
    }
    /* The memory space has the selection's shape: HDF5 then copies runs
     * (a flat one sends it down its element-by-element path: 30x slower). */
    const hid_t fspace = H5Dget_space(c->did), mspace = H5Screate_simple(r, count, NULL);
    herr_t err = fspace < 0 || mspace < 0 ? -1 : 0;
    if (!err) err = H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL);
    if (err >= 0) err = H5Dread(c->did, mtype, mspace, fspace, H5P_DEFAULT, dst);
    char why[256] = "";
    if (err < 0) h5_error_text(why, sizeof why);
    if (fspace >= 0) H5Sclose(fspace);
    if (mspace >= 0) H5Sclose(mspace);
    if (err < 0) {
        close_file(c); /* reopened (and checked) by the next read */
        return report(msg, msg_size, PCNN_ERR_CORRUPT, "%s: reading sample %d of dataset "
                      "'%s' failed%s", h->paths[f], index, h->inputs, why);
    }
    if (!direct) convert(h->elem, dst, floats, h->channels_last ? v->c : 1, x);
    return PCNN_OK;
}

pcnn_status h5_read_box(const volume_source *v, volume_scratch *s, int sample,
                        const volume_box *box, float *x, char *msg, size_t msg_size)
{
    h5_cache **slot = volume_scratch_h5(s);
    if (!*slot) {
        h5_cache *c = mem_calloc(1, sizeof *c);
        if (!c)
            return report(msg, msg_size, PCNN_ERR_OUT_OF_MEMORY, "cannot allocate an HDF5 "
                          "reader");
        c->file = -1;
        c->fid = c->did = -1;
        *slot = c;
    }
    h5_session session;
    h5_enter(&session);
    const pcnn_status st = read_locked(v, *slot, sample, box, x, msg, msg_size);
    h5_leave(&session);
    return st;
}
