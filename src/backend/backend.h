/*
 * backend.h — the seam between the engine and a device. A backend is a table of operations (a
 * convolution, a batch norm, an optimizer step, a loss, memory copies) plus an instance that
 * holds its state (threads, handles, streams). The engine (model, layers, optimizers, losses,
 * checkpoints, gradient all-reduce) calls only this table: it never reads or writes backend
 * memory itself, so a device whose memory the host cannot touch is a table to fill in, not a
 * fork of the engine. How a convolution is computed (Winograd, direct, im2col on the CPU; an
 * algorithm measured by cuDNN on a GPU) is the backend's choice, made once per geometry when
 * the model is built (conv_plan).
 *
 * Each backend is a sibling folder here (cpu/, guarded/, cuda/) that fills the table and
 * defines one backend_registration; registry.c lists them, one line each, and checks every
 * table against the one list of operations (DTNN_BACKEND_OPS) when it creates a backend.
 * formulas/ holds the per-element arithmetic every backend's loops call, so that the backends
 * compute the same values. This header declares no concrete backend.
 *
 * Calls go through be_run() / be_call(): they bracket the operation with the backend's enter
 * and leave (the CPU backend sets its thread count there and restores the caller's; the
 * guarded backend opens its memory only for the duration of the call).
 *
 * Pointers to backend memory have the type of what they hold (float *, int32_t *) so views
 * and offsets are plain pointer arithmetic, but the host may dereference them only where
 * be->host_memory is 1 (and the engine does not even then: it copies, so that every backend
 * runs the same engine code).
 *
 * All tensors are float32 NCHW unless stated. "accumulate" = 0 writes the output, 1 adds.
 */
#ifndef DTNN_BACKEND_H
#define DTNN_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "dtnn.h"

typedef struct {
    int C, H, W;                /* input channels and size, one image */
    int K, R, S, P, Q;          /* output channels, kernel, output size */
    int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;     /* pad_h, pad_w: top and left */
    int groups;
    /* Bottom minus top and right minus left padding: 0 (symmetric) unless an ONNX model pads
     * asymmetrically. Output pixel (p, q) starts at input row p * stride_h - pad_h either way;
     * only P and Q change. */
    int pad_extra_h, pad_extra_w;
} conv_geom;

/* Window (p, q) covers input rows p * stride_h - pad_h + i * dil_h for i < kh (columns
 * likewise); taps outside the input are skipped (padding). pad_b / pad_r, the bottom and right
 * padding, only bound average pooling's count_include_pad divisor: the output size P x Q (ceil
 * mode or not) is the layer's choice. A max window with no tap inside (possible only with
 * dilation) gives -inf and no gradient. */
typedef struct {
    int C, H, W, P, Q;          /* channels, input size, output size */
    int kh, kw, stride_h, stride_w, pad_h, pad_w;
    int pad_b, pad_r;           /* bottom and right padding */
    int dil_h, dil_w;           /* max pooling's dilation, >= 1; average pooling: 1 */
    int count_include_pad;      /* average pooling: PyTorch's default is 1 */
    /* Average pooling as AdaptiveAvgPool2d((P, Q)): output p averages input rows
     * floor(p * H / P) .. ceil((p + 1) * H / P) - 1 (likewise columns); kernel, stride and
     * padding are then unused. Windows may overlap (H not a multiple of P) or repeat (H < P). */
    int adaptive;
} pool_geom;

/* A sum, mean or L2 norm of each sample's C planes of HW values (cpu/reduce.c): over the
 * channels, y [n, HW] (torch.mean(x, 1, keepdim=True), CBAM's channel pooling), or over each
 * plane, y [n, C] (x.sum((2, 3)), whose mean is global average pooling; x.norm(dim=(2, 3)),
 * ConvNeXt-V2's global response). */
typedef struct {
    int C, HW;
    int over_channels;      /* 1: over C; 0: over HW */
    int mean;               /* 1: divided by the count of the values reduced */
    int l2;                 /* 1: the square root of the sum of squares (mean 0) */
} reduce_geom;

/* One sample's permutation of a tensor of up to PERMUTE_MAX_DIMS dims (cpu/permute.c):
 * y = x.permute(perm), x of dims `dims` (row-major), y of dims dims[perm[k]]; the same for
 * each of n samples. Self-attention's head split and merge, MobileViT's patch unfolding. */
enum { PERMUTE_MAX_DIMS = 6 };
typedef struct {
    int rank;
    int dims[PERMUTE_MAX_DIMS];
    int perm[PERMUTE_MAX_DIMS];
} permute_geom;

/* One sample's `batch` matrix products of two computed tensors (attention's q k^T and its
 * weights times v): C_i [M, N] = op(A_i) op(B_i), op(A_i) M x K and op(B_i) K x N, each
 * operand's matrices row-major and contiguous, A_i [M, K] or, transposed, [K, M]. */
typedef struct {
    int batch, M, N, K;
} matmul_geom;

/* Upsampling of each plane by integer factors (cpu/upsample.c): H x W to H sh x W sw,
 * nearest (each value repeated sh x sw times) or bilinear as torch.nn.functional.interpolate
 * (align_corners 0: source (d + 0.5) / s - 0.5, clamped at 0; 1: d (in - 1) / (out - 1)). */
typedef struct {
    int C, H, W, sh, sw;
    int bilinear, align_corners;
} upsample_geom;

