/* The bf16 GEMM's blocking, packing and path choice.  See gemm_bf16.h. */
#include "gemm_bf16.h"

#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_features.h"

enum {
    MR = GEMM_BF16_MR, NR = GEMM_BF16_NR, KC = GEMM_BF16_KC, MC = GEMM_BF16_MC,
    NC = GEMM_BF16_NC
};

static size_t up(size_t x, size_t to) { return (x + to - 1) / to * to; }
static int min_int(int a, int b) { return a < b ? a : b; }

size_t gemm_bf16_workspace(int m, int n, int k)
{
    if (m <= 0 || n <= 0 || k <= 0) return 0;
    const size_t kc = up((size_t)min_int(k, KC), 2);
    const size_t a = up((size_t)min_int(m, MC), MR) * kc * sizeof(bf16);
    const size_t b = up((size_t)min_int(n, NC), NR) * kc * sizeof(bf16);
    const size_t own = 64 + up(a, 64) + b; /* 64: room to align the start */
#if PCNN_GEMM_BF16_AMX
    const size_t amx = gemm_bf16_amx_workspace(m, n, k);
    return amx > own ? amx : own;
#else
    return own;
#endif
}

/* ---- paths ---- */

static const char *const names[GEMM_BF16_PATHS] = {"portable", "avx512bf16", "amx"};

const char *gemm_bf16_path_name(gemm_bf16_path p)
{
    return (unsigned)p < GEMM_BF16_PATHS ? names[p] : "?";
}

static bool vector_packing(void)
{
#if PCNN_GEMM_BF16_AVX512
    const cpu_features *f = cpu_features_get();
    return f->avx512f && f->avx512bw && f->avx512vl;
#else
    return false;
#endif
}

/* AMX needs the kernel's permission for tile state: asked once, on first
 * need; `amx_note` says why not when refused. */
static bool amx_ok;
static const char *amx_note = "";
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

static void amx_probe(void)
{
#if PCNN_GEMM_BF16_AMX
    const cpu_features *f = cpu_features_get();
    const char *deny = getenv("PCNN_BF16_AMX_DENY");
    if (!f->amx_tile || !f->amx_bf16)
        amx_note = "amx: not on this CPU";
    else if (!vector_packing())
        amx_note = "amx: needs AVX-512 for its packs, absent";
    else if (deny && *deny && strcmp(deny, "0") != 0)
        amx_note = "amx: tile state refused (PCNN_BF16_AMX_DENY)";
    else if (!cpu_request_amx())
        amx_note = "amx: Linux refused tile state (arch_prctl)";
    else
        amx_ok = true;
#else
    amx_note = "amx: not built for this target";
#endif
}

bool gemm_bf16_path_available(gemm_bf16_path p)
{
    switch (p) {
    case GEMM_BF16_PORTABLE: return true;
#if PCNN_GEMM_BF16_AVX512
    case GEMM_BF16_AVX512BF16: return cpu_features_get()->avx512_bf16 && vector_packing();
#endif
    case GEMM_BF16_AMX: pthread_once(&amx_once, amx_probe); return amx_ok;
    default: return false;
    }
}

static gemm_bf16_path chosen;
static char why[224];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void decide(void)
{
    const char *env = getenv("PCNN_BF16_PATH");
    int want = GEMM_BF16_PATHS - 1;
    bool named = false;
    if (env && *env && strcmp(env, "auto") != 0) {
        for (int p = 0; p < GEMM_BF16_PATHS; p++)
            if (strcmp(env, names[p]) == 0) want = p, named = true;
    }
    int p = want;
    while (p > 0 && !gemm_bf16_path_available((gemm_bf16_path)p)) p--;
    chosen = (gemm_bf16_path)p;
    /* Passed over AMX: say why (no CPU support, or refused tile state). */
    const char *sep = want == GEMM_BF16_AMX && p != want ? "; " : "";
    const char *note = *sep ? amx_note : "";
    if (named && p == want)
        snprintf(why, sizeof why, "bf16 GEMM %s (PCNN_BF16_PATH=%s)", names[p], env);
    else if (named)
        snprintf(why, sizeof why, "bf16 GEMM %s (PCNN_BF16_PATH=%s unavailable: %s)", names[p],
                 env, *sep ? note : "not on this CPU or build");
    else if (env && *env && strcmp(env, "auto") != 0)
        snprintf(why, sizeof why, "bf16 GEMM %s (PCNN_BF16_PATH=%s unknown: auto%s%s)", names[p],
                 env, sep, note);
    else
        snprintf(why, sizeof why, "bf16 GEMM %s (the best this CPU runs%s%s)", names[p], sep,
                 note);
}

