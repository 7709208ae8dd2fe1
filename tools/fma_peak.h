/*
 * fma_peak.h — the float32 FMA peak of this machine from a register-only loop (fma_peak.c).
 */
#ifndef DTNN_FMA_PEAK_H
#define DTNN_FMA_PEAK_H

/* Whether the CPU and the OS give 256-bit AVX2 + FMA, and 512-bit AVX-512F. */
int fma_peak_has_ymm(void);
int fma_peak_has_zmm(void);

/* GFLOP/s (an FMA counts 2) of `threads` threads running the loop at once, in ymm (zmm = 0) or
 * zmm registers, best of `repeats` runs of about 0.2 s; 0 where the vectors are not available
 * or threads could not be started. */
double fma_peak_gflops(int zmm, int threads, int repeats);

#endif
