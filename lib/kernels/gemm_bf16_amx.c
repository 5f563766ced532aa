/* The AMX-BF16 path of the bf16 GEMM (gemm_bf16.h): 32 x 32 blocks of C
 * in four fp32 tiles (tmm0-3, 16 x 16 each), two A tiles (tmm4-5: 16 rows
 * of op(A) x 16 k-pairs) and two B tiles (tmm6-7: 16 k-pairs x 16 column
 * pairs, the VNNI layout tdpbf16ps reads), four tdpbf16ps per 32 k.
 *
 * The tile instructions are written as inline asm with a "memory" clobber:
 * GCC 12's _tile_loadd and _tile_loadconfig do not tell the compiler they
 * read memory, so stores into the packs could legally sink below them.
 * The packs and the epilogue use AVX-512 under a target attribute; the
 * caller (gemm_bf16.c) runs this only once the kernel granted tile state. */
#include "gemm_bf16.h"

#if PCNN_GEMM_BF16_AMX
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "simd.h" /* transpose16 */
#undef TARGET
#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))

enum {
    KC = GEMM_BF16_AMX_KC, MC = GEMM_BF16_AMX_MC, NC = GEMM_BF16_AMX_NC,
    TILE_BF16 = 512, /* 16 rows x 32 bf16: one A tile, 1 KiB */
    SLIVER_ROW = 64, /* bf16 in a B sliver row: 32 column pairs, 128 bytes */
    PF_PAIRS = 2,    /* how far ahead the B pack prefetches its rows */
};

#define TILE_LOAD(t, base, stride)                                                     \
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"(base), "r"((long)(stride)) \
                     : "memory")
#define TILE_STORE(t, base, stride)                                                     \
    __asm__ volatile("tilestored %%tmm" #t ", (%0,%1,1)" ::"r"(base), "r"((long)(stride)) \
                     : "memory")
#define TILE_ZERO(t) __asm__ volatile("tilezero %%tmm" #t ::)
#define TILE_DP(c, a, b) __asm__ volatile("tdpbf16ps %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::)

typedef struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

static size_t up(size_t x, size_t to) { return (x + to - 1) / to * to; }
static int min_int(int a, int b) { return a < b ? a : b; }

/* The k slices (even, whole tiles: 576 is 288 + 288, not 512 + 64) and
 * the A pack: all of op(A), every slice, packed once and kept over the
 * NC panels when there are several and it fits A_ONCE bytes (the
 * weights of a convolution, reused by every column panel), else one
 * MC x KC block repacked per panel. */
#define A_ONCE ((size_t)2 << 20)
typedef struct plan { int slices, kc; size_t a_block, a_all, b_panel; bool a_once; } plan;

static plan plan_for(int m, int n, int k)
{
    plan p;
    p.slices = (k + KC - 1) / KC;
    p.kc = (int)up((size_t)((k + p.slices - 1) / p.slices), 32);
    p.a_block = up((size_t)min_int(m, MC), 32) * (size_t)p.kc;
    p.a_all = up((size_t)m, 32) * (size_t)p.kc * (size_t)p.slices;
    p.a_once = n > NC && p.a_all * sizeof(bf16) <= A_ONCE;
    p.b_panel = up((size_t)min_int(n, NC), 32) * (size_t)p.kc;
    return p;
}

size_t gemm_bf16_amx_workspace(int m, int n, int k)
{
    const plan p = plan_for(m, n, k);
    /* With several panels, room for min(all of A, A_ONCE) whether or not
     * A fits: the need then never grows as m or n shrink, so a thread's
     * share of a split product fits the whole product's workspace. */
    size_t a = p.a_block * sizeof(bf16);
    if (n > NC) {
        const size_t all = p.a_all * sizeof(bf16) < A_ONCE ? p.a_all * sizeof(bf16) : A_ONCE;
        a = all > a ? all : a;
    }
    return 64 + up(a, 64) + p.b_panel * sizeof(bf16);
}

/* ---- packing ---- */

