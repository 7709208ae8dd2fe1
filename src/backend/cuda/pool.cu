/*
 * pool.cu — max and average pooling, forward and backward, as backend/cpu/pool.c (the window, tap
 * and divisor rules are that file's; the functions below are its, made device functions).
 * Forward: one thread per output. Backward gathers instead of scattering: one thread per input
 * value sums the outputs whose window holds it (max: whose argmax is it) in increasing output
 * order, which is the order in which the CPU's serial scatter adds them, so the results are
 * the CPU's bit for bit and need no atomics (whose order, and so whose rounding, would vary).
 */
#include <math.h>

#include "cuda_launch.cuh"

static __device__ int imin(int a, int b) { return a < b ? a : b; }
static __device__ int imax(int a, int b) { return a > b ? a : b; }

/* floor(a / b) for b > 0 and any a */
static __device__ int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

static __device__ void taps(int start, int k, int dil, int size, int *i0, int *i1)
{
    *i0 = start < 0 ? (-start + dil - 1) / dil : 0;
    const int last = size - 1 - start;
    *i1 = last < 0 ? 0 : imin(k, last / dil + 1);
    if (*i1 < *i0)
        *i1 = *i0;
}

static __global__ void maxpool_k(pool_geom g, int n, const float *x, float *y, int32_t *argmax)
{
    const size_t PQ = (size_t)g.P * g.Q;
    CU_LOOP(o, (size_t)n * g.C * PQ)
    {
        const size_t pl = o / PQ;
        const int p = (int)(o % PQ) / g.Q, q = (int)(o % PQ) % g.Q;
        const float *xp = x + pl * g.H * g.W;
        int i0, i1, j0, j1;
        const int hs = p * g.stride_h - g.pad_h, ws = q * g.stride_w - g.pad_w;
        taps(hs, g.kh, g.dil_h, g.H, &i0, &i1);
        taps(ws, g.kw, g.dil_w, g.W, &j0, &j1);
        /* the first maximum wins ties; a NaN wins and stops the search; no tap: -inf, -1 */
        int32_t at = -1;
        float best = -INFINITY;
        if (i0 < i1 && j0 < j1) {
            at = (hs + i0 * g.dil_h) * g.W + ws + j0 * g.dil_w;
            best = xp[at];
        }
        for (int i = i0; i < i1 && best == best; i++)
            for (int j = j0; j < j1; j++) {
                const int32_t k = (hs + i * g.dil_h) * g.W + ws + j * g.dil_w;
                const float v = xp[k];
                if (v > best || v != v) {
                    best = v;
                    at = k;
                    if (v != v)
                        break;
                }
            }
        y[o] = best;
        argmax[o] = at;
    }
}

/* The outputs p whose window (k taps, dil apart, from p * stride - pad) can hold input row h:
 * a superset, [*lo, *hi], that the caller narrows by an exact test. */
static __device__ void candidates(int h, int k, int dil, int stride, int pad, int P, int *lo,
                                  int *hi)
{
    *lo = imax(0, floor_div(h + pad - (k - 1) * dil, stride));
    *hi = imin(P - 1, floor_div(h + pad, stride));
}

static __global__ void maxpool_grad_k(pool_geom g, int n, const float *dy,
                                      const int32_t *argmax, float *dx, int acc)
{
    const size_t HW = (size_t)g.H * g.W, PQ = (size_t)g.P * g.Q;
    CU_LOOP(e, (size_t)n * g.C * HW)
    {
        const size_t pl = e / HW;
        const int32_t idx = (int32_t)(e % HW);
        const int h = idx / g.W, w = idx % g.W;
        const float *dyp = dy + pl * PQ;
        const int32_t *ap = argmax + pl * PQ;
        int p0, p1, q0, q1;
        candidates(h, g.kh, g.dil_h, g.stride_h, g.pad_h, g.P, &p0, &p1);
        candidates(w, g.kw, g.dil_w, g.stride_w, g.pad_w, g.Q, &q0, &q1);
        float sum = acc ? dx[e] : 0.0f;
        for (int p = p0; p <= p1; p++)
            for (int q = q0; q <= q1; q++)
                if (ap[p * g.Q + q] == idx)
                    sum += dyp[p * g.Q + q];
        dx[e] = sum;
    }
}

static __device__ void window(int start, int k, int size, int *lo, int *hi)
{
    *lo = start < 0 ? 0 : start;
    *hi = start + k > size ? size : start + k;
}

