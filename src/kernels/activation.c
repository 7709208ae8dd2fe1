/*
 * activation.c — element-wise activations (ReLU, leaky ReLU, sigmoid, tanh, ReLU6) and their
 * derivatives, as torch.nn: the derivative at exactly 0 is that of the negative side
 * (ReLU'(0) = 0, leaky ReLU'(0) = slope), which is what PyTorch's x > 0 test gives. ReLU6 is
 * Hardtanh(0, 6), whose gradient PyTorch passes only strictly inside (0, 6).
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
    case ACT_RELU6:
#pragma omp parallel for schedule(static) if (n > 65536)
        for (long long i = 0; i < n; i++)
            y[i] = x[i] > 0.0f ? (x[i] < 6.0f ? x[i] : 6.0f) : 0.0f;
        break;
    }
}

/* dx = g or dx += g, with the branch hoisted out of the loop so both loops vectorise. */
#define ACT_STORE(expr)                                                                       \
    do {                                                                                      \
        if (accumulate) {                                                                     \
            _Pragma("omp parallel for schedule(static) if (n > 65536)")                       \
            for (long long i = 0; i < n; i++)                                                 \
                dx[i] += (expr);                                                              \
        } else {                                                                              \
            _Pragma("omp parallel for schedule(static) if (n > 65536)")                       \
            for (long long i = 0; i < n; i++)                                                 \
                dx[i] = (expr);                                                               \
        }                                                                                     \
    } while (0)

void cpu_act_backward(act_kind kind, float param, size_t count, const float *x, const float *y,
                      const float *dy, float *dx, int accumulate)
{
    const long long n = (long long)count;
    switch (kind) {
    case ACT_RELU:
        ACT_STORE(x[i] > 0.0f ? dy[i] : 0.0f);
        break;
    case ACT_LEAKY_RELU:
        ACT_STORE(x[i] > 0.0f ? dy[i] : dy[i] * param);
        break;
    case ACT_SIGMOID:
        ACT_STORE(dy[i] * y[i] * (1.0f - y[i]));
        break;
    case ACT_TANH:
        ACT_STORE(dy[i] * (1.0f - y[i] * y[i]));
        break;
    case ACT_RELU6:
        ACT_STORE(x[i] > 0.0f && x[i] < 6.0f ? dy[i] : 0.0f);
        break;
    }
}
