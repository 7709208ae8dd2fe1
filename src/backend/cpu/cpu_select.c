/*
 * cpu_select.c — the "cpu" backend's registration: it picks the CPU kernel set (the
 * DTNN_CPU request checked, dtnn_cpu_kernels_name) and makes the backend on that set's table.
 * The kernels of src/backend/cpu/ are compiled portable and, on
 * x86-64, once more per kernel set (-mavx2 -mfma; the AVX-512 flags; CMakeLists.txt,
 * cmake/isa_rename.sh); the fastest set the CPU and its OS run is taken, unless DTNN_CPU says
 * otherwise. So one binary runs on every x86-64, and the sanitizer builds run the kernels users
 * run. It also routes dtnn_sgemm (and, for the tests, dtnn__sgemm_strided) to the chosen
 * set's GEMM.
 *
 * This file is compiled once, for the baseline target: it runs before anything is known about
 * the CPU. It deliberately picks once per process (see cpu_choice): layers plan their
 * workspace with the table the model then runs, so the two must never differ.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/internal.h"
#include "cpu_kernels.h"
#include "dtnn.h"

/* Each compile's kernels (cpu_backend.c's cpu_kernels, suffixed per set by
 * cmake/isa_rename.sh). CMake defines DTNN_CPU_HAS_<SET> for each set it built: the target is
 * x86-64 and the compiler takes the set's flags (DTNN_CPU_ISA_FLAGS_<set>). */
extern const cpu_kernel_set cpu_kernels;
#ifdef DTNN_CPU_HAS_AVX2
extern const cpu_kernel_set cpu_kernels_avx2;
/* __builtin_cpu_supports also tests that the OS saves the registers (XGETBV's mask: ymm for
 * "avx2", zmm and the mask registers for the AVX-512 names), never a table of CPU models. The
 * init is needed only when called before the constructors have run (from another library's
 * constructor, say); cheap and harmless otherwise. */
static int runs_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif
#ifdef DTNN_CPU_HAS_AVX512
extern const cpu_kernel_set cpu_kernels_avx512;
static int runs_avx512(void)
{
    __builtin_cpu_init();
    return runs_avx2() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq");
}

/* Whether zmm pays here, by measurement: no cpuid bit says how wide the FMA units are. Intel's
 * server cores have two 512-bit FMA ports (zmm about 2x ymm), AMD Zen 4 splits a zmm FMA in two
 * 256-bit halves (about 1x), where the zmm kernels' wider tiles only waste more at the edges
 * (ResNet-50 and VGG 5-10% slower than the avx2 set, measurements: docs/perf-notes.md). The
 * loop is register-only, 5 alternating pairs of 1 ms runs on the thread's CPU clock
 * (fma_peak.c), and 1.4 lies far from both kinds of core, so the choice does not flip between
 * the processes of a machine, however busy it is; a ratio near the line (load on an SMT
 * sibling, say) is measured again, 4 times as long. */
static int avx512_pays(void)
{
    double speedup = cpu_fma_zmm_speedup(5, 1e-3);
    if (speedup > 1.15 && speedup < 1.7)
        speedup = cpu_fma_zmm_speedup(20, 1e-3);
    return speedup >= 1.4;
}
#endif

typedef struct {
    const char *name;              /* what dtnn_cpu_kernels_name says */
    const char *request;           /* its DTNN_CPU value (the name is accepted too) */
    const cpu_kernel_set *set;     /* NULL where this build lacks it */
    int (*runs_here)(void);        /* NULL: every CPU */
    int (*pays)(void);             /* NULL: faster wherever it runs; else auto asks */
    const char *forced, *lacks_cpu, *lacks_build;
} isa_entry;

/* Fastest first: auto takes the first that is built and runs here. */
static const isa_entry isa_sets[] = {
    {"avx512", "avx512",
#ifdef DTNN_CPU_HAS_AVX512
     &cpu_kernels_avx512, runs_avx512, avx512_pays,
#else
     NULL, NULL, NULL,
#endif
     "forced by DTNN_CPU=avx512",
     "DTNN_CPU=avx512, but this CPU or its OS lacks AVX-512 F, BW, VL and DQ",
     "DTNN_CPU=avx512, but this build has no AVX-512 kernels"},
    {"avx2+fma", "avx2",
#ifdef DTNN_CPU_HAS_AVX2
     &cpu_kernels_avx2, runs_avx2, NULL,
#else
     NULL, NULL, NULL,
#endif
     "forced by DTNN_CPU=avx2", "DTNN_CPU=avx2, but this CPU or its OS lacks AVX2 + FMA",
     "DTNN_CPU=avx2, but this build has no AVX2 kernels"},
    {"generic", "generic", &cpu_kernels, NULL, NULL, "forced by DTNN_CPU=generic", NULL, NULL},
};
enum { ISA_COUNT = sizeof isa_sets / sizeof isa_sets[0], ISA_GENERIC = ISA_COUNT - 1 };

