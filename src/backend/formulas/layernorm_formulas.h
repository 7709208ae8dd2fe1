/*
 * layernorm_formulas.h — layer normalisation over the channels of one position (backend.h's
 * layernorm_geom), as torch.nn.functional.layer_norm: the mean and biased variance in double,
 * 1 / sqrt(var + eps), the normalised and scaled value, the input gradient (dy gamma less its
 * mean and its projection on xhat, times rstd), and one channel's parameter gradients. The one
 * definition the CPU loops (backend/cpu/layernorm.c) and the CUDA kernels
 * (backend/cuda/layernorm.cu) call, so the backends agree bit for bit. gamma and beta NULL:
 * no affine parameters (1 and 0).
 */
#ifndef DTNN_LAYERNORM_FORMULAS_H
#define DTNN_LAYERNORM_FORMULAS_H

#include <math.h>

#include "../../core/host_device.h"
#include "../backend.h"

/* Position j of the sample at x (C planes of HW): its mean and rstd. */
static inline DTNN_HOST_DEVICE void ln_stats(const layernorm_geom *g, const float *x, int j,
                                             float *mean, float *rstd)
{
    double sum = 0.0;
    for (int c = 0; c < g->C; c++)
        sum += (double)x[(size_t)c * g->HW + j];
    const double mu = sum / g->C;
    double sq = 0.0;
    for (int c = 0; c < g->C; c++) {
        const double d = (double)x[(size_t)c * g->HW + j] - mu;
        sq += d * d;
    }
    *mean = (float)mu;
    *rstd = (float)(1.0 / sqrt(sq / g->C + (double)g->eps));
}

static inline DTNN_HOST_DEVICE float ln_value(float x, float mean, float rstd, float gamma,
                                              float beta)
{
    return (x - mean) * rstd * gamma + beta;
}

/* The input gradient at position j of a sample: rstd (g_c - mean(g) - xhat_c mean(g xhat))
 * with g = dy gamma, written (accumulate 0) or added to dx. */
static inline DTNN_HOST_DEVICE void ln_input_grad(const layernorm_geom *g, const float *x,
                                                  const float *gamma, float mean, float rstd,
                                                  const float *dy, float *dx, int j,
                                                  int accumulate)
{
    double sg = 0.0, sgx = 0.0;
    for (int c = 0; c < g->C; c++) {
        const size_t at = (size_t)c * g->HW + j;
        const double gc = (double)dy[at] * (gamma ? gamma[c] : 1.0f);
        sg += gc;
        sgx += gc * ((double)(x[at] - mean) * rstd);
    }
    const double mg = sg / g->C, mgx = sgx / g->C;
    for (int c = 0; c < g->C; c++) {
        const size_t at = (size_t)c * g->HW + j;
        const double xhat = (double)(x[at] - mean) * rstd;
        const float v =
            (float)(rstd * ((double)dy[at] * (gamma ? gamma[c] : 1.0f) - mg - xhat * mgx));
        dx[at] = accumulate ? dx[at] + v : v;
    }
}

/* Channel c's gradients of gamma and beta over n samples: sums of dy xhat and of dy, in
 * double, samples then positions in order, added to *dgamma and *dbeta. */
static inline DTNN_HOST_DEVICE void ln_param_grads(const layernorm_geom *g, int n,
                                                   const float *x, const float *mean,
                                                   const float *rstd, const float *dy, int c,
                                                   float *dgamma, float *dbeta)
{
    double sx = 0.0, s = 0.0;
    const size_t sample = (size_t)g->C * g->HW;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < g->HW; j++) {
            const size_t at = (size_t)i * sample + (size_t)c * g->HW + j;
            const size_t pos = (size_t)i * g->HW + j;
            s += (double)dy[at];
            sx += (double)dy[at] * ((double)(x[at] - mean[pos]) * rstd[pos]);
        }
    if (dgamma)
        dgamma[c] += (float)sx;
    if (dbeta)
        dbeta[c] += (float)s;
}

#endif
