/*
 * batchnorm.c — batch normalisation over [n, C, hw] as torch.nn.BatchNorm2d/1d, in the phases
 * backend.h describes, and the per-channel sums convolutions need for their bias gradient:
 * training normalises with the batch mean and biased variance and updates the running
 * estimates with the unbiased variance; evaluation uses the running estimates. A ReLU that
 * follows the layer may be fused in (the model decides: model_plan.c, plan_fusion): the forward
 * pass clamps its output, and backward takes the gradient at the ReLU's output and passes it
 * where that output is positive, exactly as the ReLU layer would have.
 *
 * Per-channel sums are accumulated in double, one channel per thread, so results do not
 * depend on the thread count. Within a channel, value j goes to lane j % LANES of LANES
 * double accumulators, added up at the end: the same fixed order on every run, and a loop
 * the compiler vectorises, where one double accumulator was a chain of dependent adds, each
 * waiting for the one before (measurements: docs/perf-notes.md).
 *
 * The statistics take one pass over x: sums of d = x - shift and of d^2, shift = the running
 * mean (the same on every rank, so the sums add over ranks), and var = E[d^2] - E[d]^2. In
 * double, with float data, that loses about 1e-16 (E[d]^2 / var) of the variance: nothing
 * unless the batch mean is 1e4 standard deviations from the running one. Batch norm reads
 * memory-bound 4 MiB tensors in ResNet-20's first stage, where a second pass over x for the
 * statistics is a second trip to memory (measurements: docs/perf-notes.md).
 * Backward: dx = gamma * invstd / m * (m * dy - sum(dy) - xhat * sum(dy * xhat)), m = the
 * number of values per channel (over all ranks when synchronised).
 */
#include <math.h>

#include "../formulas/batchnorm_formulas.h"
#include "cpu_kernels.h"

#define AT(base, i, c) ((base) + ((size_t)(i) * C + (c)) * hw)

enum { LANES = 8 };

static double lanes_total(const double acc[LANES])
{
    double s = 0.0;
    for (int l = 0; l < LANES; l++)
        s += acc[l];
    return s;
}

/* The same rows of the next image: a channel's row of one image is one 4 KiB page (a CIFAR
 * 32x32 plane) and the next image's is 64 KiB further on (C planes of hw), where the hardware
 * prefetchers, which stay within a page, do not follow; every row started with stalls on
 * memory. So the vector loops ask for the next image's rows one line per 8 values as they
 * go, spread over the row: asking for a whole row at once ahead of the work made batch norm
 * slower (measurements: docs/perf-notes.md). Streams the pass reads or writes from memory,
 * NULL where absent. */
enum { AHEAD = 4 };
typedef struct {
    const float *row[AHEAD];
} ahead;

/* The rows one image after the given rows of image i (nothing after the last image) */
static ahead rows_after(int i, int n, size_t image, const float *a, const float *b,
                        const float *c, const float *d)
{
    const float *rows[AHEAD] = {a, b, c, d};
    ahead h;
    for (int k = 0; k < AHEAD; k++)
        h.row[k] = i + 1 < n && rows[k] ? rows[k] + image : NULL;
    return h;
}

/* A fused ReLU as backward sees it: the forward's per-channel scale and shift. */
typedef struct {
    float scale, shift;
} bn_relu;

/* The gradient that reaches the normalisation: dy, or with a fused ReLU dy where the value
 * before the clamp was positive: read as the output oc > 0 after a residual add, else
 * recomputed as fmaf(d, scale, shift), d = x - mean (the forward computes it so too). */
static inline float passed(float dy, float d, const bn_relu *r, const float *oc, int j)
{
    return bn_passed(dy, d, oc != NULL, oc ? oc[j] : 0.0f, r != NULL, r ? r->scale : 0.0f,
                     r ? r->shift : 0.0f);
}

/* Row kernels: one row of hw values of one channel, sums added into LANES double lanes (value
 * j into lane j % LANES). Each is a vector part (the *_vec functions: the whole groups of 8
 * values, returning where it stopped) and the scalar loop for the rest. With AVX2 the vector
 * parts are written by hand: GCC 12 vectorised these loops only in part (scalar
 * float-to-double conversions, and no select for the ReLU, since a compare may trap), and
 * batch norm ran far below the memory's speed (measurements: docs/perf-notes.md). Elsewhere
 * they do nothing. */
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

