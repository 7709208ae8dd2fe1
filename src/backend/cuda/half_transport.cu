/*
 * half_transport.cu — the device's conversions for gradients that travel in half precision
 * (--comm-dtype fp16 | bf16; train/grad_sync.c), so that NCCL sums the bucket in that type on
 * the GPUs and only half the bytes cross PCIe where MPI stages through the host. Contracts:
 * backend/backend.h's half_pack and half_unpack. The conversions are core/half.h's own (the
 * CPU's), not the cuda_fp16 intrinsics, so both backends produce the same bits (NaN payloads
 * included). fp16's overflow check runs as a first pass whose flag the widening pass reads on
 * the device: the host waits for nothing here.
 */
#include "../../core/half.h"
#include "cuda_launch.cuh"

static __global__ void pack_f16_k(size_t n, const float *src, float scale, uint16_t *dst)
{
    CU_LOOP(i, n) dst[i] = f32_to_f16(src[i] * scale);
}

static __global__ void pack_bf16_k(size_t n, const float *src, float scale, uint16_t *dst)
{
    CU_LOOP(i, n) dst[i] = f32_to_bf16(src[i] * scale);
}

extern "C" void cuda_half_pack(dtnn_backend *be, dtnn_comm_dtype dtype, size_t n,
                               const float *src, float scale, uint16_t *dst)
{
    CU_SKIP_IF_FAILED(be);
    if (dtype == DTNN_COMM_F16)
        CU_LAUNCH(be, "fp16 packing kernel", pack_f16_k, n, n, src, scale, dst);
    else
        CU_LAUNCH(be, "bf16 packing kernel", pack_bf16_k, n, n, src, scale, dst);
}

/* stats [0] = 1 on an infinite or NaN value (exponent all ones), stats [1] = max |widened|:
 * a non-negative float's bits order as the float does, so an integer atomicMax finds it. */
static __global__ void f16_scan_k(size_t n, const uint16_t *src, float inv_scale, float *stats)
{
    int overflow = 0;
    float largest = 0.0f;
    CU_LOOP(i, n)
    {
        overflow |= (src[i] & 0x7c00u) == 0x7c00u;
        largest = fmaxf(largest, fabsf(f16_to_f32(src[i]) * inv_scale));
    }
    if (overflow)
        atomicExch(&stats[0], 1.0f);
    else if (largest > 0.0f)
        atomicMax((int *)&stats[1], __float_as_int(largest));
}

static __global__ void unpack_f16_k(size_t n, const uint16_t *src, float inv_scale, float *dst,
                                    const float *stats)
{
    if (stats[0] != 0.0f)
        return;
    CU_LOOP(i, n) dst[i] = f16_to_f32(src[i]) * inv_scale;
}

static __global__ void unpack_bf16_k(size_t n, const uint16_t *src, float inv_scale,
                                     float *dst)
{
    CU_LOOP(i, n) dst[i] = bf16_to_f32(src[i]) * inv_scale;
}

/* An overflow leaves stats [1] at what the threads without one found: the CPU writes 0 there,
 * and so does this, to keep the two backends' stats equal. */
static __global__ void f16_stats_finish_k(float *stats)
{
    if (stats[0] != 0.0f)
        stats[1] = 0.0f;
}

extern "C" void cuda_half_unpack(dtnn_backend *be, dtnn_comm_dtype dtype, size_t n,
                                 const uint16_t *src, float inv_scale, float *dst, float *stats)
{
    CU_SKIP_IF_FAILED(be);
    if (dtype == DTNN_COMM_BF16) {
        CU_LAUNCH(be, "bf16 widening kernel (gradients)", unpack_bf16_k, n, n, src, inv_scale,
                  dst);
        return;
    }
    cuda_state *s = cuda_of(be);
    if (!cuda_ok(be, cudaMemsetAsync(stats, 0, 2 * sizeof *stats, s->stream),
                 "cudaMemsetAsync (fp16 overflow flag)"))
        return;
    CU_LAUNCH(be, "fp16 overflow check kernel", f16_scan_k, n, n, src, inv_scale, stats);
    f16_stats_finish_k<<<1, 1, 0, s->stream>>>(stats);
    if (!cuda_ok(be, cudaGetLastError(), "fp16 overflow check kernel (finish)"))
        return;
    CU_LAUNCH(be, "fp16 widening kernel (gradients)", unpack_f16_k, n, n, src, inv_scale, dst,
              stats);
}
