/*
 * pool.cu — max and average pooling, forward and backward, on the window, tie and divisor
 * formulas the CPU's loops call too (formulas/pool_formulas.h).
 * Forward: one thread per output. Backward gathers instead of scattering: one thread per input
 * value sums the outputs whose window holds it (max: whose argmax is it) in increasing output
 * order, which is the order in which the CPU's serial scatter adds them, so the results are
 * the CPU's bit for bit and need no atomics (whose order, and so whose rounding, would vary).
 */
#include <math.h>

#include "../formulas/pool_formulas.h"
#include "cuda_launch.cuh"

static __global__ void maxpool_k(pool_geom g, int n, const float *x, float *y, int32_t *argmax)
{
    const size_t PQ = (size_t)g.P * g.Q;
    CU_LOOP(o, (size_t)n * g.C * PQ)
    {
        const size_t pl = o / PQ;
        const int p = (int)(o % PQ) / g.Q, q = (int)(o % PQ) % g.Q;
        y[o] = pool_max_window(&g, x + pl * g.H * g.W, p, q, &argmax[o]);
    }
}

static __global__ void maxpool_grad_k(pool_geom g, int n, const float *dy,
                                      const int32_t *argmax, float *dx, int acc)
{
    const size_t HW = (size_t)g.H * g.W, PQ = (size_t)g.P * g.Q;
    CU_LOOP(e, (size_t)n * g.C * HW)
    {
        const size_t pl = e / HW;
        const int32_t idx = (int32_t)(e % HW);
        const int h = idx / g.W, w = idx % g.W;
        const float *dyp = dy + pl * PQ;
        const int32_t *ap = argmax + pl * PQ;
        int p0, p1, q0, q1;
        pool_candidates(h, g.kh, g.dil_h, g.stride_h, g.pad_h, g.P, &p0, &p1);
        pool_candidates(w, g.kw, g.dil_w, g.stride_w, g.pad_w, g.Q, &q0, &q1);
        float sum = acc ? dx[e] : 0.0f;
        for (int p = p0; p <= p1; p++)
            for (int q = q0; q <= q1; q++)
                if (ap[p * g.Q + q] == idx)
                    sum += dyp[p * g.Q + q];
        dx[e] = sum;
    }
}

static __global__ void avgpool_k(pool_geom g, int n, const float *x, float *y)
{
    const size_t PQ = (size_t)g.P * g.Q;
    CU_LOOP(o, (size_t)n * g.C * PQ)
    {
        const size_t pl = o / PQ;
        const int p = (int)(o % PQ) / g.Q, q = (int)(o % PQ) % g.Q;
        const float *xp = x + pl * g.H * g.W;
        int h0, h1, w0, w1;
        const float divisor = pool_avg_window(&g, p, q, &h0, &h1, &w0, &w1);
        float sum = 0.0f;
        for (int h = h0; h < h1; h++)
            for (int w = w0; w < w1; w++)
                sum += xp[h * g.W + w];
        y[o] = sum / divisor;
    }
}

static __global__ void avgpool_grad_k(pool_geom g, int n, const float *dy, float *dx, int acc)
{
    const size_t HW = (size_t)g.H * g.W, PQ = (size_t)g.P * g.Q;
    CU_LOOP(e, (size_t)n * g.C * HW)
    {
        const size_t pl = e / HW;
        const int h = (int)(e % HW) / g.W, w = (int)(e % HW) % g.W;
        const float *dyp = dy + pl * PQ;
        int p0 = 0, p1 = g.P - 1, q0 = 0, q1 = g.Q - 1;
        if (!g.adaptive) {
            pool_candidates(h, g.kh, 1, g.stride_h, g.pad_h, g.P, &p0, &p1);
            pool_candidates(w, g.kw, 1, g.stride_w, g.pad_w, g.Q, &q0, &q1);
        }
        float sum = acc ? dx[e] : 0.0f;
        for (int p = p0; p <= p1; p++)
            for (int q = q0; q <= q1; q++) {
                int h0, h1, w0, w1;
                const float divisor = pool_avg_window(&g, p, q, &h0, &h1, &w0, &w1);
                if (h >= h0 && h < h1 && w >= w0 && w < w1)
                    sum += dyp[p * g.Q + q] / divisor;
            }
        dx[e] = sum;
    }
}

extern "C" void cuda_maxpool_forward(dtnn_backend *be, const pool_geom *g, int n,
                                     const float *x, float *y, int32_t *argmax)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "maxpool forward kernel", maxpool_k, (size_t)n * g->C * g->P * g->Q, *g, n, x,
              y, argmax);
}

extern "C" void cuda_maxpool_backward(dtnn_backend *be, const pool_geom *g, int n,
                                      const float *dy, const int32_t *argmax, float *dx,
                                      int accumulate)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "maxpool backward kernel", maxpool_grad_k, (size_t)n * g->C * g->H * g->W, *g,
              n, dy, argmax, dx, accumulate);
}

extern "C" void cuda_avgpool_forward(dtnn_backend *be, const pool_geom *g, int n,
                                     const float *x, float *y)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "avgpool forward kernel", avgpool_k, (size_t)n * g->C * g->P * g->Q, *g, n, x,
              y);
}

extern "C" void cuda_avgpool_backward(dtnn_backend *be, const pool_geom *g, int n,
                                      const float *dy, float *dx, int accumulate)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "avgpool backward kernel", avgpool_grad_k, (size_t)n * g->C * g->H * g->W, *g,
              n, dy, dx, accumulate);
}
