/*
 * mix.c — MixUp and CutMix over a batch (mix.h): the per-step draws and the mixing of the images.
 * The labels' side is the loss's (model/loss.c: a target of two labels and a weight), which is
 * why nothing here builds one-hot vectors.
 */
#include <math.h>
#include <string.h>

#include "data/mix.h"
#include "data/transform.h"

/* Keeps the mixing draws apart from the per-sample augmentation streams of the same seed. */
#define MIX_DOMAIN 0x6d69787570637574ull

/* Uniform in (0, 1] with 53 bits, so its logarithm is finite. */
static double uniform_open0(dtnn_rng *r)
{
    return ((double)(dtnn__rng_next(r) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

/* log of a Gamma(a, 1) draw: Marsaglia and Tsang's squeeze for a >= 1; below 1, Gamma(a + 1)
 * times U^(1/a), added in logarithms. */
static double log_gamma_draw(dtnn_rng *r, double a)
{
    if (a < 1.0)
        return log_gamma_draw(r, a + 1.0) + log(uniform_open0(r)) / a;
    const double d = a - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = dtnn__rng_normal(r);
            v = 1.0 + c * x;
        } while (v <= 0.0);
        v = v * v * v;
        const double u = uniform_open0(r), x2 = x * x;
        if (u < 1.0 - 0.0331 * x2 * x2 || log(u) < 0.5 * x2 + d * (1.0 - v + log(v)))
            return log(d) + log(v);
    }
}

double dtnn__rng_beta(dtnn_rng *r, double a, double b)
{
    const double lx = log_gamma_draw(r, a), ly = log_gamma_draw(r, b);
    /* x / (x + y) = 1 / (1 + y / x) */
    return 1.0 / (1.0 + exp(ly - lx));
}

void dtnn__mix_draw(float mixup_alpha, float cutmix_alpha, uint64_t seed, int64_t epoch,
                    int64_t step, int h, int w, dtnn_batch_mix *mix)
{
    memset(mix, 0, sizeof *mix);
    mix->lam = 1.0f;
    if (!(mixup_alpha > 0.0f) && !(cutmix_alpha > 0.0f))
        return;
    dtnn_rng r;
    dtnn__augment_rng(&r, seed ^ MIX_DOMAIN, epoch, step);
    int cutmix = cutmix_alpha > 0.0f;
    if (mixup_alpha > 0.0f && cutmix_alpha > 0.0f)
        cutmix = dtnn__rng_uniform(&r) >= 0.5f;
    const double alpha = cutmix ? cutmix_alpha : mixup_alpha;
    /* torch.distributions.Beta over float32 tensors draws a float32. */
    mix->draw = (float)dtnn__rng_beta(&r, alpha, alpha);
    if (!cutmix) {
        mix->kind = DTNN_MIX_MIXUP;
        mix->lam = (float)mix->draw;
        return;
    }
    /* torchvision.transforms.v2.CutMix.make_params, in its order and its integer rounding. */
    mix->kind = DTNN_MIX_CUTMIX;
    mix->cx = (int)dtnn__rng_below(&r, (uint64_t)w);
    mix->cy = (int)dtnn__rng_below(&r, (uint64_t)h);
    const double half = 0.5 * sqrt(1.0 - mix->draw);
    const int rw = (int)(half * w), rh = (int)(half * h);
    mix->box[0] = mix->cx - rw > 0 ? mix->cx - rw : 0;
    mix->box[1] = mix->cy - rh > 0 ? mix->cy - rh : 0;
    mix->box[2] = mix->cx + rw < w ? mix->cx + rw : w;
    mix->box[3] = mix->cy + rh < h ? mix->cy + rh : h;
    const double area = (double)(mix->box[2] - mix->box[0]) * (mix->box[3] - mix->box[1]);
    mix->lam = (float)(1.0 - area / ((double)w * h));
}

void dtnn__mix_apply(const dtnn_batch_mix *mix, float *x, const float *partner0, int n, int c,
                     int h, int w)
{
    if (mix->kind == DTNN_MIX_NONE)
        return;
    const size_t plane = (size_t)h * w, sample = (size_t)c * plane;
    /* PyTorch multiplies a float32 tensor by a Python float rounded to float32 first. */
    const float own = (float)mix->draw, other_w = (float)(1.0 - mix->draw);
    /* From the last sample down, so that x_{i-1} is still unmixed when sample i reads it. */
    for (int i = n - 1; i >= 0; i--) {
        float *xi = x + (size_t)i * sample;
        const float *other = i ? xi - sample : partner0;
        if (mix->kind == DTNN_MIX_MIXUP) {
            for (size_t j = 0; j < sample; j++) {
                const float a = other[j] * other_w;
                const float b = xi[j] * own;
                xi[j] = a + b;
            }
            continue;
        }
        const int x0 = mix->box[0], y0 = mix->box[1], x1 = mix->box[2], y1 = mix->box[3];
        for (int ch = 0; ch < c; ch++)
            for (int y = y0; y < y1; y++) {
                const size_t at = (size_t)ch * plane + (size_t)y * w + x0;
                memcpy(xi + at, other + at, sizeof(float) * (size_t)(x1 - x0));
            }
    }
}
