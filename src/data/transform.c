/*
 * transform.c — see transform.h. The crops follow torchvision.transforms (RandomResizedCrop,
 * Resize + CenterCrop, RandomCrop with padding, RandomHorizontalFlip, RandomErasing) and the resampling
 * follows Pillow's ImagingResample (libImaging/Resample.c) for BILINEAR: a separable triangle
 * filter whose support widens with the downscale factor, so downscaling is antialiased, with
 * sample centres at (i + 0.5) * scale from the box's origin. Crop-then-resize is one resample of
 * the crop's box, which gives the same sample positions as Pillow's resize of the cropped image.
 * The passes run in float where Pillow rounds to 8 bits between them; the output is rounded to
 * 8 bits, so results match Pillow's within one grey level.
 *
 * Python's round() rounds halves to even; rint() in the default rounding mode does the same.
 */
#include <math.h>
#include <string.h>

#include "core/internal.h"
#include "data/transform.h"

#define AUG_DOMAIN 0x6175676d656e7431ull  /* "augment1" */
#define AUG_EPOCH_STEP 0xD1B54A32D192ED03ull
#define AUG_INDEX_STEP 0x9E3779B97F4A7C15ull

void dtnn__resample_scratch_free(dtnn_resample_scratch *s)
{
    free(s->coef);
    free(s->bounds);
    free(s->rows);
    memset(s, 0, sizeof *s);
}

void dtnn__augment_rng(dtnn_rng *r, uint64_t seed, int64_t epoch, int64_t index)
{
    uint64_t k = dtnn__mix64(seed ^ AUG_DOMAIN) ^ ((uint64_t)epoch * AUG_EPOCH_STEP);
    dtnn__rng_seed(r, dtnn__mix64(k) ^ ((uint64_t)index * AUG_INDEX_STEP));
}

/* Uniform in [lo, hi) with 53 random bits, as Python's random.uniform / torch's uniform_. */
static double uniform(dtnn_rng *r, double lo, double hi)
{
    return lo + (hi - lo) * ((double)(dtnn__rng_next(r) >> 11) * (1.0 / 9007199254740992.0));
}

void dtnn__random_resized_crop_box(int w, int h, dtnn_rng *r, float box[4])
{
    const double area = (double)w * h, lo = log(3.0 / 4.0), hi = log(4.0 / 3.0);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * uniform(r, 0.08, 1.0), aspect = exp(uniform(r, lo, hi));
        int cw = (int)rint(sqrt(target * aspect)), ch = (int)rint(sqrt(target / aspect));
        if (cw > 0 && cw <= w && ch > 0 && ch <= h) {
            int y = (int)dtnn__rng_below(r, (uint64_t)(h - ch + 1));
            int x = (int)dtnn__rng_below(r, (uint64_t)(w - cw + 1));
            box[0] = (float)x;
            box[1] = (float)y;
            box[2] = (float)(x + cw);
            box[3] = (float)(y + ch);
            return;
        }
    }
    double ratio = (double)w / h;
    int cw = w, ch = h;
    if (ratio < 3.0 / 4.0)
        ch = (int)rint(cw / (3.0 / 4.0));
    else if (ratio > 4.0 / 3.0)
        cw = (int)rint(ch * (4.0 / 3.0));
    int y = (h - ch) / 2, x = (w - cw) / 2;
    box[0] = (float)x;
    box[1] = (float)y;
    box[2] = (float)(x + cw);
    box[3] = (float)(y + ch);
}

int dtnn__erase_size(int h, int w, double u_scale, double u_ratio, int *eh, int *ew)
{
    const double lo = log(0.3), hi = log(3.3);
    const double target = (double)h * w * (0.02 + (0.33 - 0.02) * u_scale);
    const double aspect = exp(lo + (hi - lo) * u_ratio);
    *eh = (int)rint(sqrt(target * aspect));
    *ew = (int)rint(sqrt(target / aspect));
    return *eh < h && *ew < w;
}

int dtnn__random_erase_box(int h, int w, dtnn_rng *r, int box[4])
{
    for (int attempt = 0; attempt < 10; attempt++) {
        const double u_scale = uniform(r, 0.0, 1.0), u_ratio = uniform(r, 0.0, 1.0);
        int eh, ew;
        if (!dtnn__erase_size(h, w, u_scale, u_ratio, &eh, &ew))
            continue;
        box[0] = (int)dtnn__rng_below(r, (uint64_t)(h - eh + 1));
        box[1] = (int)dtnn__rng_below(r, (uint64_t)(w - ew + 1));
        box[2] = eh;
        box[3] = ew;
        return 1;
    }
    return 0;
}

