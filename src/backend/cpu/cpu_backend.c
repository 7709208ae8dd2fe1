/*
 * cpu_backend.c — the CPU backend's operation table (../backend.h): host memory from
 * dtnn__alloc_aligned, the kernels of this folder, and the thread count of the backend
 * instance applied for the duration of each call (OpenMP's nthreads ICV of the calling thread,
 * restored on leave, so an application embedding dtnn keeps its own OpenMP settings). Compiled
 * once per kernel set like every kernel file, so there is one table per set
 * (cpu_backend_table, renamed cpu_backend_table_avx2 by cmake/isa_rename.sh); cpu_select.c
 * picks one.
 */
#include <string.h>

#include "cpu_kernels.h"

static void cpu_enter(dtnn_backend *be)
{
#ifdef _OPENMP
    be->saved_threads = omp_get_max_threads();
    if (be->threads > 0)
        omp_set_num_threads(be->threads);
#else
    (void)be;
#endif
}

static void cpu_leave(dtnn_backend *be)
{
#ifdef _OPENMP
    if (be->threads > 0)
        omp_set_num_threads(be->saved_threads);
#else
    (void)be;
#endif
}

static void *op_alloc(dtnn_backend *be, size_t bytes)
{
    (void)be;
    return dtnn__alloc_aligned(bytes);
}

static void op_free(dtnn_backend *be, void *p)
{
    (void)be;
    dtnn__free_aligned(p);
}

static void op_zero(dtnn_backend *be, void *p, size_t bytes)
{
    (void)be;
    memset(p, 0, bytes);
}

static void op_copy(dtnn_backend *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    if (bytes)
        memmove(dst, src, bytes);
}

static void op_sync(dtnn_backend *be) { (void)be; }

static void op_destroy(dtnn_backend *be) { free(be); }

static size_t op_linear_workspace(dtnn_backend *be, const linear_desc *d, int max_batch)
{
    (void)be;
    return cpu_linear_workspace(d, max_batch);
}

static void op_linear_forward(dtnn_backend *be, const linear_desc *d, int n, const float *x,
                              const float *w, const float *b, float *y, void *workspace)
{
    (void)be;
    cpu_linear_forward(d, n, x, w, b, y, workspace);
}

static void op_linear_backward(dtnn_backend *be, const linear_desc *d, int n, const float *x,
                               const float *dy, const float *w, float *dw, float *db,
                               float *dx, int accumulate, void *workspace)
{
    (void)be;
    cpu_linear_backward(d, n, x, dy, w, dw, db, dx, accumulate, workspace);
}

static void op_maxpool_forward(dtnn_backend *be, const pool_geom *g, int n, const float *x,
                               float *y, int32_t *argmax)
{
    (void)be;
    cpu_maxpool_forward(g, n, x, y, argmax);
}

static void op_maxpool_backward(dtnn_backend *be, const pool_geom *g, int n, const float *dy,
                                const int32_t *argmax, float *dx, int accumulate)
{
    (void)be;
    cpu_maxpool_backward(g, n, dy, argmax, dx, accumulate);
}

static void op_avgpool_forward(dtnn_backend *be, const pool_geom *g, int n, const float *x,
                               float *y)
{
    (void)be;
    cpu_avgpool_forward(g, n, x, y);
}

static void op_avgpool_backward(dtnn_backend *be, const pool_geom *g, int n, const float *dy,
                                float *dx, int accumulate)
{
    (void)be;
    cpu_avgpool_backward(g, n, dy, dx, accumulate);
}

static void op_reduce_forward(dtnn_backend *be, const reduce_geom *g, int n, const float *x,
                              float *y)
{
    (void)be;
    cpu_reduce_forward(g, n, x, y);
}

static void op_reduce_backward(dtnn_backend *be, const reduce_geom *g, int n, const float *x,
                               const float *y, const float *dy, float *dx, int accumulate)
{
    (void)be;
    cpu_reduce_backward(g, n, x, y, dy, dx, accumulate);
}

static void op_layernorm_forward(dtnn_backend *be, const layernorm_geom *g, int n,
                                 const float *x, const float *gamma, const float *beta, float *y,
                                 float *mean, float *rstd)
{
    (void)be;
    cpu_layernorm_forward(g, n, x, gamma, beta, y, mean, rstd);
}

