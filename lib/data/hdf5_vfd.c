/* A read-only POSIX file driver for HDF5 (what HDF5's sec2 driver does for
 * reading, plus two things sec2 cannot): it counts the bytes each read
 * asks for, raw data apart from metadata, for pcnn_dataset_io_bytes; and
 * it opens without blocking and refuses anything but a regular file, so a
 * FIFO is never waited on and a directory never read.  It offers no data
 * sieve: a hyperslab of a contiguous dataset reads exactly its runs. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/memory.h"
#include "hdf5_source.h"

typedef struct counters {
    _Atomic uint64_t *data, *meta;
} counters;

typedef struct ro_file {
    H5FD_t pub; /* first: HDF5 sees this */
    int fd;
    haddr_t eoa, eof;
    dev_t dev;
    ino_t ino;
    counters count;
} ro_file;

#define RO_MAXADDR ((haddr_t)INT64_MAX)

/* Report a failure on HDF5's stack (folded into our message later). */
#define RO_PUSH(minor, ...)                                                                     \
    H5Epush2(H5E_DEFAULT, __FILE__, __func__, __LINE__, H5E_ERR_CLS, H5E_VFL, (minor),          \
             __VA_ARGS__)

static int open_nonblocking(const char *path, struct stat *sb, char *why, size_t why_size)
{
    int fd;
    do fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        if (strerror_r(errno, why, why_size) != 0) snprintf(why, why_size, "error %d", errno);
        return -1;
    }
    const int flags = fcntl(fd, F_GETFL);
    if (fstat(fd, sb) != 0 || !S_ISREG(sb->st_mode) || flags < 0 ||
        fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        close(fd);
        snprintf(why, why_size, "not a regular file (a directory, FIFO or device)");
        return -1;
    }
    return fd;
}

int h5_regular_file(const char *path, char *why, size_t why_size)
{
    struct stat sb;
    const int fd = open_nonblocking(path, &sb, why, why_size);
    if (fd < 0) return 0;
    close(fd);
    return 1;
}

static H5FD_t *ro_open(const char *name, unsigned flags, hid_t fapl, haddr_t maxaddr)
{
    (void)maxaddr;
    if (flags & (H5F_ACC_RDWR | H5F_ACC_TRUNC | H5F_ACC_CREAT | H5F_ACC_EXCL)) {
        RO_PUSH(H5E_CANTOPENFILE, "the pcnn driver only reads");
        return NULL;
    }
    const counters *info = H5Pget_driver_info(fapl);
    struct stat sb;
    char why[128];
    const int fd = open_nonblocking(name, &sb, why, sizeof why);
    if (fd < 0) {
        RO_PUSH(H5E_CANTOPENFILE, "%s", why);
        return NULL;
    }
    ro_file *f = mem_calloc(1, sizeof *f);
    if (!f) {
        close(fd);
        RO_PUSH(H5E_CANTALLOC, "out of memory");
        return NULL;
    }
    f->fd = fd;
    f->eof = (haddr_t)sb.st_size;
    f->dev = sb.st_dev;
    f->ino = sb.st_ino;
    if (info) f->count = *info;
    return &f->pub;
}

static herr_t ro_close(H5FD_t *file)
{
    ro_file *f = (ro_file *)file;
    close(f->fd);
    mem_free(f);
    return 0;
}

static int ro_cmp(const H5FD_t *a, const H5FD_t *b)
{
    const ro_file *x = (const ro_file *)a, *y = (const ro_file *)b;
    if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
    if (x->ino != y->ino) return x->ino < y->ino ? -1 : 1;
    return 0;
}

static herr_t ro_query(const H5FD_t *file, unsigned long *flags)
{
    (void)file;
    *flags = H5FD_FEAT_AGGREGATE_METADATA | H5FD_FEAT_ACCUMULATE_METADATA |
             H5FD_FEAT_AGGREGATE_SMALLDATA;
    return 0;
}

static haddr_t ro_get_eoa(const H5FD_t *file, H5FD_mem_t type)
{
    (void)type;
    return ((const ro_file *)file)->eoa;
}

