/* Candidate distributions of a layer (spec A.11, WP4): the factorisations
 * of the ranks that fit the layer. */
#include <string.h>

#include "plan.h"

plan_role plan_layer_role(const plan_env *env, const pcnn_layer *l)
{
    if (l->index == 0) return PLAN_FREE;
    if (l == env->output || !layer_splits(l)) return PLAN_SAMPLE;
    return l->ops->caps.split == LAYER_SPLIT_WINDOWED ? PLAN_FREE : PLAN_INHERIT;
}

int plan_factorisations(int P, int (*parts)[LAYOUT_DIMS], int max)
{
    int count = 0;
    /* Sample parallelism first, then larger spatial groups; within a
     * group size D before H before W: the order breaks the model's ties,
     * and an outer split is the cheaper one the model does not see (its
     * halo faces are contiguous runs, the compute keeps long rows; measured
     * on the plane net and CosmoFlow at 2 ranks: W 16-40 % slower). */
    for (int n = P; n >= 1; n--) {
        if (P % n) continue;
        const int g = P / n;
        for (int d = g; d >= 1; d--) {
            if (g % d) continue;
            for (int h = g / d; h >= 1; h--) {
                if ((g / d) % h) continue;
                const int w = g / d / h;
                if (count < max) {
                    parts[count][LAYOUT_N] = n;
                    parts[count][LAYOUT_D] = d;
                    parts[count][LAYOUT_H] = h;
                    parts[count][LAYOUT_W] = w;
                }
                count++;
            }
        }
    }
    return count < max ? count : max;
}

static bool fits(const plan_env *env, const pcnn_layer *l, int groups, const int *parts)
{
    if (parts[LAYOUT_N] % groups) return false;
    const int spatial = parts[LAYOUT_D] * parts[LAYOUT_H] * parts[LAYOUT_W];
    if (spatial > 1) {
        if (parts[LAYOUT_N] > env->batch || spatial > env->max_spatial) return false;
        for (int k = 1; k < LAYOUT_DIMS; k++)
            if (parts[k] > 1 && !(env->dims & (1 << (k - 1)))) return false;
    }
    perf_geometry g;
    if (!perf_split_geometry(l, parts, env->batch, &g)) return false; /* blocks below the halo */
    return env->memory_cap <= 0 || g.bytes <= env->memory_cap;
}

int plan_layer_candidates(const plan_env *env, const pcnn_layer *l, int groups,
                          int (*parts)[LAYOUT_DIMS], int max)
{
    const int P = env->ranks;
    if (plan_layer_role(env, l) == PLAN_SAMPLE) {
        const int sample[LAYOUT_DIMS] = {P, 1, 1, 1};
        if (max < 1 || !fits(env, l, groups, sample)) return 0;
        memcpy(parts[0], sample, sizeof sample);
        return 1;
    }
    int all[256][LAYOUT_DIMS];
    const int n = plan_factorisations(P, all, 256);
    int count = 0;
    for (int i = 0; i < n && count < max; i++)
        if (fits(env, l, groups, all[i])) memcpy(parts[count++], all[i], sizeof all[i]);
    return count;
}
