/*
 * depthwise.c — direct depthwise convolution (groups == C == K, one R x S filter per channel),
 * forward, backward to the input and backward to the weights, any kernel, stride, padding and
 * dilation. For MobileNetV2's 3x3 depthwise layers: through im2col each of them is C GEMMs of
 * one output row and 9 inputs, which spent most of a MobileNetV2 step in call overhead and
 * copies (measurements: docs/perf-notes.md).
 *
 * Loops run per channel plane (n, c), an output row at a time: for each kernel tap the valid
 * output range [q0, q1) is computed once, so the inner loop has no bounds tests and is a
 * contiguous multiply-add (stride 1) the compiler vectorises. Planes are independent, so the
 * forward and input-gradient loops split them over threads; the weight gradient splits the
 * channels (each thread owns its channels' filters: no reductions across threads, and the
 * result does not depend on the thread count).
 */
#include <string.h>

#include "cpu_kernels.h"

/* Output columns q whose input column q * stride + off lies in [0, W). */
static void valid_columns(const conv_geom *g, int off, int *q0, int *q1)
{
    const int sw = g->stride_w;
    *q0 = off >= 0 ? 0 : (-off + sw - 1) / sw;
    *q1 = g->W - 1 - off < 0 ? 0 : (g->W - 1 - off) / sw + 1;
    if (*q1 > g->Q)
        *q1 = g->Q;
}

/* Each kernel column's valid output range, found once per call: per plane and output row
 * its two divisions were most of a tap's cost on EfficientNet's 2x2 planes, where a tap adds
 * one or two products (960 x 2 x 2, batch 32: 2.1 ms forward; measurements:
 * docs/perf-notes.md). Kernels wider than MAX_S find them per tap, as before. */
enum { MAX_S = 16 };
typedef struct {
    int q0[MAX_S], q1[MAX_S];
} column_ranges;

static column_ranges column_ranges_of(const conv_geom *g)
{
    column_ranges cr;
    for (int s = 0; s < g->S && s < MAX_S; s++)
        valid_columns(g, s * g->dil_w - g->pad_w, &cr.q0[s], &cr.q1[s]);
    return cr;
}

static void columns_of(const conv_geom *g, const column_ranges *cr, int s, int *q0, int *q1)
{
    if (s < MAX_S) {
        *q0 = cr->q0[s];
        *q1 = cr->q1[s];
        return;
    }
    valid_columns(g, s * g->dil_w - g->pad_w, q0, q1);
}

void cpu_dw_conv_forward(const conv_geom *g, int n, const float *x, const float *w,
                         const float *bias, float *y)
{
    const long long planes = (long long)n * g->C;
    const int H = g->H, W = g->W, P = g->P, Q = g->Q, R = g->R, S = g->S, sw = g->stride_w;
    const column_ranges cr = column_ranges_of(g);
#pragma omp parallel for schedule(guided)
    for (long long pl = 0; pl < planes; pl++) {
        const int c = (int)(pl % g->C);
        const float *xp = x + (size_t)pl * H * W, *wc = w + (size_t)c * R * S;
        float *yp = y + (size_t)pl * P * Q;
        const float b = bias ? bias[c] : 0.0f;
        for (int p = 0; p < P; p++) {
            float *yr = yp + (size_t)p * Q;
            for (int q = 0; q < Q; q++)
                yr[q] = b;
            for (int r = 0; r < R; r++) {
                const int ih = p * g->stride_h - g->pad_h + r * g->dil_h;
                if (ih < 0 || ih >= H)
                    continue;
                for (int s = 0; s < S; s++) {
                    const int off = s * g->dil_w - g->pad_w;
                    int q0, q1;
                    columns_of(g, &cr, s, &q0, &q1);
                    const float wv = wc[r * S + s];
                    const float *xr = xp + (size_t)ih * W + off + q0 * sw;
                    float *yq = yr + q0;
                    if (sw == 1) {
                        for (int j = 0; j < q1 - q0; j++)
                            yq[j] += wv * xr[j];
                    } else {
                        for (int j = 0; j < q1 - q0; j++)
                            yq[j] += wv * xr[j * sw];
                    }
                }
            }
        }
    }
}

