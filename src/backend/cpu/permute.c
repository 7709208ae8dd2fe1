/*
 * permute.c — the CPU's per-sample tensor permutation (backend.h permute_geom): y =
 * x.permute(perm) for each sample, written or added. The output is walked in order with an
 * odometer over its dims, each step adding the input stride of the dim that moved, so any rank
 * up to PERMUTE_MAX_DIMS costs one add per value; samples in parallel.
 */
#include "cpu_kernels.h"

void cpu_permute(const permute_geom *g, int n, const float *x, float *y, int accumulate)
{
    const int r = g->rank;
    size_t in_stride[PERMUTE_MAX_DIMS], total = 1;
    for (int k = r - 1; k >= 0; k--) {
        in_stride[k] = total;
        total *= (size_t)g->dims[k];
    }
    /* the output's dims and, for each, the input stride it walks */
    int od[PERMUTE_MAX_DIMS];
    size_t step[PERMUTE_MAX_DIMS];
    for (int k = 0; k < r; k++) {
        od[k] = g->dims[g->perm[k]];
        step[k] = in_stride[g->perm[k]];
    }
#pragma omp parallel for schedule(static) if ((size_t)n * total > 65536)
    for (int i = 0; i < n; i++) {
        const float *xs = x + (size_t)i * total;
        float *ys = y + (size_t)i * total;
        int idx[PERMUTE_MAX_DIMS] = {0};
        size_t src = 0;
        for (size_t o = 0; o < total; o++) {
            ys[o] = accumulate ? ys[o] + xs[src] : xs[src];
            for (int k = r - 1; k >= 0; k--) {
                src += step[k];
                if (++idx[k] < od[k])
                    break;
                src -= step[k] * (size_t)od[k];
                idx[k] = 0;
            }
        }
    }
}
