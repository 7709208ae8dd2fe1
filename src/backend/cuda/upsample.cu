/*
 * upsample.cu — nearest and bilinear upsampling by integer factors on the formulas the CPU's
 * loops call (formulas/upsample_formulas.h): one thread per output forward, one per input
 * value backward (a gather in output order), so the results are the CPU's bit for bit.
 */
#include "../formulas/upsample_formulas.h"
#include "cuda_launch.cuh"

static __global__ void upsample_k(upsample_geom g, int n, const float *x, float *y)
{
    const size_t P = (size_t)g.H * g.sh, Q = (size_t)g.W * g.sw, PQ = P * Q;
    CU_LOOP(o, (size_t)n * g.C * PQ)
    {
        const size_t plane = o / PQ, at = o % PQ;
        y[o] = upsample_value(&g, x + plane * g.H * g.W, (int)(at / Q), (int)(at % Q));
    }
}

static __global__ void upsample_grad_k(upsample_geom g, int n, const float *dy, float *dx,
                                       int acc)
{
    const size_t HW = (size_t)g.H * g.W, PQ = HW * g.sh * g.sw;
    CU_LOOP(e, (size_t)n * g.C * HW)
    {
        const size_t plane = e / HW, at = e % HW;
        const float v = upsample_grad(&g, dy + plane * PQ, (int)(at / g.W), (int)(at % g.W));
        dx[e] = acc ? dx[e] + v : v;
    }
}

extern "C" void cuda_upsample_forward(dtnn_backend *be, const upsample_geom *g, int n,
                                      const float *x, float *y)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "upsample forward kernel", upsample_k,
              (size_t)n * g->C * g->H * g->sh * g->W * g->sw, *g, n, x, y);
}

extern "C" void cuda_upsample_backward(dtnn_backend *be, const upsample_geom *g, int n,
                                       const float *dy, float *dx, int accumulate)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "upsample backward kernel", upsample_grad_k, (size_t)n * g->C * g->H * g->W,
              *g, n, dy, dx, accumulate);
}
