/*
 * im2col.c — unfolding of one image into convolution columns and its adjoint (col2im), with
 * stride, padding and dilation. The rows are (channel, r, s), the columns output pixels (p, q),
 * so a convolution becomes W [K, C*R*S] x col [C*R*S, P*Q]. Several images sit side by side in
 * one col matrix (ldcol = images * P * Q, image i at column i * P * Q) so one GEMM serves a
 * whole chunk of the batch; both calls take the whole chunk (images contiguous in x / dx).
 * The products' other side moves between the same layouts: a chunk's images [nb, ch, pq]
 * gathered into [ch, nb * pq] and scattered back (cpu_gather_images, cpu_scatter_images).
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

/* Copies n floats. The rows here are short (8 to 64 floats for CIFAR-sized layers), where a
 * call to memcpy costs more than the copy, so fixed 8-float blocks the compiler turns into
 * vector moves, then the tail. */
static inline void copy_row(float *restrict d, const float *restrict s, int n)
{
    int q = 0;
    for (; q + 8 <= n; q += 8)
        memcpy(d + q, s + q, 8 * sizeof(float));
    for (; q < n; q++)
        d[q] = s[q];
}

/* Row (c, r, s) of one image's columns: the input pixels each output pixel (p, q) sees
 * through kernel offset (r, s), zero where that falls into the padding. */
static void im2col_row(const conv_geom *g, const float *xc, int r, int s, float *d)
{
    const int H = g->H, W = g->W, P = g->P, Q = g->Q;
    int dh = r * g->dil_h - g->pad_h, dw = s * g->dil_w - g->pad_w;
    int lo, hi;
    valid_range(Q, W, g->stride_w, dw, &lo, &hi);
    for (int p = 0; p < P; p++, d += Q) {
        int h = p * g->stride_h + dh;
        if (h < 0 || h >= H) {
            memset(d, 0, sizeof(float) * Q);
            continue;
        }
        const float *xr = xc + (size_t)h * W + dw;
        for (int q = 0; q < lo; q++)
            d[q] = 0.0f;
        if (g->stride_w == 1) {
            copy_row(d + lo, xr + lo, hi - lo);
        } else if (g->stride_w == 2) {
            /* a constant stride the compiler vectorises (ResNet's downsampling 3x3 / 2):
             * through the general loop below those layers spent more time in im2col than in
             * their GEMM */
            for (int q = lo; q < hi; q++)
                d[q] = xr[2 * q];
        } else {
            for (int q = lo; q < hi; q++)
                d[q] = xr[q * g->stride_w];
        }
        for (int q = hi; q < Q; q++)
            d[q] = 0.0f;
    }
}

/* One parallel region for the whole chunk of images (not one per image): each thread takes
 * rows of col and fills them for every image, so its writes stream through one row. */
void cpu_im2col(const conv_geom *g, const float *x, int images, float *col, int ldcol)
{
    const int R = g->R, S = g->S, PQ = g->P * g->Q;
    const int rows = g->C * R * S;
    const size_t image = (size_t)g->C * g->H * g->W;
#pragma omp parallel for schedule(guided) if ((size_t)rows * PQ * images > 32768)
    for (int row = 0; row < rows; row++) {
        int s = row % S, r = (row / S) % R, c = row / (R * S);
        for (int i = 0; i < images; i++)
            im2col_row(g, x + i * image + (size_t)c * g->H * g->W, r, s,
                       col + (size_t)row * ldcol + (size_t)i * PQ);
    }
}

void cpu_col2im(const conv_geom *g, const float *col, int ldcol, int images, float *dx)
{
    const int H = g->H, W = g->W, P = g->P, Q = g->Q, R = g->R, S = g->S, PQ = P * Q;
    const size_t image = (size_t)g->C * H * W;
    /* Parallel over images x channels: each (r, s) row of a channel writes only that channel
     * of that image's dx, and the summation order per element is fixed, so results do not
     * depend on the thread count. */
#pragma omp parallel for schedule(guided) if ((size_t)g->C * R * S * PQ * images > 32768)
    for (int job = 0; job < images * g->C; job++) {
        int i = job / g->C, ci = job % g->C;
        float *dxc = dx + i * image + (size_t)ci * H * W;
        for (int r = 0; r < R; r++) {
            for (int s = 0; s < S; s++) {
                const float *src = col + (size_t)((ci * R + r) * S + s) * ldcol + (size_t)i * PQ;
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
                    } else if (g->stride_w == 2) {
                        for (int q = lo; q < hi; q++)
                            xr[2 * q] += sr[q];
                    } else {
                        for (int q = lo; q < hi; q++)
                            xr[q * g->stride_w] += sr[q];
                    }
                }
            }
        }
    }
}

/* Both copies split the channels among the threads: in a layer's step they sit between two
 * threaded products, and run alone they held the team back (ResNet-50's stride-2 layers). */
void cpu_gather_images(const float *src, int nb, int ch, int pq, size_t image, float *dst)
{
    const size_t ld = (size_t)nb * pq;
#pragma omp parallel for schedule(static) if ((size_t)ch * ld > 32768)
    for (int c = 0; c < ch; c++)
        for (int i = 0; i < nb; i++)
            memcpy(dst + c * ld + (size_t)i * pq, src + i * image + (size_t)c * pq,
                   sizeof(float) * pq);
}

void cpu_scatter_images(const float *src, int nb, int ch, int pq, size_t image,
                        const float *bias, int accumulate, float *dst)
{
    const size_t ld = (size_t)nb * pq;
#pragma omp parallel for schedule(static) if ((size_t)ch * ld > 32768)
    for (int c = 0; c < ch; c++) {
        const float b = bias ? bias[c] : 0.0f;
        for (int i = 0; i < nb; i++) {
            const float *s = src + c * ld + (size_t)i * pq;
            cpu_store_row(dst + i * image + (size_t)c * pq, s, pq, b, accumulate);
        }
    }
}
