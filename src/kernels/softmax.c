/*
 * softmax.c — row-wise softmax (max-subtracted for stability) and its backward.
 */
#include <math.h>

#include "cpu_kernels.h"

void cpu_softmax_forward(int rows, int cols, const float *x, float *y)
{
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * cols;
        float *yr = y + (size_t)r * cols;
        float mx = xr[0];
        for (int j = 1; j < cols; j++)
            mx = xr[j] > mx ? xr[j] : mx;
        double sum = 0.0;
        for (int j = 0; j < cols; j++) {
            yr[j] = expf(xr[j] - mx);
            sum += yr[j];
        }
        float inv = (float)(1.0 / sum);
        for (int j = 0; j < cols; j++)
            yr[j] *= inv;
    }
}

void cpu_softmax_backward(int rows, int cols, const float *y, const float *dy, float *dx,
                          int accumulate)
{
    for (int r = 0; r < rows; r++) {
        const float *yr = y + (size_t)r * cols, *dyr = dy + (size_t)r * cols;
        float *dxr = dx + (size_t)r * cols;
        double dot = 0.0;
        for (int j = 0; j < cols; j++)
            dot += (double)dyr[j] * yr[j];
        for (int j = 0; j < cols; j++) {
            float g = yr[j] * (dyr[j] - (float)dot);
            dxr[j] = accumulate ? dxr[j] + g : g;
        }
    }
}