static herr_t ro_set_eoa(H5FD_t *file, H5FD_mem_t type, haddr_t addr)
{
    (void)type;
    ((ro_file *)file)->eoa = addr;
    return 0;
}

static haddr_t ro_get_eof(const H5FD_t *file, H5FD_mem_t type)
{
    (void)type;
    return ((const ro_file *)file)->eof;
}

static herr_t ro_get_handle(H5FD_t *file, hid_t fapl, void **handle)
{
    (void)fapl;
    *handle = &((ro_file *)file)->fd;
    return 0;
}

static herr_t ro_read(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size,
                      void *buf)
{
    (void)dxpl;
    ro_file *f = (ro_file *)file;
    /* HDF5 checks reads against the end of its address space itself. */
    if (addr == HADDR_UNDEF || addr > RO_MAXADDR || size > RO_MAXADDR - addr) {
        RO_PUSH(H5E_OVERFLOW, "read of %zu bytes at %llu: address overflow",
                size, (unsigned long long)addr);
        return -1;
    }
    _Atomic uint64_t *counter = type == H5FD_MEM_DRAW ? f->count.data : f->count.meta;
    if (counter) *counter += size;
    unsigned char *p = buf;
    size_t done = 0;
    while (done < size) {
        const size_t want = size - done < ((size_t)1 << 30) ? size - done : (size_t)1 << 30;
        const ssize_t got = pread(f->fd, p + done, want, (off_t)(addr + done));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            char text[128];
            if (strerror_r(errno, text, sizeof text) != 0) snprintf(text, sizeof text, "?");
            RO_PUSH(H5E_READERROR, "read of %zu bytes at %llu failed: %s", want,
                    (unsigned long long)(addr + done), text);
            return -1;
        }
        if (got == 0) {
            /* The file ended: shortened since it was opened (HDF5's own
             * open refuses a file shorter than its superblock says). */
            RO_PUSH(H5E_READERROR, "the file ends at offset %llu, before the %zu bytes "
                    "expected from offset %llu (truncated or changed since opened)",
                    (unsigned long long)(addr + done), size, (unsigned long long)addr);
            return -1;
        }
        done += (size_t)got;
    }
    return 0;
}

static herr_t ro_write(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size,
                       const void *buf)
{
    (void)file, (void)type, (void)dxpl, (void)addr, (void)size, (void)buf;
    RO_PUSH(H5E_WRITEERROR, "the pcnn driver only reads");
    return -1;
}

static herr_t ro_truncate(H5FD_t *file, hid_t dxpl, hbool_t closing)
{
    (void)file, (void)dxpl, (void)closing;
    return 0;
}

static const H5FD_class_t ro_class = {
    .name = "pcnn_readonly",
    .maxaddr = RO_MAXADDR,
    .fc_degree = H5F_CLOSE_WEAK,
    .fapl_size = sizeof(counters),
    .open = ro_open,
    .close = ro_close,
    .cmp = ro_cmp,
    .query = ro_query,
    .get_eoa = ro_get_eoa,
    .set_eoa = ro_set_eoa,
    .get_eof = ro_get_eof,
    .get_handle = ro_get_handle,
    .read = ro_read,
    .write = ro_write,
    .truncate = ro_truncate,
    .fl_map = H5FD_FLMAP_DICHOTOMY,
};

/* The driver's id, registered once per HDF5 library lifetime (a host's
 * H5close invalidates it: then registered again).  Inside a session. */
static hid_t driver_id(void)
{
    static hid_t id = -1; /* guarded by the HDF5 lock (h5_enter) */
    if (id < 0 || H5Iis_valid(id) <= 0) id = H5FDregister(&ro_class);
    return id;
}

hid_t h5_fapl(_Atomic uint64_t *data, _Atomic uint64_t *meta)
{
    const hid_t id = driver_id();
    if (id < 0) return -1;
    const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0) return -1;
    const counters info = {data, meta};
    if (H5Pset_driver(fapl, id, &info) < 0) {
        H5Pclose(fapl);
        return -1;
    }
    return fapl;
}
