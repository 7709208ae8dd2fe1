/*
 * batchnorm.cu — batch normalisation over [n, C, hw] in the phases of backend.h, with the
 * formulas the CPU's loops call too (formulas/batchnorm_formulas.h): the statistics as sums of d = x - shift and d^2 in double
 * about the running mean, the backward sums sum(g) and sum(g (x - mean)) in double, the fused
 * epilogue (residual add, ReLU) and the gradient it passes, the running estimates updated as
 * PyTorch.
 *
 * The per-channel sums: one block per channel, each thread summing a strided share in double,
 * then a tree in shared memory in a fixed order, so the sums are the same on every run (no
 * atomics). They differ from the CPU's, which adds in another order, by double rounding only
 * (about 1e-16 relative). The element-wise passes (normalise, input gradient) are one thread
 * per value over the whole tensor, each computing its channel's constants from the saved
 * float values as the CPU does, so they match the CPU's to float rounding of those sums.
 * One block per channel is little parallelism for a layer of 64 channels on a GPU of 132
 * SMs; splitting a channel over blocks (partial sums, then a second pass) is the next step
 * when profiles show it.
 */
#include <math.h>

#include "../formulas/batchnorm_formulas.h"
#include "cuda_launch.cuh"

enum { BN_THREADS = 512 };

/* The epilogue's fields, by value (the host's bn_epilogue struct holds device pointers). */
typedef struct {
    int relu;
    const float *res, *out;
    float *dres;
    int dres_accumulate;
} epi;

static epi epi_of(const bn_epilogue *ep)
{
    epi e = {0, NULL, NULL, NULL, 0};
    if (ep) {
        e.relu = ep->relu;
        e.res = ep->res;
        e.out = ep->out;
        e.dres = ep->dres;
        e.dres_accumulate = ep->dres_accumulate;
    }
    return e;
}

/* Sums a and b over the block; thread 0 gets the totals. */
static __device__ void block_sum2(double *a, double *b)
{
    __shared__ double sa[BN_THREADS], sb[BN_THREADS];
    const unsigned t = threadIdx.x;
    sa[t] = *a;
    sb[t] = *b;
    __syncthreads();
    for (unsigned half = BN_THREADS / 2; half > 0; half /= 2) {
        if (t < half) {
            sa[t] += sa[t + half];
            sb[t] += sb[t + half];
        }
        __syncthreads();
    }
    *a = sa[0];
    *b = sb[0];
}

/* The j-th value of channel c in [n, C, hw], j < n * hw */
static __device__ size_t at(int C, int hw, int c, size_t j)
{
    return ((j / hw) * C + c) * hw + j % hw;
}

/* Block c: the moments of channel c about shift[c]; written to sum / sumsq, or (finish) turned
 * into the saved statistics and running estimates at once. */
static __global__ void moments_k(int n, int C, int hw, const float *x, const float *shift,
                                 double *sum, double *sumsq, int finish, double count, float eps,
                                 float momentum, float *save_mean, float *save_invstd,
                                 float *running_mean, float *running_var)
{
    const int c = blockIdx.x;
    const double s = shift[c];
    const size_t m = (size_t)n * hw;
    double a = 0.0, b = 0.0;
    for (size_t j = threadIdx.x; j < m; j += BN_THREADS) {
        const double d = x[at(C, hw, c, j)] - s;
        a += d;
        b += d * d;
    }
    block_sum2(&a, &b);
    if (threadIdx.x != 0)
        return;
    if (finish)
        bn_finish_channel(a, b, count, eps, momentum, &save_mean[c], &save_invstd[c],
                          &running_mean[c], &running_var[c]);
    else
        sum[c] = a, sumsq[c] = b;
}

static __global__ void finish_k(int C, const double *sum, const double *sumsq, double count,
                                float eps, float momentum, float *save_mean, float *save_invstd,
                                float *running_mean, float *running_var)
{
    CU_LOOP(c, (size_t)C)
    bn_finish_channel(sum[c], sumsq[c], count, eps, momentum, &save_mean[c], &save_invstd[c],
                      &running_mean[c], &running_var[c]);
}

/* y = fmaf(x - mean, scale, shift) (+ res), clamped at 0 with the ReLU (NaN kept): the
 * CPU's normalise_row. Training: mean, scale = gamma * invstd from the saved statistics;
 * evaluation (mean NULL): 0 and the running estimates' scale and shift. */
