/*
 * squeeze_excite.c — the CPU's squeeze-excitation block as one operation (backend.h,
 * se_geom): the plane means, the two small fully connected products and their activations,
 * and the channel scale, forward and backward.
 *
 * Each stage is the same arithmetic as the layer it stands for (the global average pool's
 * float sum in order, the fully connected products of linear.c, the activations' formulas),
 * so fused and unfused differ only where a stage's layer computes otherwise (a ReduceMean's
 * double sums, a 1x1 convolution's GEMM orientation): by rounding. What fusion saves is in
 * backward: unfused, the scale writes dx = dy s and the pool then reads dx back to add
 * dmean / HW, a second pass over the block's largest tensor; here both are one pass, after
 * the small products have turned dy x into dmean.
 */
#include <string.h>

#include "cpu_kernels.h"

static void plane_means(const se_geom *g, int n, const float *x, float *mean)
{
    const int planes = n * g->C;
    const size_t hw = (size_t)g->HW;
#pragma omp parallel for schedule(static) if (planes * hw > 65536)
    for (int pl = 0; pl < planes; pl++) {
        const float *xp = x + (size_t)pl * hw;
        float sum = 0.0f;
        for (size_t i = 0; i < hw; i++)
            sum += xp[i];
        mean[pl] = sum / (float)hw;
    }
}

void cpu_se_forward(const se_geom *g, int n, const float *x, const float *w1, const float *b1,
                    const float *w2, const float *b2, float *mean, float *z1, float *a1,
                    float *z2, float *s, float *y)
{
    const linear_desc squeeze = {g->hidden, g->C, DTNN_PRECISION_FP32};
    const linear_desc excite = {g->C, g->hidden, DTNN_PRECISION_FP32};
    plane_means(g, n, x, mean);
    cpu_linear_forward(&squeeze, n, mean, w1, b1, z1, NULL);
    cpu_act_forward(g->act, g->act_a, g->act_b, (size_t)n * g->hidden, z1, a1);
    cpu_linear_forward(&excite, n, a1, w2, b2, z2, NULL);
    cpu_act_forward(g->gate, g->gate_a, g->gate_b, (size_t)n * g->C, z2, s);
    const int planes = n * g->C;
    const size_t hw = (size_t)g->HW;
#pragma omp parallel for schedule(static) if (planes * hw > 65536)
    for (int pl = 0; pl < planes; pl++) {
        const float *xp = x + (size_t)pl * hw;
        float *yp = y + (size_t)pl * hw;
        const float scale = s[pl];
        for (size_t i = 0; i < hw; i++)
            yp[i] = xp[i] * scale;
    }
}

void cpu_se_backward(const se_geom *g, int n, const float *x, const float *dy,
                     const float *mean, const float *z1, const float *a1, const float *z2,
                     const float *s, const float *w1, const float *w2, float *dw1, float *db1,
                     float *dw2, float *db2, float *dx, int accumulate, float *workspace)
{
    const linear_desc squeeze = {g->hidden, g->C, DTNN_PRECISION_FP32};
    const linear_desc excite = {g->C, g->hidden, DTNN_PRECISION_FP32};
    const int planes = n * g->C;
    const size_t hw = (size_t)g->HW;
    float *ds = workspace, *dz2 = ds + planes, *dmean = dz2 + planes;
    float *da1 = dmean + planes, *dz1 = da1 + (size_t)n * g->hidden;
    /* the scale's gradient: dy . x over each plane, in order (the binary layer's gather) */
#pragma omp parallel for schedule(static) if (planes * hw > 65536)
    for (int pl = 0; pl < planes; pl++) {
        const float *xp = x + (size_t)pl * hw, *dyp = dy + (size_t)pl * hw;
        float sum = 0.0f;
        for (size_t i = 0; i < hw; i++)
            sum += dyp[i] * xp[i];
        ds[pl] = sum;
    }
    cpu_act_backward(g->gate, g->gate_a, g->gate_b, (size_t)planes, z2, s, ds, dz2, 0);
    cpu_linear_backward(&excite, n, a1, dz2, w2, dw2, db2, da1, 0, NULL);
    cpu_act_backward(g->act, g->act_a, g->act_b, (size_t)n * g->hidden, z1, a1, da1, dz1, 0);
    cpu_linear_backward(&squeeze, n, mean, dz1, w1, dw1, db1, dmean, 0, NULL);
    if (!dx)
        return;     /* the model input, its gradient not asked for */
    /* the pool's gradient (dmean spread evenly, as cpu_avgpool_backward divides) and the
     * scale's dy s in one pass */
#pragma omp parallel for schedule(static) if (planes * hw > 65536)
    for (int pl = 0; pl < planes; pl++) {
        const float *dyp = dy + (size_t)pl * hw;
        float *dxp = dx + (size_t)pl * hw;
        const float scale = s[pl], spread = dmean[pl] / (float)hw;
        if (accumulate)
            for (size_t i = 0; i < hw; i++)
                dxp[i] += dyp[i] * scale + spread;
        else
            for (size_t i = 0; i < hw; i++)
                dxp[i] = dyp[i] * scale + spread;
    }
}
