/* The distributed part of a checkpoint: optimizer state, of which each
 * rank may keep only the slices it owns (parallel/exchange.h), and the
 * per-rank batch-norm running statistics, moved between the ranks of a
 * network and the file's rank-independent layout (state of every parameter
 * in flat parameter order; statistics of every saving rank). */
#ifndef PCNN_IO_CHECKPOINT_STATE_H
#define PCNN_IO_CHECKPOINT_STATE_H

#include <stddef.h>

#include "checkpoint_format.h"
#include "pcnn.h"

/* What a save gathers on rank 0 (NULL where the network has none, and
 * everywhere on the other ranks but bn_mine). */
typedef struct state_gather {
    float *m, *v;        /* num_params floats each, flat parameter order */
    float *masters;      /* the fp32 master weights (bf16 on the wire), likewise */
    float *bn;           /* ranks x bn_floats, rank after rank */
    float *bn_mine;      /* this rank's statistics (every rank) */
    size_t bn_floats;    /* per rank */
    float *received;     /* rank 0: one other rank's optimizer state */
} state_gather;

/* Running statistics of all batch-norm layers of one rank, in floats. */
size_t state_bn_floats(pcnn_net *net);

/* Allocate this rank's buffers.  Local: the caller agrees on the result.
 * Errors: OUT_OF_MEMORY, UNSUPPORTED (statistics beyond one MPI message). */
pcnn_status state_gather_alloc(pcnn_net *net, state_gather *g, const char *func);

/* Fill rank 0's buffers.  Collective with a communicator (call only after
 * every rank's allocation succeeded).  Errors: MPI. */
pcnn_status state_gather_run(pcnn_net *net, state_gather *g, const char *func);

void state_gather_free(state_gather *g);

/* Take this rank's share of a verified file: optimizer state slices for
 * the current number of ranks and exchange plan, and batch-norm statistics
 * (this rank's own if the file has as many ranks, else their mean). */
void state_scatter(pcnn_net *net, const ckpt_view *v);

/* What a save writes as the parameters: the fp32 masters gathered (bf16
 * on the wire, where the parameters hold them rounded), else the
 * parameters. */
const float *state_saved_params(pcnn_net *net, const state_gather *g);

#endif