void dtnn__erase_chw(float *img, int c, int h, int w, const int box[4])
{
    for (int ch = 0; ch < c; ch++)
        for (int y = box[0]; y < box[0] + box[2]; y++)
            memset(img + ((size_t)ch * h + y) * w + box[1], 0, sizeof(float) * (size_t)box[3]);
}

void dtnn__center_crop_box(int w, int h, int resize, int size, float box[4])
{
    /* torchvision's Resize(int): the shorter side becomes resize, the longer one is truncated. */
    int rw, rh;
    if (w <= h) {
        rw = resize;
        rh = (int)((int64_t)resize * h / w);
    } else {
        rh = resize;
        rw = (int)((int64_t)resize * w / h);
    }
    int top = (int)rint((rh - size) / 2.0), left = (int)rint((rw - size) / 2.0);
    double sx = (double)w / rw, sy = (double)h / rh;
    box[0] = (float)(left * sx);
    box[1] = (float)(top * sy);
    box[2] = (float)((left + size) * sx);
    box[3] = (float)((top + size) * sy);
}

static float triangle(float x)
{
    x = fabsf(x);
    return x < 1.0f ? 1.0f - x : 0.0f;
}

/* Pillow's precompute_coeffs for one axis: for each of out_size outputs, the first source
 * index, the tap count, and ksize normalised weights. Returns ksize. */
static int coefficients(int in_size, float in0, float in1, int out_size, int *bounds,
                        float *coef)
{
    double scale = ((double)in1 - in0) / out_size, filterscale = scale < 1.0 ? 1.0 : scale;
    double support = filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    for (int o = 0; o < out_size; o++) {
        double center = in0 + (o + 0.5) * scale, ss = 1.0 / filterscale;
        int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
        lo = lo < 0 ? 0 : lo;
        hi = (hi > in_size ? in_size : hi) - lo;
        float *k = coef + (size_t)o * ksize, sum = 0.0f;
        for (int i = 0; i < hi; i++) {
            k[i] = triangle((float)((i + lo - center + 0.5) * ss));
            sum += k[i];
        }
        for (int i = 0; i < hi; i++)
            k[i] = sum != 0.0f ? k[i] / sum : 0.0f;
        for (int i = hi < 0 ? 0 : hi; i < ksize; i++)
            k[i] = 0.0f;
        bounds[2 * o] = lo;
        bounds[2 * o + 1] = hi < 0 ? 0 : hi;
    }
    return ksize;
}

static int grow(void **buf, size_t *cap, size_t bytes)
{
    if (bytes <= *cap)
        return 0;
    void *p = realloc(*buf, bytes);
    if (!p)
        return -1;
    *buf = p;
    *cap = bytes;
    return 0;
}

