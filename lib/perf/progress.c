/* The model's log callback: the calibrations' progress, one line per
 * phase, for a host that wants to say what a call of seconds to minutes is
 * doing.  The library prints nothing itself. */
#include <stdarg.h>
#include <stdio.h>

#include "../core/error.h"
#include "perf.h"

void perf_log(const pcnn_perfmodel *m, pcnn_log_level level, const char *fmt, ...)
{
    if (!m || !m->log) return;
    char message[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    m->log(m->log_user, level, message);
}

PCNN_API pcnn_status pcnn_perfmodel_set_log_callback(pcnn_perfmodel *model,
                                                     pcnn_log_callback callback, void *user)
{
    API_ENTRY();
    REQUIRE_PTR(model);
    model->log = callback;
    model->log_user = callback ? user : NULL;
    return PCNN_OK;
}
