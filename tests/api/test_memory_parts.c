/* pcnn_net_memory_part: the parts add up to pcnn_net_memory_bytes, the
 * parameters and the optimizer state have the sizes their counts give, and
 * the batch size moves only the batch-sized parts. */
#include <string.h>

#include "../common/expect.h"
#include "pcnn.h"

/* conv(3->8, k3, p1) batchnorm relu maxpool dense(->10), Adam. */
static pcnn_net *build(int max_batch, size_t *parts, size_t *total, size_t *params)
{
    pcnn_net *net;
    pcnn_layer *l;
    if (pcnn_net_create(&net) != PCNN_OK) return NULL;
    pcnn_net_input(net, 3, 16, 16, &l);
    pcnn_conv2d(net, l, 8, 3, 1, 1, 1, &l);
    pcnn_batchnorm(net, l, 1e-5f, 0.1f, &l);
    pcnn_relu(net, l, &l);
    pcnn_maxpool2d(net, l, 2, 2, 0, &l);
    pcnn_dense(net, l, 10, 1, &l);
    pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY);
    pcnn_net_set_optimizer(net, PCNN_OPTIMIZER_ADAM);
    pcnn_net_set_option(net, PCNN_OPT_THREADS, 1);
    size_t bytes = 0;
    EXPECT(pcnn_net_memory_part(net, PCNN_MEMORY_ACTIVATIONS, &bytes) == PCNN_ERR_INVALID_STATE,
           "before finalize");
    EXPECT(pcnn_net_finalize(net, max_batch) == PCNN_OK, "finalize: %s", pcnn_last_error());
    for (int k = 0; k < PCNN_MEMORY_PARTS; k++)
        EXPECT(pcnn_net_memory_part(net, (pcnn_memory_part)k, &parts[k]) == PCNN_OK, "part %d",
               k);
    EXPECT(pcnn_net_memory_bytes(net, total) == PCNN_OK, "total");
    EXPECT(pcnn_net_num_params(net, params) == PCNN_OK, "parameters");
    return net;
}

int main(void)
{
    size_t small[PCNN_MEMORY_PARTS], large[PCNN_MEMORY_PARTS], total, params;
    pcnn_net *a = build(4, small, &total, &params);
    if (!a) return 1;
    size_t sum = 0;
    for (int k = 0; k < PCNN_MEMORY_PARTS; k++) sum += small[k];
    EXPECT(sum == total, "parts add up to %zu, memory_bytes says %zu", sum, total);
    EXPECT(small[PCNN_MEMORY_PARAMETERS] == 2 * params * sizeof(float),
           "parameters and gradients: %zu bytes for %zu parameters",
           small[PCNN_MEMORY_PARAMETERS], params);
    EXPECT(small[PCNN_MEMORY_OPTIMIZER] == 2 * params * sizeof(float),
           "Adam's two moments on one rank: %zu bytes", small[PCNN_MEMORY_OPTIMIZER]);
    /* 4 samples: at least the conv's and the batch norm's 8 x 16 x 16 outputs. */
    EXPECT(small[PCNN_MEMORY_ACTIVATIONS] >= 2 * 4 * 8 * 16 * 16 * sizeof(float),
           "activations: %zu bytes", small[PCNN_MEMORY_ACTIVATIONS]);
    EXPECT(small[PCNN_MEMORY_WORKSPACE] > 0, "workspace: %zu bytes", small[PCNN_MEMORY_WORKSPACE]);
    EXPECT(small[PCNN_MEMORY_COMMUNICATION] == 0, "one process communicates nothing: %zu bytes",
           small[PCNN_MEMORY_COMMUNICATION]);

    pcnn_net *b = build(16, large, &total, &params);
    if (!b) return 1;
    EXPECT(large[PCNN_MEMORY_PARAMETERS] == small[PCNN_MEMORY_PARAMETERS] &&
               large[PCNN_MEMORY_OPTIMIZER] == small[PCNN_MEMORY_OPTIMIZER],
           "the batch does not change parameters or optimizer state");
    EXPECT(large[PCNN_MEMORY_ACTIVATIONS] >= 3 * small[PCNN_MEMORY_ACTIVATIONS],
           "4x the batch: activations %zu -> %zu bytes", small[PCNN_MEMORY_ACTIVATIONS],
           large[PCNN_MEMORY_ACTIVATIONS]);

    size_t bytes = 7;
    EXPECT(pcnn_net_memory_part(a, (pcnn_memory_part)PCNN_MEMORY_PARTS, &bytes) ==
                   PCNN_ERR_INVALID_ARGUMENT &&
               strstr(pcnn_last_error(), "pcnn_memory_part") != NULL && bytes == 7,
           "a part out of range: %s", pcnn_last_error());
    EXPECT(pcnn_net_memory_part(a, (pcnn_memory_part)-1, &bytes) == PCNN_ERR_INVALID_ARGUMENT,
           "a negative part");
    EXPECT(pcnn_net_memory_part(a, PCNN_MEMORY_WORKSPACE, NULL) == PCNN_ERR_INVALID_ARGUMENT,
           "bytes NULL");
    EXPECT(pcnn_net_memory_part(NULL, PCNN_MEMORY_WORKSPACE, &bytes) == PCNN_ERR_INVALID_ARGUMENT,
           "net NULL");
    pcnn_net_destroy(&a);
    pcnn_net_destroy(&b);
    if (failures == 0) printf("memory parts: all checks passed\n");
    return failures ? 1 : 0;
}
