/*
 * backend.h — the compute backend: a table of pure kernel functions on raw pointers, chosen
 * when a model is built. Layers call kernels only through this table, so a CUDA backend can
 * later provide the same table without a single #ifdef in layer files. Today there is one
 * backend, "cpu" (cpu_backend.c), built on a real BLAS and OpenMP.
 *
 * All tensors are float32 NCHW unless stated. "accumulate" = 0 writes the output, 1 adds to it.
 */
#ifndef DTNN_BACKEND_H
#define DTNN_BACKEND_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int C, H, W;                /* input channels and size, one image */
    int K, R, S, P, Q;          /* output channels, kernel, output size */
    int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
    int groups;
} conv_geom;

typedef struct {
    int C, H, W, P, Q;          /* channels, input size, output size */
    int kh, kw, stride_h, stride_w, pad_h, pad_w;
    int count_include_pad;      /* average pooling: PyTorch's default is 1 */
    /* Average pooling as AdaptiveAvgPool2d((P, Q)): output p averages input rows
     * floor(p * H / P) .. ceil((p + 1) * H / P) - 1 (likewise columns); kernel, stride and
     * padding are then unused. Windows may overlap (H not a multiple of P) or repeat (H < P). */
    int adaptive;
} pool_geom;

typedef enum { ACT_RELU = 0, ACT_LEAKY_RELU, ACT_SIGMOID, ACT_TANH, ACT_RELU6 } act_kind;

/* What batch norm does besides normalising (model.c, plan_fusion): y = relu(bn(x) + res),
 * each part optional. Backward with a residual reads the forward's output for the ReLU's mask
 * and writes the residual's gradient (the gradient the ReLU passes on) to dres, or adds it
 * with dres_accumulate. */
typedef struct {
    int relu;
    const float *res;       /* [n, C, hw] added before the ReLU, or NULL */
    const float *out;       /* backward: the forward's output y (with res and relu) */
    float *dres;            /* backward: the residual's gradient, or NULL (none wanted) */
    int dres_accumulate;
} bn_epilogue;

