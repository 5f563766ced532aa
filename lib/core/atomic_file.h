/* Files written atomically: a temporary file in the same directory,
 * fsync, rename over the target, fsync of the directory.  A crash at any
 * moment leaves either the old file or the new one, never a mix.
 *
 * The temporary of `path` is named `<path>.pcnn-tmp.<host>.<pid>.<n>`
 * (host: this host's name with characters other than letters, digits, '-'
 * and '_' replaced by '_', at most 32 of them; pid: the writing process;
 * n: a counter of the process), so that a temporary left by a process
 * killed during a write can be told from anything else and removed: every
 * atomic_file_open of `path` first removes those of dead processes. */
#ifndef PCNN_CORE_ATOMIC_FILE_H
#define PCNN_CORE_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

#include "pcnn.h"

#define ATOMIC_FILE_TAG ".pcnn-tmp."

typedef struct atomic_file {
    FILE *stream;
    char *target, *temp;
} atomic_file;

/* Remove the stale temporaries of `path` (see atomic_file_cleanup), then
 * create a new one. */
pcnn_status atomic_file_open(atomic_file *f, const char *path);
/* Flush, sync and rename into place; on any failure the target is left
 * untouched and the temporary removed. */
pcnn_status atomic_file_commit(atomic_file *f);
/* Give up: remove the temporary. */
void atomic_file_abort(atomic_file *f);

/* Remove the temporaries of `path` that interrupted writes left: regular
 * files (not links) in path's directory, owned by this user, named exactly
 * `<basename of path>.pcnn-tmp.<this host>.<pid>.<n>` with decimal pid and
 * n, whose pid is not a running process of this host.  Nothing else is
 * touched: not the target, not the temporaries of this process (another
 * thread may be writing one) or of a live process, nor those of other
 * hosts sharing the directory.  *removed (may be NULL) counts the files
 * removed.  Errors: INVALID_ARGUMENT (empty path, or one ending in '/'),
 * IO (the directory cannot be read, or a stale file cannot be removed). */
pcnn_status atomic_file_cleanup(const char *path, int *removed);

/* The whole regular file at `path`, in a buffer of exactly its size
 * (mem_free it): however large the length fields inside claim to be,
 * nothing beyond it is ever allocated.  Errors: IO (cannot open or read;
 * a directory, FIFO or device, refused without waiting for a writer;
 * larger than max_size bytes), OUT_OF_MEMORY.  *len is shorter than the
 * size if the file shrank meanwhile (the caller's checks find it
 * truncated). */
pcnn_status file_read_whole(const char *path, size_t max_size, unsigned char **out, size_t *len,
                            const char *func);
/* The same, first checking that the file starts with the magic_len
 * (<= 16) bytes of `magic`: if it does not (a shorter file is read, for
 * the caller to find it truncated), PCNN_ERR_CORRUPT with no message set
 * (the caller names the format) and nothing allocated, however large the
 * file. */
pcnn_status file_read_magic(const char *path, size_t max_size, const char *magic,
                            size_t magic_len, unsigned char **out, size_t *len, const char *func);

#endif
