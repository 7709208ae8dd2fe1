/*
 * pad.c — the CPU's constant padding of each sample's C x H x W (torch.nn.functional.pad with
 * mode "constant", ONNX Pad): forward copies every input row into the middle of its output
 * row and sets the rest to the fill value; backward crops, taking the gradient of the inner
 * region only, since the padded positions do not depend on the input. Cropping (negative
 * pads) and the reflect / edge modes are not done here.
 */
#include "cpu_kernels.h"
#include "../formulas/pad_formulas.h"

/* Plane by plane over the batch: an output plane is either all fill (a padding channel) or
 * the input plane framed by fill. */
void cpu_pad_forward(const pad_geom *g, int n, const float *x, float *y)
{
    const pad_out_shape o = pad_out_of(g);
    const int K = o.K, P = o.P, Q = o.Q;
    const size_t HW = (size_t)g->H * g->W, PQ = (size_t)P * Q;
    const long long planes = (long long)n * K;
#pragma omp parallel for schedule(static) if (planes * (long long)PQ > 65536)
    for (long long pl = 0; pl < planes; pl++) {
        const int s = (int)(pl / K), k = (int)(pl % K), c = k - g->front;
        float *yp = y + (size_t)pl * PQ;
        if (c < 0 || c >= g->C) {
            for (size_t i = 0; i < PQ; i++)
                yp[i] = g->value;
            continue;
        }
        const float *xp = x + ((size_t)s * g->C + c) * HW;
        for (int p = 0; p < P; p++) {
            float *yr = yp + (size_t)p * Q;
            const int h = p - g->top;
            if (h < 0 || h >= g->H) {
                for (int q = 0; q < Q; q++)
                    yr[q] = g->value;
                continue;
            }
            const float *xr = xp + (size_t)h * g->W;
            for (int q = 0; q < g->left; q++)
                yr[q] = g->value;
            for (int w = 0; w < g->W; w++)
                yr[g->left + w] = xr[w];
            for (int q = g->left + g->W; q < Q; q++)
                yr[q] = g->value;
        }
    }
}

void cpu_pad_backward(const pad_geom *g, int n, const float *dy, float *dx, int accumulate)
{
    const pad_out_shape o = pad_out_of(g);
    const int K = o.K, Q = o.Q;
    const size_t HW = (size_t)g->H * g->W, PQ = (size_t)o.P * Q;
    const long long planes = (long long)n * g->C;
#pragma omp parallel for schedule(static) if (planes * (long long)HW > 65536)
    for (long long pl = 0; pl < planes; pl++) {
        const int s = (int)(pl / g->C), c = (int)(pl % g->C);
        const float *dyp = dy + ((size_t)s * K + c + g->front) * PQ;
        float *dxp = dx + (size_t)pl * HW;
        for (int h = 0; h < g->H; h++) {
            const float *dyr = dyp + (size_t)(h + g->top) * Q + g->left;
            float *dxr = dxp + (size_t)h * g->W;
            if (accumulate)
                for (int w = 0; w < g->W; w++)
                    dxr[w] += dyr[w];
            else
                for (int w = 0; w < g->W; w++)
                    dxr[w] = dyr[w];
        }
    }
}
