/*
 * elementwise.c — the CPU's element-wise operations: multi-input add (with a fused ReLU) and
 * its backward, strided row copies (concat, flatten, identity passes; with accumulate, the
 * engine's y += x), fill, dropout with counter-based masks, the finite check, and batch norm's
 * parameter gradients.
 * All are memory-bound streams: OpenMP-static halves of the array from 64 Ki values on (below,
 * a fork/join costs more than the pass), each value computed by one fixed expression, so
 * results do not depend on the thread count. The formulas that are more than a copy or a sum
 * are formulas/elementwise_formulas.h's, shared with the CUDA backend.
 */
#include <math.h>
#include <string.h>

#include "cpu_kernels.h"
#include "../formulas/elementwise_formulas.h"

/* One pass over all inputs (a copy then one pass per further input would read y again each
 * time), split over the threads. The sum is ((x_0 + x_1) + x_2) + ...; a fused ReLU clamps
 * the last pass's result (a NaN stays NaN, as ReLU's). */
void cpu_add_forward(size_t count, int n_in, const float *const *x, int relu, float *y)
{
    const long long n = (long long)count;
    const float *a = x[0], *b = x[1];
    const int relu_now = relu && n_in == 2;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (long long i = 0; i < n; i++) {
        const float v = a[i] + b[i];
        y[i] = add_relu_if(v, relu_now);
    }
    for (int k = 2; k < n_in; k++) {
        const float *xk = x[k];
        const int clamp = relu && k == n_in - 1;
#pragma omp parallel for schedule(static) if (n > 65536)
        for (long long i = 0; i < n; i++) {
            const float v = y[i] + xk[i];
            y[i] = add_relu_if(v, clamp);
        }
    }
}

/* Every input's gradient is dy, or with a fused ReLU dy where y > 0: made once per block of
 * values and handed to all inputs while in L1, so dy and y are read once. Inputs in increasing
 * order within a block: when two are one producer, the first writes and the second adds. */
enum { ADD_BLOCK = 1024 };

void cpu_add_backward(size_t count, const float *y, const float *dy, int n_out,
                      float *const *dx, const int *accumulate)
{
    const long long n = (long long)count;
    const long long blocks = (n + ADD_BLOCK - 1) / ADD_BLOCK;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (long long bl = 0; bl < blocks; bl++) {
        const long long i0 = bl * ADD_BLOCK;
        const int len = (int)(n - i0 < ADD_BLOCK ? n - i0 : ADD_BLOCK);
        float masked[ADD_BLOCK];
        const float *g = dy + i0;
        if (y) {
            const float *yb = y + i0;
            for (int i = 0; i < len; i++)
                masked[i] = act_relu_grad(yb[i], g[i]);
            g = masked;
        }
        for (int k = 0; k < n_out; k++) {
            float *d = dx[k] ? dx[k] + i0 : NULL;
            if (!d)
                continue;
            if (accumulate[k])
                for (int i = 0; i < len; i++)
                    d[i] += g[i];
            else
                for (int i = 0; i < len; i++)
                    d[i] = g[i];
        }
    }
}

void cpu_copy_rows(size_t rows, size_t cols, float *dst, size_t ld_dst, const float *src,
                   size_t ld_src, int accumulate)
{
    if (!accumulate && ld_dst == cols && ld_src == cols) {
        memcpy(dst, src, sizeof(float) * rows * cols);
        return;
    }
    for (size_t r = 0; r < rows; r++) {
        float *d = dst + r * ld_dst;
        const float *s = src + r * ld_src;
        if (accumulate)
            for (size_t i = 0; i < cols; i++)
                d[i] += s[i];
        else
            memcpy(d, s, sizeof(float) * cols);
    }
}

void cpu_fill(float *y, size_t count, float value)
{
    const long long n = (long long)count;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (long long i = 0; i < n; i++)
        y[i] = value;
}

void cpu_dropout_forward(size_t count, float p, float scale, uint64_t seed, uint64_t stream,
                         uint64_t base, const float *x, float *y, uint8_t *mask)
{
#pragma omp parallel for schedule(static) if (count > 65536)
    for (size_t i = 0; i < count; i++) {
        const uint8_t keep = dropout_keep(seed, stream, base + i, p);
        mask[i] = keep;
        y[i] = dropout_apply(keep, x[i], scale);
    }
}

void cpu_dropout_backward(size_t count, float scale, const uint8_t *mask, const float *dy,
                          float *dx, int accumulate)
{
    for (size_t i = 0; i < count; i++) {
        const float g = dropout_apply(mask[i], dy[i], scale);
        dx[i] = accumulate ? dx[i] + g : g;
    }
}

size_t cpu_count_nonfinite(const float *x, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += !isfinite(x[i]);
    return bad;
}

/* This rank's sums: when synchronised, the gradient all-reduce adds the ranks'. */
void cpu_bn_param_grads(int C, const double *sdy, const double *sdyx, float *dgamma,
                        float *dbeta)
{
    /* NULL: a frozen weight or bias (--freeze) */
    for (int ch = 0; dgamma && ch < C; ch++)
        dgamma[ch] += (float)sdyx[ch];
    for (int ch = 0; dbeta && ch < C; ch++)
        dbeta[ch] += (float)sdy[ch];
}
