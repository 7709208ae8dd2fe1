/*
 * linear.c — the CPU's fully connected layer, y = x W^T + b (torch.nn.Linear, weight [out,
 * in]): the products on BLAS (gemm_blas.c), the bias added and its gradient summed sample by
 * sample in float, in sample order.
 */
#include "cpu_kernels.h"

void cpu_linear_forward(int n, int out, int in, const float *x, const float *w, const float *b,
                        float *y)
{
    cpu_gemm(0, 1, n, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
    if (!b)
        return;
    for (int i = 0; i < n; i++)
        for (int o = 0; o < out; o++)
            y[(size_t)i * out + o] += b[o];
}

void cpu_linear_backward(int n, int out, int in, const float *x, const float *dy,
                         const float *w, float *dw, float *db, float *dx, int accumulate)
{
    if (dw)     /* NULL: a frozen weight (--freeze) */
        cpu_gemm(1, 0, out, in, n, 1.0f, dy, out, x, in, 1.0f, dw, in);
    if (db)
        for (int i = 0; i < n; i++)
            for (int o = 0; o < out; o++)
                db[o] += dy[(size_t)i * out + o];
    if (dx)
        cpu_gemm(0, 0, n, in, out, 1.0f, dy, out, w, in, accumulate ? 1.0f : 0.0f, dx, in);
}
