/*
 * softmax_formulas.h — one row's softmax (max-subtracted for stability, the exponentials
 * summed in double) and its backward: the single definition that the CPU (backend/cpu/softmax.c)
 * and the CUDA backend (backend/cuda/softmax.cu) both call, so the backends cannot drift
 * apart. Which rows a thread takes is each backend's business.
 */
#ifndef DTNN_SOFTMAX_FORMULAS_H
#define DTNN_SOFTMAX_FORMULAS_H

#include <math.h>

#include "../../core/host_device.h"

/* y [cols] = softmax(x [cols]) */
static inline DTNN_HOST_DEVICE void softmax_row_forward(int cols, const float *x, float *y)
{
    float mx = x[0];
    for (int j = 1; j < cols; j++)
        mx = x[j] > mx ? x[j] : mx;
    double sum = 0.0;
    for (int j = 0; j < cols; j++) {
        y[j] = expf(x[j] - mx);
        sum += y[j];
    }
    const float inv = (float)(1.0 / sum);
    for (int j = 0; j < cols; j++)
        y[j] *= inv;
}

/* dx [cols] = y * (dy - <dy, y>), written or, with accumulate, added. */
static inline DTNN_HOST_DEVICE void softmax_row_backward(int cols, const float *y, const float *dy,
                                                         float *dx, int accumulate)
{
    double dot = 0.0;
    for (int j = 0; j < cols; j++)
        dot += (double)dy[j] * y[j];
    for (int j = 0; j < cols; j++) {
        const float g = y[j] * (dy[j] - (float)dot);
        dx[j] = accumulate ? dx[j] + g : g;
    }
}

#endif
