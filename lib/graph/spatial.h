/* Spatial and hybrid parallelism, the graph's side (pcnn.h section 9;
 * seeds 002 and 003): the distributions set before finalize, the plan
 * that runs every layer on this rank's box (a local twin of the layer,
 * layers/clone.h, fed by halo exchanges and shuffles, parallel/box_move.h),
 * and the passes of a training step.
 *
 * A network is "spatial" once finalize resolved a distribution other than
 * all {P, 1, 1, 1}; otherwise none of this runs and the data-parallel
 * path is untouched. */
#ifndef PCNN_GRAPH_SPATIAL_H
#define PCNN_GRAPH_SPATIAL_H

#include <stdbool.h>

#include "../parallel/box_move.h"
#include "../parallel/exchange.h"
#include "../parallel/layout.h"
#include "net.h"

/* One border cell of a windowed layer's box under overlap
 * (PCNN_OPT_HALO_OVERLAP): a band along a border, whose windows read the
 * halo (the interior's do not). */
typedef struct spatial_region {
    layer_list list;        /* its twin and stand-in input */
    pcnn_layer *twin;       /* in place: without bias, on the halo alone */
    box out, in;            /* its outputs and the inputs they read (D, H, W) */
    float *grads;           /* its share of the weight gradient */
} spatial_region;

/* One layer under its distribution. */
typedef struct spatial_layer {
    int parts[LAYOUT_DIMS]; /* the distribution it runs with */
    bool set;               /* set on this layer by the user */
    bool direct;            /* unsplit, inputs alike: the original layer runs */
    bool windowed;          /* convolution or pooling: inputs extended by the halo */
    layer_window win;       /* its window per D, H, W and the padding value read at the
                               sample's borders (layer_caps.h) */
    bool group_bn;          /* batch norm reducing over the sample group */
    bool box_dropout;       /* a split dropout: the original runs on the box */
    bool box_dense;         /* a dense layer multiplying each rank's box of the
                               flatten's input (spatial_dense.c) */
    bool others_zero;       /* its weight gradient holds zeros outside this rank's
                               columns (no backward has to write them again) */
    bool folded;            /* that flatten: it neither moves nor runs */
    /* A convolution run on its input's block in place (spatial_in_place.c):
     * its twin keeps the padding and reads the producer's buffer, zeros
     * where the halo lies; the border cells (regions) add the halo's part.
     * Only the halo moves: no copy of the block, forward or back. */
    bool in_place;
    layer_list twin_list;   /* the twin and its stand-in inputs (clone.h) */
    pcnn_layer *twin;
    bool moves[2];          /* input j arrives through a box move */
    float *in_y[2];         /* staging of a moved input, laid over need[j][rank]:
                               the shared in_y_shared[j], or its own */
    size_t staged_floats[2]; /* of that staging */
    /* Its own staging, kept from its forward pass to its backward (no
     * second copy and halo exchange there): where all staged layers' own
     * take at most a KEEP_SHARE of this rank's activations. */
    bool keeps_input;
    float *in_dy[2];        /* its gradient: the shared dy_scratch[j] */
    /* PCNN_OPT_HALO_SCHEDULE 0: the halo of input 0 in phases, one per
     * split windowed dimension, with that dimension's neighbours only; the
     * box grows to phase_box[p] after phase p (the last: need[0]), so
     * corners arrive through the earlier phases (none where a stride
     * would leave a neighbour's point undelivered: spatial_plan.c). */
    int num_phases, phase_dim[3];
    box *phase_box[3];
    bool *peers[3];
    /* Overlap (spatial_halo.c): the whole box's twin computes while the
     * halo travels, the border cells again after.  `overlap`: planned;
     * overlap_on: this step; trial: the layer's seconds (moves and both
     * passes) in the trial steps without [0] and with [1] overlap, from
     * which spatial_begin_step keeps the faster. */
    spatial_region *regions; /* the border cells (overlap or in place), or NULL */
    int num_regions;
    bool overlap, overlap_on;
    double trial[2];
    box mine;               /* this rank's box (the step's samples) */
    box *have;              /* every rank's box of the output, this step */
    box *need[2];           /* every rank's box of input j it reads, this step */
} spatial_layer;

