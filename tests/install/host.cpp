// A C++ host: pcnn.h compiles as C++ (extern "C") against the installed
// prefix, and the calls link and run.  Built by the 'install' suite through
// pkg-config.
#include <pcnn.h>

#include <cstdio>
#include <string>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int status = 1;
    pcnn_comm *comm = nullptr;
    pcnn_net *net = nullptr;
    pcnn_layer *in = nullptr, *out = nullptr;
    int channels = 0, height = 0, width = 0;
    if (pcnn_comm_create(MPI_COMM_WORLD, &comm) == PCNN_OK &&
        pcnn_net_create(&net) == PCNN_OK && pcnn_net_input(net, 3, 8, 8, &in) == PCNN_OK &&
        pcnn_conv2d(net, in, 4, 3, 1, 1, 1, &out) == PCNN_OK &&
        pcnn_layer_output_shape(out, &channels, &height, &width) == PCNN_OK &&
        channels == 4 && height == 8 && width == 8 &&
        std::string(pcnn_version_string()) ==
            std::to_string(PCNN_VERSION_MAJOR) + "." + std::to_string(PCNN_VERSION_MINOR) +
                "." + std::to_string(PCNN_VERSION_PATCH)) {
        std::printf("host_cpp ok: libpcnn %s, conv output %dx%dx%d\n", pcnn_version_string(),
                    channels, height, width);
        status = 0;
    } else {
        std::fprintf(stderr, "host_cpp: %s\n", pcnn_last_error());
    }
    pcnn_net_destroy(&net);
    pcnn_comm_destroy(&comm);
    MPI_Finalize();
    return status;
}