gemm_bf16_path gemm_bf16_path_get(void)
{
    pthread_once(&once, decide);
    return chosen;
}

const char *gemm_bf16_path_why(void)
{
    pthread_once(&once, decide);
    return why;
}

/* ---- packing ---- */

static inline uint32_t pair_at(const bf16 *x) /* two consecutive bf16, any alignment */
{
    uint32_t v;
    memcpy(&v, x, 4);
    return v;
}

/* Rows [i0, i0 + mc) x depths [p0, p0 + kc) of op(A): MR-row panels, each
 * kq pairs of MR (lo, hi) pairs; zero past mc and past k. */
static void pack_a(bool ta, const bf16 *a, int lda, int i0, int mc, int p0, int kc, bf16 *dst)
{
    const int kq = (kc + 1) / 2;
    for (int ir = 0; ir < mc; ir += MR) {
        const int rows = min_int(mc - ir, MR);
        bf16 *panel = dst + (size_t)ir * kq * 2;
        for (int q = 0; q < kq; q++) {
            bf16 *d = panel + (size_t)q * MR * 2;
            const int p = p0 + 2 * q;
            const bool odd_end = 2 * q + 1 >= kc;
            for (int r = 0; r < rows; r++) {
                const int i = i0 + ir + r;
                if (!ta) {
                    const bf16 *s = a + (size_t)i * lda + p;
                    if (!odd_end) {
                        const uint32_t v = pair_at(s);
                        memcpy(d + 2 * r, &v, 4);
                    } else {
                        d[2 * r] = s[0], d[2 * r + 1] = 0;
                    }
                } else {
                    d[2 * r] = a[(size_t)p * lda + i];
                    d[2 * r + 1] = odd_end ? 0 : a[(size_t)(p + 1) * lda + i];
                }
            }
            for (int r = rows; r < MR; r++) d[2 * r] = d[2 * r + 1] = 0;
        }
    }
}

/* Columns [j0, j0 + nc) x depths [p0, p0 + kc) of op(B): NR-wide slivers,
 * each kq pairs of NR (lo, hi) pairs; zero past nc and past k. */
