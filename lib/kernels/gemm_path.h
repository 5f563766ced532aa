/* Which GEMM the kernels call: OpenBLAS, or the library's own (gemm_own.h)
 * where OpenBLAS runs a kernel narrower than the CPU.  Decided once per
 * process from what OpenBLAS reports (openblas_get_corename) and what the
 * CPU offers (cpuid), unless the environment variable PCNN_GEMM says
 * "openblas" or "own" ("auto", or unset, decides).  The decision is a
 * constant of the process, the same for every network in it. */
#ifndef PCNN_GEMM_PATH_H
#define PCNN_GEMM_PATH_H

#include <stdbool.h>

typedef struct gemm_path {
    bool own;             /* the kernels call gemm_own */
    char blas_core[32];   /* openblas_get_corename(), e.g. "Haswell" */
    const char *blas_isa; /* what that core's kernels use: "sse", "avx", "avx2", "avx512", "unknown" */
    const char *cpu_isa;  /* cpu_isa_name() */
    bool forced;          /* PCNN_GEMM named the path */
    bool env_invalid;     /* PCNN_GEMM held something else than auto, openblas, own */
    char why[200];        /* one line: what runs and why */
} gemm_path;

const gemm_path *gemm_path_get(void);

/* The vector ISA an OpenBLAS core name's kernels use (case-insensitive;
 * "unknown" for a name not in the table).  Exposed for the tests. */
const char *gemm_blas_core_isa(const char *core);

#endif
