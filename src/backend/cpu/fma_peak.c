/*
 * fma_peak.c — the machine's float32 FMA peak, measured the way the hardware defines it: a
 * loop of independent fused multiply-adds on registers only (no loads, no stores, no BLAS), in
 * 256-bit (ymm) and, where the CPU and the OS grant AVX-512, 512-bit (zmm) vectors, on T
 * threads at once. A BLAS's SGEMM is no measure of the machine: Debian's OpenBLAS runs SSE3
 * kernels on CPUs it does not know. Intel server cores have two 512-bit FMA ports (zmm twice
 * ymm); AMD Zen 4 splits a zmm FMA in two 256-bit halves (zmm about equal to ymm). dtnn bench
 * --fma-peak prints it; bench/torch_compare.py divides achieved GFLOP/s by it; cpu_select.c
 * runs it briefly to choose between the avx512 and avx2 kernel sets. Compiled once, for the
 * baseline target (like cpu_select.c): each loop carries its own target attribute.
 */
#define _GNU_SOURCE

#include "cpu_kernels.h"
#include "dtnn.h"

#include <immintrin.h>
#include <pthread.h>
#include <time.h>

/* Independent accumulator chains: more than the FMA latency (4 cycles) times the FMA ports
 * (2) on any x86 core, so the loop is bound by throughput, and few enough to stay in registers
 * with the two operands: 12 of AVX2's 16 ymm registers (16 spilled to the stack and measured a
 * third of the peak), 16 of AVX-512's 32 zmm. */
#define YMM_CHAINS 12
#define ZMM_CHAINS 16

static double clock_s(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double now_s(void) { return clock_s(CLOCK_MONOTONIC); }

/* Loop iterations of about `seconds` at 3 GHz and two 256-bit FMAs a cycle, and the flops
 * they do on one thread. */
static long loop_iters(int zmm, double seconds)
{
    return (long)(6e9 * seconds) / (zmm ? 16 * ZMM_CHAINS : 8 * YMM_CHAINS) + 1;
}

static double loop_flops(int zmm, long iters)
{
    return 2.0 * (zmm ? 16 * ZMM_CHAINS : 8 * YMM_CHAINS) * (double)iters;
}

/* The empty asm statements keep each accumulator in its register and stop the compiler from
 * proving the chains' values and folding them. */
#define YMM_CHAINS_DO(OP) OP(0) OP(1) OP(2) OP(3) OP(4) OP(5) OP(6) OP(7) OP(8) OP(9) OP(10) OP(11)
#define ZMM_CHAINS_DO(OP) YMM_CHAINS_DO(OP) OP(12) OP(13) OP(14) OP(15)

__attribute__((target("avx2,fma"))) static float run_ymm(long iters)
{
    __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
#define DECL(i) __m256 c##i = _mm256_set1_ps((float)(i));
    YMM_CHAINS_DO(DECL)
#undef DECL
    for (long n = 0; n < iters; n++) {
#define STEP(i) c##i = _mm256_fmadd_ps(c##i, a, b);
        YMM_CHAINS_DO(STEP)
#undef STEP
#define KEEP(i) __asm__ volatile("" : "+x"(c##i));
        YMM_CHAINS_DO(KEEP)
#undef KEEP
    }
    __m256 s = _mm256_setzero_ps();
#define SUM(i) s = _mm256_add_ps(s, c##i);
    YMM_CHAINS_DO(SUM)
#undef SUM
    return _mm256_cvtss_f32(s);
}

__attribute__((target("avx512f"))) static float run_zmm(long iters)
{
    __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
#define DECL(i) __m512 c##i = _mm512_set1_ps((float)(i));
    ZMM_CHAINS_DO(DECL)
#undef DECL
    for (long n = 0; n < iters; n++) {
#define STEP(i) c##i = _mm512_fmadd_ps(c##i, a, b);
        ZMM_CHAINS_DO(STEP)
#undef STEP
#define KEEP(i) __asm__ volatile("" : "+v"(c##i));
        ZMM_CHAINS_DO(KEEP)
#undef KEEP
    }
    __m512 s = _mm512_setzero_ps();
#define SUM(i) s = _mm512_add_ps(s, c##i);
    ZMM_CHAINS_DO(SUM)
#undef SUM
    return _mm512_reduce_add_ps(s);
}

/* The threads of one run start together: each waits for `go` (1: run, -1: the run was
 * abandoned because a thread could not be started). */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int go;
} start_gate;

