/* Parameters in and out as flat float arrays, counts and sizes. */
#include <math.h>
#include <string.h>

#include "../core/error.h"
#include "../kernels/kernels.h"
#include "../layers/batchnorm.h"
#include "net.h"
#include "spatial.h"

PCNN_API pcnn_status pcnn_net_num_params(const pcnn_net *net, size_t *count)
{
    API_ENTRY();
    TRY(net_check_ready(net, __func__));
    REQUIRE_PTR(count);
    *count = net->num_params;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_output_size(const pcnn_net *net, size_t *count)
{
    API_ENTRY();
    TRY(net_check_ready(net, __func__));
    REQUIRE_PTR(count);
    *count = shape_size(net->output->out);
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_memory_bytes(const pcnn_net *net, size_t *bytes)
{
    API_ENTRY();
    TRY(net_check_ready(net, __func__));
    REQUIRE_PTR(bytes);
    *bytes = net->memory_bytes;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_memory_part(const pcnn_net *net, pcnn_memory_part part,
                                          size_t *bytes)
{
    API_ENTRY();
    TRY(net_check_ready(net, __func__));
    REQUIRE((int)part >= 0 && (int)part < PCNN_MEMORY_PARTS, PCNN_ERR_INVALID_ARGUMENT,
            "part %d: must be in [0, %d) (pcnn_memory_part)", (int)part, PCNN_MEMORY_PARTS);
    REQUIRE_PTR(bytes);
    *bytes = net->memory_part[part];
    return PCNN_OK;
}

/* Parameters may still be in flight from the last overlapped step: wait
 * for them before anyone reads or writes them.  (The schedule state is not
 * part of the network's value, hence the cast.) */
static pcnn_status settle(const pcnn_net *net) { return exchange_flush(net->exchange); }

static pcnn_status copy_flat(const pcnn_net *net, const char *func, float *dst,
                             const float *src, size_t count)
{
    TRY(net_check_ready(net, func));
    TRY(settle(net));
    if (!dst || !src) return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "buf is NULL");
    if (count != net->num_params)
        return error_set(PCNN_ERR_SHAPE, func, "count %zu differs from the %zu parameters",
                         count, net->num_params);
    memcpy(dst, src, count * sizeof(float));
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_get_params(const pcnn_net *net, float *buf, size_t count)
{
    API_ENTRY();
    return copy_flat(net, __func__, buf, net ? net->params : NULL, count);
}

PCNN_API pcnn_status pcnn_net_set_params(pcnn_net *net, const float *buf, size_t count)
{
    API_ENTRY();
    TRY(copy_flat(net, __func__, net ? net->params : NULL, buf, count));
    exchange_masters_from_params(net->exchange); /* bf16 on the wire: masters, rounding */
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_get_grads(const pcnn_net *net, float *buf, size_t count)
{
    API_ENTRY();
    return copy_flat(net, __func__, buf, net ? net->grads : NULL, count);
}

static pcnn_status check_layer_buf(const pcnn_layer *layer, const void *buf, size_t count,
                                   const char *func)
{
    if (!layer) return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "layer is NULL");
    TRY(net_check_ready(net_of_layer(layer), func));
    TRY(settle(net_of_layer(layer)));
    if (!buf) return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "buf is NULL");
    char name[64];
    if (count != layer->num_params)
        return error_set(PCNN_ERR_SHAPE, func, "%s has %zu parameters, count is %zu",
                         layer_name(layer, name, sizeof name), layer->num_params, count);
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_layer_get_params(const pcnn_layer *layer, float *buf, size_t count)
{
    API_ENTRY();
    TRY(check_layer_buf(layer, buf, count, __func__));
    memcpy(buf, layer->params, count * sizeof(float));
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_layer_set_params(pcnn_layer *layer, const float *buf, size_t count)
{
    API_ENTRY();
    TRY(check_layer_buf(layer, buf, count, __func__));
    memcpy(layer->params, buf, count * sizeof(float));
    exchange_masters_from_params(net_of_layer(layer)->exchange);
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_net_get_input_grad(const pcnn_net *net, float *buf, size_t count)
{
    API_ENTRY();
    TRY(net_check_ready(net, __func__));
    REQUIRE_PTR(buf);
    REQUIRE(!net_is_spatial(net), PCNN_ERR_INVALID_STATE,
            "the network is spatially distributed (pcnn_net_set_distribution): each rank "
            "holds only its box of the input gradient, not whole samples");
    REQUIRE(net->last_backward_n > 0, PCNN_ERR_INVALID_STATE,
            "no input gradient: call pcnn_net_compute_gradients first");
    const shape s = net->layers.items[0]->out;
    const size_t need = (size_t)net->last_backward_n * shape_size(s);
    REQUIRE(count >= need, PCNN_ERR_SHAPE, "buf holds %zu floats; the input gradient has %zu",
            count, need);
    cnhw_to_nchw(net->layers.items[0]->dy, buf, net->last_backward_n, s.c, shape_spatial(s),
                 net->threads);
    return PCNN_OK;
}

/* Non-trainable state (batch norm's running statistics): count 0 for
 * layers without any. */
static float *layer_buffers(const pcnn_layer *layer, size_t *count)
{
    *count = 0;
    if (!layer_is_batchnorm(layer)) return NULL;
    return batchnorm_running_stats((pcnn_layer *)layer, count);
}

static pcnn_status check_buffers(const pcnn_layer *layer, const void *buf, size_t count,
                                 float **stats, const char *func)
{
    if (!layer) return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "layer is NULL");
    TRY(net_check_ready(net_of_layer(layer), func));
    size_t have;
    *stats = layer_buffers(layer, &have);
    char name[64];
    if (count != have)
        return error_set(PCNN_ERR_SHAPE, func, "%s has %zu buffer values, count is %zu",
                         layer_name(layer, name, sizeof name), have, count);
    if (count && !buf) return error_set(PCNN_ERR_INVALID_ARGUMENT, func, "buf is NULL");
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_layer_num_buffers(const pcnn_layer *layer, size_t *count)
{
    API_ENTRY();
    REQUIRE_PTR(layer);
    REQUIRE_PTR(count);
    TRY(net_check_ready(net_of_layer(layer), __func__));
    layer_buffers(layer, count);
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_layer_get_buffers(const pcnn_layer *layer, float *buf, size_t count)
{
    API_ENTRY();
    float *stats = NULL;
    TRY(check_buffers(layer, buf, count, &stats, __func__));
    if (count) memcpy(buf, stats, count * sizeof(float));
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_layer_set_buffers(pcnn_layer *layer, const float *buf, size_t count)
{
    API_ENTRY();
    float *stats = NULL;
    TRY(check_buffers(layer, buf, count, &stats, __func__));
    /* Batch norm: mean[C] then variance[C]; a variance must be >= 0. */
    for (size_t i = 0; i < count; i++)
        REQUIRE(isfinite(buf[i]) && (i < count / 2 || buf[i] >= 0), PCNN_ERR_INVALID_ARGUMENT,
                "buffer value %zu is %g: running statistics must be finite, variances >= 0", i,
                (double)buf[i]);
    if (count) memcpy(stats, buf, count * sizeof(float));
    return PCNN_OK;
}
