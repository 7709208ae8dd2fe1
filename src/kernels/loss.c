/*
 * loss.c — the CPU's losses on logits against integer labels, fused with their gradient, and
 * the top-1 / top-5 hits (the formulas: model/loss.c). Per-sample losses are summed in double,
 * in sample order.
 */
#include <math.h>

#include "cpu_kernels.h"

/* Rank of the true class: how many logits beat it (ties go to the lower index, as argmax). */
static int label_rank(const float *z, int k, int y)
{
    int rank = 0;
    for (int j = 0; j < k; j++)
        if (z[j] > z[y] || (z[j] == z[y] && j < y))
            rank++;
    return rank;
}

static double sample_loss(const loss_desc *lp, const float *z, int k, int y, float *dz,
                          float scale)
{
    double loss = 0.0;
    if (lp->kind == DTNN_LOSS_CROSS_ENTROPY) {
        float mx = z[0];
        for (int j = 1; j < k; j++)
            mx = z[j] > mx ? z[j] : mx;
        double sum = 0.0;
        for (int j = 0; j < k; j++)
            sum += exp((double)z[j] - mx);
        double lse = mx + log(sum);
        double e = lp->label_smoothing, mean_logp = 0.0;
        for (int j = 0; j < k; j++)
            mean_logp += (z[j] - lse) / k;
        loss = -(1.0 - e) * (z[y] - lse) - e * mean_logp;
        if (dz)
            for (int j = 0; j < k; j++) {
                double p = exp(z[j] - lse);
                dz[j] = (float)((p - (1.0 - e) * (j == y) - e / k) * scale);
            }
        return loss;
    }
    for (int j = 0; j < k; j++) {
        double t = j == y ? 1.0 : 0.0, zj = z[j];
        if (lp->kind == DTNN_LOSS_BCE) {
            loss += (zj > 0 ? zj : 0.0) - zj * t + log1p(exp(-fabs(zj)));
            if (dz)
                dz[j] = (float)((1.0 / (1.0 + exp(-zj)) - t) / k * scale);
        } else {
            loss += (zj - t) * (zj - t);
            if (dz)
                dz[j] = (float)(2.0 * (zj - t) / k * scale);
        }
    }
    return loss / k;
}

void cpu_loss(const loss_desc *d, int n, int k, const float *z, const int32_t *labels,
              float *dz, float scale, double *out)
{
    double loss_sum = 0.0;
    int64_t top1 = 0, top5 = 0;
    for (int i = 0; i < n; i++) {
        const float *zi = z + (size_t)i * k;
        loss_sum += sample_loss(d, zi, k, labels[i], dz ? dz + (size_t)i * k : NULL, scale);
        int rank = label_rank(zi, k, labels[i]);
        top1 += rank == 0;
        top5 += rank < 5;
    }
    out[0] = loss_sum;
    out[1] = (double)top1;
    out[2] = (double)top5;
}
