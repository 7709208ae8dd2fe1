/*
 * autoaugment.c — torchvision's TrivialAugmentWide and RandAugment operations on 8-bit
 * [c, h, w] images (autoaugment.h). Each operation follows torchvision.transforms.functional
 * on a uint8 tensor step by step, in float32 where it computes in float32 (one rounding per
 * tensor operation, so no fused multiply-adds: each product gets its own statement), with its
 * integer conversions (.to(uint8) truncates, the geometric ops round half to even):
 *   blend(a, b, r)    trunc(clamp(fl(r a) + fl((1 - r) b), 0, 255)): brightness (b = 0),
 *                     saturation (b = grayscale), contrast (b = mean of the grayscale),
 *                     sharpness (b = the 3x3 smoothing of the interior, edges kept)
 *   grayscale         trunc(fl(fl(0.2989 r) + fl(0.587 g)) + fl(0.114 b))
 *   affine / rotate   the inverse matrix in double (torchvision's _get_inverse_affine_matrix),
 *                     then in float32 the grid of pixel centres times theta (a GEMM of k = 3:
 *                     x t0, then fused y t1 +, then + t2, as an FMA BLAS kernel sums it),
 *                     grid_sample's unnormalisation (gx + 1) W/2 - 0.5 and the nearest pixel
 *                     (half to even), zero outside.
 * torchvision's grid is whatever its BLAS computes (without FMA, a CPU's product rounds
 * twice), so where a sampling point is within rounding of a half-integer, which shears by
 * simple ratios hit often, a pixel may take its neighbour's value there;
 * python/tests/test_autoaugment.py states the bound.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "data/autoaugment.h"

/* Python's math.radians / math.degrees: one multiplication by a rounded constant. */
static const double deg_to_rad = 3.14159265358979323846 / 180.0;
static const double rad_to_deg = 180.0 / 3.14159265358979323846;

/* torch.linspace(start, end, AA_BINS)[i] in float32, correctly rounded from its exact value.
 * PyTorch's own kernel adds up steps in float32, in vector blocks whose width is the CPU's
 * (8 or 16 lanes), so its bins differ from these by up to one float32 ulp from CPU to CPU. */
static float linspace(double start, double end, int i)
{
    const double s = (float)start, e = (float)end;
    return (float)(s + (e - s) * i / (AA_BINS - 1));
}

double dtnn__aa_magnitude(aa_op op, int bin, int wide, int h, int w)
{
    switch (op) {
    case AA_SHEAR_X:
    case AA_SHEAR_Y:
        return linspace(0.0, wide ? 0.99 : 0.3, bin);
    case AA_TRANSLATE_X:
        return linspace(0.0, wide ? 32.0 : 150.0 / 331.0 * w, bin);
    case AA_TRANSLATE_Y:
        return linspace(0.0, wide ? 32.0 : 150.0 / 331.0 * h, bin);
    case AA_ROTATE:
        return linspace(0.0, wide ? 135.0 : 30.0, bin);
    case AA_BRIGHTNESS:
    case AA_COLOR:
    case AA_CONTRAST:
    case AA_SHARPNESS:
        return linspace(0.0, wide ? 0.99 : 0.9, bin);
    case AA_POSTERIZE: {
        /* 8 - (arange(bins) / ((bins - 1) / q)).round(): q = 6 wide, 4 for RandAugment */
        const float q = (float)(AA_BINS - 1) / (wide ? 6.0f : 4.0f);
        return 8 - (int)nearbyintf((float)bin / q);
    }
    case AA_SOLARIZE:
        return linspace(255.0, 0.0, bin);
    default:
        return 0.0;
    }
}

int dtnn__aa_signed(aa_op op)
{
    return op >= AA_SHEAR_X && op <= AA_SHARPNESS;
}

static unsigned char to_u8(float v)
{
    v = v < 0.0f ? 0.0f : (v > 255.0f ? 255.0f : v);
    return (unsigned char)v;
}

