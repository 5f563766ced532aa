#include "text.h"

#include <stdarg.h>
#include <stdio.h>

void text_put(text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *dst = t->len < t->size ? t->buf + t->len : NULL;
    int k = vsnprintf(dst, dst ? t->size - t->len : 0, fmt, ap);
    va_end(ap);
    if (k > 0) t->len += (size_t)k;
}
