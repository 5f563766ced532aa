/*
 * libpcnn — parallel training of convolutional neural networks on CPU clusters.
 *
 * One public header.  Organisation, top-down:
 *   1. version          macros and a runtime query
 *   2. error model      pcnn_status, pcnn_status_str, pcnn_last_error
 *   3. networks         build by calls, finalize, train, infer, parameters
 *   4. datasets         IDX (MNIST / Fashion-MNIST) and in-memory datasets
 *   5. parallel         communicators and data-parallel training over MPI
 *   6. timing           per-layer timing breakdown, overlap ratio, Chrome traces,
 *                       step and log callbacks
 *   7. checkpoints      atomic, checksummed save and restore
 *   8. scheduler        the adaptive batch-size scheduler
 *   9. experimental     only with PCNN_EXPERIMENTAL defined:
 *                       9.1 tuning knobs, 9.2 spatial and hybrid parallelism,
 *                       9.3 performance model, 9.4 automatic parallel strategy,
 *                       9.5 encoder-decoder layers, 9.6 HDF5 datasets
 *
 * Sections 1-8 are the stable API: within a major version, names, values
 * and behaviour only grow.  Section 9 may change in any minor version.
 *
 * Conventions that hold for every function below unless its comment says
 * otherwise:
 *   - Every function returns a pcnn_status; results come back through
 *     pointer arguments, which are written only on success.
 *   - On failure, pcnn_last_error() on the same thread returns a message
 *     naming the function called, the layer and the offending value.
 *   - Handles are opaque.  `create(..., &h)` allocates, `destroy(&h)` frees
 *     and sets the caller's pointer to NULL; destroying NULL (or a pointer to
 *     NULL) is a no-op.  A pcnn_layer is owned by its network and stays valid
 *     until the network is destroyed.
 *   - Calls on different handles may run concurrently from different
 *     threads; calls on the same handle must be serialised by the caller.
 *   - The library never prints, never calls exit() or abort(), and keeps no
 *     global state besides the per-thread last-error message and the OpenBLAS
 *     thread count (which OpenBLAS keeps process-wide; see PCNN_OPT_THREADS).
 *   - Tensors are float32, in NCHW order (sample-major), C-contiguous, as in
 *     PyTorch.  Parameters are laid out as in PyTorch: conv weight
 *     [Cout][Cin][K][K] then bias; dense weight [out][in] then bias;
 *     batch norm gamma then beta.
 *
 * Licensed under the BSD-3-Clause licence (see LICENSE).
 */
#ifndef PCNN_H
#define PCNN_H

/* C++: the C API of mpi.h only.  Open MPI's otherwise pulls in its C++
 * bindings (removed from the MPI standard in 3.0), which warn under -Wextra.
 * Without effect if the host included mpi.h first. */
#if defined(__cplusplus) && !defined(OMPI_SKIP_MPICXX)
#define OMPI_SKIP_MPICXX 1
#endif
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

/* The MPI libpcnn was built against (generated at build time).  A host
 * must compile against the same family's mpi.h: MPI_Comm and the MPI
 * constants differ between families, and a mix crashes at run time.  Use
 * the flags of `pkg-config --cflags pcnn` or CMake's pcnn::pcnn, which name
 * the right mpi.h. */
#include "pcnn_config.h"
#if PCNN_MPI_FAMILY == PCNN_MPI_FAMILY_MPICH && !defined(MPICH_VERSION)
#error "libpcnn was built against MPICH (pcnn_config.h) but this compilation's mpi.h is another MPI's (Open MPI?): compile with MPICH's mpi.h (pkg-config --cflags pcnn, mpicc.mpich) or use a libpcnn built with -Dmpi=openmpi"
#elif PCNN_MPI_FAMILY == PCNN_MPI_FAMILY_OPENMPI && !defined(OMPI_MAJOR_VERSION)
#error "libpcnn was built against Open MPI (pcnn_config.h) but this compilation's mpi.h is another MPI's (MPICH?): compile with Open MPI's mpi.h (pkg-config --cflags pcnn, mpicc.openmpi) or use a libpcnn built with -Dmpi=mpich"
#elif PCNN_MPI_FAMILY == PCNN_MPI_FAMILY_OPENMPI && OMPI_MAJOR_VERSION != PCNN_MPI_BUILD_MAJOR
#error "libpcnn was built against another major version of Open MPI (PCNN_MPI_BUILD_VERSION in pcnn_config.h) than this compilation's mpi.h (OMPI_MAJOR_VERSION): their ABIs differ; rebuild libpcnn against this Open MPI"
#endif

