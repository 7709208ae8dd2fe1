/*
 * cpu_kernels.h — the CPU kernels that cpu_backend.c puts into the backend table. One family
 * per file: gemm_packed.c, gemm_blas.c, im2col.c, conv_direct.c, conv_winograd.c,
 * gemm_tiles.c, depthwise.c, pool.c, activation.c, batchnorm.c, softmax.c.
 *
 * Threads: loops over jobs (planes, channels, tile and filter blocks) are schedule(guided):
 * large contiguous chunks first, as static's halves, then ever smaller ones, so a thread that
 * got less of its core (this machine is a shared VM: for tens of seconds at a time the second
 * core runs at about half speed) no longer holds every other thread at the loop's end
 * (measurements: docs/perf-notes.md). Every output is still computed by one job in a fixed order,
 * so results do not depend on which thread ran it. Element-wise loops (activation.c, add,
 * the optimizers) stay static: streaming halves of an array, they are short and bound by
 * memory.
 */
#ifndef DTNN_CPU_KERNELS_H
#define DTNN_CPU_KERNELS_H

#include "../backend.h"
#include "../../core/internal.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* This compile's operation table (cpu_backend.c); cpu_select.c picks one of the compiles'. */
extern const dtnn_backend_ops cpu_backend_table;

/* C = alpha op(A) op(B) + beta C, row-major: this set's GEMM (gemm_packed.c: dtnn's own in
 * the fast sets, the BLAS in the generic one) and the BLAS's (gemm_blas.c). */
void cpu_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
              int lda, const float *b, int ldb, float beta, float *c, int ldc);
void cpu_gemm_blas(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                   int lda, const float *b, int ldb, float beta, float *c, int ldc);
/* `count` products C_i = alpha op(A_i) op(B_i) + beta C_i, X_i = x + i * stride_x. Stride 0
 * shares a matrix: a shared A is packed once for all (a pointwise convolution's filters, for
 * every image), a shared C sums the products (beta applied once, then the products in order
 * i = 0, 1, ...). flags CPU_GEMM_BF16: A and B hold bf16 values (rounded copies:
 * --precision bf16), which the fast sets multiply as bf16 pairs on vdpbf16ps where the CPU
 * has AVX512_BF16 (fp32 sums either way, the definition of dtnn.h's bf16). */
enum { CPU_GEMM_BF16 = 1 };
void cpu_gemm_strided(int count, int trans_a, int trans_b, int m, int n, int k, float alpha,
                      const float *a, int lda, size_t stride_a, const float *b, int ldb,
                      size_t stride_b, float beta, float *c, int ldc, size_t stride_c,
                      int flags);
void cpu_gemm_strided_blas(int count, int trans_a, int trans_b, int m, int n, int k,
                           float alpha, const float *a, int lda, size_t stride_a,
                           const float *b, int ldb, size_t stride_b, float beta, float *c,
                           int ldc, size_t stride_c);
const char *cpu_gemm_name(char *buf, size_t len);
/* Whether this set's GEMM multiplies CPU_GEMM_BF16 operands on vdpbf16ps here. */
int cpu_gemm_bf16_dot(void);
/* zmm's register-only FMA rate over ymm's on this thread (fma_peak.c); 0 without both. */
double cpu_fma_zmm_speedup(int pairs, double seconds);

/* What cpu_select.c needs of each compile of this folder: its table and its GEMM (renamed
 * per set by cmake/isa_rename.sh like every global here: cpu_kernel_set_avx2). */
typedef struct {
    const dtnn_backend_ops *table;
    void (*gemm)(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc);
    const char *(*gemm_name)(char *buf, size_t len);
    int (*gemm_bf16_dot)(void);
    void (*gemm_strided)(int count, int trans_a, int trans_b, int m, int n, int k, float alpha,
                         const float *a, int lda, size_t stride_a, const float *b, int ldb,
                         size_t stride_b, float beta, float *c, int ldc, size_t stride_c,
                         int flags);
} cpu_kernel_set;
extern const cpu_kernel_set cpu_kernels;
/* cpu_gemm_strided of the set DTNN_CPU chose (cpu_select.c), for the tests: the layers call
 * their own set's directly. */
void dtnn__sgemm_strided(int count, int trans_a, int trans_b, int m, int n, int k, float alpha,
                         const float *a, int lda, size_t stride_a, const float *b, int ldb,
                         size_t stride_b, float beta, float *c, int ldc, size_t stride_c,
                         int flags);
