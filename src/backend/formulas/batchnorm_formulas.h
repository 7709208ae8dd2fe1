/*
 * batchnorm_formulas.h — batch normalisation's per-channel constants and per-value arithmetic
 * (backend.h's phases): the statistics and running estimates from the moments about the
 * running mean, evaluation's folded scale and shift, the normalised value with its fused
 * residual and ReLU, the gradient a fused ReLU passes, and the input gradient's folded
 * constants. The one definition that the CPU (backend/cpu/batchnorm.c: its scalar loops; its
 * AVX2 parts compute the same expressions eight at a time) and the CUDA kernels
 * (backend/cuda/batchnorm.cu) both call. How the per-channel sums are ordered is each
 * backend's business; these are the formulas around them.
 */
#ifndef DTNN_BATCHNORM_FORMULAS_H
#define DTNN_BATCHNORM_FORMULAS_H

#include <math.h>

#include "../../core/host_device.h"

/* Channel c's batch statistics from the sums of d = x - running_mean and d^2 over count
 * values (the moments are about the running mean as it was before this update): the saved
 * mean and 1 / sqrt(var + eps) (biased variance, clamped at 0), and the running estimates
 * updated as PyTorch's (unbiased variance; running = (1 - momentum) running + momentum
 * batch). */
static inline DTNN_HOST_DEVICE void bn_finish_channel(double sum, double sumsq, double count,
                                                      float eps, float momentum,
                                                      float *save_mean, float *save_invstd,
                                                      float *running_mean, float *running_var)
{
    const double d = sum / count, mean = *running_mean + d;
    double var = sumsq / count - d * d;
    if (var < 0.0)
        var = 0.0;
    *save_mean = (float)mean;
    *save_invstd = (float)(1.0 / sqrt(var + eps));
    const double unbiased = count > 1 ? var * count / (count - 1) : var;
    *running_mean = (float)((1.0 - momentum) * *running_mean + momentum * mean);
    *running_var = (float)((1.0 - momentum) * *running_var + momentum * unbiased);
}

/* Evaluation's scale gamma / sqrt(running_var + eps), the one forward and its backward use. */
static inline DTNN_HOST_DEVICE float bn_eval_scale(float gamma, float running_var, float eps)
{
    return gamma * (float)(1.0 / sqrt((double)running_var + eps));
}

/* y = (x - mean) * scale + shift in one rounding, + the residual, clamped at 0 with a fused
 * ReLU (a NaN stays NaN): the unfused add's and ReLU's arithmetic. Training: mean, gamma *
 * invstd, beta; evaluation: 0, bn_eval_scale, beta - running_mean * scale. */
static inline DTNN_HOST_DEVICE float bn_normalise(float x, float mean, float scale, float shift,
                                                  int has_res, float res, int relu)
{
    float v = fmaf(x - mean, scale, shift);
    if (has_res)
        v += res;
    return relu && v < 0.0f ? 0.0f : v;
}

/* The gradient that reaches the normalisation: dy, or with a fused ReLU dy where the value
 * before the clamp was positive, read from the output (out > 0) after a residual add
 * (use_out), else recomputed (recompute) as fmaf(d, scale, shift) with d = x - mean, the
 * forward's own expression. */
static inline DTNN_HOST_DEVICE float bn_passed(float dy, float d, int use_out, float out,
                                               int recompute, float scale, float shift)
{
    if (use_out)
        return out > 0.0f ? dy : 0.0f;
    return recompute && !(fmaf(d, scale, shift) > 0.0f) ? 0.0f : dy;
}

/* dx = k (g - mdy - xhat mdyx) = g k + ((x - mean) xs + off): the constants k = gamma invstd,
 * xs = -k invstd mdyx and off = -k mdy folded in double from the sums sum(g) and
 * sum(g xhat) over count values, then rounded. */
typedef struct {
    float k, xs, off;
} bn_grad_consts;

static inline DTNN_HOST_DEVICE bn_grad_consts bn_grad_constants(float gamma, float invstd,
                                                                double sdy, double sdyx,
                                                                double count)
{
    const double is = invstd, k = gamma * is;
    const double mdy = sdy / count, mdyx = sdyx / count;
    bn_grad_consts c;
    c.k = (float)k;
    c.xs = (float)(-k * is * mdyx);
    c.off = (float)(-k * mdy);
    return c;
}

static inline DTNN_HOST_DEVICE float bn_grad_value(float g, float d, bn_grad_consts c)
{
    return fmaf(g, c.k, fmaf(d, c.xs, c.off));
}

#endif
