/* cpuid and xgetbv, read once.  See cpu_features.h. */
/* syscall() is not POSIX: glibc declares it under _DEFAULT_SOURCE. */
#define _DEFAULT_SOURCE
#include "kernels/cpu_features.h"

#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__x86_64__) && defined(__GNUC__)
static unsigned long long read_xcr0(void)
{
    unsigned int lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

static void detect(cpu_features *f)
{
    unsigned int a, b, c, d;
    memset(f, 0, sizeof *f);
    if (!__get_cpuid(0, &a, &b, &c, &d)) return;
    unsigned int max_leaf = a;
    memcpy(f->vendor + 0, &b, 4);
    memcpy(f->vendor + 4, &d, 4);
    memcpy(f->vendor + 8, &c, 4);
    f->vendor[12] = '\0';

    __cpuid(1, a, b, c, d);
    int base_family = (int)((a >> 8) & 0xf), base_model = (int)((a >> 4) & 0xf);
    f->family = base_family == 0xf ? base_family + (int)((a >> 20) & 0xff) : base_family;
    f->model = (base_family == 0x6 || base_family == 0xf)
                   ? base_model + (int)(((a >> 16) & 0xf) << 4)
                   : base_model;
    bool osxsave = (c >> 27) & 1, fma = (c >> 12) & 1;
    unsigned long long xcr0 = osxsave ? read_xcr0() : 0;
    bool ymm_os = (xcr0 & 0x6) == 0x6;            /* SSE + AVX state */
    bool zmm_os = ymm_os && (xcr0 & 0xe0) == 0xe0; /* opmask, ZMM_Hi256, Hi16_ZMM */
    bool tile_os = (xcr0 & 0x60000) == 0x60000;     /* XTILECFG + XTILEDATA */
    if (max_leaf < 7) return;
    __cpuid_count(7, 0, a, b, c, d);
    f->avx2 = ymm_os && ((b >> 5) & 1);
    f->fma = ymm_os && fma;
    f->avx512f = zmm_os && ((b >> 16) & 1);
    f->avx512bw = zmm_os && ((b >> 30) & 1);
    f->avx512vl = zmm_os && ((b >> 31) & 1);
    f->amx_bf16 = tile_os && ((d >> 22) & 1);
    f->amx_tile = tile_os && ((d >> 24) & 1);
    unsigned int max_sub = a;
    if (max_sub >= 1) {
        __cpuid_count(7, 1, a, b, c, d);
        f->avx512_bf16 = f->avx512f && ((a >> 5) & 1);
    }
}
#else
static void detect(cpu_features *f)
{
    memset(f, 0, sizeof *f);
    strcpy(f->vendor, "unknown");
}
#endif

static cpu_features features;
static atomic_int features_ready; /* 0 unread, 1 read */

const cpu_features *cpu_features_get(void)
{
    if (!atomic_load_explicit(&features_ready, memory_order_acquire)) {
        cpu_features f;
        detect(&f);
        /* Every thread computes the same bytes: a racing second writer
         * stores what the first stored. */
        static atomic_flag writing = ATOMIC_FLAG_INIT;
        if (!atomic_flag_test_and_set(&writing)) {
            features = f;
            atomic_store_explicit(&features_ready, 1, memory_order_release);
        } else {
            while (!atomic_load_explicit(&features_ready, memory_order_acquire)) {
            }
        }
    }
    return &features;
}

bool cpu_request_amx(void)
{
    const cpu_features *f = cpu_features_get();
    if (!f->amx_tile || !f->amx_bf16) return false;
#if defined(__linux__) && defined(__x86_64__) && defined(SYS_arch_prctl)
    enum { ARCH_GET_XCOMP_PERM = 0x1022, ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    unsigned long bits = 0;
    if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &bits) == 0 &&
        (bits & (1ul << XFEATURE_XTILEDATA)))
        return true;
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
    return false;
#endif
}

const char *cpu_isa_name(const cpu_features *f)
{
    if (f->avx512f && f->avx512bw && f->avx512vl) return "avx512";
    if (f->avx2 && f->fma) return "avx2";
    return "sse2";
}