/* 32 bf16 of r0 and r1 (NULL: zeros), the first n (<= 32), as 32 pairs. */
TARGET static inline void interleave32(const bf16 *r0, const bf16 *r1, int n, bf16 *dst)
{
    const __m512i il = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9,
                                        40, 8, 39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1,
                                        32, 0);
    const __m512i ih = _mm512_add_epi16(il, _mm512_set1_epi16(16));
    const __mmask32 k = n >= 32 ? 0xffffffffu : (__mmask32)((1u << n) - 1u);
    const __m512i x = _mm512_maskz_loadu_epi16(k, r0);
    const __m512i y = r1 ? _mm512_maskz_loadu_epi16(k, r1) : _mm512_setzero_si512();
    _mm512_storeu_si512(dst, _mm512_permutex2var_epi16(x, il, y));
    _mm512_storeu_si512(dst + 32, _mm512_permutex2var_epi16(x, ih, y));
}

/* Rows [i0, i0 + mc) x depths [p0, p0 + kc) of op(A) as 16-row panels of
 * `steps` A tiles each (16 rows x 32 bf16, row-major), zero past mc and kc. */
TARGET static void pack_a(bool ta, const bf16 *a, int lda, int i0, int mc, int p0, int kc,
                          int steps, bf16 *dst)
{
    for (int ip = 0; ip < mc; ip += 16) {
        const int rows = min_int(mc - ip, 16);
        bf16 *panel = dst + (size_t)ip * steps * 32;
        if (!ta) {
            for (int s = 0; s < steps; s++) {
                const int left = kc - 32 * s;
                const __mmask32 k = left >= 32 ? 0xffffffffu : (__mmask32)((1u << left) - 1u);
                bf16 *tile = panel + (size_t)s * TILE_BF16;
                for (int r = 0; r < 16; r++) {
                    const __m512i v =
                        r < rows ? _mm512_maskz_loadu_epi16(
                                       k, a + (size_t)(i0 + ip + r) * lda + p0 + 32 * s)
                                 : _mm512_setzero_si512();
                    _mm512_storeu_si512(tile + 32 * r, v);
                }
            }
            continue;
        }
        /* op(A) = A^T: rows p and p + 1 of A interleave into 16 pairs, one
         * per row of op(A); 16 of them, transposed as 32-bit words, are a
         * tile. */
        const __m512i il = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41,
                                            9, 40, 8, 39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2,
                                            33, 1, 32, 0);
        const __mmask32 k = (__mmask32)((1u << rows) - 1u);
        for (int s = 0; s < steps; s++) {
            uint32_t pairs[16][16] __attribute__((aligned(64)));
            for (int q = 0; q < 16; q++) {
                const int p = 32 * s + 2 * q;
                __m512i v = _mm512_setzero_si512();
                if (p < kc) {
                    const bf16 *r0 = a + (size_t)(p0 + p) * lda + i0 + ip;
                    const __m512i x = _mm512_maskz_loadu_epi16(k, r0);
                    const __m512i y = p + 1 < kc ? _mm512_maskz_loadu_epi16(k, r0 + lda)
                                                 : _mm512_setzero_si512();
                    v = _mm512_permutex2var_epi16(x, il, y);
                }
                _mm512_store_si512(pairs[q], v);
            }
            transpose16((const float *)(const void *)pairs, 16, 16, 16,
                        (float *)(void *)(panel + (size_t)s * TILE_BF16), 16, 16);
        }
    }
}

/* Columns [j0, j0 + nc) x depths [p0, p0 + kc) of op(B) as 32-column
 * slivers of 16 * steps rows (k-pairs) x 32 column pairs, zero past nc and
 * kc: two B tiles side by side per step, 128 bytes a row.  A job of units
 * (B: a k-pair row over every sliver; B^T: a sliver's 16 rows of a step),
 * so that a pack can be run a part at a time.  (Running the next panel's
 * pack between this panel's tile products measured no faster here: the
 * pack is bound by reading B, not by issue slots.) */
typedef struct bjob {
    bool tb;
    const bf16 *b;
    int ldb, j0, nc, p0, kc, steps, kq, slivers;
    bf16 *dst;
    int next, units;
} bjob;

static bjob bjob_make(bool tb, const bf16 *b, int ldb, int j0, int nc, int p0, int kc,
                      bf16 *dst)
{
    bjob j = {tb, b, ldb, j0, nc, p0, kc, (kc + 31) / 32, (kc + 1) / 2, (nc + 31) / 32, dst, 0, 0};
    j.units = tb ? j.slivers * j.steps : 16 * j.steps;
    return j;
}

static size_t bjob_sliver(const bjob *j) { return (size_t)16 * j->steps * SLIVER_ROW; }

/* Row q (a k-pair) of every sliver: B's rows 2q and 2q + 1 read once from
 * start to end (the stream the prefetchers follow), or zeros past k. */