/* The resample, to floats normalised by mean and std (out) or to the 8-bit image (out_u8). */
static dtnn_status resample(const unsigned char *src, int sw, int sh, const float box[4], int ow,
                            int oh, int flip, const float mean[3], const float std[3], float *out,
                            unsigned char *out_u8, dtnn_resample_scratch *s, dtnn_error *err)
{
    const double sx = ((double)box[2] - box[0]) / ow, sy = ((double)box[3] - box[1]) / oh;
    const size_t kx = (size_t)ceil(sx < 1 ? 1 : sx) * 2 + 1;
    const size_t ky = (size_t)ceil(sy < 1 ? 1 : sy) * 2 + 1;
    if (grow((void **)&s->coef, &s->coef_cap, sizeof(float) * (kx * ow + ky * oh)) ||
        grow((void **)&s->bounds, &s->bounds_cap, sizeof(int) * 2 * (size_t)(ow + oh)))
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for resampling to %dx%d", ow,
                              oh);
    float *cx = s->coef, *cy = s->coef + kx * ow;
    int *bx = s->bounds, *by = s->bounds + 2 * ow;
    int kxs = coefficients(sw, box[0], box[2], ow, bx, cx);
    int kys = coefficients(sh, box[1], box[3], oh, by, cy);
    /* Rows the vertical pass reads: from the first output's first tap to the last's end. */
    int row0 = sh, row1 = 0;
    for (int o = 0; o < oh; o++) {
        row0 = DTNN_MIN(row0, by[2 * o]);
        row1 = DTNN_MAX(row1, by[2 * o] + by[2 * o + 1]);
    }
    size_t nrows = (size_t)DTNN_MAX(row1 - row0, 1);
    if (grow((void **)&s->rows, &s->rows_cap, sizeof(float) * nrows * ow * 3))
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for resampling to %dx%d", ow,
                              oh);
    for (int y = row0; y < row1; y++) {
        const unsigned char *in = src + (size_t)y * sw * 3;
        float *t = s->rows + (size_t)(y - row0) * ow * 3;
        for (int o = 0; o < ow; o++) {
            const float *k = cx + (size_t)o * kxs;
            const unsigned char *p = in + (size_t)bx[2 * o] * 3;
            float r = 0, g = 0, b = 0;
            for (int i = 0; i < bx[2 * o + 1]; i++) {
                r += k[i] * p[3 * i];
                g += k[i] * p[3 * i + 1];
                b += k[i] * p[3 * i + 2];
            }
            t[3 * o] = r;
            t[3 * o + 1] = g;
            t[3 * o + 2] = b;
        }
    }
    const size_t plane = (size_t)ow * oh;
    for (int o = 0; o < oh; o++) {
        const float *k = cy + (size_t)o * kys;
        const float *t = s->rows + (size_t)(by[2 * o] - row0) * ow * 3;
        for (int x = 0; x < ow; x++) {
            float v[3] = {0, 0, 0};
            for (int i = 0; i < by[2 * o + 1]; i++)
                for (int c = 0; c < 3; c++)
                    v[c] += k[i] * t[(size_t)i * ow * 3 + 3 * x + c];
            size_t at = (size_t)o * ow + (size_t)(flip ? ow - 1 - x : x);
            for (int c = 0; c < 3; c++) {
                float q = rintf(v[c]);
                q = q < 0.0f ? 0.0f : (q > 255.0f ? 255.0f : q);
                if (out_u8)
                    out_u8[c * plane + at] = (unsigned char)q;
                else
                    out[c * plane + at] = (q / 255.0f - mean[c]) / std[c];
            }
        }
    }
    return DTNN_OK;
}

dtnn_status dtnn__resample_rgb(const unsigned char *src, int sw, int sh, const float box[4],
                              int ow, int oh, int flip, const float mean[3], const float std[3],
                              float *out, dtnn_resample_scratch *s, dtnn_error *err)
{
    return resample(src, sw, sh, box, ow, oh, flip, mean, std, out, NULL, s, err);
}

dtnn_status dtnn__resample_rgb_u8(const unsigned char *src, int sw, int sh, const float box[4],
                                 int ow, int oh, int flip, unsigned char *out,
                                 dtnn_resample_scratch *s, dtnn_error *err)
{
    static const float unused_mean[3] = {0, 0, 0}, unused_std[3] = {1, 1, 1};
    return resample(src, sw, sh, box, ow, oh, flip, unused_mean, unused_std, NULL, out, s, err);
}

void dtnn__normalize_u8(const unsigned char *img, int c, size_t plane, const float *mean,
                        const float *std, float *out)
{
    for (int ch = 0; ch < c; ch++)
        for (size_t j = 0; j < plane; j++)
            out[ch * plane + j] = ((float)img[ch * plane + j] / 255.0f - mean[ch]) / std[ch];
}

void dtnn__denormalize_u8(const float *x, int c, size_t plane, const float *mean,
                          const float *std, unsigned char *out)
{
    for (int ch = 0; ch < c; ch++)
        for (size_t j = 0; j < plane; j++) {
            const float v = nearbyintf((x[ch * plane + j] * std[ch] + mean[ch]) * 255.0f);
            out[ch * plane + j] = (unsigned char)(v < 0.0f ? 0.0f : (v > 255.0f ? 255.0f : v));
        }
}

void dtnn__crop_flip_chw(const float *src, int c, int h, int w, int pad, int dx, int dy, int flip,
                        const float *fill, float *out)
{
    for (int ch = 0; ch < c; ch++) {
        const float *in = src + (size_t)ch * h * w;
        float *o = out + (size_t)ch * h * w;
        for (int y = 0; y < h; y++) {
            int sy = y + dy - pad;
            for (int x = 0; x < w; x++) {
                int sx = (flip ? w - 1 - x : x) + dx - pad;
                o[(size_t)y * w + x] = sy < 0 || sy >= h || sx < 0 || sx >= w
                                           ? fill[ch]
                                           : in[(size_t)sy * w + sx];
            }
        }
    }
}
