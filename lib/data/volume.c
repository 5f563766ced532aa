/* File-backed volumes: opening a manifest (headers only), box reads by
 * pread of maximal contiguous runs with float64 -> float32 conversion, and
 * the public calls pcnn_dataset_open_volumes, pcnn_dataset_batch_box and
 * pcnn_dataset_set_prefetch. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "dataset.h"
#include "volume.h"

/* A manifest larger than this is refused (a line per sample: plenty). */
#define MANIFEST_MAX_BYTES ((size_t)1 << 30)
/* Bytes read from the start of a .npy file to find its header (into the
 * scratch's bounce buffer). */
#define NPY_HEADER_READ ((size_t)65536)

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define HOST_BIG_ENDIAN 1
#else
#define HOST_BIG_ENDIAN 0
#endif

/* strerror is not thread-safe (the helper thread reports too). */
static const char *errno_text(int err, char *text, size_t size)
{
    if (strerror_r(err, text, size) != 0) snprintf(text, size, "error %d", err);
    return text;
}

/* Report into msg when given (the helper thread), else as the thread's
 * error. */
static pcnn_status PCNN_PRINTF(4, 5)
    report(char *msg, size_t msg_size, pcnn_status status, const char *fmt, ...)
{
    char buf[512];
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

/* pread exactly len bytes at off, or report: IO on a failed read, CORRUPT
 * when the file ends first. */
static pcnn_status read_exact(int fd, const char *path, void *dst, size_t len, uint64_t off,
                              char *msg, size_t msg_size)
{
    unsigned char *p = dst;
    size_t done = 0;
    char text[128];
    while (done < len) {
        size_t want = len - done < ((size_t)1 << 30) ? len - done : ((size_t)1 << 30);
        ssize_t got = pread(fd, p + done, want, (off_t)(off + done));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0)
            return report(msg, msg_size, PCNN_ERR_IO, "%s: read of %zu bytes at offset %llu "
                          "failed: %s", path, want, (unsigned long long)(off + done),
                          errno_text(errno, text, sizeof text));
        if (got == 0)
            return report(msg, msg_size, PCNN_ERR_CORRUPT, "%s: the file ends at offset %llu, "
                          "before the %zu bytes expected from offset %llu", path,
                          (unsigned long long)(off + done), len, (unsigned long long)off);
        done += (size_t)got;
    }
    return PCNN_OK;
}

