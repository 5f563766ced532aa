#include "pcnn.h"
#include "error.h"

#define STR2(x) #x
#define STR(x) STR2(x)

PCNN_API unsigned pcnn_version_number(void)
{
    API_ENTRY();
    return PCNN_VERSION_NUMBER;
}

PCNN_API const char *pcnn_version_string(void)
{
    API_ENTRY();
    return STR(PCNN_VERSION_MAJOR) "." STR(PCNN_VERSION_MINOR) "." STR(PCNN_VERSION_PATCH);
}
