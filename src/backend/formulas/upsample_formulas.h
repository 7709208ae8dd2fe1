/*
 * upsample_formulas.h — nearest and bilinear upsampling by integer factors (backend.h's
 * upsample_geom), as torch.nn.functional.interpolate computes them in float: the source
 * taps and weights of an output row or column, one output value, and one input's gradient
 * gathered from the outputs that read it, in output order. The CPU loops
 * (backend/cpu/upsample.c) and the CUDA kernels (backend/cuda/upsample.cu) both call these,
 * so the backends agree bit for bit.
 */
#ifndef DTNN_UPSAMPLE_FORMULAS_H
#define DTNN_UPSAMPLE_FORMULAS_H

#include "../../core/host_device.h"
#include "../backend.h"

/* Output d of an axis of `in` values upsampled s times: taps i0 <= i1 and the weight of i1
 * (PyTorch's area_pixel_compute_source_index and its h1lambda; nearest: d / s, weight 0). */
static inline DTNN_HOST_DEVICE void upsample_taps(int d, int in, int s, int bilinear,
                                                  int align, int *i0, int *i1, float *w1)
{
    if (!bilinear) {
        *i0 = *i1 = d / s;
        *w1 = 0.0f;
        return;
    }
    const int out = in * s;
    float src;
    if (align) {
        const float scale = out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f;
        src = scale * (float)d;
    } else {
        const float scale = (float)in / (float)out;
        src = scale * ((float)d + 0.5f) - 0.5f;
        if (src < 0.0f)
            src = 0.0f;
    }
    *i0 = (int)src;
    *i1 = *i0 < in - 1 ? *i0 + 1 : *i0;
    *w1 = src - (float)*i0;
}

/* Output (p, q) of the plane at x (H x W). */
static inline DTNN_HOST_DEVICE float upsample_value(const upsample_geom *g, const float *x,
                                                   int p, int q)
{
    int h0, h1, w0, w1;
    float lh, lw;
    upsample_taps(p, g->H, g->sh, g->bilinear, g->align_corners, &h0, &h1, &lh);
    upsample_taps(q, g->W, g->sw, g->bilinear, g->align_corners, &w0, &w1, &lw);
    if (!g->bilinear)
        return x[(size_t)h0 * g->W + w0];
    const float *r0 = x + (size_t)h0 * g->W, *r1 = x + (size_t)h1 * g->W;
    return (1.0f - lh) * ((1.0f - lw) * r0[w0] + lw * r0[w1]) +
           lh * ((1.0f - lw) * r1[w0] + lw * r1[w1]);
}

/* How much output d's value takes from input i along one axis (0 when it does not read it). */
static inline DTNN_HOST_DEVICE float upsample_weight(int d, int i, int in, int s, int bilinear,
                                                    int align)
{
    int i0, i1;
    float w1;
    upsample_taps(d, in, s, bilinear, align, &i0, &i1, &w1);
    return (i0 == i ? 1.0f - w1 : 0.0f) + (i1 == i ? w1 : 0.0f);
}

/* The outputs [*d0, *d1] along an axis that may read input i: nearest reads i from its own
 * block; a bilinear source lies within one input of its output's d / s (align_corners maps
 * [0, out - 1] onto [0, in - 1], so at most twice as far): a range that holds them all. */
static inline DTNN_HOST_DEVICE void upsample_readers(int i, int in, int s, int bilinear,
                                                     int *d0, int *d1)
{
    const int out = in * s;
    int lo = bilinear ? (i - 1) * s - 1 : i * s, hi = bilinear ? 2 * (i + 2) * s : i * s + s - 1;
    *d0 = lo < 0 ? 0 : lo;
    *d1 = hi > out - 1 ? out - 1 : hi;
}

/* The gradient of input (h, w) of a plane from dy (H sh x W sw), gathered in output order. */
static inline DTNN_HOST_DEVICE float upsample_grad(const upsample_geom *g, const float *dy,
                                                   int h, int w)
{
    int p0, p1, q0, q1;
    upsample_readers(h, g->H, g->sh, g->bilinear, &p0, &p1);
    upsample_readers(w, g->W, g->sw, g->bilinear, &q0, &q1);
    const int Q = g->W * g->sw;
    float sum = 0.0f;
    for (int p = p0; p <= p1; p++) {
        const float wh = upsample_weight(p, h, g->H, g->sh, g->bilinear, g->align_corners);
        if (wh == 0.0f)
            continue;
        for (int q = q0; q <= q1; q++) {
            const float ww = upsample_weight(q, w, g->W, g->sw, g->bilinear, g->align_corners);
            if (ww != 0.0f)
                sum += wh * ww * dy[(size_t)p * Q + q];
        }
    }
    return sum;
}

#endif
