/*
 * reduce_formulas.h — one output of a reduction (backend.h's reduce_geom) and one input's
 * gradient: the one definition that the CPU loops (backend/cpu/reduce.c) and the CUDA kernels
 * (backend/cuda/reduce.cu) call. Sums (of squares, for a norm) run in double in index order and
 * round once, so the backends agree bit for bit and the error against the exact value is half
 * an ulp (a norm's square root is taken in double too).
 */
#ifndef DTNN_REDUCE_FORMULAS_H
#define DTNN_REDUCE_FORMULAS_H

#include <math.h>

#include "../../core/host_device.h"
#include "../backend.h"

/* Values reduced into one output. */
static inline DTNN_HOST_DEVICE int reduce_count(const reduce_geom *g)
{
    return g->over_channels ? g->C : g->HW;
}

/* Output j of the sample at x: position j of every plane, or every position of plane j. */
static inline DTNN_HOST_DEVICE float reduce_value(const reduce_geom *g, const float *x, int j)
{
    double sum = 0.0;
    const size_t step = g->over_channels ? (size_t)g->HW : 1;
    const float *p = g->over_channels ? x + j : x + (size_t)j * g->HW;
    for (int k = 0; k < reduce_count(g); k++) {
        const double v = p[(size_t)k * step];
        sum += g->l2 ? v * v : v;
    }
    if (g->l2)
        return (float)sqrt(sum);
    return (float)(g->mean ? sum / (double)reduce_count(g) : sum);
}

/* d(output)/d(input) times the output's gradient dy, for the input value x whose output is y:
 * dy, dy / count for a mean, dy x / y for a norm (0 where the norm is 0, as torch.norm's). */
static inline DTNN_HOST_DEVICE float reduce_grad(const reduce_geom *g, float dy, float x, float y)
{
    if (g->l2)
        return y > 0.0f ? (float)((double)dy * x / y) : 0.0f;
    return g->mean ? dy / (float)reduce_count(g) : dy;
}

#endif
