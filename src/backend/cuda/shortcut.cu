/*
 * shortcut.cu — the option-A shortcut (He et al.) as backend/cpu/shortcut.c: forward one thread
 * per output (every stride-th input pixel in the middle channels, zero in the padding
 * channels); backward one thread per input-gradient value (dy at the kept pixels, zero at the
 * skipped ones unless adding, where those are left as they are).
 */
#include "cuda_launch.cuh"

static __global__ void shortcut_k(shortcut_geom g, int n, const float *x, float *y)
{
    const size_t PQ = (size_t)g.P * g.Q, HW = (size_t)g.H * g.W;
    CU_LOOP(i, (size_t)n * g.K * PQ)
    {
        const size_t s = i / (g.K * PQ);
        const int k = (int)(i / PQ % g.K), p = (int)(i % PQ / g.Q), q = (int)(i % g.Q);
        const int ch = k - g.at;
        y[i] = ch < 0 || ch >= g.C
                   ? 0.0f
                   : x[(s * g.C + ch) * HW + (size_t)p * g.stride * g.W + (size_t)q * g.stride];
    }
}

static __global__ void shortcut_grad_k(shortcut_geom g, int n, const float *dy, float *dx,
                                       int acc)
{
    const size_t PQ = (size_t)g.P * g.Q, HW = (size_t)g.H * g.W;
    CU_LOOP(i, (size_t)n * g.C * HW)
    {
        const size_t s = i / (g.C * HW);
        const int ch = (int)(i / HW % g.C), yy = (int)(i % HW / g.W), xx = (int)(i % g.W);
        if (yy % g.stride || xx % g.stride) {
            if (!acc)
                dx[i] = 0.0f;
            continue;
        }
        const float d = dy[(s * g.K + g.at + ch) * PQ + (size_t)(yy / g.stride) * g.Q +
                           xx / g.stride];
        dx[i] = acc ? dx[i] + d : d;
    }
}

extern "C" void cuda_shortcut_forward(dtnn_backend *be, const shortcut_geom *g, int n,
                                      const float *x, float *y)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "shortcut forward kernel", shortcut_k, (size_t)n * g->K * g->P * g->Q, *g, n,
              x, y);
}

extern "C" void cuda_shortcut_backward(dtnn_backend *be, const shortcut_geom *g, int n,
                                       const float *dy, float *dx, int accumulate)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "shortcut backward kernel", shortcut_grad_k, (size_t)n * g->C * g->H * g->W,
              *g, n, dy, dx, accumulate);
}