static void swap_bytes(unsigned char *p, size_t count, size_t elem)
{
    for (size_t i = 0; i < count; i++, p += elem)
        for (size_t a = 0, b = elem - 1; a < b; a++, b--) {
            unsigned char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

/* Runs of the box separated by small gaps (a box narrower than W: one
 * run per row) are read as one span into a bounce buffer, then copied out:
 * a few bytes more, far fewer system calls. */
#define GAP_MAX_BYTES 4096
#define BOUNCE_BYTES ((size_t)128 << 10)
#define MAX_PIECES 1024

/* Runs waiting to be read: one (any length, read straight into x) or
 * several within BOUNCE_BYTES (through the bounce buffer). */
typedef struct pending {
    uint64_t start, end;   /* file bytes [start, end) */
    int count;
    struct piece {
        uint64_t off;      /* in the file */
        size_t floats, placed; /* values, first destination index */
    } pieces[MAX_PIECES];
} pending;

/* A reading thread's buffers (volume.h): the pending runs and the bounce
 * buffer, which also holds float64 values being converted (a single run is
 * read with nothing else in it) and a .npy header at open. */
struct volume_scratch {
    pending runs;
    h5_cache *h5; /* the thread's open HDF5 file, or NULL */
    double bounce[BOUNCE_BYTES / sizeof(double)];
};
_Static_assert(NPY_HEADER_READ <= BOUNCE_BYTES, "a .npy header fits the bounce buffer");

volume_scratch *volume_scratch_new(void)
{
    volume_scratch *s = mem_alloc(sizeof(volume_scratch));
    if (s) s->h5 = NULL;
    return s;
}

void volume_scratch_free(volume_scratch *s)
{
    if (s) h5_cache_free(s->h5);
    mem_free(s);
}

h5_cache **volume_scratch_h5(volume_scratch *s) { return &s->h5; }

/* Read `floats` consecutive values of the file from byte `off` into dst
 * (float64 through the bounce buffer). */
static pcnn_status read_run(const volume_source *v, volume_scratch *s, int fd, const char *path,
                            uint64_t off, size_t floats, float *dst, char *msg, size_t msg_size)
{
    v->io->data_bytes += (uint64_t)floats * v->elem;
    if (v->dtype == PCNN_DTYPE_F32) {
        TRY(read_exact(fd, path, dst, floats * 4, off, msg, msg_size));
        if (HOST_BIG_ENDIAN) swap_bytes((unsigned char *)dst, floats, 4);
        return PCNN_OK;
    }
    const size_t chunk = sizeof s->bounce / sizeof *s->bounce;
    double *buf = s->bounce;
    for (size_t done = 0; done < floats; done += chunk) {
        size_t k = floats - done < chunk ? floats - done : chunk;
        TRY(read_exact(fd, path, buf, k * 8, off + done * 8, msg, msg_size));
        if (HOST_BIG_ENDIAN) swap_bytes((unsigned char *)buf, k, 8);
        for (size_t i = 0; i < k; i++) dst[done + i] = (float)buf[i];
    }
    return PCNN_OK;
}

static void convert(const volume_source *v, const unsigned char *src, size_t floats, float *dst)
{
    if (v->dtype == PCNN_DTYPE_F32) {
        memcpy(dst, src, floats * 4);
        if (HOST_BIG_ENDIAN) swap_bytes((unsigned char *)dst, floats, 4);
        return;
    }
    for (size_t i = 0; i < floats; i++) {
        double d;
        memcpy(&d, src + i * 8, 8);
        if (HOST_BIG_ENDIAN) swap_bytes((unsigned char *)&d, 1, 8);
        dst[i] = (float)d;
    }
}

static pcnn_status flush(const volume_source *v, volume_scratch *s, int fd, const char *path,
                         float *x, char *msg, size_t msg_size)
{
    pending *p = &s->runs;
    if (p->count == 0) return PCNN_OK;
    const int count = p->count;
    p->count = 0;
    if (count == 1)
        return read_run(v, s, fd, path, p->pieces[0].off, p->pieces[0].floats,
                        x + p->pieces[0].placed, msg, msg_size);
    const unsigned char *bounce = (const unsigned char *)s->bounce;
    v->io->data_bytes += p->end - p->start;
    TRY(read_exact(fd, path, s->bounce, (size_t)(p->end - p->start), p->start, msg, msg_size));
    for (int i = 0; i < count; i++)
        convert(v, bounce + (p->pieces[i].off - p->start), p->pieces[i].floats,
                x + p->pieces[i].placed);
    return PCNN_OK;
}

/* Queue the run of `floats` values at file byte off, destined for
 * x[placed...]: joined to the pending runs when adjacent or close,
 * otherwise after reading those. */
static pcnn_status add_run(const volume_source *v, volume_scratch *s, int fd, const char *path,
                           uint64_t off, size_t floats, size_t placed, float *x, char *msg,
                           size_t msg_size)
{
    pending *p = &s->runs;
    const uint64_t bytes = (uint64_t)floats * v->elem, end = off + bytes;
    if (p->count > 0 && off == p->end && (p->count == 1 || end - p->start <= BOUNCE_BYTES)) {
        p->pieces[p->count - 1].floats += floats; /* contiguous in the file and in x */
        p->end = end;
        return PCNN_OK;
    }
    if (p->count > 0 && p->count < MAX_PIECES && off > p->end &&
        off - p->end <= GAP_MAX_BYTES && end - p->start <= BOUNCE_BYTES) {
        p->pieces[p->count++] = (struct piece){off, floats, placed};
        p->end = end;
        return PCNN_OK;
    }
    TRY(flush(v, s, fd, path, x, msg, msg_size));
    p->pieces[0] = (struct piece){off, floats, placed};
    p->count = 1;
    p->start = off;
    p->end = end;
    return PCNN_OK;
}

/* Open a regular file for reading, or return -1 with the reason in why.
 * O_NONBLOCK: opening a FIFO would wait for a writer (on the helper
 * thread, forever, with the caller waiting on it); a device such as
 * /dev/zero would be read until a size check.  sb (optional) receives
 * its status. */
static int open_regular(const char *path, struct stat *sb, char *why, size_t why_size)
{
    int fd;
    do fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        errno_text(errno, why, why_size);
        return -1;
    }
    struct stat st;
    if (!sb) sb = &st;
    const int flags = fcntl(fd, F_GETFL);
    if (fstat(fd, sb) != 0 || !S_ISREG(sb->st_mode) || flags < 0 ||
        fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        close(fd);
        snprintf(why, why_size, "not a regular file (a directory, FIFO or device)");
        return -1;
    }
    return fd;
}

/* Tell the kernel every span the box will read, plane by plane, before the
 * first read: a box jumps between separate parts of the file, which stops
 * the kernel's sequential read-ahead, so a cold box read would otherwise
 * wait on each part in turn (half a volume read slower than all of it). */
static void advise_box(const volume_source *v, int fd, uint64_t base, const volume_box *box)
{
    /* The pending span, merged across gaps within a page or so. */
    const uint64_t gap = GAP_MAX_BYTES;
    uint64_t lo = 0, hi = 0;
    for (int c = 0; c < v->c; c++)
        for (int z = 0; z < box->count[0]; z++) {
            const uint64_t plane = (uint64_t)c * (uint64_t)v->d + (uint64_t)(box->start[0] + z);
            const uint64_t first = (plane * (uint64_t)v->h + (uint64_t)box->start[1]) *
                                       (uint64_t)v->w + (uint64_t)box->start[2];
            const uint64_t last = first + (uint64_t)(box->count[1] - 1) * (uint64_t)v->w +
                                  (uint64_t)box->count[2];
            const uint64_t a = base + first * v->elem, b = base + last * v->elem;
            if (hi > lo && a <= hi + gap) {
                hi = b;
                continue;
            }
            if (hi > lo) (void)posix_fadvise(fd, (off_t)lo, (off_t)(hi - lo), POSIX_FADV_WILLNEED);
            lo = a, hi = b;
        }
    if (hi > lo) (void)posix_fadvise(fd, (off_t)lo, (off_t)(hi - lo), POSIX_FADV_WILLNEED);
}

static pcnn_status read_box_raw(const volume_source *v, volume_scratch *s, int file,
                                const volume_box *box, float *x, char *msg, size_t msg_size)
{
    const char *path = v->files[file].path;
    char why[128];
    const int fd = open_regular(path, NULL, why, sizeof why);
    if (fd < 0) return report(msg, msg_size, PCNN_ERR_IO, "cannot open %s: %s", path, why);

    /* Rows of the box in destination order: x is filled front to back. */
    const uint64_t base = v->files[file].offset, elem = v->elem;
    const int bd = box->count[0], bh = box->count[1], bw = box->count[2];
    advise_box(v, fd, base, box);
    s->runs.count = 0;
    size_t placed = 0;
    pcnn_status st = PCNN_OK;
    for (int c = 0; c < v->c && st == PCNN_OK; c++)
        for (int z = 0; z < bd && st == PCNN_OK; z++)
            for (int y = 0; y < bh && st == PCNN_OK; y++, placed += (size_t)bw) {
                uint64_t index = (((uint64_t)c * (uint64_t)v->d + (uint64_t)(box->start[0] + z)) *
                                      (uint64_t)v->h + (uint64_t)(box->start[1] + y)) *
                                     (uint64_t)v->w + (uint64_t)box->start[2];
                st = add_run(v, s, fd, path, base + index * elem, (size_t)bw, placed, x, msg,
                             msg_size);
            }
    if (st == PCNN_OK) st = flush(v, s, fd, path, x, msg, msg_size);
    close(fd);
    return st;
}

pcnn_status volume_read_box(const volume_source *v, volume_scratch *s, int file,
                            const volume_box *box, float *x, char *msg, size_t msg_size)
{
    TRY(v->h5 ? h5_read_box(v, s, file, box, x, msg, msg_size)
              : read_box_raw(v, s, file, box, x, msg, msg_size));
    volume_apply_transform(v, box, 1, x);
    return PCNN_OK;
}

volume_source *volume_source_new(int count, int c, int d, int h, int w)
{
    volume_source *v = mem_calloc(1, sizeof *v);
    if (!v) return NULL;
    v->io = mem_calloc(1, sizeof *v->io);
    v->scratch = volume_scratch_new();
    if (!v->io || !v->scratch) {
        volume_source_free(v);
        return NULL;
    }
    v->count = count;
    v->c = c;
    v->d = d;
    v->h = h;
    v->w = w;
    return v;
}

void volume_source_free(volume_source *v)
{
    if (!v) return;
    volume_prefetch_free(v->prefetch);
    volume_scratch_free(v->scratch);
    if (v->files)
        for (int i = 0; i < v->count; i++) mem_free(v->files[i].path);
    mem_free(v->files);
    h5_source_free(v->h5);
    mem_free(v->io);
    mem_free(v->transform);
    mem_free(v);
}

/* Read a whole (small) text file into a new buffer. */
static pcnn_status read_text_file(const char *path, char **out, size_t *len)
{
    char why[128];
    const int fd = open_regular(path, NULL, why, sizeof why);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "rb");
    if (fd >= 0 && !f) {
        errno_text(errno, why, sizeof why);
        close(fd);
    }
    if (!f) return FAIL(PCNN_ERR_IO, "cannot open the manifest %s: %s", path, why);
    size_t cap = 4096, n = 0;
    char *buf = mem_alloc(cap);
    pcnn_status st = buf ? PCNN_OK : FAIL(PCNN_ERR_OUT_OF_MEMORY, "out of memory");
    while (st == PCNN_OK) {
        if (n == cap) {
            if (cap >= MANIFEST_MAX_BYTES) {
                st = FAIL(PCNN_ERR_CORRUPT, "the manifest %s is larger than %zu bytes", path,
                          MANIFEST_MAX_BYTES);
                break;
            }
            char *more = mem_realloc(buf, cap * 2);
            if (!more) {
                st = FAIL(PCNN_ERR_OUT_OF_MEMORY, "out of memory reading %s", path);
                break;
            }
            buf = more;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) st = FAIL(PCNN_ERR_IO, "cannot read the manifest %s", path);
            break;
        }
    }
    fclose(f);
    if (st != PCNN_OK) {
        mem_free(buf);
        return st;
    }
    *out = buf;
    *len = n;
    return PCNN_OK;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* Check one sample file's header and size; set its data offset. */
