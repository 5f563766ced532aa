/* The layer interface: what every layer type offers the network graph.
 *
 * One file per layer type (conv2d.c, relu.c, ...), each holding the
 * <kind>_add() adder (layers.h; the public pcnn_<kind>() constructors in
 * graph/layer_api.c wrap it), its shape checks, and forward/backward
 * functions of the same shape (darknet's make/forward/backward, behind
 * opaque handles).
 *
 * Activation layout inside the library is channel-major, "CNHW": element
 * (n, c, h, w) of a batch of N samples of shape (C, H, W) lives at
 *     ((c * N + n) * H + h) * W + w.
 * A convolution's GEMM output W[Cout x CKK] * col[CKK x N*Ho*Wo] is then
 * already the next layer's input, with no permutation; batch norm sees each
 * channel as one contiguous run of N*H*W values; a dense layer's output
 * (K, 1, 1) is the K x N matrix of its GEMM.  Buffers are sized for
 * max_batch samples, but a batch of n < max_batch samples is stored
 * compactly with N = n.  The graph converts from and to the public NCHW
 * layout at the network's input and output only.
 */
#ifndef PCNN_LAYERS_LAYER_H
#define PCNN_LAYERS_LAYER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pcnn.h"
#include "layer_caps.h"

/* The most inputs a layer takes (a concatenation's; add has 2). */
#define LAYER_MAX_INPUTS 64

/* The shape of one sample.  d == 1 for 2D layers (room for 3D). */
typedef struct shape {
    int c, d, h, w;
} shape;

static inline size_t shape_spatial(shape s) { return (size_t)s.d * (size_t)s.h * (size_t)s.w; }
static inline size_t shape_size(shape s) { return (size_t)s.c * shape_spatial(s); }
static inline shape shape_2d(int c, int h, int w)
{
    shape s = {c, 1, h, w};
    return s;
}

/* What a layer may know when the network is planned. */
typedef struct plan_ctx {
    int max_batch;
    int threads;      /* the network's resolved OpenMP thread count */
    bool keep_im2col; /* PCNN_OPT_KEEP_IM2COL */
    int conv_algorithm; /* PCNN_OPT_CONV_ALGORITHM: 0 auto, 1 GEMM, 2 direct, 3 taps */
    bool sync_batchnorm; /* PCNN_OPT_SYNC_BATCHNORM: the batch norms' default */
    size_t conv3d_col_budget; /* floats; 0: CONV3D_COL_BUDGET_FLOATS (layers.h) */
    int precision; /* PCNN_OPT_PRECISION: the layers' default (a pcnn_precision) */
    bool measure;     /* automatic choices may be timed (graph/conv_measure.c) */
} plan_ctx;

/* A parallel training step's door to the other ranks that share the batch,
 * for layers whose statistics span the global batch (synchronised batch
 * norm).  Every rank makes the same calls in the same order with the same
 * counts -- a rank without samples too: the graph then runs such layers
 * with n == 0, contributing nothing.  After a failure (a collective not
 * done within PCNN_OPT_TIMEOUT_MS, an MPI error) every call fails at once
 * for the rest of the step; the graph then fails the step on every rank,
 * so a layer need only keep going with what it has. */
typedef struct run_reduce {
    /* Every rank's `count` doubles, rank after rank (ranks * count values,
     * the same bits on every rank), valid until the next call; NULL: failed. */
    const double *(*gather)(void *arg, const double *mine, int count);
    /* Replace values[0..count) by their sums over the ranks; false: failed
     * (values unchanged). */
    bool (*sum)(void *arg, double *values, int count);
    void *arg;
    int ranks;
} run_reduce;

/* What a layer may know while it runs. */
typedef struct run_ctx {
    int n;            /* samples in this batch, 1..max_batch; 0 only with
                           reduce, for layers that join its reductions */
    bool train;       /* training mode: batch statistics, dropout on */
    bool update_stats; /* training mode only: update running statistics */
    bool exchange_step; /* a parallel training step: a layer whose exchange
                           computes its weight gradient from gathered data
                           (PCNN_EXCHANGE_FC_GRADIENT) leaves it alone */
    int threads;      /* OpenMP threads (GEMMs are partitioned over them) */
    uint64_t seed;    /* PCNN_OPT_SEED: dropout masks */
    uint64_t step;    /* the step counter: dropout masks */
    long sample_base; /* global index of this rank's first sample in the batch */
    float *workspace; /* shared scratch of max over layers' workspace_floats */
    const run_reduce *reduce; /* a parallel training step's reductions across
                                 ranks; NULL otherwise */
} run_ctx;