void cpu_dw_conv_backward_data(const conv_geom *g, int n, const float *dy, const float *w,
                               float *dx, int accumulate)
{
    const long long planes = (long long)n * g->C;
    const int H = g->H, W = g->W, P = g->P, Q = g->Q, R = g->R, S = g->S, sw = g->stride_w;
    const column_ranges cr = column_ranges_of(g);
#pragma omp parallel for schedule(guided)
    for (long long pl = 0; pl < planes; pl++) {
        const int c = (int)(pl % g->C);
        const float *dyp = dy + (size_t)pl * P * Q, *wc = w + (size_t)c * R * S;
        float *dxp = dx + (size_t)pl * H * W;
        if (!accumulate)
            memset(dxp, 0, sizeof(float) * H * W);
        for (int p = 0; p < P; p++) {
            const float *dyr = dyp + (size_t)p * Q;
            for (int r = 0; r < R; r++) {
                const int ih = p * g->stride_h - g->pad_h + r * g->dil_h;
                if (ih < 0 || ih >= H)
                    continue;
                for (int s = 0; s < S; s++) {
                    const int off = s * g->dil_w - g->pad_w;
                    int q0, q1;
                    columns_of(g, &cr, s, &q0, &q1);
                    const float wv = wc[r * S + s];
                    float *dxr = dxp + (size_t)ih * W + off + q0 * sw;
                    const float *dyq = dyr + q0;
                    if (sw == 1) {
                        for (int j = 0; j < q1 - q0; j++)
                            dxr[j] += wv * dyq[j];
                    } else {
                        for (int j = 0; j < q1 - q0; j++)
                            dxr[j * sw] += wv * dyq[j];
                    }
                }
            }
        }
    }
}

void cpu_dw_conv_backward_weight(const conv_geom *g, int n, const float *x, const float *dy,
                                 float *dw)
{
    const int H = g->H, W = g->W, P = g->P, Q = g->Q, R = g->R, S = g->S, sw = g->stride_w;
    const column_ranges cr = column_ranges_of(g);
#pragma omp parallel for schedule(guided)
    for (int c = 0; c < g->C; c++) {
        float *dwc = dw + (size_t)c * R * S;
        for (int i = 0; i < n; i++) {
            const size_t pl = (size_t)i * g->C + c;
            const float *xp = x + pl * H * W, *dyp = dy + pl * P * Q;
            for (int p = 0; p < P; p++) {
                const float *dyr = dyp + (size_t)p * Q;
                for (int r = 0; r < R; r++) {
                    const int ih = p * g->stride_h - g->pad_h + r * g->dil_h;
                    if (ih < 0 || ih >= H)
                        continue;
                    for (int s = 0; s < S; s++) {
                        const int off = s * g->dil_w - g->pad_w;
                        int q0, q1;
                        columns_of(g, &cr, s, &q0, &q1);
                        const float *xr = xp + (size_t)ih * W + off + q0 * sw;
                        const float *dyq = dyr + q0;
                        float acc = 0.0f;
                        /* A plain sum: `omp simd reduction` vectorises it with gcc, but clang
                         * cannot under the sanitizers and -Werror turns its notice into an
                         * error; the weight gradient is a small part of a depthwise layer. */
                        if (sw == 1) {
                            for (int j = 0; j < q1 - q0; j++)
                                acc += dyq[j] * xr[j];
                        } else {
                            for (int j = 0; j < q1 - q0; j++)
                                acc += dyq[j] * xr[j * sw];
                        }
                        dwc[r * S + s] += acc;
                    }
                }
            }
        }
    }
}
