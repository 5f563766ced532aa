#include "atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "memory.h"

/* A fresh temporary name next to the target, created with O_EXCL and mode
 * 0666 so the final file gets the permissions the umask gives (mkstemp
 * would force 0600). */
static int create_temp(const char *path, size_t len, char *temp)
{
    for (int attempt = 0; attempt < 32; attempt++) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        snprintf(temp, len + 40, "%s.tmp.%ld.%lx", path, (long)getpid(),
                 (unsigned long)(t.tv_nsec ^ ((unsigned long)attempt << 20)));
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
    f->temp = mem_calloc(len + 40, 1);
    if (!f->target || !f->temp) {
        atomic_file_abort(f);
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "path of %zu bytes", len);
    }
    memcpy(f->target, path, len);
    int fd = create_temp(path, len, f->temp);
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