static __global__ void normalise_k(int n, int C, int hw, const float *x, const float *gamma,
                                   const float *beta, const float *mean, const float *invstd,
                                   const float *running_mean, const float *running_var,
                                   float eps, epi e, float *y)
{
    CU_LOOP(i, (size_t)n * C * hw)
    {
        const int c = (int)((i / hw) % C);
        float m, scale, shift;
        if (mean) {
            m = mean[c];
            scale = gamma[c] * invstd[c];
            shift = beta[c];
        } else {
            m = 0.0f;
            scale = bn_eval_scale(gamma[c], running_var[c], eps);
            shift = beta[c] - running_mean[c] * scale;
        }
        y[i] = bn_normalise(x[i], m, scale, shift, e.res != NULL, e.res ? e.res[i] : 0.0f,
                            e.relu);
    }
}

/* The gradient that reaches the normalisation (batchnorm.c's passed): dy, or with a fused
 * ReLU dy where its input was positive, read from the output after a residual add, else
 * recomputed from d = x - mean. */
static __device__ float passed(float dy, float d, int c, size_t i, const float *gamma,
                               const float *beta, const float *invstd, const epi &e)
{
    const int use_out = e.relu && e.res;
    return bn_passed(dy, d, use_out, use_out ? e.out[i] : 0.0f, e.relu && !e.res,
                     gamma[c] * invstd[c], beta[c]);
}

/* Block c: sum(g) and invstd * sum(g (x - mean)) of channel c; writes the residual's gradient
 * g on the way. */
static __global__ void grad_sums_k(int n, int C, int hw, const float *x, const float *dy,
                                   const float *gamma, const float *beta, epi e,
                                   const float *mean, const float *invstd, double *sdy,
                                   double *sdyx)
{
    const int c = blockIdx.x;
    const size_t m = (size_t)n * hw;
    double a = 0.0, b = 0.0;
    for (size_t j = threadIdx.x; j < m; j += BN_THREADS) {
        const size_t i = at(C, hw, c, j);
        const float d = x[i] - mean[c];
        const float g = passed(dy[i], d, c, i, gamma, beta, invstd, e);
        if (e.dres)
            e.dres[i] = e.dres_accumulate ? e.dres[i] + g : g;
        a += (double)g;
        b += (double)g * d;
    }
    block_sum2(&a, &b);
    if (threadIdx.x == 0) {
        sdy[c] = a;
        sdyx[c] = invstd[c] * b;
    }
}

/* dx (+)= fmaf(g, k, fmaf(x - mean, xs, off)), the constants folded in double from the sums
 * as channel_grad_apply folds them. */
static __global__ void grad_apply_k(int n, int C, int hw, const float *x, const float *dy,
                                    const float *gamma, const float *beta, epi e,
                                    const float *mean, const float *invstd, const double *sdy,
                                    const double *sdyx, double count, float *dx, int acc)
{
    CU_LOOP(i, (size_t)n * C * hw)
    {
        const int c = (int)((i / hw) % C);
        const bn_grad_consts k = bn_grad_constants(gamma[c], invstd[c], sdy[c], sdyx[c], count);
        const float d = x[i] - mean[c];
        const float v = bn_grad_value(passed(dy[i], d, c, i, gamma, beta, invstd, e), d, k);
        dx[i] = acc ? dx[i] + v : v;
    }
}

static __global__ void grad_eval_k(int n, int C, int hw, const float *dy, const float *gamma,
                                   const float *running_var, float eps, float *dx, int acc)
{
    CU_LOOP(i, (size_t)n * C * hw)
    {
        const int c = (int)((i / hw) % C);
        const float scale = bn_eval_scale(gamma[c], running_var[c], eps);
        dx[i] = acc ? dx[i] + dy[i] * scale : dy[i] * scale;
    }
}

static __global__ void param_grads_k(int C, const double *sdy, const double *sdyx,
                                     float *dgamma, float *dbeta)
{
    CU_LOOP(c, (size_t)C)
    {
        if (dgamma)
            dgamma[c] += (float)sdyx[c];
        if (dbeta)
            dbeta[c] += (float)sdy[c];
    }
}

/* A one-block-per-channel launch, checked as `what`. */
#define BN_CHANNELS(be, what, kernel, C, ...)                                                  \
    do {                                                                                       \
        if ((C) <= 0)                                                                          \
            break;                                                                             \
        kernel<<<(unsigned)(C), BN_THREADS, 0, cuda_of(be)->stream>>>(__VA_ARGS__);            \
        cuda_ok((be), cudaGetLastError(), what);                                               \
    } while (0)

extern "C" void cuda_bn_moments(dtnn_backend *be, int n, int C, int hw, const float *x,
                                const float *shift, double *sum, double *sumsq)
{
    CU_SKIP_IF_FAILED(be);
    BN_CHANNELS(be, "batch norm moments kernel", moments_k, C, n, C, hw, x, shift, sum, sumsq,
                0, 0.0, 0.0f, 0.0f, NULL, NULL, NULL, NULL);
}

