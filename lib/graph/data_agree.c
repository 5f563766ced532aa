/* Datasets fail together: the words every rank's dataset and batch plan
 * are compared by before a collective pass, so that a rank with another
 * dataset (a shard of another length, other targets, another shuffle)
 * fails with a message on every rank instead of hanging or returning a
 * "global" loss that differs between ranks. */
#include "data_agree.h"

#include <stdio.h>

#include "../core/error.h"
#include "../core/hash.h"
#include "../data/dataset.h"
#include "../parallel/parallel.h"
#include "graph.h"
#include "net.h"

enum { W_SHARDED, W_N, W_C, W_D, W_H, W_W, W_ELEM, W_TARGETS, W_VALUES, W_ORDER, W_BATCH,
       W_MIN_LOCAL, W_COUNT };

static const char *const word_names[W_COUNT] = {
    "sharded mode (pcnn_dataset_set_sharded)", "length (samples)", "channels", "depth",
    "height", "width",
    "element type of the files", "targets", "target values (hash)",
    "sample order (hash: shuffled with another seed or epoch?)", "batch",
    "minimum samples per computing rank"};

static void describe(int word, uint64_t v, char *buf, size_t size)
{
    if (word == W_ELEM) snprintf(buf, size, "%s", data_elem_name((int)v));
    else if (word == W_TARGETS && v == 0) snprintf(buf, size, "class labels");
    else if (word == W_TARGETS) snprintf(buf, size, "%llu float targets per sample",
                                         (unsigned long long)v);
    else if (word == W_VALUES || word == W_ORDER) snprintf(buf, size, "%016llx",
                                                           (unsigned long long)v);
    else snprintf(buf, size, "%llu", (unsigned long long)v);
}

pcnn_status net_agree_dataset(pcnn_net *net, const pcnn_dataset *data, int batch,
                              int min_local, const char *func)
{
    if (!net->comm || net->comm->size < 2) return PCNN_OK;
    uint64_t w[W_COUNT];
    w[W_N] = (uint64_t)data->n;
    w[W_C] = (uint64_t)data->c;
    w[W_D] = (uint64_t)data->d;
    w[W_H] = (uint64_t)data->h;
    w[W_W] = (uint64_t)data->w;
    w[W_ELEM] = (uint64_t)data->elem;
    w[W_TARGETS] = data->labels ? 0 : (uint64_t)data->target_count;
    w[W_VALUES] = data->labels
                      ? hash_fnv1a(HASH_FNV1A_BASIS, data->labels,
                                   (size_t)data->n * sizeof *data->labels)
                      : hash_fnv1a(HASH_FNV1A_BASIS, data->targets,
                                   (size_t)data->n * (size_t)data->target_count *
                                       sizeof *data->targets);
    w[W_ORDER] = hash_fnv1a(HASH_FNV1A_BASIS, data->order, (size_t)data->n * sizeof *data->order);
    w[W_BATCH] = (uint64_t)batch;
    w[W_MIN_LOCAL] = (uint64_t)min_local;
    w[W_SHARDED] = (uint64_t)data->sharded;
    if (data->sharded) w[W_N] = w[W_VALUES] = w[W_ORDER] = 0; /* each rank its own shard */
    word_difference d;
    const pcnn_status st = net_agree_words(net, w, W_COUNT, func, &d);
    if (st != PCNN_ERR_MISMATCH) return st;
    char first[64], other[64];
    const int k = d.index >= 0 && d.index < W_COUNT ? d.index : W_N;
    describe(k, d.first, first, sizeof first);
    describe(k, d.other, other, sizeof other);
    return error_set(PCNN_ERR_MISMATCH, func, "the ranks' datasets or batches differ: %s %s on "
                     "rank 0, %s on rank %d (every rank must pass the same dataset, in the "
                     "same order, with the same batch, or each its shard in sharded mode)",
                     word_names[k], first, other, d.rank);
}