/* The layers of one network in order of addition (a topological order of
 * the DAG); it owns them.  frozen: the owning network is finalized, so no
 * layer may be added or reconfigured (the graph sets it). */
typedef struct layer_list {
    pcnn_layer **items;
    int count, cap;
    bool frozen;
} layer_list;

typedef struct layer_ops {
    const char *kind; /* "conv2d", "relu", ... */

    /* Floats of shared scratch needed during forward or backward (reused by
     * every layer, contents not preserved between calls).  NULL: none. */
    size_t (*workspace_floats)(const pcnn_layer *l, const plan_ctx *p);

    /* Decide how the layer will run (its algorithm) from its shape and the
     * plan, storing the decision in l->priv and a short line in
     * l->decision.kernel for the summary.  Allocates nothing, cannot fail; called for every
     * layer before any setup, and setup and workspace_floats size buffers
     * from the decision.  NULL: nothing to decide. */
    void (*decide)(pcnn_layer *l, const plan_ctx *p);

    /* The algorithms (PCNN_OPT_CONV_ALGORITHM values, up to
     * CONV_MAX_CANDIDATES) that decide found worth timing because its rules
     * were unsure, into algos; 0: none.  setup and workspace_floats then
     * size for every one of them.  NULL: none. */
    int (*candidates)(const pcnn_layer *l, int *algos);

    /* Switch to one of those candidates (finalize only, after setup):
     * forward and backward then run it; -1: back to the rules' choice.
     * why: NULL while the graph times it; else final (buffers only other
     * candidates need may go), the measured reason for the summary or ""
     * to keep the rules' reason. */
    void (*use_algorithm)(pcnn_layer *l, int algorithm, const char *why);

    /* Allocate the layer's own persistent buffers (kept im2col matrix, pool
     * argmax, batch-norm statistics, ...) with mem_alloc, adding their size
     * to l->buffer_bytes.  NULL: none.  Called once, at finalize. */
    pcnn_status (*setup)(pcnn_layer *l, const plan_ctx *p);

    /* Initialise l->params (num_params floats) deterministically from seed.
     * NULL: no parameters, or zeros are right. */
    void (*init_params)(pcnn_layer *l, uint64_t seed);

    /* y = f(inputs) for ctx->n samples.  Cannot fail: everything was
     * checked when the layer was added and when the network was planned. */
    void (*forward)(pcnn_layer *l, const run_ctx *ctx);

    /* From l->dy: write l->grads (overwrite, num_params floats) and, for
     * each input i with dx[i] != NULL, the gradient w.r.t. that input into
     * dx[i] — overwriting it, or adding to it if l->accumulate_dx[i].  dx
     * has num_inputs entries (callers size it LAYER_MAX_INPUTS). */
    void (*backward)(pcnn_layer *l, const run_ctx *ctx, float *const dx[]);

    /* Free l->priv and the buffers made by setup.  NULL: mem_free(l->priv). */
    void (*destroy)(pcnn_layer *l);

    /* Append the layer's configuration ("k=3 s=1 p=1 bias") to buf
     * (snprintf-style).  Used by summaries and the network hash.  NULL:
     * nothing to say. */
    void (*describe)(const pcnn_layer *l, char *buf, size_t size);

    /* What the kind declares for the spatial engine, the planner and the
     * performance model (layer_caps.h); split and cost are required. */
    layer_caps caps;
} layer_ops;

/* What finalize and the first steps decided for a layer, as fields: the
 * summary and the log compose the text (graph/decision.c), nothing parses
 * it back.  Each room writes its own fields. */
typedef struct layer_decision {
    char kernel[112];        /* the kind's decide(): its kernels and why; "" none */
    bool box_dense;          /* dense on each rank's box of its input (graph/spatial_dense.c) */
    bool exchanged;          /* a gradient exchange was decided (parallel, with parameters) */
    int exchange;            /* the pcnn_exchange decided */
    bool by_columns;         /* ... as an all-gather of each rank's columns */
    char exchange_by[48];    /* who decided: "" the heuristics, " (set by the user)", ... */
    char exchange_why[96];   /* the figures or the rule behind it; "" none */
    bool halo_in_place;      /* spatial: runs on its block in place (graph/spatial_plan.c) */
    signed char halo_overlap; /* spatial: 0 not tried, 1 kept, -1 turned off by its trials */
    double overlap_ms[2];    /* those trials' ms per step: with the overlap, without */
    bool measured;           /* its algorithm was timed at finalize (graph/conv_measure.c) */
    double measured_ms[4];   /* ... ms per forward + backward, the ranks' mean, by
                                PCNN_OPT_CONV_ALGORITHM value (0 unused; 0: no candidate) */
    signed char precision;   /* its products: -1 not stated (an fp32 network, no override,
                                or no products), 0 fp32, 1 bf16 (layer_decide_precision) */
    signed char bf16_path;   /* bf16: the gemm_bf16_path its products take */
} layer_decision;

