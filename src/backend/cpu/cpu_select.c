/*
 * cpu_select.c — the "cpu" backend's registration: it picks the CPU kernel set (the
 * DTNN_CPU request checked, dtnn_cpu_kernels_name) and makes the backend on that set's table.
 * The kernels of src/backend/cpu/ are compiled portable and, on
 * x86-64, once more with -mavx2 -mfma (CMakeLists.txt, cmake/isa_rename.sh); the faster set runs
 * where the CPU has AVX2 and FMA and the OS saves the ymm registers, unless DTNN_CPU says
 * otherwise. So one binary runs on every x86-64, and the sanitizer builds run the kernels users
 * run.
 *
 * This file is compiled once, for the baseline target: it runs before anything is known about
 * the CPU. It deliberately picks once per process (see cpu_choice): layers plan their
 * workspace with the table the model then runs, so the two must never differ.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/internal.h"
#include "../backend.h"
#include "dtnn.h"

/* The tables of the two compiles of cpu_backend.c; the second exists where CMake found the
 * target x86-64 and the compiler taking -mavx2 -mfma (and then defines DTNN_CPU_AVX2). */
extern const dtnn_backend_ops cpu_backend_table;
#ifdef DTNN_CPU_AVX2
extern const dtnn_backend_ops cpu_backend_table_avx2;
#endif

typedef enum {
    CHOICE_NONE = 0,      /* not chosen yet */
    CHOICE_AVX2,          /* DTNN_CPU unset, auto or avx2, and the CPU has AVX2 + FMA */
    CHOICE_NO_AVX2,       /* DTNN_CPU unset or auto, and the CPU or this build lacks them */
    CHOICE_FORCED,        /* DTNN_CPU=generic */
    CHOICE_AVX2_MISSING,  /* DTNN_CPU=avx2, which the CPU or this build lacks: an error */
    CHOICE_UNKNOWN,       /* DTNN_CPU is not a set's name: an error */
} cpu_choice_kind;

static const char avx2_name[] = "avx2+fma";

/* Whether the AVX2 + FMA kernels can run here: built, and the CPU and OS support them
 * (__builtin_cpu_supports tests the OS's saving of the ymm registers, through XGETBV, as
 * part of "avx2"). */
static int cpu_has_avx2(void)
{
#ifdef DTNN_CPU_AVX2
    /* Needed only when called before the constructors have run (from another library's
     * constructor, say); cheap and harmless otherwise. */
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

static cpu_choice_kind cpu_choose(void)
{
    const char *want = getenv("DTNN_CPU");
    if (!want || !*want || !strcmp(want, "auto"))
        return cpu_has_avx2() ? CHOICE_AVX2 : CHOICE_NO_AVX2;
    if (!strcmp(want, "generic"))
        return CHOICE_FORCED;
    if (!strcmp(want, "avx2") || !strcmp(want, avx2_name))
        return cpu_has_avx2() ? CHOICE_AVX2 : CHOICE_AVX2_MISSING;
    return CHOICE_UNKNOWN;
}

/* The choice, made at the first call. This is the library's only process-wide cached value,
 * and it is written once: neither the CPU nor the environment a run starts with changes
 * during it, and every model and layer must see the same table (a layer sizes its workspace
 * with the table its model then runs). Racing first calls compute the same value; the
 * compare-exchange keeps whichever came first, even so. */
static cpu_choice_kind cpu_choice(void)
{
    static atomic_int chosen;
    int c = atomic_load(&chosen);
    if (c == CHOICE_NONE) {
        int expected = CHOICE_NONE;
        c = (int)cpu_choose();
        if (!atomic_compare_exchange_strong(&chosen, &expected, c))
            c = expected;
    }
    return (cpu_choice_kind)c;
}

static const dtnn_backend_ops *cpu_backend_ops(void)
{
#ifdef DTNN_CPU_AVX2
    if (cpu_choice() == CHOICE_AVX2)
        return &cpu_backend_table_avx2;
#endif
    return &cpu_backend_table;
}

const char *dtnn_cpu_kernels_name(void)
{
    return cpu_choice() == CHOICE_AVX2 ? avx2_name : "generic";
}

const char *dtnn_cpu_kernels_reason(void)
{
    switch (cpu_choice()) {
    case CHOICE_AVX2:
        return "DTNN_CPU=generic forces portable";
    case CHOICE_FORCED:
        return "forced by DTNN_CPU=generic";
#ifdef DTNN_CPU_AVX2
    case CHOICE_NO_AVX2:
        return "this CPU or its OS lacks AVX2 + FMA";
    case CHOICE_AVX2_MISSING:
        return "DTNN_CPU=avx2, but this CPU or its OS lacks AVX2 + FMA";
#else
    case CHOICE_NO_AVX2:
        return "the only set of this build";
    case CHOICE_AVX2_MISSING:
        return "DTNN_CPU=avx2, but this build has no AVX2 kernels";
#endif
    case CHOICE_UNKNOWN:
        return "DTNN_CPU is not auto, generic or avx2";
    case CHOICE_NONE:
        break;
    }
    return "not chosen";
}

dtnn_status dtnn_cpu_kernels_check(dtnn_error *err)
{
    const cpu_choice_kind c = cpu_choice();
    if (c == CHOICE_AVX2_MISSING)
        return dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "%s: unset DTNN_CPU, or set "
                              "DTNN_CPU=generic", dtnn_cpu_kernels_reason());
    if (c == CHOICE_UNKNOWN) {
        const char *want = getenv("DTNN_CPU");
        return dtnn_error_set(err, DTNN_ERR_ARG, "DTNN_CPU='%s' is not a CPU kernel set: auto "
                              "(or unset: the fastest this CPU runs), generic or avx2",
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
    be->op = cpu_backend_ops();
    be->name = "cpu";
    be->host_memory = 1;
    be->threads = threads;
    return be;
}

const backend_registration cpu_registration = {"cpu", cpu_create, NULL};
