/*
 * pool.c — max and average pooling (kernel, stride, padding), forward and backward, as
 * torch.nn.MaxPool2d / AvgPool2d (count_include_pad selectable). Max pooling keeps the index of
 * each maximum (first one on ties, like PyTorch) so backward routes the gradient there.
 */
#include <string.h>

#include "cpu_kernels.h"

/* Clamps a pooling window [start, start + k) to [0, size). */
static void window(int start, int k, int size, int *lo, int *hi)
{
    *lo = start < 0 ? 0 : start;
    *hi = start + k > size ? size : start + k;
}

void cpu_maxpool_forward(const pool_geom *g, int n, const float *x, float *y, int32_t *argmax)
{
    const int planes = n * g->C;
#pragma omp parallel for schedule(static)
    for (int pl = 0; pl < planes; pl++) {
        const float *xp = x + (size_t)pl * g->H * g->W;
        float *yp = y + (size_t)pl * g->P * g->Q;
        int32_t *ap = argmax + (size_t)pl * g->P * g->Q;
        for (int p = 0; p < g->P; p++) {
            int h0, h1;
            window(p * g->stride_h - g->pad_h, g->kh, g->H, &h0, &h1);
            for (int q = 0; q < g->Q; q++) {
                int w0, w1;
                window(q * g->stride_w - g->pad_w, g->kw, g->W, &w0, &w1);
                /* The first maximum wins ties, as PyTorch; a NaN wins and propagates. */
                int32_t at = h0 * g->W + w0;
                float best = xp[at];
                for (int h = h0; h < h1 && best == best; h++)
                    for (int w = w0; w < w1; w++) {
                        float v = xp[h * g->W + w];
                        if (v > best || v != v) {
                            best = v;
                            at = h * g->W + w;
                            if (v != v)
                                break;
                        }
                    }
                yp[p * g->Q + q] = best;
                ap[p * g->Q + q] = at;
            }
        }
    }
}

void cpu_maxpool_backward(const pool_geom *g, int n, const float *dy, const int32_t *argmax,
                          float *dx, int accumulate)
{
    const int planes = n * g->C;
#pragma omp parallel for schedule(static)
    for (int pl = 0; pl < planes; pl++) {
        float *dxp = dx + (size_t)pl * g->H * g->W;
        const float *dyp = dy + (size_t)pl * g->P * g->Q;
        const int32_t *ap = argmax + (size_t)pl * g->P * g->Q;
        if (!accumulate)
            memset(dxp, 0, sizeof(float) * g->H * g->W);
        for (int i = 0; i < g->P * g->Q; i++)
            if (ap[i] >= 0)
                dxp[ap[i]] += dyp[i];
    }
}

static int pool_divisor(const pool_geom *g, int p, int q)
{
    if (g->count_include_pad) {
        int h0 = p * g->stride_h - g->pad_h, w0 = q * g->stride_w - g->pad_w;
        int h1 = h0 + g->kh, w1 = w0 + g->kw;
        if (h1 > g->H + g->pad_h)
            h1 = g->H + g->pad_h;
        if (w1 > g->W + g->pad_w)
            w1 = g->W + g->pad_w;
        return (h1 - h0) * (w1 - w0);
    }
    int h0 = p * g->stride_h - g->pad_h, w0 = q * g->stride_w - g->pad_w;
    int h1 = h0 + g->kh, w1 = w0 + g->kw;
    if (h0 < 0)
        h0 = 0;
    if (w0 < 0)
        w0 = 0;
    if (h1 > g->H)
        h1 = g->H;
    if (w1 > g->W)
        w1 = g->W;
    return (h1 - h0) * (w1 - w0);
}

void cpu_avgpool_forward(const pool_geom *g, int n, const float *x, float *y)
{
    const int planes = n * g->C;
#pragma omp parallel for schedule(static)
    for (int pl = 0; pl < planes; pl++) {
        const float *xp = x + (size_t)pl * g->H * g->W;
        float *yp = y + (size_t)pl * g->P * g->Q;
        for (int p = 0; p < g->P; p++) {
            for (int q = 0; q < g->Q; q++) {
                float sum = 0.0f;
                for (int i = 0; i < g->kh; i++) {
                    int h = p * g->stride_h - g->pad_h + i;
                    if (h < 0 || h >= g->H)
                        continue;
                    for (int j = 0; j < g->kw; j++) {
                        int w = q * g->stride_w - g->pad_w + j;
                        if (w >= 0 && w < g->W)
                            sum += xp[h * g->W + w];
                    }
                }
                yp[p * g->Q + q] = sum / (float)pool_divisor(g, p, q);
            }
        }
    }
}

void cpu_avgpool_backward(const pool_geom *g, int n, const float *dy, float *dx, int accumulate)
{
    const int planes = n * g->C;
#pragma omp parallel for schedule(static)
    for (int pl = 0; pl < planes; pl++) {
        float *dxp = dx + (size_t)pl * g->H * g->W;
        const float *dyp = dy + (size_t)pl * g->P * g->Q;
        if (!accumulate)
            memset(dxp, 0, sizeof(float) * g->H * g->W);
        for (int p = 0; p < g->P; p++) {
            for (int q = 0; q < g->Q; q++) {
                float v = dyp[p * g->Q + q] / (float)pool_divisor(g, p, q);
                for (int i = 0; i < g->kh; i++) {
                    int h = p * g->stride_h - g->pad_h + i;
                    if (h < 0 || h >= g->H)
                        continue;
                    for (int j = 0; j < g->kw; j++) {
                        int w = q * g->stride_w - g->pad_w + j;
                        if (w >= 0 && w < g->W)
                            dxp[h * g->W + w] += v;
                    }
                }
            }
        }
    }
}
