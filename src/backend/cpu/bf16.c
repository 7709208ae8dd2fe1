/*
 * bf16.c — the CPU's bfloat16 rounding for --precision bf16 (dtnn.h says what is rounded):
 * values rounded to the nearest bf16 (ties to even, core/half.h) but kept as floats, so the
 * fp32 kernels compute on them unchanged and the CPU gives the GPU's bf16 results up to the
 * order of the fp32 sums.
 */
#include "../../core/half.h"
#include "cpu_kernels.h"

void cpu_round_bf16(size_t n, const float *x, float *y)
{
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++)
        y[i] = bf16_round(x[i]);
}

void cpu_store_bf16(size_t n, const float *x, float *y, int accumulate)
{
    if (!accumulate) {
        cpu_round_bf16(n, x, y);
        return;
    }
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++)
        y[i] += bf16_round(x[i]);
}
