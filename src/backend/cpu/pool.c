/*
 * pool.c — max and average pooling (kernel, stride, padding on each side, max pooling's
 * dilation), forward and backward, as torch.nn.MaxPool2d / AvgPool2d (count_include_pad
 * selectable) and AdaptiveAvgPool2d. Max pooling keeps the index of each maximum (first one on
 * ties, like PyTorch) so backward routes the gradient there. The output size (ceil mode or
 * not) comes with the geometry; the kernels only visit the taps inside the input. The window,
 * tie and divisor rules are formulas/pool_formulas.h's, shared with the CUDA kernels.
 */
#include <math.h>
#include <string.h>

#include "../../core/internal.h"
#include "../formulas/pool_formulas.h"
#include "cpu_kernels.h"

/* One plane without padding, every window inside the image (LeNet's and VGG's 2x2 / 2):
 * the same choice as the general loop below (the first maximum wins ties, the first NaN wins
 * and stays), made a whole output row at a time, window offset by window offset, with
 * selects the compiler vectorises. Per output, as below, LeNet-5's first pooling was a large
 * share of its training step (measurements: docs/perf-notes.md). */
static void maxpool_plane_inside(const pool_geom *g, const float *xp, float *yp, int32_t *ap)
{
    const int W = g->W, Q = g->Q, sw = g->stride_w;
    for (int p = 0; p < g->P; p++, yp += Q, ap += Q) {
        const int h0 = p * g->stride_h;
        for (int q = 0; q < Q; q++) {
            yp[q] = xp[h0 * W + q * sw];
            ap[q] = h0 * W + q * sw;
        }
        for (int h = h0; h < h0 + g->kh; h++)
            for (int w = 0; w < g->kw; w++) {
                const float *row = xp + h * W + w;
                const int32_t base = h * W + w;
                for (int q = 0; q < Q; q++) {
                    const float v = row[q * sw], best = yp[q];
                    const int take = (v > best) | ((v != v) & (best == best));
                    yp[q] = take ? v : best;
                    ap[q] = take ? base + q * sw : ap[q];
                }
            }
    }
}

void cpu_maxpool_forward(const pool_geom *g, int n, const float *x, float *y, int32_t *argmax)
{
    const int planes = n * g->C;
    const int inside = g->pad_h == 0 && g->pad_w == 0 && g->dil_h == 1 && g->dil_w == 1 &&
                       (g->P - 1) * g->stride_h + g->kh <= g->H &&
                       (g->Q - 1) * g->stride_w + g->kw <= g->W;
#pragma omp parallel for schedule(guided)
    for (int pl = 0; pl < planes; pl++) {
        const float *xp = x + (size_t)pl * g->H * g->W;
        float *yp = y + (size_t)pl * g->P * g->Q;
        int32_t *ap = argmax + (size_t)pl * g->P * g->Q;
        if (inside) {
            maxpool_plane_inside(g, xp, yp, ap);
            continue;
        }
        for (int p = 0; p < g->P; p++)
            for (int q = 0; q < g->Q; q++)
                yp[p * g->Q + q] = pool_max_window(g, xp, p, q, &ap[p * g->Q + q]);
    }
}

void cpu_maxpool_backward(const pool_geom *g, int n, const float *dy, const int32_t *argmax,
                          float *dx, int accumulate)
{
    const int planes = n * g->C;
#pragma omp parallel for schedule(guided)
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

void cpu_avgpool_forward(const pool_geom *g, int n, const float *x, float *y)
{
    const int planes = n * g->C;
#pragma omp parallel for schedule(guided)
    for (int pl = 0; pl < planes; pl++) {
        const float *xp = x + (size_t)pl * g->H * g->W;
        float *yp = y + (size_t)pl * g->P * g->Q;
        for (int p = 0; p < g->P; p++) {
            for (int q = 0; q < g->Q; q++) {
                int h0, h1, w0, w1;
                float divisor = pool_avg_window(g, p, q, &h0, &h1, &w0, &w1);
                float sum = 0.0f;
                for (int h = h0; h < h1; h++)
                    for (int w = w0; w < w1; w++)
                        sum += xp[h * g->W + w];
                yp[p * g->Q + q] = sum / divisor;
            }
        }
    }
}

void cpu_avgpool_backward(const pool_geom *g, int n, const float *dy, float *dx, int accumulate)
{
    const int planes = n * g->C;
#pragma omp parallel for schedule(guided)
    for (int pl = 0; pl < planes; pl++) {
        float *dxp = dx + (size_t)pl * g->H * g->W;
        const float *dyp = dy + (size_t)pl * g->P * g->Q;
        if (!accumulate)
            memset(dxp, 0, sizeof(float) * g->H * g->W);
        for (int p = 0; p < g->P; p++) {
            for (int q = 0; q < g->Q; q++) {
                int h0, h1, w0, w1;
                float divisor = pool_avg_window(g, p, q, &h0, &h1, &w0, &w1);
                float v = dyp[p * g->Q + q] / divisor;
                for (int h = h0; h < h1; h++)
                    for (int w = w0; w < w1; w++)
                        dxp[h * g->W + w] += v;
            }
        }
    }
}
