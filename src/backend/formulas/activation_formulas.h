/*
 * activation_formulas.h — each activation's value and derivative for one element, the single
 * definition that the CPU loops (backend/cpu/activation.c) and the CUDA kernels
 * (backend/cuda/activation.cu) both call, so the backends cannot drift apart. No loops here:
 * how the elements are walked is each backend's business.
 *
 * As torch.nn: the derivative at exactly 0 is that of the negative side (ReLU'(0) = 0, leaky
 * ReLU'(0) = slope), which is what PyTorch's x > 0 test gives. ReLU6 is Hardtanh(0, 6), whose
 * gradient PyTorch passes only strictly inside (0, 6); torch.clamp's passes on the closed
 * interval [lo, hi]. Hardsigmoid(x) = relu6(x + 3) / 6 and Hardswish(x) = x * relu6(x + 3) / 6
 * (MobileNetV3, Howard et al. 2019), computed in PyTorch's order of operations; their
 * derivatives at the joins are PyTorch's: hardsigmoid's is 1/6 strictly inside (-3, 3),
 * hardswish's is x / 3 + 1/2 on [-3, 3] and 1 above. Hardsigmoid with other constants
 * (a = alpha, b = beta: ONNX's max(0, min(1, alpha x + beta)), Keras' 0.2 and 0.5 among them)
 * is computed as written there, with derivative alpha strictly inside (0, 1); which of the two
 * applies is act_hardsigmoid_is_torch's decision (backend.h). A NaN input gives a NaN output,
 * as in PyTorch (so a diverging run is seen, not hidden as zeros): the forward tests are
 * written as x < 0, which is false for NaN.
 *
 * Each function is one expression in the order the CPU has always computed it: the CPU's
 * results are bit-identical to what they were, and the CUDA kernels (no FMA contraction) give
 * them exactly, but for sigmoid and tanh, whose expf and tanhf differ by an ulp or so.
 */
#ifndef DTNN_ACTIVATION_FORMULAS_H
#define DTNN_ACTIVATION_FORMULAS_H

#include <math.h>

#include "../../core/host_device.h"
#include "../backend.h"

/* relu6(v + 3), NaN kept. */
static inline DTNN_HOST_DEVICE float act_hard_unit(float v)
{
    const float t = v + 3.0f;
    return t < 0.0f ? 0.0f : (t > 6.0f ? 6.0f : t);
}

static inline DTNN_HOST_DEVICE float act_relu(float x) { return x < 0.0f ? 0.0f : x; }

static inline DTNN_HOST_DEVICE float act_leaky_relu(float x, float slope)
{
    return x < 0.0f ? x * slope : x;
}

static inline DTNN_HOST_DEVICE float act_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

static inline DTNN_HOST_DEVICE float act_tanh(float x) { return tanhf(x); }

static inline DTNN_HOST_DEVICE float act_relu6(float x)
{
    return x < 0.0f ? 0.0f : (x > 6.0f ? 6.0f : x);
}

static inline DTNN_HOST_DEVICE float act_hardsigmoid_torch(float x)
{
    return act_hard_unit(x) / 6.0f;
}

static inline DTNN_HOST_DEVICE float act_hardsigmoid_affine(float x, float alpha, float beta)
{
    const float t = alpha * x + beta;
    return t < 0.0f ? 0.0f : (t > 1.0f ? 1.0f : t);
}

static inline DTNN_HOST_DEVICE float act_hardswish(float x)
{
    return x * act_hard_unit(x) / 6.0f;
}

/* Clamp and Hardtanh share the forward; only their derivatives at the bounds differ. */
static inline DTNN_HOST_DEVICE float act_clamp(float x, float lo, float hi)
{
    return x < lo ? lo : (x > hi ? hi : x);
}

/* GELU as PyTorch computes it (aten's GeluKernel, float): exact, x Phi(x) = 0.5 x (1 +
 * erf(x / sqrt 2)); tanh form, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))). */
#define ACT_GELU_SQRT1_2 0.70710678118654752440f
#define ACT_GELU_BETA 0.79788456080286535588f   /* sqrt(2 / pi) */
#define ACT_GELU_KAPPA 0.044715f
#define ACT_GELU_ALPHA 0.39894228040143267794f  /* 1 / sqrt(2 pi) */