#ifdef __cplusplus
extern "C" {
#endif

#if defined(PCNN_BUILDING_LIBRARY) && defined(__GNUC__)
#define PCNN_API __attribute__((visibility("default")))
#else
#define PCNN_API
#endif

/* ------------------------------------------------------------------------ */
/* 1. Version                                                                */
/* ------------------------------------------------------------------------ */

#define PCNN_VERSION_MAJOR 0
#define PCNN_VERSION_MINOR 2
#define PCNN_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH: compare against pcnn_version_number(). */
#define PCNN_VERSION_NUMBER \
    (PCNN_VERSION_MAJOR * 10000 + PCNN_VERSION_MINOR * 100 + PCNN_VERSION_PATCH)

/* The version of the library actually loaded, as PCNN_VERSION_NUMBER encodes
 * it.  Hosts (and the Python binding) compare it with the header they were
 * built against.  Thread-safe; never fails. */
PCNN_API unsigned pcnn_version_number(void);

/* The same version as a static "MAJOR.MINOR.PATCH" string.  Never NULL. */
PCNN_API const char *pcnn_version_string(void);

/* ------------------------------------------------------------------------ */
/* 2. Error model                                                            */
/* ------------------------------------------------------------------------ */

/* Status codes.  Values are pinned and only ever appended to. */
typedef enum pcnn_status {
    PCNN_OK = 0,
    PCNN_ERR_INVALID_ARGUMENT = 1, /* NULL handle, size <= 0, value out of range */
    PCNN_ERR_INVALID_STATE = 2,    /* call in the wrong order (e.g. train before finalize) */
    PCNN_ERR_SHAPE = 3,            /* shapes that do not fit together */
    PCNN_ERR_OUT_OF_MEMORY = 4,    /* an allocation failed; nothing leaked */
    PCNN_ERR_MPI = 5,              /* an MPI call failed */
    PCNN_ERR_REMOTE = 6,           /* another rank reported an error */
    PCNN_ERR_TIMEOUT = 7,          /* a wait exceeded its timeout */
    PCNN_ERR_UNSUPPORTED = 8,      /* valid request this build cannot serve */
    PCNN_ERR_NUMERIC = 9,          /* NaN or Inf in inputs, loss or gradients */
    PCNN_ERR_IO = 10,              /* a file could not be opened, read or written */
    PCNN_ERR_CORRUPT = 11,         /* a file is truncated, malformed or fails its checksum */
    PCNN_ERR_MISMATCH = 12,        /* ranks (or a file and a network) disagree */
    PCNN_ERR_INTERNAL = 13         /* a bug in libpcnn: please report it */
} pcnn_status;

/* A static, human-readable name for a status ("invalid argument", ...).
 * Unknown values give "unknown status".  Thread-safe; never NULL. */
PCNN_API const char *pcnn_status_str(pcnn_status status);

/* The detailed message of the last failed call made by the calling thread,
 * e.g. "pcnn_conv2d: layer 3 (conv2d): kernel 7 larger than padded input
 * 5x5".  It starts with the name of the function the caller called, once,
 * also when the failure was found by another libpcnn function working on
 * its behalf (pcnn_net_train_epoch's steps report as pcnn_net_train_epoch).
 * Empty string if no call failed yet.  The pointer stays valid until
 * the next libpcnn call on this thread.  Never NULL. */
PCNN_API const char *pcnn_last_error(void);

/* ------------------------------------------------------------------------ */
/* 3. Networks                                                               */
/* ------------------------------------------------------------------------ */

typedef struct pcnn_net pcnn_net;       /* a network: graph, parameters, buffers */
typedef struct pcnn_layer pcnn_layer;   /* a node of a network's graph */
typedef struct pcnn_dataset pcnn_dataset;

/* Optimizers (pcnn_net_set_optimizer).  Formulas follow PyTorch's
 * torch.optim.SGD (momentum, dampening 0, no Nesterov) and torch.optim.Adam
 * (bias-corrected, L2 weight decay added to the gradient). */
typedef enum pcnn_optimizer {
    PCNN_OPTIMIZER_SGD = 0,      /* w -= lr * (g + wd * w) */
    PCNN_OPTIMIZER_MOMENTUM = 1, /* v = m * v + (g + wd * w); w -= lr * v */
    PCNN_OPTIMIZER_ADAM = 2
} pcnn_optimizer;

/* Losses (pcnn_net_set_loss).  All are averaged over the samples of the
 * (global) batch; MSE and L1 also over the elements of each sample, as
 * PyTorch's reduction='mean'. */
typedef enum pcnn_loss {
    PCNN_LOSS_SOFTMAX_CROSS_ENTROPY = 0, /* targets: int32 class labels */
    PCNN_LOSS_MSE = 1,                   /* targets: float, the output's shape */
    PCNN_LOSS_L1 = 2,                    /* targets: float, the output's shape */
    PCNN_LOSS_EXPERIMENTAL_1 = 3         /* section 9 */
} pcnn_loss;

/* Weight initialisations (pcnn_layer_set_init).  Biases start at zero.
 * fan_in = Cin*K*K (conv) or inputs (dense); fan_out likewise. */
typedef enum pcnn_init {
    PCNN_INIT_HE_NORMAL = 0,     /* N(0, 2/fan_in): the default */
    PCNN_INIT_HE_UNIFORM = 1,    /* U(-sqrt(6/fan_in), +sqrt(6/fan_in)) */
    PCNN_INIT_GLOROT_NORMAL = 2, /* N(0, 2/(fan_in+fan_out)) */
    PCNN_INIT_GLOROT_UNIFORM = 3 /* U(-sqrt(6/(fan_in+fan_out)), +...) */
} pcnn_init;

/* Network options, set with pcnn_net_set_option and read with
 * pcnn_net_get_option.  Each takes a double; integer options must be
 * integral.  Units are in the names.  Options marked "before finalize"
 * return PCNN_ERR_INVALID_STATE afterwards; the others may change between
 * steps.  The values named PCNN_OPT_EXPERIMENTAL_n belong to the
 * experimental options of section 9 (PCNN_EXPERIMENTAL): never use these
 * names directly. */
typedef enum pcnn_option {
    /* Learning rate used by the next step (before any schedule factor).
     * Default 0.01; > 0. */
    PCNN_OPT_LEARNING_RATE = 0,
    /* Momentum factor of PCNN_OPTIMIZER_MOMENTUM.  Default 0.9; [0, 1). */
    PCNN_OPT_MOMENTUM = 1,
    /* L2 weight decay added to every gradient.  Default 0; >= 0. */
    PCNN_OPT_WEIGHT_DECAY = 2,
    /* Adam's beta1, beta2 and epsilon.  Defaults 0.9, 0.999, 1e-8. */
    PCNN_OPT_ADAM_BETA1 = 3,
    PCNN_OPT_ADAM_BETA2 = 4,
    PCNN_OPT_ADAM_EPSILON = 5,
    /* Seed of the weight initialisation and of dropout masks; before
     * finalize.  Default 0; integral in [0, 2^53]. */
    PCNN_OPT_SEED = 6,
    /* Linear warm-up: the learning rate ramps from lr/steps to lr over the
     * first `steps` steps.  Default 0 (off). */
    PCNN_OPT_WARMUP_STEPS = 7,
    /* Step decay: the learning rate is multiplied by DECAY_FACTOR every
     * DECAY_EVERY_STEPS steps.  Defaults 0 (off) and 0.1. */
    PCNN_OPT_DECAY_EVERY_STEPS = 8,
    PCNN_OPT_DECAY_FACTOR = 9,
    /* Threads for the library's OpenMP loops and for OpenBLAS GEMMs.  Default
     * 0 = omp_get_max_threads().  OpenBLAS keeps its thread count
     * process-wide: libpcnn sets it at the start of each call that runs
     * GEMMs, so hosts sharing OpenBLAS should set it on their side after.
     *
     * Reproducibility.  Bitwise: the same network, seed, data, number of
     * ranks and number of threads on the same machine and OpenBLAS give the
     * same bits run after run (losses, gradients, parameters, checkpoints),
     * whatever the timing of threads and messages -- except where finalize
     * measured a convolution's algorithm (PCNN_OPT_CONV_ALGORITHM says
     * where, and how to turn it off).  Not bitwise: another
     * thread count or number of ranks changes the order in which float sums
     * are combined (per-thread and per-rank partial sums), and may change
     * the convolution algorithm chosen at finalize (pcnn_net_summary shows
     * it); so does PCNN_OPT_CONV_ALGORITHM.  Results then agree to float
     * rounding only.  Batch norm's statistics and the loss are summed in an
     * order fixed by the shapes alone, whatever the thread count.  The
     * weight gradient of a convolution, a sum over batch x pixels, is summed
     * by the direct and per-tap algorithms in short float32 blocks combined
     * in double, and by im2col + GEMM in OpenBLAS's blocks: all as accurate
     * when the sum cancels (as it does with batch norm after the
     * convolution). */
    PCNN_OPT_THREADS = 10,
    PCNN_OPT_EXPERIMENTAL_1 = 11, /* section 9 */
    /* 1: check losses and inputs of each step for NaN/Inf and fail with
     * PCNN_ERR_NUMERIC.  Default 1.  Settable between steps, so it may
     * differ between ranks: a rank checking covers the summed loss of
     * every rank (the step or evaluation fails on all of them). */
    PCNN_OPT_CHECK_NUMERICS = 12,
    /* Read only: the number of completed training steps (the step counter
     * that drives warm-up, decay and dropout masks).  Settable, to resume:
     * an integer in [0, 2^53].  At 2^53, pcnn_net_train_step fails with
     * INVALID_STATE instead of counting beyond what a double (and this
     * option) can hold. */
    PCNN_OPT_STEP = 13,
    /* Read only: the learning rate the next step will use, schedule
     * included. */
    PCNN_OPT_EFFECTIVE_LEARNING_RATE = 14,
    /* Gradient fusion: consecutive layers with the same exchange strategy
     * share one message until it holds this many bytes (a layer is never
     * split).  Changes only speed, never the numbers.  Before finalize.
     * Default 1048576; 0 = one message per layer. */
    PCNN_OPT_BUCKET_BYTES = 15,
    /* 1: overlap the gradient exchange with computation (seed 001 section
     * 4.4): reductions are posted during back-propagation, parameters are
     * updated as they arrive, and the next forward pass waits layer by layer
     * for the all-gathered parameters.  0: exchange after the backward pass,
     * collective by collective (the thesis's "no overlap" baselines).  Both
     * give bitwise the same parameters.  Default 1. */
    PCNN_OPT_OVERLAP = 16,
    PCNN_OPT_EXPERIMENTAL_2 = 17, /* section 9 */
    PCNN_OPT_EXPERIMENTAL_3 = 18, /* section 9 */
    PCNN_OPT_EXPERIMENTAL_4 = 19, /* section 9 */
    /* Give up waiting for a collective after this many milliseconds and
     * fail with PCNN_ERR_TIMEOUT (a rank stopped, died, or is in another
     * call).  Applies to every collective of the network: finalize, each
     * step's agreements and gradient exchange, evaluate, train_epoch,
     * save, load, the scheduler's calls and destroy's wait (section 5,
     * "Giving up on collectives").  0 = wait forever.  Default 0. */
    PCNN_OPT_TIMEOUT_MS = 20,
    /* Keep the most recent N compute and communication spans and step
     * markers for pcnn_net_write_trace.  Before finalize.  Default 0 (no
     * trace).  With a communicator, finalize then also measures each
     * rank's clock offset to rank 0 (a few pings). */
    PCNN_OPT_TRACE_EVENTS = 21,
    PCNN_OPT_EXPERIMENTAL_5 = 22, /* section 9 */
    /* Synchronised batch normalisation (PyTorch's SyncBatchNorm).  1: in
     * every training step (pcnn_net_train_step, pcnn_net_train_epoch, the
     * scheduler's steps) of a network with a communicator, each batch norm normalises with the
     * statistics of the whole global batch instead of this rank's share: each
     * rank's per-channel count, mean and sum of squared deviations are
     * gathered and combined (Chan et al.'s pairwise formula, in rank order:
     * the same bits on every rank), and backward sums the two per-channel
     * gradient sums over the ranks.  Training then equals one rank training
     * on the whole batch (up to float summation order) with any split of the
     * batch, ranks without samples included, and the running statistics
     * (updated with the global mean and unbiased global variance) are
     * identical on every rank.  Costs one small collective per batch norm in
     * forward and one in backward, on the network's own duplicate
     * communicator, which a timeout (PCNN_OPT_TIMEOUT_MS) aborts like the
     * exchange's.  pcnn_net_compute_gradients and pcnn_net_compute_loss stay
     * local (this rank's statistics), inference uses the running statistics,
     * and a network without a communicator is unaffected.  The default of the
     * network's batch norms; pcnn_batchnorm_set_sync overrides it per layer.
     * Ranks must agree (finalize fails with PCNN_ERR_MISMATCH naming the
     * layer otherwise).  Checkpoints do not depend on it.  Before finalize.
     * Default 0. */
    PCNN_OPT_SYNC_BATCHNORM = 23,
    PCNN_OPT_EXPERIMENTAL_7 = 24, /* section 9 */
    PCNN_OPT_EXPERIMENTAL_8 = 25, /* section 9 */
    PCNN_OPT_EXPERIMENTAL_9 = 26, /* section 9 */
    PCNN_OPT_EXPERIMENTAL_10 = 27, /* section 9 */
    PCNN_OPT_EXPERIMENTAL_11 = 28, /* section 9 */
    PCNN_OPT_EXPERIMENTAL_12 = 29, /* section 9 */
    PCNN_OPT_EXPERIMENTAL_13 = 30, /* section 9 */
    PCNN_OPT_EXPERIMENTAL_14 = 31, /* section 9 */
    /* Arithmetic of the convolutions and dense layers: a pcnn_precision.
     * PCNN_PRECISION_BF16 is mixed precision: their products (forward,
     * input gradient, weight gradient) multiply bfloat16 operands with
     * float32 accumulation, while parameters (the master weights), the
     * optimizer and its state, batch norm statistics and the loss stay
     * float32; checkpoints hold float32 and resume in either precision.
 * On more than one rank the gradient exchange carries bfloat16 (2-byte
 * MPI values; the receiver sums in float32 in rank order, so the bits do
 * not depend on timing): all-to-all + all-gather sends bf16 gradient
 * pieces and all-gathers bf16 parameters, whose owner keeps the float32
 * masters of its slice and updates them, so every rank's parameters
 * (pcnn_net_get_params) are the same bf16 values, the masters rounded;
 * allreduce runs as a reduce-scatter of bf16 pieces, float32 sums and an
 * all-gather of the sums rounded to bf16 (no MPI reduction rounding at
 * each hop), every rank then updating its float32 parameters alike; the
 * FC gradient sends bf16 activations, errors and weight columns (its
 * owner's masters rounded; the bias, updated alike everywhere, rounded
 * alike); the columns of box dense layers stay float32.  A convolution's
 * input halo and shuffle travel in bf16 too (it rounds its inputs anyway);
 * pools' and every gradient going back stay float32.  Every
 * layer's parameters travel so, batch norm's too (their float32 masters
 * keep the small updates; the value used is within 2^-9 of it).
 * pcnn_net_save writes the masters; pcnn_net_load and
 * pcnn_net_set_params set them and round the parameters.
     * The compute path (AMX tiles, AVX512-BF16 dot products, or a portable
     * one with float32 arithmetic on bf16-rounded operands) is chosen by
     * cpuid; the environment variable PCNN_BF16_PATH (portable, avx512bf16,
     * amx) forces a lower one; pcnn_net_summary names it per layer.  Every
     * rank computes the same bits for the same shapes and path.  Ranks must
     * agree (finalize fails with PCNN_ERR_MISMATCH otherwise).  Before
     * finalize.  Default PCNN_PRECISION_FP32. */
    PCNN_OPT_PRECISION = 32
} pcnn_option;

/* Values of PCNN_OPT_PRECISION. */
typedef enum pcnn_precision {
    PCNN_PRECISION_FP32 = 0, /* float32 throughout */
    PCNN_PRECISION_BF16 = 1  /* bfloat16 products, float32 accumulation and masters */
} pcnn_precision;

/* One layer's precision, overriding PCNN_OPT_PRECISION for it (e.g. a
 * first or last layer kept in float32 in a bf16 network, or one layer in
 * bf16 in a float32 one): -1 follows the network (the default),
 * PCNN_PRECISION_FP32 or PCNN_PRECISION_BF16.  Only layers whose products
 * have a bf16 path take it: pcnn_conv2d, pcnn_conv3d, pcnn_dense and
 * the transposed convolutions (section 9); any
 * other layer, or another value, gives PCNN_ERR_INVALID_ARGUMENT.  A bf16
 * convolution runs im2col + GEMM whatever PCNN_OPT_CONV_ALGORITHM says
 * (the direct and per-tap kernels are float32).  Ranks must agree layer by
 * layer (finalize fails with PCNN_ERR_MISMATCH otherwise).  Before finalize
 * (PCNN_ERR_INVALID_STATE after). */
PCNN_API pcnn_status pcnn_layer_set_precision(pcnn_layer *layer, int precision);

/* Create an empty network.  *out receives a handle to destroy with
 * pcnn_net_destroy.  Errors: INVALID_ARGUMENT (out NULL), OUT_OF_MEMORY. */
PCNN_API pcnn_status pcnn_net_create(pcnn_net **out);

/* Destroy a network, its layers and all its buffers, and set *net to NULL.
 * NULL or *net == NULL is a no-op.  Layer handles of the network become
 * invalid.  Always returns, also after the host's MPI_Finalize (then it
 * makes no MPI call); with a communicator it waits for the collectives in
 * flight at most PCNN_OPT_TIMEOUT_MS (section 5). */
PCNN_API pcnn_status pcnn_net_destroy(pcnn_net **net);

/* Declare the network's input: one sample is channels x height x width.
 * Must be the first layer added, exactly once.  *out receives the input
 * layer, to feed to the first real layer.  Errors: INVALID_ARGUMENT,
 * INVALID_STATE (an input exists, or the network is finalized). */
PCNN_API pcnn_status pcnn_net_input(pcnn_net *net, int channels, int height, int width,
                                    pcnn_layer **out);

/*
 * Layers.  Each adds one layer to the network, fed by `in` (a layer of the
 * same network), and returns its handle in *out.  Shapes are checked
 * immediately: a layer that does not fit its input fails with
 * PCNN_ERR_SHAPE and is not added.  All layer-adding calls fail with
 * PCNN_ERR_INVALID_STATE once the network is finalized.
 */

/* 2D convolution: out_channels filters of kernel x kernel, applied with the
 * given stride and zero padding on each side; bias != 0 adds a per-channel
 * bias.  Computed over the whole local batch at once by the algorithm
 * chosen at finalize for its shape (pcnn_net_summary shows which and why):
 * im2col + GEMM (seed 001 section 3.1), the direct kernels or one GEMM per
 * kernel tap; algorithms differ in float rounding only.  Output
 * (out_channels, (H+2p-k)/s+1, (W+2p-k)/s+1).  Any padding >= 0, as in
 * PyTorch (a window entirely in the padding gives the bias).  2D inputs
 * only (a volume needs pcnn_conv3d, below). */
PCNN_API pcnn_status pcnn_conv2d(pcnn_net *net, pcnn_layer *in, int out_channels, int kernel,
                                 int stride, int padding, int bias, pcnn_layer **out);

/* Max pooling over kernel x kernel windows with the given stride and zero
 * padding (padding counts as -infinity, as in PyTorch).  Output size
 * floor((H+2p-k)/s)+1. */
PCNN_API pcnn_status pcnn_maxpool2d(pcnn_net *net, pcnn_layer *in, int kernel, int stride,
                                    int padding, pcnn_layer **out);

/* Average pooling; padded zeros count in the average (PyTorch's default
 * count_include_pad=True). */
PCNN_API pcnn_status pcnn_avgpool2d(pcnn_net *net, pcnn_layer *in, int kernel, int stride,
                                    int padding, pcnn_layer **out);

/* Global average pooling: (C, H, W) -> (C, 1, 1). */
PCNN_API pcnn_status pcnn_global_avgpool(pcnn_net *net, pcnn_layer *in, pcnn_layer **out);

/* Fully connected (dense) layer: y = W x + b over the flattened input
 * (C*H*W features, in PyTorch's flatten order).  Output (out_features, 1, 1). */
PCNN_API pcnn_status pcnn_dense(pcnn_net *net, pcnn_layer *in, int out_features, int bias,
                                pcnn_layer **out);

/* Flatten (C, H, W) -> (C*H*W, 1, 1).  Dense layers flatten by themselves;
 * this exists for clarity and for losses on flat outputs. */
PCNN_API pcnn_status pcnn_flatten(pcnn_net *net, pcnn_layer *in, pcnn_layer **out);

/* ReLU: y = max(x, 0); gradient 0 at x == 0. */
PCNN_API pcnn_status pcnn_relu(pcnn_net *net, pcnn_layer *in, pcnn_layer **out);

/* Leaky ReLU: y = x for x > 0, slope * x otherwise.  slope finite, >= 0. */
PCNN_API pcnn_status pcnn_leaky_relu(pcnn_net *net, pcnn_layer *in, float slope,
                                     pcnn_layer **out);

/* Batch normalisation over (N, H, W) per channel, with learnable gamma
 * (initially 1) and beta (initially 0).  Training steps normalise with the
 * batch statistics (biased variance) and update the running mean and
 * variance (unbiased) as running = (1-momentum)*running + momentum*batch;
 * inference (predict, evaluate) uses the running statistics.  PyTorch's
 * defaults are eps 1e-5, momentum 0.1.  With several ranks, statistics are
 * per rank (as in the peers), unless synchronised across ranks
 * (PCNN_OPT_SYNC_BATCHNORM, pcnn_batchnorm_set_sync). */
PCNN_API pcnn_status pcnn_batchnorm(pcnn_net *net, pcnn_layer *in, float eps, float momentum,
                                    pcnn_layer **out);

/* Synchronise this batch-norm layer's statistics across ranks (1), keep
 * them per rank (0), or follow PCNN_OPT_SYNC_BATCHNORM (-1, the default).
 * Before finalize.  Errors: INVALID_ARGUMENT (layer NULL or not a batch
 * norm, sync not -1, 0 or 1), INVALID_STATE (finalized). */
PCNN_API pcnn_status pcnn_batchnorm_set_sync(pcnn_layer *layer, int sync);

/* Inverted dropout with drop probability p in [0, 1): during training each
 * element is zeroed with probability p and the rest scaled by 1/(1-p);
 * identity at inference.  Masks come from (seed, step, layer, sample), so a
 * run is reproducible and independent of the number of ranks. */
PCNN_API pcnn_status pcnn_dropout(pcnn_net *net, pcnn_layer *in, float p, pcnn_layer **out);

/* Residual addition y = a + b of two layers with the same output shape.
 * This makes the graph a DAG: a layer may feed several others. */
PCNN_API pcnn_status pcnn_add(pcnn_net *net, pcnn_layer *a, pcnn_layer *b, pcnn_layer **out);

/* Scaled residual addition y = a + b_scale * b (EDSR's residual scaling). */
PCNN_API pcnn_status pcnn_add_scaled(pcnn_net *net, pcnn_layer *a, pcnn_layer *b,
                                     float b_scale, pcnn_layer **out);

/* Pixel shuffle (sub-pixel upsampling): (C*r*r, H, W) -> (C, H*r, W*r), as
 * torch.nn.PixelShuffle(r).  r >= 1, and the channels must divide by r*r.
 * 2D only: UNSUPPORTED for a 3D input. */
PCNN_API pcnn_status pcnn_pixel_shuffle(pcnn_net *net, pcnn_layer *in, int upscale,
                                        pcnn_layer **out);

/*
 * 3D networks (volumes such as CosmoFlow's 4 x 128^3 dark-matter cubes,
 * seed 003).  A sample is (C, D, H, W), stored NCDHW (W fastest) in every
 * buffer the host passes (inputs, outputs, gradients), as PyTorch.  These
 * layers accept depth as well as the 2D ones: ReLU, leaky ReLU, batch norm
 * (statistics per channel over N, D, H, W), dropout, add / add_scaled,
 * global average pooling ((C, D, H, W) -> (C, 1, 1)), flatten and dense
 * (features in PyTorch's flatten order C, D, H, W).  conv2d and the 2D
 * pools refuse volumes (SHAPE), pixel shuffle too (UNSUPPORTED).  Losses,
 * training, evaluation, checkpoints and data parallelism work unchanged.
 * Errors as for the 2D calls.
 */

/* The network's input: samples of channels x depth x height x width.  Must
 * be the first layer added, exactly once (instead of pcnn_net_input).
 * depth 1 gives the same network as pcnn_net_input. */
PCNN_API pcnn_status pcnn_net_input3d(pcnn_net *net, int channels, int depth, int height,
                                      int width, pcnn_layer **out);

/* 3D convolution as torch.nn.Conv3d: out_channels filters of kernel^3,
 * the same stride and zero padding (any padding >= 0) along D, H and W;
 * bias != 0 adds a per-channel bias.  Output (out_channels, (D+2p-k)/s+1,
 * (H+2p-k)/s+1, (W+2p-k)/s+1).  Weights [Cout][Cin][k][k][k] then the bias,
 * as PyTorch.  Computed as vol2col + GEMM over the whole local batch (three
 * GEMMs per step, seed 001 section 3.1); the vol2col matrix is kept for
 * backward under PCNN_OPT_KEEP_IM2COL.  Where that matrix would exceed
 * 64 MiB (CosmoFlow's conv1 at 128^3: 0.9 GB per sample) each sample runs
 * in bands of output planes instead, nothing kept.  With AVX-512, the
 * forward pass of a stride-1 convolution with few input channels (C k^3
 * <= 256, output rows >= 16) is computed directly, without the matrix;
 * PCNN_OPT_CONV_ALGORITHM 1 keeps vol2col + GEMM everywhere, 2 uses the
 * direct forward wherever it applies (stride 1, k <= 5, rows >= 8). */
PCNN_API pcnn_status pcnn_conv3d(pcnn_net *net, pcnn_layer *in, int out_channels, int kernel,
                                 int stride, int padding, int bias, pcnn_layer **out);

/* Max and average pooling over kernel^3 windows with the same stride and
 * padding along each axis, as torch.nn.functional.max_pool3d /
 * avg_pool3d (floor mode; padding counts as -infinity for max, as zeros in
 * the average, count_include_pad=True); 0 <= padding <= kernel/2.  Output
 * (C, floor((D+2p-k)/s)+1, floor((H+2p-k)/s)+1, floor((W+2p-k)/s)+1). */
PCNN_API pcnn_status pcnn_maxpool3d(pcnn_net *net, pcnn_layer *in, int kernel, int stride,
                                    int padding, pcnn_layer **out);
PCNN_API pcnn_status pcnn_avgpool3d(pcnn_net *net, pcnn_layer *in, int kernel, int stride,
                                    int padding, pcnn_layer **out);

/* The shape of one sample of the layer's output, depth included (1 for
 * 2D layers).  Any pointer may be NULL. */
PCNN_API pcnn_status pcnn_layer_output_shape3d(const pcnn_layer *layer, int *channels,
                                               int *depth, int *height, int *width);

/* Choose the weight initialisation of a conv2d or dense layer (default
 * PCNN_INIT_HE_NORMAL).  Before finalize.  Errors: INVALID_ARGUMENT (layer
 * has no weights, unknown init), INVALID_STATE. */
PCNN_API pcnn_status pcnn_layer_set_init(pcnn_layer *layer, pcnn_init init);

/* The shape of one sample of the layer's output.  Any pointer may be NULL.
 * Valid as soon as the layer is added.  SHAPE for a 3D output (depth > 1):
 * use pcnn_layer_output_shape3d (below). */
PCNN_API pcnn_status pcnn_layer_output_shape(const pcnn_layer *layer, int *channels,
                                             int *height, int *width);

/* The layer's index in the network (the input is 0, then in order of
 * addition) and its kind as a static string ("conv2d", "relu", ...). */
PCNN_API pcnn_status pcnn_layer_info(const pcnn_layer *layer, int *index, const char **kind);

/* Number of trainable parameters of the layer (weights + bias). */
PCNN_API pcnn_status pcnn_layer_num_params(const pcnn_layer *layer, size_t *count);

/* Make `output` the network's output, trained with `loss`.  Required once
 * before finalize.  Errors: INVALID_ARGUMENT (unknown loss), SHAPE (cross
 * entropy needs at least 2 classes), INVALID_STATE (finalized). */
PCNN_API pcnn_status pcnn_net_set_loss(pcnn_net *net, pcnn_layer *output, pcnn_loss loss);

/* Choose the optimizer (default PCNN_OPTIMIZER_SGD).  Before finalize. */
PCNN_API pcnn_status pcnn_net_set_optimizer(pcnn_net *net, pcnn_optimizer optimizer);

/* Set or read an option (see pcnn_option).  Errors: INVALID_ARGUMENT
 * (unknown option, value out of range or not integral where required),
 * INVALID_STATE (option fixed after finalize, or read-only). */
PCNN_API pcnn_status pcnn_net_set_option(pcnn_net *net, pcnn_option option, double value);
PCNN_API pcnn_status pcnn_net_get_option(const pcnn_net *net, pcnn_option option,
                                         double *value);

/* Describe an option of this library, without a network.  *min and *max
 * receive the smallest and largest values pcnn_net_set_option accepts, both
 * inclusive: an open bound (momentum's 1, the learning rate's 0) is given
 * as the nearest double inside it, an unbounded one as DBL_MAX; for a
 * read-only option, the range of the values it takes.  *is_integer
 * receives 1 when values must be integral (flags are integers in [0, 1]),
 * else 0.  *name receives the option's name, the enum member's without
 * PCNN_OPT_ in lower case ("learning_rate"), a static string.  Any output
 * may be NULL.  Options are numbered from 0 without gaps, so calling this
 * with 0, 1, 2, ... until it fails lists every option the library knows.
 * Errors: INVALID_ARGUMENT (unknown option). */
PCNN_API pcnn_status pcnn_net_option_info(pcnn_option option, double *min, double *max,
                                          int *is_integer, const char **name);

/* Plan and allocate everything: shapes, parameters (initialised from the
 * seed), gradients, activations, convolution workspaces and optimizer state, for
 * batches of up to max_batch samples.  After this, training steps allocate
 * nothing.  Gradient buffers whose lifetimes do not overlap share memory.
 * Errors: INVALID_STATE (no input or no loss, or already finalized),
 * INVALID_ARGUMENT (max_batch < 1), OUT_OF_MEMORY. */
PCNN_API pcnn_status pcnn_net_finalize(pcnn_net *net, int max_batch);

/*
 * Training and inference.  `x` holds n samples in NCHW order (n x C x H x W
 * floats).  `labels` (n int32 class indices, for cross entropy) or `targets`
 * (n x output-size floats, for MSE and L1): pass the one the loss needs and
 * NULL for the other.  1 <= n <= max_batch.  All return INVALID_STATE before
 * finalize.  Input and loss are checked for NaN/Inf unless
 * PCNN_OPT_CHECK_NUMERICS is 0; a label outside [0, classes) is
 * INVALID_ARGUMENT.  On failure the parameters are unchanged.
 */

/* One training step: forward, loss, backward, parameter update; increments
 * the step counter (INVALID_STATE once it is at its maximum, 2^53: see
 * PCNN_OPT_STEP).  *loss (may be NULL) receives the mean loss of the
 * batch, computed before the update. */
PCNN_API pcnn_status pcnn_net_train_step(pcnn_net *net, int n, const float *x,
                                         const int32_t *labels, const float *targets,
                                         float *loss);

/* Forward and backward in training mode without updating anything: the
 * gradients (pcnn_net_get_grads) and the input gradient
 * (pcnn_net_get_input_grad) are left for the host, e.g. for its own
 * optimizer or for gradient checks.  The step counter is unchanged, so
 * dropout masks repeat until the next train step.  Local on a parallel
 * network: the gradient of this rank's n samples, nothing is exchanged (it
 * waits for parameters still in flight from the last step).  Under a
 * spatial distribution (section 9.2) it is collective instead, n = 0 on a
 * sample group without samples. */
PCNN_API pcnn_status pcnn_net_compute_gradients(pcnn_net *net, int n, const float *x,
                                                const int32_t *labels, const float *targets,
                                                float *loss);

/* The loss of a forward pass in training mode (batch statistics, this
 * step's dropout masks), with no backward pass and no update of any state
 * (running statistics are left alone).  Local, or collective under a
 * spatial distribution as pcnn_net_compute_gradients. */
PCNN_API pcnn_status pcnn_net_compute_loss(pcnn_net *net, int n, const float *x,
                                           const int32_t *labels, const float *targets,
                                           float *loss);

/* Inference: forward n samples (any n >= 1; processed in chunks of
 * max_batch) in inference mode and write the network output (logits for
 * cross entropy) to out, which holds n x output-size floats (out_count).
 * Errors: SHAPE if out_count is too small. */
PCNN_API pcnn_status pcnn_net_predict(pcnn_net *net, int n, const float *x, float *out,
                                      size_t out_count);

/* Evaluate the network in inference mode over a whole dataset: mean loss
 * and, for cross entropy, accuracy in [0, 1] (NULL pointers are skipped;
 * accuracy of a regression network is NaN).  Exact: no sample dropped or
 * padded.  Errors: SHAPE (dataset and network disagree), NUMERIC (the loss
 * is NaN or Inf, unless PCNN_OPT_CHECK_NUMERICS is 0). */
PCNN_API pcnn_status pcnn_net_evaluate(pcnn_net *net, const pcnn_dataset *data, double *loss,
                                       double *accuracy);

/* One epoch of training steps over `data` in the order given by
 * pcnn_dataset_shuffle (or file order), with batches of `batch` samples (the
 * last one partial: no sample dropped).  *mean_loss (may be NULL) receives
 * the sample-weighted mean training loss. */
PCNN_API pcnn_status pcnn_net_train_epoch(pcnn_net *net, const pcnn_dataset *data, int batch,
                                          double *mean_loss);

/* Counts, after finalize: trainable parameters, floats of one output sample,
 * and the bytes of memory the network holds on this rank (parameters,
 * gradients, optimizer state, activations, workspaces, communication
 * buffers: the sum of the parts below). */
PCNN_API pcnn_status pcnn_net_num_params(const pcnn_net *net, size_t *count);
PCNN_API pcnn_status pcnn_net_output_size(const pcnn_net *net, size_t *count);
PCNN_API pcnn_status pcnn_net_memory_bytes(const pcnn_net *net, size_t *bytes);

/* The parts of pcnn_net_memory_bytes. */
typedef enum pcnn_memory_part {
    PCNN_MEMORY_PARAMETERS = 0,    /* parameters and their gradients */
    PCNN_MEMORY_OPTIMIZER = 1,     /* optimizer state (this rank's slices of it) */
    PCNN_MEMORY_ACTIVATIONS = 2,   /* layer outputs, and the gradients flowing
                                      back through them */
    PCNN_MEMORY_WORKSPACE = 3,     /* convolution workspaces, kept im2col
                                      matrices, layers' own buffers, loss
                                      scratch, input staging, the trace */
    PCNN_MEMORY_COMMUNICATION = 4  /* exchange, halo, shuffle and reduction
                                      buffers */
} pcnn_memory_part;
#define PCNN_MEMORY_PARTS 5

/* After finalize: *bytes receives the bytes of one part of the memory the
 * network holds on this rank (with a distribution, activations shrink with
 * this rank's box).  PCNN_ERR_INVALID_ARGUMENT for a part outside
 * [0, PCNN_MEMORY_PARTS). */
PCNN_API pcnn_status pcnn_net_memory_part(const pcnn_net *net, pcnn_memory_part part,
                                          size_t *bytes);

/* Copy all trainable parameters (or their gradients from the last backward
 * pass) into buf, layer by layer in order of addition, each layer in
 * PyTorch's order.  count must equal pcnn_net_num_params.  set copies them
 * in.  Local: with a communicator they first wait for the parameters still
 * in flight from the last overlapped step (at most PCNN_OPT_TIMEOUT_MS);
 * on a failed or aborted network they return INVALID_STATE at once,
 * without waiting.  Errors: SHAPE (count differs), INVALID_STATE (before
 * finalize, network failed or aborted, MPI finalised), TIMEOUT. */
PCNN_API pcnn_status pcnn_net_get_params(const pcnn_net *net, float *buf, size_t count);
PCNN_API pcnn_status pcnn_net_set_params(pcnn_net *net, const float *buf, size_t count);
PCNN_API pcnn_status pcnn_net_get_grads(const pcnn_net *net, float *buf, size_t count);

/* The same for one layer's parameters. */
PCNN_API pcnn_status pcnn_layer_get_params(const pcnn_layer *layer, float *buf, size_t count);
PCNN_API pcnn_status pcnn_layer_set_params(pcnn_layer *layer, const float *buf, size_t count);

/* A layer's non-trainable state, as flat floats: for a batch norm its
 * running mean[C] then running (unbiased) variance[C], PyTorch's
 * running_mean and running_var; other layers have none (count 0).  After
 * finalize; each rank holds its own (sync batch norm keeps them equal).
 * set checks every value (finite, variances >= 0) before changing any.
 * Errors: INVALID_ARGUMENT (NULL, bad values), INVALID_STATE (before
 * finalize), SHAPE (count differs from pcnn_layer_num_buffers). */
PCNN_API pcnn_status pcnn_layer_num_buffers(const pcnn_layer *layer, size_t *count);
PCNN_API pcnn_status pcnn_layer_get_buffers(const pcnn_layer *layer, float *buf, size_t count);
PCNN_API pcnn_status pcnn_layer_set_buffers(pcnn_layer *layer, const float *buf, size_t count);

/* The gradient of the loss with respect to the input x of the last
 * pcnn_net_compute_gradients or train step (n x C x H x W floats; count
 * must be at least that).  INVALID_STATE on a spatially distributed network
 * (each rank holds only its box of it) and before any backward pass. */
PCNN_API pcnn_status pcnn_net_get_input_grad(const pcnn_net *net, float *buf, size_t count);

/* A printable summary: one line per layer (index, kind, output shape,
 * parameters, inputs, configuration and, once finalized, the algorithm
 * chosen and why, e.g. "[direct (grid 79 % useful) ...]") and totals.  Writes at most `size` bytes including
 * the terminating NUL into buf (buf may be NULL when size is 0) and the
 * full length (without NUL) into *needed (may be NULL), like snprintf.
 * Callable before finalize (memory then reads "not planned"). */
PCNN_API pcnn_status pcnn_net_summary(const pcnn_net *net, char *buf, size_t size,
                                      size_t *needed);

/* ------------------------------------------------------------------------ */
/* 4. Datasets                                                               */
/* ------------------------------------------------------------------------ */

/* Load an image/label pair of IDX files (MNIST and Fashion-MNIST format,
 * optionally gzip-compressed: detected from the content).  Pixels are
 * scaled to [0, 1], then, if std > 0, normalised as (x - mean) / std.
 * Images become (1, H, W) samples with int32 labels.  Paths must name
 * regular files: FIFOs, devices and directories are refused (IO) without
 * being waited on.  Errors: IO,
 * CORRUPT (bad magic, truncated, trailing bytes, count mismatch),
 * INVALID_ARGUMENT (NaN mean or std, negative std), OUT_OF_MEMORY. */
PCNN_API pcnn_status pcnn_dataset_load_idx(const char *images_path, const char *labels_path,
                                           float mean, float std, pcnn_dataset **out);

/* An in-memory dataset of n samples of (channels, height, width) copied
 * from x, with either int32 labels (classification) or targets of
 * target_count floats per sample (regression); pass NULL for the other (and
 * target_count 0 with labels). */
PCNN_API pcnn_status pcnn_dataset_create(int n, int channels, int height, int width,
                                         const float *x, const int32_t *labels,
                                         const float *targets, int target_count,
                                         pcnn_dataset **out);

/* Free a dataset; NULL is a no-op. */
PCNN_API pcnn_status pcnn_dataset_destroy(pcnn_dataset **data);

/* Number of samples, and the shape of one sample (any pointer may be NULL).
 * SHAPE for volumes (depth > 1): use pcnn_dataset_info3d (below). */
PCNN_API pcnn_status pcnn_dataset_info(const pcnn_dataset *data, int *n, int *channels,
                                       int *height, int *width);

/* Reorder the samples with a seeded Fisher-Yates shuffle of the identity:
 * the order depends only on (seed, epoch), never on previous calls, so all
 * ranks and resumed runs agree. */
PCNN_API pcnn_status pcnn_dataset_shuffle(pcnn_dataset *data, uint64_t seed, uint64_t epoch);

/* Copy samples [start, start + count) of the current order into x
 * (count x C x H x W) and labels or targets (either may be NULL). */
PCNN_API pcnn_status pcnn_dataset_batch(const pcnn_dataset *data, int start, int count,
                                        float *x, int32_t *labels, float *targets);

/* An in-memory dataset of n volumes of (channels, depth, height, width)
 * copied from x (NCDHW), with int32 labels or target_count float targets
 * per sample (regression: MSE, L1), as pcnn_dataset_create.  Shuffle,
 * batch, train_epoch and evaluate take it as any dataset. */
PCNN_API pcnn_status pcnn_dataset_create3d(int n, int channels, int depth, int height,
                                           int width, const float *x, const int32_t *labels,
                                           const float *targets, int target_count,
                                           pcnn_dataset **out);

/* Number of samples and the shape of one, depth included (1 for images).
 * Any pointer may be NULL. */
PCNN_API pcnn_status pcnn_dataset_info3d(const pcnn_dataset *data, int *n, int *channels,
                                         int *depth, int *height, int *width);

/*
 * File-backed volumes (seed 003 section 4.4: I/O is on the critical path).
 * A dataset opened from a manifest keeps its samples in files and reads
 * them batch by batch (pcnn_dataset_batch, pcnn_dataset_batch_box,
 * pcnn_net_train_epoch, pcnn_net_evaluate), never all at once.
 */

/* Element type of raw volume files. */
typedef enum pcnn_dtype { PCNN_DTYPE_F32 = 0, PCNN_DTYPE_F64 = 1 } pcnn_dtype;

/* Open a dataset of n volumes of (channels, depth, height, width) listed
 * by the text file `manifest`, one sample per line:
 *     <path> <t_1> ... <t_target_count>
 * (fields separated by spaces or tabs; blank lines and lines starting with
 * '#' are skipped; relative paths are relative to the manifest's
 * directory; a path may not contain spaces).  Each file holds one sample
 * as a C-order [C][D][H][W] array of `dtype`, little-endian: raw (exactly
 * C*D*H*W elements, nothing else), or a .npy file (name ending in .npy,
 * header parsed: descr '<f4' / '<f8' matching dtype, fortran_order False,
 * shape (C, D, H, W), or (D, H, W) when C is 1).  float64 is converted to
 * float32 on reading.  Only the manifest and each file's header and size
 * are read here.  The samples carry the float targets of their line
 * (regression: MSE, L1); shuffle, info3d, batch, batch_box, train_epoch
 * and evaluate take the dataset as any other; free it with
 * pcnn_dataset_destroy.  Errors: INVALID_ARGUMENT (NULL, shape < 1 or
 * over INT_MAX floats, dtype, target_count < 1, a .npy of the other
 * dtype), IO (a file cannot be opened or read, or is not a regular file:
 * a FIFO, directory or device is refused, not waited on; the message
 * names it), CORRUPT (a manifest line
 * that is malformed, named by its line number; a file whose size or
 * header is wrong, named with the offset), SHAPE (a .npy of another
 * shape), OUT_OF_MEMORY. */
PCNN_API pcnn_status pcnn_dataset_open_volumes(const char *manifest, int channels, int depth,
                                               int height, int width, pcnn_dtype dtype,
                                               int target_count, pcnn_dataset **out);

/* As pcnn_dataset_batch, restricted to a box of each sample: depth,
 * height and width [box_start[k], box_start[k] + box_count[k]) for k = 0,
 * 1, 2.  x receives count samples of (C, box_count[0], box_count[1],
 * box_count[2]) floats, C-order.  For file-backed volumes only the box
 * is read (pread of contiguous runs: whole planes when the box spans H
 * and W); in-memory datasets are sliced.  box_start and box_count both
 * NULL mean the whole sample.  Errors: INVALID_ARGUMENT (NULL x or data,
 * box not within the sample or a count < 1, start/count, labels of a
 * regression dataset or targets of a labelled one), IO, CORRUPT (a file
 * shorter than at open: names the file and offset), OUT_OF_MEMORY. */
PCNN_API pcnn_status pcnn_dataset_batch_box(const pcnn_dataset *data, int start, int count,
                                            const int *box_start, const int *box_count,
                                            float *x, int32_t *labels, float *targets);

/* Read up to `batches` (0..64) batches ahead on a helper thread: after each
 * batch read of a file-backed dataset, the next ones (same count and box,
 * start advancing by the distance between the last two reads, so each
 * rank's share of a data-parallel epoch is predicted) are read while the
 * caller computes.  0 stops the thread.  A failure of the helper thread
 * is returned by the next read of the dataset.  Uses batches x count x box
 * floats of memory.  A no-op for in-memory datasets.  The dataset must not
 * be read from two threads at once.  Errors: INVALID_ARGUMENT (NULL,
 * batches outside [0, 64]), OUT_OF_MEMORY, INTERNAL (no thread). */
PCNN_API pcnn_status pcnn_dataset_set_prefetch(pcnn_dataset *data, int batches);

/* ------------------------------------------------------------------------ */
/* 5. Parallel training over MPI                                             */
/* ------------------------------------------------------------------------ */

/*
 * Synchronous data parallelism (seed 001): every rank holds the same model;
 * each global batch of B samples is split over the P ranks of a
 * communicator (ranks get floor(B/P) or ceil(B/P) samples, the first B mod
 * P ranks one more), gradients are combined so that every step equals a
 * sequential step on the whole batch (up to float summation order), and all
 * ranks end every step with identical parameters.
 *
 * MPI contract: the host initialises MPI (or asks pcnn_comm_create_world
 * to) and hands in a communicator, which libpcnn duplicates: its traffic
 * never mixes with the host's, and any sub-communicator works.  libpcnn
 * calls MPI only from the thread that calls it, inside the calls marked
 * "collective", which every rank of the communicator must make in the same
 * order.  MPI_THREAD_FUNNELED or higher is enough.  Errors found on one rank
 * inside a collective call reach all ranks: the others return
 * PCNN_ERR_REMOTE instead of waiting forever.  Ranks that make different
 * collective calls at once (one saves while another trains) all return
 * PCNN_ERR_MISMATCH naming both calls, and may carry on.  A rank that
 * stops or dies: see PCNN_OPT_TIMEOUT_MS and "Giving up on collectives".
 * libpcnn never ends the process: an invalid communicator handle returns
 * PCNN_ERR_INVALID_ARGUMENT, and after the host's MPI_Finalize every call
 * that would communicate returns PCNN_ERR_INVALID_STATE while
 * pcnn_net_destroy and pcnn_comm_destroy release memory and make no MPI
 * call (communication threads are stopped inside MPI_Finalize, through a
 * delete callback on MPI_COMM_SELF).
 *
 * Batch normalisation uses each rank's local batch statistics, as the peers
 * (Horovod, DDP) do, unless synchronised (PyTorch's SyncBatchNorm:
 * PCNN_OPT_SYNC_BATCHNORM).  Dropout masks depend on the global
 * sample index, so they do not depend on P.
 */

typedef struct pcnn_comm pcnn_comm;

/* How a layer's gradients are combined across ranks. */
typedef enum pcnn_exchange {
    /* MPI_Allreduce of the gradient (in place), then every rank updates all
     * of the layer's parameters: the baseline of the thesis and the peers. */
    PCNN_EXCHANGE_ALLREDUCE = 0,
    /* Seed 001 sections 4.1.2 and 4.3: MPI_Alltoallv gives each rank the P
     * pieces of its own 1/P slice of the gradient, which it sums with all
     * threads and uses to update that slice alone (optimizer state exists
     * only for owned slices: memory per rank drops by P), then
     * MPI_Allgatherv distributes the updated parameters.  The default. */
    PCNN_EXCHANGE_ALLTOALL_ALLGATHER = 1,
    /* Dense layers only, seed 001 section 4.1.1: instead of reducing the
     * K x F weight gradient, all-to-all the layer's input activations (each
     * rank receives its F/P features for the whole batch), all-gather its
     * output errors, compute the K x F/P gradient slice for the whole batch,
     * update it, and all-gather the weights; the bias is updated by every
     * rank from the gathered errors.  Moves (F*B/P + K*B) instead of K*F
     * floats, B the global batch.  Unless a dense layer chose otherwise, the
     * network default PCNN_EXCHANGE_ALLTOALL_ALLGATHER selects this for the
     * dense layers where eq. 4.8 (F*B/P + K*B < K*F) says it moves fewer
     * bytes. */
    PCNN_EXCHANGE_FC_GRADIENT = 2
} pcnn_exchange;

/* Wrap a duplicate of the host's communicator.  Collective over `comm`
 * (and not timed: no network, so no PCNN_OPT_TIMEOUT_MS, exists yet).  The
 * host may free its own communicator afterwards.  MPI_COMM_WORLD is never
 * touched (its error handler is the host's) unless it is `comm`.  The
 * handle is judged first by what MPI's handles look like (MPICH: its bits;
 * Open MPI: not NULL) and refused if it names no communicator; then
 * MPI_Comm_test_inter refuses an intercommunicator.  A handle that looks
 * right yet names no live communicator (one the host freed, whose slot MPI
 * may have reused) reaches MPI, which reports it as for any MPI call of the
 * host's: through MPI_COMM_WORLD's error handler (an abort by default;
 * INVALID_ARGUMENT here under MPI_ERRORS_RETURN).  Errors: INVALID_ARGUMENT
 * (MPI_COMM_NULL, invalid handle, intercommunicator), INVALID_STATE (MPI
 * not initialised, or finalised), MPI, OUT_OF_MEMORY. */
PCNN_API pcnn_status pcnn_comm_create(MPI_Comm comm, pcnn_comm **out);

/* The same from a Fortran handle (MPI_Fint): for Fortran hosts and for
 * mpi4py via comm.py2f().  An invalid handle (say 12345; with Open MPI also
 * an index beyond its table or a freed communicator's) returns
 * INVALID_ARGUMENT without reaching MPI's error handlers, as above. */
PCNN_API pcnn_status pcnn_comm_create_fortran(MPI_Fint comm, pcnn_comm **out);

/* For programs that do not otherwise use MPI: initialise MPI if the host
 * has not (MPI_Init_thread, asking for MPI_THREAD_MULTIPLE) and wrap a
 * duplicate of MPI_COMM_WORLD.  pcnn_comm_destroy then finalises MPI if,
 * and only if, this call initialised it.  Collective over MPI_COMM_WORLD. */
PCNN_API pcnn_status pcnn_comm_create_world(pcnn_comm **out);

/* Free the duplicate communicator (collective) and set *comm to NULL; NULL
 * is a no-op.  After the host's MPI_Finalize it only frees memory.
 * Errors: INVALID_STATE while a network still uses it. */
PCNN_API pcnn_status pcnn_comm_destroy(pcnn_comm **comm);

/* This rank, the number of ranks, and the MPI thread level provided
 * (MPI_THREAD_SINGLE ... MPI_THREAD_MULTIPLE).  Any pointer may be NULL. */
PCNN_API pcnn_status pcnn_comm_info(const pcnn_comm *comm, int *rank, int *size,
                                    int *thread_level);

/* The MPI behind this libpcnn.  family: PCNN_MPI_FAMILY_MPICH (MPICH and
 * its ABI derivatives) or PCNN_MPI_FAMILY_OPENMPI, as built (PCNN_MPI_FAMILY
 * of pcnn_config.h); built_with: a static "MPICH 4.0.2"-style string of the
 * mpi.h it was compiled with; library: MPI_Get_library_version of the MPI
 * library the process runs (callable before MPI_Init and after
 * MPI_Finalize), truncated to size - 1 bytes and NUL-terminated (size 0:
 * not written; MPI_MAX_LIBRARY_VERSION_STRING holds all of it).  Any pointer
 * may be NULL.  Errors: INVALID_ARGUMENT (library non-NULL with size 0),
 * MPI (MPI_Get_library_version failed). */
PCNN_API pcnn_status pcnn_mpi_info(int *family, const char **built_with, char *library,
                                   size_t size);

/* Communicator collectives for hosts without an MPI binding of their own
 * (Python without mpi4py): waiting for rank 0's files, sharing a setting.
 * Both are collective over the communicator and fail together: a rank's
 * bad argument makes the others return REMOTE.  timeout_ms > 0 gives up
 * after that many milliseconds with PCNN_ERR_TIMEOUT (a rank that never
 * arrives); the communicator is then unusable (INVALID_STATE) for every
 * later collective, as after a timed-out step; 0 waits without limit.
 * Errors: INVALID_ARGUMENT (NULL comm, timeout_ms < 0), INVALID_STATE (the
 * communicator failed before, or MPI was finalised), MISMATCH (ranks in
 * different calls), TIMEOUT, MPI. */

/* Return once every rank of comm has called it. */
PCNN_API pcnn_status pcnn_comm_barrier(pcnn_comm *comm, long timeout_ms);

/* Copy `bytes` bytes of buf on rank `root` into buf on every other rank.
 * bytes and root must be equal on every rank (else MISMATCH on every
 * rank naming them, nothing sent); buf may be NULL only when bytes is 0;
 * INVALID_ARGUMENT for a root outside [0, size).  Any size (sent in pieces
 * of at most 1 GiB). */
PCNN_API pcnn_status pcnn_comm_bcast(pcnn_comm *comm, void *buf, size_t bytes, int root,
                                     long timeout_ms);

/* Train the network over the ranks of `comm`.  Before finalize; the
 * communicator must outlive the network.  Once set:
 *   - pcnn_net_finalize is collective: max_batch is the largest GLOBAL
 *     batch, and each rank plans for its share ceil(max_batch / P).  Ranks
 *     check that they built the same network with the same settings: a
 *     mismatch fails on every rank with PCNN_ERR_MISMATCH naming the first
 *     differing option or layer and its values on rank 0 and on the rank
 *     that differs ("PCNN_OPT_OVERLAP: 1 on rank 0, 0 on rank 2").
 *     Compared: the layers (kind, configuration, output shape, inputs,
 *     exchange, parameter count, which is the output), the loss, the
 *     optimizer and its hyper-parameters, the learning rate and its
 *     schedule, PCNN_OPT_STEP, PCNN_OPT_SEED, PCNN_OPT_CHECK_NUMERICS,
 *     max_batch, PCNN_OPT_OVERLAP, PCNN_OPT_BUCKET_BYTES, PCNN_OPT_ENGINE,
 *     the network's exchange and, for a spatial network, the layers'
 *     distributions, PCNN_OPT_HALO_OVERLAP, PCNN_OPT_HALO_SCHEDULE and
 *     PCNN_OPT_SPATIAL_FALLBACK, and whether PCNN_OPT_TRACE_EVENTS is on
 *     (a tracing finalize pings rank 0 for its clock).  Not compared,
 *     because they change neither the communication nor the agreement of
 *     the replicas: PCNN_OPT_THREADS and the convolution algorithm (only
 *     the summation order of a rank's own gradient), KEEP_IM2COL,
 *     COMM_CORE, TIMEOUT_MS, the size of TRACE_EVENTS.  Finalize allocates in phases with an agreement
 *     between them: a rank out of memory stops the others before they
 *     allocate the next phase.
 *   - pcnn_net_train_step is collective: each rank passes ITS OWN samples
 *     (n may differ between ranks and may be 0 on some, with x NULL); the
 *     step trains on their union, and *loss is the global mean.  The step
 *     counter and the learning rate the step uses must be equal on every
 *     rank (else PCNN_ERR_MISMATCH naming both values, nothing changed).
 *     A step returns PCNN_OK on a rank only if every rank applied the
 *     whole update.
 *   - pcnn_net_train_epoch and pcnn_net_evaluate are collective: each rank
 *     reads only its share of every batch of the (identically ordered)
 *     dataset; results are global and equal on all ranks.
 *   - pcnn_net_predict, pcnn_net_compute_loss and pcnn_net_compute_gradients
 *     stay local to the calling rank (no communication), except under a
 *     spatial distribution (section 9.2). */
PCNN_API pcnn_status pcnn_net_set_comm(pcnn_net *net, pcnn_comm *comm);

/* Choose the exchange strategy of every layer (default
 * PCNN_EXCHANGE_ALLTOALL_ALLGATHER; PCNN_EXCHANGE_FC_GRADIENT is refused
 * here: it is per dense layer), or of one layer with parameters (overrides
 * the network's choice; PCNN_EXCHANGE_FC_GRADIENT only for dense layers).
 * Before finalize. */
PCNN_API pcnn_status pcnn_net_set_exchange(pcnn_net *net, pcnn_exchange exchange);
PCNN_API pcnn_status pcnn_layer_set_exchange(pcnn_layer *layer, pcnn_exchange exchange);

/* Bytes this rank sends per training step in the gradient exchange, by the
 * cost model of seed 001 section 4.2: all-to-all n(P-1)/P and all-gather
 * n(P-1)/P per bucket of n bytes (exact for this rank's actual slices),
 * 2n(P-1)/P for an allreduce bucket (Rabenseifner's bandwidth term), and for
 * a dense layer with PCNN_EXCHANGE_FC_GRADIENT eqs. 4.2-4.4 for a full local
 * batch: activations (F - F/P) * b, errors K * b * (P-1), weights
 * K * F/P * (P-1), b = max_batch / P; a dense layer on each rank's box of
 * a split input (section 9.2) sends its K x F_r columns to the P-1 others and
 * allreduces its biases.  With PCNN_OPT_PRECISION bf16 the all-to-all +
 * all-gather, allreduce and FC gradient buckets send 2-byte values, and an
 * allreduce bucket is a reduce-scatter and an all-gather of this rank's
 * slice n_r: 2(n - n_r) + 2 n_r (P-1) bytes; the columns of box dense
 * layers stay 4-byte.  After finalize; 0 on a single rank. */
PCNN_API pcnn_status pcnn_net_exchange_bytes(const pcnn_net *net, uint64_t *bytes_per_step);

/*
 * Giving up on collectives (as NCCL's ncclCommAbort / ncclCommGetAsyncError).
 * With PCNN_OPT_TIMEOUT_MS set, every collective of a network -- finalize's
 * agreements and checks, each step's agreements, gradient exchange and
 * synchronised batch-norm reductions,
 * evaluate, train_epoch, save, load, the scheduler's calls -- is given up
 * when it does not complete in time (another rank stopped, hangs, died, or
 * makes another call).  The rule then:
 *   - the call returns PCNN_ERR_TIMEOUT on each rank that gave up, and that
 *     rank's network fails: as after pcnn_net_abort, every later call on it
 *     but the three below returns PCNN_ERR_INVALID_STATE at once, without
 *     communicating (pcnn_net_get_params too: it never waits on a failed
 *     network).  A timeout in an agreement or a checkpoint collective also
 *     fails the communicator (for every network on it);
 *   - a rank that did not notice fails at its next collective: an agreement
 *     that shows another rank's network failed returns PCNN_ERR_REMOTE and
 *     fails this rank's network too (pcnn_net_async_error then reports the
 *     other rank's PCNN_ERR_TIMEOUT), or it times out itself;
 *   - parameters never change on one rank without every rank failing that
 *     step (the step's last agreement comes after the update);
 *   - pcnn_net_destroy of a healthy network waits for its collectives in
 *     flight (the last step's all-gathers) at most the timeout, of a failed
 *     or aborted one not at all; pcnn_net_abort never waits.  The host can
 *     always destroy the network and the communicator and carry on, or
 *     call MPI_Finalize, without hanging.
 *
 * How long a call takes to give up: each wait for other ranks is bounded
 * by PCNN_OPT_TIMEOUT_MS on its own.  A call gives up within one timeout
 * (plus a few milliseconds) of starting to wait for a rank that stopped,
 * died or makes another call, whichever of its waits that is.  A call that
 * waits several times (finalize's phases; a step's batch, loss and
 * end-of-step agreements and its exchange; evaluate's entry, data and
 * result agreements; train_epoch's steps) may take up to one timeout per
 * wait when another rank is slow but arrives each time within the timeout
 * (slowness under the timeout is not a failure), and a step whose link
 * breaks during its gradient exchange waits twice: the exchange, then the
 * loss agreement.  So a step or an evaluation gives up within two timeouts
 * of its call at most, finalize within one per phase.  pcnn_net_destroy waits at
 * most one timeout; pcnn_net_abort and calls on a failed network never
 * wait.
 *
 * MPI cannot cancel a collective, and after a timeout the ranks may have
 * started different collectives on a network's exchange communicator; so
 * destroying a failed or aborted network keeps that communicator and a
 * record of the collectives it started until the host's MPI_Finalize,
 * where (in a delete callback on MPI_COMM_SELF, on every rank) the ranks
 * compare their records by point-to-point messages, a rank behind starts
 * the ones it missed, and all of them complete, so that MPI_Finalize
 * returns.  That needs every rank to reach MPI_Finalize within 10 s of the
 * others; a rank that does not leaves it as MPI has it.  Until then, one
 * left in flight keeps its buffers:
 * destroying a failed network that had collectives in flight frees only
 * the handle and leaks the rest (about what pcnn_net_memory_bytes reported:
 * parameters, gradients, optimizer state, activations, exchange buffers,
 * plus the layers' bookkeeping); destroying a communicator whose collective
 * was given up leaks 80 * (size + 1) bytes, and a given-up save or
 * scheduler call its own buffers.  Nothing leaks when nothing was in
 * flight.  With MPICH over UCX, MPI_Finalize may then warn on stderr about
 * unmatched messages.
 * pcnn_net_abort and pcnn_net_async_error (below) stop a network for good.
 */

/* Abandon the network's collectives in flight and stop its progress
 * engine.  Local, never blocks, idempotent; also valid before finalize.
 * Afterwards every call on the network except pcnn_net_destroy,
 * pcnn_net_abort and pcnn_net_async_error returns PCNN_ERR_INVALID_STATE;
 * destroy then waits for nothing (and leaks as said above if collectives
 * were in flight).  Use it on a rank that will not take part in the
 * network's collectives any more, or when pcnn_net_async_error reports a
 * failure.  The other ranks are not told: their next collective on the
 * network times out (with PCNN_OPT_TIMEOUT_MS) or waits.  Call it from
 * the thread that uses the network.  Errors: INVALID_ARGUMENT (net NULL). */
PCNN_API pcnn_status pcnn_net_abort(pcnn_net *net);

/* *status receives PCNN_OK, or the status of the first collective of this
 * network, or agreement on its communicator, that failed or timed out
 * (PCNN_ERR_TIMEOUT, PCNN_ERR_MPI); the network is then aborted.  An
 * explicit pcnn_net_abort alone leaves it PCNN_OK.  Local, never blocks,
 * valid in every state, also after pcnn_net_abort.  Errors:
 * INVALID_ARGUMENT (net or status NULL). */
PCNN_API pcnn_status pcnn_net_async_error(const pcnn_net *net, pcnn_status *status);


/* ------------------------------------------------------------------------ */
/* 6. Timing, traces and callbacks                                           */
/* ------------------------------------------------------------------------ */

/* What pcnn_net_time measures, accumulated over the training steps since
 * finalize or pcnn_net_reset_timing, and reported per step (a step that
 * fails or that a step callback stops adds nothing; the passes of
 * pcnn_net_compute_loss and _compute_gradients are added, without counting
 * a step, so that a host's own training loop sees their breakdown). */
typedef enum pcnn_time {
    PCNN_TIME_FORWARD = 0,  /* forward computation */
    PCNN_TIME_BACKWARD = 1, /* backward computation */
    PCNN_TIME_UPDATE = 2,   /* summing received gradients and the optimizer */
    PCNN_TIME_COMM = 3,     /* duration of the gradient/parameter collectives */
    PCNN_TIME_EXPOSED = 4,  /* time the caller's thread was blocked waiting
                               for them: the communication not hidden */
    PCNN_TIME_STEP = 5,     /* wall time of a whole training step (network only) */
    /* A spatial distribution (section 9.2): halo exchanges of the layers'
     * inputs, forward and backward, the part of them the caller's thread
     * waited for (all of it unless overlapped), and the moves between
     * layers distributed differently (shuffles). */
    PCNN_TIME_HALO = 6,
    PCNN_TIME_HALO_EXPOSED = 7,
    PCNN_TIME_SHUFFLE = 8
} pcnn_time;

/* Seconds per training step spent in `what` by one layer (its index, see
 * pcnn_layer_info) or by the whole network (layer -1).  A fused bucket's
 * communication is shared among its layers by parameter count. */
PCNN_API pcnn_status pcnn_net_time(const pcnn_net *net, int layer, pcnn_time what,
                                   double *seconds_per_step);

/* The overlap ratio R = 100 * sum(T_comm - T_exposed) / sum(T_comm) of seed
 * 001 eq. 3.8: the share of communication hidden behind computation.  NaN
 * before any communication (e.g. on one rank). */
PCNN_API pcnn_status pcnn_net_overlap_ratio(const pcnn_net *net, double *percent);

/* Forget the accumulated timings (e.g. after warm-up steps); a collective
 * still in flight (an all-gather left for the next step's forward pass)
 * counts from the reset. */
PCNN_API pcnn_status pcnn_net_reset_timing(pcnn_net *net);

/* A printable per-layer table of the timings (ms per step) with totals,
 * exposed communication and R; snprintf-style like pcnn_net_summary. */
PCNN_API pcnn_status pcnn_net_timing_report(const pcnn_net *net, char *buf, size_t size,
                                            size_t *needed);

/* Write this rank's recent spans (PCNN_OPT_TRACE_EVENTS) as a Chrome-trace
 * JSON file (chrome://tracing, ui.perfetto.dev): compute on one track,
 * communication on another, a marker per training step on a third, one
 * process per rank (pid: its rank in MPI_COMM_WORLD).  With a
 * communicator, times are on rank 0's clock (measured at finalize), so the
 * ranks' files merge into one trace (scripts/pcnn_merge_traces.py, or
 * pcnn_net_write_trace_merged below).  Written atomically.
 * Errors: INVALID_STATE (tracing off), IO. */
PCNN_API pcnn_status pcnn_net_write_trace(const pcnn_net *net, const char *path);

/* Write ONE Chrome-trace file of every rank's recent spans
 * (PCNN_OPT_TRACE_EVENTS) to `path` on rank 0, for chrome://tracing and
 * ui.perfetto.dev.  Collective over the network's communicator (a local
 * call without one, as pcnn_net_write_trace).  Every rank's timestamps are
 * on rank 0's clock: finalize measured each rank's clock offset to rank 0
 * with a few pings on the communicator (the shortest round trip wins), and
 * this call measures it again; when the two offsets differ by more than
 * their error bounds (half those round trips), the drift between the
 * clocks is corrected linearly, else the more precise offset holds.  Each
 * rank's "clock sync" event gives its offset, error bound and drift.
 * Time 0 is rank 0's clock at finalize's measurement.
 * pcnn_net_write_trace's per-rank files use the same clock,
 * so scripts/pcnn_merge_traces.py (installed as pcnn_merge_traces) merges
 * them into the same file.  Each rank is one process whose pid is its rank
 * in MPI_COMM_WORLD (read through MPI's groups, never communicated on),
 * named "rank N", with three tracks: compute, communication, and steps,
 * which holds one span per training step named "step S" (args.step = S,
 * the step counter when it began).  rank 0 gathers the parts and writes
 * the file atomically; `path` matters on rank 0 only but must not be NULL
 * anywhere.  Errors: INVALID_ARGUMENT (path NULL), INVALID_STATE (tracing
 * off), OUT_OF_MEMORY, UNSUPPORTED (a part over 2 GiB), IO (on rank 0;
 * REMOTE on the others), TIMEOUT. */
PCNN_API pcnn_status pcnn_net_write_trace_merged(pcnn_net *net, const char *path);

/*
 * Callbacks and merged traces.
 *
 * A step callback sees each training step of pcnn_net_train_epoch (and of
 * pcnn_scheduler_train_epoch, which trains through the same loop) and may
 * stop the epoch early; a log callback receives the library's rare
 * diagnostics, which the library otherwise keeps to itself (it never
 * prints).  Both are per network: no global state.  They run on the
 * thread that called into the network, inside that call: a callback must
 * not call functions on the same network (other networks, and any host
 * code, are fine).
 */

/* Called on every rank after each completed step of an epoch: `step` is
 * the step counter when the step began (0 for a network's first step;
 * PCNN_OPT_STEP is step + 1 afterwards), `batch` the index of the step in
 * the epoch (0 .. batches - 1), `loss` the step's global mean loss (equal
 * on every rank).  Return 0 to go on, nonzero to stop the epoch early.
 * Ranks agree on stopping without any collective of their own: the votes
 * travel with the next step's first agreement, and if any rank voted, no
 * rank trains that step and pcnn_net_train_epoch returns PCNN_OK on every
 * rank, *mean_loss being the mean over the samples trained; a vote after
 * the epoch's last step stops nothing.  So one rank may decide alone (say
 * on a wall-clock budget) and no rank deadlocks. */
typedef int (*pcnn_step_callback)(void *user, int64_t step, int batch, int batches,
                                  double loss);

/* Install (or, with callback NULL, remove) the step callback; `user` is
 * passed back to it.  Local; any time after pcnn_net_create.  Errors:
 * INVALID_ARGUMENT (net NULL). */
PCNN_API pcnn_status pcnn_net_set_step_callback(pcnn_net *net, pcnn_step_callback callback,
                                                void *user);

/* *stopped receives 1 when the last pcnn_net_train_epoch (or scheduler
 * epoch) ended before its last batch because a step callback on some rank
 * asked, else 0: the same on every rank.  Errors: INVALID_ARGUMENT (net or
 * stopped NULL). */
PCNN_API pcnn_status pcnn_net_stopped_early(const pcnn_net *net, int *stopped);

/* How much a diagnostic matters. */
typedef enum pcnn_log_level {
    PCNN_LOG_INFO = 0,    /* a choice the host may want to know of */
    PCNN_LOG_WARNING = 1  /* something fell back or failed: worth a look */
} pcnn_log_level;

/* Receives a diagnostic: one line without a newline, valid during the call
 * only.  Today's messages, all rare (at most a few per network):
 *   - at finalize, INFO: the progress engine chosen automatically when it
 *     is not the communication thread, with the reason;
 *   - at finalize, WARNING: a convolution algorithm asked for with
 *     PCNN_OPT_CONV_ALGORITHM that does not apply to a layer, and what
 *     the layer computes with instead;
 *   - once, WARNING: the network failed because one of its collectives
 *     timed out or failed, here or on another rank (the call that noticed
 *     also returns the error).
 * A performance model (section 9.3) has its own, for its calibrations'
 * progress (pcnn_perfmodel_set_log_callback).
 * The texts may change; the levels say how much they matter. */
typedef void (*pcnn_log_callback)(void *user, pcnn_log_level level, const char *message);

/* Install (or, with callback NULL, remove) the log callback; `user` is
 * passed back to it.  Local; any time after pcnn_net_create (set it before
 * finalize to hear finalize's messages).  Errors: INVALID_ARGUMENT (net
 * NULL). */
PCNN_API pcnn_status pcnn_net_set_log_callback(pcnn_net *net, pcnn_log_callback callback,
                                               void *user);

/* ------------------------------------------------------------------------ */
/* 7. Checkpoints                                                            */
/* ------------------------------------------------------------------------ */

/*
 * A checkpoint holds everything that decides the rest of a training run:
 * the parameters, the optimizer state (momentum, Adam's moments) of every
 * parameter, batch-norm running statistics, the step counter (with the seed
 * it fixes dropout masks, warm-up and decay), the training options
 * (learning rate, momentum, weight decay, Adam's betas and epsilon, warm-up
 * and decay settings) and a hash of the network's structure.  Loading it
 * into a network built the same way and training on gives bitwise the
 * results of never having stopped (same ranks and threads), or the same up
 * to float summation order with another number of ranks.
 *
 * The file is versioned and checksummed; docs/checkpoint-format.md
 * specifies its layout.  It is written atomically (a temporary file, fsync,
 * rename, fsync of the directory): a crash at any moment leaves the
 * previous checkpoint or the new one, never a mix.
 *
 * With a communicator both calls are collective.  Rank 0 writes and reads
 * the file (only its filesystem needs the path; a FIFO, device or
 * directory given to load is refused with PCNN_ERR_IO, never waited on);
 * the optimizer state, of which each rank may keep only its own slices,
 * is gathered on save and
 * re-sliced on load for the current number of ranks, so a run saved on P
 * ranks resumes on any number of ranks, with another batch size, exchange
 * strategy or PCNN_OPT_BUCKET_BYTES.  Batch-norm statistics are per rank:
 * each rank gets its own back when the number of ranks is unchanged, and
 * their mean otherwise (synchronised batch norms hold the same statistics
 * on every rank).  A bad file or a failed write returns the same
 * status and message on every rank; a failure of one rank's own (out of
 * memory) returns PCNN_ERR_REMOTE on the others.
 */

/* Save the network's training state to `path` (replacing any file there
 * only once the new one is complete).  After finalize, between steps.
 * Collective with a communicator.  Before writing, removes the
 * temporaries that saves to the same path killed earlier left behind (see
 * pcnn_checkpoint_cleanup below).  Errors: INVALID_ARGUMENT (NULL
 * net or path, empty path), INVALID_STATE (not finalized), IO (cannot
 * create, write, sync or rename: the previous file, if any, is intact),
 * OUT_OF_MEMORY, MPI, REMOTE. */
PCNN_API pcnn_status pcnn_net_save(pcnn_net *net, const char *path);

/* Restore the state saved by pcnn_net_save into a finalized network built
 * the same way: same layers in the same order with the same kinds, shapes
 * and configurations, same loss, optimizer and PCNN_OPT_SEED.  The saved
 * options replace the network's (set options after loading to change
 * them); extra bytes (pcnn_net_save_extra) are ignored.  The file is
 * verified completely before anything changes: on any error the network
 * is untouched.  Collective with a communicator.
 * Errors: INVALID_ARGUMENT, INVALID_STATE (not finalized), IO (missing or
 * unreadable file), CORRUPT (truncated, damaged: a checksum fails, or
 * malformed, or holding values no run produces: NaN or infinite parameters
 * or optimizer state, negative Adam second moments or batch-norm
 * variances, options outside the ranges pcnn_net_set_option accepts; the
 * message names the field and the first bad index), UNSUPPORTED (an intact file of a newer format version),
 * MISMATCH (built differently: the message names the first differing
 * layer, or the loss, optimizer or seed), OUT_OF_MEMORY, MPI, REMOTE. */
PCNN_API pcnn_status pcnn_net_load(pcnn_net *net, const char *path);

/* The same with `extra_bytes` opaque bytes of the host's stored in the same
 * file (for instance pcnn_scheduler_save_state's, so that the network and
 * the scheduler are saved together, atomically).  extra may be NULL when
 * extra_bytes is 0.  With a communicator rank 0's bytes are written. */
PCNN_API pcnn_status pcnn_net_save_extra(pcnn_net *net, const char *path, const void *extra,
                                         size_t extra_bytes);

/* pcnn_net_load that also copies the stored extra bytes into extra (size
 * bytes; may be NULL when size is 0) and their count into *extra_bytes
 * (may be NULL; 0 if the file has none).  If they do not fit, fails with
 * SHAPE, changes nothing and still writes *extra_bytes: call again with a
 * larger buffer.  With a communicator every rank receives them. */
PCNN_API pcnn_status pcnn_net_load_extra(pcnn_net *net, const char *path, void *extra,
                                         size_t size, size_t *extra_bytes);

/* Remove what interrupted saves to `path` left behind.  pcnn_net_save
 * (and pcnn_net_write_trace) write a temporary file next to `path`, named
 * `<path>.pcnn-tmp.<host>.<pid>.<n>`, and rename it over `path` once it is
 * complete; a process killed meanwhile (kill -9, power loss) leaves it.
 * Each save to `path` first removes such temporaries itself; this call
 * does only that, e.g. at start-up or for a path no longer saved to.  It
 * removes exactly the regular files owned by this user in path's directory
 * named `<file name of path>.pcnn-tmp.<this host>.<pid>.<n>` (host: this
 * host's name, characters other than letters, digits, '-' and '_' as '_',
 * at most 32; pid and n decimal) whose pid is not a running process of this
 * host; never `path` itself, the temporaries of this process or of any
 * running process, nor those written by other hosts into a shared
 * directory.  *removed (may be NULL) receives the number of files removed.
 * Local: no communicator is involved.  Errors: INVALID_ARGUMENT (NULL or
 * empty path, or one ending in '/'), IO (the directory cannot be read, or
 * a stale temporary cannot be removed; the others are removed all the
 * same). */
PCNN_API pcnn_status pcnn_checkpoint_cleanup(const char *path, int *removed);

/* ------------------------------------------------------------------------ */
/* 8. Adaptive batch scheduler                                               */
/* ------------------------------------------------------------------------ */

/*
 * Seed 001 chapter 5: start with a small batch B_s and grow it to B_m while
 * the learning rate follows, so that most epochs run with the large batch
 * (more ranks busy, fewer exchanges per epoch) at about the accuracy of the
 * small one.  The scheduler watches
 *
 *     theta_i = (F(w_0) - F(w_i)) / ||w_0 - w_i||                (eq. 5.4)
 *
 * where w_0 are the parameters when the scheduler was created, w_i those
 * after epoch i, F(w_i) the mean training loss of epoch i and F(w_0) the
 * loss of the first training step, taken before its update (or
 * PCNN_SCHED_INITIAL_LOSS).  After each epoch n = 1, 2, ... (Algorithm 3):
 *   1. While K is unknown (PCNN_SCHED_INTERVAL_EPOCHS 0): K = n at the first
 *      epoch whose theta differs from the previous epoch's by less than
 *      PCNN_SCHED_THETA_THRESHOLD of it (strictly).
 *   2. If n is a multiple of K and B < B_m: B = min(round(B x growth), B_m)
 *      and the learning rate becomes mu_0 x B / B_s (PCNN_SCHED_LR_LINEAR)
 *      or mu_0 x sqrt(B / B_s) (PCNN_SCHED_LR_ROOT, eq. 5.3).
 *   3. Plateau rule (section 5.1.5): an epoch improves if its loss is below
 *      the best counted loss by more than PCNN_SCHED_PLATEAU_THRESHOLD of
 *      it.  After PCNN_SCHED_PLATEAU_EPOCHS epochs in a row without
 *      improvement the learning rate drops: the first time to mu_0 x beta,
 *      later times by a factor beta.  Losses are compared within one
 *      (B, learning rate) phase only: an epoch where B grew restarts the
 *      rule (the next epoch's loss is the new best), so a learning rate
 *      rising with B is not taken for a plateau.  After the first drop,
 *      growth (if B is still below B_m) no longer raises the learning rate.
 * Warm-up (PCNN_SCHED_WARMUP_EPOCHS = W): epoch e <= W uses e/W of the
 * learning rate; warm-up epochs count neither for the plateau rule nor for
 * K (only thetas of epochs after W are compared: K >= W + 2).
 *
 * Degree of parallelism (section 5.2.1).  A rank given fewer than m =
 * PCNN_SCHED_MIN_LOCAL_SAMPLES samples (default 2) leaves its cores
 * underused, so a batch of b samples is computed by A = min(P, max(1,
 * floor(b / m))) ranks only: ranks 0..A-1 take floor(b/A) or ceil(b/A)
 * samples as usual, ranks A..P-1 none.  The idle ranks still take part in
 * every gradient exchange with zero gradients, so they receive the updated
 * parameters and all ranks stay identical; as B grows, more ranks join
 * until all P compute.  Training equals a single rank training on the
 * whole batch (up to float summation order; batch normalisation uses each
 * computing rank's local statistics, as everywhere, and an idle rank's
 * running statistics wait until it computes; synchronised batch norms,
 * PCNN_OPT_SYNC_BATCHNORM, use the whole batch's on every rank, idle ones included).
 * Memory is planned once: finalize the network with max_batch >= B_m, large enough also for
 * the largest share the rule gives one rank (checked by
 * pcnn_scheduler_begin_epoch, whose error names the max_batch needed);
 * changing B then allocates nothing.
 *
 * Two ways to drive it:
 *   - pcnn_scheduler_train_epoch trains one epoch under the schedule;
 *   - or pcnn_scheduler_begin_epoch gives the batch size and learning rate,
 *     the host trains (pcnn_scheduler_share says which samples this rank
 *     computes), and pcnn_scheduler_end_epoch takes the epoch's loss.
 * Calls marked collective must be made by every rank of the network's
 * communicator, in the same order (on a network without one they are
 * local).  Every decision is taken from values reduced across ranks, so all
 * ranks take the same decisions.  The network must outlive the scheduler.
 */

typedef struct pcnn_scheduler pcnn_scheduler;

/* How the learning rate follows the batch size. */
typedef enum pcnn_sched_lr_rule {
    PCNN_SCHED_LR_LINEAR = 0, /* mu = mu_0 * B / B_s: the noise scale of eq. 5.2 */
    PCNN_SCHED_LR_ROOT = 1    /* mu = mu_0 * sqrt(B / B_s): eq. 5.3 */
} pcnn_sched_lr_rule;

/* Bits of PCNN_SCHED_EVENTS: what the last finished epoch decided. */
#define PCNN_SCHED_EVENT_INTERVAL_FOUND 1u /* K was fixed */
#define PCNN_SCHED_EVENT_BATCH_GREW 2u     /* B (and perhaps mu) grew */
#define PCNN_SCHED_EVENT_LR_DECAYED 4u     /* a plateau decay */

/* Scheduler options (pcnn_scheduler_set_option / _get_option), doubles;
 * counts must be integral.  The settable ones (0..9) may change only before
 * the first epoch begins (PCNN_ERR_INVALID_STATE afterwards); 10.. are read
 * only. */
typedef enum pcnn_sched_option {
    /* B grows by this factor every K epochs.  Default 2; in (1, 1024]. */
    PCNN_SCHED_GROWTH_FACTOR = 0,
    /* A pcnn_sched_lr_rule.  Default PCNN_SCHED_LR_LINEAR. */
    PCNN_SCHED_LR_RULE = 1,
    /* K in epochs; 0 (default): find it from theta. */
    PCNN_SCHED_INTERVAL_EPOCHS = 2,
    /* Relative change of theta under which it counts as saturated.
     * Default 0.10; in (0, 10]. */
    PCNN_SCHED_THETA_THRESHOLD = 3,
    /* beta, the plateau decay factor.  Default 0.1; in (0, 1]. */
    PCNN_SCHED_DECAY_FACTOR = 4,
    /* Epochs in a row without improvement that make a plateau.  Default 3;
     * 0 turns decays off. */
    PCNN_SCHED_PLATEAU_EPOCHS = 5,
    /* Relative loss improvement that counts.  Default 0.01; in [0, 1). */
    PCNN_SCHED_PLATEAU_THRESHOLD = 6,
    /* Warm-up epochs W.  Default 0 (none). */
    PCNN_SCHED_WARMUP_EPOCHS = 7,
    /* m: fewest samples a computing rank gets (see above).  Default 2; 0
     * makes every rank compute whatever the batch. */
    PCNN_SCHED_MIN_LOCAL_SAMPLES = 8,
    /* F(w_0).  pcnn_scheduler_train_epoch sets it from the first step when
     * unset; a host driving its own epochs sets it before the first
     * pcnn_scheduler_end_epoch.  Settable until then; NaN while unknown. */
    PCNN_SCHED_INITIAL_LOSS = 9,
    /* Read only. */
    PCNN_SCHED_EPOCH = 10,          /* epochs finished */
    PCNN_SCHED_BATCH = 11,          /* B of the next epoch */
    PCNN_SCHED_LEARNING_RATE = 12,  /* mu of the next epoch, warm-up included */
    PCNN_SCHED_INTERVAL = 13,       /* K; 0 while unknown */
    PCNN_SCHED_THETA = 14,          /* theta of the last epoch; NaN before one
                                       or while w has not moved */
    PCNN_SCHED_DECAYS = 15,         /* plateau decays so far */
    PCNN_SCHED_ACTIVE_RANKS = 16,   /* ranks computing a batch of B next epoch */
    PCNN_SCHED_EVENTS = 17          /* PCNN_SCHED_EVENT_* bits of the last epoch */
} pcnn_sched_option;

/* Create a scheduler for a finalized network, from B_s = start_batch to
 * B_m = max_batch (1 <= B_s <= B_m <= the network's max_batch) with initial
 * learning rate mu_0 = initial_lr (finite, > 0).  Keeps w_0 = the current
 * parameters (this rank's 1/P slice of them), so create it after setting
 * or loading the parameters to start from.  *out receives the handle, to
 * free with pcnn_scheduler_destroy before the network is destroyed.
 * Collective.  Errors: INVALID_ARGUMENT, INVALID_STATE (not finalized),
 * OUT_OF_MEMORY, REMOTE. */
PCNN_API pcnn_status pcnn_scheduler_create(pcnn_net *net, int start_batch, int max_batch,
                                           double initial_lr, pcnn_scheduler **out);

/* Free a scheduler and set *sched to NULL; NULL is a no-op.  Local.  The
 * network keeps the learning rate last set. */
PCNN_API pcnn_status pcnn_scheduler_destroy(pcnn_scheduler **sched);

/* Set or read an option (pcnn_sched_option).  Local: set the same values
 * on every rank (the first pcnn_scheduler_begin_epoch checks, and fails
 * with PCNN_ERR_MISMATCH otherwise).  Errors: INVALID_ARGUMENT (unknown
 * option, value out of range), INVALID_STATE (read-only option, or too
 * late). */
PCNN_API pcnn_status pcnn_scheduler_set_option(pcnn_scheduler *sched, pcnn_sched_option option,
                                               double value);
PCNN_API pcnn_status pcnn_scheduler_get_option(const pcnn_scheduler *sched,
                                               pcnn_sched_option option, double *value);

/* Start an epoch: *batch (may be NULL) receives B, *lr (may be NULL) the
 * learning rate, which is also set as the network's
 * PCNN_OPT_LEARNING_RATE (the network's own warm-up and decay options, if
 * set, still apply on top).  Collective.  Errors: INVALID_STATE (an epoch
 * already begun), SHAPE (the network's max_batch cannot hold B_m or the
 * largest share of a rank), MISMATCH (ranks configured differently),
 * NUMERIC (the learning rate underflowed to 0), REMOTE. */
PCNN_API pcnn_status pcnn_scheduler_begin_epoch(pcnn_scheduler *sched, int *batch, double *lr);

/* Finish the epoch begun: `loss` is its mean training loss (the mean over
 * ranks of the values passed is used, so pass the global mean that
 * pcnn_net_train_epoch returns, or each rank's own).  Measures
 * ||w_0 - w_i|| over all parameters (each rank its slice, one small
 * reduction), then takes the decisions above for the next epoch.
 * Collective.  Errors: INVALID_STATE (no epoch begun, or F(w_0) unknown),
 * NUMERIC (loss not finite), MISMATCH (F(w_0) set on some ranks only),
 * OUT_OF_MEMORY, REMOTE; on error the epoch stays open. */
PCNN_API pcnn_status pcnn_scheduler_end_epoch(pcnn_scheduler *sched, double loss);

/* Begin an epoch, train the network over `data` in its current order
 * (shuffle it first, as for pcnn_net_train_epoch) with batches of B split
 * by the degree-of-parallelism rule, and end the epoch with its mean
 * training loss, which *mean_loss (may be NULL) receives.  Collective.
 * Errors: those of pcnn_scheduler_begin_epoch, pcnn_net_train_epoch and
 * pcnn_scheduler_end_epoch; a failed epoch is not counted. */
PCNN_API pcnn_status pcnn_scheduler_train_epoch(pcnn_scheduler *sched, const pcnn_dataset *data,
                                                double *mean_loss);

/* This rank's share of a global batch of `count` >= 0 samples under the
 * degree-of-parallelism rule: samples [*first, *first + *n) of the batch
 * (*n is 0 on ranks that do not compute; pass them n = 0 to
 * pcnn_net_train_step).  Local. */
PCNN_API pcnn_status pcnn_scheduler_share(const pcnn_scheduler *sched, int count, int *first,
                                          int *n);

/* theta of epoch `epoch` (1 .. PCNN_SCHED_EPOCH): the history.  NaN for an
 * epoch where w had not moved.  Local. */
PCNN_API pcnn_status pcnn_scheduler_theta(const pcnn_scheduler *sched, long epoch,
                                          double *theta);

/*
 * The scheduler's state, for checkpoints: a byte string that restores the
 * schedule exactly (same later decisions), on any number of ranks:
 * versioned, checksummed, independent of the host's byte order
 * (docs/scheduler-state-format.md specifies it).  The options are not
 * saved: create the resumed scheduler with the same arguments and options.
 */

/* Size in bytes of the state (it grows by 8 bytes per epoch).  Local. */
PCNN_API pcnn_status pcnn_scheduler_state_bytes(const pcnn_scheduler *sched, size_t *bytes);

/* Write the state into buf (size bytes, at least pcnn_scheduler_state_bytes);
 * every rank receives the same bytes.  Between epochs.  Collective.
 * Errors: INVALID_ARGUMENT, SHAPE (buf too small), INVALID_STATE (inside an
 * epoch), OUT_OF_MEMORY, MPI, REMOTE. */
PCNN_API pcnn_status pcnn_scheduler_save_state(const pcnn_scheduler *sched, void *buf,
                                               size_t size);

/* Restore a state written by pcnn_scheduler_save_state, on a scheduler
 * created with the same B_s, B_m and mu_0 over a network with the same
 * parameter count (the number of ranks may differ).  The next epoch is
 * epoch n + 1.  Between epochs.  Collective.  Errors: CORRUPT (truncated,
 * damaged, or inconsistent), UNSUPPORTED (a newer format), MISMATCH (other
 * B_s, B_m, mu_0 or parameter count), INVALID_STATE, OUT_OF_MEMORY, REMOTE;
 * on error the scheduler is unchanged. */
PCNN_API pcnn_status pcnn_scheduler_load_state(pcnn_scheduler *sched, const void *buf,
                                               size_t size);

#ifdef __cplusplus
}
#endif