static pcnn_status check_file(volume_source *v, const char *manifest, int index,
                              volume_file *f)
{
    const uint64_t bytes = (uint64_t)v->c * (uint64_t)v->d * (uint64_t)v->h * (uint64_t)v->w *
                           (uint64_t)v->elem;
    struct stat sb;
    char why[128];
    const int fd = open_regular(f->path, &sb, why, sizeof why);
    if (fd < 0)
        return FAIL(PCNN_ERR_IO, "cannot open %s (sample %d of %s): %s", f->path, index,
                    manifest, why);
    const uint64_t size = (uint64_t)sb.st_size;
    pcnn_status st = PCNN_OK;
    f->offset = 0;
    if (ends_with(f->path, ".npy")) {
        const unsigned char *head = (const unsigned char *)v->scratch->bounce;
        size_t want = size < NPY_HEADER_READ ? (size_t)size : NPY_HEADER_READ;
        st = read_exact(fd, f->path, v->scratch->bounce, want, 0, NULL, 0);
        v->io->meta_bytes += want;
        npy_header h;
        if (st == PCNN_OK) st = npy_parse_header(head, want, f->path, &h);
        if (st == PCNN_OK && h.elem != (int)v->elem)
            st = FAIL(PCNN_ERR_INVALID_ARGUMENT, "%s holds float%d but the dataset was "
                      "opened as float%d", f->path, h.elem * 8, (int)v->elem * 8);
        if (st == PCNN_OK) {
            const int64_t want4[4] = {v->c, v->d, v->h, v->w};
            int ok = h.ndims == 4 || (h.ndims == 3 && v->c == 1);
            for (int k = 0; ok && k < h.ndims; k++)
                ok = h.dims[k] == want4[4 - h.ndims + k];
            if (!ok) {
                char got[128] = "(";
                for (int k = 0; k < h.ndims; k++)
                    snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld",
                             k ? ", " : "", (long long)h.dims[k]);
                snprintf(got + strlen(got), sizeof got - strlen(got), ")");
                st = FAIL(PCNN_ERR_SHAPE, "%s has shape %s but the dataset's samples are "
                          "(%d, %d, %d, %d) (channels, depth, height, width)", f->path, got,
                          v->c, v->d, v->h, v->w);
            }
        }
        if (st == PCNN_OK) f->offset = h.data_offset;
    }
    if (st == PCNN_OK && size != f->offset + bytes)
        st = FAIL(PCNN_ERR_CORRUPT, "%s has %llu bytes; %s%llu bytes of float%d data "
                  "(%d x %d x %d x %d) make %llu", f->path, (unsigned long long)size,
                  f->offset ? "its header and " : "", (unsigned long long)bytes,
                  (int)v->elem * 8, v->c, v->d, v->h, v->w,
                  (unsigned long long)(f->offset + bytes));
    close(fd);
    return st;
}

