/* Pixel-major rows (see pixel_rows.h). */
#include "pixel_rows.h"

#include <string.h>

#include "kernels.h"
#include "simd.h"

#define TILE_SIDE 16

/* ---- 16 x 16 tiles ---------------------------------------------------- */

/* dst[c * ld_dst + r] = src[r * ld + c] for r < rows, c < cols. */
static inline void transpose_scalar(const float *src, size_t ld, int rows, int cols, float *dst,
                                    size_t ld_dst)
{
    for (int c = 0; c < cols; c++)
        for (int r = 0; r < rows; r++)
            dst[(size_t)c * ld_dst + (size_t)r] = src[(size_t)r * ld + (size_t)c];
}

static inline void copy_scalar(float *dst, const float *src, int n)
{
    memcpy(dst, src, (size_t)n * sizeof(float));
}

#if PCNN_AVX512
#define TRANSPOSE_VECTOR(src, ld, rows, cols, dst, ld_dst)                                       \
    transpose16(src, ld, rows, cols, dst, ld_dst, rows)

TARGET static void transpose_avx512(const float *src, size_t ld, int rows, int cols, float *dst,
                                    size_t ld_dst)
{
    if (rows == TILE_SIDE && cols == TILE_SIDE)
        transpose16(src, ld, TILE_SIDE, TILE_SIDE, dst, ld_dst, TILE_SIDE);
    else
        transpose16(src, ld, rows, cols, dst, ld_dst, rows);
}

TARGET static inline void copy_vector(float *dst, const float *src, int n)
{
    const __mmask16 m = (__mmask16)((1u << n) - 1u);
    _mm512_mask_storeu_ps(dst, m, _mm512_maskz_loadu_ps(m, src));
}

#endif

static bool have_avx512(void)
{
#if PCNN_AVX512
    return cpu_has_avx512();
#else
    return false;
#endif
}

/* dst[c * ld_dst + r] = src[r * ld + c] for r < rows, c < cols (at most
 * 16 each). */
static void transpose_tile(bool vector, const float *src, size_t ld, int rows, int cols,
                           float *dst, size_t ld_dst)
{
#if PCNN_AVX512
    if (vector) {
        transpose_avx512(src, ld, rows, cols, dst, ld_dst);
        return;
    }
#endif
    (void)vector;
    transpose_scalar(src, ld, rows, cols, dst, ld_dst);
}

/* ---- activations ----------------------------------------------------- */

/* CNHW [C][N][P] <-> pixel-major rows [P][N][C]: per image a transpose of
 * a C x P matrix (rows N*P floats apart) into P x C (rows N*C apart), by
 * 16 x 16 tiles. */
typedef struct relayout_args {
    const float *src;
    float *dst;
    const float *bias; /* into CNHW: added unless accumulating */
    int c, n, p;
    bool into_rows, accumulate, vector;
} relayout_args;

/* Units u = (image, 16-channel block), image-major. */
static void relayout_tiles(void *arg, size_t lo, size_t hi)
{
    const relayout_args *a = arg;
    const size_t c_all = (size_t)a->c, n_all = (size_t)a->n, p_all = (size_t)a->p;
    const size_t blocks = (c_all + TILE_SIDE - 1) / TILE_SIDE;
    float tile[TILE_SIDE * TILE_SIDE];
    for (size_t u = lo; u < hi; u++) {
        const size_t n = u / blocks, c0 = u % blocks * TILE_SIDE;
        const int nc = (int)(c_all - c0 < TILE_SIDE ? c_all - c0 : TILE_SIDE);
        const float *cnhw_src = a->src + (c0 * n_all + n) * p_all;
        float *cnhw_dst = a->dst + (c0 * n_all + n) * p_all;
        for (size_t p0 = 0; p0 < p_all; p0 += TILE_SIDE) {
            const int np = (int)(p_all - p0 < TILE_SIDE ? p_all - p0 : TILE_SIDE);
            const size_t row = (p0 * n_all + n) * c_all + c0;
            if (a->into_rows) {
                transpose_tile(a->vector, cnhw_src + p0, n_all * p_all, nc, np, a->dst + row,
                               n_all * c_all);
                continue;
            }
            transpose_tile(a->vector, a->src + row, n_all * c_all, np, nc, tile, TILE_SIDE);
            for (int c = 0; c < nc; c++) {
                float *restrict d = cnhw_dst + (size_t)c * n_all * p_all + p0;
                const float *restrict t = tile + c * TILE_SIDE;
                const float b = a->bias ? a->bias[c0 + (size_t)c] : 0.0f;
                if (a->accumulate)
                    for (int q = 0; q < np; q++) d[q] += t[q];
                else
                    for (int q = 0; q < np; q++) d[q] = t[q] + b;
            }
        }
    }
}

void rows_from_cnhw(const float *src, float *dst, int c, int n, int p, int threads)
{
    relayout_args a = {src, dst, NULL, c, n, p, true, false, have_avx512()};
    const size_t units = (size_t)n * ((size_t)(c + TILE_SIDE - 1) / TILE_SIDE);
    parallel_for(units, 1, (size_t)c * n * p, threads, relayout_tiles, &a);
}

