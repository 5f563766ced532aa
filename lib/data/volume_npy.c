/* The .npy header: magic "\x93NUMPY", version, header length, then a Python
 * dict literal with exactly the keys descr, fortran_order and shape.  Only
 * what numpy.save writes for little-endian float32/float64 C-order arrays is
 * accepted; the parser reads nothing outside the given bytes. */
#include <stdio.h>
#include <string.h>

#include "../core/error.h"
#include "volume.h"

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6

/* A cursor over the dict text [p, end). */
typedef struct cursor {
    const char *p, *end;
} cursor;

static void skip_space(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static int eat(cursor *c, char ch)
{
    skip_space(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* A quoted string ('...' or "...", no escapes) into buf; 0 on failure. */
static int read_string(cursor *c, char *buf, size_t size)
{
    skip_space(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return 0;
    char quote = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != quote) {
        if (n + 1 >= size || *c->p == '\0') return 0; /* a NUL would cut it short */
        buf[n++] = *c->p++;
    }
    if (c->p >= c->end) return 0;
    c->p++;
    buf[n] = '\0';
    return 1;
}

static int read_word(cursor *c, const char *word)
{
    skip_space(c);
    size_t n = strlen(word);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0) return 0;
    c->p += n;
    return 1;
}

/* A non-negative decimal integer below 2^62. */
static int read_dim(cursor *c, int64_t *v)
{
    skip_space(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') return 0;
    int64_t x = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        if (x > ((int64_t)1 << 62) / 10) return 0;
        x = x * 10 + (*c->p++ - '0');
    }
    if (c->p < c->end && *c->p == 'L') c->p++; /* Python 2 longs */
    *v = x;
    return 1;
}

/* "(d0, d1, ...)" with an optional trailing comma; "()" is a scalar. */
static int read_shape(cursor *c, npy_header *h)
{
    if (!eat(c, '(')) return 0;
    h->ndims = 0;
    if (eat(c, ')')) return 1;
    for (;;) {
        if (h->ndims == NPY_MAX_DIMS) return 0;
        if (!read_dim(c, &h->dims[h->ndims])) return 0;
        h->ndims++;
        if (eat(c, ')')) return 1;
        if (!eat(c, ',')) return 0;
        if (eat(c, ')')) return 1;
    }
}

static pcnn_status bad(const char *name, const char *what)
{
    return FAIL(PCNN_ERR_CORRUPT, "%s: not a valid .npy file: %s", name, what);
}

pcnn_status npy_parse_header(const unsigned char *buf, size_t len, const char *name,
                             npy_header *out)
{
    if (len < NPY_MAGIC_LEN + 2 || memcmp(buf, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
        return bad(name, "no \\x93NUMPY magic at offset 0");
    const int major = buf[6];
    size_t hlen, start;
    if (major == 1) {
        if (len < 10) return bad(name, "the header length is cut off at offset 8");
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        start = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12) return bad(name, "the header length is cut off at offset 8");
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 |
               (size_t)buf[11] << 24;
        start = 12;
    } else {
        return FAIL(PCNN_ERR_CORRUPT, "%s: .npy format version %d.%d is not supported "
                    "(1.0, 2.0 and 3.0 are)", name, major, buf[7]);
    }
    if (hlen > len - start)
        return FAIL(PCNN_ERR_CORRUPT, "%s: the .npy header of %zu bytes at offset %zu runs "
                    "past the %zu bytes read", name, hlen, start, len);

    cursor c = {(const char *)buf + start, (const char *)buf + start + hlen};
    int have_descr = 0, have_order = 0, have_shape = 0;
    memset(out, 0, sizeof *out);
    if (!eat(&c, '{')) return bad(name, "the header is not a dict");
    while (!eat(&c, '}')) {
        char key[32], value[32];
        if (!read_string(&c, key, sizeof key) || !eat(&c, ':'))
            return bad(name, "malformed dict key");
        if (strcmp(key, "descr") == 0 && !have_descr) {
            if (!read_string(&c, value, sizeof value)) return bad(name, "descr is not a string");
            if (strcmp(value, "<f4") == 0) out->elem = 4;
            else if (strcmp(value, "<f8") == 0) out->elem = 8;
            else
                return FAIL(PCNN_ERR_CORRUPT, "%s: dtype '%s' is not supported (little-endian "
                            "float32 '<f4' or float64 '<f8')", name, value);
            have_descr = 1;
        } else if (strcmp(key, "fortran_order") == 0 && !have_order) {
            if (read_word(&c, "True"))
                return FAIL(PCNN_ERR_CORRUPT, "%s: the array is in Fortran order; C order is "
                            "required (save numpy.ascontiguousarray(a))", name);
            if (!read_word(&c, "False")) return bad(name, "fortran_order is not True or False");
            have_order = 1;
        } else if (strcmp(key, "shape") == 0 && !have_shape) {
            if (!read_shape(&c, out)) return bad(name, "malformed shape tuple");
            have_shape = 1;
        } else {
            return bad(name, "unknown or repeated key in the header dict");
        }
        if (!eat(&c, ',')) {
            if (!eat(&c, '}')) return bad(name, "expected ',' or '}' in the header dict");
            break;
        }
    }
    skip_space(&c);
    if (c.p != c.end) return bad(name, "text after the header dict");
    if (!have_descr || !have_order || !have_shape)
        return bad(name, "the header lacks descr, fortran_order or shape");
    out->data_offset = start + hlen;
    return PCNN_OK;
}
