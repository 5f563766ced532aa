// The public header compiles as C++ (and links: the prototypes carry C
// linkage), so C++ simulation codes can include it directly; its
// experimental options are pcnn_option values there too.
#define PCNN_EXPERIMENTAL
#include "pcnn.h"

#include <cstdio>

int main()
{
    pcnn_net *net = nullptr;
    if (pcnn_net_create(&net) != PCNN_OK) return 1;
    pcnn_layer *in = nullptr;
    if (pcnn_net_input(net, 1, 4, 4, &in) != PCNN_OK) return 1;
    double algorithm = -1;
    if (pcnn_net_set_option(net, PCNN_OPT_CONV_ALGORITHM, 1) != PCNN_OK) return 1;
    if (pcnn_net_get_option(net, PCNN_OPT_CONV_ALGORITHM, &algorithm) != PCNN_OK) return 1;
    if (algorithm != 1) return 1;
    pcnn_net_destroy(&net);
    if (net != nullptr) return 1;
    std::printf("libpcnn %s from C++: ok\n", pcnn_version_string());
    return pcnn_version_number() == PCNN_VERSION_NUMBER ? 0 : 1;
}