/* Layer normalisation over the C channels of each position of each sample (cpu/layernorm.c):
 * ConvNeXt's LayerNorm2d, and nn.LayerNorm(F) on [N, F] features (C = F, HW = 1). */
typedef struct {
    int C, HW;
    float eps;
} layernorm_geom;

/* Option-A shortcut (He et al.): every stride-th pixel of the C input channels, placed at
 * channels at .. at + C - 1 of K, the other channels zero. */
typedef struct {
    int C, H, W, K, P, Q, stride, at;
} shortcut_geom;

/* Two-input element-wise operations with NumPy broadcasting over one sample (cpu/
 * broadcast.c): the output is C x H x W per sample, input a is a[0] x a[1] x a[2] and b
 * b[0] x b[1] x b[2], each size equal to the output's or 1 (repeated along that dimension).
 * An input marked shared has one sample for the whole batch (a layer's constant operand); no
 * gradient is ever asked for it. */
typedef enum { BIN_ADD = 0, BIN_SUB, BIN_MUL, BIN_DIV } binary_kind;

typedef struct {
    int C, H, W;
    int a[3], b[3];
    int a_shared, b_shared;
} binary_geom;

/* Constant padding of one sample (cpu/pad.c): C x H x W in, (front + C + back) x
 * (top + H + bottom) x (left + W + right) out, the new positions set to value. */
typedef struct {
    int C, H, W;
    int top, bottom, left, right, front, back;
    float value;
} pad_geom;

/* The activations, one list: X(kind, name) with the layer type's name. Their formulas, and
 * the dispatch every backend's loops call, are in formulas/activation_formulas.h (which fails
 * to build, -Wswitch, until a new kind has its cases); the parity test runs every kind. */
#define DTNN_ACT_KINDS(X)                                                                      \
    X(ACT_RELU, "relu")                                                                        \
    X(ACT_LEAKY_RELU, "leaky_relu")                                                            \
    X(ACT_SIGMOID, "sigmoid")                                                                  \
    X(ACT_TANH, "tanh")                                                                        \
    X(ACT_RELU6, "relu6")                                                                      \
    X(ACT_HARDSIGMOID, "hardsigmoid")                                                          \
    X(ACT_HARDSWISH, "hardswish")                                                              \
    X(ACT_CLAMP, "clamp")       /* torch.clamp: gradient passed where lo <= x <= hi */        \
    X(ACT_HARDTANH, "hardtanh") /* nn.Hardtanh: gradient passed where lo < x < hi */        \
    X(ACT_GELU, "gelu")         /* nn.GELU(): 0.5 x (1 + erf(x / sqrt 2)) */                  \
    X(ACT_GELU_TANH, "gelu_tanh") /* nn.GELU(approximate='tanh') */                        \
    X(ACT_ERF, "erf")           /* torch.erf, ONNX Erf (GELU as opsets before 20 write it) */ \
    X(ACT_SQRT, "sqrt")         /* torch.sqrt, ONNX Sqrt */                                   \
    X(ACT_SILU, "silu")         /* nn.SiLU: x sigmoid(x) (EfficientNet's swish) */

#define ACT_KIND_ENUM(kind, name) kind,
typedef enum { DTNN_ACT_KINDS(ACT_KIND_ENUM) } act_kind;
#undef ACT_KIND_ENUM
#define ACT_KIND_COUNT_ONE(kind, name) +1
enum { ACT_KIND_COUNT = 0 DTNN_ACT_KINDS(ACT_KIND_COUNT_ONE) };
#undef ACT_KIND_COUNT_ONE

/* ACT_HARDSIGMOID's a and b are alpha and beta; PyTorch's 1/6 and 1/2 are computed as
 * relu6(x + 3) / 6, in PyTorch's order, and every backend must take the same branch. */
static inline int act_hardsigmoid_is_torch(float alpha, float beta)
{
    return alpha == 1.0f / 6.0f && beta == 0.5f;
}

/* What batch norm does besides normalising (model_plan.c, plan_fusion): y = relu(bn(x) +
 * res), each part optional. Backward with a residual reads the forward's output for the ReLU's
 * mask and writes the residual's gradient (the gradient the ReLU passes on) to dres, or adds it
 * with dres_accumulate. */
typedef struct {
    int relu;
    const float *res;       /* [n, C, hw] added before the ReLU, or NULL */
    const float *out;       /* backward: the forward's output y (with res and relu) */
    float *dres;            /* backward: the residual's gradient, or NULL (none wanted) */
    int dres_accumulate;
} bn_epilogue;

/* What a convolution plan is made from: the geometry, the largest batch, the scratch the
 * layer may take, the user's wish (dtnn_conv_algo: auto, direct = all but Winograd, im2col =
 * the reference path) and the precision (dtnn.h says what BF16 rounds; the bf16 copies of the
 * operands are workspace beyond workspace_limit, which bounds the algorithms' own scratch). */
typedef struct {
    conv_geom g;
    int max_batch;
    size_t workspace_limit;
    dtnn_conv_algo algo;
    dtnn_precision precision;
} conv_desc;

/* A fully connected layer: y [n, out] = x [n, in] W^T + b, in `precision` (dtnn.h). */
typedef struct {
    int out, in;
    dtnn_precision precision;
} linear_desc;

