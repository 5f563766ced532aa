/* The bf16 GEMM (lib/kernels/gemm_bf16.h) through every path this machine
 * runs, against a float64 product of the same bf16-rounded inputs.
 *
 * Tolerance: a product of two bf16 is exact in fp32 (8 x 8 significand
 * bits), so the only errors are fp32 additions: k of them into the
 * accumulator, then per KC slice one alpha product and one add into C,
 * and beta * C once.  Higham's bound for n rounded operations in a sum,
 * gamma_n = n u / (1 - n u) with u = 2^-24, gives
 *   |C - C64| <= gamma_(k + 2 ceil(k/KC) + 3) * (|alpha| sum_p |a_ip b_pj| + |beta c_ij|),
 * a worst case, never met in practice but a violation means a real bug
 * (a wrong pair, a lost slice, a stale C).  Also: the vector path equals
 * the portable one bit for bit on normal inputs (same addition order,
 * exact products); threads give the serial bits; a short workspace or an
 * absent path is refused with C untouched; beta 0 never reads C (NaN). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/expect.h"
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

static void check_case(bool ta, bool tb, int m, int n, int k, float alpha, float beta)
{
    const int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5 + (k % 3 == 0), ldc = n + 2; /* even and odd: both B^T packs */
    const int arows = ta ? k : m, brows = tb ? n : k;
    const size_t na = (size_t)(arows ? arows : 1) * lda, nb = (size_t)(brows ? brows : 1) * ldb;
    bf16 *a = malloc(sizeof(bf16) * na), *b = malloc(sizeof(bf16) * nb);
    float *c0 = malloc(sizeof(float) * (size_t)m * ldc);
    for (size_t i = 0; i < na; i++) a[i] = bf16_from_f32(uniform());
    for (size_t i = 0; i < nb; i++) b[i] = bf16_from_f32(uniform());
    for (size_t i = 0; i < (size_t)m * ldc; i++) c0[i] = beta == 0.0f ? NAN : uniform();
    const int slices = (k + GEMM_BF16_KC - 1) / GEMM_BF16_KC;
    const double u = ldexp(1.0, -24), nops = k + 2.0 * slices + 3;
    const double gamma = nops * u / (1 - nops * u);
    float *ref = NULL;
    for (int p = 0; p < GEMM_BF16_PATHS; p++) {
        for (int threads = 1; threads <= 2; threads++) {
            if (threads == 2 && p != (int)gemm_bf16_path_get()) continue; /* gemm_bf16's path */
            float *c = run((gemm_bf16_path)p, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c0,
                           ldc, threads);
            if (!c) continue;
            cases++;
            double worst = 0, worst_tol = 0;
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                    double s = 0, mag = 0;
                    for (int q = 0; q < k; q++) {
                        const double x = bf16_to_f32(ta ? a[(size_t)q * lda + i] : a[(size_t)i * lda + q]);
                        const double y = bf16_to_f32(tb ? b[(size_t)j * ldb + q] : b[(size_t)q * ldb + j]);
                        s += x * y, mag += fabs(x * y);
                    }
                    const double cij = beta == 0.0f ? 0.0 : (double)c0[(size_t)i * ldc + j];
                    const double want = alpha * s + beta * cij;
                    const double tol = gamma * (fabs(alpha) * mag + fabs(beta * cij));
                    const double d = fabs(c[(size_t)i * ldc + j] - want);
                    if (!(d <= tol)) { /* NaN too */
                        if (!(d <= worst)) worst = d, worst_tol = tol;
                    }
                }
            EXPECT(worst == 0, "%s x%d ta%d tb%d %dx%dx%d alpha %g beta %g: error %g > bound %g",
                   gemm_bf16_path_name((gemm_bf16_path)p), threads, ta, tb, m, n, k, alpha, beta,
                   worst, worst_tol);
            int pad_ok = 1; /* columns n..ldc untouched */
            for (int i = 0; i < m; i++)
                for (int j = n; j < ldc; j++) {
                    const float x = c[(size_t)i * ldc + j], y = c0[(size_t)i * ldc + j];
                    if (memcmp(&x, &y, 4) != 0) pad_ok = 0;
                }
            EXPECT(pad_ok, "%s wrote past column n", gemm_bf16_path_name((gemm_bf16_path)p));
            if (!ref) {
                ref = c;
            } else {
                EXPECT(memcmp(ref, c, sizeof(float) * (size_t)m * ldc) == 0,
                       "%s x%d differs from the portable bits (ta%d tb%d %dx%dx%d)",
                       gemm_bf16_path_name((gemm_bf16_path)p), threads, ta, tb, m, n, k);
                free(c);
            }
        }
    }
    free(ref), free(a), free(b), free(c0);
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
    EXPECT(!gemm_bf16_path_available(GEMM_BF16_AMX), "AMX is not built, cannot be available");

    /* Shapes off every block: MR 8, NR 32, KC 256, MC 128, NC 1024. */
    const int shapes[][3] = {
        {1, 1, 1},     {7, 31, 3},    {8, 32, 2},    {9, 33, 5},     {16, 200, 144},
        {13, 70, 257}, {130, 45, 77}, {3, 1030, 9},  {20, 40, 513},  {129, 97, 300},
        {5, 5, 0},     {64, 64, 64},  {17, 1100, 31}, {2, 3, 1},
    };
    const float ab[][2] = {{1.0f, 0.0f}, {0.5f, 1.0f}, {-2.0f, 0.25f}, {1.0f, -1.0f}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int t = 0; t < 4; t++)
            check_case(t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2],
                       ab[(s + t) % 4][0], ab[(s + t) % 4][1]);
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
    EXPECT(!gemm_bf16_serial_on(GEMM_BF16_AMX, false, false, 8, 8, 8, 1.0f, a, 8, b, 8, 0.0f, c, 8,
                                ws, sizeof ws),
           "an absent path must be refused");
    EXPECT(memcmp(c, before, sizeof c) == 0, "a refused call wrote C");
    printf("%d path x shape cases, %d failures\n", cases, failures);
    return failures != 0;
}
