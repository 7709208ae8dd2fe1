/*
 * cuda_internal.h — what the CUDA backend's files share: its state (device, stream, library
 * handles, the first failure), the error recording every call goes through, and the operations
 * the kernel files (the .cu files, one family each, mirroring ../cpu/) put into the table that
 * cuda_backend.c assembles. Included by C (cuda_backend.c, cuda_conv.c, compiled by the C
 * compiler) and by the .cu files (nvcc): the cuBLAS and cuDNN handles are kept as void * here,
 * so that the kernel files need neither library's header.
 *
 * Errors: an operation returns nothing (backend.h), so the first failing CUDA, cuBLAS or cuDNN
 * call is recorded with its name and the runtime's reason, every later operation is skipped
 * (after a failed launch the device's contents are no longer to be trusted), and the engine
 * gets the message from the table's check at its next forward, loss, backward or step.
 */
#ifndef DTNN_CUDA_INTERNAL_H
#define DTNN_CUDA_INTERNAL_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "../backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A convolution geometry's measured choice (cuda_conv.c): layers of the same geometry (ResNet-50
 * repeats most of its 53) take it instead of measuring again. */
typedef struct {
    conv_geom g;
    int max_batch;
    size_t limit;
    dtnn_precision precision;
    int fwd, bwd_data, bwd_filter;
    int math_fwd, math_bwd_data, math_bwd_filter;   /* cudnnMathType_t, measured with */
    int nhwc;                   /* bf16: the copies channels-last */
    size_t workspace;
} cuda_conv_choice;

/* The layout of bf16 convolutions' copies (cuda_conv.c): measured, or fixed by
 * DTNN_CUDA_CONV_LAYOUT (tests, diagnosis) where cuDNN has an algorithm in it. */
typedef enum { CUDA_LAYOUT_MEASURED = 0, CUDA_LAYOUT_NCHW, CUDA_LAYOUT_NHWC } cuda_layout;

typedef struct {
    int device;
    cudaStream_t stream;        /* every operation runs on it, in the engine's order */
    cudaStream_t copy_stream;   /* the batch uploads that overlap compute (upload_start) */
    cudaEvent_t uploaded[UPLOAD_SLOTS]; /* per slot: its copy done (on copy_stream) */
    cudaEvent_t released[UPLOAD_SLOTS]; /* per slot: compute done reading it (on stream) */
    void *cublas;               /* cublasHandle_t, bound to stream */
    void *cudnn;                /* cudnnHandle_t, bound to stream */
    unsigned long long *count;  /* device scratch: count_nonfinite's counter */
    size_t allocations;         /* cudaMalloc + cudaMallocHost calls so far */
    cuda_conv_choice *choices;  /* measured so far, n_choices of cap_choices */
    cuda_layout conv_layout;
    int n_choices, cap_choices;
    int failed;
    char error[448];
} cuda_state;

static inline cuda_state *cuda_of(dtnn_backend *be) { return (cuda_state *)be->state; }
/* v rounded up to a multiple of 256 (bytes, or elements): where the workspace's parts start,
 * aligned as cuDNN and cuBLAS want their operands. */
static inline size_t cuda_round256(size_t v) { return (v + 255) / 256 * 256; }

/* 1 when e is cudaSuccess; else records "what: reason" as the backend's failure (the first
 * one only) and returns 0. */