void cpu_im2col(const conv_geom *g, const float *x, int images, float *col, int ldcol);
void cpu_col2im(const conv_geom *g, const float *col, int ldcol, int images, float *dx);
/* src [nb, ch, pq] (image i at src + i * image) -> dst [ch, nb * pq], and back: dst's images
 * (+)= src, plus bias[c] where given (accumulate: += and no bias). */
void cpu_gather_images(const float *src, int nb, int ch, int pq, size_t image, float *dst);
void cpu_scatter_images(const float *src, int nb, int ch, int pq, size_t image,
                        const float *bias, int accumulate, float *dst);
int cpu_conv_direct_supported(const conv_geom *g);
size_t cpu_conv_direct_workspace(const conv_geom *g, int chunk, int slots);
void cpu_conv_direct_forward(const conv_geom *g, int n, int chunk, int slots, const float *x,
                             const float *w, const float *bias, float *y, float *workspace);
void cpu_conv_direct_backward(const conv_geom *g, int n, int chunk, int slots, const float *x,
                              const float *dy, const float *w, float *dw, float *dx,
                              int accumulate, float *workspace);
int cpu_conv_winograd_supported(const conv_geom *g);
/* Zero-extended images for Winograd (conv_extend.c): the geometry with height even and width
 * a multiple of 8, planes [H, W] copied into [Hx, Wx] with zeros, and cropped (or added) back. */
conv_geom cpu_conv_extended(const conv_geom *g);
void cpu_extend_planes(const float *src, size_t planes, int H, int W, int Hx, int Wx,
                       float *dst);
void cpu_crop_planes(const float *src, size_t planes, int Hx, int Wx, int H, int W, float *dst,
                     int accumulate);
size_t cpu_conv_winograd_workspace(const conv_geom *g, int chunk, int slots, int weight_grad);
int cpu_conv_winograd_chunk(const conv_geom *g, int max_batch, size_t limit, int slots,
                            int weight_grad);
/* bf16 flags of the Winograd passes (--precision bf16 without rounded copies):
 * CPU_WINO_BF16 rounds x, dy and w as the transforms read them and each output (y before the
 * bias, dx before the sum into it) as they write it; CPU_WINO_BF16_DW rounds dw's sum over the
 * n images of the call before adding it into dw (so only where one call has the whole batch).
 * Rounding twice is rounding once: a pass on rounded copies may set them too. */
enum { CPU_WINO_BF16 = 1, CPU_WINO_BF16_DW = 2 };
void cpu_conv_winograd_forward(const conv_geom *g, int n, int chunk, int slots, int bf16,
                               const float *x, const float *w, const float *bias, float *y,
                               float *workspace);
void cpu_conv_winograd_backward(const conv_geom *g, int n, int chunk, int slots,
                                int weight_grad_chunk, int bf16, const float *x, const float *dy,
                                const float *w, float *dw, float *dx, int accumulate,
                                float *workspace);
void cpu_bias_grad(int n, int C, int hw, const float *dy, float *db);
/* 1x1 convolutions (conv_pointwise.c): chunk = images per gathered product, 0 = a product per
 * image (no workspace). */
int cpu_conv_pointwise_chunk(const conv_geom *g, int max_batch, size_t workspace_limit);
size_t cpu_conv_pointwise_workspace(const conv_geom *g, int chunk);
void cpu_conv_pointwise_forward(const conv_geom *g, int n, int chunk, const float *x,
                                const float *w, const float *b, float *y, float *workspace,
                                int flags);
void cpu_conv_pointwise_backward(const conv_geom *g, int n, int chunk, const float *x,
                                 const float *dy, const float *w, float *dw, float *dx,
                                 int accumulate, float *workspace, int flags);
void cpu_dw_conv_forward(const conv_geom *g, int n, const float *x, const float *w,
                         const float *bias, float *y);
void cpu_dw_conv_backward_data(const conv_geom *g, int n, const float *dy, const float *w,
                               float *dx, int accumulate);
void cpu_dw_conv_backward_weight(const conv_geom *g, int n, const float *x, const float *dy,
                                 float *dw);
void cpu_maxpool_forward(const pool_geom *g, int n, const float *x, float *y, int32_t *argmax);
void cpu_maxpool_backward(const pool_geom *g, int n, const float *dy, const int32_t *argmax,
                          float *dx, int accumulate);
void cpu_avgpool_forward(const pool_geom *g, int n, const float *x, float *y);
void cpu_avgpool_backward(const pool_geom *g, int n, const float *dy, float *dx, int accumulate);
void cpu_reduce_forward(const reduce_geom *g, int n, const float *x, float *y);
void cpu_reduce_backward(const reduce_geom *g, int n, const float *x, const float *y,
                         const float *dy, float *dx, int accumulate);
