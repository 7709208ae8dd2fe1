/*
 * softmax.cu — softmax over the middle axis of [rows, cols, inner] and its backward, as
 * backend/cpu/softmax.c: one thread per (row, inner position), each running the CPU's one-row
 * formula (formulas/softmax_formulas.h), so the results differ from the CPU's only by expf's
 * last bit. Rows are a layer's samples (a few hundred) and columns its classes or a split
 * attention's radix: not worth a cooperative reduction yet.
 */
#include "../formulas/softmax_formulas.h"
#include "cuda_launch.cuh"

/* Where line t (a row and an inner position) starts. */
static __device__ size_t line_start(size_t t, int cols, int inner)
{
    return (t / (size_t)inner) * (size_t)cols * (size_t)inner + t % (size_t)inner;
}

static __global__ void softmax_k(size_t lines, int cols, int inner, const float *x, float *y)
{
    CU_LOOP(t, lines)
    {
        const size_t off = line_start(t, cols, inner);
        softmax_row_forward(cols, (size_t)inner, x + off, y + off);
    }
}

static __global__ void softmax_grad_k(size_t lines, int cols, int inner, const float *y,
                                      const float *dy, float *dx, int acc)
{
    CU_LOOP(t, lines)
    {
        const size_t off = line_start(t, cols, inner);
        softmax_row_backward(cols, (size_t)inner, y + off, dy + off, dx + off, acc);
    }
}

extern "C" void cuda_softmax_forward(dtnn_backend *be, int rows, int cols, int inner,
                                     const float *x, float *y)
{
    CU_SKIP_IF_FAILED(be);
    const size_t lines = (size_t)rows * (size_t)inner;
    CU_LAUNCH(be, "softmax forward kernel", softmax_k, lines, lines, cols, inner, x, y);
}

extern "C" void cuda_softmax_backward(dtnn_backend *be, int rows, int cols, int inner,
                                      const float *y, const float *dy, float *dx, int accumulate)
{
    CU_SKIP_IF_FAILED(be);
    const size_t lines = (size_t)rows * (size_t)inner;
    CU_LAUNCH(be, "softmax backward kernel", softmax_grad_k, lines, lines, cols, inner, y, dy,
              dx, accumulate);
}