TARGET static void bjob_row(const bjob *j, int q)
{
    bf16 *d = j->dst + (size_t)q * SLIVER_ROW;
    const size_t sliver = bjob_sliver(j);
    if (q >= j->kq) {
        for (int js = 0; js < j->nc; js += 32, d += sliver) {
            _mm512_storeu_si512(d, _mm512_setzero_si512());
            _mm512_storeu_si512(d + 32, _mm512_setzero_si512());
        }
        return;
    }
    const size_t ldb = (size_t)j->ldb;
    const bf16 *r0 = j->b + (size_t)(j->p0 + 2 * q) * ldb + j->j0;
    const bf16 *r1 = 2 * q + 1 < j->kc ? r0 + ldb : NULL;
    /* The row pair PF_PAIRS ahead, a line per 32 columns: the hardware's
     * streams start late on rows of a few KiB. */
    const bool pf = 2 * (q + PF_PAIRS) + 1 < j->kc;
    for (int js = 0; js < j->nc; js += 32, d += sliver) {
        if (pf) {
            _mm_prefetch((const char *)(r0 + 2 * PF_PAIRS * ldb + js), _MM_HINT_T0);
            _mm_prefetch((const char *)(r0 + (2 * PF_PAIRS + 1) * ldb + js), _MM_HINT_T0);
        }
        interleave32(r0 + js, r1 ? r1 + js : NULL, min_int(j->nc - js, 32), d);
    }
}

/* Rows [16 g, 16 g + 16) of sliver sl of op(B) = B^T: a column's k-pairs
 * are adjacent in its row of B, so this is a 32-bit transpose (even ldb)
 * of 32 rows of B; then the odd k's last pair and zeros past k. */
TARGET static void bjob_bt(const bjob *j, int sl, int g)
{
    const int js = 32 * sl, cols = min_int(j->nc - js, 32), full = j->kc / 2;
    bf16 *d = j->dst + (size_t)sl * bjob_sliver(j);
    const size_t ldb = (size_t)j->ldb;
    const bf16 *src = j->b + (size_t)(j->j0 + js) * ldb + j->p0;
    const int q0 = 16 * g, q1 = q0 + 16, nq = min_int(full - q0, 16);
    if (nq > 0) {
        if (ldb % 2 == 0) {
            gemm_bf16_pack_bt_avx512(src + 2 * q0, (int)(ldb / 2), cols, nq,
                                     d + (size_t)q0 * SLIVER_ROW);
        } else {
            for (int q = q0; q < q0 + nq; q++)
                for (int c = 0; c < 32; c++) {
                    bf16 *x = d + (size_t)q * SLIVER_ROW + 2 * c;
                    x[0] = c < cols ? src[(size_t)c * ldb + 2 * q] : 0;
                    x[1] = c < cols ? src[(size_t)c * ldb + 2 * q + 1] : 0;
                }
        }
    }
    for (int q = q0 + (nq > 0 ? nq : 0); q < q1; q++) {
        bf16 *x = d + (size_t)q * SLIVER_ROW;
        if (q == full && (j->kc & 1)) { /* the odd k's last pair */
            for (int c = 0; c < 32; c++)
                x[2 * c] = c < cols ? src[(size_t)c * ldb + j->kc - 1] : 0, x[2 * c + 1] = 0;
        } else {
            _mm512_storeu_si512(x, _mm512_setzero_si512());
            _mm512_storeu_si512(x + 32, _mm512_setzero_si512());
        }
    }
}

/* The next `count` units (all that are left when fewer). */
TARGET static __attribute__((noinline)) void bjob_run(bjob *j, int count)
{
    for (; count > 0 && j->next < j->units; count--, j->next++) {
        if (j->tb)
            bjob_bt(j, j->next / j->steps, j->next % j->steps);
        else
            bjob_row(j, j->next);
    }
}

/* ---- the 32 x 32 block ---- */

static inline __mmask16 cols_mask(int cols) { return cols >= 16 ? 0xffff : (__mmask16)((1u << cols) - 1u); }

/* rows x cols (<= 16) of src (ld_src floats apart) to dst (ld_dst). */
TARGET static inline void copy_part(const float *src, int ld_src, float *dst, int ld_dst, int rows,
                                    int cols)
{
    const __mmask16 k = cols_mask(cols);
    for (int r = 0; r < rows; r++)
        _mm512_mask_storeu_ps(dst + (size_t)r * ld_dst, k,
                              _mm512_maskz_loadu_ps(k, src + (size_t)r * ld_src));
}

