/*
 * conv_winograd_small.c — Winograd's transforms one tile at a time, read straight from the
 * plane, for wide layers on planes narrower than a vector row of tiles: F(4x4) on 4x4, 8x8
 * and 12x12 images (1 to 3 tiles a row: VGG's last two stages at 64x64 input, ResNet-50's 7x7
 * stage extended to 8x8) and the weight gradient's F(2x2) on 4x4 and 12x12 (2 or 6 a row).
 * conv_winograd_transforms.c's vector forms need 4 or 8 tiles a row. In a wide layer (more
 * than 64 channels in or out) a tile's products cost alpha^2 x outs multiply-adds per input
 * channel, so transforms at one tile a time are a small share, and F(4x4) needs 2.25 products
 * per output where F(2x2) needs 4 and direct summation 9.
 *
 * The arithmetic is the vector forms', operation for operation (the same fused multiply-adds,
 * the same order), so a tile's values do not depend on which form transformed it, and
 * --precision bf16's roundings (wg->bf16) fall at the same points: inputs and output
 * gradients as read, outputs before the bias.
 */
#include <math.h>

#include "../../core/half.h"
#include "conv_winograd.h"

#ifdef CONV_WINOGRAD

/* pixel (y, x) of a plane of rows x cols, zero outside (the convolution's padding) */
static inline float pixel(const wino_geom *wg, const float *src, int y, int x)
{
    if (y < 0 || y >= wg->rows || x < 0 || x >= wg->cols)
        return 0.0f;
    const float p = src[(size_t)y * wg->cols + x];
    return wg->bf16 & CPU_WINO_BF16 ? bf16_round(p) : p;
}

/* B^T d of F(4x4) (conv_winograd_transforms.c's bt6) */
static inline void bt6(const float d[6], float o[6])
{
    const float a = fmaf(-4.0f, d[2], d[4]), b = fmaf(-4.0f, d[1], d[3]);
    const float c = d[4] - d[2], e = 2.0f * (d[3] - d[1]);
    o[0] = fmaf(4.0f, d[0], fmaf(-5.0f, d[2], d[4]));
    o[1] = a + b;
    o[2] = a - b;
    o[3] = c + e;
    o[4] = c - e;
    o[5] = fmaf(4.0f, d[1], fmaf(-5.0f, d[3], d[5]));
}

/* A^T m of F(4x4) (at6) */
static inline void at6(const float m[6], float o[4])
{
    const float a = m[1] + m[2], b = m[1] - m[2], c = m[3] + m[4], d = m[3] - m[4];
    o[0] = (m[0] + a) + c;
    o[1] = fmaf(2.0f, d, b);
    o[2] = fmaf(4.0f, c, a);
    o[3] = fmaf(8.0f, d, b) + m[5];
}

/* V[xi][tile] = B^T d B for every tile of one plane, tile t at v + t */
static void input_f4(const wino_geom *wg, const float *src, float *v, size_t xi_stride)
{
    for (int ty = 0; ty < wg->TH; ty++)
        for (int tx = 0; tx < wg->TW; tx++) {
            float e[6][6];
            for (int i = 0; i < 6; i++) {
                float d[6];
                for (int j = 0; j < 6; j++)
                    d[j] = pixel(wg, src, 4 * ty + i - 1, 4 * tx + j - 1);
                bt6(d, e[i]);
            }
            float *dst = v + (size_t)ty * wg->TW + tx;
            for (int j = 0; j < 6; j++) {
                const float col[6] = {e[0][j], e[1][j], e[2][j], e[3][j], e[4][j], e[5][j]};
                float o[6];
                bt6(col, o);
                for (int k = 0; k < 6; k++)
                    dst[(size_t)(k * 6 + j) * xi_stride] = o[k];
            }
        }
}

