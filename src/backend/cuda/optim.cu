/*
 * optim.cu — the optimizer updates over the flat buffers, one launch each over all n values,
 * each value by the CPU's own rule (formulas/optim_formulas.h), compiled without FMA
 * contraction and with IEEE division and square root, so a step gives the CPU's weights bit
 * for bit.
 */
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