static void op_layernorm_backward(dtnn_backend *be, const layernorm_geom *g, int n,
                                  const float *x, const float *gamma, const float *mean,
                                  const float *rstd, const float *dy, float *dx, int accumulate,
                                  float *dgamma, float *dbeta)
{
    (void)be;
    cpu_layernorm_backward(g, n, x, gamma, mean, rstd, dy, dx, accumulate, dgamma, dbeta);
}

static void op_upsample_forward(dtnn_backend *be, const upsample_geom *g, int n,
                                const float *x, float *y)
{
    (void)be;
    cpu_upsample_forward(g, n, x, y);
}

static void op_upsample_backward(dtnn_backend *be, const upsample_geom *g, int n,
                                 const float *dy, float *dx, int accumulate)
{
    (void)be;
    cpu_upsample_backward(g, n, dy, dx, accumulate);
}

static void op_act_forward(dtnn_backend *be, act_kind kind, float a, float b, size_t count,
                           const float *x, float *y)
{
    (void)be;
    cpu_act_forward(kind, a, b, count, x, y);
}

static void op_act_backward(dtnn_backend *be, act_kind kind, float a, float b, size_t count,
                            const float *x, const float *y, const float *dy, float *dx,
                            int accumulate)
{
    (void)be;
    cpu_act_backward(kind, a, b, count, x, y, dy, dx, accumulate);
}

static void op_se_forward(dtnn_backend *be, const se_geom *g, int n, const float *x,
                          const float *w1, const float *b1, const float *w2, const float *b2,
                          float *mean, float *z1, float *a1, float *z2, float *s, float *y)
{
    (void)be;
    cpu_se_forward(g, n, x, w1, b1, w2, b2, mean, z1, a1, z2, s, y);
}

static void op_se_backward(dtnn_backend *be, const se_geom *g, int n, const float *x,
                           const float *dy, const float *mean, const float *z1, const float *a1,
                           const float *z2, const float *s, const float *w1, const float *w2,
                           float *dw1, float *db1, float *dw2, float *db2, float *dx,
                           int accumulate, float *workspace)
{
    (void)be;
    cpu_se_backward(g, n, x, dy, mean, z1, a1, z2, s, w1, w2, dw1, db1, dw2, db2, dx,
                    accumulate, workspace);
}

static void op_permute(dtnn_backend *be, const permute_geom *g, int n, const float *x, float *y,
                       int accumulate)
{
    (void)be;
    cpu_permute(g, n, x, y, accumulate);
}

/* All n * batch products in one strided call: the set's GEMM parallelises inside it. */
static void op_matmul(dtnn_backend *be, const matmul_geom *g, int n, int trans_a, int trans_b,
                      const float *a, const float *b, float *c, int accumulate)
{
    (void)be;
    const int M = g->M, N = g->N, K = g->K;
    cpu_gemm_strided(n * g->batch, trans_a, trans_b, M, N, K, 1.0f, a, trans_a ? M : K,
                     (size_t)M * K, b, trans_b ? K : N, (size_t)K * N, accumulate ? 1.0f : 0.0f,
                     c, N, (size_t)M * N, 0);
}

static void op_softmax_forward(dtnn_backend *be, int rows, int cols, int inner, const float *x,
                               float *y)
{
    (void)be;
    cpu_softmax_forward(rows, cols, inner, x, y);
}

static void op_softmax_backward(dtnn_backend *be, int rows, int cols, int inner, const float *y,
                                const float *dy, float *dx, int accumulate)
{
    (void)be;
    cpu_softmax_backward(rows, cols, inner, y, dy, dx, accumulate);
}

static void op_bn_moments(dtnn_backend *be, int n, int C, int hw, const float *x,
                          const float *shift, double *sum, double *sumsq)
{
    (void)be;
    cpu_bn_moments(n, C, hw, x, shift, sum, sumsq);
}

