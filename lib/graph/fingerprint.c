/* What every rank must agree on at finalize, compared word by word so that
 * a mismatch names the option or the layer that differs and its values,
 * instead of training garbage or hanging.
 *
 * Settings: everything that changes the numbers every rank computes the
 * same way (optimizer, its hyper-parameters, the learning-rate schedule,
 * the step counter, the seed, the loss, numeric checks) or the pattern of
 * communication (overlap, engine request, bucket bytes, the network's
 * exchange, the global batch, a spatial network's halo options, tracing
 * on or off: a tracing finalize pings rank 0 for its clock).  Left
 * out, because they change neither the replicas' agreement nor the
 * collectives: PCNN_OPT_THREADS and the
 * convolution algorithm (only the summation order of a rank's own
 * gradient, which the exchange then sums identically everywhere),
 * KEEP_IM2COL, COMM_CORE, TIMEOUT_MS and TRACE_EVENTS' buffer size.
 * Layers: kind and configuration, output shape, inputs, exchange,
 * parameter count, which layer is the output, batch-norm
 * synchronisation, and the layer's own precision. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../core/error.h"
#include "../core/hash.h"
#include "../core/memory.h"
#include "../layers/batchnorm.h"
#include "net.h"
#include "spatial.h"

typedef enum word_kind { WORD_INT, WORD_DOUBLE, WORD_HASH } word_kind;

typedef struct word_name {
    const char *name;
    word_kind kind;
} word_name;

static uint64_t bits_of(double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

static uint64_t hash_text(uint64_t h, const char *s) { return hash_fnv1a(h, s, strlen(s) + 1); }

enum { SETTINGS = 24 };

static const word_name setting_names[SETTINGS] = {
    {"the number of layers", WORD_INT},
    {"the loss (pcnn_net_set_loss)", WORD_INT},
    {"the optimizer (pcnn_net_set_optimizer)", WORD_INT},
    {"max_batch of pcnn_net_finalize", WORD_INT},
    {"PCNN_OPT_SEED", WORD_INT},
    {"PCNN_OPT_BUCKET_BYTES", WORD_INT},
    {"PCNN_OPT_OVERLAP", WORD_INT},
    {"PCNN_OPT_ENGINE", WORD_INT},
    {"the network's exchange (pcnn_net_set_exchange)", WORD_INT},
    {"PCNN_OPT_CHECK_NUMERICS", WORD_INT},
    {"PCNN_OPT_STEP", WORD_INT},
    {"PCNN_OPT_LEARNING_RATE", WORD_DOUBLE},
    {"PCNN_OPT_WEIGHT_DECAY", WORD_DOUBLE},
    {"PCNN_OPT_MOMENTUM", WORD_DOUBLE},
    {"PCNN_OPT_ADAM_BETA1", WORD_DOUBLE},
    {"PCNN_OPT_ADAM_BETA2", WORD_DOUBLE},
    {"PCNN_OPT_ADAM_EPSILON", WORD_DOUBLE},
    {"PCNN_OPT_WARMUP_STEPS and PCNN_OPT_DECAY_EVERY_STEPS", WORD_HASH},
    {"PCNN_OPT_DECAY_FACTOR", WORD_DOUBLE},
    {"PCNN_OPT_HALO_OVERLAP", WORD_INT},
    {"PCNN_OPT_HALO_SCHEDULE", WORD_INT},
    {"PCNN_OPT_SPATIAL_FALLBACK", WORD_INT},
    {"PCNN_OPT_TRACE_EVENTS (tracing on: 1, off: 0)", WORD_INT},
    {"PCNN_OPT_PRECISION", WORD_INT},
};

static void settings_of(const pcnn_net *net, uint64_t *w)
{
    const net_options *o = &net->opt;
    const bool spatial = net_is_spatial(net);
    const uint64_t words[SETTINGS] = {
        (uint64_t)net->layers.count, (uint64_t)net->loss, (uint64_t)net->optimizer,
        (uint64_t)net->global_max_batch, o->seed, (uint64_t)o->bucket_bytes,
        (uint64_t)o->overlap, (uint64_t)o->engine, (uint64_t)o->exchange,
        (uint64_t)o->check_numerics, net->step, bits_of(o->learning_rate),
        bits_of(o->weight_decay), bits_of(o->hyper.momentum), bits_of(o->hyper.beta1),
        bits_of(o->hyper.beta2), bits_of(o->hyper.epsilon),
        hash_fnv1a_u64(hash_fnv1a_u64(HASH_FNV1A_BASIS, (uint64_t)o->warmup_steps),
                       (uint64_t)o->decay_every_steps),
        bits_of(o->decay_factor),
        /* The halo's messages (its regions and phases) and the layers'
         * distributions: a spatial network's only, the others ignore them. */
        spatial ? (uint64_t)o->halo_overlap : 0, spatial ? (uint64_t)o->halo_schedule : 0,
        spatial ? (uint64_t)o->spatial_fallback : 0, o->trace_events > 0,
        (uint64_t)o->precision};
    memcpy(w, words, sizeof words);
}