/* A squeeze-excitation block run as one operation (the model's fusion pass, model_plan.c):
 * for x [n, C, HW], mean [n, C] = each plane's mean (summed in float, in order, as the global
 * average pool), z1 [n, hidden] = mean W1^T + b1, a1 = act(z1), z2 [n, C] = a1 W2^T + b2,
 * s = gate(z2), y = x * s per channel. W1 is [hidden, C], W2 [C, hidden] (a 1x1
 * convolution's weights), b1 and b2 may be NULL. act and gate are activation kinds with their
 * two scalars, as act_forward takes them. */
typedef struct {
    int C, HW, hidden;
    act_kind act, gate;
    float act_a, act_b, gate_a, gate_b;
} se_geom;

/* The backward's scratch, floats per sample: ds, dz2 and dmean [C] each, da1 and dz1
 * [hidden] each. */
static inline size_t se_workspace_floats(const se_geom *g)
{
    return 3 * (size_t)g->C + 2 * (size_t)g->hidden;
}

typedef struct conv_plan conv_plan;

/* The losses (loss.c has the formulas). */
typedef struct {
    dtnn_loss_kind kind;
    float label_smoothing;
    float mix;      /* MixUp / CutMix: the target of sample i is mix onehot(labels[i]) +
                     * (1 - mix) onehot(labels[n + i]); 1: labels [n] alone */
} loss_desc;

/* The optimizers' element-wise rules with their scalars computed by optimizer.c (in double
 * where PyTorch does, then rounded to float as PyTorch's kernels see them). */
typedef struct {
    float lr, weight_decay, momentum, keep;     /* keep = 1 - dampening */
    int first, nesterov, use_momentum;
} sgd_args;

typedef struct {
    float beta1, beta2, one_minus_beta1, one_minus_beta2, eps, step_size, bc2_sqrt;
    float l2, shrink;   /* Adam's L2 term, AdamW's decoupled decay factor */
    int do_shrink;
} adam_args;

typedef struct {
    float alpha, one_minus_alpha, weight_decay, eps, momentum, lr;
} rmsprop_args;

/* NAdam (torch.optim.NAdam of PyTorch 2): c_grad and c_avg are the step's coefficients of
 * g / denom and m / denom (negative), bc2 the second moment's bias correction. */
typedef struct {
    float weight_decay, one_minus_beta1, beta2, one_minus_beta2, bc2, eps, c_grad, c_avg;
} nadam_args;

/* LARS over one tensor: its layer-wise scaled learning rate and decay (0 where excluded). */
typedef struct {
    float scaled_lr, weight_decay, momentum;
    int nesterov;
} lars_args;

/* LAMB's direction over one tensor (before the trust ratio): the Adam ratio with bias
 * corrections and eps, plus the decay term. */
typedef struct {
    float one_minus_beta1, beta2, one_minus_beta2, bc1, bc2_sqrt, eps, weight_decay;
} lamb_args;

typedef struct dtnn_backend dtnn_backend;

enum { UPLOAD_SLOTS = 2 };

/* The one list of a backend's operations. X(need, ret, name, params) per slot: need is
 * BE_REQUIRED (every backend fills it: registry.c refuses a table that lacks it, naming it) or
 * BE_OPTIONAL (NULL has the meaning its comment gives). The table's slots, their names in
 * messages and the missing-slot check are all generated from it; adding an operation is one
 * entry here and one function per backend. */