static inline void fetch_ahead(const ahead *h, int j)
{
    for (int k = 0; k < AHEAD; k++)
        if (h->row[k])
            __builtin_prefetch(h->row[k] + j);
}

#define LO(v) _mm256_cvtps_pd(_mm256_castps256_ps128(v))
#define HI(v) _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))

static int moments_vec(int hw, const float *xc, double s, double *a, double *b, const ahead *h)
{
    if (hw < LANES)
        return 0; /* no group of 8: see grad_sums_vec */
    __m256d a0 = _mm256_loadu_pd(a), a1 = _mm256_loadu_pd(a + 4);
    __m256d b0 = _mm256_loadu_pd(b), b1 = _mm256_loadu_pd(b + 4);
    const __m256d sv = _mm256_set1_pd(s);
    int j = 0;
    for (; j + LANES <= hw; j += LANES) {
        fetch_ahead(h, j);
        const __m256 x = _mm256_loadu_ps(xc + j);
        const __m256d d0 = _mm256_sub_pd(LO(x), sv), d1 = _mm256_sub_pd(HI(x), sv);
        a0 = _mm256_add_pd(a0, d0);
        a1 = _mm256_add_pd(a1, d1);
        b0 = _mm256_fmadd_pd(d0, d0, b0);
        b1 = _mm256_fmadd_pd(d1, d1, b1);
    }
    _mm256_storeu_pd(a, a0), _mm256_storeu_pd(a + 4, a1);
    _mm256_storeu_pd(b, b0), _mm256_storeu_pd(b + 4, b1);
    return j;
}

/* max(0, v) keeps a NaN (the instruction returns its second operand when either is NaN), as
 * ReLU's x < 0 test */
static int normalise_vec(int hw, const float *xc, float mean, float scale, float shift,
                         int relu, const float *rc, float *yc, const ahead *h)
{
    const __m256 m = _mm256_set1_ps(mean), k = _mm256_set1_ps(scale);
    const __m256 t = _mm256_set1_ps(shift), zero = _mm256_setzero_ps();
    int j = 0;
    for (; j + 8 <= hw; j += 8) {
        fetch_ahead(h, j);
        __m256 v = _mm256_fmadd_ps(_mm256_sub_ps(_mm256_loadu_ps(xc + j), m), k, t);
        if (rc)
            v = _mm256_add_ps(v, _mm256_loadu_ps(rc + j));
        _mm256_storeu_ps(yc + j, relu ? _mm256_max_ps(zero, v) : v);
    }
    return j;
}

/* passed() for 8 values, d = x - mean */
static inline __m256 passed8(const float *dyc, int j, __m256 d, const bn_relu *r,
                             const float *oc)
{
    const __m256 g = _mm256_loadu_ps(dyc + j);
    if (oc)
        return _mm256_and_ps(
            _mm256_cmp_ps(_mm256_loadu_ps(oc + j), _mm256_setzero_ps(), _CMP_GT_OQ), g);
    if (!r)
        return g;
    const __m256 v = _mm256_fmadd_ps(d, _mm256_set1_ps(r->scale), _mm256_set1_ps(r->shift));
    return _mm256_and_ps(_mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GT_OQ), g);
}

static int grad_sums_vec(int hw, const float *xc, const float *dyc, const bn_relu *r,
                         const float *oc, float mean, double *a, double *b, float *dresc,
                         int dres_accumulate, const ahead *h)
{
    /* Rows shorter than a group (EfficientNet's 2x2 and 1x1 planes: a row per image and
     * channel) would only move the lanes through vector registers: stores of 32 bytes that
     * the scalar loop then reads 8 at a time, and the other way round on the next row, each
     * a failed store-to-load forward. Batch norm on 1536 x 1 x 1 planes (batch 32) took 2.7
     * ms, as long as a 3x3 convolution (measurements: docs/perf-notes.md). */
    if (hw < LANES)
        return 0;
    __m256d a0 = _mm256_loadu_pd(a), a1 = _mm256_loadu_pd(a + 4);
    __m256d b0 = _mm256_loadu_pd(b), b1 = _mm256_loadu_pd(b + 4);
    const __m256 m = _mm256_set1_ps(mean);
    int j = 0;
    for (; j + LANES <= hw; j += LANES) {
        fetch_ahead(h, j);
        const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(xc + j), m);
        const __m256 g = passed8(dyc, j, d, r, oc);
        if (dresc)
            _mm256_storeu_ps(dresc + j, dres_accumulate
                                            ? _mm256_add_ps(_mm256_loadu_ps(dresc + j), g)
                                            : g);
        const __m256d g0 = LO(g), g1 = HI(g);
        a0 = _mm256_add_pd(a0, g0);
        a1 = _mm256_add_pd(a1, g1);
        b0 = _mm256_fmadd_pd(g0, LO(d), b0);
        b1 = _mm256_fmadd_pd(g1, HI(d), b1);
    }
    _mm256_storeu_pd(a, a0), _mm256_storeu_pd(a + 4, a1);
    _mm256_storeu_pd(b, b0), _mm256_storeu_pd(b + 4, b1);
    return j;
}

