/*
 * shortcut.c — the CPU's option-A shortcut (He et al., ResNet-20/32/56 on CIFAR): forward
 * subsamples every stride-th pixel into the middle channels and zeroes the padding channels;
 * backward scatters the gradient back and writes zero at the pixels the forward skipped.
 */
#include <string.h>

#include "cpu_kernels.h"

/* One output row from an input row: every stride-th value. Stride 2 (every ResNet) has its
 * own loop, with a constant stride GCC vectorizes (two loads and a shuffle per 8 values). */
static void subsample_row(const float *x, int stride, int Q, float *y)
{
    if (stride == 2)
        for (int q = 0; q < Q; q++)
            y[q] = x[2 * q];
    else
        for (int q = 0; q < Q; q++)
            y[q] = x[(size_t)q * stride];
}

/* Plane by plane over the batch, in parallel: as one thread's scalar loop this layer took as
 * long at 2 threads as at 1 (measurements: docs/perf-notes.md). */
void cpu_shortcut_forward(const shortcut_geom *c, int n, const float *x0, float *y0)
{
    const size_t in_size = (size_t)c->C * c->H * c->W, out_size = (size_t)c->K * c->P * c->Q;
    const size_t PQ = (size_t)c->P * c->Q, HW = (size_t)c->H * c->W;
    const long long planes = (long long)n * c->K;
#pragma omp parallel for schedule(guided)
    for (long long pl = 0; pl < planes; pl++) {
        const int s = (int)(pl / c->K), ch = (int)(pl % c->K) - c->at;
        float *y = y0 + s * out_size + (size_t)(pl % c->K) * PQ;
        if (ch < 0 || ch >= c->C) {     /* a padding channel */
            memset(y, 0, sizeof(float) * PQ);
            continue;
        }
        const float *x = x0 + s * in_size + (size_t)ch * HW;
        for (int p = 0; p < c->P; p++)
            subsample_row(x + (size_t)p * c->stride * c->W, c->stride, c->Q, y + (size_t)p * c->Q);
    }
}

/* dx gets dy at the kept positions and, unless adding, zero elsewhere: written row by row in
 * one pass (a memset of all of dx first, then the scatter, wrote it twice). */
void cpu_shortcut_backward(const shortcut_geom *c, int n, const float *dy0, float *dx,
                           int accumulate)
{
    const size_t in_size = (size_t)c->C * c->H * c->W, out_size = (size_t)c->K * c->P * c->Q;
    const size_t PQ = (size_t)c->P * c->Q, HW = (size_t)c->H * c->W;
    const int acc = accumulate, stride = c->stride, W = c->W;
    const long long planes = (long long)n * c->C;
#pragma omp parallel for schedule(guided)
    for (long long pl = 0; pl < planes; pl++) {
        const int s = (int)(pl / c->C), ch = (int)(pl % c->C);
        const float *dy = dy0 + s * out_size + (size_t)(c->at + ch) * PQ;
        float *dxc = dx + s * in_size + (size_t)ch * HW;
        for (int yy = 0; yy < c->H; yy++) {
            float *row = dxc + (size_t)yy * W;
            const float *d = dy + (size_t)(yy / stride) * c->Q;
            if (yy % stride) {
                if (!acc)
                    memset(row, 0, sizeof(float) * W);
            } else if (acc) {
                for (int q = 0; q < c->Q; q++)
                    row[(size_t)q * stride] += d[q];
            } else if (stride == 2) {
                for (int q = 0; q < W / 2; q++) {
                    row[2 * q] = d[q];
                    row[2 * q + 1] = 0.0f;
                }
                if (W % 2)
                    row[W - 1] = d[W / 2];
            } else {
                for (int x = 0; x < W; x++)
                    row[x] = x % stride ? 0.0f : d[x / stride];
            }
        }
    }
}

