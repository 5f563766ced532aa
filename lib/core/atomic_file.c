#include "atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "memory.h"

#define HOST_CHARS 32
/* Room for the tag, host, pid and counter after the path. */
#define TEMP_EXTRA (sizeof ATOMIC_FILE_TAG + HOST_CHARS + 48)

/* This host's name as it appears in temporary names: no '.' (the name is
 * parsed on dots) and nothing a file name cannot hold. */
static void host_tag(char out[HOST_CHARS + 1])
{
    char name[256] = "";
    if (gethostname(name, sizeof name - 1) != 0 || !name[0]) strcpy(name, "localhost");
    size_t n = 0;
    for (; name[n] && n < HOST_CHARS; n++) {
        char c = name[n];
        bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_';
        out[n] = keep ? c : '_';
    }
    out[n] = '\0';
}

/* A fresh temporary name next to the target, created with O_EXCL and mode
 * 0666 so the final file gets the permissions the umask gives (mkstemp
 * would force 0600).  The counter makes names unique within the process;
 * O_EXCL skips one left by an earlier process that had the same pid. */
static int create_temp(const char *path, size_t size, char *temp)
{
    static atomic_ulong counter;
    char host[HOST_CHARS + 1];
    host_tag(host);
    for (int attempt = 0; attempt < 64; attempt++) {
        unsigned long n = atomic_fetch_add(&counter, 1);
        snprintf(temp, size, "%s" ATOMIC_FILE_TAG "%s.%ld.%lu", path, host, (long)getpid(), n);
        int fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    return -1;
}

pcnn_status atomic_file_open(atomic_file *f, const char *path)
{
    *f = (atomic_file){0};
    size_t len = strlen(path);
    f->target = mem_calloc(len + 1, 1);
    f->temp = mem_calloc(len + TEMP_EXTRA, 1);
    if (!f->target || !f->temp) {
        atomic_file_abort(f);
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "path of %zu bytes", len);
    }
    memcpy(f->target, path, len);
    /* Best effort: a directory we cannot list or clean must not stop the
     * write, which reports its own errors. */
    (void)atomic_file_cleanup(path, NULL);
    int fd = create_temp(path, len + TEMP_EXTRA, f->temp);
    if (fd < 0) {
        int err = errno;
        f->temp[0] = '\0';
        atomic_file_abort(f);
        return FAIL(PCNN_ERR_IO, "cannot create a temporary file next to '%s': %s", path,
                    strerror(err));
    }
    f->stream = fdopen(fd, "wb");
    if (!f->stream) {
        close(fd);
        atomic_file_abort(f);
        return FAIL(PCNN_ERR_IO, "cannot open a stream for '%s'", path);
    }
    return PCNN_OK;
}

void atomic_file_abort(atomic_file *f)
{
    if (f->stream) fclose(f->stream);
    if (f->temp && f->temp[0]) unlink(f->temp);
    mem_free(f->target);
    mem_free(f->temp);
    *f = (atomic_file){0};
}

