/* IDX files (MNIST, Fashion-MNIST), plain or gzip-compressed.  Files come
 * from outside, so every size is checked before it is trusted: buffers grow
 * by doubling up to a hard cap while reading or inflating, and the parser
 * works on the bytes in memory without allocating. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* open, read, fstat, strerror_r */
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#define ZLIB_CONST /* next_in points to const input */
#include <zlib.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "dataset.h"

/* Everything here serves pcnn_dataset_load_idx: report under its name. */
#define IDX_FAIL(status, ...) error_set((status), "pcnn_dataset_load_idx", __VA_ARGS__)

#define IDX_TYPE_UBYTE 0x08
#define CHUNK_BYTES ((size_t)1 << 30) /* per read/inflate call: fits ssize_t and uInt */

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

pcnn_status idx_parse(const unsigned char *buf, size_t len, int ndims, const char *name,
                      idx_array *out)
{
    if (!name) name = "(buffer)";
    const char *kind = ndims == 3 ? "images" : ndims == 1 ? "labels" : "IDX";
    if ((!buf && len) || !out || ndims < 1 || ndims > IDX_MAX_DIMS)
        return IDX_FAIL(PCNN_ERR_INVALID_ARGUMENT, "idx_parse: bad arguments for '%s'", name);
    if (len < 4)
        return IDX_FAIL(PCNN_ERR_CORRUPT, "%s '%s': %zu bytes, too short for an IDX header",
                        kind, name, len);
    uint32_t magic = be32(buf);
    uint32_t want = (uint32_t)IDX_TYPE_UBYTE << 8 | (uint32_t)ndims;
    if (buf[0] != 0 || buf[1] != 0)
        return IDX_FAIL(PCNN_ERR_CORRUPT,
                        "%s '%s': bad magic 0x%08x, not an IDX file (expected 0x%08x)", kind,
                        name, (unsigned)magic, (unsigned)want);
    if (buf[2] != IDX_TYPE_UBYTE)
        return IDX_FAIL(PCNN_ERR_CORRUPT,
                        "%s '%s': bad magic 0x%08x: element type 0x%02x is not unsigned byte "
                        "(expected 0x%08x)", kind, name, (unsigned)magic, buf[2], (unsigned)want);
    if (buf[3] != ndims)
        return IDX_FAIL(PCNN_ERR_CORRUPT,
                        "%s '%s': bad magic 0x%08x: %d dimensions, expected %d (0x%08x)", kind,
                        name, (unsigned)magic, buf[3], ndims, (unsigned)want);
    size_t header = 4 + 4 * (size_t)ndims;
    if (len < header)
        return IDX_FAIL(PCNN_ERR_CORRUPT, "%s '%s': truncated header: %zu bytes, need %zu",
                        kind, name, len, header);

    idx_array a = {.ndims = ndims};
    uint64_t count = 1;
    for (int d = 0; d < ndims; d++) {
        uint32_t dim = be32(buf + 4 + 4 * d);
        if (dim == 0)
            return IDX_FAIL(PCNN_ERR_CORRUPT, "%s '%s': dimension %d is 0", kind, name, d);
        /* count <= IDX_MAX_DATA_BYTES < 2^31 and dim < 2^32: no overflow. */
        count *= dim;
        if (count > IDX_MAX_DATA_BYTES)
            return IDX_FAIL(PCNN_ERR_CORRUPT,
                            "%s '%s': declared size exceeds the limit of %zu bytes "
                            "(dimension %d is %u)", kind, name, IDX_MAX_DATA_BYTES, d,
                            (unsigned)dim);
        a.dims[d] = (int)dim;
    }
    size_t need = header + (size_t)count;
    if (len < need)
        return IDX_FAIL(PCNN_ERR_CORRUPT, "%s '%s': truncated: %zu data bytes, header declares %zu",
                        kind, name, len - header, (size_t)count);
    if (len > need)
        return IDX_FAIL(PCNN_ERR_CORRUPT, "%s '%s': %zu bytes of trailing garbage after the data",
                        kind, name, len - need);
    a.count = (size_t)count;
    a.data = buf + header;
    *out = a;
    return PCNN_OK;
}

/* Grow *buf to hold more than *cap bytes, doubling, never beyond limit. */
static int grow(unsigned char **buf, size_t *cap, size_t limit)
{
    size_t next = *cap > limit / 2 ? limit : *cap * 2;
    if (next <= *cap) return 0;
    unsigned char *p = mem_realloc(*buf, next);
    if (!p) return 0;
    *buf = p;
    *cap = next;
    return 1;
}

