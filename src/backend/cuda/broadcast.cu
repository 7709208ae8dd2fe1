/*
 * broadcast.cu — two-input add, subtract, multiply and divide with NumPy broadcasting over one
 * sample's (C, H, W), and their backward, as backend/cpu/broadcast.c and with its formulas
 * (formulas/broadcast_formulas.h): forward one thread per output; backward one thread per
 * input-gradient value, summing its output positions in the CPU's order in double, so the
 * results are the CPU's bit for bit. A shared input (a layer's constant operand) is one sample
 * for the whole batch.
 */
#include "../formulas/broadcast_formulas.h"
#include "cuda_launch.cuh"

/* These kernels and the formulas read every field of binary_geom: a new one must be handled
 * here and there. */
static_assert(sizeof(binary_geom) == 11 * sizeof(int), "binary_geom changed: see broadcast.cu");

static __global__ void binary_k(binary_kind kind, binary_geom g, int n, const float *a,
                                const float *b, float *y)
{
    const binary_strides sa = binary_strides_of(g.a, g.a_shared);
    const binary_strides sb = binary_strides_of(g.b, g.b_shared);
    const size_t HW = (size_t)g.H * g.W, CHW = (size_t)g.C * HW;
    CU_LOOP(i, (size_t)n * CHW)
    {
        const size_t s = i / CHW, c = i % CHW / HW, h = i % HW / g.W, w = i % g.W;
        const float va = a[s * sa.sample + c * sa.c_step + h * sa.h_step + w * sa.w_step];
        const float vb = b[s * sb.sample + c * sb.c_step + h * sb.h_step + w * sb.w_step];
        y[i] = binary_apply(kind, va, vb);
    }
}

/* One thread per value of dx (the gradient of an input x, m.xs). */
static __global__ void reduce_grad_k(binary_geom g, int n, binary_grad_map m, const float *o,
                                     const float *p, const float *dy, float *dx, int acc)
{
    const size_t x_plane = (size_t)m.xs[1] * m.xs[2];
    CU_LOOP(e, (size_t)n * m.xs[0] * x_plane)
    {
        const size_t pl = e / x_plane;
        const int s = (int)(pl / m.xs[0]), xc = (int)(pl % m.xs[0]);
        const int xh = (int)(e % x_plane / m.xs[2]), xw = (int)(e % m.xs[2]);
        const float v = binary_grad_value(&g, &m, s, xc, xh, xw, o, p, dy);
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
    /* a shared input is a constant: no gradient is ever asked for it (broadcast.c asserts) */
    if ((da && g->a_shared) || (db && g->b_shared)) {
        cuda_fail(be, "binary backward: a gradient asked for a shared (constant) input");
        return;
    }
    /* da first, then db: when both are one buffer, db adds to what da wrote, as on the CPU */
    if (da) {
        const binary_grad_map m = binary_grad_map_a(g, kind);
        CU_LAUNCH(be, "binary backward kernel", reduce_grad_k,
                  (size_t)n * g->a[0] * g->a[1] * g->a[2], *g, n, m, binary_grad_o(&m, a, b, 0),
                  binary_grad_p(&m, a), dy, da, da_accumulate);
    }
    if (db) {
        const binary_grad_map m = binary_grad_map_b(g, kind);
        CU_LAUNCH(be, "binary backward kernel", reduce_grad_k,
                  (size_t)n * g->b[0] * g->b[1] * g->b[2], *g, n, m, binary_grad_o(&m, a, b, 1),
                  binary_grad_p(&m, a), dy, db, db_accumulate);
    }
}