/* Make the rename itself durable. */
static void sync_directory(const char *path)
{
    const char *slash = strrchr(path, '/');
    char dir[4096] = ".";
    if (slash) {
        size_t n = (size_t)(slash - path);
        if (n == 0) n = 1; /* "/file" */
        if (n >= sizeof dir) return;
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

pcnn_status atomic_file_commit(atomic_file *f)
{
    bool ok = !ferror(f->stream) && fflush(f->stream) == 0 && fsync(fileno(f->stream)) == 0;
    int err = errno;
    ok = fclose(f->stream) == 0 && ok;
    f->stream = NULL;
    if (ok && rename(f->temp, f->target) != 0) {
        err = errno;
        ok = false;
    }
    if (!ok) {
        pcnn_status st = FAIL(PCNN_ERR_IO, "cannot write '%s': %s", f->target, strerror(err));
        atomic_file_abort(f);
        return st;
    }
    sync_directory(f->target);
    f->temp[0] = '\0'; /* renamed: nothing to remove */
    atomic_file_abort(f);
    return PCNN_OK;
}

/* s[0, n) is 1 to `max` decimal digits. */
static bool all_digits(const char *s, size_t n, size_t max)
{
    if (n == 0 || n > max) return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return false;
    return true;
}

/* The pid of a temporary named prefix + "<pid>.<n>", or 0 if `name` is
 * anything else. */
static pid_t temp_pid(const char *name, const char *prefix, size_t prefix_len)
{
    if (strncmp(name, prefix, prefix_len) != 0) return 0;
    const char *pid = name + prefix_len, *dot = strchr(pid, '.');
    if (!dot || !all_digits(pid, (size_t)(dot - pid), 10) ||
        !all_digits(dot + 1, strlen(dot + 1), 20))
        return 0;
    long v = strtol(pid, NULL, 10);
    return v > 0 && v <= INT_MAX ? (pid_t)v : 0;
}

/* Is `pid` a process of this host (signal 0 probes without sending;
 * EPERM: it exists, under another user)? */
static bool process_alive(pid_t pid)
{
    return kill(pid, 0) == 0 || errno != ESRCH;
}

pcnn_status atomic_file_cleanup(const char *path, int *removed)
{
    if (removed) *removed = 0;
    const size_t len = strlen(path);
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!base[0]) return FAIL(PCNN_ERR_INVALID_ARGUMENT, "'%s' names no file", path);
    char dir[4096] = ".", prefix[512], host[HOST_CHARS + 1];
    if (slash) {
        size_t n = slash == path ? 1 : (size_t)(slash - path); /* "/file": the root */
        if (n >= sizeof dir)
            return FAIL(PCNN_ERR_INVALID_ARGUMENT, "the directory of a %zu-byte path is longer "
                        "than %zu bytes", len, sizeof dir - 1);
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    host_tag(host);
    int plen = snprintf(prefix, sizeof prefix, "%s" ATOMIC_FILE_TAG "%s.", base, host);
    if (plen < 0 || (size_t)plen >= sizeof prefix) return PCNN_OK; /* no such name fits a directory */
    DIR *d = opendir(dir);
    if (!d) return FAIL(PCNN_ERR_IO, "cannot read the directory '%s': %s", dir, strerror(errno));
    pcnn_status st = PCNN_OK;
    const pid_t self = getpid();
    const uid_t user = geteuid();
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        pid_t pid = temp_pid(e->d_name, prefix, (size_t)plen);
        if (pid == 0 || pid == self || process_alive(pid)) continue;
        struct stat sb;
        if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode) ||
            sb.st_uid != user)
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0) {
            if (removed) (*removed)++;
        } else if (errno != ENOENT && st == PCNN_OK) { /* ENOENT: someone else removed it */
            st = FAIL(PCNN_ERR_IO, "cannot remove the stale temporary '%s/%s': %s", dir,
                      e->d_name, strerror(errno));
        }
    }
    closedir(d);
    return st;
}

pcnn_status file_read_whole(const char *path, size_t max_size, unsigned char **out, size_t *len,
                            const char *func)
{
    return file_read_magic(path, max_size, NULL, 0, out, len, func);
}

pcnn_status file_read_magic(const char *path, size_t max_size, const char *magic,
                            size_t magic_len, unsigned char **out, size_t *len, const char *func)
{
    /* O_NONBLOCK: opening a FIFO for reading would wait for a writer. */
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return error_set(PCNN_ERR_IO, func, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return error_set(PCNN_ERR_IO, func, "'%s' is not a regular file (a directory, FIFO or "
                         "device)", path);
    }
    const int flags = fcntl(fd, F_GETFL);
    FILE *f = flags >= 0 && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        const int err = errno;
        close(fd);
        return error_set(PCNN_ERR_IO, func, "cannot open '%s': %s", path, strerror(err));
    }
    if ((uint64_t)sb.st_size > (uint64_t)max_size) {
        fclose(f);
        return error_set(PCNN_ERR_IO, func, "'%s' is too large (%lld bytes, at most %zu)", path,
                         (long long)sb.st_size, max_size);
    }
    const size_t size = (size_t)sb.st_size;
    if (magic_len > 0) { /* before the whole file is allocated and read */
        char head[16] = {0};
        const size_t n = magic_len < sizeof head ? magic_len : sizeof head;
        if (fread(head, 1, n, f) == n && memcmp(head, magic, n) != 0) { /* shorter: truncated */
            fclose(f);
            *out = NULL;
            *len = 0;
            return PCNN_ERR_CORRUPT; /* the caller says what the file is not */
        }
        rewind(f);
    }
    unsigned char *buf = mem_calloc(size ? size : 1, 1);
    if (!buf) {
        fclose(f);
        return error_set(PCNN_ERR_OUT_OF_MEMORY, func, "%zu bytes for '%s'", size, path);
    }
    size_t got = fread(buf, 1, size, f);
    const bool failed = ferror(f) != 0;
    fclose(f);
    if (failed) {
        mem_free(buf);
        return error_set(PCNN_ERR_IO, func, "cannot read '%s'", path);
    }
    *out = buf;
    *len = got; /* shorter than st_size if the file shrank: then it is truncated */
    return PCNN_OK;
}
