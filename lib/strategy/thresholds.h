/* Every tuning threshold behind the library's automatic choices, in one
 * table.  The fields say what each number bounds; thresholds.c holds the
 * values, each with the measurement that set it.  The rules that read them
 * are conv_choice.c (the convolution's kernels) and exchange_choice.c (the
 * progress engine). */
#ifndef PCNN_STRATEGY_THRESHOLDS_H
#define PCNN_STRATEGY_THRESHOLDS_H

typedef struct strategy_thresholds {
    /* One GEMM per kernel tap (kernels/conv_taps.h), stride 1: chosen when
     * both channel counts reach taps_min_channels and at most
     * taps_max_useful of the kernel's products read input pixels (the rest
     * read padding, conv_taps_useful). */
    int taps_min_channels;
    double taps_max_useful;

    /* The direct kernels on the grid (kernels/conv_direct.h), stride 1:
     * chosen when the share of grid positions that are output pixels
     * ("useful") reaches direct_useful; or direct_useful_few_channels with
     * at most direct_few_channels input channels; or
     * direct_useful_short_window with a window (Cin*K*K) of at most
     * direct_short_window floats. */
    double direct_useful;
    double direct_useful_few_channels;
    int direct_few_channels;
    double direct_useful_short_window;
    int direct_short_window;

    /* Of the two stride-1 direct kernels for the forward and the input
     * gradient, the one with channels in the vector lanes
     * (direct_conv_channels) from channels_min_out output channels of the
     * pass, on planes whose output pixels are less than channels_max_useful
     * of the grid positions. */
    int channels_min_out;
    double channels_max_useful;

    /* The direct weight gradient with grid positions in the lanes
     * (direct_weight_grad_few) up to wgrad_few_max_out output channels. */
    int wgrad_few_max_out;

    /* Strided 3x3 and 5x5 convolutions: the channel-lane direct forward and
     * the direct weight gradient from strided_min_out output channels, with
     * a window (Cin*K*K) of at most strided_max_window floats. */
    int strided_min_out;
    int strided_max_window;

    /* Measured choices (conv_measure.h): a convolution whose rules above
     * give another algorithm once their shares move by measure_margin and
     * their counts scale by measure_factor either way is timed at finalize
     * on each candidate, where its three passes at the local batch come to
     * measure_min_mflop or more; the timing of one finalize stops after
     * measure_budget_ms. */
    double measure_margin;
    double measure_factor;
    double measure_min_mflop;
    double measure_budget_ms;

    /* The progress engine: a communication thread is taken only when every
     * rank on the node has its compute threads plus engine_thread_cores
     * cores of its own. */
    int engine_thread_cores;
    /* A communication thread that shares its cores with compute (partners
     * on other nodes) pauses this long between two MPI_Test. */
    int engine_poll_pause_us;
} strategy_thresholds;

/* The table (thresholds.c). */
extern const strategy_thresholds strategy_table;

#endif
