/* The convolution's algorithm, decided per layer at finalize from its
 * geometry alone, before anything is allocated.
 *
 * Three algorithms (PCNN_OPT_CONV_ALGORITHM): im2col + GEMM, the direct
 * kernels on a padded grid (kernels/conv_direct.h) and one GEMM per kernel
 * tap (kernels/conv_taps.h).  Each pass (forward, input gradient, weight
 * gradient) then runs one kernel; the direct algorithm has two per pass.
 * The thresholds are strategy_table's (thresholds.h). */
#ifndef PCNN_STRATEGY_CONV_CHOICE_H
#define PCNN_STRATEGY_CONV_CHOICE_H

#include <stdbool.h>
#include <stddef.h>

/* The values of PCNN_OPT_CONV_ALGORITHM. */
typedef enum conv_algorithm {
    CONV_ALGO_AUTO = 0,   /* decided per layer by the rules below */
    CONV_ALGO_GEMM = 1,   /* im2col + GEMM (1x1 convolutions: a GEMM on x) */
    CONV_ALGO_DIRECT = 2, /* the direct kernels, where they apply */
    CONV_ALGO_TAPS = 3,   /* one GEMM per tap, where it applies */
} conv_algorithm;

/* The kernel one pass runs. */
typedef enum conv_kernel {
    CONV_KERNEL_GEMM,            /* im2col + GEMM, in bands or on a kept matrix */
    CONV_KERNEL_TAPS,            /* one GEMM per tap */
    CONV_KERNEL_DIRECT_GRID,     /* direct, grid positions in the vector lanes:
                                    direct_conv, direct_weight_grad_few */
    CONV_KERNEL_DIRECT_CHANNELS, /* direct, channels in the vector lanes:
                                    direct_conv_channels, direct_weight_grad */
} conv_kernel;

/* What the choice may look at: the layer's shape and what the plan and
 * the CPU offer.  batch and threads do not move today's rules; they size
 * the workspace that follows from the choice. */
typedef struct conv_geometry {
    int cin, cout;         /* channels in and out */
    int k, stride, pad;    /* square kernel, stride and padding */
    int h, w;              /* input plane */
    int batch;             /* samples per step on this rank (max_batch) */
    int threads;           /* compute threads */
    bool keep_im2col;      /* PCNN_OPT_KEEP_IM2COL */
    bool direct_available; /* direct_conv_available(): the CPU has AVX-512F */
    bool measure;          /* automatic choices where the rules are unsure may be
                              measured (conv_measure.h); false: the rules decide */
    bool bf16;             /* bf16 products: only im2col + GEMM has them (gemm_bf16.h) */
} conv_geometry;

/* The most algorithms one layer may time. */
#define CONV_MAX_CANDIDATES 3

/* The decision, and in words why (for pcnn_net_summary). */
typedef struct conv_choice {
    conv_algorithm algorithm; /* GEMM, DIRECT or TAPS, never AUTO */
    conv_kernel forward, input_grad, weight_grad;
    bool keep_col;            /* GEMM keeps its im2col matrix for the backward */
    char reason[64];          /* "direct (grid 79 % useful)" */
    /* Automatic, g->measure, and the rules unsure (thresholds.h's
     * measure_margin): the algorithms to time at finalize, every one that
     * applies in enum order (the rules' own choice among them); 0: none,
     * the choice above stands. */
    int num_candidates;
    conv_algorithm candidates[CONV_MAX_CANDIDATES];
} conv_choice;

/* Decide the algorithm and the kernel of each pass for a convolution of
 * geometry g (valid: the layer's constructor checked it) when the user
 * asked for `requested`.  A forced algorithm that does not apply to the
 * shape (per tap with stride > 1, direct without AVX-512 or for another
 * kernel size, anything but GEMM for a 1x1 convolution or for padding >=
 * kernel) falls back to
 * im2col + GEMM.  Pure: the same inputs give the same choice.  Under
 * CONV_ALGO_AUTO with g->measure, a layer of at least measure_min_mflop
 * whose rules give another algorithm when their thresholds move by the
 * margin either way gets candidates (above) for conv_measure.h. */
void conv_decide(const conv_geometry *g, conv_algorithm requested, conv_choice *out);

/* Millions of floating-point operations of the layer's three passes
 * (forward, dx, dW) on g->batch samples. */
double conv_geometry_mflop(const conv_geometry *g);

/* The kernel's name: "gemm", "taps", "grid" or "channels". */
const char *conv_kernel_name(conv_kernel k);

/* The choice in one line, the reason then the direct kernels of the three
 * passes: "direct (grid 79 % useful) fwd grid, dx channels, dW channels".
 * snprintf-style: returns the length of the full text. */
int conv_choice_describe(const conv_choice *c, char *buf, size_t size);

#endif