extern "C" void cuda_bn_apply_train(dtnn_backend *be, int n, int C, int hw, const float *x,
                                    const float *gamma, const float *beta, const double *sum,
                                    const double *sumsq, double count, float eps, float momentum,
                                    const bn_epilogue *ep, float *y, float *save_mean,
                                    float *save_invstd, float *running_mean, float *running_var)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "batch norm statistics kernel", finish_k, (size_t)C, C, sum, sumsq, count,
              eps, momentum, save_mean, save_invstd, running_mean, running_var);
    CU_LAUNCH(be, "batch norm normalise kernel", normalise_k, (size_t)n * C * hw, n, C, hw, x,
              gamma, beta, save_mean, save_invstd, NULL, NULL, eps, epi_of(ep), y);
}

extern "C" void cuda_bn_train_forward(dtnn_backend *be, int n, int C, int hw, const float *x,
                                      const float *gamma, const float *beta, float eps,
                                      float momentum, const bn_epilogue *ep, float *y,
                                      float *save_mean, float *save_invstd, float *running_mean,
                                      float *running_var)
{
    CU_SKIP_IF_FAILED(be);
    /* the shift is the running mean, read by each block before its thread 0 updates it */
    BN_CHANNELS(be, "batch norm moments kernel", moments_k, C, n, C, hw, x, running_mean, NULL,
                NULL, 1, (double)n * hw, eps, momentum, save_mean, save_invstd, running_mean,
                running_var);
    CU_LAUNCH(be, "batch norm normalise kernel", normalise_k, (size_t)n * C * hw, n, C, hw, x,
              gamma, beta, save_mean, save_invstd, NULL, NULL, eps, epi_of(ep), y);
}

extern "C" void cuda_bn_forward_eval(dtnn_backend *be, int n, int C, int hw, const float *x,
                                     const float *gamma, const float *beta,
                                     const float *running_mean, const float *running_var,
                                     float eps, const bn_epilogue *ep, float *y)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "batch norm normalise kernel", normalise_k, (size_t)n * C * hw, n, C, hw, x,
              gamma, beta, NULL, NULL, running_mean, running_var, eps, epi_of(ep), y);
}

extern "C" void cuda_bn_backward_sums(dtnn_backend *be, int n, int C, int hw, const float *x,
                                      const float *dy, const float *gamma, const float *beta,
                                      const bn_epilogue *ep, const float *save_mean,
                                      const float *save_invstd, double *sdy, double *sdyx)
{
    CU_SKIP_IF_FAILED(be);
    BN_CHANNELS(be, "batch norm gradient sums kernel", grad_sums_k, C, n, C, hw, x, dy, gamma,
                beta, epi_of(ep), save_mean, save_invstd, sdy, sdyx);
}

extern "C" void cuda_bn_backward_apply(dtnn_backend *be, int n, int C, int hw, const float *x,
                                       const float *dy, const float *gamma, const float *beta,
                                       const bn_epilogue *ep, const float *save_mean,
                                       const float *save_invstd, const double *sdy,
                                       const double *sdyx, double count, float *dx,
                                       int accumulate)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "batch norm input gradient kernel", grad_apply_k, (size_t)n * C * hw, n, C, hw,
              x, dy, gamma, beta, epi_of(ep), save_mean, save_invstd, sdy, sdyx, count, dx,
              accumulate);
}

extern "C" void cuda_bn_train_backward(dtnn_backend *be, int n, int C, int hw, const float *x,
                                       const float *dy, const float *gamma, const float *beta,
                                       const bn_epilogue *ep, const float *save_mean,
                                       const float *save_invstd, double *sdy, double *sdyx,
                                       float *dx, int accumulate)
{
    cuda_bn_backward_sums(be, n, C, hw, x, dy, gamma, beta, ep, save_mean, save_invstd, sdy,
                          sdyx);
    if (dx)
        cuda_bn_backward_apply(be, n, C, hw, x, dy, gamma, beta, ep, save_mean, save_invstd, sdy,
                               sdyx, (double)n * hw, dx, accumulate);
}

extern "C" void cuda_bn_param_grads(dtnn_backend *be, int C, const double *sdy,
                                    const double *sdyx, float *dgamma, float *dbeta)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "batch norm parameter gradient kernel", param_grads_k, (size_t)C, C, sdy, sdyx,
              dgamma, dbeta);
}

extern "C" void cuda_bn_backward_eval(dtnn_backend *be, int n, int C, int hw, const float *dy,
                                      const float *gamma, const float *running_var, float eps,
                                      float *dx, int accumulate)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "batch norm eval gradient kernel", grad_eval_k, (size_t)n * C * hw, n, C, hw,
              dy, gamma, running_var, eps, dx, accumulate);
}
