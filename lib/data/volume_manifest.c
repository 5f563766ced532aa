/* The manifest of file-backed volumes: one sample per line,
 * "<path> <t_1> ... <t_k>".  Errors name the manifest and the line. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/error.h"
#include "../core/memory.h"
#include "volume.h"

/* FLT_MAX plus half its last place: a double this large rounds to an
 * infinite float (the tie goes to the even infinity); anything smaller, to
 * a finite one -- FLT_MAX printed as 3.40282347e+38 included. */
#define ROUNDS_TO_FLOAT_INF 0x1.ffffffp+127

/* Largest number of samples a manifest may list (counts stay within int). */
#define MANIFEST_MAX_ENTRIES (INT_MAX / 2)

static int is_space(char ch) { return ch == ' ' || ch == '\t' || ch == '\r'; }

void manifest_free(manifest_entry *entries, int count)
{
    if (!entries) return;
    for (int i = 0; i < count; i++) {
        mem_free(entries[i].path);
        mem_free(entries[i].targets);
    }
    mem_free(entries);
}

/* dir + "/" + path for a relative path, else a copy of path. */
static char *join_path(const char *dir, const char *path, size_t path_len)
{
    size_t dir_len = (path[0] == '/' || !dir) ? 0 : strlen(dir);
    char *out = mem_alloc(dir_len + 1 + path_len + 1);
    if (!out) return NULL;
    size_t n = 0;
    if (dir_len) {
        memcpy(out, dir, dir_len);
        n = dir_len;
        if (out[n - 1] != '/') out[n++] = '/';
    }
    memcpy(out + n, path, path_len);
    out[n + path_len] = '\0';
    return out;
}

/* Parse one line [p, end) (no newline) into e.  The line is copied so that
 * strtod sees a terminated string. */
static pcnn_status parse_line(const char *p, const char *end, const char *dir, const char *name,
                              long line, int target_count, manifest_entry *e)
{
    const char *path = p;
    while (p < end && !is_space(*p)) p++;
    const size_t path_len = (size_t)(p - path);
    size_t rest_len = (size_t)(end - p);
    /* The words after the path counted first: a target_count the line
     * cannot hold is refused before target_count floats are allocated. */
    long words = 0;
    for (const char *q = p; q < end; q++)
        if (!is_space(*q) && (q == p || is_space(q[-1]))) words++;
    if (words < target_count)
        return FAIL(PCNN_ERR_CORRUPT, "%s line %ld: %d targets expected after the path, "
                    "found %ld", name, line, target_count, words);
    char *rest = mem_alloc(rest_len + 1);
    e->targets = mem_alloc_floats((size_t)target_count);
    e->path = join_path(dir, path, path_len);
    if (!rest || !e->targets || !e->path) {
        mem_free(rest);
        return FAIL(PCNN_ERR_OUT_OF_MEMORY, "%s line %ld: out of memory", name, line);
    }
    memcpy(rest, p, rest_len);
    rest[rest_len] = '\0';

    pcnn_status st = PCNN_OK;
    char *q = rest;
    for (int k = 0; k < target_count && st == PCNN_OK; k++) {
        while (is_space(*q)) q++;
        if (*q == '\0') {
            st = FAIL(PCNN_ERR_CORRUPT, "%s line %ld: %d targets expected after the path, "
                      "found %d", name, line, target_count, k);
            break;
        }
        char *stop;
        double v = strtod(q, &stop);
        if (stop == q || (*stop != '\0' && !is_space(*stop)))
            st = FAIL(PCNN_ERR_CORRUPT, "%s line %ld: target %d is not a number", name, line,
                      k + 1);
        else if (!isfinite(v) || fabs(v) >= ROUNDS_TO_FLOAT_INF)
            st = FAIL(PCNN_ERR_CORRUPT, "%s line %ld: target %d is not a finite float", name,
                      line, k + 1);
        else
            e->targets[k] = (float)v;
        q = stop;
    }
    if (st == PCNN_OK) {
        while (is_space(*q)) q++;
        if (*q != '\0')
            st = FAIL(PCNN_ERR_CORRUPT, "%s line %ld: text after the %d targets (a path may "
                      "not contain spaces)", name, line, target_count);
    }
    mem_free(rest);
    return st;
}

pcnn_status manifest_parse(const char *text, size_t len, const char *dir, const char *name,
                           int target_count, manifest_entry **entries, int *count)
{
    if (memchr(text, '\0', len))
        return FAIL(PCNN_ERR_CORRUPT, "%s: a NUL byte at offset %zu: not a text manifest", name,
                    (size_t)((const char *)memchr(text, '\0', len) - text));
    manifest_entry *list = NULL;
    int n = 0, cap = 0;
    pcnn_status st = PCNN_OK;
    long line = 0;
    const char *p = text, *end = text + len;
    while (p < end && st == PCNN_OK) {
        line++;
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) eol = end;
        const char *s = p;
        while (s < eol && is_space(*s)) s++;
        if (s < eol && *s != '#') {
            if (n == cap) {
                if (cap >= MANIFEST_MAX_ENTRIES) {
                    st = FAIL(PCNN_ERR_CORRUPT, "%s line %ld: more than %d samples", name, line,
                              MANIFEST_MAX_ENTRIES);
                    break;
                }
                int grown = cap ? cap * 2 : 16;
                manifest_entry *more = mem_realloc(list, (size_t)grown * sizeof *list);
                if (!more) {
                    st = FAIL(PCNN_ERR_OUT_OF_MEMORY, "%s line %ld: out of memory", name, line);
                    break;
                }
                list = more;
                cap = grown;
            }
            memset(&list[n], 0, sizeof list[n]);
            n++; /* counted now so that manifest_free frees a half-parsed entry */
            st = parse_line(s, eol, dir, name, line, target_count, &list[n - 1]);
        }
        p = eol < end ? eol + 1 : end;
    }
    if (st == PCNN_OK && n == 0)
        st = FAIL(PCNN_ERR_CORRUPT, "%s: no sample listed (%ld lines)", name, line);
    if (st != PCNN_OK) {
        manifest_free(list, n);
        return st;
    }
    *entries = list;
    *count = n;
    return PCNN_OK;
}