enum { LAYER_WORDS = 12 };

static const word_name layer_word_names[LAYER_WORDS] = {
    {"output channels", WORD_INT},        {"output height", WORD_INT},
    {"output width", WORD_INT},           {"output depth", WORD_INT},
    {"kind or configuration", WORD_HASH}, {"inputs", WORD_HASH},
    {"exchange (pcnn_layer_set_exchange or eq. 4.8)", WORD_INT},
    {"parameter count", WORD_INT},        {"being the output (pcnn_net_set_loss)", WORD_INT},
    {"batch-norm statistics synchronised (PCNN_OPT_SYNC_BATCHNORM)", WORD_INT},
    {"distribution (pcnn_net_set_distribution, pcnn_layer_set_distribution)", WORD_HASH},
    {"precision (pcnn_layer_set_precision; here 0: the network's, 1: fp32, 2: bf16)", WORD_INT},
};

static void layer_words(const pcnn_net *net, uint64_t *w)
{
    for (int i = 0; i < net->layers.count; i++, w += LAYER_WORDS) {
        const pcnn_layer *l = net->layers.items[i];
        char config[128] = "";
        if (l->ops->describe) l->ops->describe(l, config, sizeof config);
        uint64_t inputs = HASH_FNV1A_BASIS;
        for (int j = 0; j < l->num_inputs; j++)
            inputs = hash_fnv1a_u64(inputs, (uint64_t)l->inputs[j]->index);
        const uint64_t words[LAYER_WORDS] = {
            (uint64_t)l->out.c, (uint64_t)l->out.h, (uint64_t)l->out.w, (uint64_t)l->out.d,
            hash_text(hash_text(HASH_FNV1A_BASIS, l->ops->kind), config), inputs,
            (uint64_t)l->exchange, l->num_params, l == net->output,
            batchnorm_synchronised(l), spatial_fingerprint(net, i),
            (uint64_t)(l->precision + 1)};
        memcpy(w, words, sizeof words);
    }
}

static void format_word(uint64_t w, word_kind kind, char *out, size_t size)
{
    double d;
    memcpy(&d, &w, sizeof d);
    if (kind == WORD_INT) snprintf(out, size, "%" PRIu64, w);
    else if (kind == WORD_DOUBLE) format_double(d, out, size);
    else snprintf(out, size, "%016" PRIx64, w);
}

static pcnn_status name_difference(const word_difference *d, const word_name *name,
                                   const char *where, const char *func)
{
    char a[32], b[32];
    format_word(d->first, name->kind, a, sizeof a);
    format_word(d->other, name->kind, b, sizeof b);
    const char *what = where[0] ? "ranks built different networks" : "ranks configured the "
                                                                      "network differently";
    if (name->kind == WORD_HASH)
        return error_set(PCNN_ERR_MISMATCH, func, "%s: %s%s differs between rank 0 and rank %d "
                         "(fingerprints %s and %s)", what, where, name->name, d->rank, a, b);
    return error_set(PCNN_ERR_MISMATCH, func, "%s: %s%s: %s on rank 0, %s on rank %d", what,
                     where, name->name, a, b, d->rank);
}

pcnn_status net_check_same_network(pcnn_net *net, const char *func)
{
    const long timeout = net->opt.timeout_ms;
    uint64_t settings[SETTINGS];
    settings_of(net, settings);
    word_difference d;
    pcnn_status st = agree_words(net->comm, PCNN_OK, settings, SETTINGS, timeout, func, &d);
    if (st == PCNN_ERR_MISMATCH) return name_difference(&d, &setting_names[d.index], "", func);
    TRY(st);
    /* Equal layer counts: the layer tables have the same size. */
    const int count = net->layers.count * LAYER_WORDS;
    uint64_t *words = mem_calloc((size_t)count, sizeof *words);
    if (words) layer_words(net, words);
    st = words ? PCNN_OK : FAIL(PCNN_ERR_OUT_OF_MEMORY, "network fingerprint");
    st = agree_words(net->comm, st, words, count, timeout, func, &d);
    if (st == PCNN_ERR_MISMATCH) {
        const pcnn_layer *l = net->layers.items[d.index / LAYER_WORDS];
        char where[96];
        snprintf(where, sizeof where, "layer %d (%s here): ", l->index, l->ops->kind);
        st = name_difference(&d, &layer_word_names[d.index % LAYER_WORDS], where, func);
    }
    if (!comm_gave_up(net->comm)) mem_free(words);
    return st;
}
