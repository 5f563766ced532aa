/* The measured choice of a convolution's algorithm: where the rules of
 * conv_choice.h are unsure (the layer has candidates), finalize times
 * each candidate's forward and backward at the layer's local shape on its
 * own buffers, the ranks sum their timings (graph/conv_measure.c), and
 * this file picks from the sums.  Everything here is pure but the switch
 * and the test hook: the same sums give the same pick on every rank. */
#ifndef PCNN_STRATEGY_CONV_MEASURE_H
#define PCNN_STRATEGY_CONV_MEASURE_H

#include <stdbool.h>
#include <stddef.h>

#include "conv_choice.h"

/* Timings indexed by conv_algorithm (index CONV_ALGO_AUTO unused). */
#define CONV_ALGO_SLOTS 4

/* False when the environment sets PCNN_CONV_MEASURE=0: the rules decide
 * every layer (finalize times nothing). */
bool conv_measure_enabled(void);

/* The smallest layer worth timing (thresholds.h's measure_min_mflop; 0
 * under the test hook's any_size) and the cap of one finalize's timing. */
double conv_measure_floor_mflop(void);
double conv_measure_budget_ms(void);

/* The candidate of rules (rules->candidates) with the least ms[]; a tie
 * goes to the rules' own choice, then to the lower algorithm value.  A
 * timing that is not finite and positive leaves the rules' choice. */
conv_algorithm conv_measure_pick(const conv_choice *rules, const double ms[CONV_ALGO_SLOTS]);

/* The reason of a measured choice, "direct 1.23 ms vs gemm 1.80, taps
 * 2.10 (measured)", into buf (snprintf-style). */
int conv_measure_reason(const conv_choice *rules, conv_algorithm picked,
                        const double ms[CONV_ALGO_SLOTS], char *buf, size_t size);

/* This process's timings as the test hook scales them (unchanged without
 * it). */
void conv_measure_adjust(double ms[CONV_ALGO_SLOTS]);

#ifdef PCNN_FAULT_INJECTION
/* Test hook (internal builds only): multiply this process's timings of
 * each algorithm by scale[algorithm] before the ranks combine them, and
 * with any_size time layers below the floor too.  NULL scale: off.
 * conv_measure_debug_budget: the budget in ms instead of the table's
 * (negative: the table's). */
void conv_measure_debug(const double scale[CONV_ALGO_SLOTS], bool any_size);
void conv_measure_debug_budget(double ms);
#endif

#endif
