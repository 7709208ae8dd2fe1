/*
 * optim_formulas.h — the optimizers' update of one element (parameter, gradient, state): the
 * single definition that the CPU (backend/cpu/optim.c) and the CUDA backend (backend/cuda/optim.cu)
 * both call, so that a step gives the same weights on both, bit for bit, and the two cannot
 * drift apart. The arithmetic is in float, in the order of PyTorch 1.13's single-tensor code
 * paths; optim/optimizer.c computes the scalars in the args structs and documents the rules.
 *
 * The args come by value: a private copy the compiler may keep in registers, which is what
 * lets the CPU's loops around these calls vectorise.
 */
#ifndef DTNN_OPTIM_FORMULAS_H
#define DTNN_OPTIM_FORMULAS_H

#include <math.h>
#include <stddef.h>

#include "../backend.h"
#include "../../core/host_device.h"

/* SGD with optional weight decay, (Nesterov) momentum and dampening; buf is unused (may be
 * NULL) without momentum. */
static inline DTNN_HOST_DEVICE void optim_sgd_update(sgd_args a, size_t i, float *w,
                                                     const float *grad, float *buf)
{
    float d = grad[i];
    if (a.weight_decay != 0.0f)
        d = d + a.weight_decay * w[i];
    if (a.use_momentum) {
        const float b = a.first ? d : a.momentum * buf[i] + a.keep * d;
        buf[i] = b;
        d = a.nesterov ? d + a.momentum * b : b;
    }
    w[i] = w[i] - a.lr * d;
}

/* Adam (L2 term l2) and AdamW (decoupled decay: the parameter shrunk first). */
static inline DTNN_HOST_DEVICE void optim_adam_update(adam_args a, size_t i, float *w,
                                                      const float *grad, float *m1, float *m2)
{
    float p = w[i];
    if (a.do_shrink)
        p = p * a.shrink;
    float g = grad[i];
    if (a.l2 != 0.0f)
        g = g + a.l2 * p;
    const float m = a.beta1 * m1[i] + a.one_minus_beta1 * g;
    const float v = a.beta2 * m2[i] + a.one_minus_beta2 * g * g;
    m1[i] = m;
    m2[i] = v;
    const float denom = sqrtf(v) / a.bc2_sqrt + a.eps;
    w[i] = p - a.step_size * m / denom;
}

/* RMSprop; ga (the centred variant's grad average) and buf (momentum) may be NULL. Where
 * rounding makes square_avg - grad_avg^2 negative (PyTorch would produce NaN), the root is
 * taken of 0. */
static inline DTNN_HOST_DEVICE void optim_rmsprop_update(rmsprop_args a, size_t i, float *w,
                                                         const float *grad, float *sq,
                                                         float *buf, float *ga)
{
    float g = grad[i];
    if (a.weight_decay != 0.0f)
        g = g + a.weight_decay * w[i];
    const float s = a.alpha * sq[i] + a.one_minus_alpha * g * g;
    sq[i] = s;
    float avg;
    if (ga) {
        const float m = a.alpha * ga[i] + a.one_minus_alpha * g;
        ga[i] = m;
        const float var = s - m * m;
        avg = sqrtf(var > 0.0f ? var : 0.0f) + a.eps;
    } else {
        avg = sqrtf(s) + a.eps;
    }
    if (buf) {
        const float b = a.momentum * buf[i] + g / avg;
        buf[i] = b;
        w[i] = w[i] - a.lr * b;
    } else {
        w[i] = w[i] - a.lr * g / avg;
    }
}

/* NAdam, PyTorch 2's single-tensor order: m moves towards g by lerp (weight 1 - beta1 < 0.5:
 * m + w (g - m)), v as Adam's, denom = sqrt(v / bc2) + eps, then two addcdiv steps. */
static inline DTNN_HOST_DEVICE void optim_nadam_update(nadam_args a, size_t i, float *w,
                                                       const float *grad, float *m1, float *m2)
{
    float p = w[i];
    float g = grad[i];
    if (a.weight_decay != 0.0f)
        g = g + a.weight_decay * p;
    const float m = m1[i] + a.one_minus_beta1 * (g - m1[i]);
    const float v = a.beta2 * m2[i] + a.one_minus_beta2 * g * g;
    m1[i] = m;
    m2[i] = v;
    const float denom = sqrtf(v / a.bc2) + a.eps;
    p = p + a.c_grad * (g / denom);
    w[i] = p + a.c_avg * (m / denom);
}

/* LARS (the MLPerf reference's rule) over one tensor: decay added to the gradient, momentum on
 * the scaled learning rate's step, the parameter moved by the velocity. */
static inline DTNN_HOST_DEVICE void optim_lars_update(lars_args a, size_t i, float *w,
                                                      const float *grad, float *buf)
{
    float g = grad[i];
    if (a.weight_decay != 0.0f)
        g = g + a.weight_decay * w[i];
    const float step = a.scaled_lr * g;
    const float v = a.momentum * buf[i] + step;
    buf[i] = v;
    w[i] = w[i] - (a.nesterov ? a.momentum * v + step : v);
}

/* LAMB's direction (timm's Lamb with bias correction and grad averaging, whose m moves by
 * lerp): the bias-corrected Adam ratio plus the decay term; the trust ratio scales it
 * afterwards. */
static inline DTNN_HOST_DEVICE void optim_lamb_direction(lamb_args a, size_t i, const float *w,
                                                         const float *grad, float *m1,
                                                         float *m2, float *u)
{
    const float g = grad[i];
    const float m = m1[i] + a.one_minus_beta1 * (g - m1[i]);
    const float v = a.beta2 * m2[i] + a.one_minus_beta2 * g * g;
    m1[i] = m;
    m2[i] = v;
    const float denom = sqrtf(v) / a.bc2_sqrt + a.eps;
    float d = (m / a.bc1) / denom;
    if (a.weight_decay != 0.0f)
        d = d + a.weight_decay * w[i];
    u[i] = d;
}

#endif
