/*
 * loss.c — the CPU's losses on logits against integer labels (or MixUp's pairs of them),
 * fused with their gradient, and the top-1 / top-5 hits (the formulas: model/loss.c, one
 * sample's in formulas/loss_formulas.h, shared with the CUDA backend). Per-sample losses are
 * summed in double, in sample order.
 */
#include "cpu_kernels.h"
#include "../formulas/loss_formulas.h"

void cpu_loss(const loss_desc *d, int n, int k, const float *z, const int32_t *labels,
              float *dz, float scale, double *out)
{
    double loss_sum = 0.0;
    int64_t top1 = 0, top5 = 0;
    for (int i = 0; i < n; i++) {
        const float *zi = z + (size_t)i * k;
        const int y2 = d->mix != 1.0f ? labels[n + i] : labels[i];
        loss_sum += loss_sample(d->kind, d->label_smoothing, zi, k, labels[i], y2, d->mix,
                                dz ? dz + (size_t)i * k : NULL, scale);
        int rank = loss_label_rank(zi, k, loss_hit_label(labels[i], y2, d->mix));
        top1 += rank == 0;
        top5 += rank < 5;
    }
    out[0] = loss_sum;
    out[1] = (double)top1;
    out[2] = (double)top5;
}
