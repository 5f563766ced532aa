#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The only mutable library-wide state, all per thread by design: the last
 * message (the header promises pcnn_last_error() per thread) and the public
 * function running on this thread, if any. */
static _Thread_local char last_error[512];
static _Thread_local const char *api_scope;

const char *api_scope_enter(const char *name)
{
    if (api_scope) return NULL;
    api_scope = name;
    return name;
}

void api_scope_leave(const char *const *token)
{
    if (*token) api_scope = NULL;
}

pcnn_status error_set(pcnn_status status, const char *func, const char *fmt, ...)
{
    /* Format first: an argument may be the previous message itself. */
    char text[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    int len = snprintf(last_error, sizeof last_error, "%s: ", api_scope ? api_scope : func);
    if (len < 0 || (size_t)len >= sizeof last_error) len = 0;
    size_t room = sizeof last_error - (size_t)len - 1, n = strlen(text);
    memcpy(last_error + len, text, n < room ? n : room);
    last_error[len + (n < room ? n : room)] = '\0';
    return status;
}

void error_clear(void) { last_error[0] = '\0'; }

PCNN_API const char *pcnn_last_error(void)
{
    API_ENTRY();
    return last_error;
}

PCNN_API const char *pcnn_status_str(pcnn_status status)
{
    API_ENTRY();
    switch (status) {
    case PCNN_OK: return "ok";
    case PCNN_ERR_INVALID_ARGUMENT: return "invalid argument";
    case PCNN_ERR_INVALID_STATE: return "invalid order of calls";
    case PCNN_ERR_SHAPE: return "shape mismatch";
    case PCNN_ERR_OUT_OF_MEMORY: return "out of memory";
    case PCNN_ERR_MPI: return "MPI failure";
    case PCNN_ERR_REMOTE: return "error on another rank";
    case PCNN_ERR_TIMEOUT: return "timeout";
    case PCNN_ERR_UNSUPPORTED: return "unsupported";
    case PCNN_ERR_NUMERIC: return "NaN or Inf";
    case PCNN_ERR_IO: return "I/O error";
    case PCNN_ERR_CORRUPT: return "corrupt or malformed data";
    case PCNN_ERR_MISMATCH: return "mismatch";
    case PCNN_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}
