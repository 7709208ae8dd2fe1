/*
 * batchnorm.c — batch normalisation over [n, C, hw] as torch.nn.BatchNorm2d/1d: training
 * normalises with the batch mean and biased variance and updates the running estimates with the
 * unbiased variance; evaluation uses the running estimates. Per-channel sums are accumulated in
 * double, serially per channel, so results do not depend on the thread count.
 * Backward: dx = gamma * invstd / m * (m * dy - sum(dy) - xhat * sum(dy * xhat)), m = n * hw.
 */
#include <math.h>

#include "cpu_kernels.h"

void cpu_bn_forward_train(int n, int C, int hw, const float *x, const float *gamma,
                          const float *beta, float eps, float momentum, float *y,
                          float *save_mean, float *save_invstd, float *running_mean,
                          float *running_var)
{
    const double m = (double)n * hw;
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        double sum = 0.0;
        for (int i = 0; i < n; i++) {
            const float *xc = x + ((size_t)i * C + c) * hw;
            for (int j = 0; j < hw; j++)
                sum += xc[j];
        }
        double mean = sum / m, sq = 0.0;
        for (int i = 0; i < n; i++) {
            const float *xc = x + ((size_t)i * C + c) * hw;
            for (int j = 0; j < hw; j++) {
                double d = xc[j] - mean;
                sq += d * d;
            }
        }
        double var = sq / m;
        float invstd = (float)(1.0 / sqrt(var + eps));
        float fmean = (float)mean, scale = gamma[c] * invstd, shift = beta[c];
        for (int i = 0; i < n; i++) {
            const float *xc = x + ((size_t)i * C + c) * hw;
            float *yc = y + ((size_t)i * C + c) * hw;
            for (int j = 0; j < hw; j++)
                yc[j] = (xc[j] - fmean) * scale + shift;
        }
        save_mean[c] = fmean;
        save_invstd[c] = invstd;
        double unbiased = m > 1 ? sq / (m - 1) : var;
        running_mean[c] = (float)((1.0 - momentum) * running_mean[c] + momentum * mean);
        running_var[c] = (float)((1.0 - momentum) * running_var[c] + momentum * unbiased);
    }
}

void cpu_bn_forward_eval(int n, int C, int hw, const float *x, const float *gamma,
                         const float *beta, const float *running_mean, const float *running_var,
                         float eps, float *y)
{
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        float invstd = (float)(1.0 / sqrt((double)running_var[c] + eps));
        float scale = gamma[c] * invstd, shift = beta[c] - running_mean[c] * scale;
        for (int i = 0; i < n; i++) {
            const float *xc = x + ((size_t)i * C + c) * hw;
            float *yc = y + ((size_t)i * C + c) * hw;
            for (int j = 0; j < hw; j++)
                yc[j] = xc[j] * scale + shift;
        }
    }
}

void cpu_bn_backward(int n, int C, int hw, const float *x, const float *dy, const float *gamma,
                     const float *save_mean, const float *save_invstd, float *dgamma,
                     float *dbeta, float *dx, int accumulate)
{
    const double m = (double)n * hw;
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        const float mean = save_mean[c], invstd = save_invstd[c];
        double sdy = 0.0, sdyx = 0.0;
        for (int i = 0; i < n; i++) {
            const float *xc = x + ((size_t)i * C + c) * hw;
            const float *dyc = dy + ((size_t)i * C + c) * hw;
            for (int j = 0; j < hw; j++) {
                sdy += dyc[j];
                sdyx += dyc[j] * (double)((xc[j] - mean) * invstd);
            }
        }
        dgamma[c] += (float)sdyx;
        dbeta[c] += (float)sdy;
        if (!dx)
            continue;
        const float k = gamma[c] * invstd;
        const float mdy = (float)(sdy / m), mdyx = (float)(sdyx / m);
        for (int i = 0; i < n; i++) {
            const float *xc = x + ((size_t)i * C + c) * hw;
            const float *dyc = dy + ((size_t)i * C + c) * hw;
            float *dxc = dx + ((size_t)i * C + c) * hw;
            for (int j = 0; j < hw; j++) {
                float xhat = (xc[j] - mean) * invstd;
                float g = k * (dyc[j] - mdy - xhat * mdyx);
                dxc[j] = accumulate ? dxc[j] + g : g;
            }
        }
    }
}