typedef enum {
    CHOICE_AUTO,          /* DTNN_CPU unset or auto: the fastest set built that runs here */
    CHOICE_AUTO_MEASURED, /* the same, after a faster-looking set measured no gain here */
    CHOICE_AUTO_AGREED,   /* auto, the slower set another rank of the run chose */
    CHOICE_FORCED,        /* DTNN_CPU named a set that is built and runs here */
    CHOICE_LACKS_CPU,     /* DTNN_CPU named a set this CPU or OS cannot run: an error */
    CHOICE_LACKS_BUILD,   /* DTNN_CPU named a set this build lacks: an error */
    CHOICE_UNKNOWN,       /* DTNN_CPU is not a set's name: an error */
} choice_kind;

/* Packed in one int for the atomic below: kind * 16 + set index + 1 (0: not chosen), plus
 * CHOICE_IN_USE once a backend took the set's table (cpu_create): from then on it is fixed. */
enum { CHOICE_IN_USE = 1 << 10 };
static int choice_pack(choice_kind kind, int set) { return (int)kind * 16 + set + 1; }
static choice_kind choice_kind_of(int c) { return (choice_kind)((c - 1) / 16); }
static int choice_set_of(int c) { return (c - 1) % 16; }

static int set_runs(int i)
{
    return isa_sets[i].set && (!isa_sets[i].runs_here || isa_sets[i].runs_here());
}

static int cpu_choose(void)
{
    const char *want = getenv("DTNN_CPU");
    if (!want || !*want || !strcmp(want, "auto")) {
        int skipped = 0, i = 0;
        for (;; i++) {
            if (!set_runs(i))
                continue;
            if (!isa_sets[i].pays || isa_sets[i].pays())
                break;
            skipped = 1;
        }
        return choice_pack(skipped ? CHOICE_AUTO_MEASURED : CHOICE_AUTO, i);
    }
    for (int i = 0; i < ISA_COUNT; i++) {
        if (strcmp(want, isa_sets[i].request) && strcmp(want, isa_sets[i].name))
            continue;
        if (!isa_sets[i].set)
            return choice_pack(CHOICE_LACKS_BUILD, i);
        return choice_pack(set_runs(i) ? CHOICE_FORCED : CHOICE_LACKS_CPU, i);
    }
    return choice_pack(CHOICE_UNKNOWN, ISA_GENERIC);
}

/* The choice, made at the first call. This is the library's only process-wide cached value:
 * neither the CPU nor the environment a run starts with changes during it, and every model and
 * layer must see the same table (a layer sizes its workspace with the table its model then
 * runs). Racing first calls compute the same value; the compare-exchange keeps whichever came
 * first, even so. It changes once at most, before any backend uses it: when the ranks of an
 * MPI run agree on one set (cpu_kernels_adopt). */
static atomic_int chosen;

static int cpu_choice(void)
{
    int c = atomic_load(&chosen) & ~CHOICE_IN_USE;
    if (c == 0) {
        int expected = 0;
        c = cpu_choose();
        if (!atomic_compare_exchange_strong(&chosen, &expected, c))
            c = expected & ~CHOICE_IN_USE;
    }
    return c;
}

const char *cpu_kernels_choice(int *forced)
{
    const int c = cpu_choice();
    *forced = choice_kind_of(c) != CHOICE_AUTO && choice_kind_of(c) != CHOICE_AUTO_MEASURED &&
              choice_kind_of(c) != CHOICE_AUTO_AGREED;
    return isa_sets[choice_set_of(c)].name;
}

/* Another rank's set replaces an automatic choice when it is no faster and runs here (so it
 * can only move down the list, whatever order the ranks' sets come in), unless a backend
 * already took the table. */
int cpu_kernels_adopt(const char *name)
{
    const int c = cpu_choice();
    const choice_kind kind = choice_kind_of(c);
    if (kind != CHOICE_AUTO && kind != CHOICE_AUTO_MEASURED && kind != CHOICE_AUTO_AGREED)
        return -1;
    for (int i = choice_set_of(c); i < ISA_COUNT; i++) {
        if (strcmp(isa_sets[i].name, name))
            continue;
        if (i == choice_set_of(c))
            return 0;
        if (!set_runs(i))
            return -1;
        int expected = c;
        return atomic_compare_exchange_strong(&chosen, &expected,
                                              choice_pack(CHOICE_AUTO_AGREED, i)) ? 0 : -1;
    }
    return -1;
}

