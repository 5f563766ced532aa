/* The public header is self-contained strict C11 (compiled with -std=c11
 * -pedantic by meson), and its version macros agree with the library.  Its
 * experimental section stays hidden without PCNN_EXPERIMENTAL (its names
 * defined to identifiers that say to define it), appears on a second
 * include with it, and keeps the numbers the library implements. */
#include "pcnn.h"

#if defined(PCNN_H_EXPERIMENTAL) || !defined(PCNN_H_HINTS)
#error "pcnn.h shows its experimental section without PCNN_EXPERIMENTAL"
#endif
/* Without it, section 9's names only say to define it (tests/api/experimental_hint.sh
 * compiles hosts that use them). */
#ifndef PCNN_OPT_ENGINE
#error "pcnn.h does not hint at PCNN_EXPERIMENTAL for PCNN_OPT_ENGINE"
#endif
_Static_assert(PCNN_OPT_SYNC_BATCHNORM == 23, "sync batch norm is stable (0.2.0)");

#define PCNN_EXPERIMENTAL
#include "pcnn.h"

_Static_assert(PCNN_OPT_KEEP_IM2COL == 11 && PCNN_OPT_ENGINE == 17 &&
               PCNN_OPT_ACTIVE_ENGINE == 18 && PCNN_OPT_COMM_CORE == 19 &&
               PCNN_OPT_CONV_ALGORITHM == 22,
               "experimental options keep their numbers");

#include <stdio.h>
#include <string.h>

int main(void)
{
    char expected[32];
    snprintf(expected, sizeof expected, "%d.%d.%d", PCNN_VERSION_MAJOR, PCNN_VERSION_MINOR,
             PCNN_VERSION_PATCH);
    if (strcmp(expected, pcnn_version_string()) != 0) {
        printf("FAIL header %s, library %s\n", expected, pcnn_version_string());
        return 1;
    }
    if (pcnn_version_number() != PCNN_VERSION_NUMBER) return 1;
    if (strcmp(pcnn_status_str(PCNN_ERR_SHAPE), "shape mismatch") != 0) return 1;
    if (strcmp(pcnn_status_str((pcnn_status)999), "unknown status") != 0) return 1;
    printf("version %s ok\n", expected);
    return 0;
}