void cpu_layernorm_forward(const layernorm_geom *g, int n, const float *x, const float *gamma,
                           const float *beta, float *y, float *mean, float *rstd);
void cpu_layernorm_backward(const layernorm_geom *g, int n, const float *x, const float *gamma,
                            const float *mean, const float *rstd, const float *dy, float *dx,
                            int accumulate, float *dgamma, float *dbeta);
void cpu_upsample_forward(const upsample_geom *g, int n, const float *x, float *y);
void cpu_upsample_backward(const upsample_geom *g, int n, const float *dy, float *dx,
                           int accumulate);
void cpu_act_forward(act_kind kind, float a, float b, size_t count, const float *x, float *y);
void cpu_act_backward(act_kind kind, float a, float b, size_t count, const float *x,
                      const float *y, const float *dy, float *dx, int accumulate);
void cpu_bn_moments(int n, int C, int hw, const float *x, const float *shift, double *sum,
                    double *sumsq);
void cpu_bn_apply_train(int n, int C, int hw, const float *x, const float *gamma,
                        const float *beta, const double *sum, const double *sumsq, double count,
                        float eps, float momentum, const bn_epilogue *ep, float *y,
                        float *save_mean, float *save_invstd, float *running_mean,
                        float *running_var);
void cpu_bn_backward_sums(int n, int C, int hw, const float *x, const float *dy,
                          const float *gamma, const float *beta, const bn_epilogue *ep,
                          const float *save_mean, const float *save_invstd, double *sdy,
                          double *sdyx);
void cpu_bn_backward_apply(int n, int C, int hw, const float *x, const float *dy,
                           const float *gamma, const float *beta, const bn_epilogue *ep,
                           const float *save_mean, const float *save_invstd, const double *sdy,
                           const double *sdyx, double count, float *dx, int accumulate);
void cpu_bn_train_forward(int n, int C, int hw, const float *x, const float *gamma,
                          const float *beta, float eps, float momentum,
                          const bn_epilogue *ep, float *y, float *save_mean,
                          float *save_invstd, float *running_mean, float *running_var);
void cpu_bn_train_backward(int n, int C, int hw, const float *x, const float *dy,
                           const float *gamma, const float *beta, const bn_epilogue *ep,
                           const float *save_mean, const float *save_invstd, double *sdy,
                           double *sdyx, float *dx, int accumulate);
void cpu_bn_forward_eval(int n, int C, int hw, const float *x, const float *gamma,
                         const float *beta, const float *running_mean, const float *running_var,
                         float eps, const bn_epilogue *ep, float *y);
void cpu_bn_backward_eval(int n, int C, int hw, const float *dy, const float *gamma,
                          const float *running_var, float eps, float *dx, int accumulate);
void cpu_softmax_forward(int rows, int cols, int inner, const float *x, float *y);
void cpu_permute(const permute_geom *g, int n, const float *x, float *y, int accumulate);
void cpu_softmax_backward(int rows, int cols, int inner, const float *y, const float *dy,
                          float *dx, int accumulate);

/* The convolution plans (cpu_conv.c): algorithm, chunks and scratch chosen per geometry. */
conv_plan *cpu_conv_plan_create(dtnn_backend *be, const conv_desc *d, dtnn_error *err);
void cpu_conv_plan_free(dtnn_backend *be, conv_plan *p);
size_t cpu_conv_workspace(const conv_plan *p);
const char *cpu_conv_method(const conv_plan *p);
void cpu_conv_forward(dtnn_backend *be, const conv_plan *p, int n, const float *x,
                      const float *w, const float *b, float *y, void *workspace);
void cpu_conv_backward(dtnn_backend *be, const conv_plan *p, int n, const float *x,
                       const float *dy, const float *w, float *dw, float *db, float *dx,
                       int accumulate, void *workspace);

/* Fully connected (linear.c), with the table's contracts. */
size_t cpu_linear_workspace(const linear_desc *d, int max_batch);
void cpu_linear_forward(const linear_desc *d, int n, const float *x, const float *w,
                        const float *b, float *y, void *workspace);
void cpu_linear_backward(const linear_desc *d, int n, const float *x, const float *dy,
                         const float *w, float *dw, float *db, float *dx, int accumulate,
                         void *workspace);

/* squeeze_excite.c: se_geom's block, with the table's contracts. */
void cpu_se_forward(const se_geom *g, int n, const float *x, const float *w1, const float *b1,
                    const float *w2, const float *b2, float *mean, float *z1, float *a1,
                    float *z2, float *s, float *y);
