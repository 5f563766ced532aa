/* Internal error reporting: every failure goes through fail(), which records
 * a per-thread message naming the function, and returns the status so that
 * call sites read `return FAIL(PCNN_ERR_SHAPE, "...", ...)`. */
#ifndef PCNN_CORE_ERROR_H
#define PCNN_CORE_ERROR_H

#include "pcnn.h"

#if defined(__GNUC__)
#define PCNN_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define PCNN_PRINTF(f, a)
#endif

/* Record "func: message" as the calling thread's last error; returns status. */
pcnn_status error_set(pcnn_status status, const char *func, const char *fmt, ...)
    PCNN_PRINTF(3, 4);

/* Forget the calling thread's last error. */
void error_clear(void);

#define FAIL(status, ...) error_set((status), __func__, __VA_ARGS__)

/* Propagate a failing status unchanged (its message is already recorded). */
#define TRY(call)                                                                     \
    do {                                                                              \
        pcnn_status try_status_ = (call);                                             \
        if (try_status_ != PCNN_OK) return try_status_;                               \
    } while (0)

/* Argument checks for public entry points. */
#define REQUIRE(cond, status, ...)                                                    \
    do {                                                                              \
        if (!(cond)) return FAIL((status), __VA_ARGS__);                              \
    } while (0)
#define REQUIRE_PTR(p) REQUIRE((p) != NULL, PCNN_ERR_INVALID_ARGUMENT, "%s is NULL", #p)

#endif