static void op_bn_apply_train(dtnn_backend *be, int n, int C, int hw, const float *x,
                              const float *gamma, const float *beta, const double *sum,
                              const double *sumsq, double count, float eps, float momentum,
                              const bn_epilogue *ep, float *y, float *save_mean,
                              float *save_invstd, float *running_mean, float *running_var)
{
    (void)be;
    cpu_bn_apply_train(n, C, hw, x, gamma, beta, sum, sumsq, count, eps, momentum, ep, y,
                       save_mean, save_invstd, running_mean, running_var);
}

static void op_bn_backward_sums(dtnn_backend *be, int n, int C, int hw, const float *x,
                                const float *dy, const float *gamma, const float *beta,
                                const bn_epilogue *ep, const float *save_mean,
                                const float *save_invstd, double *sdy, double *sdyx)
{
    (void)be;
    cpu_bn_backward_sums(n, C, hw, x, dy, gamma, beta, ep, save_mean, save_invstd, sdy, sdyx);
}

static void op_bn_backward_apply(dtnn_backend *be, int n, int C, int hw, const float *x,
                                 const float *dy, const float *gamma, const float *beta,
                                 const bn_epilogue *ep, const float *save_mean,
                                 const float *save_invstd, const double *sdy,
                                 const double *sdyx, double count, float *dx, int accumulate)
{
    (void)be;
    cpu_bn_backward_apply(n, C, hw, x, dy, gamma, beta, ep, save_mean, save_invstd, sdy, sdyx,
                          count, dx, accumulate);
}

static void op_bn_train_forward(dtnn_backend *be, int n, int C, int hw, const float *x,
                                const float *gamma, const float *beta, float eps,
                                float momentum, const bn_epilogue *ep, float *y,
                                float *save_mean, float *save_invstd, float *running_mean,
                                float *running_var)
{
    (void)be;
    cpu_bn_train_forward(n, C, hw, x, gamma, beta, eps, momentum, ep, y, save_mean,
                         save_invstd, running_mean, running_var);
}

static void op_bn_train_backward(dtnn_backend *be, int n, int C, int hw, const float *x,
                                 const float *dy, const float *gamma, const float *beta,
                                 const bn_epilogue *ep, const float *save_mean,
                                 const float *save_invstd, double *sdy, double *sdyx,
                                 float *dx, int accumulate)
{
    (void)be;
    cpu_bn_train_backward(n, C, hw, x, dy, gamma, beta, ep, save_mean, save_invstd, sdy, sdyx,
                          dx, accumulate);
}

static void op_bn_forward_eval(dtnn_backend *be, int n, int C, int hw, const float *x,
                               const float *gamma, const float *beta,
                               const float *running_mean, const float *running_var, float eps,
                               const bn_epilogue *ep, float *y)
{
    (void)be;
    cpu_bn_forward_eval(n, C, hw, x, gamma, beta, running_mean, running_var, eps, ep, y);
}

static void op_bn_backward_eval(dtnn_backend *be, int n, int C, int hw, const float *dy,
                                const float *gamma, const float *running_var, float eps,
                                float *dx, int accumulate)
{
    (void)be;
    cpu_bn_backward_eval(n, C, hw, dy, gamma, running_var, eps, dx, accumulate);
}

static void op_bn_param_grads(dtnn_backend *be, int C, const double *sdy, const double *sdyx,
                              float *dgamma, float *dbeta)
{
    (void)be;
    cpu_bn_param_grads(C, sdy, sdyx, dgamma, dbeta);
}

static void op_add_forward(dtnn_backend *be, size_t count, int n_in, const float *const *x,
                           int relu, float *y)
{
    (void)be;
    cpu_add_forward(count, n_in, x, relu, y);
}

static void op_add_backward(dtnn_backend *be, size_t count, const float *y, const float *dy,
                            int n_out, float *const *dx, const int *accumulate)
{
    (void)be;
    cpu_add_backward(count, y, dy, n_out, dx, accumulate);
}

static void op_copy_rows(dtnn_backend *be, size_t rows, size_t cols, float *dst,
                         size_t ld_dst, const float *src, size_t ld_src, int accumulate)
{
    (void)be;
    cpu_copy_rows(rows, cols, dst, ld_dst, src, ld_src, accumulate);
}

static void op_binary_forward(dtnn_backend *be, binary_kind kind, const binary_geom *g, int n,
                              const float *a, const float *b, float *y)
{
    (void)be;
    cpu_binary_forward(kind, g, n, a, b, y);
}