static void pack_b(bool tb, const bf16 *b, int ldb, int j0, int nc, int p0, int kc, bf16 *dst,
                   bool vec)
{
    const int kq = (kc + 1) / 2;
    for (int js = 0; js < nc; js += NR) {
        const int cols = min_int(nc - js, NR);
        bf16 *sliver = dst + (size_t)js * kq * 2;
        if (tb) {
            /* op(B) = B^T: a column's k-pairs are adjacent in its row of B;
             * read each row once, in order (the sliver, kq x 128 bytes,
             * stays in L1 for the strided writes). */
            const bool odd = kc & 1;
#if PCNN_GEMM_BF16_AVX512
            if (vec && ldb % 2 == 0) {
                gemm_bf16_pack_bt_avx512(b + (size_t)(j0 + js) * ldb + p0, ldb / 2, cols, kc / 2,
                                         sliver);
                if (odd) {
                    bf16 *d = sliver + (size_t)(kq - 1) * NR * 2;
                    for (int j = 0; j < NR; j++)
                        d[2 * j] = j < cols ? b[(size_t)(j0 + js + j) * ldb + p0 + kc - 1] : 0,
                        d[2 * j + 1] = 0;
                }
                continue;
            }
#endif
            for (int j = 0; j < cols; j++) {
                const bf16 *s = b + (size_t)(j0 + js + j) * ldb + p0;
                bf16 *d = sliver + 2 * j;
                for (int q = 0; q < kc / 2; q++) {
                    const uint32_t v = pair_at(s + 2 * q);
                    memcpy(d + (size_t)q * NR * 2, &v, 4);
                }
                if (odd) d[(size_t)(kq - 1) * NR * 2] = s[kc - 1], d[(size_t)(kq - 1) * NR * 2 + 1] = 0;
            }
            if (cols < NR)
                for (int q = 0; q < kq; q++)
                    memset(sliver + (size_t)q * NR * 2 + 2 * cols, 0,
                           sizeof(bf16) * 2 * (size_t)(NR - cols));
            continue;
        }
        for (int q = 0; q < kq; q++) {
            bf16 *d = sliver + (size_t)q * NR * 2;
            const int p = p0 + 2 * q;
            const bf16 *r0 = b + (size_t)p * ldb + j0 + js;
            const bf16 *r1 = 2 * q + 1 >= kc ? NULL : r0 + ldb;
#if PCNN_GEMM_BF16_AVX512
            if (vec) {
                gemm_bf16_interleave_avx512(r0, r1, cols, d); /* zeros past cols */
                continue;
            }
#endif
            (void)vec;
            for (int j = 0; j < cols; j++) d[2 * j] = r0[j], d[2 * j + 1] = r1 ? r1[j] : 0;
            for (int j = cols; j < NR; j++) d[2 * j] = d[2 * j + 1] = 0;
        }
    }
}

/* C = beta * C (beta 0: zeros, C unread), for k == 0 or alpha == 0. */
static void scale_c(int m, int n, float beta, float *c, int ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float *x = c + (size_t)i * ldc + j;
            *x = beta == 0.0f ? 0.0f : beta * *x;
        }
}

/* ---- the product ---- */