/* img = blend(img, other, ratio); other per pixel of a plane (broadcast over channels when
 * other_planes is 1), or one value when other is NULL. */
static void blend(unsigned char *img, int c, size_t plane, const float *other, int other_planes,
                  float constant, double ratio)
{
    const float r = (float)ratio, q = (float)(1.0 - ratio);
    for (int ch = 0; ch < c; ch++) {
        unsigned char *p = img + (size_t)ch * plane;
        const float *o = other ? other + (other_planes > 1 ? (size_t)ch * plane : 0) : NULL;
        for (size_t j = 0; j < plane; j++) {
            const float a = r * (float)p[j];
            const float b = q * (o ? o[j] : constant);
            p[j] = to_u8(a + b);
        }
    }
}

/* rgb_to_grayscale of a uint8 image into gray (float, holding the truncated 8-bit values). */
static void grayscale(const unsigned char *img, size_t plane, float *gray)
{
    const float kr = (float)0.2989, kg = (float)0.587, kb = (float)0.114;
    for (size_t j = 0; j < plane; j++) {
        const float r = kr * (float)img[j];
        const float g = kg * (float)img[plane + j];
        const float rg = r + g;
        const float b = kb * (float)img[2 * plane + j];
        gray[j] = (float)to_u8(rg + b);
    }
}

/* Sharpness's degenerate image: the interior smoothed by [[1 1 1] [1 5 1] [1 1 1]] / 13 and
 * rounded, the edges as they were. The exact sum is a multiple of 1/13, never within float32
 * rounding of a half, so the order of its additions cannot change the rounded value. */
static void smooth(const unsigned char *img, int c, int h, int w, float *out)
{
    const float k1 = 1.0f / 13.0f, k5 = 5.0f / 13.0f;
    const size_t plane = (size_t)h * w;
    for (int ch = 0; ch < c; ch++) {
        const unsigned char *p = img + (size_t)ch * plane;
        float *o = out + (size_t)ch * plane;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                const size_t at = (size_t)y * w + x;
                if (y == 0 || x == 0 || y == h - 1 || x == w - 1) {
                    o[at] = p[at];
                    continue;
                }
                double s = 0.0;
                for (int dy = -1; dy <= 1; dy++)
                    for (int dx = -1; dx <= 1; dx++)
                        s += (double)((dx || dy ? k1 : k5) * (float)p[at + (size_t)(dy * w) + dx]);
                o[at] = nearbyintf((float)s);
            }
    }
}

static void autocontrast(unsigned char *img, int c, size_t plane)
{
    for (int ch = 0; ch < c; ch++) {
        unsigned char *p = img + (size_t)ch * plane, lo = 255, hi = 0;
        for (size_t j = 0; j < plane; j++) {
            lo = p[j] < lo ? p[j] : lo;
            hi = p[j] > hi ? p[j] : hi;
        }
        float mn = lo, scale = 255.0f / ((float)hi - (float)lo);
        if (!isfinite(scale)) {
            mn = 0.0f;
            scale = 1.0f;
        }
        for (size_t j = 0; j < plane; j++) {
            const float d = (float)p[j] - mn;
            p[j] = to_u8(d * scale);
        }
    }
}

/* torchvision's _scale_channel: the cumulative histogram as a lookup table, in integers. */
static void equalize(unsigned char *img, int c, size_t plane)
{
    for (int ch = 0; ch < c; ch++) {
        unsigned char *p = img + (size_t)ch * plane;
        int64_t hist[256] = {0}, last = 0, total = 0;
        for (size_t j = 0; j < plane; j++)
            hist[p[j]]++;
        for (int v = 0; v < 256; v++)
            if (hist[v]) {
                total += hist[v];
                last = hist[v];
            }
        const int64_t step = (total - last) / 255;
        if (step == 0)
            continue;
        unsigned char lut[256];
        int64_t cum = 0;
        for (int v = 0; v < 256; v++) {
            const int64_t l = v ? (cum + step / 2) / step : 0;
            lut[v] = (unsigned char)(l > 255 ? 255 : l);
            cum += hist[v];
        }
        for (size_t j = 0; j < plane; j++)
            p[j] = lut[p[j]];
    }
}

