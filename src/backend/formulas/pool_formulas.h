/*
 * pool_formulas.h — the windows of max and average pooling (backend.h's pool_geom): which taps
 * of a window lie in the input, the first maximum of a window, the input rectangle an average
 * covers and its divisor (count_include_pad, AdaptiveAvgPool2d's overlapping windows), and the
 * outputs whose window can hold an input row. The one definition that the CPU loops
 * (backend/cpu/pool.c) and the CUDA kernels (backend/cuda/pool.cu) both call, so the backends
 * cannot disagree on a window, a tie or a divisor. As torch.nn.MaxPool2d (the first maximum
 * wins ties, a NaN wins and stops the search) and AvgPool2d / AdaptiveAvgPool2d.
 */
#ifndef DTNN_POOL_FORMULAS_H
#define DTNN_POOL_FORMULAS_H

#include <math.h>

#include "../../core/host_device.h"
#include "../backend.h"

static inline DTNN_HOST_DEVICE int pool_imin(int a, int b) { return a < b ? a : b; }
static inline DTNN_HOST_DEVICE int pool_imax(int a, int b) { return a > b ? a : b; }

/* floor(a / b) for b > 0 and any a. */
static inline DTNN_HOST_DEVICE int pool_floor_div(int a, int b)
{
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/* The taps [*i0, *i1) of a window of k taps dil apart from start that lie in [0, size). */
static inline DTNN_HOST_DEVICE void pool_taps(int start, int k, int dil, int size, int *i0,
                                              int *i1)
{
    *i0 = start < 0 ? (-start + dil - 1) / dil : 0;
    const int last = size - 1 - start;     /* the largest offset inside */
    *i1 = last < 0 ? 0 : pool_imin(k, last / dil + 1);
    if (*i1 < *i0)
        *i1 = *i0;
}

/* Max pooling's output (p, q) of one plane xp [H, W]: the maximum, and in *at its flat index
 * h * W + w. The first maximum wins ties; a NaN wins and stops the search; a window with no
 * tap inside (dilation) is -inf with *at = -1, and routes no gradient. */
static inline DTNN_HOST_DEVICE float pool_max_window(const pool_geom *g, const float *xp, int p,
                                                     int q, int32_t *at)
{
    int i0, i1, j0, j1;
    const int hs = p * g->stride_h - g->pad_h, ws = q * g->stride_w - g->pad_w;
    pool_taps(hs, g->kh, g->dil_h, g->H, &i0, &i1);
    pool_taps(ws, g->kw, g->dil_w, g->W, &j0, &j1);
    float best = -INFINITY;
    *at = -1;
    if (i0 < i1 && j0 < j1) {
        *at = (hs + i0 * g->dil_h) * g->W + ws + j0 * g->dil_w;
        best = xp[*at];
    }
    for (int i = i0; i < i1 && best == best; i++)
        for (int j = j0; j < j1; j++) {
            const int32_t k = (hs + i * g->dil_h) * g->W + ws + j * g->dil_w;
            const float v = xp[k];
            if (v > best || v != v) {
                best = v;
                *at = k;
                if (v != v)
                    break;
            }
        }
    return best;
}

/* Clamps a pooling window [start, start + k) to [0, size). */
static inline DTNN_HOST_DEVICE void pool_clamp(int start, int k, int size, int *lo, int *hi)
{
    *lo = start < 0 ? 0 : start;
    *hi = start + k > size ? size : start + k;
}

/* The input rectangle [h0, h1) x [w0, w1) that average pooling's output (p, q) averages, and
 * its divisor: the taps inside, or with count_include_pad the window clipped to the padded
 * input, as PyTorch counts it; adaptive windows are floor(p H / P) .. ceil((p + 1) H / P). */
static inline DTNN_HOST_DEVICE float pool_avg_window(const pool_geom *g, int p, int q, int *h0,
                                                     int *h1, int *w0, int *w1)
{
    if (g->adaptive) {
        *h0 = (int)((int64_t)p * g->H / g->P);
        *h1 = (int)(((int64_t)(p + 1) * g->H + g->P - 1) / g->P);
        *w0 = (int)((int64_t)q * g->W / g->Q);
        *w1 = (int)(((int64_t)(q + 1) * g->W + g->Q - 1) / g->Q);
        return (float)((*h1 - *h0) * (*w1 - *w0));
    }
    const int hs = p * g->stride_h - g->pad_h, ws = q * g->stride_w - g->pad_w;
    pool_clamp(hs, g->kh, g->H, h0, h1);
    pool_clamp(ws, g->kw, g->W, w0, w1);
    if (!g->count_include_pad)
        return (float)((*h1 - *h0) * (*w1 - *w0));
    const int he = pool_imin(hs + g->kh, g->H + g->pad_b);
    const int we = pool_imin(ws + g->kw, g->W + g->pad_r);
    return (float)((he - hs) * (we - ws));
}

/* The outputs p whose window (k taps, dil apart, from p * stride - pad) can hold input row h:
 * a superset, [*lo, *hi], that a gathering backward narrows by an exact test. */
static inline DTNN_HOST_DEVICE void pool_candidates(int h, int k, int dil, int stride, int pad,
                                                    int P, int *lo, int *hi)
{
    *lo = pool_imax(0, pool_floor_div(h + pad - (k - 1) * dil, stride));
    *hi = pool_imin(P - 1, pool_floor_div(h + pad, stride));
}

#endif
