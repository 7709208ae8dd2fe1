/*
 * mix.h — batch-wise MixUp and CutMix (mix.c) as torchvision.transforms.v2 defines them: the
 * partner of a sample is the one before it in the global batch (the batch rolled by one), one
 * Beta(alpha, alpha) draw per global step, from a stream keyed by (seed, epoch, step) so that
 * every rank, of any count, draws the same.
 */
#ifndef DTNN_MIX_H
#define DTNN_MIX_H

#include <stdint.h>

#include "core/rng.h"
#include "dtnn.h"

/* The draws of global step `step` of `epoch` for an h x w image: with both alphas positive a
 * fair coin chooses MixUp or CutMix (torchvision's reference RandomChoice); then lam ~ Beta(a,
 * a) (mix->draw) and, for CutMix, the box's centre and corners; mix->lam is the weight of a
 * sample's own label (CutMix: the share of the image left as it was); mix->y2 is NULL. */
void dtnn__mix_draw(float mixup_alpha, float cutmix_alpha, uint64_t seed, int64_t epoch,
                    int64_t step, int h, int w, dtnn_batch_mix *mix);

/* Mixes x [n, c, h, w] in place: sample i with sample i - 1, sample 0 with partner0 [c, h, w]
 * (the sample before this rank's first in the global batch), as torchvision computes it in
 * float32: MixUp fl(fl(x_{i-1} (1 - lam)) + fl(x_i lam)), CutMix the box copied. */
void dtnn__mix_apply(const dtnn_batch_mix *mix, float *x, const float *partner0, int n, int c,
                     int h, int w);

/* A Beta(a, b) draw from two gamma draws (Marsaglia and Tsang; in logarithms, so the small
 * alphas of MixUp, e.g. 0.2, cannot underflow to 0 / 0). */
double dtnn__rng_beta(dtnn_rng *r, double a, double b);

#endif