void rows_to_cnhw(const float *src, float *dst, const float *bias, int c, int n, int p,
                  bool accumulate, int threads)
{
    relayout_args a = {src, dst, bias, c, n, p, false, accumulate, have_avx512()};
    const size_t units = (size_t)n * ((size_t)(c + TILE_SIDE - 1) / TILE_SIDE);
    parallel_for(units, 1, (size_t)c * n * p, threads, relayout_tiles, &a);
}

/* ---- weights --------------------------------------------------------- */

/* w [Cout][Cin*KK] <-> wt [KK*Cin][Cout]: a transpose whose rows are
 * renumbered (column ci*KK + t of w is row t*Cin + ci of wt), by 16 x 16
 * tiles through a scratch tile, in vector registers where the CPU has
 * AVX-512; threads take columns of w. */
typedef struct weights_args {
    const float *src;
    float *dst;
    int cin, cout, kk;
    bool vector;
} weights_args;

/* Rows of wt for the columns j0, j0+1, ... of w (ci*KK + t -> t*Cin + ci),
 * one division per tile. */
static void taps_rows(size_t j0, int n, size_t cin, size_t kk, size_t *rows)
{
    size_t ci = j0 / kk, t = j0 % kk;
    for (int j = 0; j < n; j++) {
        rows[j] = t * cin + ci;
        if (++t == kk) t = 0, ci++;
    }
}

/* Column tiles [lo, hi) of w, row tiles of w outermost so that the rows of
 * w are read (pack) or written (unpack) front to back; full tiles with
 * constant sizes, which the vector transpose unrolls. */
#define WEIGHT_TILES(NAME, ATTR, TRANSPOSE, COPY)                                               \
    ATTR static void NAME(const weights_args *a, size_t lo, size_t hi, bool pack)                 \
    {                                                                                            \
        const size_t cin = (size_t)a->cin, cout = (size_t)a->cout, kk = (size_t)a->kk;           \
        const size_t cols = cin * kk;                                                            \
        float tile[TILE_SIDE * TILE_SIDE];                                                       \
        size_t rows[TILE_SIDE];                                                                  \
        for (size_t i0 = 0; i0 < cout; i0 += TILE_SIDE) {                                        \
            const int ni = (int)(cout - i0 < TILE_SIDE ? cout - i0 : TILE_SIDE);                 \
            for (size_t jt = lo; jt < hi; jt++) {                                                \
                const size_t j0 = jt * TILE_SIDE;                                                \
                const int nj = (int)(cols - j0 < TILE_SIDE ? cols - j0 : TILE_SIDE);             \
                const bool full = ni == TILE_SIDE && nj == TILE_SIDE;                            \
                taps_rows(j0, nj, cin, kk, rows);                                                \
                if (pack) {                                                                      \
                    if (full)                                                                    \
                        TRANSPOSE(a->src + i0 * cols + j0, cols, TILE_SIDE, TILE_SIDE, tile,     \
                                  TILE_SIDE);                                                    \
                    else                                                                         \
                        TRANSPOSE(a->src + i0 * cols + j0, cols, ni, nj, tile, TILE_SIDE);       \
                    for (int j = 0; j < nj; j++)                                                 \
                        COPY(a->dst + rows[j] * cout + i0, tile + j * TILE_SIDE, ni);            \
                } else {                                                                         \
                    for (int j = 0; j < nj; j++)                                                 \
                        COPY(tile + j * TILE_SIDE, a->src + rows[j] * cout + i0, ni);            \
                    if (full)                                                                    \
                        TRANSPOSE(tile, TILE_SIDE, TILE_SIDE, TILE_SIDE, a->dst + i0 * cols + j0, \
                                  cols);                                                         \
                    else                                                                         \
                        TRANSPOSE(tile, TILE_SIDE, nj, ni, a->dst + i0 * cols + j0, cols);       \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
    }

WEIGHT_TILES(weight_tiles_scalar, , transpose_scalar, copy_scalar)

#if PCNN_AVX512
WEIGHT_TILES(weight_tiles_vector, TARGET, TRANSPOSE_VECTOR, copy_vector)
#endif

static void weight_tiles(void *arg, size_t lo, size_t hi, bool pack)
{
    const weights_args *a = arg;
#if PCNN_AVX512
    if (a->vector) {
        weight_tiles_vector(a, lo, hi, pack);
        return;
    }
#endif
    weight_tiles_scalar(a, lo, hi, pack);
}

static void pack_weights(void *arg, size_t lo, size_t hi) { weight_tiles(arg, lo, hi, true); }
static void unpack_weights(void *arg, size_t lo, size_t hi) { weight_tiles(arg, lo, hi, false); }

static void weights(range_fn fn, const float *src, float *dst, int cout, int cin, int kk,
                    int threads)
{
    weights_args a = {src, dst, cin, cout, kk, have_avx512()};
    const size_t tiles = ((size_t)cin * kk + TILE_SIDE - 1) / TILE_SIDE;
    parallel_for(tiles, 1, (size_t)cout * cin * kk, threads, fn, &a);
}

void taps_pack_weights(const float *w, int cout, int cin, int kk, float *wt, int threads)
{
    weights(pack_weights, w, wt, cout, cin, kk, threads);
}

void taps_unpack_weights(const float *wt, int cout, int cin, int kk, float *w, int threads)
{
    weights(unpack_weights, wt, w, cout, cin, kk, threads);
}
