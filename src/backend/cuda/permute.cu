/*
 * permute.cu — the per-sample tensor permutation of backend/cpu/permute.c: one thread per
 * output value, its input offset decoded from the output index dim by dim. Copies only, so
 * the results are the CPU's bit for bit.
 */
#include "cuda_launch.cuh"

static __global__ void permute_k(permute_geom g, size_t total, size_t count, const float *x,
                                 float *y, int acc)
{
    size_t in_stride[PERMUTE_MAX_DIMS], s = 1;
    for (int k = g.rank - 1; k >= 0; k--) {
        in_stride[k] = s;
        s *= (size_t)g.dims[k];
    }
    CU_LOOP(o, count)
    {
        const size_t sample = o / total;
        size_t rest = o % total, src = 0;
        for (int k = g.rank - 1; k >= 0; k--) {
            const size_t d = (size_t)g.dims[g.perm[k]];
            src += (rest % d) * in_stride[g.perm[k]];
            rest /= d;
        }
        const float v = x[sample * total + src];
        y[o] = acc ? y[o] + v : v;
    }
}

extern "C" void cuda_permute(dtnn_backend *be, const permute_geom *g, int n, const float *x,
                             float *y, int accumulate)
{
    CU_SKIP_IF_FAILED(be);
    size_t total = 1;
    for (int k = 0; k < g->rank; k++)
        total *= (size_t)g->dims[k];
    const size_t count = total * (size_t)n;
    CU_LAUNCH(be, "permute kernel", permute_k, count, *g, total, count, x, y, accumulate);
}