/* Section 9's names seen without PCNN_EXPERIMENTAL: each says to define it. */
/* BEGIN section 9's names without PCNN_EXPERIMENTAL (generated by scripts/gen_experimental_hints.py) */
#if !defined(PCNN_EXPERIMENTAL) && !defined(PCNN_H_HINTS)
#define PCNN_H_HINTS
#if defined(__has_attribute)
#if __has_attribute(unavailable)
#define PCNN_EXPERIMENTAL_ONLY(name) __attribute__((unavailable(#name " is in section 9 of pcnn.h: define PCNN_EXPERIMENTAL before including it")))
#endif
#endif
#ifndef PCNN_EXPERIMENTAL_ONLY
#define PCNN_EXPERIMENTAL_ONLY(name)
#endif
#ifdef __cplusplus
#define PCNN_EXPERIMENTAL_ONLY_ARGS ... /* any call: the message is the one above */
#else
#define PCNN_EXPERIMENTAL_ONLY_ARGS void
#endif
PCNN_EXPERIMENTAL_ONLY(pcnn_net_set_distribution) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_net_set_distribution(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_layer_set_distribution) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_layer_set_distribution(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_layer_get_distribution) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_layer_get_distribution(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_layer_local_box) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_layer_local_box(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_net_group_info) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_net_group_info(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_net_train_step_local) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_net_train_step_local(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_net_predict_parallel) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_net_predict_parallel(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_perfmodel_create) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_create(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_perfmodel_destroy) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_destroy(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_perfmodel_set_log_callback) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_set_log_callback(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_perfmodel_calibrate_comm) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_calibrate_comm(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_perfmodel_calibrate_compute) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_calibrate_compute(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_perfmodel_calibrate_pace) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_calibrate_pace(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_perfmodel_fit_regressors) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_fit_regressors(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_perfmodel_set_param) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_set_param(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_perfmodel_get_param) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_get_param(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_perfmodel_collective_time) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_collective_time(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_perfmodel_predict) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_predict(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_perfmodel_layer_time) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_layer_time(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_perfmodel_validate) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_validate(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_perfmodel_report) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_report(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_perfmodel_confidence) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_confidence(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_perfmodel_save) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_save(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_perfmodel_load) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_load(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_perfmodel_share) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_share(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_net_plan_distribution) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_net_plan_distribution(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_net_plan_report) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_net_plan_report(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_net_set_perfmodel) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_net_set_perfmodel(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_layer_get_exchange) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_layer_get_exchange(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_sigmoid) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_sigmoid(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_tanh) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_tanh(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_upsample2d) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_upsample2d(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_upsample3d) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_upsample3d(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_conv_transpose2d) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_conv_transpose2d(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_conv_transpose3d) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_conv_transpose3d(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_concat) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_concat(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_dataset_open_hdf5) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_dataset_open_hdf5(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_dataset_set_transform) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_dataset_set_transform(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_dataset_target_info) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_dataset_target_info(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_dataset_io_bytes) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_dataset_io_bytes(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_dataset_set_sharded) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_dataset_set_sharded(PCNN_EXPERIMENTAL_ONLY_ARGS);
PCNN_EXPERIMENTAL_ONLY(pcnn_dataset_get_sharded) void pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_dataset_get_sharded(PCNN_EXPERIMENTAL_ONLY_ARGS);
typedef int pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel PCNN_EXPERIMENTAL_ONLY(pcnn_perfmodel);
typedef int pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_collective PCNN_EXPERIMENTAL_ONLY(pcnn_collective);
typedef int pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perf_param PCNN_EXPERIMENTAL_ONLY(pcnn_perf_param);
typedef int pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perf_flag PCNN_EXPERIMENTAL_ONLY(pcnn_perf_flag);
typedef int pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_upsample_mode PCNN_EXPERIMENTAL_ONLY(pcnn_upsample_mode);
enum {
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_DIM_N PCNN_EXPERIMENTAL_ONLY(PCNN_DIM_N),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_DIM_D PCNN_EXPERIMENTAL_ONLY(PCNN_DIM_D),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_DIM_H PCNN_EXPERIMENTAL_ONLY(PCNN_DIM_H),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_DIM_W PCNN_EXPERIMENTAL_ONLY(PCNN_DIM_W),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_COLL_SENDRECV PCNN_EXPERIMENTAL_ONLY(PCNN_COLL_SENDRECV),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_COLL_ALLREDUCE PCNN_EXPERIMENTAL_ONLY(PCNN_COLL_ALLREDUCE),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_COLL_ALLTOALL PCNN_EXPERIMENTAL_ONLY(PCNN_COLL_ALLTOALL),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_COLL_ALLGATHER PCNN_EXPERIMENTAL_ONLY(PCNN_COLL_ALLGATHER),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_ALPHA_S PCNN_EXPERIMENTAL_ONLY(PCNN_PERF_ALPHA_S),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_BETA_S_PER_BYTE PCNN_EXPERIMENTAL_ONLY(PCNN_PERF_BETA_S_PER_BYTE),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_GAMMA_S_PER_BYTE PCNN_EXPERIMENTAL_ONLY(PCNN_PERF_GAMMA_S_PER_BYTE),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_LINK_GBITS PCNN_EXPERIMENTAL_ONLY(PCNN_PERF_LINK_GBITS),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_STRATEGY PCNN_EXPERIMENTAL_ONLY(PCNN_PERF_STRATEGY),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_ENGINE PCNN_EXPERIMENTAL_ONLY(PCNN_PERF_ENGINE),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_NONBLOCKING_PROGRESS PCNN_EXPERIMENTAL_ONLY(PCNN_PERF_NONBLOCKING_PROGRESS),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_COMPUTE_SOURCE PCNN_EXPERIMENTAL_ONLY(PCNN_PERF_COMPUTE_SOURCE),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_MEMORY_CONTENTION PCNN_EXPERIMENTAL_ONLY(PCNN_PERF_MEMORY_CONTENTION),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_RANK_PACE PCNN_EXPERIMENTAL_ONLY(PCNN_PERF_RANK_PACE),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_FLAG_LINK_DEFAULTS PCNN_EXPERIMENTAL_ONLY(PCNN_PERF_FLAG_LINK_DEFAULTS),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_FLAG_LINK_FEW_POINTS PCNN_EXPERIMENTAL_ONLY(PCNN_PERF_FLAG_LINK_FEW_POINTS),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_FLAG_LINK_SHORT_RANGE PCNN_EXPERIMENTAL_ONLY(PCNN_PERF_FLAG_LINK_SHORT_RANGE),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_FLAG_LINK_NOISY PCNN_EXPERIMENTAL_ONLY(PCNN_PERF_FLAG_LINK_NOISY),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_FLAG_COMPUTE_NOISY PCNN_EXPERIMENTAL_ONLY(PCNN_PERF_FLAG_COMPUTE_NOISY),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_FLAG_COMPUTE_ESTIMATED PCNN_EXPERIMENTAL_ONLY(PCNN_PERF_FLAG_COMPUTE_ESTIMATED),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_UPSAMPLE_NEAREST PCNN_EXPERIMENTAL_ONLY(PCNN_UPSAMPLE_NEAREST),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_UPSAMPLE_LINEAR PCNN_EXPERIMENTAL_ONLY(PCNN_UPSAMPLE_LINEAR),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_OPT_KEEP_IM2COL PCNN_EXPERIMENTAL_ONLY(PCNN_OPT_KEEP_IM2COL),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_OPT_ENGINE PCNN_EXPERIMENTAL_ONLY(PCNN_OPT_ENGINE),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_OPT_ACTIVE_ENGINE PCNN_EXPERIMENTAL_ONLY(PCNN_OPT_ACTIVE_ENGINE),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_OPT_COMM_CORE PCNN_EXPERIMENTAL_ONLY(PCNN_OPT_COMM_CORE),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_OPT_CONV_ALGORITHM PCNN_EXPERIMENTAL_ONLY(PCNN_OPT_CONV_ALGORITHM),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_OPT_BN_SCOPE PCNN_EXPERIMENTAL_ONLY(PCNN_OPT_BN_SCOPE),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_OPT_HALO_OVERLAP PCNN_EXPERIMENTAL_ONLY(PCNN_OPT_HALO_OVERLAP),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_OPT_SPATIAL_FALLBACK PCNN_EXPERIMENTAL_ONLY(PCNN_OPT_SPATIAL_FALLBACK),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_OPT_HALO_SCHEDULE PCNN_EXPERIMENTAL_ONLY(PCNN_OPT_HALO_SCHEDULE),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_OPT_PLAN_MAX_SPATIAL PCNN_EXPERIMENTAL_ONLY(PCNN_OPT_PLAN_MAX_SPATIAL),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_OPT_PLAN_SPATIAL_DIMS PCNN_EXPERIMENTAL_ONLY(PCNN_OPT_PLAN_SPATIAL_DIMS),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_OPT_PLAN_MIXED PCNN_EXPERIMENTAL_ONLY(PCNN_OPT_PLAN_MIXED),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_OPT_MEMORY_LIMIT_MIB PCNN_EXPERIMENTAL_ONLY(PCNN_OPT_MEMORY_LIMIT_MIB),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_EXCHANGE_AUTO PCNN_EXPERIMENTAL_ONLY(PCNN_EXCHANGE_AUTO),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_LOSS_BCE_WITH_LOGITS PCNN_EXPERIMENTAL_ONLY(PCNN_LOSS_BCE_WITH_LOGITS),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_HDF5_IMAGES PCNN_EXPERIMENTAL_ONLY(PCNN_HDF5_IMAGES),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_HDF5_VOLUMES PCNN_EXPERIMENTAL_ONLY(PCNN_HDF5_VOLUMES),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_HDF5_CHANNELS_LAST PCNN_EXPERIMENTAL_ONLY(PCNN_HDF5_CHANNELS_LAST),
    pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_HDF5_FLOAT_TARGETS PCNN_EXPERIMENTAL_ONLY(PCNN_HDF5_FLOAT_TARGETS),
    pcnn_experimental_hints_end_
};
#define pcnn_net_set_distribution pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_net_set_distribution
#define pcnn_layer_set_distribution pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_layer_set_distribution
#define pcnn_layer_get_distribution pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_layer_get_distribution
#define pcnn_layer_local_box pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_layer_local_box
#define pcnn_net_group_info pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_net_group_info
#define pcnn_net_train_step_local pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_net_train_step_local
#define pcnn_net_predict_parallel pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_net_predict_parallel
#define pcnn_perfmodel_create pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_create
#define pcnn_perfmodel_destroy pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_destroy
#define pcnn_perfmodel_set_log_callback pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_set_log_callback
#define pcnn_perfmodel_calibrate_comm pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_calibrate_comm
#define pcnn_perfmodel_calibrate_compute pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_calibrate_compute
#define pcnn_perfmodel_calibrate_pace pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_calibrate_pace
#define pcnn_perfmodel_fit_regressors pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_fit_regressors
#define pcnn_perfmodel_set_param pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_set_param
#define pcnn_perfmodel_get_param pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_get_param
#define pcnn_perfmodel_collective_time pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_collective_time
#define pcnn_perfmodel_predict pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_predict
#define pcnn_perfmodel_layer_time pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_layer_time
#define pcnn_perfmodel_validate pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_validate
#define pcnn_perfmodel_report pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_report
#define pcnn_perfmodel_confidence pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_confidence
#define pcnn_perfmodel_save pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_save
#define pcnn_perfmodel_load pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_load
#define pcnn_perfmodel_share pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel_share
#define pcnn_net_plan_distribution pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_net_plan_distribution
#define pcnn_net_plan_report pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_net_plan_report
#define pcnn_net_set_perfmodel pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_net_set_perfmodel
#define pcnn_layer_get_exchange pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_layer_get_exchange
#define pcnn_sigmoid pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_sigmoid
#define pcnn_tanh pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_tanh
#define pcnn_upsample2d pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_upsample2d
#define pcnn_upsample3d pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_upsample3d
#define pcnn_conv_transpose2d pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_conv_transpose2d
#define pcnn_conv_transpose3d pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_conv_transpose3d
#define pcnn_concat pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_concat
#define pcnn_dataset_open_hdf5 pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_dataset_open_hdf5
#define pcnn_dataset_set_transform pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_dataset_set_transform
#define pcnn_dataset_target_info pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_dataset_target_info
#define pcnn_dataset_io_bytes pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_dataset_io_bytes
#define pcnn_dataset_set_sharded pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_dataset_set_sharded
#define pcnn_dataset_get_sharded pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_dataset_get_sharded
#define pcnn_perfmodel pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perfmodel
#define pcnn_collective pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_collective
#define pcnn_perf_param pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perf_param
#define pcnn_perf_flag pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_perf_flag
#define pcnn_upsample_mode pcnn_define_PCNN_EXPERIMENTAL_to_use_pcnn_upsample_mode
#define PCNN_DIM_N pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_DIM_N
#define PCNN_DIM_D pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_DIM_D
#define PCNN_DIM_H pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_DIM_H
#define PCNN_DIM_W pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_DIM_W
#define PCNN_COLL_SENDRECV pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_COLL_SENDRECV
#define PCNN_COLL_ALLREDUCE pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_COLL_ALLREDUCE
#define PCNN_COLL_ALLTOALL pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_COLL_ALLTOALL
#define PCNN_COLL_ALLGATHER pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_COLL_ALLGATHER
#define PCNN_PERF_ALPHA_S pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_ALPHA_S
#define PCNN_PERF_BETA_S_PER_BYTE pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_BETA_S_PER_BYTE
#define PCNN_PERF_GAMMA_S_PER_BYTE pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_GAMMA_S_PER_BYTE
#define PCNN_PERF_LINK_GBITS pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_LINK_GBITS
#define PCNN_PERF_STRATEGY pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_STRATEGY
#define PCNN_PERF_ENGINE pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_ENGINE
#define PCNN_PERF_NONBLOCKING_PROGRESS pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_NONBLOCKING_PROGRESS
#define PCNN_PERF_COMPUTE_SOURCE pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_COMPUTE_SOURCE
#define PCNN_PERF_MEMORY_CONTENTION pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_MEMORY_CONTENTION
#define PCNN_PERF_RANK_PACE pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_RANK_PACE
#define PCNN_PERF_FLAG_LINK_DEFAULTS pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_FLAG_LINK_DEFAULTS
#define PCNN_PERF_FLAG_LINK_FEW_POINTS pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_FLAG_LINK_FEW_POINTS
#define PCNN_PERF_FLAG_LINK_SHORT_RANGE pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_FLAG_LINK_SHORT_RANGE
#define PCNN_PERF_FLAG_LINK_NOISY pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_FLAG_LINK_NOISY
#define PCNN_PERF_FLAG_COMPUTE_NOISY pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_FLAG_COMPUTE_NOISY
#define PCNN_PERF_FLAG_COMPUTE_ESTIMATED pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_PERF_FLAG_COMPUTE_ESTIMATED
#define PCNN_UPSAMPLE_NEAREST pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_UPSAMPLE_NEAREST
#define PCNN_UPSAMPLE_LINEAR pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_UPSAMPLE_LINEAR
#define PCNN_OPT_KEEP_IM2COL pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_OPT_KEEP_IM2COL
#define PCNN_OPT_ENGINE pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_OPT_ENGINE
#define PCNN_OPT_ACTIVE_ENGINE pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_OPT_ACTIVE_ENGINE
#define PCNN_OPT_COMM_CORE pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_OPT_COMM_CORE
#define PCNN_OPT_CONV_ALGORITHM pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_OPT_CONV_ALGORITHM
#define PCNN_OPT_BN_SCOPE pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_OPT_BN_SCOPE
#define PCNN_OPT_HALO_OVERLAP pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_OPT_HALO_OVERLAP
#define PCNN_OPT_SPATIAL_FALLBACK pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_OPT_SPATIAL_FALLBACK
#define PCNN_OPT_HALO_SCHEDULE pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_OPT_HALO_SCHEDULE
#define PCNN_OPT_PLAN_MAX_SPATIAL pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_OPT_PLAN_MAX_SPATIAL
#define PCNN_OPT_PLAN_SPATIAL_DIMS pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_OPT_PLAN_SPATIAL_DIMS
#define PCNN_OPT_PLAN_MIXED pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_OPT_PLAN_MIXED
#define PCNN_OPT_MEMORY_LIMIT_MIB pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_OPT_MEMORY_LIMIT_MIB
#define PCNN_EXCHANGE_AUTO pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_EXCHANGE_AUTO
#define PCNN_LOSS_BCE_WITH_LOGITS pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_LOSS_BCE_WITH_LOGITS
#define PCNN_HDF5_IMAGES pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_HDF5_IMAGES
#define PCNN_HDF5_VOLUMES pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_HDF5_VOLUMES
#define PCNN_HDF5_CHANNELS_LAST pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_HDF5_CHANNELS_LAST
#define PCNN_HDF5_FLOAT_TARGETS pcnn_define_PCNN_EXPERIMENTAL_to_use_PCNN_HDF5_FLOAT_TARGETS
#endif
/* END section 9's names without PCNN_EXPERIMENTAL */