static int grad_apply_vec(int hw, const float *xc, const float *dyc, const bn_relu *r,
                          const float *oc, float mean, float k, float xs, float off,
                          int accumulate, float *dxc, const ahead *h)
{
    const __m256 m = _mm256_set1_ps(mean), kv = _mm256_set1_ps(k);
    const __m256 xsv = _mm256_set1_ps(xs), offv = _mm256_set1_ps(off);
    int j = 0;
    for (; j + 8 <= hw; j += 8) {
        fetch_ahead(h, j);
        const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(xc + j), m);
        __m256 v = _mm256_fmadd_ps(passed8(dyc, j, d, r, oc), kv,
                                   _mm256_fmadd_ps(d, xsv, offv));
        if (accumulate)
            v = _mm256_add_ps(_mm256_loadu_ps(dxc + j), v);
        _mm256_storeu_ps(dxc + j, v);
    }
    return j;
}

#else

static int moments_vec(int hw, const float *xc, double s, double *a, double *b, const ahead *h)
{
    (void)hw, (void)xc, (void)s, (void)a, (void)b, (void)h;
    return 0;
}

static int normalise_vec(int hw, const float *xc, float mean, float scale, float shift,
                         int relu, const float *rc, float *yc, const ahead *h)
{
    (void)hw, (void)xc, (void)mean, (void)scale, (void)shift, (void)relu, (void)rc, (void)yc;
    (void)h;
    return 0;
}

static int grad_sums_vec(int hw, const float *xc, const float *dyc, const bn_relu *r,
                         const float *oc, float mean, double *a, double *b, float *dresc,
                         int dres_accumulate, const ahead *h)
{
    (void)hw, (void)xc, (void)dyc, (void)r, (void)oc, (void)mean, (void)a, (void)b;
    (void)dresc, (void)dres_accumulate, (void)h;
    return 0;
}

static int grad_apply_vec(int hw, const float *xc, const float *dyc, const bn_relu *r,
                          const float *oc, float mean, float k, float xs, float off,
                          int accumulate, float *dxc, const ahead *h)
{
    (void)hw, (void)xc, (void)dyc, (void)r, (void)oc, (void)mean, (void)k, (void)xs;
    (void)off, (void)accumulate, (void)dxc, (void)h;
    return 0;
}

#endif

/* sum of d = x - s and of d^2 */
static void moments_row(int hw, const float *xc, double s, double *a, double *b,
                        const ahead *h)
{
    for (int j = moments_vec(hw, xc, s, a, b, h); j < hw; j++) {
        const double d = xc[j] - s;
        a[j % LANES] += d;
        b[j % LANES] += d * d;
    }
}

/* y = (x - mean) * scale + shift (one rounding, as the vector part), + the residual row rc,
 * clamped at 0 with a fused ReLU (a NaN stays NaN): the unfused add's and ReLU's arithmetic */
static void normalise_row(int hw, const float *xc, float mean, float scale, float shift,
                          int relu, const float *rc, float *yc, const ahead *h)
{
    int j = normalise_vec(hw, xc, mean, scale, shift, relu, rc, yc, h);
    /* Without a residual the loop names none: a vectorised `rc ? rc[j] : 0` became a masked
     * load from NULL, which AMD's cores serve by a microcode assist (see grad_apply_row). */
    if (!rc)
        for (; j < hw; j++)
            yc[j] = bn_normalise(xc[j], mean, scale, shift, 0, 0.0f, relu);
    for (; j < hw; j++)
        yc[j] = bn_normalise(xc[j], mean, scale, shift, 1, rc[j], relu);
}

