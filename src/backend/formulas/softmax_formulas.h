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

/* y = softmax(x) over cols values `stride` apart (1: a contiguous row; C/G x H x W: one
 * position of G channel groups, as x.view(N, G, -1).softmax(1)) */
static inline DTNN_HOST_DEVICE void softmax_row_forward(int cols, size_t stride, const float *x,
                                                        float *y)
{
    float mx = x[0];
    for (int j = 1; j < cols; j++)
        mx = x[j * stride] > mx ? x[j * stride] : mx;
    double sum = 0.0;
    for (int j = 0; j < cols; j++) {
        y[j * stride] = expf(x[j * stride] - mx);
        sum += y[j * stride];
    }
    const float inv = (float)(1.0 / sum);
    for (int j = 0; j < cols; j++)
        y[j * stride] *= inv;
}

/* dx = y * (dy - <dy, y>) over the same values, written or, with accumulate, added. */
static inline DTNN_HOST_DEVICE void softmax_row_backward(int cols, size_t stride, const float *y,
                                                         const float *dy, float *dx,
                                                         int accumulate)
{
    double dot = 0.0;
    for (int j = 0; j < cols; j++)
        dot += (double)dy[j * stride] * y[j * stride];
    for (int j = 0; j < cols; j++) {
        const size_t k = j * stride;
        const float g = y[k] * (dy[k] - (float)dot);
        dx[k] = accumulate ? dx[k] + g : g;
    }
}

#endif
