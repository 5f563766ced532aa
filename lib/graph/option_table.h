/* The network options as one table (graph/option_table.c): a row per
 * pcnn_option with its name, range, integer-ness, default, when it may be
 * set, and where its value lives.  pcnn_net_set_option, _get_option,
 * _option_info, the defaults of a new network and the checkpoint's range
 * check all read it, so an option is described once. */
#ifndef PCNN_GRAPH_OPTION_TABLE_H
#define PCNN_GRAPH_OPTION_TABLE_H

#include <stdbool.h>
#include <stddef.h>

#include "net.h"

typedef enum option_when {
    OPTION_ANYTIME,         /* may change between steps */
    OPTION_BEFORE_FINALIZE, /* fixed by finalize */
    OPTION_READ_ONLY
} option_when;

/* How the value is kept in net_options; OPTION_ELSEWHERE: in the network
 * itself, through the row's accessors. */
typedef enum option_store {
    OPTION_DOUBLE,
    OPTION_U64,
    OPTION_LONG,
    OPTION_INT,
    OPTION_BOOL, /* a flag: 0 or 1 */
    OPTION_SIZE,
    OPTION_ELSEWHERE
} option_store;

typedef struct option_row {
    const char *name;    /* the enum member without PCNN_OPT_, lower case */
    const char *label;   /* how messages call it: "learning rate" */
    double lo, hi;       /* the range; hi may be INFINITY (then: finite) */
    bool lo_open, hi_open;
    bool integer;
    const char *choices; /* integer choices explained for messages, or NULL */
    option_when when;
    double default_value;
    option_store store;
    size_t offset;       /* in net_options, unless OPTION_ELSEWHERE */
    double (*get)(const pcnn_net *net);   /* NULL: the stored value */
    void (*set)(pcnn_net *net, double v); /* OPTION_ELSEWHERE and settable */
} option_row;

/* The row of `option`, or NULL for a value outside the enum. */
const option_row *option_row_of(pcnn_option option);

/* Is `v` in the row's range (and integral where required)? */
bool option_in_range(const option_row *r, double v);

/* The range as inclusive bounds: an open bound becomes the nearest double
 * inside it, an infinite one the largest finite double. */
void option_bounds(const option_row *r, double *min, double *max);

/* Record, under `func`, why `v` is out of the row's range; returns
 * PCNN_ERR_INVALID_ARGUMENT. */
pcnn_status option_range_error(const option_row *r, double v, const char *func);

/* Read or write the option's value in `net` (the value already checked). */
double option_read(const pcnn_net *net, const option_row *r);
void option_write(pcnn_net *net, const option_row *r, double v);

/* Give every stored option of a new network its default (and the default
 * exchange strategy, which is a setting of its own call, not an option). */
void net_options_defaults(net_options *o);

/* Is `v` an acceptable value of `option` (for values read from files)? */
bool option_value_ok(pcnn_option option, double v);

#endif