#endif /* PCNN_H */


/* ------------------------------------------------------------------------ */
/* 9. Experimental                                                           */
/* ------------------------------------------------------------------------ */

/*
 * Define PCNN_EXPERIMENTAL before including this header to see this section.
 * Its contents may change or go in any minor version (the numbers behind
 * the names stay reserved): use it to tune and measure, not in code that
 * must build against every 0.x release.  Outside the include guard, so a
 * later include with PCNN_EXPERIMENTAL defined still adds it.  Without
 * PCNN_EXPERIMENTAL, every name of this section is defined to an
 * identifier that says so (pcnn_define_PCNN_EXPERIMENTAL_to_use_<name>):
 * a host using one fails to compile with a message naming the fix.
 *
 * What lives here, in two kinds:
 *   9.1 tuning knobs: options that choose HOW the library computes, never
 *       WHAT it computes, tied to today's implementation (its convolution
 *       algorithms, its progress engines).  They change speed and memory
 *       only (results at most by float rounding); their defaults decide
 *       well, and their sets of values will change as kernels and engines
 *       do.  Knobs of the same kind that stay stable name concepts every
 *       data-parallel trainer has and the timing API reports:
 *       PCNN_OPT_THREADS, PCNN_OPT_BUCKET_BYTES, PCNN_OPT_OVERLAP.
 *   9.2-9.6 interfaces new in 0.2 whose names and contracts may still
 *       change: spatial and hybrid parallelism, the performance model, the
 *       automatic parallel strategy, encoder-decoder layers, HDF5
 *       datasets.  They join the stable sections once
 *       they have been used for a release.
 */
