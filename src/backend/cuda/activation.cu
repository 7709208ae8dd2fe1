/*
 * activation.cu — the CUDA backend's activations and their derivatives, one thread per value,
 * each calling the CPU's very formula through act_value / act_gradient
 * (formulas/activation_formulas.h), so a new activation needs nothing here. Compiled without FMA
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
        y[i] = act_value(kind, x[i], a, b, torch);
    }
}

static __global__ void act_backward_k(act_kind kind, float a, float b, int torch, size_t n,
                                      const float *x, const float *y, const float *dy, float *dx,
                                      int acc)
{
    const int reads_y = act_gradient_reads_output(kind);
    CU_LOOP(i, n)
    {
        const float g = act_gradient(kind, x[i], reads_y ? y[i] : 0.0f, dy[i], a, b, torch);
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
