/*
 * loss_formulas.h — one sample's loss on its logits, with its gradient, and the rank of its
 * true class for the top-1 / top-5 hits: the single definition that the CPU (backend/cpu/loss.c)
 * and the CUDA backend (backend/cuda/loss.cu) both call, so the backends cannot drift apart.
 * The formulas are documented in model/loss.c; the arithmetic is in double, in the order the
 * CPU has always used. How samples are shared out and summed is each backend's business.
 */
#ifndef DTNN_LOSS_FORMULAS_H
#define DTNN_LOSS_FORMULAS_H

#include <math.h>

#include "../backend.h"
#include "../../core/host_device.h"

/* Rank of the true class y among the k logits z: how many beat it (ties go to the lower index,
 * as argmax). A NaN logit beats every number, as in torch.topk and torch.argmax, and a NaN
 * true-class logit ranks last (k): every comparison with NaN is false, so without this a
 * diverged model's all-NaN logits would rank every label first and score 100%. */
static inline DTNN_HOST_DEVICE int loss_label_rank(const float *z, int k, int y)
{
    if (z[y] != z[y])
        return k;
    int rank = 0;
    for (int j = 0; j < k; j++)
        if (z[j] != z[j] || z[j] > z[y] || (z[j] == z[y] && j < y))
            rank++;
    return rank;
}

/* The loss of logits z [k] against the target lam onehot(y) + (1 - lam) onehot(y2) (MixUp and
 * CutMix; lam == 1 is the plain label y and y2 is not read); with dz, also its gradient times
 * scale. Every loss is linear in its target, so the mixed target's loss and gradient are the
 * formulas of model/loss.c with t_j = lam [j = y] + (1 - lam) [j = y2]. */
static inline DTNN_HOST_DEVICE double loss_sample(dtnn_loss_kind kind, float smoothing,
                                                  const float *z, int k, int y, int y2,
                                                  float lam, float *dz, float scale)
{
    const int mixed = lam != 1.0f;
    const double wa = lam, wb = 1.0 - (double)lam;
    double loss = 0.0;
    if (kind == DTNN_LOSS_CROSS_ENTROPY) {
        float mx = z[0];
        for (int j = 1; j < k; j++)
            mx = z[j] > mx ? z[j] : mx;
        double sum = 0.0;
        for (int j = 0; j < k; j++)
            sum += exp((double)z[j] - mx);
        const double lse = mx + log(sum);
        const double e = smoothing;
        double mean_logp = 0.0;
        for (int j = 0; j < k; j++)
            mean_logp += (z[j] - lse) / k;
        const double logp_t = mixed ? wa * (z[y] - lse) + wb * (z[y2] - lse) : z[y] - lse;
        loss = -(1.0 - e) * logp_t - e * mean_logp;
        if (dz)
            for (int j = 0; j < k; j++) {
                const double p = exp(z[j] - lse);
                const double t = mixed ? wa * (j == y) + wb * (j == y2) : (double)(j == y);
                dz[j] = (float)((p - (1.0 - e) * t - e / k) * scale);
            }
        return loss;
    }
    for (int j = 0; j < k; j++) {
        const double t = mixed ? wa * (j == y) + wb * (j == y2) : (j == y ? 1.0 : 0.0);
        const double zj = z[j];
        if (kind == DTNN_LOSS_BCE) {
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

/* The label a mixed target's hits are counted against: its larger weight (the argmax of the
 * soft target, as torchvision's reference accuracy takes it; y at a tie). */
static inline DTNN_HOST_DEVICE int loss_hit_label(int y, int y2, float lam)
{
    return lam >= 0.5f ? y : y2;
}

#endif
