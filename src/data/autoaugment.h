/*
 * autoaugment.h — TrivialAugmentWide and RandAugment (autoaugment.c): torchvision's operation
 * set and magnitude bins on 8-bit [c, h, w] images, each operation computed as
 * torchvision.transforms.functional computes it on a uint8 tensor (float32 arithmetic, its
 * rounding and truncation), with nearest interpolation and zero fill, as both transforms use
 * by default. The random choices come from the sample's own stream (transform.h).
 */
#ifndef DTNN_AUTOAUGMENT_H
#define DTNN_AUTOAUGMENT_H

#include "core/rng.h"

/* torchvision's operation order of both augmentation spaces. */
typedef enum {
    AA_IDENTITY,
    AA_SHEAR_X,
    AA_SHEAR_Y,
    AA_TRANSLATE_X,
    AA_TRANSLATE_Y,
    AA_ROTATE,
    AA_BRIGHTNESS,
    AA_COLOR,
    AA_CONTRAST,
    AA_SHARPNESS,
    AA_POSTERIZE,
    AA_SOLARIZE,
    AA_AUTOCONTRAST,
    AA_EQUALIZE,
    AA_OPS
} aa_op;

#define AA_BINS 31

/* The magnitude of bin `bin` of op in TrivialAugmentWide's space (wide 1) or RandAugment's
 * (wide 0; its translations scale with the image: h, w), as the float32 values of
 * torch.linspace / the posterize bits; 0 for the ops without magnitudes. */
double dtnn__aa_magnitude(aa_op op, int bin, int wide, int h, int w);
/* Whether op's magnitude takes a random sign. */
int dtnn__aa_signed(aa_op op);

/* Applies op with magnitude (signed, as torchvision's _apply_op receives it) to img [c, h, w]
 * (c 1 or 3) in place; tmp is scratch of c h w floats. */
void dtnn__aa_apply(aa_op op, double magnitude, unsigned char *img, int c, int h, int w,
                    float *tmp);

/* TrivialAugmentWide(): one op, one bin, one sign from r. */
void dtnn__trivial_augment(dtnn_rng *r, unsigned char *img, int c, int h, int w, float *tmp);
/* RandAugment(num_ops, magnitude): num_ops ops at bin `magnitude`, each with its sign. */
void dtnn__rand_augment(dtnn_rng *r, int num_ops, int magnitude, unsigned char *img, int c,
                        int h, int w, float *tmp);

#endif
