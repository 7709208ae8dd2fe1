/*
 * optim.c — the CPU's optimizer updates over the flat parameter, gradient and state buffers,
 * one pass each around the per-element rules of formulas/optim_formulas.h (shared with the
 * CUDA backend; optim/optimizer.c computes the scalars and documents the rules). Elements are
 * independent, so the OpenMP loop is deterministic for any thread count. Each thread gets its
 * own copy of the args (firstprivate): a shared struct would be read through a pointer that
 * might alias the buffers, which keeps the loop from vectorising.
 */
#include "cpu_kernels.h"
#include "../formulas/optim_formulas.h"

void cpu_sgd_step(const sgd_args *a, size_t count, float *w, const float *grad, float *buf)
{
    const int64_t n = (int64_t)count;
    const sgd_args args = *a;
#pragma omp parallel for schedule(static) firstprivate(args) if (n > 65536)
    for (int64_t i = 0; i < n; i++)
        optim_sgd_update(args, (size_t)i, w, grad, buf);
}

void cpu_adam_step(const adam_args *a, size_t count, float *w, const float *grad, float *m1,
                   float *m2)
{
    const int64_t n = (int64_t)count;
    const adam_args args = *a;
#pragma omp parallel for schedule(static) firstprivate(args) if (n > 65536)
    for (int64_t i = 0; i < n; i++)
        optim_adam_update(args, (size_t)i, w, grad, m1, m2);
}

void cpu_rmsprop_step(const rmsprop_args *a, size_t count, float *w, const float *grad,
                      float *sq, float *buf, float *ga)
{
    const int64_t n = (int64_t)count;
    const rmsprop_args args = *a;
#pragma omp parallel for schedule(static) firstprivate(args) if (n > 65536)
    for (int64_t i = 0; i < n; i++)
        optim_rmsprop_update(args, (size_t)i, w, grad, sq, buf, ga);
}
