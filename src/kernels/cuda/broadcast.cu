/*
 * broadcast.cu — two-input add, subtract and multiply with NumPy broadcasting over one
 * sample's (C, H, W), and their backward, as kernels/broadcast.c: forward one thread per
 * output; backward one thread per input-gradient value, summing its output positions in the
 * CPU's order in double, so the results are the CPU's bit for bit. A shared input (a layer's
 * constant operand) is one sample for the whole batch.
 */
#include "cuda_launch.cuh"

/* The kernels below read every field of binary_geom: a new one must be handled here. */
static_assert(sizeof(binary_geom) == 11 * sizeof(int), "binary_geom changed: see broadcast.cu");

static __device__ size_t bstride(int size, size_t step) { return size == 1 ? 0 : step; }

static __global__ void binary_k(binary_kind kind, binary_geom g, int n, const float *a,
                                const float *b, float *y)
{
    const size_t a_hw = (size_t)g.a[1] * g.a[2], b_hw = (size_t)g.b[1] * g.b[2];
    const size_t a_sample = g.a_shared ? 0 : (size_t)g.a[0] * a_hw,
                 b_sample = g.b_shared ? 0 : (size_t)g.b[0] * b_hw;
    const size_t ac = bstride(g.a[0], a_hw), ah = bstride(g.a[1], (size_t)g.a[2]),
                 aw = bstride(g.a[2], 1);
    const size_t bc = bstride(g.b[0], b_hw), bh = bstride(g.b[1], (size_t)g.b[2]),
                 bw = bstride(g.b[2], 1);
    const size_t HW = (size_t)g.H * g.W, CHW = (size_t)g.C * HW;
    CU_LOOP(i, (size_t)n * CHW)
    {
        const size_t s = i / CHW, c = i % CHW / HW, h = i % HW / g.W, w = i % g.W;
        const float va = a[s * a_sample + c * ac + h * ah + w * aw];
        const float vb = b[s * b_sample + c * bc + h * bh + w * bw];
        y[i] = kind == BIN_ADD ? va + vb : (kind == BIN_SUB ? va - vb : va * vb);
    }
}

/* dx (shape xs) = sign * the sum over the output positions x was repeated to of dy (times the
 * other input o, shape os, for a product): broadcast.c's reduce_grad, one thread per value */
static __global__ void reduce_grad_k(binary_geom g, int n, int xs0, int xs1, int xs2,
                                     const float *o, int os0, int os1, int os2, int o_shared,
                                     float sign, const float *dy, float *dx, int acc)
{
    const int C = g.C, H = g.H, W = g.W;
    const size_t o_hw = (size_t)os1 * os2, o_sample = o_shared ? 0 : (size_t)os0 * o_hw;
    const size_t oc = bstride(os0, o_hw), oh = bstride(os1, (size_t)os2), ow = bstride(os2, 1);
    const size_t x_plane = (size_t)xs1 * xs2;
    const int span_c = xs0 == 1 ? C : 1, span_h = xs1 == 1 ? H : 1, span_w = xs2 == 1 ? W : 1;
    CU_LOOP(e, (size_t)n * xs0 * x_plane)
    {
        const size_t pl = e / x_plane;
        const int s = (int)(pl / xs0), xc = (int)(pl % xs0);
        const int xh = (int)(e % x_plane / xs2), xw = (int)(e % xs2);
        double sum = 0.0;
        for (int c = xc; c < xc + span_c; c++)
            for (int h = xh; h < xh + span_h; h++) {
                const float *dyr = dy + (((size_t)s * C + c) * H + h) * W;
                const float *orow = o ? o + s * o_sample + c * oc + h * oh : NULL;
                for (int w = xw; w < xw + span_w; w++)
                    sum += orow ? (double)(dyr[w] * orow[w * ow]) : (double)dyr[w];
            }
        const float v = (float)sum * sign;
        dx[e] = acc ? dx[e] + v : v;
    }
}

extern "C" void cuda_binary_forward(dtnn_backend *be, binary_kind kind, const binary_geom *g,
                                    int n, const float *a, const float *b, float *y)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "binary forward kernel", binary_k, (size_t)n * g->C * g->H * g->W, kind, *g, n,
              a, b, y);
}

extern "C" void cuda_binary_backward(dtnn_backend *be, binary_kind kind, const binary_geom *g,
                                     int n, const float *a, const float *b, const float *dy,
                                     float *da, int da_accumulate, float *db, int db_accumulate)
{
    CU_SKIP_IF_FAILED(be);
    const int mul = kind == BIN_MUL;
    /* a shared input is a constant: no gradient is ever asked for it (broadcast.c asserts) */
    if ((da && g->a_shared) || (db && g->b_shared)) {
        cuda_fail(be, "binary backward: a gradient asked for a shared (constant) input");
        return;
    }
    /* da first, then db: when both are one buffer, db adds to what da wrote, as on the CPU */
    if (da)
        CU_LAUNCH(be, "binary backward kernel", reduce_grad_k,
                  (size_t)n * g->a[0] * g->a[1] * g->a[2], *g, n, g->a[0], g->a[1], g->a[2],
                  mul ? b : NULL, g->b[0], g->b[1], g->b[2], g->b_shared, 1.0f, dy, da,
                  da_accumulate);
    if (db)
        CU_LAUNCH(be, "binary backward kernel", reduce_grad_k,
                  (size_t)n * g->b[0] * g->b[1] * g->b[2], *g, n, g->b[0], g->b[1], g->b[2],
                  mul ? a : NULL, g->a[0], g->a[1], g->a[2], g->a_shared,
                  kind == BIN_SUB ? -1.0f : 1.0f, dy, db, db_accumulate);
}
