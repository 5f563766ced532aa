/* Structural fingerprints of a network, compared across ranks at finalize
 * so that ranks that built different models fail instead of hanging or
 * silently training garbage. */
#include <string.h>

#include "../core/hash.h"
#include "../core/rng.h"
#include "../layers/batchnorm.h"
#include "net.h"

static uint64_t hash_text(const char *s) { return hash_fnv1a(HASH_FNV1A_BASIS, s, strlen(s)); }

void net_layer_hashes(const pcnn_net *net, uint64_t *out)
{
    for (int i = 0; i < net->layers.count; i++) {
        const pcnn_layer *l = net->layers.items[i];
        char config[128] = "";
        if (l->ops->describe) l->ops->describe(l, config, sizeof config);
        uint64_t h = rng_hash(hash_text(l->ops->kind), hash_text(config),
                              ((uint64_t)l->out.c << 32) ^ (uint64_t)l->out.h,
                              ((uint64_t)l->out.w << 32) ^ (uint64_t)l->out.d);
        for (int j = 0; j < l->num_inputs; j++) h = rng_hash(h, (uint64_t)l->inputs[j]->index, j, 1);
        h = rng_hash(h, l->num_params, (uint64_t)l->exchange, l == net->output);
        if (batchnorm_synchronised(l)) h = rng_hash(h, 1, 0, 2); /* statistics over ranks */
        if (i == 0) /* network-wide settings that must agree */
            h = rng_hash(h, ((uint64_t)net->loss << 8) ^ (uint64_t)net->optimizer,
                         (uint64_t)net->global_max_batch, net->opt.seed ^ net->opt.bucket_bytes);
        out[i] = h;
    }
}
