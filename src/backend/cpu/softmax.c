/*
 * softmax.c — the CPU's row-wise softmax and its backward, rows in order around the one-row
 * formulas of formulas/softmax_formulas.h (shared with the CUDA backend).
 */
#include "cpu_kernels.h"
#include "../formulas/softmax_formulas.h"

void cpu_softmax_forward(int rows, int cols, const float *x, float *y)
{
    for (int r = 0; r < rows; r++)
        softmax_row_forward(cols, x + (size_t)r * cols, y + (size_t)r * cols);
}

void cpu_softmax_backward(int rows, int cols, const float *y, const float *dy, float *dx,
                          int accumulate)
{
    for (int r = 0; r < rows; r++) {
        const size_t off = (size_t)r * cols;
        softmax_row_backward(cols, y + off, dy + off, dx + off, accumulate);
    }
}