typedef struct dtnn_backend {
    const char *name;
    /* the threads the kernels run on now (OpenMP's team size; 1 without OpenMP) */
    int (*threads)(void);

    /* Row-major C[m x n] = alpha * op(A) * op(B) + beta * C. */
    void (*gemm)(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc);

    /* Products with a small dimension (gemm_tiles.c): c = op(a) b (op(a) m x k, b k x n), op(a)
     * packed by gemm_tiles_pack into gemm_tiles_scratch(m, k) bytes once for any number of b;
     * and c += a b^T (a m x k, b n x k). */
    size_t (*gemm_tiles_scratch)(int m, int k);
    void (*gemm_tiles_pack)(int trans_a, int m, int k, const float *a, int lda, float *scratch);
    void (*gemm_tiles)(int m, int n, int k, const float *b, int ldb, float *c, int ldc,
                       float *scratch);
    void (*gemm_dots)(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                      float *c, int ldc);

    /* Unfolds `images` consecutive images x [images, C, H, W] into col rows (c * R + r) * S + s,
     * columns i * P * Q + p * Q + q, row stride ldcol. Zero where padded. */
    void (*im2col)(const conv_geom *g, const float *x, int images, float *col, int ldcol);
    /* The adjoint: adds col back into dx [images, C, H, W]. */
    void (*col2im)(const conv_geom *g, const float *col, int ldcol, int images, float *dx);

    /* Depthwise convolution (groups == C == K; w [C, R, S], bias [C] or NULL) over n images,
     * direct. backward_weight adds into dw. */
    void (*dw_conv_forward)(const conv_geom *g, int n, const float *x, const float *w,
                            const float *bias, float *y);
    void (*dw_conv_backward_data)(const conv_geom *g, int n, const float *dy, const float *w,
                                  float *dx, int accumulate);
    void (*dw_conv_backward_weight)(const conv_geom *g, int n, const float *x, const float *dy,
                                    float *dw);

    /* Direct convolution (stride 1 or 2, dilation 1, one group; w [K, C, R, S]) over n
     * images, `chunk` images at a time, with scratch of conv_direct_workspace(g, chunk, slots)
     * bytes, where up to `slots` threads (threads() when planned) each run chunks of their own.
     * conv_direct_supported(g) is 2 for the shapes the kernels take whole (stride 1, and
     * stride 2 whose input gradient their passes cover), 1 for other stride-2 shapes (forward
     * and weight gradient: backward then leaves dx alone), 0 for other shapes and in builds
     * without them (conv2d then stays on im2col). backward adds into dw; dx may be
     * NULL, else it is written or, with accumulate, added to. */
    int (*conv_direct_supported)(const conv_geom *g);
    /* Bias gradient of any convolution: db [C] += per-channel sums of dy [n, C, hw], in double
     * (batchnorm.c's channel sums); the conv paths leave db to it. */
    void (*bias_grad)(int n, int C, int hw, const float *dy, float *db);
    size_t (*conv_direct_workspace)(const conv_geom *g, int chunk, int slots);
    void (*conv_direct_forward)(const conv_geom *g, int n, int chunk, int slots, const float *x,
                                const float *w, const float *bias, float *y, float *workspace);
    void (*conv_direct_backward)(const conv_geom *g, int n, int chunk, int slots,
                                 const float *x, const float *dy, const float *w, float *dw,
                                 float *dx, int accumulate, float *workspace);

    /* Winograd F(2x2, 3x3) and F(4x4, 3x3) for 3x3 / stride 1 / padding 1
     * (kernels/conv_winograd.c), with the same contract as the direct functions above
     * (backward adds into dw; dx may be NULL, and so may dw). The weight gradient has its own
     * chunk and scratch: workspace(g, chunk, slots, 1) bytes for it, workspace(g, chunk,
     * slots, 0) for the other passes, where up to `slots` threads (threads() when planned)
     * each run chunks of their own. supported is 0 where it does not apply, else the output
     * tile size the forward pass and input gradient use (2 or 4). */
    int (*conv_winograd_supported)(const conv_geom *g);
    size_t (*conv_winograd_workspace)(const conv_geom *g, int chunk, int slots, int weight_grad);
    /* the chunk those passes run best with, within `limit` bytes of scratch */
    int (*conv_winograd_chunk)(const conv_geom *g, int max_batch, size_t limit, int slots,
                               int weight_grad);
    void (*conv_winograd_forward)(const conv_geom *g, int n, int chunk, int slots,
                                  const float *x, const float *w, const float *bias, float *y,
                                  float *workspace);
    void (*conv_winograd_backward)(const conv_geom *g, int n, int chunk, int slots,
                                   int weight_grad_chunk, const float *x, const float *dy,
                                   const float *w, float *dw, float *dx, int accumulate,
                                   float *workspace);

    /* Max pooling over n images; argmax [n, C, P, Q] holds the flat h * W + w of each max. */
    void (*maxpool_forward)(const pool_geom *g, int n, const float *x, float *y,
                            int32_t *argmax);
    void (*maxpool_backward)(const pool_geom *g, int n, const float *dy, const int32_t *argmax,
                             float *dx, int accumulate);
    void (*avgpool_forward)(const pool_geom *g, int n, const float *x, float *y);
    void (*avgpool_backward)(const pool_geom *g, int n, const float *dy, float *dx,
                             int accumulate);

    /* Element-wise activations over count values; param = leaky-ReLU slope. backward may
     * use x or y (both given). */
    void (*act_forward)(act_kind kind, float param, size_t count, const float *x, float *y);
    void (*act_backward)(act_kind kind, float param, size_t count, const float *x,
                         const float *y, const float *dy, float *dx, int accumulate);

    /* Batch norm over [n, C, hw], training mode in phases, so synchronised batch norm can sum
     * the per-channel statistics over the ranks between them (one process just goes on):
     *   bn_moments        per channel: sum of d = x - shift and of d^2 (shift = the running
     *                     mean, the same on every rank)
     *   bn_apply_train    normalise with the batch mean shift + sum / count and the biased
     *                     variance sumsq / count - (sum / count)^2; save mean and
     *                     1/sqrt(var + eps); update the running estimates as PyTorch (unbiased
     *                     variance, running = (1 - momentum) * running + momentum * batch);
     *                     shift is running_mean as it was before the update
     *   bn_backward_sums  per channel: sum(dy) and sum(dy * xhat)
     *   bn_backward_apply dx = gamma * invstd * (dy - sdy / count - xhat * sdyx / count)
     * The epilogue `ep` (bn_epilogue, the layers fused in; NULL: none) may add a residual and
     * clamp at 0: y = relu(bn(x) + res). Backward's dy is then the gradient at that output,
     * passed where the value before the clamp was positive: recomputed from x, gamma and beta
     * exactly as the forward computed it without a residual, read as out > 0 with one; with
     * a residual that passed gradient is also the residual's (written to dres in the sums
     * phase).
     * Without synchronisation, bn_train_forward and bn_train_backward do all phases with
     * count = n * hw, each channel's back to back while it is in cache (dx NULL: the sums
     * only), with the same results. Sums are in double, serially per channel: results do not depend on the
     * thread count. */
    void (*bn_moments)(int n, int C, int hw, const float *x, const float *shift, double *sum,
                       double *sumsq);
    void (*bn_apply_train)(int n, int C, int hw, const float *x, const float *gamma,
                           const float *beta, const double *sum, const double *sumsq,
                           double count, float eps, float momentum, const bn_epilogue *ep,
                           float *y, float *save_mean, float *save_invstd,
                           float *running_mean, float *running_var);
    void (*bn_backward_sums)(int n, int C, int hw, const float *x, const float *dy,
                             const float *gamma, const float *beta, const bn_epilogue *ep,
                             const float *save_mean, const float *save_invstd, double *sdy,
                             double *sdyx);
    void (*bn_backward_apply)(int n, int C, int hw, const float *x, const float *dy,
                              const float *gamma, const float *beta, const bn_epilogue *ep,
                              const float *save_mean, const float *save_invstd,
                              const double *sdy, const double *sdyx, double count, float *dx,
                              int accumulate);
    void (*bn_train_forward)(int n, int C, int hw, const float *x, const float *gamma,
                             const float *beta, float eps, float momentum,
                             const bn_epilogue *ep, float *y, float *save_mean,
                             float *save_invstd, float *running_mean, float *running_var);
    void (*bn_train_backward)(int n, int C, int hw, const float *x, const float *dy,
                              const float *gamma, const float *beta, const bn_epilogue *ep,
                              const float *save_mean, const float *save_invstd, double *sdy,
                              double *sdyx, float *dx, int accumulate);
    void (*bn_forward_eval)(int n, int C, int hw, const float *x, const float *gamma,
                            const float *beta, const float *running_mean,
                            const float *running_var, float eps, const bn_epilogue *ep,
                            float *y);

    /* Row-wise softmax of [rows, cols]; backward: dx = y * (dy - sum(dy * y)). */
    void (*softmax_forward)(int rows, int cols, const float *x, float *y);
    void (*softmax_backward)(int rows, int cols, const float *y, const float *dy, float *dx,
                             int accumulate);
} dtnn_backend;

const dtnn_backend *dtnn_backend_cpu(void);

#endif
