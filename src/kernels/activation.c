/*
 * activation.c — element-wise activations (ReLU, leaky ReLU, sigmoid, tanh) and their
 * derivatives, as torch.nn: the derivative at exactly 0 is that of the negative side
 * (ReLU'(0) = 0, leaky ReLU'(0) = slope), which is what PyTorch's x > 0 test gives.
 */
#include <math.h>

#include "cpu_kernels.h"

void cpu_act_forward(act_kind kind, float param, size_t count, const float *x, float *y)
{
    const long long n = (long long)count;
    switch (kind) {
    case ACT_RELU:
#pragma omp parallel for schedule(static) if (n > 65536)
        for (long long i = 0; i < n; i++)
            y[i] = x[i] > 0.0f ? x[i] : 0.0f;
        break;
    case ACT_LEAKY_RELU:
#pragma omp parallel for schedule(static) if (n > 65536)
        for (long long i = 0; i < n; i++)
            y[i] = x[i] > 0.0f ? x[i] : x[i] * param;
        break;
    case ACT_SIGMOID:
#pragma omp parallel for schedule(static) if (n > 16384)
        for (long long i = 0; i < n; i++)
            y[i] = 1.0f / (1.0f + expf(-x[i]));
        break;
    case ACT_TANH:
#pragma omp parallel for schedule(static) if (n > 16384)
        for (long long i = 0; i < n; i++)
            y[i] = tanhf(x[i]);
        break;
    }
}

void cpu_act_backward(act_kind kind, float param, size_t count, const float *x, const float *y,
                      const float *dy, float *dx, int accumulate)
{
    const long long n = (long long)count;
    switch (kind) {
    case ACT_RELU:
#pragma omp parallel for schedule(static) if (n > 65536)
        for (long long i = 0; i < n; i++) {
            float g = x[i] > 0.0f ? dy[i] : 0.0f;
            dx[i] = accumulate ? dx[i] + g : g;
        }
        break;
    case ACT_LEAKY_RELU:
#pragma omp parallel for schedule(static) if (n > 65536)
        for (long long i = 0; i < n; i++) {
            float g = x[i] > 0.0f ? dy[i] : dy[i] * param;
            dx[i] = accumulate ? dx[i] + g : g;
        }
        break;
    case ACT_SIGMOID:
#pragma omp parallel for schedule(static) if (n > 65536)
        for (long long i = 0; i < n; i++) {
            float g = dy[i] * y[i] * (1.0f - y[i]);
            dx[i] = accumulate ? dx[i] + g : g;
        }
        break;
    case ACT_TANH:
#pragma omp parallel for schedule(static) if (n > 65536)
        for (long long i = 0; i < n; i++) {
            float g = dy[i] * (1.0f - y[i] * y[i]);
            dx[i] = accumulate ? dx[i] + g : g;
        }
        break;
    }
}