/* The set that runs: the chosen one, or generic when the request is an error. */
static const isa_entry *cpu_running(void)
{
    const int c = cpu_choice();
    const choice_kind kind = choice_kind_of(c);
    const int ok = kind == CHOICE_AUTO || kind == CHOICE_AUTO_MEASURED ||
                   kind == CHOICE_AUTO_AGREED || kind == CHOICE_FORCED;
    return &isa_sets[ok ? choice_set_of(c) : ISA_GENERIC];
}

const char *dtnn_cpu_kernels_name(void) { return cpu_running()->name; }

const char *dtnn_cpu_kernels_reason(void)
{
    const int c = cpu_choice();
    const isa_entry *e = &isa_sets[choice_set_of(c)];
    switch (choice_kind_of(c)) {
    case CHOICE_AUTO:
        return choice_set_of(c) == 0 ? "the fastest set of this build"
                                     : "the fastest set of this build that this CPU runs";
    case CHOICE_AUTO_MEASURED:
        return "AVX-512 runs here, but its zmm FMAs measured under 1.4x ymm (512-bit units "
               "split in two halves), so the narrower set is faster";
    case CHOICE_AUTO_AGREED:
        return "the fastest set every rank of this run runs: another rank's CPU (or its "
               "DTNN_CPU) chose it, and ranks computing on different sets would drift apart";
    case CHOICE_FORCED:
        return e->forced;
    case CHOICE_LACKS_CPU:
        return e->lacks_cpu;
    case CHOICE_LACKS_BUILD:
        return e->lacks_build;
    case CHOICE_UNKNOWN:
        return "DTNN_CPU is not auto, generic, avx2 or avx512";
    }
    return "not chosen";
}

const char *dtnn_cpu_bf16_products(void)
{
    if (cpu_running()->set->gemm_bf16_dot())
        return "bf16 pairs on vdpbf16ps (AVX512_BF16) in the GEMMs (im2col, pointwise, "
               "linear); fp32 products of the rounded operands in Winograd, direct and "
               "depthwise convolutions";
    if (cpu_running() == &isa_sets[ISA_GENERIC])
        return "emulated: fp32 products of bf16-rounded operands (the generic kernels)";
    return "emulated: fp32 products of bf16-rounded operands (this CPU lacks AVX512_BF16)";
}

const char *dtnn_cpu_gemm_name(char *buf, size_t len)
{
    return cpu_running()->set->gemm_name(buf, len);
}

void dtnn_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    cpu_running()->set->gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void dtnn__sgemm_strided(int count, int trans_a, int trans_b, int m, int n, int k, float alpha,
                         const float *a, int lda, size_t stride_a, const float *b, int ldb,
                         size_t stride_b, float beta, float *c, int ldc, size_t stride_c,
                         int flags)
{
    cpu_running()->set->gemm_strided(count, trans_a, trans_b, m, n, k, alpha, a, lda, stride_a,
                                     b, ldb, stride_b, beta, c, ldc, stride_c, flags);
}

dtnn_status dtnn_cpu_kernels_check(dtnn_error *err)
{
    const int c = cpu_choice();
    const choice_kind kind = choice_kind_of(c);
    if (kind == CHOICE_LACKS_CPU || kind == CHOICE_LACKS_BUILD)
        return dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "%s: unset DTNN_CPU (the fastest set "
                              "this CPU runs), or set DTNN_CPU=generic",
                              dtnn_cpu_kernels_reason());
    if (kind == CHOICE_UNKNOWN) {
        const char *want = getenv("DTNN_CPU");
        return dtnn_error_set(err, DTNN_ERR_ARG, "DTNN_CPU='%s' is not a CPU kernel set: auto "
                              "(or unset: the fastest this CPU runs), generic, avx2 or avx512",
                              want ? want : "");
    }
    return DTNN_OK;
}

/* The kernel-set request is checked here, where a CPU backend is made, and so for every CPU
 * model and no other: a DTNN_CPU the kernels cannot honour (unknown, or avx2 on a CPU without
 * it) would otherwise train on a set the user did not ask for. */
static dtnn_backend *cpu_create(int threads, dtnn_error *err)
{
    if (dtnn_cpu_kernels_check(err) != DTNN_OK)
        return NULL;
    dtnn_backend *be = calloc(1, sizeof *be);
    if (!be) {
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory creating the cpu backend");
        return NULL;
    }
    dtnn_set_threads(0);    /* the BLAS single-threaded inside dtnn's threads: gemm_blas.c */
    atomic_fetch_or(&chosen, CHOICE_IN_USE);
    be->op = cpu_running()->set->table;
    be->name = "cpu";
    be->arithmetic = cpu_running()->name;
    be->host_memory = 1;
    be->threads = threads;
    return be;
}

const backend_registration cpu_registration = {"cpu", cpu_create, NULL};
