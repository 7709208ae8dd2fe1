/*
 * im2col.c — unfolding of one image into convolution columns and its adjoint (col2im), with
 * stride, padding and dilation. The rows are (channel, r, s), the columns output pixels (p, q),
 * so a convolution becomes W [K, C*R*S] x col [C*R*S, P*Q]. Several images sit side by side in
 * one col matrix (ldcol = images * P * Q) so one GEMM serves a whole chunk of the batch.
 */
#include <string.h>

#include "cpu_kernels.h"

/* The output columns q whose input column q * stride + offset lies inside [0, W). */
static void valid_range(int Q, int W, int stride, int offset, int *lo, int *hi)
{
    int a = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
    int b = W - offset <= 0 ? 0 : (W - offset + stride - 1) / stride;
    *lo = a < Q ? a : Q;
    *hi = b < Q ? b : Q;
    if (*hi < *lo)
        *hi = *lo;
}

void cpu_im2col(const conv_geom *g, const float *x, int c0, int cc, float *col, int ldcol)
{
    const int H = g->H, W = g->W, P = g->P, Q = g->Q, R = g->R, S = g->S;
    const int rows = cc * R * S;
#pragma omp parallel for schedule(static) if (rows * P * Q > 32768)
    for (int row = 0; row < rows; row++) {
        int s = row % S, r = (row / S) % R, c = c0 + row / (R * S);
        const float *xc = x + (size_t)c * H * W;
        float *dst = col + (size_t)row * ldcol;
        int dh = r * g->dil_h - g->pad_h, dw = s * g->dil_w - g->pad_w;
        int lo, hi;
        valid_range(Q, W, g->stride_w, dw, &lo, &hi);
        for (int p = 0; p < P; p++) {
            int h = p * g->stride_h + dh;
            float *d = dst + (size_t)p * Q;
            if (h < 0 || h >= H) {
                memset(d, 0, sizeof(float) * Q);
                continue;
            }
            const float *xr = xc + (size_t)h * W + dw;
            for (int q = 0; q < lo; q++)
                d[q] = 0.0f;
            if (g->stride_w == 1) {
                memcpy(d + lo, xr + lo, sizeof(float) * (hi - lo));
            } else {
                for (int q = lo; q < hi; q++)
                    d[q] = xr[q * g->stride_w];
            }
            for (int q = hi; q < Q; q++)
                d[q] = 0.0f;
        }
    }
}

void cpu_col2im(const conv_geom *g, const float *col, int ldcol, int c0, int cc, float *dx)
{
    const int H = g->H, W = g->W, P = g->P, Q = g->Q, R = g->R, S = g->S;
    /* Parallel over channels: each channel's (r, s) rows write only that channel of dx, and
     * the summation order per element is fixed, so results do not depend on the thread count. */
#pragma omp parallel for schedule(static) if (cc * R * S * P * Q > 32768)
    for (int ci = 0; ci < cc; ci++) {
        float *dxc = dx + (size_t)(c0 + ci) * H * W;
        for (int r = 0; r < R; r++) {
            for (int s = 0; s < S; s++) {
                const float *src = col + (size_t)((ci * R + r) * S + s) * ldcol;
                int dh = r * g->dil_h - g->pad_h, dw = s * g->dil_w - g->pad_w;
                int lo, hi;
                valid_range(Q, W, g->stride_w, dw, &lo, &hi);
                for (int p = 0; p < P; p++) {
                    int h = p * g->stride_h + dh;
                    if (h < 0 || h >= H)
                        continue;
                    float *xr = dxc + (size_t)h * W + dw;
                    const float *sr = src + (size_t)p * Q;
                    if (g->stride_w == 1) {
                        for (int q = lo; q < hi; q++)
                            xr[q] += sr[q];
                    } else {
                        for (int q = lo; q < hi; q++)
                            xr[q * g->stride_w] += sr[q];
                    }
                }
            }
        }
    }
}
