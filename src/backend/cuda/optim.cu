/*
 * optim.cu — the optimizer updates over the flat buffers, one launch each over all n values,
 * each value by the CPU's own rule (formulas/optim_formulas.h), compiled without FMA
 * contraction and with IEEE division and square root, so a step gives the CPU's weights bit
 * for bit.
 */
#include <stdlib.h>

#include "../formulas/optim_formulas.h"
#include "cuda_launch.cuh"

static __global__ void sgd_k(sgd_args a, size_t n, float *w, const float *grad, float *buf)
{
    CU_LOOP(i, n) optim_sgd_update(a, i, w, grad, buf);
}

static __global__ void adam_k(adam_args a, size_t n, float *w, const float *grad, float *m1,
                              float *m2)
{
    CU_LOOP(i, n) optim_adam_update(a, i, w, grad, m1, m2);
}

static __global__ void rmsprop_k(rmsprop_args a, size_t n, float *w, const float *grad,
                                 float *sq, float *buf, float *ga)
{
    CU_LOOP(i, n) optim_rmsprop_update(a, i, w, grad, sq, buf, ga);
}

extern "C" void cuda_sgd_step(dtnn_backend *be, const sgd_args *a, size_t n, float *w,
                              const float *g, float *buf)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "sgd step kernel", sgd_k, n, *a, n, w, g, buf);
}

extern "C" void cuda_adam_step(dtnn_backend *be, const adam_args *a, size_t n, float *w,
                               const float *g, float *m1, float *m2)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "adam step kernel", adam_k, n, *a, n, w, g, m1, m2);
}

extern "C" void cuda_rmsprop_step(dtnn_backend *be, const rmsprop_args *a, size_t n, float *w,
                                  const float *g, float *square_avg, float *momentum_buf,
                                  float *grad_avg)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "rmsprop step kernel", rmsprop_k, n, *a, n, w, g, square_avg, momentum_buf,
              grad_avg);
}

static __global__ void nadam_k(nadam_args a, size_t n, float *w, const float *grad, float *m1,
                               float *m2)
{
    CU_LOOP(i, n) optim_nadam_update(a, i, w, grad, m1, m2);
}

static __global__ void lars_k(lars_args a, size_t n, float *w, const float *grad, float *buf)
{
    CU_LOOP(i, n) optim_lars_update(a, i, w, grad, buf);
}

static __global__ void lamb_direction_k(lamb_args a, size_t n, const float *w,
                                        const float *grad, float *m1, float *m2, float *u)
{
    CU_LOOP(i, n) optim_lamb_direction(a, i, w, grad, m1, m2, u);
}

static __global__ void axpby_k(size_t n, float alpha, const float *x, float beta, float *y)
{
    CU_LOOP(i, n) y[i] = x ? alpha * x[i] + beta * y[i] : beta * y[i];
}

/* One block per segment: each thread sums a stride of it in double, then a tree in shared
 * memory; the order depends on the segment alone, so every run gives the same bits. */
static __global__ void segment_sumsq_k(const size_t *bounds, const float *x, double *out)
{
    __shared__ double part[CU_THREADS];
    const size_t begin = bounds[2 * blockIdx.x], end = bounds[2 * blockIdx.x + 1];
    double acc = 0.0;
    for (size_t i = begin + threadIdx.x; i < end; i += CU_THREADS)
        acc += (double)x[i] * (double)x[i];
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int half = CU_THREADS / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half)
            part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        out[blockIdx.x] = part[0];
}

extern "C" void cuda_nadam_step(dtnn_backend *be, const nadam_args *a, size_t n, float *w,
                                const float *g, float *m1, float *m2)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "nadam step kernel", nadam_k, n, *a, n, w, g, m1, m2);
}

extern "C" void cuda_lars_step(dtnn_backend *be, const lars_args *a, size_t n, float *w,
                               const float *g, float *buf)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "lars step kernel", lars_k, n, *a, n, w, g, buf);
}

extern "C" void cuda_lamb_direction(dtnn_backend *be, const lamb_args *a, size_t n,
                                    const float *w, const float *g, float *m1, float *m2,
                                    float *u)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "lamb direction kernel", lamb_direction_k, n, *a, n, w, g, m1, m2, u);
}

extern "C" void cuda_axpby(dtnn_backend *be, size_t n, float alpha, const float *x, float beta,
                           float *y)
{
    CU_SKIP_IF_FAILED(be);
    CU_LAUNCH(be, "axpby kernel", axpby_k, n, n, alpha, x, beta, y);
}

/* The bounds travel in one stream-ordered scratch allocation with the sums; the host waits
 * once for all of them (a step's one wait for LARS, LAMB and clipping). */
extern "C" void cuda_segment_sumsq(dtnn_backend *be, int count, const size_t *begin,
                                   const size_t *end, const float *x, double *out)
{
    cuda_state *s = cuda_of(be);
    for (int i = 0; i < count; i++)
        out[i] = 0.0;
    if (s->failed || count <= 0)
        return;
    const size_t bounds_bytes = sizeof(size_t) * 2 * (size_t)count;
    size_t *host = (size_t *)malloc(bounds_bytes);
    if (!host) {
        cuda_fail(be, "out of host memory for %d segment bounds", count);
        return;
    }
    for (int i = 0; i < count; i++) {
        host[2 * i] = begin[i];
        host[2 * i + 1] = end[i];
    }
    void *scratch = NULL;
    if (cuda_ok(be, cudaMallocAsync(&scratch, bounds_bytes + sizeof(double) * count, s->stream),
                "cudaMallocAsync (segment sums)")) {
        size_t *bounds = (size_t *)scratch;
        double *sums = (double *)(bounds + 2 * (size_t)count);
        if (cuda_ok(be, cudaMemcpyAsync(bounds, host, bounds_bytes, cudaMemcpyHostToDevice,
                                        s->stream), "cudaMemcpyAsync (segment bounds)")) {
            segment_sumsq_k<<<(unsigned)count, CU_THREADS, 0, s->stream>>>(bounds, x, sums);
            if (cuda_ok(be, cudaGetLastError(), "segment sum of squares kernel"))
                cuda_ok(be, cudaMemcpyAsync(out, sums, sizeof(double) * count,
                                            cudaMemcpyDeviceToHost, s->stream),
                        "cudaMemcpyAsync (segment sums)");
        }
        cuda_ok(be, cudaFreeAsync(scratch, s->stream), "cudaFreeAsync (segment sums)");
        cuda_ok(be, cudaStreamSynchronize(s->stream), "cudaStreamSynchronize (segment sums)");
    }
    free(host);
}