/* sum of g and of g (x - mean), g = the passed gradient, which is also the residual's
 * gradient (dresc, when given) */
static void grad_sums_row(int hw, const float *xc, const float *dyc, const bn_relu *r,
                          const float *oc, float mean, double *a, double *b, float *dresc,
                          int dres_accumulate, const ahead *h)
{
    int j = grad_sums_vec(hw, xc, dyc, r, oc, mean, a, b, dresc, dres_accumulate, h);
    if (!oc && !dresc)
        for (; j < hw; j++) { /* (see grad_apply_row) */
            const float d = xc[j] - mean;
            const double g = passed(dyc[j], d, r, NULL, j);
            a[j % LANES] += g;
            b[j % LANES] += g * d;
        }
    for (; j < hw; j++) {
        const float d = xc[j] - mean, gf = passed(dyc[j], d, r, oc, j);
        const double g = gf;
        if (dresc)
            dresc[j] = dres_accumulate ? dresc[j] + gf : gf;
        a[j % LANES] += g;
        b[j % LANES] += g * d;
    }
}

/* dx (+)= g k + ((x - mean) xs + off) */
static void grad_apply_row(int hw, const float *xc, const float *dyc, const bn_relu *r,
                           const float *oc, float mean, float k, float xs, float off,
                           int accumulate, float *dxc, const ahead *h)
{
    const bn_grad_consts c = {k, xs, off};
    int j = grad_apply_vec(hw, xc, dyc, r, oc, mean, k, xs, off, accumulate, dxc, h);
    /* Rows shorter than a group run here alone (EfficientNet's 2x2 planes). Where the ReLU
     * mask is not read the loop names no `oc`: GCC vectorised `oc ? oc[j] : 0` into a masked
     * load, which from a NULL row faults in its masked-off lanes, and AMD's cores serve that
     * by a microcode assist: two thirds of this function's time on 960 x 2 x 2 planes. */
    if (!oc)
        for (; j < hw; j++) {
            const float d = xc[j] - mean;
            const float v = bn_grad_value(passed(dyc[j], d, r, NULL, j), d, c);
            dxc[j] = accumulate ? dxc[j] + v : v;
        }
    for (; j < hw; j++) {
        const float d = xc[j] - mean;
        const float v = bn_grad_value(passed(dyc[j], d, r, oc, j), d, c);
        dxc[j] = accumulate ? dxc[j] + v : v;
    }
}

/* Row i of channel c of an epilogue's residual, output and residual gradient, or NULL; and
 * the recomputed ReLU mask's constants when that is how the mask is found. */
#define EP_ROW(ep, field, i) ((ep) && (ep)->field ? AT((ep)->field, i, c) : NULL)
static const float *mask_row(const bn_epilogue *ep, int C, int hw, int i, int c)
{
    return ep && ep->res && ep->relu ? AT(ep->out, i, c) : NULL;
}

static const bn_relu *recomputed_mask(const bn_epilogue *ep, const bn_relu *r)
{
    return ep && ep->relu && !ep->res ? r : NULL;
}

void cpu_bias_grad(int n, int C, int hw, const float *dy, float *db)
{
#pragma omp parallel for schedule(guided)
    for (int c = 0; c < C; c++) {
        double acc[LANES] = {0};
        for (int i = 0; i < n; i++) {
            const float *dyc = AT(dy, i, c);
            int j = 0;
            for (; j + LANES <= hw; j += LANES)
                for (int l = 0; l < LANES; l++)
                    acc[l] += dyc[j + l];
            for (; j < hw; j++)
                acc[j % LANES] += dyc[j];
        }
        db[c] += (float)lanes_total(acc);
    }
}

/* The per-channel steps. The phased entry points run one step over all channels (synchronised
 * batch norm sums the ranks' statistics between them); the one-process ones run both steps of
 * a channel back to back, while its values are still in L2 (a CIFAR channel is 256 KiB at
 * batch 64): one read of x from memory fewer forward, one of x and dy backward, the same
 * arithmetic in the same order. */