typedef struct spatial {
    /* Before finalize: the network's distribution and per-layer ones. */
    int net_parts[LAYOUT_DIMS];
    bool net_set;            /* net_parts set by the user (else {P, 1, 1, 1} at finalize) */
    int (*layer_parts)[LAYOUT_DIMS];
    int layer_cap;
    /* Staged layers keep their inputs for backward (spatial_layer.keeps_input):
     * 0 where they fit KEEP_SHARE (spatial_plan.c), 1 always, -1 never; the
     * tests set it to run both ways. */
    int keep_inputs;

    /* After finalize. */
    bool active;
    int ranks, rank;
    int groups, group_size;  /* of the input's distribution */
    spatial_layer *layers;
    int count;
    box_mover *mover;
    reducer *group_reducer;  /* batch norm over a sample group (NULL: none) */
    float *workspace;
    size_t workspace_floats;
    /* The gradients of moved inputs live only during their layer's
     * backward and its move back: one buffer per input slot serves all. */
    float *dy_scratch[2];
    size_t dy_scratch_floats[2];
    /* Moved inputs likewise: filled for a layer's forward, and again for
     * its backward. */
    float *in_y_shared[2];
    size_t in_y_floats[2];
    int in_y_owner[2];       /* the layer whose input it holds (-1: none) */
    /* A region's input, output, output gradient and input gradient. */
    float *region_x, *region_y, *region_dy, *region_dx;
    size_t region_in_floats, region_out_floats;
    /* spatial_gather_output's boxes (every rank's) and staging. */
    box *gather_boxes;
    float *gather_staged;
    /* Box dense layers (spatial_dense.c): K x batch rows, and their sums. */
    float *box_dense_rows;
    double *box_dense_sums;
    size_t box_dense_count;
    size_t bytes[PCNN_MEMORY_PARTS]; /* what the spatial plan allocated, by part */

    /* This step. */
    int batch;               /* global */
    int *group_start, *group_count;
    int *fixed_start, *fixed_count; /* a stand-in split for step-independent boxes */
    pcnn_status failed;      /* a halo or group reduction gave up */
    int passes;              /* backward passes so far (the overlap trials) */
    bool overlap_decided;    /* each overlapped layer kept the faster way */
    bool keep_stats;         /* a training-mode pass leaving running statistics alone */
} spatial;

/* Before finalize (spatial_api.c). */
pcnn_status spatial_config(pcnn_net *net, spatial **out, const char *func);
void spatial_destroy(pcnn_net *net);

/* Finalize (spatial_plan.c).  spatial_resolve: each layer's distribution,
 * checked (a layer too small for its parts, a kind that cannot split);
 * sets sp->active and this rank's largest batch *local.  Pure, the same on
 * every rank.  spatial_layer_floats: floats of a layer's output (and dy)
 * buffers.  spatial_plan: the twins, staging, the movers (collective). */
pcnn_status spatial_resolve(pcnn_net *net, int max_batch, int *local);
size_t spatial_layer_floats(const pcnn_net *net, const pcnn_layer *l);
pcnn_status spatial_plan(pcnn_net *net, const plan_ctx *p);
/* Mark the dense layers that run on each rank's box of a split input
 * through a flatten (spatial_dense.c), and those flattens: in resolve. */
void spatial_plan_box_dense(pcnn_net *net);
void spatial_release(pcnn_net *net);
/* need[q]: the box of layer i's input j that rank q reads, from have[q]. */
void spatial_need_boxes(const pcnn_net *net, int i, int j, const box *have, box *need);
/* Finalize (spatial_reserve.c): the floats the mover sends and receives in
 * the largest move of any step on this rank, reserved once (a move that
 * allocated could fail on one rank alone); UNSUPPORTED when a message
 * would exceed MPI's int count. */
pcnn_status spatial_move_floats(const pcnn_net *net, size_t *floats);
/* Layer i's box of its input after phase f of its dimension-ordered halo,
 * for a rank holding `have` of the input and reading `need` (spatial_run.c). */
box spatial_phase_box(const spatial_layer *sl, int f, const box *have, const box *need);
static inline bool net_is_spatial(const pcnn_net *net)
{
    return net->spatial && net->spatial->active;
}
/* Does finalize set up the original layer l (false: its twin runs
 * instead; batch norms keep their running statistics in the original)? */
bool spatial_runs_original(const pcnn_net *net, const pcnn_layer *l);
/* Words for the structure fingerprint: layer i's distribution. */
uint64_t spatial_fingerprint(const pcnn_net *net, int i);

/* A training step (spatial_run.c), between run.c's agreements. */
pcnn_status spatial_begin_step(pcnn_net *net, const char *func);
/* Stage the step's input: this rank's box of the group's n whole samples
 * (NCDHW), or of box_input, the box itself.  With `check`, false when the
 * staged values are not all finite (the ranks' boxes together cover the
 * samples, so each checks only its own). */
bool spatial_load_input(pcnn_net *net, int n, const float *x, bool box_input, bool check);
pcnn_status spatial_forward(pcnn_net *net, const run_reduce *global, bool train);
/* A box dense layer's passes (spatial_dense.c), within spatial_forward and
 * spatial_backward; collective over the ranks: a rank whose step `failed`
 * joins with nothing. */
/* The columns of box dense layer i's weights each rank's box holds
 * (parallel/exchange.h), for its gradient exchange; the tables are
 * allocated in *tables, which the caller frees with mem_free. */
pcnn_status spatial_box_dense_columns(const pcnn_net *net, int i, exchange_columns *out,
                                      int **tables);
pcnn_status spatial_box_dense_forward(pcnn_net *net, int i, bool train, bool failed);
pcnn_status spatial_box_dense_backward(pcnn_net *net, int i, bool failed);
/* The gradients were written whole (summed over the ranks): box dense
 * layers zero the others' columns again at their next backward. */
