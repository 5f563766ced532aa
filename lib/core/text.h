/* snprintf-style text building into a caller's buffer: output past the
 * buffer is counted but not written, so the caller learns the full length
 * (the convention of pcnn_net_summary and pcnn_net_timing_report). */
#ifndef PCNN_CORE_TEXT_H
#define PCNN_CORE_TEXT_H

#include <stddef.h>

#include "error.h"

typedef struct text {
    char *buf;
    size_t size, len;
} text;

static inline text text_start(char *buf, size_t size)
{
    text t = {buf, size, 0};
    if (buf && size) buf[0] = '\0';
    return t;
}

void text_put(text *t, const char *fmt, ...) PCNN_PRINTF(2, 3);

#endif