PCNN_API pcnn_status pcnn_dataset_open_volumes(const char *manifest, int channels, int depth,
                                               int height, int width, pcnn_dtype dtype,
                                               int target_count, pcnn_dataset **out)
{
    API_ENTRY();
    REQUIRE_PTR(out);
    REQUIRE_PTR(manifest);
    REQUIRE(channels >= 1 && depth >= 1 && height >= 1 && width >= 1,
            PCNN_ERR_INVALID_ARGUMENT, "sample shape (%d, %d, %d, %d) has a dimension < 1",
            channels, depth, height, width);
    REQUIRE(dataset_shape_fits(channels, depth, height, width),
            PCNN_ERR_INVALID_ARGUMENT, "sample shape (%d, %d, %d, %d) exceeds INT_MAX floats",
            channels, depth, height, width);
    REQUIRE(dtype == PCNN_DTYPE_F32 || dtype == PCNN_DTYPE_F64, PCNN_ERR_INVALID_ARGUMENT,
            "dtype %d is not PCNN_DTYPE_F32 or PCNN_DTYPE_F64", (int)dtype);
    REQUIRE(target_count >= 1, PCNN_ERR_INVALID_ARGUMENT, "target_count %d < 1", target_count);

    char *text = NULL;
    size_t len = 0;
    TRY(read_text_file(manifest, &text, &len));
    /* Paths are relative to the manifest's directory. */
    char *dir = NULL;
    const char *slash = strrchr(manifest, '/');
    if (slash) {
        size_t n = (size_t)(slash - manifest);
        dir = mem_alloc(n + 2);
        if (dir) {
            memcpy(dir, manifest, n);
            if (n == 0) dir[n++] = '/';
            dir[n] = '\0';
        }
    }
    manifest_entry *entries = NULL;
    int count = 0;
    pcnn_status st = slash && !dir ? FAIL(PCNN_ERR_OUT_OF_MEMORY, "out of memory") : PCNN_OK;
    if (st == PCNN_OK)
        st = manifest_parse(text, len, dir, manifest, target_count, &entries, &count);
    mem_free(text);
    mem_free(dir);
    TRY(st);

    pcnn_dataset *d = mem_calloc(1, sizeof *d);
    volume_source *v = volume_source_new(count, channels, depth, height, width);
    if (d) {
        d->order = mem_calloc((size_t)count, sizeof *d->order);
        d->targets = mem_alloc_floats((size_t)count * (size_t)target_count);
    }
    if (v) v->files = mem_calloc((size_t)count, sizeof *v->files);
    if (!d || !v || !d->order || !d->targets || !v->files) {
        manifest_free(entries, count);
        volume_source_free(v);
        dataset_free(d);
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "cannot allocate the index of %d samples", count);
    }
    v->dtype = dtype;
    v->elem = dtype == PCNN_DTYPE_F32 ? 4 : 8;
    d->n = count;
    d->c = channels;
    d->d = depth;
    d->h = height;
    d->w = width;
    d->sample_floats = (size_t)channels * (size_t)depth * (size_t)height * (size_t)width;
    d->target_count = target_count;
    d->vol = v;
    d->elem = dtype == PCNN_DTYPE_F64 ? DATA_F64 : DATA_F32;
    for (int i = 0; i < count; i++) {
        d->order[i] = i;
        v->files[i].path = entries[i].path; /* moved */
        entries[i].path = NULL;
        memcpy(d->targets + (size_t)i * (size_t)target_count, entries[i].targets,
               (size_t)target_count * sizeof(float));
    }
    manifest_free(entries, count);
    for (int i = 0; i < count && st == PCNN_OK; i++)
        st = check_file(v, manifest, i, &v->files[i]);
    if (st != PCNN_OK) {
        dataset_free(d);
        return st;
    }
    dataset_finish(d);
    *out = d;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_dataset_batch_box(const pcnn_dataset *data, int start, int count,
                                            const int *box_start, const int *box_count,
                                            float *x, int32_t *labels, float *targets)
{
    API_ENTRY();
    REQUIRE_PTR(data);
    REQUIRE_PTR(x);
    REQUIRE((box_start == NULL) == (box_count == NULL), PCNN_ERR_INVALID_ARGUMENT,
            "pass both box_start and box_count, or neither (the whole sample)");
    volume_box box = {{0, 0, 0}, {data->d, data->h, data->w}};
    if (box_start) {
        static const char *axis[3] = {"depth", "height", "width"};
        const int size[3] = {data->d, data->h, data->w};
        for (int k = 0; k < 3; k++) {
            REQUIRE(box_start[k] >= 0 && box_count[k] >= 1 &&
                        box_count[k] <= size[k] - box_start[k],
                    PCNN_ERR_INVALID_ARGUMENT, "the box's %s [%d, %d + %d) is not within "
                    "[0, %d) with count >= 1", axis[k], box_start[k], box_start[k],
                    box_count[k], size[k]);
            box.start[k] = box_start[k];
            box.count[k] = box_count[k];
        }
    }
    REQUIRE(start >= 0 && start < data->n, PCNN_ERR_INVALID_ARGUMENT,
            "start %d outside [0, %d)", start, data->n);
    REQUIRE(count >= 1 && count <= data->n - start, PCNN_ERR_INVALID_ARGUMENT,
            "count %d outside [1, %d] (start %d of %d samples)", count, data->n - start, start,
            data->n);
    REQUIRE(!labels || data->labels, PCNN_ERR_INVALID_ARGUMENT,
            "labels requested but the dataset holds regression targets");
    REQUIRE(!targets || data->targets, PCNN_ERR_INVALID_ARGUMENT,
            "targets requested but the dataset holds class labels");
    return dataset_read_batch(data, start, count, &box, x, labels, targets);
}

PCNN_API pcnn_status pcnn_dataset_set_prefetch(pcnn_dataset *data, int batches)
{
    API_ENTRY();
    REQUIRE_PTR(data);
    REQUIRE(batches >= 0 && batches <= 64, PCNN_ERR_INVALID_ARGUMENT,
            "batches %d outside [0, 64]", batches);
    if (!data->vol) return PCNN_OK; /* in memory: nothing to read ahead */
    return volume_prefetch_set(data->vol, batches);
}