struct pcnn_layer {
    const layer_ops *ops;
    layer_list *list;      /* the owner: ownership and finalized checks */
    int index;             /* position in the network; the input is 0 */
    int num_inputs;        /* 0 (the input), 1, 2 (add), up to LAYER_MAX_INPUTS (concat) */
    pcnn_layer *inputs[LAYER_MAX_INPUTS];
    shape out;             /* one output sample */
    int num_consumers;     /* layers fed by this one */

    /* Trainable parameters: this layer's slice of the network's flat
     * parameter and gradient arrays (set at finalize). */
    size_t num_params;
    size_t param_offset;
    float *params;
    float *grads;
    pcnn_init init;
    bool has_weights;      /* accepts pcnn_layer_set_init */
    pcnn_exchange exchange; /* how its gradients cross ranks */
    bool exchange_chosen;  /* set per layer: the network default does not apply */
    bool exchange_by_columns; /* each rank's weight gradient is complete on its own
                               * columns and zero elsewhere (graph/spatial_dense.c):
                               * all-to-all + all-gather then gathers the columns only */

    /* Buffers planned at finalize. */
    float *y;              /* output, max_batch samples, CNHW */
    float *dy;             /* dLoss/dy; the memory is shared between layers
                              whose gradient lifetimes do not overlap */
    bool accumulate_dx[LAYER_MAX_INPUTS]; /* set by the planner: add into inputs[i]->dy */
    /* A batch norm or residual add whose only consumer is the ReLU right
     * after it computes that ReLU too (one pass over memory instead of two,
     * each way): the planner links them, the producer keeps no output of
     * its own, and the ReLU's forward and backward do nothing. */
    pcnn_layer *fused_relu; /* batch norm or add: the ReLU it computes */
    pcnn_layer *fused_into; /* ReLU: the layer that computes it */
    size_t buffer_bytes;   /* bytes allocated by setup */
    layer_decision decision; /* what finalize and the first steps decided, typed */
    int algorithm;         /* what decide chose, typed: the PCNN_OPT_CONV_ALGORITHM value it
                              computes with (1 GEMM, 2 direct, 3 taps); 0: no such choice */
    int precision;         /* pcnn_layer_set_precision: -1 the network's (PCNN_OPT_PRECISION),
                              0 fp32, 1 bf16; only kinds with caps.bf16 take 1 */

    void *priv;            /* per-kind configuration and state */
};

/* For layer adders: validate that `list` can take a new layer fed by
 * `inputs` (non-NULL, of this list, not frozen) and that `out` is non-NULL.
 * `func` names the public function in messages. */
pcnn_status layer_check_new(const layer_list *list, pcnn_layer *const *inputs, int num_inputs,
                            pcnn_layer **out, const char *func);

/* Append a layer to the list.  priv (may be NULL) becomes owned by the
 * layer on success; on failure the caller still owns it.  Adders of
 * layers with weights set has_weights on the returned layer. */
pcnn_status layer_append(layer_list *list, const layer_ops *ops, pcnn_layer *const *inputs,
                         int num_inputs, shape out, size_t num_params, void *priv,
                         pcnn_layer **out_layer);

/* True when l is a layer of this list. */
bool layer_list_owns(const layer_list *list, const pcnn_layer *l);

/* Destroy every layer of the list and its storage; the list becomes empty. */
void layer_list_destroy(layer_list *list);

/* True for the network's input layer (layers/input.c). */
bool layer_is_input(const pcnn_layer *l);
bool layer_is_relu(const pcnn_layer *l); /* plain ReLU, not leaky */
bool layer_is_add(const pcnn_layer *l);  /* residual add, scaled or not */

/* Label for messages: "layer 3 (conv2d)". */
const char *layer_name(const pcnn_layer *l, char *buf, size_t size);

/* Whether l computes its products in bf16 under plan p: its own
 * precision, else the network's, for kinds with caps.bf16 (the others
 * are fp32 throughout).  Records the answer and the bf16 path in
 * l->decision for the summary; for the kinds' decide(). */
bool layer_decide_precision(pcnn_layer *l, const plan_ctx *p);

/* Fill n weights with the layer's init (He/Glorot) given fan_in/fan_out,
 * from a stream keyed by (seed, layer index). */
void layer_init_weights(const pcnn_layer *l, float *w, size_t n, size_t fan_in,
                        size_t fan_out, uint64_t seed);

#endif
