/*
 * loss.cu — the losses on logits against integer labels with their gradient and the top-1 /
 * top-5 hits, as backend/cpu/loss.c (the per-sample formulas of formulas/loss_formulas.h, in double).
 * One block: each thread takes samples i = t, t + 256, ... and keeps its own sums, which a
 * fixed tree in shared memory adds up, so the totals are the same on every run; they differ
 * from the CPU's sample-order sum by double rounding only. out [3] is written on the device;
 * the engine downloads it.
 */
#include "../formulas/loss_formulas.h"
#include "cuda_launch.cuh"

enum { LOSS_THREADS = 256 };

static __global__ void loss_k(dtnn_loss_kind kind, float smoothing, float mix, int n, int k,
                              const float *z, const int32_t *labels, float *dz, float scale,
                              double *out)
{
    __shared__ double sl[LOSS_THREADS], s1[LOSS_THREADS], s5[LOSS_THREADS];
    const unsigned t = threadIdx.x;
    double l = 0.0, h1 = 0.0, h5 = 0.0;
    for (int i = (int)t; i < n; i += LOSS_THREADS) {
        const float *zi = z + (size_t)i * k;
        const int y2 = mix != 1.0f ? labels[n + i] : labels[i];
        l += loss_sample(kind, smoothing, zi, k, labels[i], y2, mix,
                         dz ? dz + (size_t)i * k : NULL, scale);
        const int rank = loss_label_rank(zi, k, loss_hit_label(labels[i], y2, mix));
        h1 += rank == 0;
        h5 += rank < 5;
    }
    sl[t] = l, s1[t] = h1, s5[t] = h5;
    __syncthreads();
    for (unsigned half = LOSS_THREADS / 2; half > 0; half /= 2) {
        if (t < half) {
            sl[t] += sl[t + half];
            s1[t] += s1[t + half];
            s5[t] += s5[t + half];
        }
        __syncthreads();
    }
    if (t == 0) {
        out[0] = sl[0];
        out[1] = s1[0];
        out[2] = s5[0];
    }
}

extern "C" void cuda_loss(dtnn_backend *be, const loss_desc *d, int n, int k, const float *z,
                          const int32_t *labels, float *dz, float scale, double *out)
{
    CU_SKIP_IF_FAILED(be);
    loss_k<<<1, LOSS_THREADS, 0, cuda_of(be)->stream>>>(d->kind, d->label_smoothing, d->mix, n,
                                                        k, z, labels, dz, scale, out);
    cuda_ok(be, cudaGetLastError(), "loss kernel");
}