static void op_binary_backward(dtnn_backend *be, binary_kind kind, const binary_geom *g, int n,
                               const float *a, const float *b, const float *dy, float *da,
                               int da_accumulate, float *db, int db_accumulate)
{
    (void)be;
    cpu_binary_backward(kind, g, n, a, b, dy, da, da_accumulate, db, db_accumulate);
}

static void op_pad_forward(dtnn_backend *be, const pad_geom *g, int n, const float *x,
                           float *y)
{
    (void)be;
    cpu_pad_forward(g, n, x, y);
}

static void op_pad_backward(dtnn_backend *be, const pad_geom *g, int n, const float *dy,
                            float *dx, int accumulate)
{
    (void)be;
    cpu_pad_backward(g, n, dy, dx, accumulate);
}

static void op_fill(dtnn_backend *be, float *y, size_t count, float value)
{
    (void)be;
    cpu_fill(y, count, value);
}

static void op_add_i64(dtnn_backend *be, int64_t *p, int64_t value)
{
    (void)be;
    *p += value;
}

static void op_dropout_forward(dtnn_backend *be, size_t count, float p, float scale,
                               uint64_t seed, uint64_t stream, uint64_t base, const float *x,
                               float *y, uint8_t *mask)
{
    (void)be;
    cpu_dropout_forward(count, p, scale, seed, stream, base, x, y, mask);
}

static void op_dropout_backward(dtnn_backend *be, size_t count, float scale,
                                const uint8_t *mask, const float *dy, float *dx,
                                int accumulate)
{
    (void)be;
    cpu_dropout_backward(count, scale, mask, dy, dx, accumulate);
}

static void op_shortcut_forward(dtnn_backend *be, const shortcut_geom *g, int n,
                                const float *x, float *y)
{
    (void)be;
    cpu_shortcut_forward(g, n, x, y);
}

static void op_shortcut_backward(dtnn_backend *be, const shortcut_geom *g, int n,
                                 const float *dy, float *dx, int accumulate)
{
    (void)be;
    cpu_shortcut_backward(g, n, dy, dx, accumulate);
}

static void op_loss(dtnn_backend *be, const loss_desc *d, int n, int k, const float *z,
                    const int32_t *labels, float *dz, float scale, double *out)
{
    (void)be;
    cpu_loss(d, n, k, z, labels, dz, scale, out);
}

static void op_sgd_step(dtnn_backend *be, const sgd_args *a, size_t n, float *w,
                        const float *g, float *buf)
{
    (void)be;
    cpu_sgd_step(a, n, w, g, buf);
}

static void op_adam_step(dtnn_backend *be, const adam_args *a, size_t n, float *w,
                         const float *g, float *m1, float *m2)
{
    (void)be;
    cpu_adam_step(a, n, w, g, m1, m2);
}

static void op_rmsprop_step(dtnn_backend *be, const rmsprop_args *a, size_t n, float *w,
                            const float *g, float *sq, float *buf, float *ga)
{
    (void)be;
    cpu_rmsprop_step(a, n, w, g, sq, buf, ga);
}

static void op_nadam_step(dtnn_backend *be, const nadam_args *a, size_t n, float *w,
                          const float *g, float *m1, float *m2)
{
    (void)be;
    cpu_nadam_step(a, n, w, g, m1, m2);
}

static void op_lars_step(dtnn_backend *be, const lars_args *a, size_t n, float *w,
                         const float *g, float *buf)
{
    (void)be;
    cpu_lars_step(a, n, w, g, buf);
}

static void op_lamb_direction(dtnn_backend *be, const lamb_args *a, size_t n, const float *w,
                              const float *g, float *m1, float *m2, float *u)
{
    (void)be;
    cpu_lamb_direction(a, n, w, g, m1, m2, u);
}

static void op_axpby(dtnn_backend *be, size_t n, float alpha, const float *x, float beta,
                     float *y)
{
    (void)be;
    cpu_axpby(n, alpha, x, beta, y);
}

static void op_segment_sumsq(dtnn_backend *be, int count, const size_t *begin,
                             const size_t *end, const float *x, double *out)
{
    (void)be;
    cpu_segment_sumsq(count, begin, end, x, out);
}

