/* The values of the tuning thresholds (thresholds.h), each with the
 * measurement that set it. */
#include "thresholds.h"

const strategy_thresholds strategy_table = {
    /* bench/bench_conv (commit 8c23d93): on small planes the taps save the
     * padding's share of the work and win from a quarter of it; below 32
     * channels their one-core OpenBLAS GEMMs have too short dot products
     * and rows. */
    .taps_min_channels = 32,
    .taps_max_useful = 0.75,

    /* bench/bench_conv (commits bc33069, d6aec0d): the direct kernel runs
     * near the FMA peak on every grid position, so it wins where most
     * positions are useful (0.79 for 8x8 "same", 0.64 for 4x4), and with
     * less where OpenBLAS's GEMM is slow too: few channels or short dot
     * products (LeNet's valid 5x5 on 28x28 runs direct). */
    .direct_useful = 0.75,
    .direct_useful_few_channels = 0.6,
    .direct_few_channels = 64,
    .direct_useful_short_window = 0.45,
    .direct_short_window = 256,

    /* bench/bench_conv (commits eb488a1, bcac141): one register tile of the
     * channel-lane kernel is 64 channels wide; it wastes nothing on the
     * grid's border, which is 15 % or more on 8x8 and smaller planes
     * for k3. */
    .channels_min_out = 64,
    .channels_max_useful = 0.85,

    /* bench/bench_models (commit 4c2e5f5): with output channels in the
     * lanes, 3 channels fill 3 of 16 lanes; grid positions in the lanes
     * took EDSR's 64 -> 3 layer from 15 to 7 ms. */
    .wgrad_few_max_out = 8,

    /* bench/bench_conv (commit 334c24a): CNHW im2col gathers single floats
     * at the stride for GEMMs with short dot products; the channel-lane
     * kernel reads the grid directly (16 -> 32 channels 1.3x faster,
     * 32 -> 64 even).  Its register tile needs 32 or more output channels. */
    .strided_min_out = 32,
    .strided_max_window = 160,

    /* The thresholds above were set on AMD Zen 4/5 with a resolution of
     * about 0.1 in the shares and 2x in the counts; inside half of that
     * either way the measurement decides.  Below 150 MFLOP (fwd + dx + dW)
     * a layer takes under ~5 ms a step on one core: the choice matters
     * little, the timings are noise and finalize (which tests run by the
     * hundred) stays fast.  500 ms caps what one finalize spends: a VGG
     * layer's forward + backward takes 100-300 ms on one core, so large
     * networks time only their first unsure layers. */
    .measure_margin = 0.08,
    .measure_factor = 1.5,
    .measure_min_mflop = 150.0,
    .measure_budget_ms = 500.0,

    /* MPICH's blocking collectives busy-poll (commit 6ca50f9): a
     * communication thread without a core of its own steals cycles from
     * compute. */
    .engine_thread_cores = 1,

    /* bench/bench_parallel on 2 namespace hosts of one core each, 1 Gbit/s
     * (commit after f3475e1): across a network link data moves only while
     * some thread drives MPI, so the nonblocking engine leaves the link idle
     * inside every layer (VGG-11 step 517-538 ms).  A thread that sleeps
     * between tests keeps it busy at the cost of its wake-ups: 20 us 503-557
     * ms (compute +50 %), 100 us 484, 250 us 440-453, 500 us 438-470, 1 ms
     * 485 (the socket buffers drain between tests). */
    .engine_poll_pause_us = 250,
};
