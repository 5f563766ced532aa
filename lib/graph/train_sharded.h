/* Sharded data (pcnn_dataset_set_sharded) in train_epoch and evaluate
 * (graph/train_sharded.c).  Called after the ranks agreed the dataset
 * (net_agree_dataset) with data->sharded set; collective as their callers. */
#ifndef PCNN_GRAPH_TRAIN_SHARDED_H
#define PCNN_GRAPH_TRAIN_SHARDED_H

#include "pcnn.h"

/* One epoch: `batch` is the global batch, each rank its decomp_share of it
 * from its own shard, until the longest shard is done. */
pcnn_status sharded_train_epoch(pcnn_net *net, const pcnn_dataset *data, int batch,
                                int min_local, double *mean_loss, double *first_loss,
                                const char *func);
/* Loss and accuracy over the union of the shards, equal on every rank. */
pcnn_status sharded_evaluate(pcnn_net *net, const pcnn_dataset *data, double *loss,
                             double *accuracy, const char *func);

#endif