static size_t op_count_nonfinite(dtnn_backend *be, const float *x, size_t n)
{
    (void)be;
    return cpu_count_nonfinite(x, n);
}

static void op_half_pack(dtnn_backend *be, dtnn_comm_dtype dtype, size_t n, const float *src,
                         float scale, uint16_t *dst)
{
    (void)be;
    cpu_half_pack(dtype, n, src, scale, dst);
}

static void op_half_unpack(dtnn_backend *be, dtnn_comm_dtype dtype, size_t n,
                           const uint16_t *src, float inv_scale, float *dst, float *stats)
{
    (void)be;
    cpu_half_unpack(dtype, n, src, inv_scale, dst, stats);
}

const dtnn_backend_ops cpu_backend_table = {
    .enter = cpu_enter,
    .leave = cpu_leave,
    .destroy = op_destroy,
    .alloc = op_alloc,
    .free = op_free,
    .zero = op_zero,
    .upload = op_copy,
    .download = op_copy,
    .copy = op_copy,
    .sync = op_sync,
    .host_alloc = op_alloc,     /* host memory either way: nothing to pin */
    .host_free = op_free,
    .conv_plan_create = cpu_conv_plan_create,
    .conv_plan_free = cpu_conv_plan_free,
    .conv_workspace = cpu_conv_workspace,
    .conv_method = cpu_conv_method,
    .conv_forward = cpu_conv_forward,
    .conv_backward = cpu_conv_backward,
    .linear_workspace = op_linear_workspace,
    .linear_forward = op_linear_forward,
    .linear_backward = op_linear_backward,
    .maxpool_forward = op_maxpool_forward,
    .maxpool_backward = op_maxpool_backward,
    .avgpool_forward = op_avgpool_forward,
    .avgpool_backward = op_avgpool_backward,
    .reduce_forward = op_reduce_forward,
    .reduce_backward = op_reduce_backward,
    .layernorm_forward = op_layernorm_forward,
    .layernorm_backward = op_layernorm_backward,
    .upsample_forward = op_upsample_forward,
    .upsample_backward = op_upsample_backward,
    .act_forward = op_act_forward,
    .act_backward = op_act_backward,
    .se_forward = op_se_forward,
    .se_backward = op_se_backward,
    .permute = op_permute,
    .matmul = op_matmul,
    .softmax_forward = op_softmax_forward,
    .softmax_backward = op_softmax_backward,
    .bn_moments = op_bn_moments,
    .bn_apply_train = op_bn_apply_train,
    .bn_backward_sums = op_bn_backward_sums,
    .bn_backward_apply = op_bn_backward_apply,
    .bn_train_forward = op_bn_train_forward,
    .bn_train_backward = op_bn_train_backward,
    .bn_forward_eval = op_bn_forward_eval,
    .bn_backward_eval = op_bn_backward_eval,
    .bn_param_grads = op_bn_param_grads,
    .add_forward = op_add_forward,
    .add_backward = op_add_backward,
    .copy_rows = op_copy_rows,
    .fill = op_fill,
    .binary_forward = op_binary_forward,
    .binary_backward = op_binary_backward,
    .pad_forward = op_pad_forward,
    .pad_backward = op_pad_backward,
    .add_i64 = op_add_i64,
    .dropout_forward = op_dropout_forward,
    .dropout_backward = op_dropout_backward,
    .shortcut_forward = op_shortcut_forward,
    .shortcut_backward = op_shortcut_backward,
    .loss = op_loss,
    .sgd_step = op_sgd_step,
    .adam_step = op_adam_step,
    .rmsprop_step = op_rmsprop_step,
    .nadam_step = op_nadam_step,
    .lars_step = op_lars_step,
    .lamb_direction = op_lamb_direction,
    .axpby = op_axpby,
    .segment_sumsq = op_segment_sumsq,
    .count_nonfinite = op_count_nonfinite,
    .half_pack = op_half_pack,
    .half_unpack = op_half_unpack,
};

const cpu_kernel_set cpu_kernels = {&cpu_backend_table, cpu_gemm, cpu_gemm_name,
                                    cpu_gemm_bf16_dot, cpu_gemm_strided};
