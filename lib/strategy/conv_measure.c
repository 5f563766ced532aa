/* The measured choice's pick and its words (conv_measure.h). */
#include "conv_measure.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "thresholds.h"

#ifdef PCNN_FAULT_INJECTION
static double debug_scale[CONV_ALGO_SLOTS];
static bool debug_on, debug_any_size;
static double debug_budget = -1.0;

void conv_measure_debug_budget(double ms) { debug_budget = ms; }

void conv_measure_debug(const double scale[CONV_ALGO_SLOTS], bool any_size)
{
    debug_on = scale != NULL;
    debug_any_size = any_size;
    for (int a = 0; a < CONV_ALGO_SLOTS; a++) debug_scale[a] = scale ? scale[a] : 1.0;
}
#endif

void conv_measure_adjust(double ms[CONV_ALGO_SLOTS])
{
#ifdef PCNN_FAULT_INJECTION
    for (int a = 0; debug_on && a < CONV_ALGO_SLOTS; a++) ms[a] *= debug_scale[a];
#else
    (void)ms;
#endif
}

bool conv_measure_enabled(void)
{
    const char *env = getenv("PCNN_CONV_MEASURE");
    return !(env && strcmp(env, "0") == 0);
}

double conv_measure_floor_mflop(void)
{
#ifdef PCNN_FAULT_INJECTION
    if (debug_any_size) return 0.0;
#endif
    return strategy_table.measure_min_mflop;
}

double conv_measure_budget_ms(void)
{
#ifdef PCNN_FAULT_INJECTION
    if (debug_budget >= 0.0) return debug_budget;
#endif
    return strategy_table.measure_budget_ms;
}

static const char *algorithm_name(conv_algorithm a)
{
    switch (a) {
    case CONV_ALGO_GEMM: return "gemm";
    case CONV_ALGO_DIRECT: return "direct";
    case CONV_ALGO_TAPS: return "taps";
    case CONV_ALGO_AUTO: break;
    }
    return "?";
}

conv_algorithm conv_measure_pick(const conv_choice *rules, const double ms[CONV_ALGO_SLOTS])
{
    for (int i = 0; i < rules->num_candidates; i++) {
        const double t = ms[rules->candidates[i]];
        if (!isfinite(t) || t <= 0.0) return rules->algorithm;
    }
    conv_algorithm best = rules->algorithm;
    for (int i = 0; i < rules->num_candidates; i++) {
        const conv_algorithm a = rules->candidates[i]; /* enum order: ties keep the lower */
        if (ms[a] < ms[best]) best = a;
    }
    return best;
}

int conv_measure_reason(const conv_choice *rules, conv_algorithm picked,
                        const double ms[CONV_ALGO_SLOTS], char *buf, size_t size)
{
    int len = snprintf(buf, size, "%s %.3g ms vs", algorithm_name(picked), ms[picked]);
    const char *sep = " ";
    for (int i = 0; i < rules->num_candidates; i++) {
        const conv_algorithm a = rules->candidates[i];
        if (a == picked) continue;
        const size_t at = (size_t)len < size ? (size_t)len : size;
        len += snprintf(buf + at, size - at, "%s%s %.3g", sep, algorithm_name(a), ms[a]);
        sep = ", ";
    }
    const size_t at = (size_t)len < size ? (size_t)len : size;
    return len + snprintf(buf + at, size - at, " (measured)");
}