pcnn_status idx_gunzip(const unsigned char *in, size_t in_len, size_t max_bytes,
                       const char *name, unsigned char **out, size_t *out_len)
{
    if (!name) name = "(buffer)";
    if ((!in && in_len) || !out || !out_len || max_bytes > SIZE_MAX - 1)
        return IDX_FAIL(PCNN_ERR_INVALID_ARGUMENT, "idx_gunzip: bad arguments for '%s'", name);
    /* One byte of slack past max_bytes tells "exactly at the cap" from "over". */
    size_t limit = max_bytes + 1;
    size_t cap = in_len < limit / 4 ? (in_len * 4 > 4096 ? in_len * 4 : 4096) : limit;
    if (cap > limit) cap = limit;
    unsigned char *buf = mem_realloc(NULL, cap);
    if (!buf)
        return IDX_FAIL(PCNN_ERR_OUT_OF_MEMORY, "'%s': cannot allocate %zu bytes to decompress",
                        name, cap);

    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) { /* 16: gzip wrapper only */
        mem_free(buf);
        return IDX_FAIL(PCNN_ERR_OUT_OF_MEMORY, "'%s': cannot initialise zlib", name);
    }
    pcnn_status st = PCNN_OK;
    size_t have = 0, used = 0; /* bytes written to buf, bytes consumed from in */
    for (;;) {
        if (have == cap && !grow(&buf, &cap, limit)) {
            st = cap == limit
                     ? IDX_FAIL(PCNN_ERR_CORRUPT, "'%s': decompresses to more than %zu bytes",
                                name, max_bytes)
                     : IDX_FAIL(PCNN_ERR_OUT_OF_MEMORY,
                                "'%s': cannot grow the decompression buffer past %zu bytes",
                                name, cap);
            break;
        }
        size_t in_chunk = in_len - used < CHUNK_BYTES ? in_len - used : CHUNK_BYTES;
        size_t out_chunk = cap - have < CHUNK_BYTES ? cap - have : CHUNK_BYTES;
        zs.next_in = in + used;
        zs.avail_in = (uInt)in_chunk;
        zs.next_out = buf + have;
        zs.avail_out = (uInt)out_chunk;
        int ret = inflate(&zs, Z_NO_FLUSH);
        used += in_chunk - zs.avail_in;
        have += out_chunk - zs.avail_out;
        if (ret == Z_STREAM_END) {
            if (used == in_len) break;
            /* Concatenated members are valid gzip; anything else is not. */
            if (in_len - used >= 2 && in[used] == 0x1f && in[used + 1] == 0x8b) {
                inflateReset(&zs);
                continue;
            }
            st = IDX_FAIL(PCNN_ERR_CORRUPT,
                          "'%s': %zu bytes of trailing garbage after the gzip stream", name,
                          in_len - used);
            break;
        }
        if (ret == Z_OK) continue;
        if (ret == Z_BUF_ERROR && zs.avail_out == 0) continue; /* output full: grow */
        if (ret == Z_BUF_ERROR) {
            st = IDX_FAIL(PCNN_ERR_CORRUPT, "'%s': truncated gzip stream (%zu bytes decompressed)",
                          name, have);
        } else if (ret == Z_MEM_ERROR) {
            st = IDX_FAIL(PCNN_ERR_OUT_OF_MEMORY, "'%s': zlib out of memory", name);
        } else {
            st = IDX_FAIL(PCNN_ERR_CORRUPT, "'%s': bad gzip data: %s", name,
                          zs.msg ? zs.msg : "unknown zlib error");
        }
        break;
    }
    inflateEnd(&zs);
    if (st == PCNN_OK && have > max_bytes)
        st = IDX_FAIL(PCNN_ERR_CORRUPT, "'%s': decompresses to more than %zu bytes", name,
                      max_bytes);
    if (st != PCNN_OK) {
        mem_free(buf);
        return st;
    }
    *out = buf;
    *out_len = have;
    return PCNN_OK;
}

static const char *errno_text(int err, char *text, size_t size)
{
    if (strerror_r(err, text, size) != 0) snprintf(text, size, "error %d", err);
    return text;
}

/* Read all of fd (at most max_bytes) into a new buffer. */
static pcnn_status read_all(int fd, const char *path, size_t max_bytes, unsigned char **out,
                            size_t *out_len)
{
    char text[128];
    size_t limit = max_bytes + 1;
    size_t cap = 65536;
    struct stat sb;
    /* A regular file's size is a good first guess (+1 to see EOF at once). */
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size >= 0 &&
        (uint64_t)sb.st_size < (uint64_t)limit)
        cap = (size_t)sb.st_size + 1 > 4096 ? (size_t)sb.st_size + 1 : 4096;
    if (cap > limit) cap = limit;
    unsigned char *buf = mem_realloc(NULL, cap);
    if (!buf)
        return IDX_FAIL(PCNN_ERR_OUT_OF_MEMORY, "'%s': cannot allocate %zu bytes", path, cap);
    size_t have = 0;
    for (;;) {
        if (have == cap && !grow(&buf, &cap, limit)) {
            mem_free(buf);
            if (cap == limit)
                return IDX_FAIL(PCNN_ERR_CORRUPT, "'%s': larger than the limit of %zu bytes",
                                path, max_bytes);
            return IDX_FAIL(PCNN_ERR_OUT_OF_MEMORY,
                            "'%s': cannot grow the read buffer past %zu bytes", path, cap);
        }
        size_t want = cap - have < CHUNK_BYTES ? cap - have : CHUNK_BYTES;
        ssize_t got = read(fd, buf + have, want);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int err = errno;
            mem_free(buf);
            return IDX_FAIL(PCNN_ERR_IO, "cannot read '%s': %s", path,
                            errno_text(err, text, sizeof text));
        }
        if (got == 0) break;
        have += (size_t)got;
    }
    *out = buf;
    *out_len = have;
    return PCNN_OK;
}

