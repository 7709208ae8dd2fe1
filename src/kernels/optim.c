/*
 * optim.c — the CPU's optimizer updates over the flat parameter, gradient and state buffers,
 * one pass each, with the element-wise arithmetic in float as PyTorch 1.13's single-tensor
 * code paths (optim/optimizer.c computes the scalars and documents the rules). Elements are
 * independent, so the OpenMP loop is deterministic for any thread count.
 */
#include <math.h>

#include "cpu_kernels.h"

void cpu_sgd_step(const sgd_args *a, size_t count, float *w, const float *grad, float *buf)
{
    const int64_t n = (int64_t)count;
    const float flr = a->lr, wd = a->weight_decay, mom = a->momentum, keep = a->keep;
    const int first = a->first, nesterov = a->nesterov, use_mom = a->use_momentum;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++) {
        float d = grad[i];
        if (wd != 0.0f)
            d = d + wd * w[i];
        if (use_mom) {
            float b = first ? d : mom * buf[i] + keep * d;
            buf[i] = b;
            d = nesterov ? d + mom * b : b;
        }
        w[i] = w[i] - flr * d;
    }
}

void cpu_adam_step(const adam_args *a, size_t count, float *w, const float *grad, float *m1,
                   float *m2)
{
    const int64_t n = (int64_t)count;
    const float fb1 = a->beta1, fb2 = a->beta2, c1 = a->one_minus_beta1;
    const float c2 = a->one_minus_beta2, eps = a->eps, step_size = a->step_size;
    const float bc2_sqrt = a->bc2_sqrt, l2 = a->l2, shrink = a->shrink;
    const int do_shrink = a->do_shrink;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++) {
        float p = w[i];
        if (do_shrink)
            p = p * shrink;
        float g = grad[i];
        if (l2 != 0.0f)
            g = g + l2 * p;
        float m = fb1 * m1[i] + c1 * g;
        float v = fb2 * m2[i] + c2 * g * g;
        m1[i] = m;
        m2[i] = v;
        float denom = sqrtf(v) / bc2_sqrt + eps;
        w[i] = p - step_size * m / denom;
    }
}

/* Where rounding makes square_avg - grad_avg^2 negative (PyTorch would produce NaN), the root
 * is taken of 0. */
void cpu_rmsprop_step(const rmsprop_args *a, size_t count, float *w, const float *grad,
                      float *sq, float *buf, float *ga)
{
    const int64_t n = (int64_t)count;
    const float fa = a->alpha, c = a->one_minus_alpha, wd = a->weight_decay, eps = a->eps;
    const float mom = a->momentum, flr = a->lr;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++) {
        float g = grad[i];
        if (wd != 0.0f)
            g = g + wd * w[i];
        float s = fa * sq[i] + c * g * g;
        sq[i] = s;
        float avg;
        if (ga) {
            float m = fa * ga[i] + c * g;
            ga[i] = m;
            float var = s - m * m;
            avg = sqrtf(var > 0.0f ? var : 0.0f) + eps;
        } else {
            avg = sqrtf(s) + eps;
        }
        if (buf) {
            float b = mom * buf[i] + g / avg;
            buf[i] = b;
            w[i] = w[i] - flr * b;
        } else {
            w[i] = w[i] - flr * g / avg;
        }
    }
}
