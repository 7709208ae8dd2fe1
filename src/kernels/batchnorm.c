/*
 * batchnorm.c — batch normalisation over [n, C, hw] as torch.nn.BatchNorm2d/1d, in the phases
 * backend.h describes, and the per-channel sums convolutions need for their bias gradient:
 * training normalises with the batch mean and biased variance and updates the running
 * estimates with the unbiased variance; evaluation uses the running estimates.
 * Per-channel sums are accumulated in double, one channel per thread, so results do not
 * depend on the thread count. Within a channel, value j goes to lane j % LANES of LANES
 * double accumulators, added up at the end: the same fixed order on every run, and a loop
 * the compiler vectorises, where one double accumulator was a chain of dependent adds (4
 * cycles a value: batch norm took 16% of a ResNet-20 step, dtnn bench --profile).
 * Backward: dx = gamma * invstd / m * (m * dy - sum(dy) - xhat * sum(dy * xhat)), m = the
 * number of values per channel (over all ranks when synchronised).
 */
#include <math.h>

#include "cpu_kernels.h"

#define AT(base, i, c) ((base) + ((size_t)(i) * C + (c)) * hw)

enum { LANES = 8 };

static double lanes_total(const double acc[LANES])
{
    double s = 0.0;
    for (int l = 0; l < LANES; l++)
        s += acc[l];
    return s;
}

/* Sum of channel c of x [n, C, hw], in the lanes above. */
static double channel_sum(int n, int C, int hw, const float *x, int c)
{
    double acc[LANES] = {0};
    for (int i = 0; i < n; i++) {
        const float *xc = AT(x, i, c);
        int j = 0;
        for (; j + LANES <= hw; j += LANES)
            for (int l = 0; l < LANES; l++)
                acc[l] += xc[j + l];
        for (; j < hw; j++)
            acc[j % LANES] += xc[j];
    }
    return lanes_total(acc);
}

void cpu_bias_grad(int n, int C, int hw, const float *dy, float *db)
{
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++)
        db[c] += (float)channel_sum(n, C, hw, dy, c);
}

void cpu_bn_channel_sums(int n, int C, int hw, const float *x, const double *mean, double *out)
{
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        if (!mean) {
            out[c] = channel_sum(n, C, hw, x, c);
            continue;
        }
        const double m = mean[c];
        double acc[LANES] = {0};
        for (int i = 0; i < n; i++) {
            const float *xc = AT(x, i, c);
            int j = 0;
            for (; j + LANES <= hw; j += LANES)
                for (int l = 0; l < LANES; l++) {
                    double d = xc[j + l] - m;
                    acc[l] += d * d;
                }
            for (; j < hw; j++) {
                double d = xc[j] - m;
                acc[j % LANES] += d * d;
            }
        }
        out[c] = lanes_total(acc);
    }
}

void cpu_bn_apply_train(int n, int C, int hw, const float *x, const float *gamma,
                        const float *beta, const double *sum, const double *sqdev, double count,
                        float eps, float momentum, float *y, float *save_mean,
                        float *save_invstd, float *running_mean, float *running_var)
{
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        double mean = sum[c] / count, var = sqdev[c] / count;
        float invstd = (float)(1.0 / sqrt(var + eps));
        float fmean = (float)mean, scale = gamma[c] * invstd, shift = beta[c];
        for (int i = 0; i < n; i++) {
            const float *xc = AT(x, i, c);
            float *yc = AT(y, i, c);
            for (int j = 0; j < hw; j++)
                yc[j] = (xc[j] - fmean) * scale + shift;
        }
        save_mean[c] = fmean;
        save_invstd[c] = invstd;
        double unbiased = count > 1 ? sqdev[c] / (count - 1) : var;
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
            const float *xc = AT(x, i, c);
            float *yc = AT(y, i, c);
            for (int j = 0; j < hw; j++)
                yc[j] = xc[j] * scale + shift;
        }
    }
}

void cpu_bn_backward_sums(int n, int C, int hw, const float *x, const float *dy,
                          const float *save_mean, const float *save_invstd, double *sdy,
                          double *sdyx)
{
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        const float mean = save_mean[c], invstd = save_invstd[c];
        double a[LANES] = {0}, b[LANES] = {0};
        for (int i = 0; i < n; i++) {
            const float *xc = AT(x, i, c), *dyc = AT(dy, i, c);
            int j = 0;
            for (; j + LANES <= hw; j += LANES)
                for (int l = 0; l < LANES; l++) {
                    a[l] += dyc[j + l];
                    b[l] += dyc[j + l] * (double)((xc[j + l] - mean) * invstd);
                }
            for (; j < hw; j++) {
                a[j % LANES] += dyc[j];
                b[j % LANES] += dyc[j] * (double)((xc[j] - mean) * invstd);
            }
        }
        sdy[c] = lanes_total(a);
        sdyx[c] = lanes_total(b);
    }
}

void cpu_bn_backward_apply(int n, int C, int hw, const float *x, const float *dy,
                           const float *gamma, const float *save_mean, const float *save_invstd,
                           const double *sdy, const double *sdyx, double count, float *dx,
                           int accumulate)
{
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        const float mean = save_mean[c], invstd = save_invstd[c];
        const float k = gamma[c] * invstd;
        const float mdy = (float)(sdy[c] / count), mdyx = (float)(sdyx[c] / count);
        for (int i = 0; i < n; i++) {
            const float *xc = AT(x, i, c), *dyc = AT(dy, i, c);
            float *dxc = AT(dx, i, c);
            for (int j = 0; j < hw; j++) {
                float xhat = (xc[j] - mean) * invstd;
                float g = k * (dyc[j] - mdy - xhat * mdyx);
                dxc[j] = accumulate ? dxc[j] + g : g;
            }
        }
    }
}