pcnn_status idx_read_file(const char *path, size_t max_bytes, unsigned char **buf, size_t *len)
{
    char text[128];
    if (!path || !buf || !len || max_bytes > SIZE_MAX - 1)
        return IDX_FAIL(PCNN_ERR_INVALID_ARGUMENT, "idx_read_file: bad arguments");
    int fd;
    /* O_NONBLOCK: opening a FIFO for reading would wait for a writer. */
    do fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        int err = errno;
        return IDX_FAIL(PCNN_ERR_IO, "cannot open '%s': %s", path,
                        errno_text(err, text, sizeof text));
    }
    struct stat sb;
    const int flags = fcntl(fd, F_GETFL);
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || flags < 0 ||
        fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        close(fd);
        return IDX_FAIL(PCNN_ERR_IO, "'%s' is not a regular file (a directory, FIFO or device)",
                        path);
    }
    unsigned char *raw = NULL;
    size_t raw_len = 0;
    pcnn_status st = read_all(fd, path, max_bytes, &raw, &raw_len);
    close(fd);
    if (st != PCNN_OK) return st;
    if (raw_len >= 2 && raw[0] == 0x1f && raw[1] == 0x8b) {
        unsigned char *plain = NULL;
        size_t plain_len = 0;
        st = idx_gunzip(raw, raw_len, max_bytes, path, &plain, &plain_len);
        mem_free(raw);
        if (st != PCNN_OK) return st;
        raw = plain;
        raw_len = plain_len;
    }
    *buf = raw;
    *len = raw_len;
    return PCNN_OK;
}

static pcnn_status check_normalisation(float mean, float std)
{
    if (!isfinite(mean))
        return IDX_FAIL(PCNN_ERR_INVALID_ARGUMENT, "mean %g is not finite", (double)mean);
    if (!isfinite(std) || std < 0)
        return IDX_FAIL(PCNN_ERR_INVALID_ARGUMENT,
                        "std %g must be finite and >= 0 (0: no normalisation)", (double)std);
    return PCNN_OK;
}

pcnn_status idx_dataset_from_buffers(const unsigned char *images, size_t images_len,
                                     const char *images_name, const unsigned char *labels,
                                     size_t labels_len, const char *labels_name, float mean,
                                     float std, pcnn_dataset **out)
{
    if (!out)
        return IDX_FAIL(PCNN_ERR_INVALID_ARGUMENT, "idx_dataset_from_buffers: out is NULL");
    TRY(check_normalisation(mean, std));
    idx_array im = {.ndims = 0}, lb = {.ndims = 0}; /* set by idx_parse on success */
    TRY(idx_parse(images, images_len, 3, images_name, &im));
    TRY(idx_parse(labels, labels_len, 1, labels_name, &lb));
    if (im.dims[0] != lb.dims[0])
        return IDX_FAIL(PCNN_ERR_CORRUPT, "count mismatch: '%s' holds %d images, '%s' %d labels",
                        images_name ? images_name : "(buffer)", im.dims[0],
                        labels_name ? labels_name : "(buffer)", lb.dims[0]);
    const int n = im.dims[0], h = im.dims[1], w = im.dims[2];
    pcnn_dataset *d = dataset_alloc(n, 1, h, w, 1, 0);
    if (!d)
        return IDX_FAIL(PCNN_ERR_OUT_OF_MEMORY, "cannot allocate %d images of %dx%d floats", n,
                        h, w);
    /* 256 possible pixels: a table computed with the same float operations
     * as torchvision's ToTensor + Normalize gives bitwise-equal inputs. */
    float table[256];
    for (int v = 0; v < 256; v++) {
        float x = (float)v / 255.0f;
        table[v] = std > 0 ? (x - mean) / std : x;
    }
    const unsigned char *px = im.data;
    float *x = d->x;
    for (size_t i = 0; i < im.count; i++) x[i] = table[px[i]];
    for (int i = 0; i < n; i++) d->labels[i] = lb.data[i];
    dataset_finish(d);
    *out = d;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_dataset_load_idx(const char *images_path, const char *labels_path,
                                           float mean, float std, pcnn_dataset **out)
{
    API_ENTRY();
    REQUIRE_PTR(images_path);
    REQUIRE_PTR(labels_path);
    REQUIRE_PTR(out);
    TRY(check_normalisation(mean, std));
    unsigned char *images = NULL, *labels = NULL;
    size_t images_len = 0, labels_len = 0;
    pcnn_status st = idx_read_file(images_path, IDX_MAX_FILE_BYTES, &images, &images_len);
    if (st == PCNN_OK)
        st = idx_read_file(labels_path, IDX_MAX_FILE_BYTES, &labels, &labels_len);
    if (st == PCNN_OK)
        st = idx_dataset_from_buffers(images, images_len, images_path, labels, labels_len,
                                      labels_path, mean, std, out);
    mem_free(images);
    mem_free(labels);
    return st;
}
