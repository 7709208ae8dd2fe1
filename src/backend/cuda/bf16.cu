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

/* The channels-last copies (cuda_conv.c, NHWC plans): a transposing conversion of each of
 * `batches` matrices, tiled through shared memory so that reads and writes are both
 * coalesced. TILE x TILE tiles (+1 column against bank conflicts), TILE x ROWS threads. */
enum { TILE = 32, ROWS = 8 };

/* y [b][c][r] = bf16(x [b][r][c]), r < rows, c < cols */
static __global__ void to_bf16_t_k(int rows, int cols, const float *x, __nv_bfloat16 *y)
{
    __shared__ float tile[TILE][TILE + 1];
    const size_t base = (size_t)blockIdx.z * rows * cols;
    const int c0 = blockIdx.x * TILE, r0 = blockIdx.y * TILE;
    for (int i = threadIdx.y; i < TILE; i += ROWS) {
        const int r = r0 + i, c = c0 + threadIdx.x;
        if (r < rows && c < cols)
            tile[i][threadIdx.x] = x[base + (size_t)r * cols + c];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < TILE; i += ROWS) {
        const int c = c0 + i, r = r0 + threadIdx.x;
        if (c < cols && r < rows)
            y[base + (size_t)c * rows + r] = __float2bfloat16_rn(tile[threadIdx.x][i]);
    }
}

/* y [b][r][c] = (or +=) widen(x [b][c][r]) + bias [r] (bias NULL: none) */
static __global__ void from_bf16_t_k(int rows, int cols, const __nv_bfloat16 *x,
                                     const float *bias, float *y, int acc)
{
    __shared__ float tile[TILE][TILE + 1];
    const size_t base = (size_t)blockIdx.z * rows * cols;
    const int c0 = blockIdx.x * TILE, r0 = blockIdx.y * TILE;
    for (int i = threadIdx.y; i < TILE; i += ROWS) {
        const int c = c0 + i, r = r0 + threadIdx.x;
        if (c < cols && r < rows)
            tile[i][threadIdx.x] = __bfloat162float(x[base + (size_t)c * rows + r]);
    }
    __syncthreads();
    for (int i = threadIdx.y; i < TILE; i += ROWS) {
        const int r = r0 + i, c = c0 + threadIdx.x;
        if (r < rows && c < cols) {
            const float v = bias ? tile[threadIdx.x][i] + bias[r] : tile[threadIdx.x][i];
            const size_t at = base + (size_t)r * cols + c;
            y[at] = acc ? y[at] + v : v;
        }
    }
}

/* The grid of a batch of rows x cols matrices, or 0 when it cannot be launched in one. */
static int transpose_grid(dtnn_backend *be, int batches, int rows, int cols, dim3 *grid)
{
    const unsigned gx = (unsigned)((cols + TILE - 1) / TILE);
    const unsigned gy = (unsigned)((rows + TILE - 1) / TILE);
    if (gy > 65535u || batches > 65535) {
        cuda_fail(be, "bf16 channels-last copy: %d matrices of %d x %d exceed one launch's grid",
                  batches, rows, cols);
        return 0;
    }
    *grid = dim3(gx, gy, (unsigned)batches);
    return 1;
}

extern "C" void cuda_to_bf16_t(dtnn_backend *be, int batches, int rows, int cols,
                               const float *x, uint16_t *y)
{
    CU_SKIP_IF_FAILED(be);
    dim3 grid;
    if (!batches || !rows || !cols || !transpose_grid(be, batches, rows, cols, &grid))
        return;
    to_bf16_t_k<<<grid, dim3(TILE, ROWS), 0, cuda_of(be)->stream>>>(rows, cols, x,
                                                                     (__nv_bfloat16 *)y);
    cuda_ok(be, cudaGetLastError(), "bf16 channels-last kernel");
}

extern "C" void cuda_from_bf16_t(dtnn_backend *be, int batches, int rows, int cols,
                                 const uint16_t *x, const float *bias, float *y, int accumulate)
{
    CU_SKIP_IF_FAILED(be);
    dim3 grid;
    if (!batches || !rows || !cols || !transpose_grid(be, batches, rows, cols, &grid))
        return;
    from_bf16_t_k<<<grid, dim3(TILE, ROWS), 0, cuda_of(be)->stream>>>(
        rows, cols, (const __nv_bfloat16 *)x, bias, y, accumulate);
    cuda_ok(be, cudaGetLastError(), "bf16 channels-first kernel");
}
