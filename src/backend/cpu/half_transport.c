/*
 * half_transport.c — the CPU's conversions for gradients that travel in half precision
 * (--comm-dtype fp16 | bf16; train/grad_sync.c): a bucket packed into fp16 or bf16 bit patterns
 * before its all-reduce and widened after it, with the table's contracts (backend/backend.h).
 * The conversions are core/half.h's, which the CUDA backend compiles too, so a rank on either
 * backend sends and receives the same bits.
 */
#include <math.h>

#include "../../core/half.h"
#include "cpu_kernels.h"

void cpu_half_pack(dtnn_comm_dtype dtype, size_t n, const float *src, float scale,
                   uint16_t *dst)
{
    if (dtype == DTNN_COMM_F16) {
#pragma omp parallel for schedule(static) if (n > 65536)
        for (size_t i = 0; i < n; i++)
            dst[i] = f32_to_f16(src[i] * scale);
    } else {
#pragma omp parallel for schedule(static) if (n > 65536)
        for (size_t i = 0; i < n; i++)
            dst[i] = f32_to_bf16(src[i] * scale);
    }
}

void cpu_half_unpack(dtnn_comm_dtype dtype, size_t n, const uint16_t *src, float inv_scale,
                     float *dst, float *stats)
{
    if (dtype == DTNN_COMM_BF16) {
#pragma omp parallel for schedule(static) if (n > 65536)
        for (size_t i = 0; i < n; i++)
            dst[i] = bf16_to_f32(src[i]) * inv_scale;
        return;
    }
    /* exponent all ones: an infinity or a NaN, the sum's overflow */
    int overflow = 0;
    float largest = 0.0f;
#pragma omp parallel for schedule(static) reduction(|| : overflow) reduction(max : largest) \
    if (n > 65536)
    for (size_t i = 0; i < n; i++) {
        overflow = overflow || (src[i] & 0x7c00u) == 0x7c00u;
        largest = fmaxf(largest, fabsf(f16_to_f32(src[i]) * inv_scale));
    }
    stats[0] = overflow ? 1.0f : 0.0f;
    stats[1] = overflow ? 0.0f : largest;
    if (overflow)
        return;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++)
        dst[i] = f16_to_f32(src[i]) * inv_scale;
}
