/* The communication-efficient gradient of a dense layer (seed 001 section
 * 4.1.1, fig. 4.1).  Rank r owns the weight columns of its feature slice
 * F_r.  Per step:
 *   forward   all-to-all of the input activations A (F x b_q per rank):
 *             rank r receives rows F_r from every rank (F_r x B in blocks);
 *   backward  all-gather of the output errors E (K x b_q): every rank gets
 *             K x B (in blocks);
 *   update    dW[:, F_r] = sum_q E_q A_q^T (one GEMM per source rank),
 *             db from the gathered errors on every rank, the optimizer on the
 *             packed slice, then an all-gather of the packed weight slices
 *             which are unpacked into W before the layer's next forward. */
#ifndef PCNN_PARALLEL_FC_EXCHANGE_H
#define PCNN_PARALLEL_FC_EXCHANGE_H

#include "exchange.h"

/* Plan buffers and slices for the dense layer of bucket b; sets b's
 * owned_count (optimizer state) and adds the per-step bytes to the plan. */
pcnn_status fc_plan(pcnn_net *net, bucket *b, exchange_plan *plan);
void fc_free(bucket *b);
void fc_prepare_requests(bucket *b);

/* The batch split of this step (samples per rank, from the agreement). */
void fc_set_counts(bucket *b, const double *gather, int ranks, int rank);

/* Hooks of the schedule. */
void fc_post_activations(pcnn_net *net, bucket *b, engine *e);
void fc_capture_errors(pcnn_net *net, bucket *b);
void fc_post_errors(bucket *b, engine *e);
void fc_update(pcnn_net *net, bucket *b);
void fc_unpack_weights(pcnn_net *net, const bucket *b);

#endif
