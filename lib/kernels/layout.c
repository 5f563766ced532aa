/* Layout conversions between the public NCHW and the internal CNHW, and a
 * plain copy-or-accumulate.  All are pure data movement: each output element
 * is written by exactly one thread. */
#include <string.h>

#include "kernels.h"

#define PAR_MIN 16384      /* floats below which threads cost more than they save */
#define MEMCPY_MIN 16      /* spatial runs at least this long are copied whole */
#define TILE 32            /* transpose tile for spatial == 1 (dense outputs) */

/* dst plane (i, j) = src plane (j, i), planes of `spatial` floats, src has
 * ni x nj planes, dst nj x ni. */
static void swap_planes(const float *src, float *dst, int ni, int nj, size_t spatial,
                        int threads)
{
    const int par = (size_t)ni * nj * spatial >= PAR_MIN && threads > 1;
    if (spatial >= MEMCPY_MIN) {
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads) if (par)
        for (int j = 0; j < nj; j++)
            for (int i = 0; i < ni; i++)
                memcpy(dst + ((size_t)j * ni + i) * spatial,
                       src + ((size_t)i * nj + j) * spatial, spatial * sizeof *dst);
        return;
    }
    /* Short planes: a tiled transpose of an ni x nj matrix of small planes. */
    const int tj = (nj + TILE - 1) / TILE, ti = (ni + TILE - 1) / TILE;
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads) if (par)
    for (int bj = 0; bj < tj; bj++) {
        for (int bi = 0; bi < ti; bi++) {
            const int j1 = bj * TILE + TILE < nj ? bj * TILE + TILE : nj;
            const int i1 = bi * TILE + TILE < ni ? bi * TILE + TILE : ni;
            for (int j = bj * TILE; j < j1; j++)
                for (int i = bi * TILE; i < i1; i++)
                    for (size_t s = 0; s < spatial; s++)
                        dst[((size_t)j * ni + i) * spatial + s] =
                            src[((size_t)i * nj + j) * spatial + s];
        }
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

void copy_or_add(const float *x, float *y, size_t n, bool accumulate, int threads)
{
    const int par = n >= PAR_MIN && threads > 1;
    if (!accumulate) {
        if (x == y) return;
#pragma omp parallel for schedule(static) num_threads(threads) if (par)
        for (size_t i = 0; i < n; i++) y[i] = x[i];
        return;
    }
#pragma omp parallel for schedule(static) num_threads(threads) if (par)
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}