/* torchvision's _get_inverse_affine_matrix with scale 1, in its order of operations. */
static void inverse_affine(double cx, double cy, double angle, double tx, double ty,
                           double shear_x, double shear_y, double m[6])
{
    const double rot = angle * deg_to_rad, sx = shear_x * deg_to_rad, sy = shear_y * deg_to_rad;
    const double a = cos(rot - sy) / cos(sy);
    const double b = -cos(rot - sy) * tan(sx) / cos(sy) - sin(rot);
    const double c = sin(rot - sy) / cos(sy);
    const double d = -sin(rot - sy) * tan(sx) / cos(sy) + cos(rot);
    m[0] = d, m[1] = -b, m[2] = 0.0;
    m[3] = -c, m[4] = a, m[5] = 0.0;
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
    m[2] += cx;
    m[5] += cy;
}

/* F_t.affine / F_t.rotate with nearest interpolation and no fill: out pixel (x, y) samples
 * the source at the grid point of its centre mapped by the matrix, zero outside. */
static void warp(unsigned char *img, int c, int h, int w, const double m[6], float *scratch)
{
    const float th[6] = {(float)m[0], (float)m[1], (float)m[2],
                         (float)m[3], (float)m[4], (float)m[5]};
    const float half_w = (float)(0.5 * w), half_h = (float)(0.5 * h);
    /* theta^T / [w / 2, h / 2]: column j of the 3x2 product scaled by its axis */
    const float r00 = th[0] / half_w, r10 = th[1] / half_w, r20 = th[2] / half_w;
    const float r01 = th[3] / half_h, r11 = th[4] / half_h, r21 = th[5] / half_h;
    const size_t plane = (size_t)h * w;
    unsigned char *tmp = (unsigned char *)scratch;
    memcpy(tmp, img, (size_t)c * plane);
    for (int y = 0; y < h; y++) {
        const float gy0 = -(float)h * 0.5f + 0.5f + (float)y;
        for (int x = 0; x < w; x++) {
            const float gx0 = -(float)w * 0.5f + 0.5f + (float)x;
            /* the product [x y 1] theta^T as a GEMM's k loop of fused multiply-adds */
            const float gx = fmaf(gy0, r10, gx0 * r00) + r20;
            const float gy = fmaf(gy0, r11, gx0 * r01) + r21;
            const float sx = (gx + 1.0f) * half_w, sy = (gy + 1.0f) * half_h;
            const int ix = (int)nearbyintf(sx - 0.5f), iy = (int)nearbyintf(sy - 0.5f);
            const int inside = ix >= 0 && ix < w && iy >= 0 && iy < h;
            for (int ch = 0; ch < c; ch++)
                img[(size_t)ch * plane + (size_t)y * w + x] =
                    inside ? tmp[(size_t)ch * plane + (size_t)iy * w + ix] : 0;
        }
    }
}