#define BE_REQUIRED 1
#define BE_OPTIONAL 0
#define DTNN_BACKEND_OPS(X)                                                                    \
    /* Bracket every call that touches backend memory (NULL: nothing to do). destroy frees    \
     * the instance and what it holds. */                                                      \
    X(BE_OPTIONAL, void, enter, (dtnn_backend *be))                                            \
    X(BE_OPTIONAL, void, leave, (dtnn_backend *be))                                            \
    X(BE_REQUIRED, void, destroy, (dtnn_backend *be))                                          \
                                                                                               \
    /* Memory. alloc returns zeroed memory (NULL when out of memory); upload copies host to   \
     * backend, download backend to host, copy within the backend. host_alloc gives host      \
     * memory the backend copies from and to fastest (pinned on a GPU), for staging. */        \
    X(BE_REQUIRED, void *, alloc, (dtnn_backend *be, size_t bytes))                            \
    X(BE_REQUIRED, void, free, (dtnn_backend *be, void *p))                                    \
    X(BE_REQUIRED, void, zero, (dtnn_backend *be, void *p, size_t bytes))                      \
    X(BE_REQUIRED, void, upload, (dtnn_backend *be, void *dst, const void *src, size_t bytes)) \
    X(BE_REQUIRED, void, download,                                                             \
      (dtnn_backend *be, void *dst, const void *src, size_t bytes))                            \
    X(BE_REQUIRED, void, copy, (dtnn_backend *be, void *dst, const void *src, size_t bytes))   \
    X(BE_REQUIRED, void, sync, (dtnn_backend *be))                                             \
    X(BE_REQUIRED, void *, host_alloc, (dtnn_backend *be, size_t bytes))                       \
    X(BE_REQUIRED, void, host_free, (dtnn_backend *be, void *p))                               \
                                                                                               \
    /* Batch uploads that overlap compute (model/model_prefetch.c), in UPLOAD_SLOTS slots,    \
     * each a destination the engine reuses: upload_start queues a copy of bytes from src     \
     * (host_alloc memory) to dst on the backend's copy queue, to begin once the compute      \
     * queue has passed the slot's latest upload_release (the data there is no longer read);  \
     * upload_use makes the compute operations queued from then on wait for the slot's copy;  \
     * upload_finish makes the host wait for it (before it writes src again). NULL on a       \
     * backend without a copy queue (the host's): the engine then copies with upload. */      \
    X(BE_OPTIONAL, void, upload_start,                                                         \
      (dtnn_backend *be, int slot, void *dst, const void *src, size_t bytes))                  \
    X(BE_OPTIONAL, void, upload_use, (dtnn_backend *be, int slot))                             \
    X(BE_OPTIONAL, void, upload_release, (dtnn_backend *be, int slot))                         \
    X(BE_OPTIONAL, void, upload_finish, (dtnn_backend *be, int slot))                          \
                                                                                               \
    /* Convolution. A plan is made at build from the geometry; it owns its workspace size    \
     * and names its method ("winograd/direct", ...) for --profile. backward adds into dw and \
     * db (db may be NULL: no bias); dx may be NULL (not wanted), else written or, with       \
     * accumulate, added to. */                                                                \
    X(BE_REQUIRED, conv_plan *, conv_plan_create,                                              \
      (dtnn_backend *be, const conv_desc *d, dtnn_error *err))                                 \
    X(BE_REQUIRED, void, conv_plan_free, (dtnn_backend *be, conv_plan *p))                     \
    X(BE_REQUIRED, size_t, conv_workspace, (const conv_plan *p))                               \
    X(BE_REQUIRED, const char *, conv_method, (const conv_plan *p))                            \
    X(BE_REQUIRED, void, conv_forward,                                                         \
      (dtnn_backend *be, const conv_plan *p, int n, const float *x, const float *w,            \
       const float *bias, float *y, void *workspace))                                          \
    X(BE_REQUIRED, void, conv_backward,                                                        \
      (dtnn_backend *be, const conv_plan *p, int n, const float *x, const float *dy,           \
       const float *w, float *dw, float *db, float *dx, int accumulate, void *workspace))      \
                                                                                               \
    /* Fully connected, y [n, out] = x [n, in] W^T + b (W [out, in], b [out] or NULL);        \
     * backward adds into dw and db, dx as above. workspace: linear_workspace bytes for the   \
     * largest batch (0 in fp32: the products need none). */                                  \
    X(BE_REQUIRED, size_t, linear_workspace,                                                   \
      (dtnn_backend *be, const linear_desc *d, int max_batch))                                 \
    X(BE_REQUIRED, void, linear_forward,                                                       \
      (dtnn_backend *be, const linear_desc *d, int n, const float *x, const float *w,          \
       const float *b, float *y, void *workspace))                                             \
    X(BE_REQUIRED, void, linear_backward,                                                      \
      (dtnn_backend *be, const linear_desc *d, int n, const float *x, const float *dy,         \
       const float *w, float *dw, float *db, float *dx, int accumulate, void *workspace))      \
                                                                                               \
    /* Max pooling over n images; argmax [n, C, P, Q] holds the flat h * W + w of each max. */ \
    X(BE_REQUIRED, void, maxpool_forward,                                                      \
      (dtnn_backend *be, const pool_geom *g, int n, const float *x, float *y, int32_t *argmax)) \
    X(BE_REQUIRED, void, maxpool_backward,                                                     \
      (dtnn_backend *be, const pool_geom *g, int n, const float *dy, const int32_t *argmax,    \
       float *dx, int accumulate))                                                             \
    X(BE_REQUIRED, void, avgpool_forward,                                                      \
      (dtnn_backend *be, const pool_geom *g, int n, const float *x, float *y))                 \
    X(BE_REQUIRED, void, avgpool_backward,                                                     \
      (dtnn_backend *be, const pool_geom *g, int n, const float *dy, float *dx,                \
       int accumulate))                                                                        \
    /* reduce_geom's sums, means and norms (in double, in index order: backends agree bit for  \
     * bit); backward spreads each output's gradient over the values it reduced (a norm's by   \
     * x / y: it reads the input x and the output y, which the others ignore). */              \
    X(BE_REQUIRED, void, reduce_forward,                                                       \
      (dtnn_backend *be, const reduce_geom *g, int n, const float *x, float *y))               \
    X(BE_REQUIRED, void, reduce_backward,                                                      \
      (dtnn_backend *be, const reduce_geom *g, int n, const float *x, const float *y,          \
       const float *dy, float *dx, int accumulate))                                            \
    /* layernorm_geom: y = (x - mean) rstd gamma[c] + beta[c] per position (gamma, beta NULL: \
     * 1 and 0), mean and rstd [n, HW] saved; backward writes (or adds to) dx and adds to dgamma and dbeta (NULL: not   \
     * wanted), each channel's sums in double over samples then positions, in order. */         \
    X(BE_REQUIRED, void, layernorm_forward,                                                    \
      (dtnn_backend *be, const layernorm_geom *g, int n, const float *x, const float *gamma,  \
       const float *beta, float *y, float *mean, float *rstd))                                 \
    X(BE_REQUIRED, void, layernorm_backward,                                                   \
      (dtnn_backend *be, const layernorm_geom *g, int n, const float *x, const float *gamma,  \
       const float *mean, const float *rstd, const float *dy, float *dx, int accumulate,       \
       float *dgamma, float *dbeta))                                                           \
    /* upsample_geom's forward, and its backward gathering each input's gradient from the     \
     * outputs that read it, in output order (backends agree bit for bit, no atomics). */      \
    X(BE_REQUIRED, void, upsample_forward,                                                     \
      (dtnn_backend *be, const upsample_geom *g, int n, const float *x, float *y))             \
    X(BE_REQUIRED, void, upsample_backward,                                                    \
      (dtnn_backend *be, const upsample_geom *g, int n, const float *dy, float *dx,            \
       int accumulate))                                                                        \
                                                                                               \
    /* Element-wise activations over count values; a = leaky-ReLU slope or the lower bound   \
     * of clamp / hardtanh, b = their upper bound (unused by the others). */                   \
    X(BE_REQUIRED, void, act_forward,                                                          \
      (dtnn_backend *be, act_kind kind, float a, float b, size_t count, const float *x,        \
       float *y))                                                                              \
    X(BE_REQUIRED, void, act_backward,                                                         \
      (dtnn_backend *be, act_kind kind, float a, float b, size_t count, const float *x,        \
       const float *y, const float *dy, float *dx, int accumulate))                            \
                                                                                               \
    /* se_geom's block, forward: every intermediate is written where the layers it stands   \
     * for keep theirs (mean, z1, a1, z2, s; a1 may be z1 and s z2, an in-place activation's), \
     * so that backward reads what each layer's own backward would. Backward: dx written (or  \
     * with accumulate added) = dy s + (the gradient through s back to the mean) / HW, dW1,    \
     * db1, dW2, db2 added to (NULL: not wanted); workspace holds se_workspace_floats per      \
     * sample. NULL: the model runs the block layer by layer. */                              \
    X(BE_OPTIONAL, void, se_forward,                                                           \
      (dtnn_backend *be, const se_geom *g, int n, const float *x, const float *w1,             \
       const float *b1, const float *w2, const float *b2, float *mean, float *z1, float *a1,   \
       float *z2, float *s, float *y))                                                         \
    X(BE_OPTIONAL, void, se_backward,                                                          \
      (dtnn_backend *be, const se_geom *g, int n, const float *x, const float *dy,             \
       const float *mean, const float *z1, const float *a1, const float *z2, const float *s,   \
       const float *w1, const float *w2, float *dw1, float *db1, float *dw2, float *db2,       \
       float *dx, int accumulate, float *workspace))                                           \
                                                                                               \
    /* permute: y (+)= x permuted, per sample (permute_geom). matmul: c (+)= op(a) op(b) for   \
     * each of the n samples' products (matmul_geom), trans_a / trans_b transposing each     \
     * matrix of a or b. */                                                                    \
    X(BE_REQUIRED, void, permute,                                                              \
      (dtnn_backend *be, const permute_geom *g, int n, const float *x, float *y,              \
       int accumulate))                                                                        \
    X(BE_REQUIRED, void, matmul,                                                               \
      (dtnn_backend *be, const matmul_geom *g, int n, int trans_a, int trans_b,               \
       const float *a, const float *b, float *c, int accumulate))                              \
                                                                                               \
    /* Softmax of [rows, cols, inner] over its middle axis (inner = 1: row-wise); backward:  \
     * dx = y * (dy - sum(dy * y)). */                                                         \
    X(BE_REQUIRED, void, softmax_forward,                                                      \
      (dtnn_backend *be, int rows, int cols, int inner, const float *x, float *y))             \
    X(BE_REQUIRED, void, softmax_backward,                                                     \
      (dtnn_backend *be, int rows, int cols, int inner, const float *y, const float *dy,       \
       float *dx, int accumulate))                                                             \
                                                                                               \
    /* Batch norm over [n, C, hw], training mode in phases, so synchronised batch norm can    \
     * sum the per-channel statistics over the ranks between them (one process just goes on): \
     *   bn_moments        per channel: sum of d = x - shift and of d^2 (shift = the running  \
     *                     mean, the same on every rank)                                       \
     *   bn_apply_train    normalise with the batch mean shift + sum / count and the biased   \
     *                     variance sumsq / count - (sum / count)^2; save mean and             \
     *                     1/sqrt(var + eps); update the running estimates as PyTorch          \
     *                     (unbiased variance, running = (1 - momentum) * running + momentum * \
     *                     batch)                                                              \
     *   bn_backward_sums  per channel: sum(dy) and sum(dy * xhat)                             \
     *   bn_backward_apply dx = gamma * invstd * (dy - sdy / count - xhat * sdyx / count)      \
     *   bn_param_grads    dgamma += sdyx, dbeta += sdy                                        \
     * The epilogue `ep` (NULL: none) may add a residual and clamp at 0: y = relu(bn(x) +     \
     * res); backward's dy is then the gradient at that output (cpu/batchnorm.c). Without     \
     * synchronisation, bn_train_forward and bn_train_backward do all phases with count =     \
     * n * hw, with the same results. Sums are in double, serially per channel. The double    \
     * buffers are backend memory. bn_backward_eval is the backward of the eval-mode          \
     * normalisation (a frozen batch norm with --freeze-bn): dx = (or +=) dy * gamma /        \
     * sqrt(running_var + eps); no epilogue is ever fused into one. */                         \
    X(BE_REQUIRED, void, bn_moments,                                                           \
      (dtnn_backend *be, int n, int C, int hw, const float *x, const float *shift,             \
       double *sum, double *sumsq))                                                            \
    X(BE_REQUIRED, void, bn_apply_train,                                                       \
      (dtnn_backend *be, int n, int C, int hw, const float *x, const float *gamma,             \
       const float *beta, const double *sum, const double *sumsq, double count, float eps,     \
       float momentum, const bn_epilogue *ep, float *y, float *save_mean, float *save_invstd,  \
       float *running_mean, float *running_var))                                               \
    X(BE_REQUIRED, void, bn_backward_sums,                                                     \
      (dtnn_backend *be, int n, int C, int hw, const float *x, const float *dy,                \
       const float *gamma, const float *beta, const bn_epilogue *ep, const float *save_mean,   \
       const float *save_invstd, double *sdy, double *sdyx))                                   \
    X(BE_REQUIRED, void, bn_backward_apply,                                                    \
      (dtnn_backend *be, int n, int C, int hw, const float *x, const float *dy,                \
       const float *gamma, const float *beta, const bn_epilogue *ep, const float *save_mean,   \
       const float *save_invstd, const double *sdy, const double *sdyx, double count,          \
       float *dx, int accumulate))                                                             \
    X(BE_REQUIRED, void, bn_train_forward,                                                     \
      (dtnn_backend *be, int n, int C, int hw, const float *x, const float *gamma,             \
       const float *beta, float eps, float momentum, const bn_epilogue *ep, float *y,          \
       float *save_mean, float *save_invstd, float *running_mean, float *running_var))         \
    X(BE_REQUIRED, void, bn_train_backward,                                                    \
      (dtnn_backend *be, int n, int C, int hw, const float *x, const float *dy,                \
       const float *gamma, const float *beta, const bn_epilogue *ep, const float *save_mean,   \
       const float *save_invstd, double *sdy, double *sdyx, float *dx, int accumulate))        \
    X(BE_REQUIRED, void, bn_forward_eval,                                                      \
      (dtnn_backend *be, int n, int C, int hw, const float *x, const float *gamma,             \
       const float *beta, const float *running_mean, const float *running_var, float eps,      \
       const bn_epilogue *ep, float *y))                                                       \
    X(BE_REQUIRED, void, bn_param_grads,                                                       \
      (dtnn_backend *be, int C, const double *sdy, const double *sdyx, float *dgamma,          \
       float *dbeta))                                                                          \
    X(BE_REQUIRED, void, bn_backward_eval,                                                     \
      (dtnn_backend *be, int n, int C, int hw, const float *dy, const float *gamma,            \
       const float *running_var, float eps, float *dx, int accumulate))                        \
                                                                                               \
    /* Element-wise. add: y = ((x[0] + x[1]) + x[2]) + ..., clamped at 0 with relu (a NaN     \
     * stays NaN). add_backward gives every dx[k] the gradient dy, or with y (a fused ReLU's  \
     * output) dy where y > 0; dx[k] NULL: skipped. copy_rows: rows x cols floats between     \
     * strided matrices, dst = src or dst += src. binary: y [n, C, H, W] = a op b with        \
     * broadcasting (binary_geom); backward: da and db are the gradients at a's and b's       \
     * shapes (dy, -dy for b of a difference, dy * b and dy * a for a product), summed over   \
     * the positions an input was repeated to; NULL: not wanted, else written or, with        \
     * accumulate, added (when a and b are one producer, db adds to da). pad: y [n, pad       \
     * output] = x padded (pad_geom); backward crops dy into dx (accumulate: adds). */         \
    X(BE_REQUIRED, void, add_forward,                                                          \
      (dtnn_backend *be, size_t count, int n_in, const float *const *x, int relu, float *y))   \
    X(BE_REQUIRED, void, add_backward,                                                         \
      (dtnn_backend *be, size_t count, const float *y, const float *dy, int n_out,             \
       float *const *dx, const int *accumulate))                                               \
    X(BE_REQUIRED, void, copy_rows,                                                            \
      (dtnn_backend *be, size_t rows, size_t cols, float *dst, size_t ld_dst,                  \
       const float *src, size_t ld_src, int accumulate))                                       \
    X(BE_REQUIRED, void, binary_forward,                                                       \
      (dtnn_backend *be, binary_kind kind, const binary_geom *g, int n, const float *a,        \
       const float *b, float *y))                                                              \
    X(BE_REQUIRED, void, binary_backward,                                                      \
      (dtnn_backend *be, binary_kind kind, const binary_geom *g, int n, const float *a,        \
       const float *b, const float *dy, float *da, int da_accumulate, float *db,               \
       int db_accumulate))                                                                     \
    X(BE_REQUIRED, void, pad_forward,                                                          \
      (dtnn_backend *be, const pad_geom *g, int n, const float *x, float *y))                  \
    X(BE_REQUIRED, void, pad_backward,                                                         \
      (dtnn_backend *be, const pad_geom *g, int n, const float *dy, float *dx,                 \
       int accumulate))                                                                        \
    X(BE_REQUIRED, void, fill, (dtnn_backend *be, float *y, size_t count, float value))        \
    X(BE_REQUIRED, void, add_i64, (dtnn_backend *be, int64_t *p, int64_t value))               \
                                                                                               \
    /* Inverted dropout with masks from the counter-based hash (core/rng.h,                   \
     * dtnn__hash_uniform) of (seed, stream, base + i): every backend draws the same mask.     \
     * mask [count] uint8. */                                                                  \
    X(BE_REQUIRED, void, dropout_forward,                                                      \
      (dtnn_backend *be, size_t count, float p, float scale, uint64_t seed, uint64_t stream,   \
       uint64_t base, const float *x, float *y, uint8_t *mask))                                \
    X(BE_REQUIRED, void, dropout_backward,                                                     \
      (dtnn_backend *be, size_t count, float scale, const uint8_t *mask, const float *dy,      \
       float *dx, int accumulate))                                                             \
                                                                                               \
    X(BE_REQUIRED, void, shortcut_forward,                                                     \
      (dtnn_backend *be, const shortcut_geom *g, int n, const float *x, float *y))             \
    X(BE_REQUIRED, void, shortcut_backward,                                                    \
      (dtnn_backend *be, const shortcut_geom *g, int n, const float *dy, float *dx,            \
       int accumulate))                                                                        \
                                                                                               \
    /* Loss of logits z [n, k] against labels [n] (backend memory, checked by the caller; [2n] \
     * with d->mix < 1, the partners' labels after them) and                                  \
     * its gradient dz = scale * dloss/dz (dz NULL: none); out [3] (backend memory) receives  \
     * the sum of the per-sample losses, the top-1 and the top-5 hits. */                      \
    X(BE_REQUIRED, void, loss,                                                                 \
      (dtnn_backend *be, const loss_desc *d, int n, int k, const float *z,                     \
       const int32_t *labels, float *dz, float scale, double *out))                            \
                                                                                               \
    /* Optimizer updates over the flat buffers (n values), one pass. */                        \
    X(BE_REQUIRED, void, sgd_step,                                                             \
      (dtnn_backend *be, const sgd_args *a, size_t n, float *w, const float *g, float *buf))   \
    X(BE_REQUIRED, void, adam_step,                                                            \
      (dtnn_backend *be, const adam_args *a, size_t n, float *w, const float *g, float *m1,    \
       float *m2))                                                                             \
    X(BE_REQUIRED, void, rmsprop_step,                                                         \
      (dtnn_backend *be, const rmsprop_args *a, size_t n, float *w, const float *g,            \
       float *square_avg, float *momentum_buf, float *grad_avg))                               \
    X(BE_REQUIRED, void, nadam_step,                                                           \
      (dtnn_backend *be, const nadam_args *a, size_t n, float *w, const float *g, float *m1,   \
       float *m2))                                                                             \
    X(BE_REQUIRED, void, lars_step,                                                            \
      (dtnn_backend *be, const lars_args *a, size_t n, float *w, const float *g, float *buf))  \
    /* LAMB's first pass: moments m1, m2 updated, the direction written to u [n]. */           \
    X(BE_REQUIRED, void, lamb_direction,                                                       \
      (dtnn_backend *be, const lamb_args *a, size_t n, const float *w, const float *g,         \
       float *m1, float *m2, float *u))                                                        \
    /* y = alpha x + beta y over n values; x NULL: y = beta y (LAMB's second pass, gradient    \
     * clipping's scaling). */                                                                 \
    X(BE_REQUIRED, void, axpby,                                                                \
      (dtnn_backend *be, size_t n, float alpha, const float *x, float beta, float *y))         \
    /* Sums of squares of x over count segments [begin[s], end[s]) (host arrays), into out     \
     * [count] (host memory: the caller waits for them), in double, each summed in an order    \
     * fixed by the segment alone (thread counts do not change a bit). */                      \
    X(BE_REQUIRED, void, segment_sumsq,                                                        \
      (dtnn_backend *be, int count, const size_t *begin, const size_t *end, const float *x,    \
       double *out))                                                                           \
                                                                                               \
    /* How many of x [n] are NaN or infinite. */                                               \
    X(BE_REQUIRED, size_t, count_nonfinite, (dtnn_backend *be, const float *x, size_t n))      \
                                                                                               \
    /* Gradients that travel in half precision (train/grad_sync.c), converted where they      \
     * live, with core/half.h's conversions (to nearest, ties to even) on every backend.      \
     * dtype is DTNN_COMM_F16 or DTNN_COMM_BF16; dst and src are its bit patterns. half_pack: \
     * dst [n] = src * scale. half_unpack: dst [n] = src widened * inv_scale; for fp16, stats \
     * [2] (backend memory) also receive {1 if a value of src is infinite or NaN (its sum     \
     * overflowed) else 0, the largest |dst|}, and dst is left untouched when that flag is 1, \
     * so the caller can redo the sum from dst's fp32 values. bf16 (fp32's range) is always   \
     * widened; its stats are not written (may be NULL). */                                    \
    X(BE_REQUIRED, void, half_pack,                                                            \
      (dtnn_backend *be, dtnn_comm_dtype dtype, size_t n, const float *src, float scale,       \
       uint16_t *dst))                                                                         \
    X(BE_REQUIRED, void, half_unpack,                                                          \
      (dtnn_backend *be, dtnn_comm_dtype dtype, size_t n, const uint16_t *src,                 \
       float inv_scale, float *dst, float *stats))                                             \
                                                                                               \
    /* The operations return nothing; a backend whose calls can fail (a GPU's: a launch, a    \
     * library call) keeps its first failure and reports it here as an error naming the call, \
     * every time from then on (its later operations are skipped: the device state is no     \
     * longer trustworthy). NULL: the operations cannot fail. The engine checks after each    \
     * forward, loss, backward and optimizer step (be_check). */                               \
    X(BE_OPTIONAL, dtnn_status, check, (dtnn_backend *be, dtnn_error *err))                    \
                                                                                               \
    /* The backend's native queue for a communicator that runs on the device (NCCL: a         \
     * cudaStream_t, and the device's index in *device). NULL: the backend has none. */        \
    X(BE_OPTIONAL, void *, native_stream, (dtnn_backend *be, int *device))