void cpu_se_backward(const se_geom *g, int n, const float *x, const float *dy,
                     const float *mean, const float *z1, const float *a1, const float *z2,
                     const float *s, const float *w1, const float *w2, float *dw1, float *db1,
                     float *dw2, float *db2, float *dx, int accumulate, float *workspace);

/* bf16.c: y = x rounded to bfloat16 (y may be x); store: y = or += x rounded. */
void cpu_round_bf16(size_t n, const float *x, float *y);
void cpu_store_bf16(size_t n, const float *x, float *y, int accumulate);
/* half_transport.c: the half_pack and half_unpack of the table (backend/backend.h). */
void cpu_half_pack(dtnn_comm_dtype dtype, size_t n, const float *src, float scale,
                   uint16_t *dst);
void cpu_half_unpack(dtnn_comm_dtype dtype, size_t n, const uint16_t *src, float inv_scale,
                     float *dst, float *stats);

/* Element-wise families (elementwise.c, broadcast.c, pad.c, shortcut.c, loss.c,
 * optim.c): the contracts are
 * the backend table's (backend/backend.h). */
void cpu_add_forward(size_t count, int n_in, const float *const *x, int relu, float *y);
void cpu_add_backward(size_t count, const float *y, const float *dy, int n_out,
                      float *const *dx, const int *accumulate);
void cpu_copy_rows(size_t rows, size_t cols, float *dst, size_t ld_dst, const float *src,
                   size_t ld_src, int accumulate);
void cpu_fill(float *y, size_t count, float value);
void cpu_binary_forward(binary_kind kind, const binary_geom *g, int n, const float *a,
                        const float *b, float *y);
void cpu_binary_backward(binary_kind kind, const binary_geom *g, int n, const float *a,
                         const float *b, const float *dy, float *da, int da_accumulate,
                         float *db, int db_accumulate);
void cpu_pad_forward(const pad_geom *g, int n, const float *x, float *y);
void cpu_pad_backward(const pad_geom *g, int n, const float *dy, float *dx, int accumulate);
void cpu_dropout_forward(size_t count, float p, float scale, uint64_t seed, uint64_t stream,
                         uint64_t base, const float *x, float *y, uint8_t *mask);
void cpu_dropout_backward(size_t count, float scale, const uint8_t *mask, const float *dy,
                          float *dx, int accumulate);
size_t cpu_count_nonfinite(const float *x, size_t n);
void cpu_bn_param_grads(int C, const double *sdy, const double *sdyx, float *dgamma,
                        float *dbeta);
void cpu_shortcut_forward(const shortcut_geom *g, int n, const float *x, float *y);
void cpu_shortcut_backward(const shortcut_geom *g, int n, const float *dy, float *dx,
                           int accumulate);
void cpu_loss(const loss_desc *d, int n, int k, const float *z, const int32_t *labels,
              float *dz, float scale, double *out);
void cpu_sgd_step(const sgd_args *a, size_t n, float *w, const float *g, float *buf);
void cpu_adam_step(const adam_args *a, size_t n, float *w, const float *g, float *m1,
                   float *m2);
void cpu_rmsprop_step(const rmsprop_args *a, size_t n, float *w, const float *g, float *sq,
                      float *buf, float *ga);
void cpu_nadam_step(const nadam_args *a, size_t n, float *w, const float *g, float *m1,
                    float *m2);
void cpu_lars_step(const lars_args *a, size_t n, float *w, const float *g, float *buf);
void cpu_lamb_direction(const lamb_args *a, size_t n, const float *w, const float *g,
                        float *m1, float *m2, float *u);
void cpu_axpby(size_t n, float alpha, const float *x, float beta, float *y);
void cpu_segment_sumsq(int count, const size_t *begin, const size_t *end, const float *x,
                       double *out);

/* Small-dimension products (gemm_tiles.c): C = op(A) B, op(A) m x k, B k x n, C m x n, with
 * op(A) packed once into cpu_gemm_tiles_scratch(m, k) bytes of scratch for any number of B;
 * C += A B^T, A m x k, B n x k. */
size_t cpu_gemm_tiles_scratch(int m, int k);
void cpu_gemm_tiles_pack(int trans_a, int m, int k, const float *a, int lda, float *scratch);
void cpu_gemm_tiles(int m, int n, int k, const float *b, int ldb, float *c, int ldc,
                    float *scratch);
void cpu_gemm_dots(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                   float *c, int ldc);

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
/* Their register tile, for the convolutions built on it: a 4 x 24 tile of C from A packed
 * [k][4] and rows of B; or, over `taps` shifted reads of each row (a packed [steps][taps][4]),
 * the direct convolution's tile. */