int cuda_ok(dtnn_backend *be, cudaError_t e, const char *what);
/* Records a failure with a printf-formatted message (the first one only). */
void cuda_fail(dtnn_backend *be, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The convolution plans (cuda_conv.c). */
conv_plan *cuda_conv_plan_create(dtnn_backend *be, const conv_desc *d, dtnn_error *err);
void cuda_conv_plan_free(dtnn_backend *be, conv_plan *p);
size_t cuda_conv_workspace(const conv_plan *p);
const char *cuda_conv_method(const conv_plan *p);
void cuda_conv_forward(dtnn_backend *be, const conv_plan *p, int n, const float *x,
                       const float *w, const float *bias, float *y, void *workspace);
void cuda_conv_backward(dtnn_backend *be, const conv_plan *p, int n, const float *x,
                        const float *dy, const float *w, float *dw, float *db, float *dx,
                        int accumulate, void *workspace);

/* Kernels with the table's contracts (backend.h), each in the file of its family. */

/* elementwise.cu */
void cuda_add_forward(dtnn_backend *be, size_t count, int n_in, const float *const *x,
                      int relu, float *y);
void cuda_add_backward(dtnn_backend *be, size_t count, const float *y, const float *dy,
                       int n_out, float *const *dx, const int *accumulate);
void cuda_copy_rows(dtnn_backend *be, size_t rows, size_t cols, float *dst, size_t ld_dst,
                    const float *src, size_t ld_src, int accumulate);
void cuda_fill(dtnn_backend *be, float *y, size_t count, float value);
void cuda_add_i64(dtnn_backend *be, int64_t *p, int64_t value);
void cuda_dropout_forward(dtnn_backend *be, size_t count, float p, float scale, uint64_t seed,
                          uint64_t stream, uint64_t base, const float *x, float *y,
                          uint8_t *mask);
void cuda_dropout_backward(dtnn_backend *be, size_t count, float scale, const uint8_t *mask,
                           const float *dy, float *dx, int accumulate);
size_t cuda_count_nonfinite(dtnn_backend *be, const float *x, size_t n);
/* y [n, out] += b [out], per row (the linear layer's bias); db [out] += the column sums of
 * dy [n, out], in row order */
void cuda_bias_rows(dtnn_backend *be, int n, int out, const float *b, float *y);
void cuda_bias_rows_grad(dtnn_backend *be, int n, int out, const float *dy, float *db);

/* bf16.cu: y = x rounded to bf16; y = (or +=) x widened; y [n, K, hw] = x widened + bias
 * [K] (bias NULL: none) */
void cuda_to_bf16(dtnn_backend *be, size_t n, const float *x, uint16_t *y);
void cuda_from_bf16(dtnn_backend *be, size_t n, const uint16_t *x, float *y, int accumulate);
void cuda_from_bf16_bias(dtnn_backend *be, int n, int K, size_t hw, const uint16_t *x,
                         const float *bias, float *y);
/* The same with a transpose of each of `batches` matrices, for channels-last copies: to:
 * y [b][c][r] = bf16(x [b][r][c]); from: y [b][r][c] = (or +=) widen(x [b][c][r]) + bias [r]
 * (bias NULL: none), for r < rows, c < cols. */
void cuda_to_bf16_t(dtnn_backend *be, int batches, int rows, int cols, const float *x,
                    uint16_t *y);
void cuda_from_bf16_t(dtnn_backend *be, int batches, int rows, int cols, const uint16_t *x,
                      const float *bias, float *y, int accumulate);
/* half_transport.cu: the table's half_pack and half_unpack */
void cuda_half_pack(dtnn_backend *be, dtnn_comm_dtype dtype, size_t n, const float *src,
                    float scale, uint16_t *dst);
void cuda_half_unpack(dtnn_backend *be, dtnn_comm_dtype dtype, size_t n, const uint16_t *src,
                      float inv_scale, float *dst, float *stats);
/* activation.cu */
void cuda_act_forward(dtnn_backend *be, act_kind kind, float a, float b, size_t count,
                      const float *x, float *y);
void cuda_act_backward(dtnn_backend *be, act_kind kind, float a, float b, size_t count,
                       const float *x, const float *y, const float *dy, float *dx,
                       int accumulate);

/* pool.cu */
void cuda_maxpool_forward(dtnn_backend *be, const pool_geom *g, int n, const float *x, float *y,
                          int32_t *argmax);
void cuda_maxpool_backward(dtnn_backend *be, const pool_geom *g, int n, const float *dy,
                           const int32_t *argmax, float *dx, int accumulate);
void cuda_avgpool_forward(dtnn_backend *be, const pool_geom *g, int n, const float *x,
                          float *y);
void cuda_avgpool_backward(dtnn_backend *be, const pool_geom *g, int n, const float *dy,
                           float *dx, int accumulate);
void cuda_reduce_forward(dtnn_backend *be, const reduce_geom *g, int n, const float *x,
                         float *y);
void cuda_reduce_backward(dtnn_backend *be, const reduce_geom *g, int n, const float *x,
                          const float *y, const float *dy, float *dx, int accumulate);
void cuda_layernorm_forward(dtnn_backend *be, const layernorm_geom *g, int n, const float *x,
                            const float *gamma, const float *beta, float *y, float *mean,
                            float *rstd);
void cuda_layernorm_backward(dtnn_backend *be, const layernorm_geom *g, int n, const float *x,
                             const float *gamma, const float *mean, const float *rstd,
                             const float *dy, float *dx, int accumulate, float *dgamma,
                             float *dbeta);
void cuda_upsample_forward(dtnn_backend *be, const upsample_geom *g, int n, const float *x,
                           float *y);
void cuda_upsample_backward(dtnn_backend *be, const upsample_geom *g, int n, const float *dy,
                            float *dx, int accumulate);

/* permute.cu */
void cuda_permute(dtnn_backend *be, const permute_geom *g, int n, const float *x, float *y,
                  int accumulate);

/* softmax.cu */
void cuda_softmax_forward(dtnn_backend *be, int rows, int cols, int inner, const float *x,
                          float *y);
void cuda_softmax_backward(dtnn_backend *be, int rows, int cols, int inner, const float *y,
                           const float *dy, float *dx, int accumulate);

/* batchnorm.cu */
void cuda_bn_moments(dtnn_backend *be, int n, int C, int hw, const float *x,
                     const float *shift, double *sum, double *sumsq);
void cuda_bn_apply_train(dtnn_backend *be, int n, int C, int hw, const float *x,
                         const float *gamma, const float *beta, const double *sum,
                         const double *sumsq, double count, float eps, float momentum,
                         const bn_epilogue *ep, float *y, float *save_mean, float *save_invstd,
                         float *running_mean, float *running_var);
void cuda_bn_backward_sums(dtnn_backend *be, int n, int C, int hw, const float *x,
                           const float *dy, const float *gamma, const float *beta,
                           const bn_epilogue *ep, const float *save_mean,
                           const float *save_invstd, double *sdy, double *sdyx);
void cuda_bn_backward_apply(dtnn_backend *be, int n, int C, int hw, const float *x,
                            const float *dy, const float *gamma, const float *beta,
                            const bn_epilogue *ep, const float *save_mean,
                            const float *save_invstd, const double *sdy, const double *sdyx,
                            double count, float *dx, int accumulate);
void cuda_bn_train_forward(dtnn_backend *be, int n, int C, int hw, const float *x,
                           const float *gamma, const float *beta, float eps, float momentum,
                           const bn_epilogue *ep, float *y, float *save_mean,
                           float *save_invstd, float *running_mean, float *running_var);
void cuda_bn_train_backward(dtnn_backend *be, int n, int C, int hw, const float *x,
                            const float *dy, const float *gamma, const float *beta,
                            const bn_epilogue *ep, const float *save_mean,
                            const float *save_invstd, double *sdy, double *sdyx, float *dx,
                            int accumulate);
void cuda_bn_forward_eval(dtnn_backend *be, int n, int C, int hw, const float *x,
                          const float *gamma, const float *beta, const float *running_mean,
                          const float *running_var, float eps, const bn_epilogue *ep, float *y);
void cuda_bn_param_grads(dtnn_backend *be, int C, const double *sdy, const double *sdyx,
                         float *dgamma, float *dbeta);
void cuda_bn_backward_eval(dtnn_backend *be, int n, int C, int hw, const float *dy,
                           const float *gamma, const float *running_var, float eps, float *dx,
                           int accumulate);

/* broadcast.cu */
void cuda_binary_forward(dtnn_backend *be, binary_kind kind, const binary_geom *g, int n,
                         const float *a, const float *b, float *y);
void cuda_binary_backward(dtnn_backend *be, binary_kind kind, const binary_geom *g, int n,
                          const float *a, const float *b, const float *dy, float *da,
                          int da_accumulate, float *db, int db_accumulate);

/* pad.cu */
void cuda_pad_forward(dtnn_backend *be, const pad_geom *g, int n, const float *x, float *y);
void cuda_pad_backward(dtnn_backend *be, const pad_geom *g, int n, const float *dy, float *dx,
                       int accumulate);

/* shortcut.cu */
void cuda_shortcut_forward(dtnn_backend *be, const shortcut_geom *g, int n, const float *x,
                           float *y);
void cuda_shortcut_backward(dtnn_backend *be, const shortcut_geom *g, int n, const float *dy,
                            float *dx, int accumulate);

/* loss.cu */
void cuda_loss(dtnn_backend *be, const loss_desc *d, int n, int k, const float *z,
               const int32_t *labels, float *dz, float scale, double *out);

/* optim.cu */
void cuda_sgd_step(dtnn_backend *be, const sgd_args *a, size_t n, float *w, const float *g,
                   float *buf);
void cuda_adam_step(dtnn_backend *be, const adam_args *a, size_t n, float *w, const float *g,
                    float *m1, float *m2);
void cuda_rmsprop_step(dtnn_backend *be, const rmsprop_args *a, size_t n, float *w,
                       const float *g, float *square_avg, float *momentum_buf,
                       float *grad_avg);
void cuda_nadam_step(dtnn_backend *be, const nadam_args *a, size_t n, float *w, const float *g,
                     float *m1, float *m2);
void cuda_lars_step(dtnn_backend *be, const lars_args *a, size_t n, float *w, const float *g,
                    float *buf);
void cuda_lamb_direction(dtnn_backend *be, const lamb_args *a, size_t n, const float *w,
                         const float *g, float *m1, float *m2, float *u);
void cuda_axpby(dtnn_backend *be, size_t n, float alpha, const float *x, float beta, float *y);
void cuda_segment_sumsq(dtnn_backend *be, int count, const size_t *begin, const size_t *end,
                        const float *x, double *out);

#ifdef __cplusplus
}
#endif

#endif