#define BE_OP_SLOT(need, ret, name, params) ret(*name) params;
typedef struct {
    DTNN_BACKEND_OPS(BE_OP_SLOT)
} dtnn_backend_ops;
#undef BE_OP_SLOT

struct dtnn_backend {
    const dtnn_backend_ops *op;
    const char *name;
    /* Which code computes, where the name does not say it all (the cpu backends' kernel set:
     * sets round differently, so data-parallel ranks must agree on it); NULL otherwise. */
    const char *arithmetic;
    /* 1: the host may read and write this backend's memory directly (MPI then works in
     * place); 0: only through upload / download (buffers are staged). */
    int host_memory;
    int threads;        /* CPU threads the operations run on (0: the runtime's default) */
    int saved_threads;  /* the caller's, restored by leave */
    void *state;        /* the backend's own */
};

/* What each backend folder gives registry.c: its name, how to make one (NULL where this
 * build lacks it: probe then says why) and, optionally, a cheap probe of whether one can be
 * made here (NULL: registry.c makes one and frees it). probe returns 1 (usable) or 0, with a
 * short reason for `dtnn devices` in why. */
typedef struct {
    const char *name;
    dtnn_backend *(*create)(int threads, dtnn_error *err);
    int (*probe)(char *why, size_t len);
} backend_registration;

