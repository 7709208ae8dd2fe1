/*
 * layernorm.cu — layer normalisation over the channels of each position on the formulas the
 * CPU's loops call (formulas/layernorm_formulas.h): one thread per position forward and for
 * the input gradient, one per channel for the parameter gradients (their sums in the CPU's
 * order), so the results are the CPU's bit for bit.
 */
#include "../formulas/layernorm_formulas.h"
#include "cuda_launch.cuh"

static __global__ void ln_forward_k(layernorm_geom g, int n, const float *x, const float *gamma,
                                    const float *beta, float *y, float *mean, float *rstd)
{
    const size_t sample = (size_t)g.C * g.HW;
    CU_LOOP(p, (size_t)n * g.HW)
    {
        const size_t i = p / g.HW;
        const int j = (int)(p % g.HW);
        ln_stats(&g, x + i * sample, j, &mean[p], &rstd[p]);
        for (int c = 0; c < g.C; c++) {
            const size_t at = i * sample + (size_t)c * g.HW + j;
            y[at] = ln_value(x[at], mean[p], rstd[p], gamma ? gamma[c] : 1.0f,
                             beta ? beta[c] : 0.0f);
        }
    }
}

static __global__ void ln_input_grad_k(layernorm_geom g, int n, const float *x,
                                       const float *gamma, const float *mean,
                                       const float *rstd, const float *dy, float *dx, int acc)
{
    const size_t sample = (size_t)g.C * g.HW;
    CU_LOOP(p, (size_t)n * g.HW)
    {
        const size_t i = p / g.HW;
        ln_input_grad(&g, x + i * sample, gamma, mean[p], rstd[p], dy + i * sample,
                      dx + i * sample, (int)(p % g.HW), acc);
    }
}

static __global__ void ln_param_grad_k(layernorm_geom g, int n, const float *x,
                                       const float *mean, const float *rstd, const float *dy,
                                       float *dgamma, float *dbeta)
{
    CU_LOOP(c, (size_t)g.C)
    {
        ln_param_grads(&g, n, x, mean, rstd, dy, (int)c, dgamma, dbeta);
    }
}

extern "C" void cuda_layernorm_forward(dtnn_backend *be, const layernorm_geom *g, int n,
                                       const float *x, const float *gamma, const float *beta,
                                       float *y, float *mean, float *rstd)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "layernorm forward kernel", ln_forward_k, (size_t)n * g->HW, *g, n, x, gamma,
              beta, y, mean, rstd);
}

extern "C" void cuda_layernorm_backward(dtnn_backend *be, const layernorm_geom *g, int n,
                                        const float *x, const float *gamma, const float *mean,
                                        const float *rstd, const float *dy, float *dx,
                                        int accumulate, float *dgamma, float *dbeta)
{
    CU_SKIP_IF_FAILED(be);
    if (dx)
        CU_LAUNCH(be, "layernorm input gradient kernel", ln_input_grad_k, (size_t)n * g->HW,
                  *g, n, x, gamma, mean, rstd, dy, dx, accumulate);
    if (dgamma || dbeta)
        CU_LAUNCH(be, "layernorm parameter gradient kernel", ln_param_grad_k, (size_t)g->C, *g,
                  n, x, mean, rstd, dy, dgamma, dbeta);
}