void spatial_box_dense_grads_written(pcnn_net *net);
/* After an inference forward: the group's n outputs, NCHW, into out. */
pcnn_status spatial_gather_output(pcnn_net *net, int n, float *out);
double spatial_loss(pcnn_net *net, const int32_t *labels, const float *targets);
pcnn_status spatial_backward(pcnn_net *net, const run_reduce *global);

/* Moving inputs (spatial_halo.c).  spatial_move_in: input j of layer i
 * into its box (halo included); spatial_move_back: its gradient back to
 * the owners, added.  The overlapped passes of a layer with regions:
 * *exposed receives the seconds spent waiting for halos. */
pcnn_status spatial_move_in(pcnn_net *net, int i, int j);
pcnn_status spatial_move_back(pcnn_net *net, int i, int j);
/* A halo exchange of layer i in flight over [t0, t1], `exposed` seconds
 * of it waited for: timed and traced as such; returns exposed. */
double spatial_timed_halo(pcnn_net *net, int i, double t0, double t1, double exposed);
/* Input j of layer i was staged (st: or failed): the shared staging
 * now holds it, unless the layer keeps its own. */
void spatial_note_staged(spatial *sp, int i, int j, pcnn_status st);
/* Padding values where input j's box of layer i leaves the sample. */
void spatial_fill_padding(pcnn_net *net, int i, int j);
/* Does layer i's input halo travel in bf16 (box_move_args.bf16)?  With
 * PCNN_OPT_PRECISION bf16, for convolutions: they round their inputs to
 * bf16 anyway.  Pools, other consumers and every gradient going back stay
 * fp32 (a max pool would compare rounded with unrounded values; the
 * gradients are summed by their owners). */
bool spatial_halo_bf16(const pcnn_net *net, int i);
/* A border cell of layer i: forward, over the layer's output (halo_only:
 * its inputs on the halo alone, the rest read as zeros, and its output
 * added); backward, its input gradient on the `slabs` boxes of `halo`
 * added into the halo's gradient buffer (halo_only: and its weight
 * gradient, of the halo alone, kept in the cell's grads). */
void spatial_cell_forward(pcnn_net *net, int i, const spatial_region *g, const run_ctx *ctx,
                          bool halo_only);
void spatial_cell_backward(pcnn_net *net, int i, const spatial_region *g, const run_ctx *ctx,
                           const box *halo, int slabs, bool halo_only);
/* Layer i run on its input's block in place (spatial_in_place.c), the
 * halo overlapped with the block's computation unless
 * PCNN_OPT_HALO_OVERLAP is off; *exposed receives the seconds spent
 * waiting for halos. */
pcnn_status spatial_in_place_forward(pcnn_net *net, int i, const run_ctx *ctx, double *exposed);
pcnn_status spatial_in_place_backward(pcnn_net *net, int i, const run_ctx *ctx,
                                      double *exposed);
/* Input j of layer i into the shared staging again, before its backward. */
pcnn_status spatial_restage(pcnn_net *net, int i, int j);
pcnn_status spatial_overlapped_forward(pcnn_net *net, int i, const run_ctx *ctx,
                                       double *exposed);
pcnn_status spatial_overlapped_backward(pcnn_net *net, int i, const run_ctx *ctx,
                                        double *exposed);

/* UNSUPPORTED for the calls a spatial network cannot make (pcnn_net_predict:
 * pcnn_net_predict_parallel infers under the distribution). */
pcnn_status spatial_refuse(const pcnn_net *net, const char *func);

/* Failing together (spatial_eval.c).  spatial_async_status: the failure of
 * a halo, shuffle or group reduction (sticky: the ranks no longer agree on
 * what comes next), part of net_async_status.  spatial_checked: st, or that
 * failure, and then the exchange is aborted (it must not wait either). */
pcnn_status spatial_async_status(const pcnn_net *net);
pcnn_status spatial_checked(pcnn_net *net, pcnn_status st);

/* The other collective calls (spatial_eval.c), every rank of a sample
 * group passing the group's samples.  spatial_compute: pcnn_net_compute_loss
 * (gradients false) and pcnn_net_compute_gradients: the loss over all the
 * groups' samples and the weight gradients summed over every rank, as one
 * rank computes them on the whole batch; no parameter or running statistic
 * changes.  spatial_stage: this rank's box of the dataset's positions
 * [start, start + count) into the staging buffers (file-backed volumes:
 * only the box is read).  spatial_evaluate: pcnn_net_evaluate's sums (loss,
 * correct) over this rank's samples of the output, the groups sharing each
 * chunk of global_max_batch samples. */
pcnn_status spatial_compute(pcnn_net *net, const char *func, bool gradients, int n,
                            const float *x, const int32_t *labels, const float *targets,
                            float *loss_out);
pcnn_status spatial_stage(pcnn_net *net, const pcnn_dataset *d, int start, int count);
pcnn_status spatial_evaluate(pcnn_net *net, const pcnn_dataset *d, double *sums,
                             const char *func);

#endif