static void channel_moments(int n, int C, int hw, const float *x, int c, double shift,
                            double *sum, double *sumsq)
{
    double a[LANES] = {0}, b[LANES] = {0};
    const size_t image = (size_t)C * hw;
    for (int i = 0; i < n; i++) {
        const ahead h = rows_after(i, n, image, AT(x, i, c), NULL, NULL, NULL);
        moments_row(hw, AT(x, i, c), shift, a, b, &h);
    }
    *sum = lanes_total(a);
    *sumsq = lanes_total(b);
}

static void channel_apply_train(int n, int C, int hw, const float *x, int c, const float *gamma,
                                const float *beta, double sum, double sumsq, double count,
                                float eps, float momentum, const bn_epilogue *ep, float *y,
                                float *save_mean, float *save_invstd, float *running_mean,
                                float *running_var)
{
    bn_finish_channel(sum, sumsq, count, eps, momentum, &save_mean[c], &save_invstd[c],
                      &running_mean[c], &running_var[c]);
    const float fmean = save_mean[c], scale = gamma[c] * save_invstd[c];
    const size_t image = (size_t)C * hw;
    for (int i = 0; i < n; i++) {
        const float *res = EP_ROW(ep, res, i);
        const ahead h = rows_after(i, n, image, AT(x, i, c), res, AT(y, i, c), NULL);
        normalise_row(hw, AT(x, i, c), fmean, scale, beta[c], ep && ep->relu, res, AT(y, i, c),
                      &h);
    }
}

/* sum(dy) and sum(dy * xhat) = invstd sum(dy (x - mean)), in double */
static void channel_grad_sums(int n, int C, int hw, const float *x, const float *dy, int c,
                              const float *gamma, const float *beta, const bn_epilogue *ep,
                              const float *save_mean, const float *save_invstd, double *sdy,
                              double *sdyx)
{
    const bn_relu r = {gamma[c] * save_invstd[c], beta[c]};
    double a[LANES] = {0}, b[LANES] = {0};
    const size_t image = (size_t)C * hw;
    for (int i = 0; i < n; i++) {
        const float *mask = mask_row(ep, C, hw, i, c);
        float *dres = EP_ROW(ep, dres, i);
        const ahead h = rows_after(i, n, image, AT(x, i, c), AT(dy, i, c), mask, dres);
        grad_sums_row(hw, AT(x, i, c), AT(dy, i, c), recomputed_mask(ep, &r), mask,
                      save_mean[c], a, b, dres, ep && ep->dres_accumulate, &h);
    }
    *sdy = lanes_total(a);
    *sdyx = save_invstd[c] * lanes_total(b);
}

/* dx = k (dy - mdy - xhat mdyx) = dy k + ((x - mean) xs + off), the per-channel constants
 * xs = -k invstd mdyx and off = -k mdy folded in double */
static void channel_grad_apply(int n, int C, int hw, const float *x, const float *dy, int c,
                               const float *gamma, const float *beta, const bn_epilogue *ep,
                               const float *save_mean, const float *save_invstd, double sdy,
                               double sdyx, double count, float *dx, int accumulate)
{
    const bn_relu r = {gamma[c] * save_invstd[c], beta[c]};
    const bn_grad_consts k = bn_grad_constants(gamma[c], save_invstd[c], sdy, sdyx, count);
    const size_t image = (size_t)C * hw;
    for (int i = 0; i < n; i++) {
        const float *mask = mask_row(ep, C, hw, i, c);
        const ahead h = rows_after(i, n, image, AT(x, i, c), AT(dy, i, c), mask, AT(dx, i, c));
        grad_apply_row(hw, AT(x, i, c), AT(dy, i, c), recomputed_mask(ep, &r), mask,
                       save_mean[c], k.k, k.xs, k.off, accumulate, AT(dx, i, c), &h);
    }
}

void cpu_bn_moments(int n, int C, int hw, const float *x, const float *shift, double *sum,
                    double *sumsq)
{
#pragma omp parallel for schedule(guided)
    for (int c = 0; c < C; c++)
        channel_moments(n, C, hw, x, c, shift[c], &sum[c], &sumsq[c]);
}

void cpu_bn_apply_train(int n, int C, int hw, const float *x, const float *gamma,
                        const float *beta, const double *sum, const double *sumsq, double count,
                        float eps, float momentum, const bn_epilogue *ep, float *y,
                        float *save_mean, float *save_invstd, float *running_mean,
                        float *running_var)
{
#pragma omp parallel for schedule(guided)
    for (int c = 0; c < C; c++)
        channel_apply_train(n, C, hw, x, c, gamma, beta, sum[c], sumsq[c], count, eps, momentum,
                            ep, y, save_mean, save_invstd, running_mean, running_var);
}

