/*
 * activation.cu — the CUDA backend's activations and their derivatives: kernels/activation.c's
 * formulas, one thread per value, the same tests (x < 0 keeps a NaN, the derivative at the
 * joins as PyTorch's). Compiled without FMA contraction (CMakeLists.txt), so all but sigmoid
 * and tanh (whose expf and tanhf differ from the C library's by an ulp or so) give the CPU's
 * values exactly.
 */
#include "cuda_launch.cuh"

static __device__ float hard_unit(float v)
{
    const float t = v + 3.0f;
    return t < 0.0f ? 0.0f : (t > 6.0f ? 6.0f : t);
}

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
            r = v < 0.0f ? 0.0f : v;
            break;
        case ACT_LEAKY_RELU:
            r = v < 0.0f ? v * a : v;
            break;
        case ACT_SIGMOID:
            r = 1.0f / (1.0f + expf(-v));
            break;
        case ACT_TANH:
            r = tanhf(v);
            break;
        case ACT_RELU6:
            r = v < 0.0f ? 0.0f : (v > 6.0f ? 6.0f : v);
            break;
        case ACT_HARDSIGMOID:
            if (torch) {
                r = hard_unit(v) / 6.0f;
            } else {
                const float t = a * v + b;
                r = t < 0.0f ? 0.0f : (t > 1.0f ? 1.0f : t);
            }
            break;
        case ACT_HARDSWISH:
            r = v * hard_unit(v) / 6.0f;
            break;
        case ACT_CLAMP:
        case ACT_HARDTANH:
            r = v < a ? a : (v > b ? b : v);
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
            g = x[i] > 0.0f ? dy[i] : 0.0f;
            break;
        case ACT_LEAKY_RELU:
            g = x[i] > 0.0f ? dy[i] : dy[i] * a;
            break;
        case ACT_SIGMOID:
            g = dy[i] * y[i] * (1.0f - y[i]);
            break;
        case ACT_TANH:
            g = dy[i] * (1.0f - y[i] * y[i]);
            break;
        case ACT_RELU6:
            g = x[i] > 0.0f && x[i] < 6.0f ? dy[i] : 0.0f;
            break;
        case ACT_HARDSIGMOID:
            if (torch)
                g = x[i] > -3.0f && x[i] < 3.0f ? dy[i] * (1.0f / 6.0f) : 0.0f;
            else
                g = a * x[i] + b > 0.0f && a * x[i] + b < 1.0f ? dy[i] * a : 0.0f;
            break;
        case ACT_HARDSWISH:
            g = x[i] < -3.0f ? 0.0f : (x[i] <= 3.0f ? dy[i] * (x[i] / 3.0f + 0.5f) : dy[i]);
            break;
        case ACT_CLAMP:
            g = x[i] >= a && x[i] <= b ? dy[i] : 0.0f;
            break;
        case ACT_HARDTANH:
            g = x[i] <= a || x[i] >= b ? 0.0f : dy[i];
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
