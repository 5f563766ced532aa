/* What every failure message must look like: "<func>: <text>", where func is
 * the public function the host called, named once, and no other function
 * name (public, or a snake_case helper) stands anywhere as a "name: "
 * prefix.  Returns NULL when msg passes, else what is wrong. */
#ifndef PCNN_TESTS_API_MESSAGE_H
#define PCNN_TESTS_API_MESSAGE_H

#include <ctype.h>
#include <string.h>

/* Does an identifier with an underscore ("plan_slices", "pcnn_net_save")
 * end just before msg[at] == ':' followed by a space? */
static int api_message_names_at(const char *msg, size_t at)
{
    if (msg[at] != ':' || msg[at + 1] != ' ') return 0;
    size_t start = at;
    int underscore = 0;
    while (start > 0 && (islower((unsigned char)msg[start - 1]) ||
                         isdigit((unsigned char)msg[start - 1]) || msg[start - 1] == '_')) {
        underscore |= msg[start - 1] == '_';
        start--;
    }
    return underscore && start < at && islower((unsigned char)msg[start]);
}

static const char *api_message_problem(const char *msg, const char *func)
{
    const size_t n = strlen(func);
    if (!msg || strncmp(msg, func, n) != 0 || strncmp(msg + n, ": ", 2) != 0)
        return "does not start with the public function's name";
    if (msg[n + 2] == '\0') return "has no text after the name";
    for (size_t i = n + 2; msg[i]; i++)
        if (api_message_names_at(msg, i)) return "names another function after the first";
    return NULL;
}

#endif
