/* Datasets fail together (graph/data_agree.c). */
#ifndef PCNN_GRAPH_DATA_AGREE_H
#define PCNN_GRAPH_DATA_AGREE_H

#include "pcnn.h"

/* Before a collective pass over `data` (train_epoch, evaluate, the
 * scheduler's epochs): every rank of the network's communicator must hold
 * the same dataset (length, sample shape, element type of its files,
 * targets: their kind, count and values, the current order) and plan the
 * same batches (batch, min_local); sharded (pcnn_dataset_set_sharded), the
 * same mode, and all but the length, target values and order, which are
 * each rank's shard's own.  PCNN_ERR_MISMATCH on every rank
 * otherwise, naming the first difference with rank 0's value and the
 * other rank's.  Collective (timed as the network's); PCNN_OK at once
 * without a communicator of more than one rank. */
pcnn_status net_agree_dataset(pcnn_net *net, const pcnn_dataset *data, int batch,
                              int min_local, const char *func);

#endif
