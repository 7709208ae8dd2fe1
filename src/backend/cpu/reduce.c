/*
 * reduce.c — sums, means and L2 norms over the channels or over each plane (backend.h's
 * reduce_geom), on the shared formulas (formulas/reduce_formulas.h), one output per iteration.
 */
#include "cpu_kernels.h"
#include "../formulas/reduce_formulas.h"

void cpu_reduce_forward(const reduce_geom *g, int n, const float *x, float *y)
{
    const size_t in = (size_t)g->C * g->HW, outs = g->over_channels ? (size_t)g->HW
                                                                    : (size_t)g->C;
    const ptrdiff_t total = (ptrdiff_t)((size_t)n * outs);
#pragma omp parallel for schedule(static)
    for (ptrdiff_t o = 0; o < total; o++)
        y[o] = reduce_value(g, x + (size_t)o / outs * in, (int)((size_t)o % outs));
}

void cpu_reduce_backward(const reduce_geom *g, int n, const float *x, const float *y,
                         const float *dy, float *dx, int accumulate)
{
    const size_t in = (size_t)g->C * g->HW, outs = g->over_channels ? (size_t)g->HW
                                                                    : (size_t)g->C;
    const ptrdiff_t total = (ptrdiff_t)((size_t)n * in);
#pragma omp parallel for schedule(static)
    for (ptrdiff_t e = 0; e < total; e++) {
        const size_t sample = (size_t)e / in, at = (size_t)e % in;
        const size_t j = g->over_channels ? at % (size_t)g->HW : at / (size_t)g->HW;
        const size_t o = sample * outs + j;
        const float v = reduce_grad(g, dy[o], g->l2 ? x[e] : 0.0f, g->l2 ? y[o] : 0.0f);
        dx[e] = accumulate ? dx[e] + v : v;
    }
}
