/*
 * pad.cu — constant padding of each sample's C x H x W, as backend/cpu/pad.c: forward one thread
 * per output (the input value inside, the fill value outside), backward one thread per input
 * gradient value (the crop of dy, written or added); the padded shape is the CPU's
 * (formulas/pad_formulas.h).
 */
#include "../formulas/pad_formulas.h"
#include "cuda_launch.cuh"

static __global__ void pad_k(pad_geom g, int n, const float *x, float *y)
{
    const pad_out_shape o = pad_out_of(&g);
    const int K = o.K, Q = o.Q;
    const size_t PQ = (size_t)o.P * Q, HW = (size_t)g.H * g.W;
    CU_LOOP(i, (size_t)n * K * PQ)
    {
        const size_t s = i / (K * PQ);
        const int c = (int)(i / PQ % K) - g.front, h = (int)(i % PQ / Q) - g.top;
        const int w = (int)(i % Q) - g.left;
        y[i] = c < 0 || c >= g.C || h < 0 || h >= g.H || w < 0 || w >= g.W
                   ? g.value
                   : x[(s * g.C + c) * HW + (size_t)h * g.W + w];
    }
}

static __global__ void pad_grad_k(pad_geom g, int n, const float *dy, float *dx, int acc)
{
    const pad_out_shape o = pad_out_of(&g);
    const int K = o.K, Q = o.Q;
    const size_t PQ = (size_t)o.P * Q, HW = (size_t)g.H * g.W;
    CU_LOOP(i, (size_t)n * g.C * HW)
    {
        const size_t s = i / (g.C * HW);
        const int c = (int)(i / HW % g.C), h = (int)(i % HW / g.W), w = (int)(i % g.W);
        const float d = dy[(s * K + c + g.front) * PQ + (size_t)(h + g.top) * Q + w + g.left];
        dx[i] = acc ? dx[i] + d : d;
    }
}

extern "C" void cuda_pad_forward(dtnn_backend *be, const pad_geom *g, int n, const float *x,
                                 float *y)
{
    CU_SKIP_IF_FAILED(be);
    const pad_out_shape o = pad_out_of(g);
    const size_t count = (size_t)n * o.K * o.P * o.Q;
    CU_LAUNCH(be, "pad forward kernel", pad_k, count, *g, n, x, y);
}

extern "C" void cuda_pad_backward(dtnn_backend *be, const pad_geom *g, int n, const float *dy,
                                  float *dx, int accumulate)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "pad backward kernel", pad_grad_k, (size_t)n * g->C * g->H * g->W, *g, n, dy,
              dx, accumulate);
}
