/* The bf16 GEMM (lib/kernels/gemm_bf16.h) through every path this machine
 * runs, against a float64 product of the same bf16-rounded inputs.
 *
 * Tolerance: a product of two bf16 is exact in fp32 (8 x 8 significand
 * bits), so the only errors are fp32 additions: k of them into the
 * accumulator, then per KC slice one alpha product and one add into C,
 * and beta * C once.  Higham's bound for n rounded operations in a sum,
 * gamma_n = n u / (1 - n u) with u = 2^-24, gives, whatever the order,
 *   |C - C64| <= gamma_(k + 2 ceil(k/KC) + 3) * mag,
 *   mag = |alpha| sum_p |a_ip b_pj| + |beta c_ij|,
 * a worst case, never met in practice but a violation means a real bug
 * (a wrong pair, a lost slice, a stale C).  Between paths: avx512bf16
 * equals portable bit for bit on normal inputs (same addition order,
 * exact products); amx sums in its own order, and its distance from
 * portable is held to 4 sqrt(n) u mag, the size of two random-walk
 * rounding errors of n additions (every addition rounded to nearest),
 * far inside gamma_n but wide of a slip such as truncated accumulation
 * (n u mag / 2 on average).  Also: two threads give the serial bits of
 * the chosen path (the meson tests force each path); a short workspace or
 * an absent path is refused with C untouched; beta 0 never reads C (NaN
 * there); PCNN_BF16_AMX_DENY=1 makes AMX unavailable and the choice fall
 * to the next path, saying so. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/expect.h"
#include "kernels/cpu_features.h"
#include "kernels/gemm_bf16.h"

static unsigned long long rng_state = 40;
static float uniform(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rng_state >> 33) % 2000000) / 1000000.0f - 1.0f;
}

static int cases;

/* C from path p, or NULL when p is absent here.  Caller frees. */
static float *run(gemm_bf16_path p, bool ta, bool tb, int m, int n, int k, float alpha,
                  const bf16 *a, int lda, const bf16 *b, int ldb, float beta, const float *c0,
                  int ldc, int threads)
{
    if (!gemm_bf16_path_available(p)) return NULL;
    float *c = malloc(sizeof(float) * (size_t)m * ldc);
    memcpy(c, c0, sizeof(float) * (size_t)m * ldc);
    const size_t ws_bytes = gemm_bf16_workspace(m, n, k) * (size_t)threads;
    void *ws = malloc(ws_bytes ? ws_bytes : 1);
    bool ok = threads == 1 ? gemm_bf16_serial_on(p, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta,
                                                 c, ldc, ws, ws_bytes)
                           : gemm_bf16(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                                       threads, ws, ws_bytes);
    EXPECT(ok, "%s refused %dx%dx%d", gemm_bf16_path_name(p), m, n, k);
    free(ws);
    return c;
}

/* The worst |x - want| / tol over C (0 when every element is inside). */
static double worst_over(const float *x, const double *want, const double *tol, int m, int n,
                         int ldc)
{
    double worst = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            const double d = fabs(x[(size_t)i * ldc + j] - want[(size_t)i * n + j]);
            const double t = tol[(size_t)i * n + j];
            if (!(d <= t)) worst = fmax(worst, t > 0 && d == d ? d / t : INFINITY); /* NaN too */
        }
    return worst;
}

static double amx_spread; /* the largest |amx - portable| / (u mag) seen */

