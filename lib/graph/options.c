/* Network options: one setter and one getter over an enum, so new knobs
 * never change the ABI (and ctypes needs no structs).  What each option
 * accepts, when, and where it lives is its row of graph/option_table.c. */
#include <math.h>

#include "../core/error.h"
#include "net.h"
#include "option_table.h"

PCNN_API pcnn_status pcnn_net_set_option(pcnn_net *net, pcnn_option option, double value)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    const option_row *r = option_row_of(option);
    REQUIRE(r, PCNN_ERR_INVALID_ARGUMENT, "unknown option %d", (int)option);
    REQUIRE(r->when != OPTION_READ_ONLY, PCNN_ERR_INVALID_STATE, "the %s is read-only", r->label);
    REQUIRE(!isnan(value), PCNN_ERR_INVALID_ARGUMENT, "value is NaN for option %s", r->name);
    REQUIRE(!(net->finalized && r->when == OPTION_BEFORE_FINALIZE), PCNN_ERR_INVALID_STATE,
            "%s must be %s before finalize", r->label, r->choices ? "chosen" : "set");
    if (!option_in_range(r, value)) return option_range_error(r, value, __func__);
    option_write(net, r, value);
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_get_option(const pcnn_net *net, pcnn_option option, double *value)
{
    API_ENTRY();
    REQUIRE_PTR(net);
    TRY(net_check_alive(net, __func__));
    REQUIRE_PTR(value);
    const option_row *r = option_row_of(option);
    REQUIRE(r, PCNN_ERR_INVALID_ARGUMENT, "unknown option %d", (int)option);
    *value = option_read(net, r);
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_option_info(pcnn_option option, double *min, double *max,
                                          int *is_integer, const char **name)
{
    API_ENTRY();
    const option_row *r = option_row_of(option);
    REQUIRE(r, PCNN_ERR_INVALID_ARGUMENT, "unknown option %d", (int)option);
    double lo, hi;
    option_bounds(r, &lo, &hi);
    if (min) *min = lo;
    if (max) *max = hi;
    if (is_integer) *is_integer = r->integer;
    if (name) *name = r->name;
    return PCNN_OK;
}
