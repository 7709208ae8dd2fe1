/*
 * linear.c — the CPU's fully connected layer, y = x W^T + b (torch.nn.Linear, weight [out,
 * in]): the products on BLAS (gemm_blas.c), the bias added and its gradient summed sample by
 * sample in float, in sample order. In bf16 (dtnn.h) the products take copies of x, W and dy
 * rounded to bf16 in the workspace; their fp32 results stay unrounded, as cuBLAS's.
 */
#include "cpu_kernels.h"

/* The bf16 copies in the workspace: x [n, in], W [out, in], dy [n, out]. */
typedef struct {
    float *x, *w, *dy;
} rounded;

static rounded rounded_at(const linear_desc *d, int n, void *workspace)
{
    rounded r;
    r.x = workspace;
    r.w = r.x + (size_t)n * d->in;
    r.dy = r.w + (size_t)d->out * d->in;
    return r;
}

size_t cpu_linear_workspace(const linear_desc *d, int max_batch)
{
    if (d->precision != DTNN_PRECISION_BF16)
        return 0;
    return sizeof(float) * ((size_t)max_batch * d->in + (size_t)d->out * d->in +
                            (size_t)max_batch * d->out);
}

void cpu_linear_forward(const linear_desc *d, int n, const float *x, const float *w,
                        const float *b, float *y, void *workspace)
{
    const int out = d->out, in = d->in, bf16 = d->precision == DTNN_PRECISION_BF16;
    if (bf16) {
        rounded r = rounded_at(d, n, workspace);
        cpu_round_bf16((size_t)n * in, x, r.x);
        cpu_round_bf16((size_t)out * in, w, r.w);
        x = r.x, w = r.w;
    }
    cpu_gemm_strided(1, 0, 1, n, out, in, 1.0f, x, in, 0, w, in, 0, 0.0f, y, out, 0,
                     bf16 ? CPU_GEMM_BF16 : 0);
    if (!b)
        return;
    for (int i = 0; i < n; i++)
        for (int o = 0; o < out; o++)
            y[(size_t)i * out + o] += b[o];
}

void cpu_linear_backward(const linear_desc *d, int n, const float *x, const float *dy,
                         const float *w, float *dw, float *db, float *dx, int accumulate,
                         void *workspace)
{
    const int out = d->out, in = d->in, bf16 = d->precision == DTNN_PRECISION_BF16;
    const int flags = bf16 ? CPU_GEMM_BF16 : 0;
    if (db)     /* from the unrounded gradient in either precision */
        for (int i = 0; i < n; i++)
            for (int o = 0; o < out; o++)
                db[o] += dy[(size_t)i * out + o];
    const float *dy_p = dy;
    if (bf16) {
        rounded r = rounded_at(d, n, workspace);
        cpu_round_bf16((size_t)n * out, dy, r.dy);
        dy_p = r.dy;
        if (dw) {
            cpu_round_bf16((size_t)n * in, x, r.x);
            x = r.x;
        }
        if (dx) {
            cpu_round_bf16((size_t)out * in, w, r.w);
            w = r.w;
        }
    }
    if (dw)     /* NULL: a frozen weight (--freeze) */
        cpu_gemm_strided(1, 1, 0, out, in, n, 1.0f, dy_p, out, 0, x, in, 0, 1.0f, dw, in, 0,
                         flags);
    if (dx)
        cpu_gemm_strided(1, 0, 0, n, in, out, 1.0f, dy_p, out, 0, w, in, 0,
                         accumulate ? 1.0f : 0.0f, dx, in, 0, flags);
}
