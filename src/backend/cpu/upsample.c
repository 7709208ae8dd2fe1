/*
 * upsample.c — nearest and bilinear upsampling by integer factors, forward and backward, on
 * the shared formulas (formulas/upsample_formulas.h): one output per iteration forward, one
 * input value per iteration backward (a gather: no two iterations write one value).
 */
#include "cpu_kernels.h"
#include "../formulas/upsample_formulas.h"

void cpu_upsample_forward(const upsample_geom *g, int n, const float *x, float *y)
{
    const size_t P = (size_t)g->H * g->sh, Q = (size_t)g->W * g->sw, PQ = P * Q;
    const ptrdiff_t total = (ptrdiff_t)((size_t)n * g->C * PQ);
#pragma omp parallel for schedule(static)
    for (ptrdiff_t o = 0; o < total; o++) {
        const size_t plane = (size_t)o / PQ, at = (size_t)o % PQ;
        y[o] = upsample_value(g, x + plane * g->H * g->W, (int)(at / Q), (int)(at % Q));
    }
}

void cpu_upsample_backward(const upsample_geom *g, int n, const float *dy, float *dx,
                           int accumulate)
{
    const size_t HW = (size_t)g->H * g->W, PQ = HW * g->sh * g->sw;
    const ptrdiff_t total = (ptrdiff_t)((size_t)n * g->C * HW);
#pragma omp parallel for schedule(static)
    for (ptrdiff_t e = 0; e < total; e++) {
        const size_t plane = (size_t)e / HW, at = (size_t)e % HW;
        const float v = upsample_grad(g, dy + plane * PQ, (int)(at / g->W), (int)(at % g->W));
        dx[e] = accumulate ? dx[e] + v : v;
    }
}
