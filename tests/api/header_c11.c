/* The public header is self-contained strict C11 (compiled with -std=c11
 * -pedantic by meson), and its version macros agree with the library. */
#include "pcnn.h"

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