/* C = alpha * acc + beta * C on rows x cols, each product rounded (the
 * vector tile's bits for the same acc); beta 0 leaves C unread. */
TARGET static inline void scale_part(const float *acc, float *c, int ldc, int rows, int cols,
                                     float alpha, float beta)
{
    const __mmask16 k = cols_mask(cols);
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    for (int r = 0; r < rows; r++) {
        __m512 x = _mm512_mul_ps(va, _mm512_load_ps(acc + 16 * r));
        if (beta != 0.0f)
            x = _mm512_add_ps(x, _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(k, c + (size_t)r * ldc)));
        _mm512_mask_storeu_ps(c + (size_t)r * ldc, k, x);
    }
}

/* How a block's accumulators start and end.  alpha 1 with beta 0 or 1
 * (the layers' products, and every KC slice after the first) keeps C in
 * the tiles: zero or C itself to start, the tile as C at the end.  Any
 * other alpha, beta: from zero, then alpha * acc + beta * C.  Partial
 * tiles go through `tmp` the same way, so every element of C gets the same
 * arithmetic wherever it lies (threads give the serial bits). */
typedef struct epilogue { bool direct, load; float alpha, beta; } epilogue;

#define TILE_START(t, r, s)                                                             \
    do {                                                                                \
        if (tm > (r) && tn > (s)) {                                                     \
            const int rows_t = min_int(rows - 16 * (r), 16), cols_t = min_int(cols - 16 * (s), 16); \
            float *ct = c + (size_t)(16 * (r)) * ldc + 16 * (s);                        \
            if (!e.load) {                                                              \
                TILE_ZERO(t);                                                           \
            } else if (rows_t == 16 && cols_t == 16) {                                  \
                TILE_LOAD(t, ct, (size_t)ldc * 4);                                      \
            } else {                                                                    \
                memset(tmp[t], 0, sizeof tmp[t]);                                       \
                copy_part(ct, ldc, tmp[t], 16, rows_t, cols_t);                         \
                TILE_LOAD(t, tmp[t], 64);                                               \
            }                                                                           \
        }                                                                               \
    } while (0)

#define TILE_END(t, r, s)                                                               \
    do {                                                                                \
        if (tm > (r) && tn > (s)) {                                                     \
            const int rows_t = min_int(rows - 16 * (r), 16), cols_t = min_int(cols - 16 * (s), 16); \
            float *ct = c + (size_t)(16 * (r)) * ldc + 16 * (s);                        \
            if (e.direct && rows_t == 16 && cols_t == 16) {                             \
                TILE_STORE(t, ct, (size_t)ldc * 4);                                     \
            } else {                                                                    \
                TILE_STORE(t, tmp[t], 64);                                              \
                if (e.direct)                                                           \
                    copy_part(tmp[t], 16, ct, ldc, rows_t, cols_t);                     \
                else                                                                    \
                    scale_part(tmp[t], ct, ldc, rows_t, cols_t, e.alpha, e.beta);       \
            }                                                                           \
        }                                                                               \
    } while (0)

/* tm x tn tiles of C (1 or 2 each, constants once inlined) from `steps`
 * A-tile pairs of panels a0, a1 and the sliver b; rows x cols of C kept. */
TARGET static inline __attribute__((always_inline)) void
block(const int tm, const int tn, int steps, const bf16 *a0, const bf16 *a1, const bf16 *b,
      float *c, int ldc, int rows, int cols, epilogue e)
{
    float tmp[4][256] __attribute__((aligned(64)));
    TILE_START(0, 0, 0);
    TILE_START(1, 0, 1);
    TILE_START(2, 1, 0);
    TILE_START(3, 1, 1);
    for (int s = 0; s < steps; s++) {
        const bf16 *bs = b + (size_t)s * 16 * SLIVER_ROW;
        TILE_LOAD(4, a0 + (size_t)s * TILE_BF16, 64);
        TILE_LOAD(6, bs, 128);
        if (tn > 1) TILE_LOAD(7, bs + 32, 128);
        if (tm > 1) TILE_LOAD(5, a1 + (size_t)s * TILE_BF16, 64);
        TILE_DP(0, 4, 6);
        if (tn > 1) TILE_DP(1, 4, 7);
        if (tm > 1) TILE_DP(2, 5, 6);
        if (tm > 1 && tn > 1) TILE_DP(3, 5, 7);
    }
    TILE_END(0, 0, 0);
    TILE_END(1, 0, 1);
    TILE_END(2, 1, 0);
    TILE_END(3, 1, 1);
}

