/*
 * activation.c — the CPU's element-wise activations (ReLU, leaky ReLU, sigmoid, tanh, ReLU6,
 * hard sigmoid, hard swish, clamp, hardtanh) and their derivatives: one loop per kind, so each
 * vectorises on its own; a kind without its own loop here takes the generic one through
 * act_value / act_gradient. All call the per-element formulas of formulas/activation_formulas.h
 * (shared with the CUDA backend, where their definitions and PyTorch's conventions at the
 * joins are given).
 */
#include "cpu_kernels.h"
#include "../formulas/activation_formulas.h"

/* _Pragma takes one string: this makes it of a pragma with a macro argument inside. */
#define ACT_PRAGMA(text) _Pragma(#text)

/* y = expr for every i, split over the threads from more than `above` values on (below, a
 * fork/join costs more than the pass; sigmoid and tanh, dearer per value, split sooner). */
#define ACT_MAP(above, expr)                                                                  \
    do {                                                                                      \
        ACT_PRAGMA(omp parallel for schedule(static) if (n > above))                          \
        for (long long i = 0; i < n; i++)                                                     \
            y[i] = (expr);                                                                    \
    } while (0)

void cpu_act_forward(act_kind kind, float a, float b, size_t count, const float *x, float *y)
{
    const long long n = (long long)count;
    switch (kind) {
    case ACT_RELU:
        ACT_MAP(65536, act_relu(x[i]));
        break;
    case ACT_LEAKY_RELU:
        ACT_MAP(65536, act_leaky_relu(x[i], a));
        break;
    case ACT_SIGMOID:
        ACT_MAP(16384, act_sigmoid(x[i]));
        break;
    case ACT_TANH:
        ACT_MAP(16384, act_tanh(x[i]));
        break;
    case ACT_RELU6:
        ACT_MAP(65536, act_relu6(x[i]));
        break;
    case ACT_HARDSIGMOID:
        if (act_hardsigmoid_is_torch(a, b))
            ACT_MAP(65536, act_hardsigmoid_torch(x[i]));
        else
            ACT_MAP(65536, act_hardsigmoid_affine(x[i], a, b));
        break;
    case ACT_HARDSWISH:
        ACT_MAP(65536, act_hardswish(x[i]));
        break;
    case ACT_CLAMP:
    case ACT_HARDTANH:
        ACT_MAP(65536, act_clamp(x[i], a, b));
        break;
    case ACT_SILU:
        ACT_MAP(16384, act_silu(x[i]));
        break;
    default: {
        const int torch = act_hardsigmoid_is_torch(a, b);
        ACT_MAP(16384, act_value(kind, x[i], a, b, torch));
        break;
    }
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
        ACT_STORE(act_relu_grad(x[i], dy[i]));
        break;
    case ACT_LEAKY_RELU:
        ACT_STORE(act_leaky_relu_grad(x[i], dy[i], a));
        break;
    case ACT_SIGMOID:
        ACT_STORE(act_sigmoid_grad(y[i], dy[i]));
        break;
    case ACT_TANH:
        ACT_STORE(act_tanh_grad(y[i], dy[i]));
        break;
    case ACT_RELU6:
        ACT_STORE(act_relu6_grad(x[i], dy[i]));
        break;
    case ACT_HARDSIGMOID:
        if (act_hardsigmoid_is_torch(a, b))
            ACT_STORE(act_hardsigmoid_torch_grad(x[i], dy[i]));
        else
            ACT_STORE(act_hardsigmoid_affine_grad(x[i], dy[i], a, b));
        break;
    case ACT_HARDSWISH:
        ACT_STORE(act_hardswish_grad(x[i], dy[i]));
        break;
    case ACT_CLAMP:
        ACT_STORE(act_clamp_grad(x[i], dy[i], a, b));
        break;
    case ACT_HARDTANH:
        ACT_STORE(act_hardtanh_grad(x[i], dy[i], a, b));
        break;
    case ACT_SILU:
        ACT_STORE(act_silu_grad(x[i], dy[i]));
        break;
    default: {
        const int torch = act_hardsigmoid_is_torch(a, b), reads_y = act_gradient_reads_output(kind);
        ACT_STORE(act_gradient(kind, x[i], reads_y ? y[i] : 0.0f, dy[i], a, b, torch));
        break;
    }
    }
}