#if defined(PCNN_EXPERIMENTAL) && !defined(PCNN_H_EXPERIMENTAL)
#define PCNN_H_EXPERIMENTAL
/* BEGIN undefine the names defined without PCNN_EXPERIMENTAL (generated) */
#ifdef PCNN_H_HINTS
#undef pcnn_net_set_distribution
#undef pcnn_layer_set_distribution
#undef pcnn_layer_get_distribution
#undef pcnn_layer_local_box
#undef pcnn_net_group_info
#undef pcnn_net_train_step_local
#undef pcnn_net_predict_parallel
#undef pcnn_perfmodel_create
#undef pcnn_perfmodel_destroy
#undef pcnn_perfmodel_set_log_callback
#undef pcnn_perfmodel_calibrate_comm
#undef pcnn_perfmodel_calibrate_compute
#undef pcnn_perfmodel_calibrate_pace
#undef pcnn_perfmodel_fit_regressors
#undef pcnn_perfmodel_set_param
#undef pcnn_perfmodel_get_param
#undef pcnn_perfmodel_collective_time
#undef pcnn_perfmodel_predict
#undef pcnn_perfmodel_layer_time
#undef pcnn_perfmodel_validate
#undef pcnn_perfmodel_report
#undef pcnn_perfmodel_confidence
#undef pcnn_perfmodel_save
#undef pcnn_perfmodel_load
#undef pcnn_perfmodel_share
#undef pcnn_net_plan_distribution
#undef pcnn_net_plan_report
#undef pcnn_net_set_perfmodel
#undef pcnn_layer_get_exchange
#undef pcnn_sigmoid
#undef pcnn_tanh
#undef pcnn_upsample2d
#undef pcnn_upsample3d
#undef pcnn_conv_transpose2d
#undef pcnn_conv_transpose3d
#undef pcnn_concat
#undef pcnn_dataset_open_hdf5
#undef pcnn_dataset_set_transform
#undef pcnn_dataset_target_info
#undef pcnn_dataset_io_bytes
#undef pcnn_dataset_set_sharded
#undef pcnn_dataset_get_sharded
#undef pcnn_perfmodel
#undef pcnn_collective
#undef pcnn_perf_param
#undef pcnn_perf_flag
#undef pcnn_upsample_mode
#undef PCNN_DIM_N
#undef PCNN_DIM_D
#undef PCNN_DIM_H
#undef PCNN_DIM_W
#undef PCNN_COLL_SENDRECV
#undef PCNN_COLL_ALLREDUCE
#undef PCNN_COLL_ALLTOALL
#undef PCNN_COLL_ALLGATHER
#undef PCNN_PERF_ALPHA_S
#undef PCNN_PERF_BETA_S_PER_BYTE
#undef PCNN_PERF_GAMMA_S_PER_BYTE
#undef PCNN_PERF_LINK_GBITS
#undef PCNN_PERF_STRATEGY
#undef PCNN_PERF_ENGINE
#undef PCNN_PERF_NONBLOCKING_PROGRESS
#undef PCNN_PERF_COMPUTE_SOURCE
#undef PCNN_PERF_MEMORY_CONTENTION
#undef PCNN_PERF_RANK_PACE
#undef PCNN_PERF_FLAG_LINK_DEFAULTS
#undef PCNN_PERF_FLAG_LINK_FEW_POINTS
#undef PCNN_PERF_FLAG_LINK_SHORT_RANGE
#undef PCNN_PERF_FLAG_LINK_NOISY
#undef PCNN_PERF_FLAG_COMPUTE_NOISY
#undef PCNN_PERF_FLAG_COMPUTE_ESTIMATED
#undef PCNN_UPSAMPLE_NEAREST
#undef PCNN_UPSAMPLE_LINEAR
#undef PCNN_OPT_KEEP_IM2COL
#undef PCNN_OPT_ENGINE
#undef PCNN_OPT_ACTIVE_ENGINE
#undef PCNN_OPT_COMM_CORE
#undef PCNN_OPT_CONV_ALGORITHM
#undef PCNN_OPT_BN_SCOPE
#undef PCNN_OPT_HALO_OVERLAP
#undef PCNN_OPT_SPATIAL_FALLBACK
#undef PCNN_OPT_HALO_SCHEDULE
#undef PCNN_OPT_PLAN_MAX_SPATIAL
#undef PCNN_OPT_PLAN_SPATIAL_DIMS
#undef PCNN_OPT_PLAN_MIXED
#undef PCNN_OPT_MEMORY_LIMIT_MIB
#undef PCNN_EXCHANGE_AUTO
#undef PCNN_LOSS_BCE_WITH_LOGITS
#undef PCNN_HDF5_IMAGES
#undef PCNN_HDF5_VOLUMES
#undef PCNN_HDF5_CHANNELS_LAST
#undef PCNN_HDF5_FLOAT_TARGETS
#endif
/* END undefine */

