/*
 * im2col.c — unfolding of one image into convolution columns and its adjoint (col2im), with
 * stride, padding and dilation. The rows are (channel, r, s), the columns output pixels (p, q),
 * so a convolution becomes W [K, C*R*S] x col [C*R*S, P*Q]. Several images sit side by side in
 * one col matrix (ldcol = images * P * Q) so one GEMM serves a whole chunk of the batch.
 */
#include <string.h>

#include "cpu_kernels.h"

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
        for (int p = 0; p < P; p++) {
            int h = p * g->stride_h + dh;
            float *d = dst + (size_t)p * Q;
            if (h < 0 || h >= H) {
                memset(d, 0, sizeof(float) * Q);
                continue;
            }
            const float *xr = xc + (size_t)h * W;
            if (g->stride_w == 1) {
                for (int q = 0; q < Q; q++) {
                    int w = q + dw;
                    d[q] = (w >= 0 && w < W) ? xr[w] : 0.0f;
                }
            } else {
                for (int q = 0; q < Q; q++) {
                    int w = q * g->stride_w + dw;
                    d[q] = (w >= 0 && w < W) ? xr[w] : 0.0f;
                }
            }
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
                for (int p = 0; p < P; p++) {
                    int h = p * g->stride_h + dh;
                    if (h < 0 || h >= H)
                        continue;
                    float *xr = dxc + (size_t)h * W;
                    const float *sr = src + (size_t)p * Q;
                    for (int q = 0; q < Q; q++) {
                        int w = q * g->stride_w + dw;
                        if (w >= 0 && w < W)
                            xr[w] += sr[q];
                    }
                }
            }
        }
    }
}
