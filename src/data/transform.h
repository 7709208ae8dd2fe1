/*
 * transform.h — the image transforms of the loader (transform.c): torchvision's standard
 * ImageNet crops as boxes in source pixels, one antialiased bilinear resample of a box to the
 * output tensor (normalised, optionally mirrored), the CIFAR pad-and-crop for tensors held in
 * memory, and the per-sample random stream that makes augmentation a pure function of (seed,
 * epoch, sample).
 */
#ifndef DTNN_TRANSFORM_H
#define DTNN_TRANSFORM_H

#include <stddef.h>
#include <stdint.h>

#include "core/rng.h"
#include "dtnn.h"

/* Buffers a resample reuses; they only grow. Start from all zero. */
typedef struct {
    float *coef;            /* horizontal then vertical filter weights */
    int *bounds;            /* first source index and tap count per output pixel, x then y */
    float *rows;            /* horizontally resampled rows [rows, ow, 3] */
    size_t coef_cap, bounds_cap, rows_cap;
} dtnn_resample_scratch;

void dtnn__resample_scratch_free(dtnn_resample_scratch *s);

/* The random stream of sample `index` in epoch `epoch` (independent of threads and order). */
void dtnn__augment_rng(dtnn_rng *r, uint64_t seed, int64_t epoch, int64_t index);

/* torchvision's RandomResizedCrop.get_params with scale (0.08, 1) and ratio (3/4, 4/3): up to
 * 10 random tries, then the centred crop of the nearest allowed ratio. box: x0, y0, x1, y1. */
void dtnn__random_resized_crop_box(int w, int h, dtnn_rng *r, float box[4]);
/* Resize(shorter side to `resize`) then CenterCrop(size), as one box of the source image. */
void dtnn__center_crop_box(int w, int h, int resize, int size, float box[4]);

/* Resamples box of the RGB image src [sh, sw, 3] to out [3, oh, ow] with PIL's antialiased
 * bilinear filter (a triangle widened by the downscale factor), rounds to 8 bits as PIL's
 * output would be, then writes (v / 255 - mean[c]) / std[c]; flip mirrors left and right.
 * DTNN_ERR_NOMEM when the scratch cannot grow. */
dtnn_status dtnn__resample_rgb(const unsigned char *src, int sw, int sh, const float box[4],
                              int ow, int oh, int flip, const float mean[3], const float std[3],
                              float *out, dtnn_resample_scratch *s, dtnn_error *err);

/* The same resample rounded to the 8-bit image out [3, oh, ow] (what PIL holds), unnormalised:
 * for the operations that work on 8-bit images (autoaugment.h). */
dtnn_status dtnn__resample_rgb_u8(const unsigned char *src, int sw, int sh, const float box[4],
                                 int ow, int oh, int flip, unsigned char *out,
                                 dtnn_resample_scratch *s, dtnn_error *err);
/* ToTensor + Normalize of an 8-bit [c, plane] image: (v / 255 - mean) / std in float32, the
 * datasets' own formula, so an unchanged pixel comes back as the same float. */
void dtnn__normalize_u8(const unsigned char *img, int c, size_t plane, const float *mean,
                        const float *std, float *out);
/* Its inverse for data held normalised in memory: round((x std + mean) 255) clamped to 8 bits;
 * exact for data that came from 8-bit images (IDX, CIFAR), a quantisation of any other. */
void dtnn__denormalize_u8(const float *x, int c, size_t plane, const float *mean,
                          const float *std, unsigned char *out);

/* torchvision's RandomErasing.get_params with scale (0.02, 0.33), ratio (0.3, 3.3) and value
 * 0, for an h x w image: up to 10 random tries of an area and an aspect ratio, the first box
 * strictly smaller than the image taken (top, left, height, width), then its position. 0 when
 * no try fits: the image stays as it is. */
int dtnn__random_erase_box(int h, int w, dtnn_rng *r, int box[4]);
/* One try's box size from its two uniform draws in [0, 1) (area fraction, log aspect); 1 when
 * it fits (strictly smaller than the image). */
int dtnn__erase_size(int h, int w, double u_scale, double u_ratio, int *eh, int *ew);
/* torchvision.transforms.functional.erase with value 0: the box of every channel of img
 * [c, h, w] set to 0 (the normalised image's mean). */
void dtnn__erase_chw(float *img, int c, int h, int w, const int box[4]);

/* torchvision's RandomCrop(padding=pad) then RandomHorizontalFlip on a [c, h, w] tensor: out
 * pixel (y, x) is src (y + dy - pad, x + dx - pad), fill[ch] outside; dx, dy in [0, 2 pad]. */
void dtnn__crop_flip_chw(const float *src, int c, int h, int w, int pad, int dx, int dy, int flip,
                        const float *fill, float *out);

#endif
