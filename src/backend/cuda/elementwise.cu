/*
 * elementwise.cu — the CUDA backend's element-wise operations, as backend/cpu/elementwise.c: the
 * multi-input add (fused ReLU) and its backward, strided row copies (concat, flatten, the
 * engine's y += x), fill, the int64 counter add, dropout with the CPU's counter-based masks
 * (formulas/elementwise_formulas.h, compiled for the device), the finite check, and the
 * linear layer's bias and bias gradient. One thread per value, each value computed by the
 * CPU's expression in the CPU's order (the add's passes one input at a time, the bias
 * gradient's rows in order), so the results are the CPU's bit for bit.
 */
#include "../formulas/elementwise_formulas.h"
#include "cuda_launch.cuh"

static __global__ void add2_k(size_t n, const float *a, const float *b, int relu, float *y)
{
    CU_LOOP(i, n)
    {
        y[i] = add_relu_if(a[i] + b[i], relu);
    }
}

extern "C" void cuda_add_forward(dtnn_backend *be, size_t count, int n_in,
                                 const float *const *x, int relu, float *y)
{
    CU_SKIP_IF_FAILED(be);
    /* ((x0 + x1) + x2) + ..., the ReLU on the last pass: the CPU's passes */
    CU_LAUNCH(be, "add forward kernel", add2_k, count, count, x[0], x[1], relu && n_in == 2, y);
    for (int k = 2; k < n_in; k++)
        CU_LAUNCH(be, "add forward kernel", add2_k, count, count, (const float *)y, x[k],
                  relu && k == n_in - 1, y);
}

static __global__ void add_grad_k(size_t n, const float *y, const float *dy, float *dx, int acc)
{
    CU_LOOP(i, n)
    {
        const float g = y ? act_relu_grad(y[i], dy[i]) : dy[i];
        dx[i] = acc ? dx[i] + g : g;
    }
}

extern "C" void cuda_add_backward(dtnn_backend *be, size_t count, const float *y,
                                  const float *dy, int n_out, float *const *dx,
                                  const int *accumulate)
{
    CU_SKIP_IF_FAILED(be);
    /* in input order, one launch each: when two inputs are one producer the first writes and
     * the second adds, as on the CPU */
    for (int k = 0; k < n_out; k++)
        if (dx[k])
            CU_LAUNCH(be, "add backward kernel", add_grad_k, count, count, y, dy, dx[k],
                      accumulate[k]);
}

static __global__ void add_rows_k(size_t rows, size_t cols, float *dst, size_t ld_dst,
                                  const float *src, size_t ld_src)
{
    CU_LOOP(i, rows * cols)
    {
        const size_t r = i / cols, c = i % cols;
        dst[r * ld_dst + c] += src[r * ld_src + c];
    }
}

extern "C" void cuda_copy_rows(dtnn_backend *be, size_t rows, size_t cols, float *dst,
                               size_t ld_dst, const float *src, size_t ld_src, int accumulate)
{
    CU_SKIP_IF_FAILED(be);
    if (!rows || !cols)
        return;
    if (accumulate) {
        CU_LAUNCH(be, "copy_rows (add) kernel", add_rows_k, rows * cols, rows, cols, dst, ld_dst,
                  src, ld_src);
        return;
    }
    cuda_ok(be, cudaMemcpy2DAsync(dst, ld_dst * sizeof(float), src, ld_src * sizeof(float),
                                  cols * sizeof(float), rows, cudaMemcpyDeviceToDevice,
                                  cuda_of(be)->stream),
            "cudaMemcpy2DAsync (copy_rows)");
}

static __global__ void fill_k(float *y, size_t n, float v)
{
    CU_LOOP(i, n) y[i] = v;
}

extern "C" void cuda_fill(dtnn_backend *be, float *y, size_t count, float value)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "fill kernel", fill_k, count, y, count, value);
}

static __global__ void add_i64_k(int64_t *p, int64_t v) { *p += v; }

