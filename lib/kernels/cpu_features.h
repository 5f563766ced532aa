/* What the CPU at hand offers, read once from cpuid and xgetbv (the OS
 * must have enabled the register state too), and AMX tile permission.
 * The kernels' run-time dispatch and the BLAS check read it; nothing here
 * changes process state except cpu_request_amx, which asks Linux for the
 * tile data state (a per-process permission, idempotent, the documented
 * way: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)). */
#ifndef PCNN_CPU_FEATURES_H
#define PCNN_CPU_FEATURES_H

#include <stdbool.h>

typedef struct cpu_features {
    char vendor[13];       /* "GenuineIntel", "AuthenticAMD", ... */
    int family, model;     /* display family and model */
    bool avx2, fma;        /* with OS-enabled ymm state */
    bool avx512f, avx512bw, avx512vl; /* with OS-enabled zmm/opmask state */
    bool avx512_bf16;      /* vdpbf16ps, vcvtne2ps2bf16 */
    bool amx_tile, amx_bf16; /* the CPU has them (permission: cpu_request_amx) */
} cpu_features;

/* The features of this CPU (computed on the first call; thread-safe: every
 * caller computes the same value). */
const cpu_features *cpu_features_get(void);

/* Ask the kernel for AMX tile state for this process.  true when AMX can
 * be used (the CPU has AMX-BF16 and Linux granted the permission); false
 * otherwise (no AMX, an old kernel, or permission refused), in which case
 * callers take a lower path. */
bool cpu_request_amx(void);

/* The widest x86 vector ISA the CPU offers, as a short name: "avx512",
 * "avx2" or "sse2". */
const char *cpu_isa_name(const cpu_features *f);

#endif
