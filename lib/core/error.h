/* Internal error reporting: every failure goes through error_set (usually
 * as FAIL), which records a per-thread message and returns the status, so
 * that call sites read `return FAIL(PCNN_ERR_SHAPE, "...", ...)`.
 *
 * A message names the public function the host called, once, whichever
 * helper found the failure: every PCNN_API function begins with
 * API_ENTRY(), which makes it the calling thread's API scope until it
 * returns, unless a public function is already running on that thread (the
 * library calling its own public functions: the host's call stays the
 * scope).  error_set then writes "<scope>: message" and ignores the name it
 * is given.  Outside any scope (tests calling internals directly) it writes
 * the given name. */
#ifndef PCNN_CORE_ERROR_H
#define PCNN_CORE_ERROR_H

#include "pcnn.h"

#if defined(__GNUC__)
#define PCNN_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define PCNN_PRINTF(f, a)
#endif

/* Record "scope: message" (or "func: message" outside any API scope) as the
 * calling thread's last error; returns status. */
pcnn_status error_set(pcnn_status status, const char *func, const char *fmt, ...)
    PCNN_PRINTF(3, 4);

/* Forget the calling thread's last error. */
void error_clear(void);

#define FAIL(status, ...) error_set((status), __func__, __VA_ARGS__)

/* Enter the API scope `name` (a static string) if the thread has none.
 * Returns the token api_scope_leave needs: `name` when this call opened the
 * scope, NULL when an outer one stays. */
const char *api_scope_enter(const char *name);

/* Close the scope if *token opened it (the cleanup of API_ENTRY). */
void api_scope_leave(const char *const *token);

/* First line of every PCNN_API function.  The scope closes on every return
 * path through the cleanup attribute (GCC, Clang); other compilers get no
 * scope, and messages name the helper that failed. */
#if defined(__GNUC__)
#define API_ENTRY()                                                                   \
    const char *const api_scope_token_                                                \
        __attribute__((cleanup(api_scope_leave), unused)) = api_scope_enter(__func__)
#else
#define API_ENTRY() ((void)0)
#endif

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
