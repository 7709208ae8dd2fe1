/*
 * activation.c — element-wise activations (ReLU, leaky ReLU, sigmoid, tanh, ReLU6, hard sigmoid,
 * hard swish, clamp, hardtanh) and their derivatives, as torch.nn: the derivative at exactly 0
 * is that of the negative side (ReLU'(0) = 0, leaky ReLU'(0) = slope), which is what PyTorch's
 * x > 0 test gives. ReLU6 is Hardtanh(0, 6), whose gradient PyTorch passes only strictly inside
 * (0, 6); torch.clamp's passes on the closed interval [lo, hi]. Hardsigmoid(x) =
 * relu6(x + 3) / 6 and Hardswish(x) = x * relu6(x + 3) / 6 (MobileNetV3, Howard et al. 2019),
 * computed in PyTorch's order of operations; their derivatives at the joins are PyTorch's:
 * hardsigmoid's is 1/6 strictly inside (-3, 3), hardswish's is x / 3 + 1/2 on [-3, 3] and 1
 * above. Hardsigmoid with other constants (a = alpha, b = beta: ONNX's max(0, min(1, alpha x +
 * beta)), Keras' 0.2 and 0.5 among them) is computed as written there, with derivative alpha
 * strictly inside (0, 1); PyTorch's 1/6 and 1/2 keep PyTorch's order. A NaN input gives a NaN output, as in PyTorch (so a diverging run is seen, not hidden
 * as zeros): the forward tests are written as x < 0, which is false for NaN.
 */
#include <math.h>

#include "cpu_kernels.h"

/* relu6(v + 3), NaN kept. */
static inline float hard_unit(float v)
{
    const float t = v + 3.0f;
    return t < 0.0f ? 0.0f : (t > 6.0f ? 6.0f : t);
}

void cpu_act_forward(act_kind kind, float a, float b, size_t count, const float *x, float *y)
{
    const long long n = (long long)count;
    switch (kind) {
    case ACT_RELU:
#pragma omp parallel for schedule(static) if (n > 65536)
        for (long long i = 0; i < n; i++)
            y[i] = x[i] < 0.0f ? 0.0f : x[i];
        break;
    case ACT_LEAKY_RELU:
#pragma omp parallel for schedule(static) if (n > 65536)
        for (long long i = 0; i < n; i++)
            y[i] = x[i] < 0.0f ? x[i] * a : x[i];
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
            y[i] = x[i] < 0.0f ? 0.0f : (x[i] > 6.0f ? 6.0f : x[i]);
        break;
    case ACT_HARDSIGMOID:
        if (act_hardsigmoid_is_torch(a, b)) {
#pragma omp parallel for schedule(static) if (n > 65536)
            for (long long i = 0; i < n; i++)
                y[i] = hard_unit(x[i]) / 6.0f;
        } else {
#pragma omp parallel for schedule(static) if (n > 65536)
            for (long long i = 0; i < n; i++) {
                const float t = a * x[i] + b;
                y[i] = t < 0.0f ? 0.0f : (t > 1.0f ? 1.0f : t);
            }
        }
        break;
    case ACT_HARDSWISH:
#pragma omp parallel for schedule(static) if (n > 65536)
        for (long long i = 0; i < n; i++)
            y[i] = x[i] * hard_unit(x[i]) / 6.0f;
        break;
    case ACT_CLAMP:
    case ACT_HARDTANH:
#pragma omp parallel for schedule(static) if (n > 65536)
        for (long long i = 0; i < n; i++)
            y[i] = x[i] < a ? a : (x[i] > b ? b : x[i]);
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

void cpu_act_backward(act_kind kind, float a, float b, size_t count, const float *x,
                      const float *y, const float *dy, float *dx, int accumulate)
{
    const long long n = (long long)count;
    switch (kind) {
    case ACT_RELU:
        ACT_STORE(x[i] > 0.0f ? dy[i] : 0.0f);
        break;
    case ACT_LEAKY_RELU:
        ACT_STORE(x[i] > 0.0f ? dy[i] : dy[i] * a);
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
    case ACT_HARDSIGMOID:
        if (act_hardsigmoid_is_torch(a, b))
            ACT_STORE(x[i] > -3.0f && x[i] < 3.0f ? dy[i] * (1.0f / 6.0f) : 0.0f);
        else
            ACT_STORE(a * x[i] + b > 0.0f && a * x[i] + b < 1.0f ? dy[i] * a : 0.0f);
        break;
    case ACT_HARDSWISH:
        ACT_STORE(x[i] < -3.0f ? 0.0f : (x[i] <= 3.0f ? dy[i] * (x[i] / 3.0f + 0.5f) : dy[i]));
        break;
    case ACT_CLAMP:
        ACT_STORE(x[i] >= a && x[i] <= b ? dy[i] : 0.0f);
        break;
    case ACT_HARDTANH:
        ACT_STORE(x[i] <= a || x[i] >= b ? 0.0f : dy[i]);
        break;
    }
}