/* Creates the backend `name` (registry.c lists them) running on `threads` CPU threads (0: the
 * OpenMP default); NULL with a message naming the choices when it is unknown or not usable
 * on this machine, or when its table lacks an operation (naming it). */
dtnn_backend *dtnn__backend_create(const char *name, int threads, dtnn_error *err);
void dtnn__backend_free(dtnn_backend *be);

/* The CPU kernel set this process runs (cpu_select.c): its name, and whether DTNN_CPU forced
 * it (else auto chose it). cpu_kernels_adopt: an automatic choice takes the set called `name`
 * instead when that set is no faster and runs here, as long as no backend has taken the
 * table yet (the ranks of an MPI run agreeing on one set: comm.c); 0 when the set is then the
 * one, -1 when not. */
const char *cpu_kernels_choice(int *forced);
int cpu_kernels_adopt(const char *name);

/* The names of the operations table `ops` leaves NULL although they are BE_REQUIRED, as
 * "a, b, c" in msg; returns how many. */
int backend_ops_missing(const dtnn_backend_ops *ops, char *msg, size_t len);

/* The name of slot i (0 <= i < BACKEND_OP_COUNT), for messages and the parity test. */
#define BE_OP_COUNT_ONE(need, ret, name, params) +1
enum { BACKEND_OP_COUNT = 0 DTNN_BACKEND_OPS(BE_OP_COUNT_ONE) };
#undef BE_OP_COUNT_ONE
const char *backend_op_name(int i);

