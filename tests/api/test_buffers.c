/* pcnn_layer_{num,get,set}_buffers: batch norm's running statistics in and
 * out, checked values, and the states and layers that have none. */
#define PCNN_EXPERIMENTAL
#include <math.h>
#include <string.h>

#include "../common/expect.h"
#include "pcnn.h"

int main(void)
{
    pcnn_net *net;
    pcnn_layer *in, *conv, *bn, *out;
    size_t n = 99;
    float buf[8], back[8];
    if (pcnn_net_create(&net) != PCNN_OK) return 1;
    pcnn_net_input(net, 2, 5, 5, &in);
    pcnn_conv2d(net, in, 4, 3, 1, 1, 1, &conv);
    pcnn_batchnorm(net, conv, 1e-5f, 0.1f, &bn);
    pcnn_global_avgpool(net, bn, &out);
    pcnn_net_set_loss(net, out, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY);
    EXPECT(pcnn_layer_num_buffers(bn, &n) == PCNN_ERR_INVALID_STATE, "before finalize");
    EXPECT(strstr(pcnn_last_error(), "pcnn_layer_num_buffers") != NULL, "message: %s",
           pcnn_last_error());
    EXPECT(pcnn_net_finalize(net, 4) == PCNN_OK, "finalize: %s", pcnn_last_error());

    EXPECT(pcnn_layer_num_buffers(bn, &n) == PCNN_OK && n == 8, "batch norm: %zu", n);
    EXPECT(pcnn_layer_num_buffers(conv, &n) == PCNN_OK && n == 0, "conv: %zu", n);
    EXPECT(pcnn_layer_get_buffers(conv, NULL, 0) == PCNN_OK, "none to copy");
    EXPECT(pcnn_layer_get_buffers(bn, buf, 8) == PCNN_OK, "get");
    EXPECT(buf[0] == 0 && buf[4] == 1, "fresh statistics: mean %g var %g", buf[0], buf[4]);

    for (int i = 0; i < 8; i++) buf[i] = 0.25f * (float)(i + 1);
    EXPECT(pcnn_layer_set_buffers(bn, buf, 8) == PCNN_OK, "set");
    EXPECT(pcnn_layer_get_buffers(bn, back, 8) == PCNN_OK && memcmp(buf, back, sizeof buf) == 0,
           "round trip");

    float bad[8];
    memcpy(bad, buf, sizeof bad);
    bad[6] = -1; /* a variance */
    EXPECT(pcnn_layer_set_buffers(bn, bad, 8) == PCNN_ERR_INVALID_ARGUMENT, "negative variance");
    bad[6] = 1;
    bad[1] = NAN;
    EXPECT(pcnn_layer_set_buffers(bn, bad, 8) == PCNN_ERR_INVALID_ARGUMENT, "NaN mean");
    bad[1] = -3; /* a negative mean is fine */
    pcnn_layer_get_buffers(bn, back, 8);
    EXPECT(memcmp(buf, back, sizeof buf) == 0, "a refused set changed nothing");
    EXPECT(pcnn_layer_set_buffers(bn, bad, 8) == PCNN_OK, "negative mean");
    EXPECT(pcnn_layer_get_buffers(bn, back, 7) == PCNN_ERR_SHAPE, "short count");
    EXPECT(pcnn_layer_get_buffers(bn, NULL, 8) == PCNN_ERR_INVALID_ARGUMENT, "NULL buf");
    EXPECT(pcnn_layer_num_buffers(NULL, &n) == PCNN_ERR_INVALID_ARGUMENT, "NULL layer");
    pcnn_net_destroy(&net);
    if (failures) printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
