/*
 * broadcast.c — two-input element-wise add, subtract, multiply and divide with NumPy broadcasting over
 * one sample's (C, H, W), and their backward, which sums the output gradient over the
 * positions a broadcast input was repeated to (the reduction NumPy's and PyTorch's autograd
 * do). Both inputs have the batch n: per-sample scalars are (1, 1, 1), squeeze-and-excitation
 * scales (C, 1, 1). A shared input (a layer's constant operand) is one sample for all.
 *
 * The index mapping, the operations and the gradient's sums are formulas/broadcast_formulas.h's,
 * shared with the CUDA backend. Forward is one fixed expression per output, a op b, as PyTorch
 * computes it. Backward gathers: each input-gradient value sums its own output positions in a
 * fixed order, in double, so no two threads write one value and the result does not depend on
 * the thread count. It does not
 * try to be fast for shapes CNNs do not use (a broadcast width inside a full height, say): the
 * inner loops are plain strided ones.
 */
#include "cpu_kernels.h"
#include "../formulas/broadcast_formulas.h"

void cpu_binary_forward(binary_kind kind, const binary_geom *g, int n, const float *a,
                        const float *b, float *y)
{
    const int C = g->C, H = g->H, W = g->W;
    const binary_strides sa = binary_strides_of(g->a, g->a_shared);
    const binary_strides sb = binary_strides_of(g->b, g->b_shared);
    const size_t a_sample = sa.sample, ac = sa.c_step, ah = sa.h_step, aw = sa.w_step;
    const size_t b_sample = sb.sample, bc = sb.c_step, bh = sb.h_step, bw = sb.w_step;
    const long long planes = (long long)n * C;
#pragma omp parallel for schedule(static) if (planes * H * W > 65536)
    for (long long pl = 0; pl < planes; pl++) {
        const int s = (int)(pl / C), c = (int)(pl % C);
        const float *ap = a + s * a_sample + c * ac, *bp = b + s * b_sample + c * bc;
        float *yp = y + (size_t)pl * H * W;
        for (int h = 0; h < H; h++) {
            const float *ar = ap + h * ah, *br = bp + h * bh;
            float *yr = yp + (size_t)h * W;
            /* a constant kind per loop, so that each vectorises as a plain +, - or * */
            switch (kind) {
            case BIN_ADD:
                for (int w = 0; w < W; w++)
                    yr[w] = binary_apply(BIN_ADD, ar[w * aw], br[w * bw]);
                break;
            case BIN_SUB:
                for (int w = 0; w < W; w++)
                    yr[w] = binary_apply(BIN_SUB, ar[w * aw], br[w * bw]);
                break;
            case BIN_MUL:
                for (int w = 0; w < W; w++)
                    yr[w] = binary_apply(BIN_MUL, ar[w * aw], br[w * bw]);
                break;
            case BIN_DIV:
                for (int w = 0; w < W; w++)
                    yr[w] = binary_apply(BIN_DIV, ar[w * aw], br[w * bw]);
                break;
            }
        }
    }
}

/* dx (the gradient of input x, m->xs) from binary_grad_value, one plane of x per job; written,
 * or added with accumulate. */
static void reduce_grad(const binary_geom *g, int n, const binary_grad_map *m, const float *o,
                        const float *p, const float *dy, float *dx, int accumulate)
{
    const int *xs = m->xs;
    const size_t x_plane = (size_t)xs[1] * xs[2];
    const long long planes = (long long)n * xs[0];
#pragma omp parallel for schedule(static) if (planes * x_plane > 4096)
    for (long long pl = 0; pl < planes; pl++) {
        const int s = (int)(pl / xs[0]), xc = (int)(pl % xs[0]);
        float *dxp = dx + (size_t)pl * x_plane;
        for (int xh = 0; xh < xs[1]; xh++)
            for (int xw = 0; xw < xs[2]; xw++) {
                const float v = binary_grad_value(g, m, s, xc, xh, xw, o, p, dy);
                float *d = dxp + (size_t)xh * xs[2] + xw;
                *d = accumulate ? *d + v : v;
            }
    }
}

void cpu_binary_backward(binary_kind kind, const binary_geom *g, int n, const float *a,
                         const float *b, const float *dy, float *da, int da_accumulate,
                         float *db, int db_accumulate)
{
    DTNN_ASSERT(!(da && g->a_shared) && !(db && g->b_shared));
    if (da) {
        const binary_grad_map m = binary_grad_map_a(g, kind);
        reduce_grad(g, n, &m, binary_grad_o(&m, a, b, 0), binary_grad_p(&m, a), dy, da,
                    da_accumulate);
    }
    if (db) {
        const binary_grad_map m = binary_grad_map_b(g, kind);
        reduce_grad(g, n, &m, binary_grad_o(&m, a, b, 1), binary_grad_p(&m, a), dy, db,
                    db_accumulate);
    }
}
