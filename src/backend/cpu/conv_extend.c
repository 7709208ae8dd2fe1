/*
 * conv_extend.c — images extended with zero rows and columns at the bottom and right, and
 * outputs cropped back, so that a 3x3 convolution with stride 1 and padding 1 whose size
 * Winograd's tiles do not take (ResNet-50's 28x28, 14x14 and 7x7 stages: widths not a multiple
 * of 8, odd heights) runs on Winograd over the extended size (cpu_conv.c). Exact: an output
 * inside reads input rows and columns up to one past the image, which were the convolution's
 * zero padding and are now the extension's zeros; the extended output gradient is zero
 * outside, so input and weight gradients are the same sums, with the zeros' products added.
 */
#include <string.h>

#include "cpu_kernels.h"

/* The size F(4x4) takes (height a multiple of 4, width of 16: 14x14 -> 16x16) where that adds
 * at most a third of the pixels, else the smallest F(2x2) takes (an even height, a width of a
 * multiple of 8: 7x7 -> 8x8). F(4x4) needs 2.25 products per output and channel pair where
 * F(2x2) needs 4, so at 14x14 its 16x16 does 1.56x fewer than F(2x2)'s 14x16. */
conv_geom cpu_conv_extended(const conv_geom *g)
{
    conv_geom x = *g;
    const int h4 = (g->H + 3) / 4 * 4, w16 = (g->W + 15) / 16 * 16;
    if ((size_t)h4 * w16 * 3 <= (size_t)g->H * g->W * 4) {
        x.H = x.P = h4;
        x.W = x.Q = w16;
    } else {
        x.H = x.P = (g->H + 1) / 2 * 2;
        x.W = x.Q = (g->W + 7) / 8 * 8;
    }
    return x;
}

void cpu_extend_planes(const float *src, size_t planes, int H, int W, int Hx, int Wx,
                       float *dst)
{
#pragma omp parallel for schedule(static) if (planes * (size_t)Hx * Wx > 65536)
    for (long long pl = 0; pl < (long long)planes; pl++) {
        const float *s = src + (size_t)pl * H * W;
        float *d = dst + (size_t)pl * Hx * Wx;
        for (int r = 0; r < H; r++) {
            memcpy(d + (size_t)r * Wx, s + (size_t)r * W, sizeof(float) * W);
            memset(d + (size_t)r * Wx + W, 0, sizeof(float) * (size_t)(Wx - W));
        }
        memset(d + (size_t)H * Wx, 0, sizeof(float) * (size_t)(Hx - H) * Wx);
    }
}

void cpu_crop_planes(const float *src, size_t planes, int Hx, int Wx, int H, int W, float *dst,
                     int accumulate)
{
#pragma omp parallel for schedule(static) if (planes * (size_t)H * W > 65536)
    for (long long pl = 0; pl < (long long)planes; pl++) {
        const float *s = src + (size_t)pl * Hx * Wx;
        float *d = dst + (size_t)pl * H * W;
        for (int r = 0; r < H; r++) {
            if (accumulate)
                for (int q = 0; q < W; q++)
                    d[(size_t)r * W + q] += s[(size_t)r * Wx + q];
            else
                memcpy(d + (size_t)r * W, s + (size_t)r * Wx, sizeof(float) * W);
        }
    }
}