/* the same for F(2x2) (TRANSFORM_INPUT's arithmetic) */
static void input_f2(const wino_geom *wg, const float *src, float *v, size_t xi_stride)
{
    for (int ty = 0; ty < wg->TH; ty++)
        for (int tx = 0; tx < wg->TW; tx++) {
            float e[4][4];
            for (int i = 0; i < 4; i++) {
                const int y = 2 * ty + i - 1, x = 2 * tx - 1;
                const float d0 = pixel(wg, src, y, x), d1 = pixel(wg, src, y, x + 1);
                const float d2 = pixel(wg, src, y, x + 2), d3 = pixel(wg, src, y, x + 3);
                e[i][0] = d0 - d2;
                e[i][1] = d1 + d2;
                e[i][2] = d2 - d1;
                e[i][3] = d1 - d3;
            }
            float *dst = v + (size_t)ty * wg->TW + tx;
            for (int j = 0; j < 4; j++) {
                dst[(size_t)(0 * 4 + j) * xi_stride] = e[0][j] - e[2][j];
                dst[(size_t)(1 * 4 + j) * xi_stride] = e[1][j] + e[2][j];
                dst[(size_t)(2 * 4 + j) * xi_stride] = e[2][j] - e[1][j];
                dst[(size_t)(3 * 4 + j) * xi_stride] = e[1][j] - e[3][j];
            }
        }
}

void wino_small_input(const wino_geom *wg, const float *src, float *v, size_t xi_stride)
{
    if (wg->m == 4)
        input_f4(wg, src, v, xi_stride);
    else
        input_f2(wg, src, v, xi_stride);
}

/* The 4x4 outputs of one tile (A^T m A, + bias), written or added from `out` on (row stride
 * cols). Only F(4x4) comes here: a forward pass or input gradient on these planes is F(4x4)
 * (tile_size). */
void wino_small_output(const wino_geom *wg, const float *m, size_t xi_stride, float bias,
                       float *out, int accumulate)
{
    float s[4][6];
    for (int j = 0; j < 6; j++) {
        float col[6], c[4];
        for (int i = 0; i < 6; i++)
            col[i] = m[(size_t)(i * 6 + j) * xi_stride];
        at6(col, c);
        for (int a = 0; a < 4; a++)
            s[a][j] = c[a];
    }
    for (int a = 0; a < 4; a++) {
        float o[4];
        at6(s[a], o);
        float *row = out + (size_t)a * wg->cols;
        for (int k = 0; k < 4; k++) {
            const float y = (wg->bf16 & CPU_WINO_BF16 ? bf16_round(o[k]) : o[k]) + bias;
            row[k] = accumulate ? y + row[k] : y;
        }
    }
}

/* D[xi][tile] = A dy A^T for every 2x2 tile of one output-gradient plane (TRANSFORM_GRAD's
 * arithmetic: 0 - c, not -c, so a zero stays +0 as there) */
void wino_small_grad(const wino_geom *wg, const float *dy, float *d, size_t xi_stride)
{
    for (int ty = 0; ty < wg->TH; ty++)
        for (int tx = 0; tx < wg->TW; tx++) {
            const float a = pixel(wg, dy, 2 * ty, 2 * tx), b = pixel(wg, dy, 2 * ty, 2 * tx + 1);
            const float c = pixel(wg, dy, 2 * ty + 1, 2 * tx);
            const float e = pixel(wg, dy, 2 * ty + 1, 2 * tx + 1);
            const float p[4] = {a, a + c, a - c, 0.0f - c};
            const float q[4] = {b, b + e, b - e, 0.0f - e};
            float *dst = d + (size_t)ty * wg->TW + tx;
            for (int i = 0; i < 4; i++) {
                dst[(size_t)(i * 4 + 0) * xi_stride] = p[i];
                dst[(size_t)(i * 4 + 1) * xi_stride] = p[i] + q[i];
                dst[(size_t)(i * 4 + 2) * xi_stride] = p[i] - q[i];
                dst[(size_t)(i * 4 + 3) * xi_stride] = 0.0f - q[i];
            }
        }
}

#else
/* This compile has no AVX2: the transforms are not built (an empty file is not C). */
typedef int conv_winograd_small_unused;
#endif