bool gemm_bf16_serial_on(gemm_bf16_path path, bool ta, bool tb, int m, int n, int k, float alpha,
                         const bf16 *a, int lda, const bf16 *b, int ldb, float beta, float *c,
                         int ldc, void *ws, size_t ws_bytes)
{
    if (!gemm_bf16_path_available(path)) return false;
    if (m <= 0 || n <= 0) return true;
    if (k <= 0 || alpha == 0.0f) {
        scale_c(m, n, beta, c, ldc);
        return true;
    }
    if (!ws || ws_bytes < gemm_bf16_workspace(m, n, k)) return false;
#if PCNN_GEMM_BF16_AMX
    if (path == GEMM_BF16_AMX) {
        gemm_bf16_amx(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ws);
        return true;
    }
#endif
    gemm_bf16_tile_fn tile = gemm_bf16_tile_portable;
#if PCNN_GEMM_BF16_AVX512
    if (path == GEMM_BF16_AVX512BF16) tile = gemm_bf16_tile_avx512;
#endif
    const bool vec = vector_packing();
    const size_t kcmax = up((size_t)min_int(k, KC), 2);
    bf16 *a_pack = (bf16 *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
    bf16 *b_pack = a_pack + up(up((size_t)min_int(m, MC), MR) * kcmax, 32);
    for (int j0 = 0; j0 < n; j0 += NC) {
        const int nc = min_int(n - j0, NC);
        for (int p0 = 0; p0 < k; p0 += KC) {
            const int kc = min_int(k - p0, KC), kq = (kc + 1) / 2;
            const float beta_here = p0 == 0 ? beta : 1.0f; /* later slices add to C */
            pack_b(tb, b, ldb, j0, nc, p0, kc, b_pack, vec);
            for (int i0 = 0; i0 < m; i0 += MC) {
                const int mc = min_int(m - i0, MC);
                pack_a(ta, a, lda, i0, mc, p0, kc, a_pack);
                for (int js = 0; js < nc; js += NR) {
                    const int cols = min_int(nc - js, NR);
                    for (int ir = 0; ir < mc; ir += MR)
                        tile(kq, a_pack + (size_t)ir * kq * 2, b_pack + (size_t)js * kq * 2,
                             alpha, beta_here, c + (size_t)(i0 + ir) * ldc + j0 + js, ldc,
                             min_int(mc - ir, MR), cols);
                }
            }
        }
    }
    return true;
}

/* As gemm() (gemm.c): threads only for products worth forking for. */
#define MIN_BLOCK 32
#define MIN_PARALLEL_MACS (1 << 20)

bool gemm_bf16(bool ta, bool tb, int m, int n, int k, float alpha, const bf16 *a, int lda,
               const bf16 *b, int ldb, float beta, float *c, int ldc, int threads, void *ws,
               size_t ws_bytes)
{
    const gemm_bf16_path path = gemm_bf16_path_get();
    if (m <= 0 || n <= 0) return true;
    const bool split_cols = n >= m;
    const int extent = split_cols ? n : m;
    int parts = threads;
    if (parts > extent / MIN_BLOCK) parts = extent / MIN_BLOCK;
    if ((double)m * n * k < MIN_PARALLEL_MACS) parts = 1;
    const size_t per = gemm_bf16_workspace(m, n, k);
    if (parts > 1 && ws_bytes / (size_t)parts < per) parts = (int)(ws_bytes / (per ? per : 1));
    if (parts <= 1)
        return gemm_bf16_serial_on(path, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                                   ws, ws_bytes);
    int ok = 1;
#pragma omp parallel num_threads(parts) reduction(&& : ok)
    {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int chunk = (extent + nt - 1) / nt;
        chunk = (chunk + 31) / 32 * 32; /* whole NR slivers */
        const int lo = t * chunk, hi = lo + chunk < extent ? lo + chunk : extent;
        void *mine = (char *)ws + (size_t)t * per;
        if (lo < hi) {
            if (split_cols) {
                const bf16 *bb = tb ? b + (size_t)lo * ldb : b + lo;
                ok = gemm_bf16_serial_on(path, ta, tb, m, hi - lo, k, alpha, a, lda, bb, ldb,
                                         beta, c + lo, ldc, mine, per);
            } else {
                const bf16 *aa = ta ? a + lo : a + (size_t)lo * lda;
                ok = gemm_bf16_serial_on(path, ta, tb, hi - lo, n, k, alpha, aa, lda, b, ldb,
                                         beta, c + (size_t)lo * ldc, ldc, mine, per);
            }
        }
    }
    return ok;
}

/* The order of vdpbf16ps (Intel SDM): the odd product, then the even one,
 * each added to the fp32 accumulator.  Products of two bf16 are exact in
 * fp32, so for normal numbers this gives the vector path's bits. */
void gemm_bf16_tile_portable(int kq, const bf16 *a, const bf16 *b, float alpha, float beta,
                             float *c, int ldc, int rows, int cols)
{
    float acc[MR][NR] = {{0}};
    for (int q = 0; q < kq; q++) {
        const bf16 *aq = a + (size_t)q * MR * 2, *bq = b + (size_t)q * NR * 2;
        float b0[NR], b1[NR];
        for (int j = 0; j < NR; j++) b0[j] = bf16_to_f32(bq[2 * j]), b1[j] = bf16_to_f32(bq[2 * j + 1]);
        for (int r = 0; r < MR; r++) {
            const float a0 = bf16_to_f32(aq[2 * r]), a1 = bf16_to_f32(aq[2 * r + 1]);
            for (int j = 0; j < NR; j++) {
                acc[r][j] += a1 * b1[j];
                acc[r][j] += a0 * b0[j];
            }
        }
    }
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) {
            float *x = c + (size_t)r * ldc + j;
            *x = beta == 0.0f ? alpha * acc[r][j] : alpha * acc[r][j] + beta * *x;
        }
}
