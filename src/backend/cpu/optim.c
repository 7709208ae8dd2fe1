/*
 * optim.c — the CPU's optimizer updates over the flat parameter, gradient and state buffers,
 * one pass each around the per-element rules of formulas/optim_formulas.h (shared with the
 * CUDA backend; optim/optimizer.c computes the scalars and documents the rules). Elements are
 * independent, so the OpenMP loop is deterministic for any thread count. Each thread gets its
 * own copy of the args (firstprivate): a shared struct would be read through a pointer that
 * might alias the buffers, which keeps the loop from vectorising.
 */
#include <stdlib.h>

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

void cpu_nadam_step(const nadam_args *a, size_t count, float *w, const float *grad, float *m1,
                    float *m2)
{
    const int64_t n = (int64_t)count;
    const nadam_args args = *a;
#pragma omp parallel for schedule(static) firstprivate(args) if (n > 65536)
    for (int64_t i = 0; i < n; i++)
        optim_nadam_update(args, (size_t)i, w, grad, m1, m2);
}

void cpu_lars_step(const lars_args *a, size_t count, float *w, const float *grad, float *buf)
{
    const int64_t n = (int64_t)count;
    const lars_args args = *a;
#pragma omp parallel for schedule(static) firstprivate(args) if (n > 65536)
    for (int64_t i = 0; i < n; i++)
        optim_lars_update(args, (size_t)i, w, grad, buf);
}

void cpu_lamb_direction(const lamb_args *a, size_t count, const float *w, const float *grad,
                        float *m1, float *m2, float *u)
{
    const int64_t n = (int64_t)count;
    const lamb_args args = *a;
#pragma omp parallel for schedule(static) firstprivate(args) if (n > 65536)
    for (int64_t i = 0; i < n; i++)
        optim_lamb_direction(args, (size_t)i, w, grad, m1, m2, u);
}

void cpu_axpby(size_t count, float alpha, const float *x, float beta, float *y)
{
    const int64_t n = (int64_t)count;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++)
        y[i] = x ? alpha * x[i] + beta * y[i] : beta * y[i];
}

/* Blocks of SUMSQ_BLOCK values are summed in double, in order, by whichever thread takes them,
 * then each segment adds its blocks' sums in order: the result depends on the segment alone,
 * and the largest tensors (a fully connected layer's millions of weights) still spread over
 * the threads. Without memory for the blocks' sums, one thread does the same sums in the same
 * order. */
enum { SUMSQ_BLOCK = 4096 };

static size_t sumsq_blocks(size_t begin, size_t end)
{
    return (end - begin + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;
}

static double sumsq_block(const float *x, size_t begin, size_t end, size_t b)
{
    const size_t lo = begin + b * SUMSQ_BLOCK;
    const size_t hi = end - lo < SUMSQ_BLOCK ? end : lo + SUMSQ_BLOCK;
    double acc = 0.0;
    for (size_t i = lo; i < hi; i++)
        acc += (double)x[i] * (double)x[i];
    return acc;
}

void cpu_segment_sumsq(int count, const size_t *begin, const size_t *end, const float *x,
                       double *out)
{
    size_t *first = malloc(sizeof(size_t) * ((size_t)count + 1));
    double *partial = NULL;
    if (first) {
        first[0] = 0;
        for (int s = 0; s < count; s++)
            first[s + 1] = first[s] + sumsq_blocks(begin[s], end[s]);
        partial = malloc(sizeof(double) * (first[count] ? first[count] : 1));
    }
    if (!partial) {
        for (int s = 0; s < count; s++) {
            double total = 0.0;
            for (size_t b = 0; b < sumsq_blocks(begin[s], end[s]); b++)
                total += sumsq_block(x, begin[s], end[s], b);
            out[s] = total;
        }
        free(first);
        return;
    }
    const int64_t blocks = (int64_t)first[count];
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; b++) {
        int lo = 0, hi = count - 1; /* the segment s with first[s] <= b < first[s + 1] */
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (first[mid] <= (size_t)b)
                lo = mid;
            else
                hi = mid - 1;
        }
        partial[b] = sumsq_block(x, begin[lo], end[lo], (size_t)b - first[lo]);
    }
    for (int s = 0; s < count; s++) {
        double total = 0.0;
        for (size_t b = first[s]; b < first[s + 1]; b++)
            total += partial[b];
        out[s] = total;
    }
    free(partial);
    free(first);
}