static void check_case(bool ta, bool tb, int m, int n, int k, float alpha, float beta)
{
    const int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5 + (k % 3 == 0), ldc = n + 2; /* even and odd: both B^T packs */
    const int arows = ta ? k : m, brows = tb ? n : k;
    const size_t na = (size_t)(arows ? arows : 1) * lda, nb = (size_t)(brows ? brows : 1) * ldb;
    bf16 *a = malloc(sizeof(bf16) * na), *b = malloc(sizeof(bf16) * nb);
    float *c0 = malloc(sizeof(float) * (size_t)m * ldc);
    double *want = malloc(sizeof(double) * (size_t)m * n), *tol = malloc(sizeof(double) * (size_t)m * n);
    double *mag_c = malloc(sizeof(double) * (size_t)m * n);
    for (size_t i = 0; i < na; i++) a[i] = bf16_from_f32(uniform());
    for (size_t i = 0; i < nb; i++) b[i] = bf16_from_f32(uniform());
    for (size_t i = 0; i < (size_t)m * ldc; i++) c0[i] = beta == 0.0f ? NAN : uniform();
    const int slices = (k + GEMM_BF16_KC - 1) / GEMM_BF16_KC;
    const double u = ldexp(1.0, -24), nops = k + 2.0 * slices + 3;
    const double gamma = nops * u / (1 - nops * u);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0, mag = 0;
            for (int q = 0; q < k; q++) {
                const double x = bf16_to_f32(ta ? a[(size_t)q * lda + i] : a[(size_t)i * lda + q]);
                const double y = bf16_to_f32(tb ? b[(size_t)j * ldb + q] : b[(size_t)q * ldb + j]);
                s += x * y, mag += fabs(x * y);
            }
            const double cij = beta == 0.0f ? 0.0 : (double)c0[(size_t)i * ldc + j];
            want[(size_t)i * n + j] = alpha * s + beta * cij;
            mag_c[(size_t)i * n + j] = fabs(alpha) * mag + fabs(beta * cij);
            tol[(size_t)i * n + j] = gamma * mag_c[(size_t)i * n + j];
        }
    float *got[GEMM_BF16_PATHS] = {NULL};
    for (int p = 0; p < GEMM_BF16_PATHS; p++) {
        float *c = run((gemm_bf16_path)p, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c0, ldc, 1);
        if (!c) continue;
        got[p] = c;
        cases++;
        const double worst = worst_over(c, want, tol, m, n, ldc);
        EXPECT(worst == 0, "%s ta%d tb%d %dx%dx%d alpha %g beta %g: error %g x the bound",
               gemm_bf16_path_name((gemm_bf16_path)p), ta, tb, m, n, k, alpha, beta, worst);
        int pad_ok = 1; /* columns n..ldc untouched */
        for (int i = 0; i < m; i++)
            for (int j = n; j < ldc; j++) {
                const float x = c[(size_t)i * ldc + j], y = c0[(size_t)i * ldc + j];
                if (memcmp(&x, &y, 4) != 0) pad_ok = 0;
            }
        EXPECT(pad_ok, "%s wrote past column n", gemm_bf16_path_name((gemm_bf16_path)p));
    }
    /* Two threads through gemm_bf16 (the chosen path): the serial bits. */
    const gemm_bf16_path chosen = gemm_bf16_path_get();
    float *two = run(chosen, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c0, ldc, 2);
    EXPECT(two && got[chosen] && memcmp(two, got[chosen], sizeof(float) * (size_t)m * ldc) == 0,
           "%s x2 differs from x1 (ta%d tb%d %dx%dx%d)", gemm_bf16_path_name(chosen), ta, tb, m,
           n, k);
    free(two);
    /* Paths against each other: avx512bf16 is the portable bits. */
    const float *port = got[GEMM_BF16_PORTABLE];
    if (got[GEMM_BF16_AVX512BF16])
        EXPECT(memcmp(port, got[GEMM_BF16_AVX512BF16], sizeof(float) * (size_t)m * ldc) == 0,
               "avx512bf16 differs from the portable bits (ta%d tb%d %dx%dx%d)", ta, tb, m, n, k);
    if (got[GEMM_BF16_AMX]) {
        double spread = 0;
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                const double d = fabs((double)got[GEMM_BF16_AMX][(size_t)i * ldc + j] -
                                      port[(size_t)i * ldc + j]);
                const double mg = mag_c[(size_t)i * n + j];
                if (mg > 0) spread = fmax(spread, d / (u * mg));
            }
        amx_spread = fmax(amx_spread, spread);
        EXPECT(spread <= 4 * sqrt(nops), "amx vs portable (ta%d tb%d %dx%dx%d): %g u mag > %g",
               ta, tb, m, n, k, spread, 4 * sqrt(nops));
    }
    for (int p = 0; p < GEMM_BF16_PATHS; p++) free(got[p]);
    free(a), free(b), free(c0), free(want), free(tol), free(mag_c);
}

