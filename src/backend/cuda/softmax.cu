/*
 * softmax.cu — row-wise softmax and its backward, as backend/cpu/softmax.c: one thread per row,
 * each running the CPU's one-row formula (formulas/softmax_formulas.h), so the results differ
 * from the CPU's only by expf's last bit. Rows are a layer's samples (a few hundred) and
 * columns its classes: not worth a cooperative reduction yet.
 */
#include "../formulas/softmax_formulas.h"
#include "cuda_launch.cuh"

static __global__ void softmax_k(int rows, int cols, const float *x, float *y)
{
    CU_LOOP(r, (size_t)rows) softmax_row_forward(cols, x + r * cols, y + r * cols);
}

static __global__ void softmax_grad_k(int rows, int cols, const float *y, const float *dy,
                                      float *dx, int acc)
{
    CU_LOOP(r, (size_t)rows)
    {
        const size_t off = r * cols;
        softmax_row_backward(cols, y + off, dy + off, dx + off, acc);
    }
}

extern "C" void cuda_softmax_forward(dtnn_backend *be, int rows, int cols, const float *x,
                                     float *y)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "softmax forward kernel", softmax_k, (size_t)rows, rows, cols, x, y);
}

extern "C" void cuda_softmax_backward(dtnn_backend *be, int rows, int cols, const float *y,
                                      const float *dy, float *dx, int accumulate)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "softmax backward kernel", softmax_grad_k, (size_t)rows, rows, cols, y, dy, dx,
              accumulate);
}
