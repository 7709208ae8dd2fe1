/*
 * softmax.c — the CPU's softmax over the middle axis of [rows, cols, inner] and its backward,
 * in order around the one-row formulas of formulas/softmax_formulas.h (shared with the CUDA
 * backend). inner = 1 is the row-wise softmax of a classifier; inner > 1 normalises across
 * channel groups (a split attention's radix) at each of the inner positions.
 */
#include "cpu_kernels.h"
#include "../formulas/softmax_formulas.h"

void cpu_softmax_forward(int rows, int cols, int inner, const float *x, float *y)
{
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < inner; j++) {
            const size_t off = (size_t)r * cols * inner + (size_t)j;
            softmax_row_forward(cols, (size_t)inner, x + off, y + off);
        }
}

void cpu_softmax_backward(int rows, int cols, int inner, const float *y, const float *dy,
                          float *dx, int accumulate)
{
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < inner; j++) {
            const size_t off = (size_t)r * cols * inner + (size_t)j;
            softmax_row_backward(cols, (size_t)inner, y + off, dy + off, dx + off, accumulate);
        }
}
