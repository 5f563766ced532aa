/* The library's own GEMM (lib/kernels/gemm_own.h), both tile kernels the
 * machine runs, against a float64 triple loop: every transpose pair, sizes
 * off the MR/NR/KC/MC blocks, depth beyond one KC slice, alpha and beta
 * (beta 0 must not read C: it holds NaN), padded row strides; and the
 * OpenBLAS core table the path decision reads. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/expect.h"
#include "kernels/cpu_features.h"
#include "kernels/gemm_own.h"
#include "kernels/gemm_path.h"
#include "kernels/kernels.h"
#include "pcnn.h"

static unsigned long long rng_state = 2024;
static float uniform(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rng_state >> 33) % 2000000) / 1000000.0f - 1.0f;
}

/* C = alpha op(A) op(B) + beta C with a given tile kernel, through the
 * same blocking as gemm_own (it is gemm_own with the tile swapped in). */
typedef void (*gemm_fn)(bool, bool, int, int, int, float, const float *, int, const float *, int,
                        float, float *, int);

static void check_case(const char *name, gemm_fn f, bool ta, bool tb, int m, int n, int k,
                       float alpha, float beta)
{
    const int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 2;
    const int arows = ta ? k : m, brows = tb ? n : k;
    float *a = malloc(sizeof(float) * (size_t)arows * lda);
    float *b = malloc(sizeof(float) * (size_t)brows * ldb);
    float *c = malloc(sizeof(float) * (size_t)m * ldc);
    double *want = malloc(sizeof(double) * (size_t)m * n);
    for (size_t i = 0; i < (size_t)arows * lda; i++) a[i] = uniform();
    for (size_t i = 0; i < (size_t)brows * ldb; i++) b[i] = uniform();
    for (size_t i = 0; i < (size_t)m * ldc; i++) c[i] = beta == 0.0f ? NAN : uniform();
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < k; p++) {
                double x = ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
                double y = tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
                s += x * y;
            }
            want[(size_t)i * n + j] =
                alpha * s + (beta == 0.0f ? 0.0 : beta * (double)c[(size_t)i * ldc + j]);
        }
    const float pad = c[ldc - 1]; /* past column n: must stay as it was */
    f(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    double worst = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double d = fabs(c[(size_t)i * ldc + j] - want[(size_t)i * n + j]);
            if (!(d <= worst)) worst = d; /* NaN too */
        }
    const double bound = 1e-5 * (k + 1);
    EXPECT(worst <= bound, "%s ta=%d tb=%d m=%d n=%d k=%d alpha=%g beta=%g: max error %g > %g",
           name, ta, tb, m, n, k, alpha, beta, worst, bound);
    EXPECT(memcmp(&pad, &c[ldc - 1], sizeof pad) == 0 || (isnan(pad) && isnan(c[ldc - 1])),
           "%s: wrote past column n", name);
    free(a), free(b), free(c), free(want);
}

static void check_all(const char *name, gemm_fn f)
{
    static const int sizes[][3] = {{1, 1, 1},   {5, 15, 7},   {6, 16, 256}, {7, 17, 257},
                                   {97, 33, 300}, {13, 100, 3}, {200, 9, 513}, {64, 64, 64},
                                   {1, 200, 40}, {150, 1, 20}};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (int t = 0; t < 4; t++) {
            const int m = sizes[s][0], n = sizes[s][1], k = sizes[s][2];
            check_case(name, f, t & 1, t & 2, m, n, k, 1.0f, 0.0f);
            check_case(name, f, t & 1, t & 2, m, n, k, 0.5f, 1.0f);
            check_case(name, f, t & 1, t & 2, m, n, k, -2.0f, 0.25f);
        }
    check_case(name, f, false, false, 9, 10, 0, 1.0f, 0.5f); /* k = 0: C = beta C */
    check_case(name, f, false, true, 9, 10, 0, 1.0f, 0.0f);
}

/* gemm_own with the portable tile forced, to test it on a machine that
 * would pick the AVX2 one: re-implemented here by calling the tile on a
 * 1-block problem would duplicate the blocking, so compare the tiles
 * directly instead. */
