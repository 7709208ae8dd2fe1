/*
 * bf16.cu — the conversions of --precision bf16 (dtnn.h): fp32 operands rounded to bf16
 * (__float2bfloat16_rn: to nearest, ties to even, as the CPU's core/half.h) for cuDNN and
 * cuBLAS, and their bf16 results widened back into the engine's fp32 tensors, written or added,
 * a convolution's bias added after the widening as on the CPU. bf16 memory is uint16_t in the
 * C files, which have no bf16 type.
 */
#include <cuda_bf16.h>

#include "cuda_launch.cuh"

static __global__ void to_bf16_k(size_t n, const float *x, __nv_bfloat16 *y)
{
    CU_LOOP(i, n) y[i] = __float2bfloat16_rn(x[i]);
}

extern "C" void cuda_to_bf16(dtnn_backend *be, size_t n, const float *x, uint16_t *y)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "bf16 rounding kernel", to_bf16_k, n, n, x, (__nv_bfloat16 *)y);
}

static __global__ void from_bf16_k(size_t n, const __nv_bfloat16 *x, float *y, int acc)
{
    CU_LOOP(i, n)
    {
        const float v = __bfloat162float(x[i]);
        y[i] = acc ? y[i] + v : v;
    }
}

extern "C" void cuda_from_bf16(dtnn_backend *be, size_t n, const uint16_t *x, float *y,
                               int accumulate)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "bf16 widening kernel", from_bf16_k, n, n, (const __nv_bfloat16 *)x, y,
              accumulate);
}

/* y [n, K, hw] = x widened + bias [K] */
static __global__ void from_bf16_bias_k(size_t count, int K, size_t hw, const __nv_bfloat16 *x,
                                        const float *bias, float *y)
{
    CU_LOOP(i, count) y[i] = __bfloat162float(x[i]) + bias[(i / hw) % (size_t)K];
}

extern "C" void cuda_from_bf16_bias(dtnn_backend *be, int n, int K, size_t hw,
                                    const uint16_t *x, const float *bias, float *y)
{
    CU_SKIP_IF_FAILED(be);
    const size_t count = (size_t)n * K * hw;
    if (!bias) {
        CU_LAUNCH(be, "bf16 widening kernel", from_bf16_k, count, count,
                  (const __nv_bfloat16 *)x, y, 0);
        return;
    }
    CU_LAUNCH(be, "bf16 widening kernel (conv bias)", from_bf16_bias_k, count, count, K, hw,
              (const __nv_bfloat16 *)x, bias, y);
}