static inline DTNN_HOST_DEVICE float act_gelu(float x)
{
    return x * 0.5f * (1.0f + erff(x * ACT_GELU_SQRT1_2));
}

static inline DTNN_HOST_DEVICE float act_erf(float x) { return erff(x); }
static inline DTNN_HOST_DEVICE float act_sqrt(float x) { return sqrtf(x); }

/* SiLU (swish, EfficientNet's activation) as PyTorch's kernel: x / (1 + exp(-x)). */
static inline DTNN_HOST_DEVICE float act_silu(float x) { return x / (1.0f + expf(-x)); }

static inline DTNN_HOST_DEVICE float act_gelu_tanh(float x)
{
    const float inner = ACT_GELU_BETA * (x + ACT_GELU_KAPPA * (x * x * x));
    return 0.5f * x * (1.0f + tanhf(inner));
}

/* The derivatives: dy times the activation's slope at x (or, where that is cheaper and as
 * PyTorch does, at its output y). */

static inline DTNN_HOST_DEVICE float act_relu_grad(float x, float dy)
{
    return x > 0.0f ? dy : 0.0f;
}

static inline DTNN_HOST_DEVICE float act_leaky_relu_grad(float x, float dy, float slope)
{
    return x > 0.0f ? dy : dy * slope;
}

static inline DTNN_HOST_DEVICE float act_sigmoid_grad(float y, float dy)
{
    return dy * y * (1.0f - y);
}

static inline DTNN_HOST_DEVICE float act_tanh_grad(float y, float dy)
{
    return dy * (1.0f - y * y);
}

/* PyTorch's sqrt backward: dy / (2 y), from the output (infinite at 0, as PyTorch's) */
static inline DTNN_HOST_DEVICE float act_sqrt_grad(float y, float dy) { return dy / (2.0f * y); }

static inline DTNN_HOST_DEVICE float act_relu6_grad(float x, float dy)
{
    return x > 0.0f && x < 6.0f ? dy : 0.0f;
}

static inline DTNN_HOST_DEVICE float act_hardsigmoid_torch_grad(float x, float dy)
{
    return x > -3.0f && x < 3.0f ? dy * (1.0f / 6.0f) : 0.0f;
}

static inline DTNN_HOST_DEVICE float act_hardsigmoid_affine_grad(float x, float dy, float alpha,
                                                                 float beta)
{
    return alpha * x + beta > 0.0f && alpha * x + beta < 1.0f ? dy * alpha : 0.0f;
}

static inline DTNN_HOST_DEVICE float act_hardswish_grad(float x, float dy)
{
    return x < -3.0f ? 0.0f : (x <= 3.0f ? dy * (x / 3.0f + 0.5f) : dy);
}

static inline DTNN_HOST_DEVICE float act_clamp_grad(float x, float dy, float lo, float hi)
{
    return x >= lo && x <= hi ? dy : 0.0f;
}

static inline DTNN_HOST_DEVICE float act_hardtanh_grad(float x, float dy, float lo, float hi)
{
    return x <= lo || x >= hi ? 0.0f : dy;
}

/* GELU's slopes as PyTorch's backward computes them: exact, Phi(x) + x phi(x); tanh form,
 * 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2 / pi) (1 + 3 0.044715 x^2), t = tanh(inner). */
static inline DTNN_HOST_DEVICE float act_gelu_grad(float x, float dy)
{
    const float cdf = 0.5f * (1.0f + erff(x * ACT_GELU_SQRT1_2));
    const float pdf = expf(-0.5f * x * x) * ACT_GELU_ALPHA;
    return dy * (cdf + x * pdf);
}

/* SiLU's slope as PyTorch's backward: s (1 + x (1 - s)), s = sigmoid(x) */
static inline DTNN_HOST_DEVICE float act_silu_grad(float x, float dy)
{
    const float s = 1.0f / (1.0f + expf(-x));
    return dy * s * (1.0f + x * (1.0f - s));
}