typedef struct {
    int zmm;
    long iters;
    start_gate *gate;
    double seconds;
    float sink;
} peak_job;

static void *peak_thread(void *arg)
{
    peak_job *j = arg;
    pthread_mutex_lock(&j->gate->lock);
    while (!j->gate->go)
        pthread_cond_wait(&j->gate->changed, &j->gate->lock);
    const int go = j->gate->go;
    pthread_mutex_unlock(&j->gate->lock);
    if (go < 0)
        return NULL;
    double t0 = now_s();
    j->sink = j->zmm ? run_zmm(j->iters) : run_ymm(j->iters);
    j->seconds = now_s() - t0;
    return NULL;
}

static void gate_open(start_gate *g, int go)
{
    pthread_mutex_lock(&g->lock);
    g->go = go;
    pthread_cond_broadcast(&g->changed);
    pthread_mutex_unlock(&g->lock);
}

/* GFLOP/s of `threads` threads running the loop at once (the slowest one's time), best of
 * `repeats` runs of about `seconds`; 0 on failure. */
static double measure(int zmm, int threads, int repeats, double seconds)
{
    enum { MAX_THREADS = 256 };
    if (threads < 1 || threads > MAX_THREADS)
        return 0.0;
    const long iters = loop_iters(zmm, seconds);
    double best = 0.0;
    for (int r = 0; r < repeats; r++) {
        peak_job jobs[MAX_THREADS];
        pthread_t tid[MAX_THREADS];
        start_gate gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
        int made = 1;
        for (; made < threads; made++) {
            jobs[made] = (peak_job){zmm, iters, &gate, 0.0, 0.0f};
            if (pthread_create(&tid[made], NULL, peak_thread, &jobs[made]))
                break;
        }
        jobs[0] = (peak_job){zmm, iters, &gate, 0.0, 0.0f};
        gate_open(&gate, made == threads ? 1 : -1);
        if (made == threads)
            peak_thread(&jobs[0]);
        double slowest = jobs[0].seconds;
        for (int t = 1; t < made; t++) {
            pthread_join(tid[t], NULL);
            slowest = jobs[t].seconds > slowest ? jobs[t].seconds : slowest;
        }
        if (made < threads || slowest <= 0.0)
            return 0.0;
        const double flops = loop_flops(zmm, iters) * threads;
        const double gflops = flops / slowest / 1e9;
        best = gflops > best ? gflops : best;
    }
    return best;
}

int dtnn_fma_has_zmm(void)
{
    /* libgcc's check covers the OS's saved state (XCR0's opmask and zmm bits) as well as
     * cpuid, so a kernel that does not save zmm registers reads as no AVX-512. */
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
}

int dtnn_fma_has_ymm(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

double dtnn_fma_peak_gflops(int zmm, int threads, int repeats, double seconds)
{
    if (zmm ? !dtnn_fma_has_zmm() : !dtnn_fma_has_ymm())
        return 0.0;
    return measure(zmm, threads, repeats, seconds);
}

/* For the kernel set's choice (cpu_select.c), which must come out the same in every process
 * of a machine, busy or not: ranks that chose differently would round differently and their
 * replicas drift apart. So the two widths alternate (a burst of load from another process
 * falls on both alike), each run is timed by the thread's own CPU clock (time spent
 * descheduled is not counted), and each width keeps its best run (noise only slows one). */
double cpu_fma_zmm_speedup(int pairs, double seconds)
{
    if (!dtnn_fma_has_zmm() || !dtnn_fma_has_ymm())
        return 0.0;
    double best[2] = {0.0, 0.0};
    for (int r = 0; r < pairs; r++)
        for (int zmm = 0; zmm < 2; zmm++) {
            const long iters = loop_iters(zmm, seconds);
            const double t0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
            volatile float sink = zmm ? run_zmm(iters) : run_ymm(iters);
            (void)sink;
            const double dt = clock_s(CLOCK_THREAD_CPUTIME_ID) - t0;
            if (dt > 0.0 && loop_flops(zmm, iters) / dt > best[zmm])
                best[zmm] = loop_flops(zmm, iters) / dt;
        }
    return best[0] > 0.0 ? best[1] / best[0] : 0.0;
}