void cpu_tile_4x24(int k, const float *a, const float *b, size_t ldb, float *c, size_t ldc);
void cpu_tile_4x24_taps(int steps, int taps, const ptrdiff_t *offsets, size_t step,
                        const float *a, const float *b, float *c, size_t ldc);
#if defined(__AVX512F__)
/* The AVX-512 set's wider tile, 4 x 48 (Winograd's products; same lanes' sums as 4 x 24). */
void cpu_tile_4x48(int k, const float *a, const float *b, size_t ldb, float *c, size_t ldc);
#endif
/* Their dot products: acc[j][i] (8 float lanes) += a[j][t] * b[i][t] for t in [t0, t1), a
 * multiple of 8 long. */
void cpu_dot_4x3(const float *const a[4], const float *const b[3], size_t t0, size_t t1,
                 float acc[4][3][8]);

static inline float cpu_hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#endif

/* Asks for `count` floats from p to be brought into cache, a line at a time. Kernels that work
 * plane by plane ask for the next plane: a plane of a CIFAR activation is one 4 KiB page, and
 * the hardware prefetchers do not run across pages, so each plane otherwise starts with a
 * stall on memory. The Winograd and direct convolutions' plane copies ask a row of the next
 * plane per row they copy: a whole page asked for at once filled the queue of misses, and the
 * prefetch instructions themselves stalled; batch norm got slower with it (measurements:
 * docs/perf-notes.md). Batch norm asks for the next image's rows a line at a time as it goes
 * (batchnorm.c, fetch_ahead). */
static inline void prefetch_floats(const float *p, size_t count)
{
    for (size_t i = 0; i < count; i += 16)
        __builtin_prefetch(p + i);
}

/* The threads the next parallel region gets, the calling thread's index in its team and the
 * team's size (1, 0 and 1 without OpenMP). */
static inline int cpu_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static inline int cpu_thread_index(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

static inline int cpu_team_size(void)
{
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

/* The threads that take images of their own in the direct and Winograd passes (each with
 * its scratch slot, summing its own weight gradient): the whole team where every thread has
 * a slot (the team no larger than the `slots` planned) and at least two images; else 1, the
 * team splitting every chunk. Inside such a region a thread takes its share by
 * cpu_team_size(), which may be smaller than asked (OMP_THREAD_LIMIT, OMP_DYNAMIC). */
static inline int cpu_own_threads(int slots, int n)
{
    const int threads = cpu_threads();
    return threads > 1 && threads <= slots && n >= 2 * threads ? threads : 1;
}

/* In a region where threads take images of their own: the calling thread's share [*lo, *hi)
 * of n images, by the team it got; returns the images per chunk that cut the share into
 * equal chunks of at most `chunk` (a short last chunk sums few tiles a call). */
static inline int cpu_share(int n, int chunk, int *lo, int *hi)
{
    const int team = cpu_team_size(), t = cpu_thread_index();
    *lo = (int)((long long)n * t / team);
    *hi = (int)((long long)n * (t + 1) / team);
    const int pieces = (*hi - *lo + chunk - 1) / chunk;
    return pieces ? (*hi - *lo + pieces - 1) / pieces : 1;
}

/* In such a region, once every thread has summed its part: dst[e] += parts[u * stride + e]
 * for u < count, in that order (the weight gradient's per-thread sums, added up in thread
 * order), the floats split among the team. */
static inline void cpu_add_parts(float *dst, const float *parts, size_t stride, int count,
                                 size_t floats)
{
#pragma omp barrier
#pragma omp for schedule(static)
    for (long long e = 0; e < (long long)floats; e++)
        for (int u = 0; u < count; u++)
            dst[e] += parts[(size_t)u * stride + (size_t)e];
}

/* A row of a product's output into its place: d[j] += s[j] (accumulate), else s[j] + bias
 * (the im2col and pointwise paths' scatter, the direct kernels' tile stores). */
static inline void cpu_store_row(float *d, const float *s, int n, float bias, int accumulate)
{
    if (accumulate)
        for (int j = 0; j < n; j++)
            d[j] += s[j];
    else
        for (int j = 0; j < n; j++)
            d[j] = s[j] + bias;
}

/* Images per chunk for `own` threads taking chunks of at most `chunk`: the fewest rounds of
 * `own` chunks, as equal as whole images allow (a short last chunk sums few tiles a call). */
static inline int cpu_equal_chunk(int n, int own, int chunk)
{
    const int rounds = (n + own * chunk - 1) / (own * chunk);
    return (n + rounds * own - 1) / (rounds * own);
}

#endif
