/* Weight initialisation (He / Glorot) and its public selector.
 *
 * Each layer draws from its own counter-based stream keyed by (seed, layer
 * index), so a layer's initial weights depend on nothing else: not on the
 * other layers, the thread count or the number of ranks. */
#include <math.h>

#include "../core/error.h"
#include "../core/rng.h"
#include "layer.h"

#define INIT_PURPOSE 0x1417u /* rng key word separating init from other streams */

void layer_init_weights(const pcnn_layer *l, float *w, size_t n, size_t fan_in, size_t fan_out,
                        uint64_t seed)
{
    bool he = l->init == PCNN_INIT_HE_NORMAL || l->init == PCNN_INIT_HE_UNIFORM;
    bool normal = l->init == PCNN_INIT_HE_NORMAL || l->init == PCNN_INIT_GLOROT_NORMAL;
    double fan = he ? (double)fan_in : (double)fan_in + (double)fan_out;
    if (fan < 1.0) fan = 1.0;
    rng r = rng_make(seed, INIT_PURPOSE, (uint64_t)l->index, 0);
    if (normal) {
        float sd = (float)sqrt(2.0 / fan);
        for (size_t i = 0; i < n; i++) w[i] = sd * rng_normal(&r);
    } else {
        float bound = (float)sqrt(6.0 / fan);
        for (size_t i = 0; i < n; i++) w[i] = bound * (2.0f * rng_uniform(&r) - 1.0f);
    }
}

PCNN_API pcnn_status pcnn_layer_set_init(pcnn_layer *layer, pcnn_init init)
{
    API_ENTRY();
    REQUIRE_PTR(layer);
    char name[64];
    layer_name(layer, name, sizeof name);
    REQUIRE(layer->has_weights, PCNN_ERR_INVALID_ARGUMENT,
            "%s has no weights to initialise (only conv2d and dense have)", name);
    switch ((int)init) {
    case PCNN_INIT_HE_NORMAL:
    case PCNN_INIT_HE_UNIFORM:
    case PCNN_INIT_GLOROT_NORMAL:
    case PCNN_INIT_GLOROT_UNIFORM:
        break;
    default:
        return FAIL(PCNN_ERR_INVALID_ARGUMENT, "%s: unknown init %d", name, (int)init);
    }
    REQUIRE(!layer->list->frozen, PCNN_ERR_INVALID_STATE,
            "%s: the network is already finalized", name);
    layer->init = init;
    return PCNN_OK;
}
