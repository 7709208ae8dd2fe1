/*
 * dtnn/cpu.h — the CPU side of libdtnn: the kernel threads, the GEMM dense and convolution
 * layers run on the CPU, the BLAS linked, and the kernel set this process runs. Part of the
 * public API; dtnn.h includes it.
 */
#ifndef DTNN_API_CPU_H
#define DTNN_API_CPU_H

#include "../dtnn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sets the kernel threads (OpenMP; 0 keeps the current count). The BLAS always runs
 * single-threaded inside dtnn's own threads, so the two never oversubscribe the cores. */
void dtnn_set_threads(int threads);
/* C = alpha op(A) op(B) + beta C, row-major, on the kernel threads: the GEMM every dense and
 * convolution layer runs (also what `dtnn bench --sgemm` times): dtnn's own packed GEMM in the
 * avx2 and avx512 kernel sets, the BLAS in the generic one. */
void dtnn_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                int lda, const float *b, int ldb, float beta, float *c, int ldc);
/* Name of the BLAS this build links, e.g. "openblas 0.3.21 (Cooperlake)". */
const char *dtnn_blas_name(char *buf, size_t len);
/* Name of the GEMM dtnn_sgemm and the layers run, e.g. "dtnn packed 6x32 tile (avx512)", or
 * the BLAS's name where the generic set runs. */
const char *dtnn_cpu_gemm_name(char *buf, size_t len);

/* The CPU kernel set this process runs: "avx512" (compiled with AVX-512 F, BW, VL, DQ),
 * "avx2+fma" (with -mavx2 -mfma; both on x86-64 builds) or "generic" (the same sources
 * compiled for the target's baseline). Chosen once, at the first model created or the first
 * call of these, from the CPU's feature bits and the OS's saved-register mask (never a table
 * of CPU models) and the environment variable DTNN_CPU: unset or "auto" takes the fastest set
 * the CPU and OS run, "generic" forces the portable kernels, "avx2" and "avx512" ask for
 * those. The sets' results differ by float rounding only (other summation orders: dtnn's own
 * GEMM, Winograd and the direct convolution run only in the fast sets). */
const char *dtnn_cpu_kernels_name(void);
/* How --precision bf16 multiplies on the CPU: on vdpbf16ps in the GEMMs where the CPU has
 * AVX512_BF16 and a fast set runs, else emulated (fp32 products of rounded operands); the
 * results are the same definition (dtnn.h) either way. */
const char *dtnn_cpu_bf16_products(void);
/* A few words on why that set runs, e.g. "DTNN_CPU=generic forces portable" (for `dtnn info`). */
const char *dtnn_cpu_kernels_reason(void);
/* DTNN_OK, or an error when DTNN_CPU cannot be honoured: DTNN_ERR_ARG for an unknown value,
 * DTNN_ERR_UNSUPPORTED for a set the CPU or the build lacks. The generic kernels run
 * then; dtnn_model_build returns this error, so nothing trains on a set not asked for. */
dtnn_status dtnn_cpu_kernels_check(dtnn_error *err);

/* The float32 FMA peak from a register-only loop: whether the CPU and the OS give 256-bit
 * AVX2 + FMA, and 512-bit AVX-512F; GFLOP/s (an FMA counts 2) of `threads` threads running
 * the loop at once, in ymm (zmm = 0) or zmm registers, best of `repeats` runs of about
 * `seconds`; 0 where the vectors are not available or threads could not be started. */
int dtnn_fma_has_ymm(void);
int dtnn_fma_has_zmm(void);
double dtnn_fma_peak_gflops(int zmm, int threads, int repeats, double seconds);

#ifdef __cplusplus
}
#endif
#endif
