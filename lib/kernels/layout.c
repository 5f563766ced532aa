/* Layout conversions between the public NCHW and the internal CNHW, a
 * plain copy-or-accumulate, and the finite check of what is staged.  The
 * conversions are pure data movement: each output element is written by
 * exactly one thread. */
#include <string.h>

#include "kernels.h"

#define MEMCPY_MIN 16      /* spatial runs at least this long are copied whole */
#define TILE 32            /* transpose tile for spatial == 1 (dense outputs) */

typedef struct swap_args {
    const float *src;
    float *dst;
    int ni, nj;
    size_t spatial;
} swap_args;

/* Units u = destination plane (j, i): long planes are copied whole. */
static void swap_long(void *arg, size_t u0, size_t u1)
{
    const swap_args *a = arg;
    const size_t ni = (size_t)a->ni, nj = (size_t)a->nj, sp = a->spatial;
    for (size_t u = u0; u < u1; u++) {
        const size_t j = u / ni, i = u % ni;
        memcpy(a->dst + u * sp, a->src + (i * nj + j) * sp, sp * sizeof(float));
    }
}

/* Units u = TILE x TILE tiles (bj, bi) of an ni x nj matrix of short planes. */
static void swap_short(void *arg, size_t u0, size_t u1)
{
    const swap_args *a = arg;
    const int ni = a->ni, nj = a->nj;
    const size_t sp = a->spatial, ti = (size_t)(ni + TILE - 1) / TILE;
    for (size_t u = u0; u < u1; u++) {
        const int bj = (int)(u / ti), bi = (int)(u % ti);
        const int j1 = bj * TILE + TILE < nj ? bj * TILE + TILE : nj;
        const int i1 = bi * TILE + TILE < ni ? bi * TILE + TILE : ni;
        for (int j = bj * TILE; j < j1; j++)
            for (int i = bi * TILE; i < i1; i++)
                for (size_t s = 0; s < sp; s++)
                    a->dst[((size_t)j * ni + i) * sp + s] = a->src[((size_t)i * nj + j) * sp + s];
    }
}

/* dst plane (j, i) = src plane (i, j), planes of `spatial` floats, src has
 * ni x nj planes, dst nj x ni. */
static void swap_planes(const float *src, float *dst, int ni, int nj, size_t spatial,
                        int threads)
{
    swap_args a = {src, dst, ni, nj, spatial};
    const size_t work = (size_t)ni * nj * spatial;
    if (spatial >= MEMCPY_MIN) {
        parallel_for((size_t)ni * nj, 1, work, threads, swap_long, &a);
    } else {
        const size_t tiles = (size_t)((nj + TILE - 1) / TILE) * ((ni + TILE - 1) / TILE);
        parallel_for(tiles, 1, work, threads, swap_short, &a);
    }
}

void nchw_to_cnhw(const float *src, float *dst, int n, int c, size_t spatial, int threads)
{
    swap_planes(src, dst, n, c, spatial, threads);
}

void cnhw_to_nchw(const float *src, float *dst, int n, int c, size_t spatial, int threads)
{
    swap_planes(src, dst, c, n, spatial, threads);
}

typedef struct copy_args {
    const float *x;
    float *y;
} copy_args;

static void copy_range(void *arg, size_t lo, size_t hi)
{
    const copy_args *a = arg;
    memcpy(a->y + lo, a->x + lo, (hi - lo) * sizeof(float));
}

VECTOR_CLONES static void add_range(void *arg, size_t lo, size_t hi)
{
    const copy_args *a = arg;
    const float *restrict x = a->x;
    float *restrict y = a->y;
    for (size_t i = lo; i < hi; i++) y[i] += x[i];
}

void copy_or_add(const float *x, float *y, size_t n, bool accumulate, int threads)
{
    if (!accumulate && x == y) return;
    copy_args a = {x, y};
    parallel_for(n, 16, n, threads, accumulate ? add_range : copy_range, &a);
}

bool floats_finite(const float *x, size_t count)
{
    float lanes[8] = {0};
    size_t i = 0;
    for (; i + 8 <= count; i += 8)
        for (int k = 0; k < 8; k++) lanes[k] += x[i + k] * 0.0f;
    for (; i < count; i++) lanes[0] += x[i] * 0.0f;
    float acc = 0.0f;
    for (int k = 0; k < 8; k++) acc += lanes[k];
    return acc == 0.0f;
}