/* erf's slope as PyTorch's backward: 2 / sqrt(pi) exp(-x^2) */
#define ACT_ERF_SLOPE 1.12837916709551257390f
static inline DTNN_HOST_DEVICE float act_erf_grad(float x, float dy)
{
    return ACT_ERF_SLOPE * expf(-(x * x)) * dy;
}

static inline DTNN_HOST_DEVICE float act_gelu_tanh_grad(float x, float dy)
{
    const float x_sq = x * x, x_cube = x_sq * x;
    const float t = tanhf(ACT_GELU_BETA * (x + ACT_GELU_KAPPA * x_cube));
    const float left = 0.5f * x, right = 1.0f + t;
    const float left_derivative = 0.5f * right;
    const float right_derivative =
        (1.0f - t * t) * (ACT_GELU_BETA * (1.0f + 3.0f * ACT_GELU_KAPPA * x_sq));
    return dy * (left_derivative + left * right_derivative);
}

/* Any activation's value and gradient by its kind: the one dispatch that the CUDA kernels and
 * the CPU's loop for the less common kinds call (the CPU gives its common kinds loops of their
 * own, which vectorise). torch: hardsigmoid in PyTorch's form (act_hardsigmoid_is_torch, asked
 * once per call, not per element). A kind missing here fails the build (-Wswitch). */
static inline DTNN_HOST_DEVICE float act_value(act_kind kind, float x, float a, float b,
                                               int torch)
{
    switch (kind) {
    case ACT_RELU:
        return act_relu(x);
    case ACT_LEAKY_RELU:
        return act_leaky_relu(x, a);
    case ACT_SIGMOID:
        return act_sigmoid(x);
    case ACT_TANH:
        return act_tanh(x);
    case ACT_RELU6:
        return act_relu6(x);
    case ACT_HARDSIGMOID:
        return torch ? act_hardsigmoid_torch(x) : act_hardsigmoid_affine(x, a, b);
    case ACT_HARDSWISH:
        return act_hardswish(x);
    case ACT_CLAMP:
    case ACT_HARDTANH:
        return act_clamp(x, a, b);
    case ACT_GELU:
        return act_gelu(x);
    case ACT_GELU_TANH:
        return act_gelu_tanh(x);
    case ACT_ERF:
        return act_erf(x);
    case ACT_SQRT:
        return act_sqrt(x);
    case ACT_SILU:
        return act_silu(x);
    }
    return x;
}

/* Whether a kind's gradient is computed from its output y rather than its input x. */
static inline DTNN_HOST_DEVICE int act_gradient_reads_output(act_kind kind)
{
    return kind == ACT_SIGMOID || kind == ACT_TANH || kind == ACT_SQRT;
}

/* The gradient at the input from dy; x is the input, y the output (read only by the kinds of
 * act_gradient_reads_output; pass 0 for the others). */
static inline DTNN_HOST_DEVICE float act_gradient(act_kind kind, float x, float y, float dy,
                                                  float a, float b, int torch)
{
    switch (kind) {
    case ACT_RELU:
        return act_relu_grad(x, dy);
    case ACT_LEAKY_RELU:
        return act_leaky_relu_grad(x, dy, a);
    case ACT_SIGMOID:
        return act_sigmoid_grad(y, dy);
    case ACT_TANH:
        return act_tanh_grad(y, dy);
    case ACT_RELU6:
        return act_relu6_grad(x, dy);
    case ACT_HARDSIGMOID:
        return torch ? act_hardsigmoid_torch_grad(x, dy) : act_hardsigmoid_affine_grad(x, dy, a, b);
    case ACT_HARDSWISH:
        return act_hardswish_grad(x, dy);
    case ACT_CLAMP:
        return act_clamp_grad(x, dy, a, b);
    case ACT_HARDTANH:
        return act_hardtanh_grad(x, dy, a, b);
    case ACT_GELU:
        return act_gelu_grad(x, dy);
    case ACT_GELU_TANH:
        return act_gelu_tanh_grad(x, dy);
    case ACT_ERF:
        return act_erf_grad(x, dy);
    case ACT_SQRT:
        return act_sqrt_grad(y, dy);
    case ACT_SILU:
        return act_silu_grad(x, dy);
    }
    return 0.0f;
}

#endif