#ifdef __cplusplus
extern "C" {
#endif

/* 9.1 Tuning knobs ------------------------------------------------------- */

/* Which GEMM runs is decided once per process, not per network: OpenBLAS,
 * unless the core it reports (openblas_get_corename) uses a narrower
 * vector ISA than the CPU offers -- OpenBLAS 0.3.21 runs its generic SSE3
 * kernel on CPUs it does not know -- in which case the library's own AVX2
 * GEMM computes every GEMM of the library.  The environment variable
 * PCNN_GEMM ("auto", the default; "openblas"; "own"), read on first use,
 * overrides the decision.  pcnn_net_summary names the GEMM and the
 * reason on its "gemm:" line; finalize warns through the log callback
 * when the own GEMM stands in or PCNN_GEMM holds another value.  Results
 * differ between the two in float rounding only. */

/* Network options (pcnn_option values, for pcnn_net_set_option and
 * pcnn_net_get_option). */

/* 1: keep each convolution's im2col matrix from forward to backward
 * (seed 001 section 3.1; faster, more memory); 0: recompute it.  Only
 * convolutions computed by im2col + GEMM have one.  Before finalize.
 * Default 1. */
#define PCNN_OPT_KEEP_IM2COL PCNN_OPT_EXPERIMENTAL_1

/* Progress engine, before finalize: 0 = automatic, 1 = the
 * communication thread (fails at finalize without MPI_THREAD_MULTIPLE),
 * 2 = non-blocking collectives driven from the calling thread between
 * layers.  Automatic takes the thread when MPI provides
 * MPI_THREAD_MULTIPLE and either the ranks of each node, each with its
 * compute threads plus the communication thread, fit on the cores this
 * process may use, or some ranks of the communicator are on other nodes
 * (data crosses a network only while a thread drives MPI); otherwise
 * non-blocking.  A thread without a core of its own (and not pinned with
 * PCNN_OPT_COMM_CORE) sleeps 250 us between two tests of a collective
 * instead of busy-polling, except while the calling thread waits for it.
 * All ranks agree on one engine.  Default 0. */
#define PCNN_OPT_ENGINE PCNN_OPT_EXPERIMENTAL_2

/* Read only: the engine in use after finalize (1 or 2; 0 on one rank). */
#define PCNN_OPT_ACTIVE_ENGINE PCNN_OPT_EXPERIMENTAL_3

/* Pin the communication thread to this core; -1 leaves it to the OS.
 * Before finalize.  Default -1. */
#define PCNN_OPT_COMM_CORE PCNN_OPT_EXPERIMENTAL_4

/* How convolutions compute.  Three algorithms: im2col + GEMM applies
 * to all; a direct convolution without im2col to convolutions with
 * kernel 3 or 5 on CPUs with AVX-512F (checked at run time; strided
 * ones take GEMMs for the input gradient); one GEMM per kernel tap,
 * over only the output pixels where the tap reads the input rather
 * than padding, to stride-1 convolutions.  0 (default): per
 * convolution the one expected to be fastest (taps on planes where
 * padding is a quarter or more of the work, such as 3x3 on 4x4 and
 * smaller, with 32 or more channels; direct on planes of about 8x8
 * and larger, and for strided ones with few input channels);
 * 1: im2col + GEMM everywhere; 2: direct wherever it applies; 3: taps
 * wherever it applies.  Elsewhere 2 and 3 fall back to im2col + GEMM.
 * Results differ between algorithms in float rounding only.  Before
 * finalize.
 *
 * Measured under 0: where those rules are unsure (another algorithm once
 * their thresholds move by about half their resolution either way) and a
 * 2D convolution's three passes on the local batch come to 150 MFLOP or
 * more, finalize times every algorithm that applies (one warm-up, then the
 * least of two forward + backward runs on the layer's own buffers, or the
 * warm-up alone where two would not fit; layers of the same shape share
 * one timing; about 500 ms per finalize: the first layer that would overrun
 * it, after one warm-up that shows it, and every layer after keep their
 * rules), sums each algorithm's time over the ranks, and
 * every rank takes the fastest (a tie keeps the rules' choice).  The ranks
 * therefore compute the same bits whatever their own timings;
 * pcnn_net_summary shows the means, e.g. "[taps 1.59 ms vs gemm 3.04,
 * direct 1.83 (measured)]".  The workspace is sized for every candidate,
 * a kept im2col matrix freed when GEMM loses.  Timings vary from run to
 * run, so two runs may choose differently and then agree to float rounding
 * only: for bitwise reproducibility across runs set an algorithm here, or
 * the environment variable PCNN_CONV_MEASURE=0 (the rules decide every
 * layer, nothing is timed).  Not yet measured: 3D convolutions and the
 * boxes of a spatial network (their rules decide). */
#define PCNN_OPT_CONV_ALGORITHM PCNN_OPT_EXPERIMENTAL_5

/* 9.2 Spatial and hybrid parallelism ------------------------------------- */

/*
 * Seeds 002 and 003; docs/spatial.md says what runs where.  The P ranks of
 * the communicator form a grid parts[4] = {P_N, P_D, P_H, P_W} (product P):
 * P_N sample groups, each splitting every sample of its share of the batch
 * into P_D x P_H x P_W boxes by the block rule (part g of X indices over G
 * parts holds floor(X/G) + (g < X mod G) of them, the lower parts first).
 * Ranks are numbered W fastest, then H, D, N, so a sample group is a block
 * of consecutive ranks.  Training equals one rank training on the whole
 * batch up to float summation order; distributions all {P, 1, 1, 1} (the
 * default) are data parallelism, bit for bit.  Under a split:
 * pcnn_net_compute_loss and pcnn_net_compute_gradients are collective
 * (every rank of a group passes the group's n samples; n = 0 on a group
 * left without samples, as long as some group has one); pcnn_net_predict
 * returns UNSUPPORTED (use pcnn_net_predict_parallel) and
 * pcnn_net_get_input_grad INVALID_STATE; a halo or shuffle that times out
 * or fails fails the network as a timed-out exchange does.
 */

/* Batch norm under a spatial distribution (pcnn_net_set_distribution):
 * 1 (the default) reduces each channel's statistics over the ranks that
 * share the samples (the spatial group), so a split layer normalises
 * exactly as one rank holding whole samples; 0 keeps each rank's
 * statistics of its own box.  A batch norm synchronised over the whole
 * communicator (PCNN_OPT_SYNC_BATCHNORM) reduces over every rank either
 * way.  No effect without a spatial split.  Before finalize. */
#define PCNN_OPT_BN_SCOPE PCNN_OPT_EXPERIMENTAL_9

/* Overlap of a spatially split convolution's or pool's halo exchange with
 * its computation (seed 002 section IV-A): 1 (the default) computes the
 * outputs whose windows read only this rank's block (and padding) while
 * the halos travel, and the bands along the block's borders after they
 * arrived; in backward the bands first, so that the halo's gradients
 * travel back while the interior computes.  0 exchanges first and computes
 * the whole box after.  The same values up to float summation order.
 * Under 1, a layer that stages its halo-extended input runs its first
 * five training steps both ways in turn and keeps the overlap only if
 * its steps were faster with it, summed over the ranks (all ranks take
 * the same choice; logged, and shown in pcnn_net_summary as "halo
 * overlap on|off (with vs without ms)"): where the halo is small against
 * the layer, cutting the box into interior and border costs more than
 * the exchange it hides.  Layers computed in place overlap without
 * trials.  No effect without a spatial split.  Before finalize. */
#define PCNN_OPT_HALO_OVERLAP PCNN_OPT_EXPERIMENTAL_7

/* A layer whose output is smaller than its parts along a split dimension
 * (deep layers of a spatially split network, seed 003 section 4.2): 0 (the
 * default) fails finalize with SHAPE naming it; 1 splits that dimension
 * over the largest divisor of its parts that fits, and hands the freed
 * factor to the samples: the group's samples are then shared among
 * sub-groups (shuffled there and back), so with one sample per group the
 * extra ranks idle for that layer and those after it.  Batch norms there
 * still reduce over the whole sample group (PCNN_OPT_BN_SCOPE).  Before
 * finalize. */
#define PCNN_OPT_SPATIAL_FALLBACK PCNN_OPT_EXPERIMENTAL_10

/* The halo messages of a layer split along several dimensions (seed 002
 * section V-A): 0 (the default) exchanges one dimension after the other
 * (D, then H over the D-extended box, then W), each with that dimension's
 * neighbours, so edges and corners arrive transitively: 4 messages per
 * rank in 2D, 6 in 3D; 1 sends every neighbour its part at once (8 in 2D,
 * 26 in 3D), one round instead of several.  The same values.  A layer
 * whose stride leaves points of a block unread by its owner but read by a
 * neighbour (strided windows on uneven splits) exchanges in one round under
 * either setting, as does a convolution run on its block in place (stride
 * 1, padding k/2, border bands a small share of the block: only its halo
 * is staged, where a relay would need the block too).  Before finalize. */
#define PCNN_OPT_HALO_SCHEDULE PCNN_OPT_EXPERIMENTAL_8

/* Index of a dimension in the parts[] arrays. */
enum { PCNN_DIM_N = 0, PCNN_DIM_D = 1, PCNN_DIM_H = 2, PCNN_DIM_W = 3 };

/* Distribute the network's input, and every layer that inherits it, over
 * the communicator as parts[0..3] (above).  Before finalize, after
 * pcnn_net_set_comm (a network without one accepts only {1, 1, 1, 1}).
 * Finalize fails with SHAPE naming the layer whose output is smaller than
 * its parts along a split dimension (a box would be empty), and with
 * UNSUPPORTED naming a split layer of a kind that cannot be split.
 * Errors: INVALID_ARGUMENT (net or parts NULL, a part < 1, product not the
 * communicator's size), INVALID_STATE (finalized). */
PCNN_API pcnn_status pcnn_net_set_distribution(pcnn_net *net, const int *parts);

/* Distribute this layer (and the layers that inherit from it) as parts[4];
 * parts[PCNN_DIM_N] must be a multiple of the network's (the groups of the
 * input are subdivided, never mixed).  Before finalize.  Errors as above,
 * and INVALID_ARGUMENT (layer NULL). */
PCNN_API pcnn_status pcnn_layer_set_distribution(pcnn_layer *layer, const int *parts);

/* The layer's distribution: after finalize the one it runs with, before
 * it the one set (or inherited so far: the network's for unset layers). */
PCNN_API pcnn_status pcnn_layer_get_distribution(const pcnn_layer *layer, int *parts);

/* This rank's box of one sample of the layer's output: start[0..2] and
 * count[0..2] over D, H, W.  After finalize.  Errors: INVALID_ARGUMENT (NULL),
 * INVALID_STATE (not finalized). */
PCNN_API pcnn_status pcnn_layer_local_box(const pcnn_layer *layer, int *start, int *count);

/* This rank's sample group (of the input's distribution): its index, the
 * number of groups, the rank within the group and the group's size.  Any
 * output may be NULL.  After pcnn_net_set_comm (1 group of 1 without). */
PCNN_API pcnn_status pcnn_net_group_info(const pcnn_net *net, int *group, int *groups,
                                         int *rank_in_group, int *group_size);

/* A training step where each rank passes only its box of its group's n
 * samples: x_local is n x C x count[0] x count[1] x count[2] of the input
 * layer (pcnn_layer_local_box), NCDHW; labels or targets are those of the
 * group's n samples, equal on every rank of the group.  Otherwise as
 * pcnn_net_train_step, which under a spatial distribution takes the
 * group's n whole samples on every rank of the group and slices them.
 * Ranks of one group must pass the same n.  Collective.  Errors as
 * pcnn_net_train_step; INVALID_ARGUMENT when ranks of a group disagree on
 * n. */
PCNN_API pcnn_status pcnn_net_train_step_local(pcnn_net *net, int n, const float *x_local,
                                               const int32_t *labels, const float *targets,
                                               float *loss);

/* Inference under the distribution: every rank of a sample group passes
 * the group's n whole samples (as pcnn_net_train_step) and receives their
 * n outputs (NCHW) in out, batch norms using their running statistics and
 * dropout off.  n may exceed max_batch (run in chunks of it, each
 * collective) and may be 0 on the ranks of a group with nothing to predict
 * (x and out may then be NULL).  Collective.  On a network without a
 * spatial distribution it is pcnn_net_predict (local, each rank its own
 * samples, n >= 1).  Errors as pcnn_net_predict; INVALID_ARGUMENT when
 * ranks of a group disagree on n, or no rank passed any sample. */
PCNN_API pcnn_status pcnn_net_predict_parallel(pcnn_net *net, int n, const float *x, float *out,
                                               size_t out_count);

/* 9.3 Performance model -------------------------------------------------- */

/*
 * Seeds 002 section V and 004; docs/perfmodel.md says how collectives and
 * steps are modelled.  Calibrate the links and the layers' computation of
 * this machine, predict one training step layer by layer for any number of
 * ranks, global batch, exchange strategy and link bandwidth (what-if), and
 * compare a prediction with the network's measured breakdown
 * (pcnn_net_time).  A model is local to the process and not thread-safe.
 */
typedef struct pcnn_perfmodel pcnn_perfmodel;

typedef enum pcnn_collective {
    PCNN_COLL_SENDRECV = 0,  /* one message between two ranks (a halo) */
    PCNN_COLL_ALLREDUCE = 1, /* bytes: the vector reduced */
    PCNN_COLL_ALLTOALL = 2,  /* bytes: everything one rank sends, its own block included */
    PCNN_COLL_ALLGATHER = 3  /* bytes: the gathered total */
} pcnn_collective;

/* Knobs of the model (doubles; pcnn_perfmodel_set_param / get_param). */
typedef enum pcnn_perf_param {
    PCNN_PERF_ALPHA_S = 0,            /* latency of every collective's message, s, at
                                         most 10; -1: the calibrated ones (default);
                                         reads the send-receive latency */
    PCNN_PERF_BETA_S_PER_BYTE = 1,    /* inverse link bandwidth, s/byte, at most 1e-3;
                                         0: calibrated (default); reads the send-
                                         receive one */
    PCNN_PERF_GAMMA_S_PER_BYTE = 2,   /* local summation, s/byte, in (0, 1e-3] */
    PCNN_PERF_LINK_GBITS = 3,         /* link bandwidth in Gbit/s, in [1e-6, 1e6];
                                         sets beta = 8e-9 / v; 0: calibrated.  Values
                                         outside these ranges: INVALID_ARGUMENT, and a
                                         model file holding one: CORRUPT */
    PCNN_PERF_STRATEGY = 4,           /* -1: each layer's exchange as the network decides
                                         (default); a pcnn_exchange value: every layer's
                                         (PCNN_EXCHANGE_FC_GRADIENT: dense layers, the
                                         others all-to-all + all-gather) */
    PCNN_PERF_ENGINE = 5,             /* 0: the network's engine (the thread for
                                         what-if ranks); 1 thread; 2 nonblocking */
    PCNN_PERF_NONBLOCKING_PROGRESS = 6, /* [0, 1]: share of its speed a nonblocking
                                         collective makes while the caller computes,
                                         besides the work calibrated per poll between
                                         layers (MPI progresses inside MPI calls);
                                         default 0 */
    PCNN_PERF_COMPUTE_SOURCE = 7,     /* 0 (default): the more accurate source per layer:
                                         its own timings (exact shapes and algorithms)
                                         between the two timed local batches; outside
                                         them the timing at the nearest timed batch
                                         scaled by the regressors' ratio (the line where
                                         no regressor knows the kind); the regressors
                                         for a network not calibrated; 1: timings only
                                         (their line); 2: regressors only */
    PCNN_PERF_MEMORY_CONTENTION = 8,  /* >= 1: how many times as long the optimizer's
                                         update (and the all-to-all's summation) takes
                                         when every rank runs its own at once, as ranks
                                         of one step do, as on one rank alone (ranks on a
                                         node share its memory bandwidth); calibrated by
                                         pcnn_perfmodel_calibrate_comm, 1 before it and
                                         on one rank; applies to predictions of more
                                         than one rank (as many per node as calibrated) */
    PCNN_PERF_RANK_PACE = 9           /* >= 1: how many times as long the slowest rank
                                         computes a step as this model's compute table
                                         says (a synchronous step waits for it at every
                                         collective; a shared machine's cores differ);
                                         measured by pcnn_perfmodel_calibrate_pace, 1
                                         before it and after each compute calibration;
                                         predictions of more than one rank run the step
                                         at that pace, this rank's layers keep their own
                                         times and wait the difference as exposed
                                         communication */
} pcnn_perf_param;


/* A model with default link parameters (5 us, 10 Gbit/s) and no compute
 * calibration.  Errors: INVALID_ARGUMENT (out NULL), OUT_OF_MEMORY. */
PCNN_API pcnn_status pcnn_perfmodel_create(pcnn_perfmodel **out);

/* Free the model and set *model to NULL.  NULL or *model NULL: no-op. */
PCNN_API pcnn_status pcnn_perfmodel_destroy(pcnn_perfmodel **model);

/* Install (or, with callback NULL, remove) the model's log callback
 * (pcnn_log_callback, section 6); `user` is passed back to it.  The
 * calibrations, which take seconds to minutes, report their progress
 * through it: one PCNN_LOG_INFO line per phase (pcnn_perfmodel_calibrate_comm:
 * its start, the summation, the memory contention and what is left of the
 * budget, each collective's sweep with its sizes, the nonblocking
 * progress, the end; pcnn_perfmodel_calibrate_compute: its start, the
 * warm-up pass and the repetitions it sets, each batch timed with the
 * spread of its repetitions, the end; pcnn_perfmodel_calibrate_pace: the
 * pace found).  Each rank's model calls its own callback (a host prints
 * rank 0's); the library prints nothing.  Not saved in a model file, and
 * kept by pcnn_perfmodel_share.  Local, any time.  Errors:
 * INVALID_ARGUMENT (model NULL). */
PCNN_API pcnn_status pcnn_perfmodel_set_log_callback(pcnn_perfmodel *model,
                                                     pcnn_log_callback callback, void *user);

/* Calibrate the links of comm within about budget_seconds (> 0): a
 * ping-pong between ranks 0 and 1 and sweeps of all-reduce, all-to-all and
 * all-gather from 8 B up by factors of 4 to 64 MiB (on a slow link the
 * budget ends a sweep earlier; larger messages then follow the last
 * measured bandwidth), each the median of repetitions after a warm-up (the
 * largest over ranks); gamma from timing the local
 * summation; alpha and beta fitted per collective, the curves kept; how
 * much a nonblocking all-reduce advances per MPI_Test between layers; and
 * how much longer the optimizer's update takes with every rank running its
 * own at once (PCNN_PERF_MEMORY_CONTENTION, by size; 48 MiB of scratch
 * per rank).  That measurement and the buffers' setup come first and cost
 * about 0.3 s however small the budget; the sweeps share what is left.
 * Rank 0's result is broadcast: every rank holds the same model.
 * Collective over comm, every rank with the same budget; on one rank only
 * gamma is measured.  A bad argument on any rank fails the call on every
 * rank (REMOTE on the others) before anything is measured.  Errors:
 * INVALID_ARGUMENT, MISMATCH (budgets differ), REMOTE, OUT_OF_MEMORY, MPI,
 * TIMEOUT. */
PCNN_API pcnn_status pcnn_perfmodel_calibrate_comm(pcnn_perfmodel *model, pcnn_comm *comm,
                                                   double budget_seconds);

/* Time each layer of the finalized net at its local shapes (this rank's
 * largest batch and half of it; the convolution algorithms chosen at
 * finalize): forward, backward with and without the input gradient, and
 * the optimizer's calls as a step makes them (per bucket, right after the
 * backward), with the cost of a call apart, repeated within about
 * budget_seconds (> 0), mean of the repetitions (a step's measured
 * timing is a mean over steps too).  The layers run on the batch the
 * network last trained on (some kernels' speed depends on the values), so
 * calibrating after a few training steps matches training best.  Replaces
 * the model's compute table (and resets PCNN_PERF_RANK_PACE to 1).  Local:
 * makes no collective call; the parameters and optimizer state are not
 * changed (the gradients are).  A network with a spatial distribution
 * runs its layers on boxes, not whole samples: calibrate a twin of it
 * (the same layers without a distribution, e.g. on one rank), then
 * predict the spatial network with that model.  Errors: INVALID_ARGUMENT,
 * INVALID_STATE (not finalized, or spatially distributed), OUT_OF_MEMORY. */
PCNN_API pcnn_status pcnn_perfmodel_calibrate_compute(pcnn_perfmodel *model, pcnn_net *net,
                                                      double budget_seconds);

/* Compare every rank's compute calibration (pcnn_perfmodel_calibrate_compute
 * of the same network on each rank, at once, as pcnn_net's steps run): sets
 * PCNN_PERF_RANK_PACE to the slowest rank's whole step of computation over
 * this rank's, so that a prediction of this rank's step includes waiting
 * for the slowest (shared machines: one core 10-30 % slower than another
 * for minutes at a time).  Call it before pcnn_perfmodel_share to give
 * every rank the root's table with the pace relative to it.  Collective
 * over comm.  Errors: INVALID_ARGUMENT (NULL), INVALID_STATE (a rank
 * without a compute calibration; REMOTE on the others), MISMATCH (ranks
 * calibrated different networks), MPI, TIMEOUT. */
PCNN_API pcnn_status pcnn_perfmodel_calibrate_pace(pcnn_perfmodel *model, pcnn_comm *comm);

/* Fit seed 004's per-kernel regressors (small MLPs on log-normalised
 * shapes, trained with this library's own dense layers and Adam; every
 * layer kind: convolutions 2D and 3D, dense, pooling, element-wise) for
 * `threads` compute threads within about budget_seconds: estimates for
 * shapes never timed, reported beside the timings.  A kind left with too
 * few timed shapes when the budget runs out gets no regressor (the report
 * lists those fitted).  Local.  Errors: INVALID_ARGUMENT, TIMEOUT (a budget
 * too small to fit any kind; the model keeps what it had), UNSUPPORTED (a
 * build without them), OUT_OF_MEMORY. */
PCNN_API pcnn_status pcnn_perfmodel_fit_regressors(pcnn_perfmodel *model, int threads,
                                                   double budget_seconds, uint64_t seed);

/* Set or read a knob.  Errors: INVALID_ARGUMENT (unknown knob, NaN or a
 * value out of its range, NULL). */
PCNN_API pcnn_status pcnn_perfmodel_set_param(pcnn_perfmodel *model, pcnn_perf_param param,
                                              double value);
PCNN_API pcnn_status pcnn_perfmodel_get_param(const pcnn_perfmodel *model,
                                              pcnn_perf_param param, double *value);

/* Modelled seconds of one collective of `bytes` on `ranks` ranks (0 on one
 * rank or for 0 bytes).  Errors: INVALID_ARGUMENT (unknown collective,
 * ranks < 1, bytes negative or NaN, NULL). */
PCNN_API pcnn_status pcnn_perfmodel_collective_time(const pcnn_perfmodel *model,
                                                    pcnn_collective collective, int ranks,
                                                    double bytes, double *seconds);

/* Predict one steady training step of the finalized net for global_batch
 * samples split over `ranks` ranks (any number: no communicator is
 * needed), with overlap 1 or without 0 (PCNN_OPT_OVERLAP); the bucket size
 * and optimizer are the network's.  Layers are costed at the local batch
 * ceil(global_batch / ranks) from the compute table (which must come from
 * this network: same layers and shapes) or the regressors.  The prediction
 * is kept for pcnn_perfmodel_layer_time and pcnn_perfmodel_validate.
 *
 * A network finalized with a spatial distribution (seeds 002, 003) is
 * predicted as it runs: each layer's computation at its box (the table's
 * whole-sample timings scaled to the box), its halo exchanges (both faces
 * of each split dimension, forward and backward), hidden behind the
 * interior (or the whole block in place) and the weight gradient where the
 * layer overlaps them, the staging copies (and, where a layer does not
 * keep its staged input, the copy and halo again before backward), batch
 * norm's reductions over the group, the shuffles between distributions
 * and a box dense head (the whole batch on 1/P of its columns, its two
 * sums, its columns exchange).  On another number of ranks (what-if) its
 * spatial groups stay and its sample groups scale: `ranks` must be a
 * multiple of the network's spatial group size, and global_batch at least
 * the number of sample groups.  The halo, exposed halo and shuffle times
 * are PCNN_TIME_HALO, PCNN_TIME_HALO_EXPOSED and PCNN_TIME_SHUFFLE of
 * pcnn_perfmodel_layer_time (forward and backward exclude them, as
 * pcnn_net_time does).
 *
 * Errors: INVALID_ARGUMENT (NULL, global_batch < 1, ranks < 1, overlap not
 * 0 or 1, a spatial network's groups that do not divide ranks or outnumber
 * the samples), INVALID_STATE (net not finalized, or no compute calibration
 * for its layers), MISMATCH (the compute table is of another network),
 * SHAPE (a layer too small for its box on that many ranks), NUMERIC (the
 * prediction overflows: a parameter beyond any machine's range). */
PCNN_API pcnn_status pcnn_perfmodel_predict(pcnn_perfmodel *model, const pcnn_net *net,
                                            int global_batch, int ranks, int overlap,
                                            double *step_seconds);

/* Seconds of `what` (PCNN_TIME_FORWARD .. PCNN_TIME_SHUFFLE, as
 * pcnn_net_time; the halo and shuffle categories 0 without a spatial
 * distribution) in the last prediction, for one layer or all (-1).  Errors:
 * INVALID_ARGUMENT, INVALID_STATE (no prediction yet). */
PCNN_API pcnn_status pcnn_perfmodel_layer_time(const pcnn_perfmodel *model, int layer,
                                               pcnn_time what, double *seconds);

/* Compare the last prediction with net's measured timings (pcnn_net_time,
 * per step since the last reset): *step_re = (predicted - measured) /
 * measured step time, wre[0..2] (3 doubles) = seed 004's WRE^T of forward, backward and
 * update over the layers (eq. 3: mean |predicted - measured| / mean
 * measured).  buf (size bytes, snprintf-style; may be NULL with size 0)
 * receives the table, per layer predicted and measured side by side (on a
 * spatial network with its halo, exposed halo and shuffle columns);
 * *needed its full length.  Any output may be NULL.  Errors:
 * INVALID_ARGUMENT, INVALID_STATE (no prediction, no step measured),
 * MISMATCH (the prediction was for another network, or for another number
 * of ranks than the network's communicator has). */
PCNN_API pcnn_status pcnn_perfmodel_validate(const pcnn_perfmodel *model, const pcnn_net *net,
                                             double *step_re, double *wre, char *buf,
                                             size_t size, size_t *needed);

/* A readable summary (snprintf-style, buf may be NULL with size 0): the
 * link fits and curves, the compute table per layer with the regressors'
 * estimates beside it, the knobs.  Errors: INVALID_ARGUMENT. */
PCNN_API pcnn_status pcnn_perfmodel_report(const pcnn_perfmodel *model, char *buf, size_t size,
                                           size_t *needed);

/* What a model's figures rest on, as flags (OR-ed): */
typedef enum pcnn_perf_flag {
    PCNN_PERF_FLAG_LINK_DEFAULTS = 1,     /* links never calibrated nor set: 5 us, 10 Gbit/s */
    PCNN_PERF_FLAG_LINK_FEW_POINTS = 2,   /* a collective fitted from fewer than 3 sizes */
    PCNN_PERF_FLAG_LINK_SHORT_RANGE = 4,  /* a collective measured only below 1 MiB: the
                                             gradients' sizes are extrapolated */
    PCNN_PERF_FLAG_LINK_NOISY = 8,        /* a collective's repetitions of one size
                                             disagreed (interquartile range over median
                                             above 50 %): calibrated on a loaded machine */
    PCNN_PERF_FLAG_COMPUTE_NOISY = 16,    /* the layers' timed repetitions disagreed (max -
                                             min over median above 50 %) */
    PCNN_PERF_FLAG_COMPUTE_ESTIMATED = 32 /* no compute calibration: the regressors'
                                             estimates, if any, cost the layers */
} pcnn_perf_flag;

/* The flags that apply to a prediction on `ranks` ranks (1: the link
 * flags do not apply; 0: every flag, as pcnn_perfmodel_report lists them)
 * into *flags (0: nothing to warn of), and one line per flag saying what
 * it rests on and what to do into buf (snprintf-style; may be NULL with
 * size 0), *needed its full length.  Any output may be NULL.  The flags
 * are saved and loaded with the model.  Local.  Errors: INVALID_ARGUMENT
 * (NULL model, ranks < 0, buf NULL with size > 0). */
PCNN_API pcnn_status pcnn_perfmodel_confidence(const pcnn_perfmodel *model, int ranks,
                                               int *flags, char *buf, size_t size,
                                               size_t *needed);

/* Save atomically (as checkpoints) in a versioned little-endian format
 * with a checksum; load creates a new model from a regular file (a FIFO,
 * device or directory is refused at once), every value held to the range
 * pcnn_perfmodel_set_param and the calibrations produce.  Errors:
 * INVALID_ARGUMENT, IO, OUT_OF_MEMORY, CORRUPT (not a model file,
 * truncated, checksum, a value out of range), UNSUPPORTED (a format
 * version this library does not read). */
PCNN_API pcnn_status pcnn_perfmodel_save(const pcnn_perfmodel *model, const char *path);
PCNN_API pcnn_status pcnn_perfmodel_load(const char *path, pcnn_perfmodel **out);

/* Make every rank's model root's: root's contents (links, knobs, compute
 * table, regressors) replace the others', sent in the file format and
 * checked on arrival, so that the collective users of a model (planning,
 * PCNN_EXCHANGE_AUTO, the scheduler's re-plan) see the same model
 * everywhere — calibrate compute on one rank, then share, without a file
 * system every rank sees.  Collective over comm, every rank with the same
 * root (MISMATCH otherwise); a failure on any rank (OUT_OF_MEMORY, CORRUPT)
 * leaves every model as it was; a NULL model on any rank fails the call
 * on every rank (REMOTE on the others).  Errors: INVALID_ARGUMENT (NULL,
 * root outside the communicator), MISMATCH, REMOTE, OUT_OF_MEMORY,
 * CORRUPT, MPI, TIMEOUT. */
PCNN_API pcnn_status pcnn_perfmodel_share(pcnn_perfmodel *model, pcnn_comm *comm, int root);

/* 9.4 Automatic parallel strategy ---------------------------------------- */

/*
 * Seed 002 section V-C; docs/perfmodel.md says what a candidate costs.
 * Each layer gets a distribution (9.2) chosen by the cheapest path through
 * the layers' candidates, exactly (branches included), within the options
 * below; the predicted step ranks plans, pcnn_perfmodel_predict times the
 * finalized network.
 */

/* The automatic parallel strategy (pcnn_net_plan_distribution) considers
 * spatial groups of at most this many ranks (P_D x P_H x P_W).  0 (the
 * default): up to the communicator's size.  Before finalize. */
#define PCNN_OPT_PLAN_MAX_SPATIAL PCNN_OPT_EXPERIMENTAL_11

/* The dimensions the planner may split, a bit mask: 1 depth, 2 height,
 * 4 width.  0: none (sample parallelism only).  Default 7. */
#define PCNN_OPT_PLAN_SPATIAL_DIMS PCNN_OPT_EXPERIMENTAL_12

/* 1 (the default): the planner picks each layer's distribution, with
 * shuffles between layers that differ; 0: one distribution for every
 * layer that can be split (seed 002's own runs), the layers that cannot
 * (dense, flatten, global pooling) sample-parallel after it. */
#define PCNN_OPT_PLAN_MIXED PCNN_OPT_EXPERIMENTAL_13

/* Per-rank memory cap of the planner, MiB: a layer's candidate whose
 * activations, their gradients (halo included) and parameter state on one
 * rank exceed it is not considered.  0 (the default): no cap. */
#define PCNN_OPT_MEMORY_LIMIT_MIB PCNN_OPT_EXPERIMENTAL_14

/* Plan and apply the distribution of every layer of net for global_batch
 * samples per step, with the model (whose compute calibration must be of
 * this network's layers: calibrate a finalized twin, or fit regressors).
 * Every rank must hold the same model: compute calibrations are local and
 * differ between ranks, so calibrate on one rank and share the model with
 * pcnn_perfmodel_save and pcnn_perfmodel_load.  Before finalize, after
 * pcnn_net_set_loss.  Collective over the
 * network's communicator: every rank computes the plan, rank 0's is
 * broadcast and applied with pcnn_net_set_distribution and
 * pcnn_layer_set_distribution on every layer.  *predicted (may be NULL)
 * receives the plan's modelled step seconds.  Errors: INVALID_ARGUMENT,
 * INVALID_STATE (finalized, no loss, a model without compute estimates
 * for this network), MISMATCH on every rank when the model (its contents),
 * the layers, the batch or the planning options differ from rank 0's
 * (the message names which and the rank), SHAPE (no distribution fits
 * every layer: memory cap, mask), OUT_OF_MEMORY, MPI, TIMEOUT, REMOTE
 * (a bad argument on another rank: every rank fails, none waits). */
PCNN_API pcnn_status pcnn_net_plan_distribution(pcnn_net *net, pcnn_perfmodel *model,
                                                int global_batch, double *predicted);

/* The last plan as text: per layer its candidates with their modelled
 * costs (compute, exposed halo, gradient exchange), the chosen one marked
 * '*', the shuffles into it, the predicted step and pure sample
 * parallelism's.  snprintf-style: writes at most size bytes (NUL
 * included), the full length (without NUL) into *needed (may be NULL).
 * Local.  Errors: INVALID_ARGUMENT, INVALID_STATE (no plan). */
PCNN_API pcnn_status pcnn_net_plan_report(const pcnn_net *net, char *buf, size_t size,
                                          size_t *needed);

/* The automatic gradient exchange.  pcnn_net_set_exchange(net,
 * PCNN_EXCHANGE_AUTO): at pcnn_net_finalize on more than one rank, when a
 * performance model is attached to the network (pcnn_net_set_perfmodel),
 * every parameterised layer whose exchange the user did not set takes the
 * exchange the model prices cheapest for the finalize's global batch:
 * allreduce, all-to-all + all-gather, or (dense layers of a network
 * without spatial distributions) the FC gradient, each costed as its
 * collectives plus the optimizer update it implies (the heuristic's choice
 * wins ties); a dense layer on each rank's box of a split input (9.2)
 * keeps all-to-all + all-gather, which for it is one all-gather of each
 * rank's columns, less than either.  Every rank must attach the same
 * model (its contents are compared; one rank without a model, or with
 * another, is a MISMATCH on every rank); rank 0's choice is broadcast.
 * Without a model: the heuristics of PCNN_EXCHANGE_ALLTOALL_ALLGATHER
 * (eq. 4.8 for dense layers).  The choices and their costs:
 * pcnn_net_plan_report, each layer's line of pcnn_net_summary, the log
 * callback (PCNN_LOG_INFO), and pcnn_layer_get_exchange.  Under
 * pcnn_net_plan_distribution the gradient term of a candidate is then the
 * cheaper of allreduce and all-to-all + all-gather. */
#define PCNN_EXCHANGE_AUTO ((pcnn_exchange)3)

/* Attach a performance model to the network (NULL detaches it), used by
 * PCNN_EXCHANGE_AUTO at finalize and by the adaptive batch scheduler:
 * when the scheduler changes the batch (pcnn_scheduler_begin_epoch and
 * pcnn_scheduler_train_epoch, at the first epoch and whenever the batch
 * grows), the distribution (as pcnn_net_plan_distribution, same options)
 * and the automatic exchanges are re-planned for the new global batch:
 * rank 0 decides, every rank checks it planned with the same model,
 * layers, batch and options (MISMATCH otherwise, from the scheduler's
 * call, on every rank).  The re-plan is kept as the network's plan
 * (pcnn_net_plan_report, with the modelled step of today's rule: sample
 * parallelism on min(P, batch) ranks, the others idle) and told to the
 * log callback.  Under PCNN_EXCHANGE_AUTO the re-planned gradient
 * exchanges are applied at once (pcnn_layer_get_exchange, the summary's
 * "re-planned for batch N"): the optimizer state moves to the ranks that
 * own it under the new exchange, bit for bit, so training goes on exactly
 * as if the network had been finalized with them.  The distribution is
 * not applied: the network keeps the one it was finalized with (changing
 * it needs a new network: save a checkpoint and load it into a network
 * planned for the batch).
 * The network keeps the pointer, not a copy: the model must outlive it or
 * be detached, and must not change between the ranks' collective calls.
 * Local; before or after finalize.  Errors: INVALID_ARGUMENT (net NULL). */
PCNN_API pcnn_status pcnn_net_set_perfmodel(pcnn_net *net, pcnn_perfmodel *model);

/* The gradient exchange a parameterised layer takes, as decided at
 * finalize (the user's, the heuristics', or PCNN_EXCHANGE_AUTO's).  Local.
 * Errors: INVALID_ARGUMENT (NULL, a layer without parameters),
 * INVALID_STATE (not finalized). */
PCNN_API pcnn_status pcnn_layer_get_exchange(const pcnn_layer *layer, pcnn_exchange *exchange);

/* 9.5 Encoder-decoder layers --------------------------------------------- */

/*
 * What U-Nets and other field-to-field networks need (surrogates of
 * simulations, segmentation of volumes, super-resolution): bounded
 * outputs and a loss on logits, upsampling, transposed convolutions and
 * concatenation by channels.  Each takes images or volumes where it says
 * so; shapes are checked at once (SHAPE, INVALID_ARGUMENT, as section 3's
 * layers), and every call fails with INVALID_STATE once the network is
 * finalized.  Data parallelism runs them unchanged.  A spatial
 * distribution (9.2) that splits one of them, or feeds one from a split
 * layer, is refused at pcnn_net_finalize with UNSUPPORTED naming the
 * layer (put it after a layer of distribution {P, 1, 1, 1}).
 */

/* The logistic sigmoid y = 1 / (1 + exp(-x)) and the hyperbolic tangent
 * y = tanh(x), element-wise, as torch.sigmoid and torch.tanh, on images
 * and volumes.  For a segmentation, train on the logits with
 * PCNN_LOSS_BCE_WITH_LOGITS rather than a sigmoid and MSE. */
PCNN_API pcnn_status pcnn_sigmoid(pcnn_net *net, pcnn_layer *in, pcnn_layer **out);
PCNN_API pcnn_status pcnn_tanh(pcnn_net *net, pcnn_layer *in, pcnn_layer **out);

/* Binary cross entropy on logits (pcnn_net_set_loss), as PyTorch's
 * binary_cross_entropy_with_logits with reduction='mean': targets are
 * floats of the output's shape, probabilities in [0, 1] (other values are
 * not refused: the formula max(x, 0) - x t + log(1 + exp(-|x|)) is
 * computed as it stands); the mean is over the samples of the (global)
 * batch and the elements of each sample.  Stable for any logit. */
#define PCNN_LOSS_BCE_WITH_LOGITS PCNN_LOSS_EXPERIMENTAL_1

/* How pcnn_upsample2d and pcnn_upsample3d fill the new points. */
typedef enum pcnn_upsample_mode {
    PCNN_UPSAMPLE_NEAREST = 0, /* each value repeated factor times per axis */
    PCNN_UPSAMPLE_LINEAR = 1   /* bilinear (2D) or trilinear (3D) */
} pcnn_upsample_mode;

/* Upsampling by an integer factor >= 1 along H and W (pcnn_upsample2d, 2D
 * inputs only: SHAPE for a volume) or along D, H and W (pcnn_upsample3d),
 * as torch.nn.Upsample(scale_factor=factor, mode='nearest' | 'bilinear' |
 * 'trilinear') with align_corners=False: output index o along an axis
 * reads the input at (o + 0.5) / factor - 0.5 (clamped at 0), between its
 * two neighbours, the last one repeated at the far edge.  Output (C,
 * H*factor, W*factor), or (C, D*factor, H*factor, W*factor).  No
 * parameters.  Errors: INVALID_ARGUMENT (factor < 1, unknown mode), SHAPE
 * (a volume for the 2D call, sizes beyond int). */
PCNN_API pcnn_status pcnn_upsample2d(pcnn_net *net, pcnn_layer *in, int factor,
                                     pcnn_upsample_mode mode, pcnn_layer **out);
PCNN_API pcnn_status pcnn_upsample3d(pcnn_net *net, pcnn_layer *in, int factor,
                                     pcnn_upsample_mode mode, pcnn_layer **out);

/* Transposed convolution as torch.nn.ConvTranspose2d (pcnn_conv_transpose2d,
 * 2D inputs only) and ConvTranspose3d (pcnn_conv_transpose3d, on volumes):
 * the adjoint of a convolution of the same kernel (square or cubic),
 * stride and padding, which maps (Cin, H, W) to (out_channels, Ho, Wo)
 * with Ho = (H-1)*stride - 2*padding + kernel + output_padding (the same
 * along W, and D for volumes).  output_padding (0 <= output_padding <
 * stride) adds rows at the far edge only, to reach the size a strided
 * convolution came from; bias != 0 adds a per-channel bias.  Weights
 * [Cin][out_channels][k][k]([k]) then the bias, as PyTorch; initialised
 * like a convolution's with PyTorch's fans (fan in out_channels * k^2 or
 * k^3).  Computed as one GEMM and col2im (col2vol) forward, im2col
 * (vol2col) and two GEMMs backward, over the whole local batch, in the
 * shared workspace.  Errors: INVALID_ARGUMENT (out_channels, kernel,
 * stride < 1, padding < 0, output_padding outside [0, stride)), SHAPE (no
 * output, a volume for the 2D call, sizes beyond int). */
PCNN_API pcnn_status pcnn_conv_transpose2d(pcnn_net *net, pcnn_layer *in, int out_channels,
                                           int kernel, int stride, int padding,
                                           int output_padding, int bias, pcnn_layer **out);
PCNN_API pcnn_status pcnn_conv_transpose3d(pcnn_net *net, pcnn_layer *in, int out_channels,
                                           int kernel, int stride, int padding,
                                           int output_padding, int bias, pcnn_layer **out);

/* Concatenation by channels, as torch.cat(dim=1): count layers (1 to 64,
 * any may repeat) whose outputs agree in depth, height and width give
 * (C_0 + C_1 + ..., D, H, W), input 0's channels first.  inputs is an
 * array of count handles, read during the call only.  This makes the
 * graph a DAG, as pcnn_add does (U-Net's skip connections).  Errors:
 * INVALID_ARGUMENT (inputs NULL, count outside [1, 64], a NULL input or
 * one of another network), SHAPE (the spatial extents differ: the message
 * names the input). */
PCNN_API pcnn_status pcnn_concat(pcnn_net *net, pcnn_layer *const *inputs, int count,
                                 pcnn_layer **out);

/* 9.6 HDF5 datasets ------------------------------------------------------ */

/*
 * Scientific fields kept in HDF5 (the CosmoFlow universes as published),
 * read batch by batch as the file-backed volumes of section 4
 * (pcnn_dataset_open_volumes): shuffle, batch, batch_box, set_prefetch,
 * train_epoch, evaluate, fit and the scheduler take them as any dataset,
 * and a spatial network's ranks (9.2) each read only their box of every
 * sample: an HDF5 hyperslab, so the bytes read per rank follow the box
 * (pcnn_dataset_io_bytes counts them).  Needs a libpcnn built with
 * HDF5 (-Dhdf5, Debian's libhdf5-mpich-dev, or libhdf5-openmpi-dev for
 * the Open MPI build); otherwise every call below that opens a file
 * returns PCNN_ERR_UNSUPPORTED saying so.  Reads are independent POSIX
 * reads of each rank (no MPI-IO): no MPI call happens off the caller's
 * thread.  HDF5 itself is called under one lock of the library, the
 * prefetch thread's reads included, and with HDF5's error printing
 * turned off for the duration of each call (restored after): a host
 * that calls HDF5 itself from another thread while a dataset reads needs
 * a thread-safe HDF5 (Debian's parallel builds are not).
 */

/* Flags of pcnn_dataset_open_hdf5 (bitwise or). */
#define PCNN_HDF5_IMAGES 0          /* samples are 2D: (C, H, W) */
#define PCNN_HDF5_VOLUMES 1         /* samples are 3D: (C, D, H, W) */
#define PCNN_HDF5_CHANNELS_LAST 2   /* on disk (.., H, W, C) / (.., D, H, W, C) */
#define PCNN_HDF5_FLOAT_TARGETS 4   /* integer targets read as float targets, not labels */

/* Open a dataset of HDF5 files.  `paths` is one file, a list of files
 * separated by newlines, or a glob(3) pattern (contains '*', '?' or '['),
 * expanded in sorted order; files are taken in that order.  In each file
 * the dataset named `inputs` (NULL: "full", as LBANN's CosmoFlow reader)
 * holds the samples: (N, C, H, W) or, with PCNN_HDF5_VOLUMES,
 * (N, C, D, H, W), channels first, or with PCNN_HDF5_CHANNELS_LAST
 * (N, H, W, C) / (N, D, H, W, C); without the leading N the file holds
 * one sample.  The dataset named `targets` (NULL: "unitPar") holds one
 * value or a vector per sample: (N) or (N, K), without N for one sample
 * per file.  Integer targets are class labels (>= 0) unless
 * PCNN_HDF5_FLOAT_TARGETS; float targets are K regression targets.
 * Element types: int8, int16, int32, uint8, uint16, float16, float32 and
 * float64 of either byte order, converted to float32 on reading (exactly
 * as a C cast / numpy's astype(float32)).  Every file must have the same
 * sample shape and element types.  Chunked (compressed with the filters
 * the HDF5 library has) and contiguous layouts both work; contiguous
 * reads fastest (a box reads exactly its bytes; a chunked read reads
 * every chunk the box touches).  Here only the headers and the targets
 * are read; the samples are read by each batch.  Local (each rank opens
 * for itself; the collective calls agree later that all ranks opened the
 * same).  Free with pcnn_dataset_destroy.  Errors: UNSUPPORTED (built
 * without HDF5), INVALID_ARGUMENT (NULL, unknown flags, an empty list, a
 * pattern matching nothing), IO (cannot open, not a regular file: FIFOs,
 * directories and devices are refused without waiting),
 * CORRUPT (not an HDF5 file, a dataset missing, of the wrong rank or
 * element type, truncated data, files that disagree, a negative label, a
 * non-finite target), SHAPE
 * (a sample larger than INT_MAX floats), OUT_OF_MEMORY.  Messages name the
 * file, the dataset and what differs, with HDF5's own error folded in. */
PCNN_API pcnn_status pcnn_dataset_open_hdf5(const char *paths, const char *inputs,
                                            const char *targets, int flags,
                                            pcnn_dataset **out);

/* Transform channel `channel` (-1: every channel) of a file-backed dataset
 * (pcnn_dataset_open_hdf5 or pcnn_dataset_open_volumes) as it is read:
 * x -> scale * (log1p ? log1pf(x) : x) + shift, in float32, on the reading
 * thread (the prefetch thread when on), so that a recipe such as
 * CosmoFlow's log(1 + counts) needs no copy of the data.  The default is
 * the identity (0, 1, 0).  Local.  Errors: INVALID_ARGUMENT (NULL, an
 * in-memory dataset: transform x before creating it, channel outside
 * [-1, C), non-finite scale or shift). */
PCNN_API pcnn_status pcnn_dataset_set_transform(pcnn_dataset *data, int channel, int log1p,
                                                float scale, float shift);

/* The targets per sample of any dataset: 0 when it holds class labels
 * (then *num_classes is max label + 1, else 0).  Either pointer may be
 * NULL.  Local.  Errors: INVALID_ARGUMENT (data NULL). */
PCNN_API pcnn_status pcnn_dataset_target_info(const pcnn_dataset *data, int *target_count,
                                              int *num_classes);

/* The bytes this rank read from the dataset's files since it was opened:
 * *data_bytes the samples' array bytes (for HDF5, as requested by the
 * HDF5 library from the file: whole chunks of a chunked dataset),
 * *meta_bytes the rest (headers, HDF5 metadata and targets).  Read-ahead
 * counts when read, wanted or not.  Either pointer may be NULL; 0 for an
 * in-memory dataset.  Local.  Errors: INVALID_ARGUMENT (data NULL). */
PCNN_API pcnn_status pcnn_dataset_io_bytes(const pcnn_dataset *data, uint64_t *data_bytes,
                                           uint64_t *meta_bytes);

/* Sharded data, the DDP way: with sharded 1 each rank's `data` is its own
 * shard of the global data, of any length (in memory or file-backed, HDF5
 * included; only the sample shape, element type and kind of targets must
 * agree); with 0 (the default) every rank passes the same whole dataset.
 * Sharded, pcnn_net_train_epoch (and Python's Net.fit) keeps `batch` as
 * the GLOBAL batch: each rank contributes its share of it (rank r of P:
 * batch / P, the first batch % P ranks one more) from its own shard, in
 * the shard's current order (pcnn_dataset_shuffle shuffles a shard
 * locally), so step k trains on the positions [k * share, (k + 1) * share)
 * of every shard.  The epoch lasts until the longest shard is done: a rank
 * whose shard is exhausted passes no samples (and takes part in the
 * exchange), and each step is weighted exactly by the samples it holds,
 * so the last uneven steps are exact, not padded or dropped; the mean
 * loss is weighted by sample over all shards.  pcnn_net_evaluate
 * evaluates each rank's whole shard: the loss and accuracy are those of
 * the union of the shards, equal on every rank.  Every rank must set the
 * same mode: the collective calls agree it first (MISMATCH on every rank
 * otherwise), and a sharded pass needs batch >= the ranks and a
 * data-parallel network (UNSUPPORTED for a spatial network, whose ranks
 * share samples, and for the scheduler's min_local > 0).  Local (the
 * flag is only read by the collective calls).  Errors: INVALID_ARGUMENT
 * (data NULL, sharded not 0 or 1). */
PCNN_API pcnn_status pcnn_dataset_set_sharded(pcnn_dataset *data, int sharded);

/* The mode of pcnn_dataset_set_sharded (0 or 1).  Local.  Errors:
 * INVALID_ARGUMENT (a NULL pointer). */
PCNN_API pcnn_status pcnn_dataset_get_sharded(const pcnn_dataset *data, int *sharded);

#ifdef __cplusplus
}
#endif

#endif /* PCNN_EXPERIMENTAL */
