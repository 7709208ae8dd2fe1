/*
 * reduce_formulas.h — one output of a reduction (backend.h's reduce_geom) and one input's
 * gradient: the one definition that the CPU loops (backend/cpu/reduce.c) and the CUDA kernels
 * (backend/cuda/reduce.cu) call. Sums run in double in index order and round once, so the
 * backends agree bit for bit and the error against the exact sum is half an ulp.
 */
#ifndef DTNN_REDUCE_FORMULAS_H
#define DTNN_REDUCE_FORMULAS_H

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
    if (g->over_channels)
        for (int c = 0; c < g->C; c++)
            sum += (double)x[(size_t)c * g->HW + j];
    else
        for (int k = 0; k < g->HW; k++)
            sum += (double)x[(size_t)j * g->HW + k];
    return (float)(g->mean ? sum / (double)reduce_count(g) : sum);
}

/* d(output)/d(input) times the output's gradient dy: dy, or dy / count for a mean. */
static inline DTNN_HOST_DEVICE float reduce_grad(const reduce_geom *g, float dy)
{
    return g->mean ? dy / (float)reduce_count(g) : dy;
}

#endif
