/* The one lock under which libpcnn calls HDF5, and HDF5's error stack:
 * never printed (HDF5 prints to stderr by default; the library prints
 * nothing), folded into our messages instead. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "hdf5_source.h"

/* Process-wide because HDF5 is: a non-thread-safe HDF5 must not be entered
 * by two threads (the caller's and a prefetch thread, or two datasets'). */
static pthread_mutex_t h5_lock = PTHREAD_MUTEX_INITIALIZER;

void h5_enter(h5_session *s)
{
    pthread_mutex_lock(&h5_lock);
    s->func = NULL;
    s->data = NULL;
    if (H5Eget_auto2(H5E_DEFAULT, &s->func, &s->data) < 0) s->func = NULL;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void h5_leave(const h5_session *s)
{
    H5Eclear2(H5E_DEFAULT);
    H5Eset_auto2(H5E_DEFAULT, s->func, s->data);
    pthread_mutex_unlock(&h5_lock);
}

typedef struct walk {
    char outer[160], inner[160], major[64], minor[64];
    int depth;
} walk;

/* Walking downward: the first entry is the API call's, the last the cause. */
static herr_t note_entry(unsigned n, const H5E_error2_t *e, void *arg)
{
    walk *w = arg;
    w->depth = (int)n + 1;
    snprintf(n == 0 ? w->outer : w->inner, sizeof w->inner, "%s", e->desc ? e->desc : "");
    if (H5Eget_msg(e->maj_num, NULL, w->major, sizeof w->major) < 0) w->major[0] = '\0';
    if (H5Eget_msg(e->min_num, NULL, w->minor, sizeof w->minor) < 0) w->minor[0] = '\0';
    return 0;
}

const char *h5_error_text(char *buf, size_t size)
{
    walk w = {{0}, {0}, {0}, {0}, 0};
    buf[0] = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, note_entry, &w);
    H5Eclear2(H5E_DEFAULT);
    if (w.depth == 1)
        snprintf(buf, size, " (HDF5: %s: %s)", w.outer, w.minor);
    else if (w.depth > 1)
        snprintf(buf, size, " (HDF5: %s: %s: %s)", w.outer, w.inner, w.minor);
    return buf;
}