static inline void be_enter(dtnn_backend *be)
{
    if (be->op->enter)
        be->op->enter(be);
}

static inline void be_leave(dtnn_backend *be)
{
    if (be->op->leave)
        be->op->leave(be);
}

/* An operation that returns nothing: be_run(be, fill, y, count, 0.0f). */
#define be_run(be, fn, ...)                                                                    \
    do {                                                                                       \
        dtnn_backend *be_run_ = (be);                                                          \
        be_enter(be_run_);                                                                     \
        be_run_->op->fn(be_run_, __VA_ARGS__);                                                 \
        be_leave(be_run_);                                                                     \
    } while (0)

/* Waits for the backend's queued operations (a GPU's stream), bracketed. */
static inline void be_sync(dtnn_backend *be)
{
    be_enter(be);
    be->op->sync(be);
    be_leave(be);
}

/* Host <-> backend copies, bracketed like every operation. */
void be_upload(dtnn_backend *be, void *dst, const void *src, size_t bytes);
void be_download(dtnn_backend *be, void *dst, const void *src, size_t bytes);
void be_zero(dtnn_backend *be, void *p, size_t bytes);
void *be_alloc(dtnn_backend *be, size_t bytes);
void be_free(dtnn_backend *be, void *p);
size_t be_count_nonfinite(dtnn_backend *be, const float *x, size_t n);

/* The first failure of a backend's operations, if any (dtnn_backend_ops.check). */
static inline dtnn_status be_check(dtnn_backend *be, dtnn_error *err)
{
    return be->op->check ? be->op->check(be, err) : DTNN_OK;
}

/* FLOP/s of fp32 products on this backend (a 256 x 256 x 256 linear_forward through its
 * table, the best of a few within about 50 ms, bracketed and synchronised): the rate the
 * backward-time estimate of the automatic bucket size charges. 0 when it cannot be measured
 * (out of memory). */
double be_matmul_rate(dtnn_backend *be);

#endif