static void check_tiles(void)
{
    enum { MR = GEMM_OWN_MR, NR = GEMM_OWN_NR, KC = 37 };
    float a[KC * MR], b[KC * NR] __attribute__((aligned(64)));
    for (int i = 0; i < KC * MR; i++) a[i] = uniform();
    for (int i = 0; i < KC * NR; i++) b[i] = uniform();
    gemm_own_tile_fn tiles[] = {gemm_own_tile_portable, gemm_own_tile()};
    for (int rows = 1; rows <= MR; rows++)
        for (int cols = 1; cols <= NR; cols++)
            for (int bt = 0; bt < 2; bt++) {
                float beta = bt ? 0.75f : 0.0f;
                float out[2][MR][NR + 1];
                for (int t = 0; t < 2; t++) {
                    for (int r = 0; r < MR; r++)
                        for (int j = 0; j <= NR; j++) out[t][r][j] = bt ? (float)(r - j) : NAN;
                    tiles[t](KC, a, b, beta, &out[t][0][0], NR + 1, rows, cols);
                }
                for (int r = 0; r < MR; r++)
                    for (int j = 0; j < NR; j++) {
                        bool inside = r < rows && j < cols;
                        double want = 0;
                        if (inside) {
                            for (int p = 0; p < KC; p++) want += (double)a[p * MR + r] * b[p * NR + j];
                            if (bt) want += beta * (double)(r - j);
                        }
                        for (int t = 0; t < 2; t++) {
                            float got = out[t][r][j];
                            if (inside)
                                EXPECT(fabs(got - want) <= 1e-4, "tile %d rows=%d cols=%d beta=%g "
                                       "(%d,%d): %g, want %g", t, rows, cols, beta, r, j, got, want);
                            else
                                EXPECT(bt ? got == (float)(r - j) : isnan(got),
                                       "tile %d rows=%d cols=%d: wrote outside at (%d,%d)", t,
                                       rows, cols, r, j);
                        }
                    }
            }
}

/* The summary's gemm: line and the finalize warning tell what runs. */
static int warnings_naming_gemm;
static void on_log(void *user, pcnn_log_level level, const char *message)
{
    (void)user;
    if (level == PCNN_LOG_WARNING && strstr(message, "GEMM")) warnings_naming_gemm++;
}

static void check_reported(const gemm_path *p)
{
    pcnn_net *net = NULL;
    pcnn_layer *in = NULL, *fc = NULL;
    char text[4096];
    EXPECT(pcnn_net_create(&net) == PCNN_OK, "create: %s", pcnn_last_error());
    EXPECT(pcnn_net_set_log_callback(net, on_log, NULL) == PCNN_OK, "log");
    EXPECT(pcnn_net_input(net, 1, 4, 4, &in) == PCNN_OK, "input: %s", pcnn_last_error());
    EXPECT(pcnn_dense(net, in, 3, 1, &fc) == PCNN_OK, "dense: %s", pcnn_last_error());
    EXPECT(pcnn_net_set_loss(net, fc, PCNN_LOSS_MSE) == PCNN_OK, "loss: %s", pcnn_last_error());
    EXPECT(pcnn_net_finalize(net, 2) == PCNN_OK, "finalize: %s", pcnn_last_error());
    EXPECT(pcnn_net_summary(net, text, sizeof text, NULL) == PCNN_OK, "summary");
    const char *line = strstr(text, "gemm: ");
    EXPECT(line && strstr(line, p->own ? "own" : "OpenBLAS"), "summary's gemm line: %s",
           line ? line : "(missing)");
    EXPECT(warnings_naming_gemm == (p->own && !p->forced), "%d warnings naming the GEMM",
           warnings_naming_gemm);
    pcnn_net_destroy(&net);
}

int main(void)
{
    check_all("gemm_own", gemm_own);
    check_all("gemm_serial", gemm_serial); /* whichever path this process takes */
    check_tiles();

    EXPECT(strcmp(gemm_blas_core_isa("Prescott"), "sse") == 0, "Prescott is SSE3");
    EXPECT(strcmp(gemm_blas_core_isa("haswell"), "avx2") == 0, "Haswell is AVX2 (any case)");
    EXPECT(strcmp(gemm_blas_core_isa("SkylakeX"), "avx512") == 0, "SkylakeX is AVX-512");
    EXPECT(strcmp(gemm_blas_core_isa("Zen"), "avx2") == 0, "Zen is AVX2");
    EXPECT(strcmp(gemm_blas_core_isa("NoSuchCore"), "unknown") == 0, "unknown core");

    const gemm_path *p = gemm_path_get();
    const char *env = getenv("PCNN_GEMM"), *expect_own = getenv("EXPECT_OWN");
    printf("gemm path: %s (tile %s)\n", p->why, gemm_own_isa());
    if (env && strcmp(env, "own") == 0) EXPECT(p->own, "PCNN_GEMM=own is obeyed");
    if (env && strcmp(env, "openblas") == 0) EXPECT(!p->own, "PCNN_GEMM=openblas is obeyed");
    if (expect_own) { /* set by meson together with OPENBLAS_CORETYPE=Prescott */
        const cpu_features *f = cpu_features_get();
        const bool want = strcmp(expect_own, "1") == 0 && f->avx2 && f->fma;
        EXPECT(p->own == want, "auto decision: own=%d, expected %d", p->own, want);
    }
    check_reported(p);
    if (failures) printf("%d failures\n", failures);
    return failures != 0;
}
