/*
 * reduce.cu — sums, means and L2 norms over the channels or over each plane, on the formulas the CPU's
 * loops call (formulas/reduce_formulas.h): one thread per output forward, one per input value
 * backward, so the results are the CPU's bit for bit.
 */
#include "../formulas/reduce_formulas.h"
#include "cuda_launch.cuh"

static __global__ void reduce_k(reduce_geom g, int n, const float *x, float *y)
{
    const size_t in = (size_t)g.C * g.HW, outs = g.over_channels ? (size_t)g.HW : (size_t)g.C;
    CU_LOOP(o, (size_t)n * outs)
    {
        y[o] = reduce_value(&g, x + o / outs * in, (int)(o % outs));
    }
}

static __global__ void reduce_grad_k(reduce_geom g, int n, const float *x, const float *y,
                                     const float *dy, float *dx, int acc)
{
    const size_t in = (size_t)g.C * g.HW, outs = g.over_channels ? (size_t)g.HW : (size_t)g.C;
    CU_LOOP(e, (size_t)n * in)
    {
        const size_t sample = e / in, at = e % in;
        const size_t j = g.over_channels ? at % (size_t)g.HW : at / (size_t)g.HW;
        const size_t o = sample * outs + j;
        const float v = reduce_grad(&g, dy[o], g.l2 ? x[e] : 0.0f, g.l2 ? y[o] : 0.0f);
        dx[e] = acc ? dx[e] + v : v;
    }
}

extern "C" void cuda_reduce_forward(dtnn_backend *be, const reduce_geom *g, int n,
                                    const float *x, float *y)
{
    CU_SKIP_IF_FAILED(be);
    const size_t outs = g->over_channels ? (size_t)g->HW : (size_t)g->C;
    CU_LAUNCH(be, "reduce forward kernel", reduce_k, (size_t)n * outs, *g, n, x, y);
}

extern "C" void cuda_reduce_backward(dtnn_backend *be, const reduce_geom *g, int n,
                                     const float *x, const float *y, const float *dy, float *dx,
                                     int accumulate)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "reduce backward kernel", reduce_grad_k, (size_t)n * g->C * g->HW, *g, n, x, y,
              dy, dx, accumulate);
}
