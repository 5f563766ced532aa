#include "gemm_path.h"

#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cpu_features.h"
#include "gemm_own.h"

/* OpenBLAS 0.3.21's x86-64 core names (driver/others/dynamic.c) by the
 * widest vector ISA their SGEMM kernels use. */
static const struct { const char *core, *isa; } blas_cores[] = {
    {"Prescott", "sse"},     {"Core2", "sse"},         {"Penryn", "sse"},
    {"Dunnington", "sse"},   {"Nehalem", "sse"},       {"Atom", "sse"},
    {"Athlon", "sse"},       {"Opteron", "sse"},       {"Opteron_SSE3", "sse"},
    {"Barcelona", "sse"},    {"Bobcat", "sse"},        {"Nano", "sse"},
    {"Katmai", "sse"},       {"Coppermine", "sse"},    {"Northwood", "sse"},
    {"Banias", "sse"},       {"Sandybridge", "avx"},   {"Bulldozer", "avx"},
    {"Piledriver", "avx"},   {"Steamroller", "avx"},   {"Excavator", "avx"},
    {"Haswell", "avx2"},     {"Zen", "avx2"},          {"SkylakeX", "avx512"},
    {"Cooperlake", "avx512"}, {"SapphireRapids", "avx512"},
};

const char *gemm_blas_core_isa(const char *core)
{
    for (size_t i = 0; i < sizeof blas_cores / sizeof *blas_cores; i++)
        if (strcasecmp(core, blas_cores[i].core) == 0) return blas_cores[i].isa;
    return "unknown";
}

static int isa_rank(const char *isa)
{
    static const char *const order[] = {"sse", "avx", "avx2", "avx512"};
    for (int i = 0; i < 4; i++)
        if (strcmp(isa, order[i]) == 0) return i;
    return strcmp(isa, "sse2") == 0 ? 0 : -1; /* cpu_isa_name's lowest */
}

static gemm_path path;
static pthread_once_t path_once = PTHREAD_ONCE_INIT;

static void decide(void)
{
    const char *core = openblas_get_corename();
    snprintf(path.blas_core, sizeof path.blas_core, "%s", core ? core : "?");
    path.blas_isa = gemm_blas_core_isa(path.blas_core);
    path.cpu_isa = cpu_isa_name(cpu_features_get());
    const char *own_isa = gemm_own_isa();
    const char *env = getenv("PCNN_GEMM");
    const bool forced_blas = env && strcmp(env, "openblas") == 0;
    const bool forced_own = env && strcmp(env, "own") == 0;
    path.env_invalid = env && *env && !forced_blas && !forced_own && strcmp(env, "auto") != 0;

    int blas = isa_rank(path.blas_isa), cpu = isa_rank(path.cpu_isa), own = isa_rank(own_isa);
    /* Take over only where OpenBLAS is known to be narrower than both the
     * CPU and our own kernel: an unknown core name is trusted. */
    const bool narrower = blas >= 0 && blas < cpu && blas < own;
    path.forced = forced_own || forced_blas;
    path.own = forced_own || (!forced_blas && narrower);
    if (forced_own || forced_blas)
        snprintf(path.why, sizeof path.why, "%s GEMM (PCNN_GEMM=%s; OpenBLAS core %s, CPU %s)",
                 path.own ? "own" : "OpenBLAS", env, path.blas_core, path.cpu_isa);
    else if (path.own)
        snprintf(path.why, sizeof path.why,
                 "own %s GEMM: OpenBLAS runs its %s core (%s) on this %s CPU; "
                 "OPENBLAS_CORETYPE can name a wider core", own_isa, path.blas_core,
                 path.blas_isa, path.cpu_isa);
    else
        snprintf(path.why, sizeof path.why, "OpenBLAS GEMM (core %s, %s; CPU %s)",
                 path.blas_core, path.blas_isa, path.cpu_isa);
}

const gemm_path *gemm_path_get(void)
{
    pthread_once(&path_once, decide);
    return &path;
}
