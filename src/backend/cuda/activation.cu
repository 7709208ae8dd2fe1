/*
 * activation.cu — the CUDA backend's activations and their derivatives, one thread per value,
 * each calling the CPU's very formula (formulas/activation_formulas.h). Compiled without FMA
 * contraction (CMakeLists.txt), so all but sigmoid and tanh (whose expf and tanhf differ from
 * the C library's by an ulp or so) give the CPU's values exactly.
 */
#include "../formulas/activation_formulas.h"
#include "cuda_launch.cuh"

/* torch: hardsigmoid as PyTorch's relu6(x + 3) / 6 (act_hardsigmoid_is_torch, decided on the
 * host), else ONNX's max(0, min(1, a x + b)). */
static __global__ void act_forward_k(act_kind kind, float a, float b, int torch, size_t n,
                                     const float *x, float *y)
{
    CU_LOOP(i, n)
    {
        const float v = x[i];
        float r = v;
        switch (kind) {
        case ACT_RELU:
            r = act_relu(v);
            break;
        case ACT_LEAKY_RELU:
            r = act_leaky_relu(v, a);
            break;
        case ACT_SIGMOID:
            r = act_sigmoid(v);
            break;
        case ACT_TANH:
            r = act_tanh(v);
            break;
        case ACT_RELU6:
            r = act_relu6(v);
            break;
        case ACT_HARDSIGMOID:
            r = torch ? act_hardsigmoid_torch(v) : act_hardsigmoid_affine(v, a, b);
            break;
        case ACT_HARDSWISH:
            r = act_hardswish(v);
            break;
        case ACT_CLAMP:
        case ACT_HARDTANH:
            r = act_clamp(v, a, b);
            break;
        }
        y[i] = r;
    }
}

static __global__ void act_backward_k(act_kind kind, float a, float b, int torch, size_t n,
                                      const float *x, const float *y, const float *dy, float *dx,
                                      int acc)
{
    CU_LOOP(i, n)
    {
        float g = 0.0f;
        switch (kind) {
        case ACT_RELU:
            g = act_relu_grad(x[i], dy[i]);
            break;
        case ACT_LEAKY_RELU:
            g = act_leaky_relu_grad(x[i], dy[i], a);
            break;
        case ACT_SIGMOID:
            g = act_sigmoid_grad(y[i], dy[i]);
            break;
        case ACT_TANH:
            g = act_tanh_grad(y[i], dy[i]);
            break;
        case ACT_RELU6:
            g = act_relu6_grad(x[i], dy[i]);
            break;
        case ACT_HARDSIGMOID:
            g = torch ? act_hardsigmoid_torch_grad(x[i], dy[i])
                      : act_hardsigmoid_affine_grad(x[i], dy[i], a, b);
            break;
        case ACT_HARDSWISH:
            g = act_hardswish_grad(x[i], dy[i]);
            break;
        case ACT_CLAMP:
            g = act_clamp_grad(x[i], dy[i], a, b);
            break;
        case ACT_HARDTANH:
            g = act_hardtanh_grad(x[i], dy[i], a, b);
            break;
        }
        dx[i] = acc ? dx[i] + g : g;
    }
}

extern "C" void cuda_act_forward(dtnn_backend *be, act_kind kind, float a, float b,
                                 size_t count, const float *x, float *y)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "activation forward kernel", act_forward_k, count, kind, a, b,
              act_hardsigmoid_is_torch(a, b), count, x, y);
}

extern "C" void cuda_act_backward(dtnn_backend *be, act_kind kind, float a, float b,
                                  size_t count, const float *x, const float *y, const float *dy,
                                  float *dx, int accumulate)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "activation backward kernel", act_backward_k, count, kind, a, b,
              act_hardsigmoid_is_torch(a, b), count, x, y, dy, dx, accumulate);
}
