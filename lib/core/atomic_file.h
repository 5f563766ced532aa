/* Files written atomically: a temporary file in the same directory,
 * fsync, rename over the target, fsync of the directory.  A crash at any
 * moment leaves either the old file or the new one, never a mix. */
#ifndef PCNN_CORE_ATOMIC_FILE_H
#define PCNN_CORE_ATOMIC_FILE_H

#include <stdio.h>

#include "pcnn.h"

typedef struct atomic_file {
    FILE *stream;
    char *target, *temp;
} atomic_file;

pcnn_status atomic_file_open(atomic_file *f, const char *path);
/* Flush, sync and rename into place; on any failure the target is left
 * untouched and the temporary removed. */
pcnn_status atomic_file_commit(atomic_file *f);
/* Give up: remove the temporary. */
void atomic_file_abort(atomic_file *f);

#endif
