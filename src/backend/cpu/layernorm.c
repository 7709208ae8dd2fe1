/*
 * layernorm.c — layer normalisation over the channels of each position, forward and backward,
 * on the shared formulas (formulas/layernorm_formulas.h): positions in parallel, and each
 * channel's parameter gradients in parallel over channels.
 */
#include "cpu_kernels.h"
#include "../formulas/layernorm_formulas.h"

void cpu_layernorm_forward(const layernorm_geom *g, int n, const float *x, const float *gamma,
                           const float *beta, float *y, float *mean, float *rstd)
{
    const size_t sample = (size_t)g->C * g->HW;
    const ptrdiff_t positions = (ptrdiff_t)((size_t)n * g->HW);
#pragma omp parallel for schedule(static)
    for (ptrdiff_t p = 0; p < positions; p++) {
        const size_t i = (size_t)p / g->HW;
        const int j = (int)((size_t)p % g->HW);
        const float *xs = x + i * sample;
        float *ys = y + i * sample;
        ln_stats(g, xs, j, &mean[p], &rstd[p]);
        for (int c = 0; c < g->C; c++) {
            const size_t at = (size_t)c * g->HW + j;
            ys[at] = ln_value(xs[at], mean[p], rstd[p], gamma ? gamma[c] : 1.0f,
                               beta ? beta[c] : 0.0f);
        }
    }
}

void cpu_layernorm_backward(const layernorm_geom *g, int n, const float *x, const float *gamma,
                            const float *mean, const float *rstd, const float *dy, float *dx,
                            int accumulate, float *dgamma, float *dbeta)
{
    const size_t sample = (size_t)g->C * g->HW;
    if (dx) {
        const ptrdiff_t positions = (ptrdiff_t)((size_t)n * g->HW);
#pragma omp parallel for schedule(static)
        for (ptrdiff_t p = 0; p < positions; p++) {
            const size_t i = (size_t)p / g->HW;
            ln_input_grad(g, x + i * sample, gamma, mean[p], rstd[p], dy + i * sample,
                          dx + i * sample, (int)((size_t)p % g->HW), accumulate);
        }
    }
    if (dgamma || dbeta) {
#pragma omp parallel for schedule(static)
        for (int c = 0; c < g->C; c++)
            ln_param_grads(g, n, x, mean, rstd, dy, c, dgamma, dbeta);
    }
}
