/*
 * broadcast.c — two-input element-wise add, subtract and multiply with NumPy broadcasting over
 * one sample's (C, H, W), and their backward, which sums the output gradient over the
 * positions a broadcast input was repeated to (the reduction NumPy's and PyTorch's autograd
 * do). Both inputs have the batch n: per-sample scalars are (1, 1, 1), squeeze-and-excitation
 * scales (C, 1, 1). A shared input (a layer's constant operand) is one sample for all.
 *
 * Forward is one fixed expression per output, a op b, as PyTorch computes it. Backward gathers:
 * each input-gradient value sums its own output positions in a fixed order, in double, so no
 * two threads write one value and the result does not depend on the thread count. It does not
 * try to be fast for shapes CNNs do not use (a broadcast width inside a full height, say): the
 * inner loops are plain strided ones.
 */
#include "cpu_kernels.h"

/* The element stride of an input along a dimension: 0 where it is broadcast. */
static inline size_t bstride(int size, size_t step) { return size == 1 ? 0 : step; }

void cpu_binary_forward(binary_kind kind, const binary_geom *g, int n, const float *a,
                        const float *b, float *y)
{
    const int C = g->C, H = g->H, W = g->W;
    const size_t a_hw = (size_t)g->a[1] * g->a[2], b_hw = (size_t)g->b[1] * g->b[2];
    const size_t a_sample = g->a_shared ? 0 : (size_t)g->a[0] * a_hw,
                 b_sample = g->b_shared ? 0 : (size_t)g->b[0] * b_hw;
    const size_t ac = bstride(g->a[0], a_hw), ah = bstride(g->a[1], (size_t)g->a[2]),
                 aw = bstride(g->a[2], 1);
    const size_t bc = bstride(g->b[0], b_hw), bh = bstride(g->b[1], (size_t)g->b[2]),
                 bw = bstride(g->b[2], 1);
    const long long planes = (long long)n * C;
#pragma omp parallel for schedule(static) if (planes * H * W > 65536)
    for (long long pl = 0; pl < planes; pl++) {
        const int s = (int)(pl / C), c = (int)(pl % C);
        const float *ap = a + s * a_sample + c * ac, *bp = b + s * b_sample + c * bc;
        float *yp = y + (size_t)pl * H * W;
        for (int h = 0; h < H; h++) {
            const float *ar = ap + h * ah, *br = bp + h * bh;
            float *yr = yp + (size_t)h * W;
            switch (kind) {
            case BIN_ADD:
                for (int w = 0; w < W; w++)
                    yr[w] = ar[w * aw] + br[w * bw];
                break;
            case BIN_SUB:
                for (int w = 0; w < W; w++)
                    yr[w] = ar[w * aw] - br[w * bw];
                break;
            case BIN_MUL:
                for (int w = 0; w < W; w++)
                    yr[w] = ar[w * aw] * br[w * bw];
                break;
            }
        }
    }
}

/* dx (the gradient of input x, shape xs) = sign * the sum, over the output positions x was
 * repeated to, of dy times (for a product) the other input o (shape os) there; written, or
 * added with accumulate. */
static void reduce_grad(const binary_geom *g, int n, const int *xs, const float *o,
                        const int *os, int o_shared, float sign, const float *dy, float *dx,
                        int accumulate)
{
    const int C = g->C, H = g->H, W = g->W;
    const size_t o_hw = (size_t)os[1] * os[2], o_sample = o_shared ? 0 : (size_t)os[0] * o_hw;
    const size_t oc = bstride(os[0], o_hw), oh = bstride(os[1], (size_t)os[2]),
                 ow = bstride(os[2], 1);
    const size_t x_plane = (size_t)xs[1] * xs[2];
    /* the output range that one value of x covers along each dimension */
    const int span_c = xs[0] == 1 ? C : 1, span_h = xs[1] == 1 ? H : 1,
              span_w = xs[2] == 1 ? W : 1;
    const long long planes = (long long)n * xs[0];
#pragma omp parallel for schedule(static) if (planes * x_plane > 4096)
    for (long long pl = 0; pl < planes; pl++) {
        const int s = (int)(pl / xs[0]), xc = (int)(pl % xs[0]);
        float *dxp = dx + (size_t)pl * x_plane;
        for (int xh = 0; xh < xs[1]; xh++)
            for (int xw = 0; xw < xs[2]; xw++) {
                double sum = 0.0;
                for (int c = xc; c < xc + span_c; c++)
                    for (int h = xh; h < xh + span_h; h++) {
                        const float *dyr = dy + (((size_t)s * C + c) * H + h) * W;
                        const float *orow = o ? o + s * o_sample + c * oc + h * oh : NULL;
                        for (int w = xw; w < xw + span_w; w++)
                            sum += orow ? (double)(dyr[w] * orow[w * ow]) : (double)dyr[w];
                    }
                const float v = (float)sum * sign;
                float *d = dxp + (size_t)xh * xs[2] + xw;
                *d = accumulate ? *d + v : v;
            }
    }
}

void cpu_binary_backward(binary_kind kind, const binary_geom *g, int n, const float *a,
                         const float *b, const float *dy, float *da, int da_accumulate,
                         float *db, int db_accumulate)
{
    const int mul = kind == BIN_MUL;
    DTNN_ASSERT(!(da && g->a_shared) && !(db && g->b_shared));
    if (da)
        reduce_grad(g, n, g->a, mul ? b : NULL, g->b, g->b_shared, 1.0f, dy, da,
                    da_accumulate);
    if (db)
        reduce_grad(g, n, g->b, mul ? a : NULL, g->a, g->a_shared,
                    kind == BIN_SUB ? -1.0f : 1.0f, dy, db, db_accumulate);
}