static __device__ float avg_window(const pool_geom &g, int p, int q, int *h0, int *h1, int *w0,
                                   int *w1)
{
    if (g.adaptive) {
        *h0 = (int)((int64_t)p * g.H / g.P);
        *h1 = (int)(((int64_t)(p + 1) * g.H + g.P - 1) / g.P);
        *w0 = (int)((int64_t)q * g.W / g.Q);
        *w1 = (int)(((int64_t)(q + 1) * g.W + g.Q - 1) / g.Q);
        return (float)((*h1 - *h0) * (*w1 - *w0));
    }
    const int hs = p * g.stride_h - g.pad_h, ws = q * g.stride_w - g.pad_w;
    window(hs, g.kh, g.H, h0, h1);
    window(ws, g.kw, g.W, w0, w1);
    if (!g.count_include_pad)
        return (float)((*h1 - *h0) * (*w1 - *w0));
    const int he = imin(hs + g.kh, g.H + g.pad_b), we = imin(ws + g.kw, g.W + g.pad_r);
    return (float)((he - hs) * (we - ws));
}

static __global__ void avgpool_k(pool_geom g, int n, const float *x, float *y)
{
    const size_t PQ = (size_t)g.P * g.Q;
    CU_LOOP(o, (size_t)n * g.C * PQ)
    {
        const size_t pl = o / PQ;
        const int p = (int)(o % PQ) / g.Q, q = (int)(o % PQ) % g.Q;
        const float *xp = x + pl * g.H * g.W;
        int h0, h1, w0, w1;
        const float divisor = avg_window(g, p, q, &h0, &h1, &w0, &w1);
        float sum = 0.0f;
        for (int h = h0; h < h1; h++)
            for (int w = w0; w < w1; w++)
                sum += xp[h * g.W + w];
        y[o] = sum / divisor;
    }
}

static __global__ void avgpool_grad_k(pool_geom g, int n, const float *dy, float *dx, int acc)
{
    const size_t HW = (size_t)g.H * g.W, PQ = (size_t)g.P * g.Q;
    CU_LOOP(e, (size_t)n * g.C * HW)
    {
        const size_t pl = e / HW;
        const int h = (int)(e % HW) / g.W, w = (int)(e % HW) % g.W;
        const float *dyp = dy + pl * PQ;
        int p0 = 0, p1 = g.P - 1, q0 = 0, q1 = g.Q - 1;
        if (!g.adaptive) {
            candidates(h, g.kh, 1, g.stride_h, g.pad_h, g.P, &p0, &p1);
            candidates(w, g.kw, 1, g.stride_w, g.pad_w, g.Q, &q0, &q1);
        }
        float sum = acc ? dx[e] : 0.0f;
        for (int p = p0; p <= p1; p++)
            for (int q = q0; q <= q1; q++) {
                int h0, h1, w0, w1;
                const float divisor = avg_window(g, p, q, &h0, &h1, &w0, &w1);
                if (h >= h0 && h < h1 && w >= w0 && w < w1)
                    sum += dyp[p * g.Q + q] / divisor;
            }
        dx[e] = sum;
    }
}

extern "C" void cuda_maxpool_forward(dtnn_backend *be, const pool_geom *g, int n,
                                     const float *x, float *y, int32_t *argmax)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "maxpool forward kernel", maxpool_k, (size_t)n * g->C * g->P * g->Q, *g, n, x,
              y, argmax);
}

extern "C" void cuda_maxpool_backward(dtnn_backend *be, const pool_geom *g, int n,
                                      const float *dy, const int32_t *argmax, float *dx,
                                      int accumulate)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "maxpool backward kernel", maxpool_grad_k, (size_t)n * g->C * g->H * g->W, *g,
              n, dy, argmax, dx, accumulate);
}

extern "C" void cuda_avgpool_forward(dtnn_backend *be, const pool_geom *g, int n,
                                     const float *x, float *y)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "avgpool forward kernel", avgpool_k, (size_t)n * g->C * g->P * g->Q, *g, n, x,
              y);
}

extern "C" void cuda_avgpool_backward(dtnn_backend *be, const pool_geom *g, int n,
                                      const float *dy, float *dx, int accumulate)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "avgpool backward kernel", avgpool_grad_k, (size_t)n * g->C * g->H * g->W, *g,
              n, dy, dx, accumulate);
}