int main(void)
{
    printf("%s\n", gemm_bf16_path_why());
    for (int p = 0; p < GEMM_BF16_PATHS; p++)
        printf("path %s: %s\n", gemm_bf16_path_name((gemm_bf16_path)p),
               gemm_bf16_path_available((gemm_bf16_path)p) ? "runs here" : "absent");
    const char *expect = getenv("EXPECT_PATH");
    if (expect)
        EXPECT(strcmp(gemm_bf16_path_name(gemm_bf16_path_get()), expect) == 0,
               "PCNN_BF16_PATH gave %s, want %s", gemm_bf16_path_name(gemm_bf16_path_get()),
               expect);
    /* AMX: present where the CPU has it and tile state was not refused;
     * refused (PCNN_BF16_AMX_DENY), the choice falls to the next path and
     * says why. */
    const cpu_features *f = cpu_features_get();
    const char *deny = getenv("PCNN_BF16_AMX_DENY");
    const bool denied = deny && *deny && strcmp(deny, "0") != 0;
    if (PCNN_GEMM_BF16_AMX && f->amx_tile && f->amx_bf16 && f->avx512bw && !denied)
        EXPECT(gemm_bf16_path_available(GEMM_BF16_AMX), "an AMX CPU must run the AMX path");
    if (denied) {
        EXPECT(!gemm_bf16_path_available(GEMM_BF16_AMX), "a refused AMX must be unavailable");
        EXPECT(gemm_bf16_path_get() != GEMM_BF16_AMX, "a refused AMX was chosen");
        const gemm_bf16_path next = gemm_bf16_path_available(GEMM_BF16_AVX512BF16)
                                        ? GEMM_BF16_AVX512BF16 : GEMM_BF16_PORTABLE;
        EXPECT(gemm_bf16_path_get() == next, "refused AMX: got %s, want %s",
               gemm_bf16_path_name(gemm_bf16_path_get()), gemm_bf16_path_name(next));
        if (f->amx_tile && f->amx_bf16)
            EXPECT(strstr(gemm_bf16_path_why(), "refused") != NULL,
                   "`why` must say AMX was refused: %s", gemm_bf16_path_why());
    }

    /* Shapes off every block: MR 8, NR 32, KC 256, MC 128, NC 1024; AMX
     * tiles 16 x 16 x 32 k, blocks 32 x 32, KC 2304 (even slices), MC 32,
     * NC 256, all of A packed once past one NC panel. */
    const int shapes[][3] = {
        {1, 1, 1},     {7, 31, 3},     {8, 32, 2},     {9, 33, 5},     {16, 200, 144},
        {13, 70, 257}, {130, 45, 77},  {3, 1030, 9},   {20, 40, 513},  {129, 97, 300},
        {5, 5, 0},     {64, 64, 64},   {17, 1100, 31}, {2, 3, 1},      {16, 16, 32},
        {32, 32, 64},  {17, 17, 33},   {48, 80, 96},   {1, 100, 33},   {100, 1, 65},
        {33, 47, 1100}, {31, 65, 1025}, {300, 70, 40}, {64, 600, 576}, {40, 33, 2049},
        {150, 530, 700}, {20, 300, 2500},
    };
    const float ab[][2] = {{1.0f, 0.0f}, {0.5f, 1.0f}, {-2.0f, 0.25f}, {1.0f, -1.0f}, {1.0f, 1.0f}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int t = 0; t < 4; t++)
            check_case(t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2],
                       ab[(s + t) % 5][0], ab[(s + t) % 5][1]);
    /* alpha 0: C = beta C without reading A or B. */
    check_case(false, false, 9, 40, 10, 0.0f, 0.5f);
    /* The layers' products at a small im2col size: W x col, dy x col^T, W^T x dy. */
    check_case(false, false, 32, 2048, 144, 1.0f, 0.0f);
    check_case(false, true, 32, 144, 2048, 1.0f, 0.0f);
    check_case(true, false, 144, 2048, 32, 1.0f, 1.0f);

    /* Refusals leave C as it was. */
    bf16 a[64] = {0}, b[64] = {0};
    float c[64], before[64];
    for (int i = 0; i < 64; i++) c[i] = before[i] = (float)i;
    char ws[256];
    EXPECT(!gemm_bf16_serial_on(GEMM_BF16_PORTABLE, false, false, 8, 8, 8, 1.0f, a, 8, b, 8, 0.0f,
                                c, 8, ws, gemm_bf16_workspace(8, 8, 8) - 1),
           "a short workspace must be refused");
    for (int p = 0; p <= GEMM_BF16_PATHS; p++) /* GEMM_BF16_PATHS: no such path */
        if (p == GEMM_BF16_PATHS || !gemm_bf16_path_available((gemm_bf16_path)p))
            EXPECT(!gemm_bf16_serial_on((gemm_bf16_path)p, false, false, 8, 8, 8, 1.0f, a, 8, b,
                                        8, 0.0f, c, 8, ws, sizeof ws),
                   "an absent path (%d) must be refused", p);
    EXPECT(memcmp(c, before, sizeof c) == 0, "a refused call wrote C");
    printf("largest |amx - portable| / (u mag): %.3g\n", amx_spread);
    printf("%d path x shape cases, %d failures\n", cases, failures);
    return failures != 0;
}