extern "C" void cuda_add_i64(dtnn_backend *be, int64_t *p, int64_t value)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "add_i64 kernel", add_i64_k, 1, p, value);
}

static __global__ void dropout_k(size_t n, float p, float scale, uint64_t seed, uint64_t stream,
                                 uint64_t base, const float *x, float *y, uint8_t *mask)
{
    CU_LOOP(i, n)
    {
        const uint8_t keep = dropout_keep(seed, stream, base + i, p);
        mask[i] = keep;
        y[i] = dropout_apply(keep, x[i], scale);
    }
}

extern "C" void cuda_dropout_forward(dtnn_backend *be, size_t count, float p, float scale,
                                     uint64_t seed, uint64_t stream, uint64_t base,
                                     const float *x, float *y, uint8_t *mask)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "dropout forward kernel", dropout_k, count, count, p, scale, seed, stream,
              base, x, y, mask);
}

static __global__ void dropout_grad_k(size_t n, float scale, const uint8_t *mask,
                                      const float *dy, float *dx, int acc)
{
    CU_LOOP(i, n)
    {
        const float g = dropout_apply(mask[i], dy[i], scale);
        dx[i] = acc ? dx[i] + g : g;
    }
}

extern "C" void cuda_dropout_backward(dtnn_backend *be, size_t count, float scale,
                                      const uint8_t *mask, const float *dy, float *dx,
                                      int accumulate)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "dropout backward kernel", dropout_grad_k, count, count, scale, mask, dy, dx,
              accumulate);
}

/* A count per block, added to the total once: integer atomics, so the result is exact. */
static __global__ void nonfinite_k(const float *x, size_t n, unsigned long long *total)
{
    __shared__ unsigned long long block;
    if (threadIdx.x == 0)
        block = 0;
    __syncthreads();
    unsigned long long mine = 0;
    CU_LOOP(i, n) mine += !isfinite(x[i]);
    if (mine)
        atomicAdd(&block, mine);
    __syncthreads();
    if (threadIdx.x == 0 && block)
        atomicAdd(total, block);
}

extern "C" size_t cuda_count_nonfinite(dtnn_backend *be, const float *x, size_t n)
{
    cuda_state *s = cuda_of(be);
    unsigned long long bad = 0;
    if (s->failed || !n)
        return 0;
    if (!cuda_ok(be, cudaMemsetAsync(s->count, 0, sizeof *s->count, s->stream),
                 "cudaMemsetAsync (nonfinite counter)"))
        return 0;
    CU_LAUNCH(be, "count_nonfinite kernel", nonfinite_k, n, x, n, s->count);
    if (!cuda_ok(be, cudaMemcpyAsync(&bad, s->count, sizeof bad, cudaMemcpyDeviceToHost,
                                     s->stream), "cudaMemcpyAsync (nonfinite count)") ||
        !cuda_ok(be, cudaStreamSynchronize(s->stream), "cudaStreamSynchronize (nonfinite)"))
        return 0;
    return (size_t)bad;
}

static __global__ void bias_rows_k(int n, int out, const float *b, float *y)
{
    CU_LOOP(i, (size_t)n * out) y[i] += b[i % out];
}

extern "C" void cuda_bias_rows(dtnn_backend *be, int n, int out, const float *b, float *y)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "linear bias kernel", bias_rows_k, (size_t)n * out, n, out, b, y);
}

/* One thread per column, over the rows in order: the CPU's sums. */
static __global__ void bias_rows_grad_k(int n, int out, const float *dy, float *db)
{
    CU_LOOP(o, (size_t)out)
    {
        float acc = db[o];
        for (int i = 0; i < n; i++)
            acc += dy[(size_t)i * out + o];
        db[o] = acc;
    }
}

extern "C" void cuda_bias_rows_grad(dtnn_backend *be, int n, int out, const float *dy,
                                    float *db)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "linear bias gradient kernel", bias_rows_grad_k, (size_t)out, n, out, dy, db);
}