TARGET static void block_2x2(int steps, const bf16 *a0, const bf16 *a1, const bf16 *b, float *c,
                             int ldc, int rows, int cols, epilogue e)
{
    block(2, 2, steps, a0, a1, b, c, ldc, rows, cols, e);
}
TARGET static void block_2x1(int steps, const bf16 *a0, const bf16 *a1, const bf16 *b, float *c,
                             int ldc, int rows, int cols, epilogue e)
{
    block(2, 1, steps, a0, a1, b, c, ldc, rows, cols, e);
}
TARGET static void block_1x2(int steps, const bf16 *a0, const bf16 *a1, const bf16 *b, float *c,
                             int ldc, int rows, int cols, epilogue e)
{
    block(1, 2, steps, a0, a1, b, c, ldc, rows, cols, e);
}
TARGET static void block_1x1(int steps, const bf16 *a0, const bf16 *a1, const bf16 *b, float *c,
                             int ldc, int rows, int cols, epilogue e)
{
    block(1, 1, steps, a0, a1, b, c, ldc, rows, cols, e);
}

/* ---- the product ---- */

typedef void (*block_fn)(int steps, const bf16 *a0, const bf16 *a1, const bf16 *b, float *c,
                         int ldc, int rows, int cols, epilogue e);

void gemm_bf16_amx(bool ta, bool tb, int m, int n, int k, float alpha, const bf16 *a, int lda,
                   const bf16 *b, int ldb, float beta, float *c, int ldc, void *ws)
{
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.rows[t] = 16, cfg.colsb[t] = 64;
    __asm__ volatile("ldtilecfg %0" ::"m"(cfg) : "memory");

    static const block_fn blocks[2][2] = {{block_1x1, block_1x2}, {block_2x1, block_2x2}};
    const plan pl = plan_for(m, n, k);
    bf16 *a_pack = (bf16 *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
    bf16 *b_pack = a_pack + up(pl.a_once ? pl.a_all : pl.a_block, 32);
    const size_t a_slice = up((size_t)m, 32) * (size_t)pl.kc; /* a_once: one slice of A */
    for (int j0 = 0; j0 < n; j0 += NC) {
        const int nc = min_int(n - j0, NC);
        for (int p0 = 0, sl = 0; p0 < k; p0 += pl.kc, sl++) {
            const int kc = min_int(k - p0, pl.kc), steps = (kc + 31) / 32;
            const float beta_here = p0 == 0 ? beta : 1.0f; /* later slices add to C */
            const epilogue e = {alpha == 1.0f && (beta_here == 0.0f || beta_here == 1.0f),
                                alpha == 1.0f && beta_here == 1.0f, alpha, beta_here};
            bjob job = bjob_make(tb, b, ldb, j0, nc, p0, kc, b_pack);
            bjob_run(&job, job.units);
            for (int i0 = 0; i0 < m; i0 += MC) {
                const int mc = min_int(m - i0, MC);
                const bf16 *ap;
                if (pl.a_once) {
                    bf16 *dst = a_pack + sl * a_slice + (size_t)i0 * steps * 32;
                    if (j0 == 0) pack_a(ta, a, lda, i0, mc, p0, kc, steps, dst);
                    ap = dst;
                } else {
                    pack_a(ta, a, lda, i0, mc, p0, kc, steps, a_pack);
                    ap = a_pack;
                }
                for (int js = 0; js < nc; js += 32) {
                    const int cols = min_int(nc - js, 32);
                    const bf16 *bs = b_pack + (size_t)(js / 32) * 16 * steps * SLIVER_ROW;
                    for (int ir = 0; ir < mc; ir += 32) {
                        const int rows = min_int(mc - ir, 32);
                        const bf16 *a0 = ap + (size_t)ir * steps * 32;
                        blocks[rows > 16][cols > 16](steps, a0, a0 + (size_t)steps * TILE_BF16,
                                                     bs, c + (size_t)(i0 + ir) * ldc + j0 + js,
                                                     ldc, rows, cols, e);
                    }
                }
            }
        }
    }
    __asm__ volatile("tilerelease" ::: "memory");
}
#endif