void dtnn__aa_apply(aa_op op, double magnitude, unsigned char *img, int c, int h, int w,
                    float *tmp)
{
    const size_t plane = (size_t)h * w;
    double m[6];
    switch (op) {
    case AA_SHEAR_X:
        inverse_affine(-w * 0.5, -h * 0.5, 0.0, 0.0, 0.0, atan(magnitude) * rad_to_deg, 0.0, m);
        warp(img, c, h, w, m, tmp);
        return;
    case AA_SHEAR_Y:
        inverse_affine(-w * 0.5, -h * 0.5, 0.0, 0.0, 0.0, 0.0, atan(magnitude) * rad_to_deg, m);
        warp(img, c, h, w, m, tmp);
        return;
    case AA_TRANSLATE_X:
        inverse_affine(0.0, 0.0, 0.0, (double)(int)magnitude, 0.0, 0.0, 0.0, m);
        warp(img, c, h, w, m, tmp);
        return;
    case AA_TRANSLATE_Y:
        inverse_affine(0.0, 0.0, 0.0, 0.0, (double)(int)magnitude, 0.0, 0.0, m);
        warp(img, c, h, w, m, tmp);
        return;
    case AA_ROTATE:
        inverse_affine(0.0, 0.0, -magnitude, 0.0, 0.0, 0.0, 0.0, m);
        warp(img, c, h, w, m, tmp);
        return;
    case AA_BRIGHTNESS:
        blend(img, c, plane, NULL, 0, 0.0f, 1.0 + magnitude);
        return;
    case AA_COLOR:
        /* a single channel is its own grayscale: torchvision returns it as it is */
        if (c == 3) {
            grayscale(img, plane, tmp);
            blend(img, c, plane, tmp, 1, 0.0f, 1.0 + magnitude);
        }
        return;
    case AA_CONTRAST: {
        /* torch.mean in float32: the sum of 8-bit values is exact below 2^24 (images up to
         * 65793 pixels, 256 x 256), then one division */
        double sum = 0.0;
        if (c == 3) {
            grayscale(img, plane, tmp);
            for (size_t j = 0; j < plane; j++)
                sum += tmp[j];
        } else {
            for (size_t j = 0; j < (size_t)c * plane; j++)
                sum += img[j];
        }
        const float mean = (float)sum / (float)(c == 3 ? plane : (size_t)c * plane);
        blend(img, c, plane, NULL, 0, mean, 1.0 + magnitude);
        return;
    }
    case AA_SHARPNESS:
        if (h > 2 && w > 2) {
            smooth(img, c, h, w, tmp);
            blend(img, c, plane, tmp, c, 0.0f, 1.0 + magnitude);
        }
        return;
    case AA_POSTERIZE: {
        const unsigned char mask = (unsigned char)(0xff << (8 - (int)magnitude));
        for (size_t j = 0; j < (size_t)c * plane; j++)
            img[j] &= mask;
        return;
    }
    case AA_SOLARIZE:
        for (size_t j = 0; j < (size_t)c * plane; j++)
            img[j] = (float)img[j] >= (float)magnitude ? (unsigned char)(255 - img[j]) : img[j];
        return;
    case AA_AUTOCONTRAST:
        autocontrast(img, c, plane);
        return;
    case AA_EQUALIZE:
        equalize(img, c, plane);
        return;
    default:
        return;
    }
}

/* torch.randint(n, (1,)) in the sample's stream. */
static int draw_below(dtnn_rng *r, int n)
{
    return (int)dtnn__rng_below(r, (uint64_t)n);
}

void dtnn__trivial_augment(dtnn_rng *r, unsigned char *img, int c, int h, int w, float *tmp)
{
    const aa_op op = (aa_op)draw_below(r, AA_OPS);
    const int has_bins = op != AA_IDENTITY && op != AA_AUTOCONTRAST && op != AA_EQUALIZE;
    double magnitude = has_bins ? dtnn__aa_magnitude(op, draw_below(r, AA_BINS), 1, h, w) : 0.0;
    if (dtnn__aa_signed(op) && draw_below(r, 2))
        magnitude = -magnitude;
    dtnn__aa_apply(op, magnitude, img, c, h, w, tmp);
}

void dtnn__rand_augment(dtnn_rng *r, int num_ops, int bin, unsigned char *img, int c, int h,
                        int w, float *tmp)
{
    for (int k = 0; k < num_ops; k++) {
        const aa_op op = (aa_op)draw_below(r, AA_OPS);
        double magnitude = dtnn__aa_magnitude(op, bin, 0, h, w);
        if (dtnn__aa_signed(op) && draw_below(r, 2))
            magnitude = -magnitude;
        dtnn__aa_apply(op, magnitude, img, c, h, w, tmp);
    }
}