void cpu_bn_train_forward(int n, int C, int hw, const float *x, const float *gamma,
                          const float *beta, float eps, float momentum,
                          const bn_epilogue *ep, float *y, float *save_mean, float *save_invstd,
                          float *running_mean, float *running_var)
{
    const double count = (double)n * hw;
#pragma omp parallel for schedule(guided)
    for (int c = 0; c < C; c++) {
        double sum, sumsq;
        channel_moments(n, C, hw, x, c, running_mean[c], &sum, &sumsq);
        channel_apply_train(n, C, hw, x, c, gamma, beta, sum, sumsq, count, eps, momentum, ep,
                            y, save_mean, save_invstd, running_mean, running_var);
    }
}

void cpu_bn_forward_eval(int n, int C, int hw, const float *x, const float *gamma,
                         const float *beta, const float *running_mean, const float *running_var,
                         float eps, const bn_epilogue *ep, float *y)
{
#pragma omp parallel for schedule(guided)
    for (int c = 0; c < C; c++) {
        const float scale = bn_eval_scale(gamma[c], running_var[c], eps);
        const float shift = beta[c] - running_mean[c] * scale;
        for (int i = 0; i < n; i++) {
            const float *res = EP_ROW(ep, res, i);
            const ahead h = rows_after(i, n, (size_t)C * hw, AT(x, i, c), res, AT(y, i, c),
                                       NULL);
            normalise_row(hw, AT(x, i, c), 0.0f, scale, shift, ep && ep->relu, res,
                          AT(y, i, c), &h);
        }
    }
}

void cpu_bn_backward_eval(int n, int C, int hw, const float *dy, const float *gamma,
                          const float *running_var, float eps, float *dx, int accumulate)
{
#pragma omp parallel for schedule(guided)
    for (int c = 0; c < C; c++) {
        const float scale = bn_eval_scale(gamma[c], running_var[c], eps);
        for (int i = 0; i < n; i++) {
            const float *g = AT(dy, i, c);
            float *d = AT(dx, i, c);
            if (accumulate)
                for (int j = 0; j < hw; j++)
                    d[j] += g[j] * scale;
            else
                for (int j = 0; j < hw; j++)
                    d[j] = g[j] * scale;
        }
    }
}

void cpu_bn_backward_sums(int n, int C, int hw, const float *x, const float *dy,
                          const float *gamma, const float *beta, const bn_epilogue *ep,
                          const float *save_mean, const float *save_invstd, double *sdy,
                          double *sdyx)
{
#pragma omp parallel for schedule(guided)
    for (int c = 0; c < C; c++)
        channel_grad_sums(n, C, hw, x, dy, c, gamma, beta, ep, save_mean, save_invstd, &sdy[c],
                          &sdyx[c]);
}

void cpu_bn_backward_apply(int n, int C, int hw, const float *x, const float *dy,
                           const float *gamma, const float *beta, const bn_epilogue *ep,
                           const float *save_mean, const float *save_invstd, const double *sdy,
                           const double *sdyx, double count, float *dx, int accumulate)
{
#pragma omp parallel for schedule(guided)
    for (int c = 0; c < C; c++)
        channel_grad_apply(n, C, hw, x, dy, c, gamma, beta, ep, save_mean, save_invstd, sdy[c],
                           sdyx[c], count, dx, accumulate);
}

void cpu_bn_train_backward(int n, int C, int hw, const float *x, const float *dy,
                           const float *gamma, const float *beta, const bn_epilogue *ep,
                           const float *save_mean, const float *save_invstd, double *sdy,
                           double *sdyx, float *dx, int accumulate)
{
    const double count = (double)n * hw;
#pragma omp parallel for schedule(guided)
    for (int c = 0; c < C; c++) {
        channel_grad_sums(n, C, hw, x, dy, c, gamma, beta, ep, save_mean, save_invstd, &sdy[c],
                          &sdyx[c]);
        if (dx)
            channel_grad_apply(n, C, hw, x, dy, c, gamma, beta, ep, save_mean, save_invstd,
                               sdy[c], sdyx[c], count, dx, accumulate);
    }
}
