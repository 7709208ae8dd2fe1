/*
 * test_activations.c — SiLU and GELU on the CPU kernel set that runs (the avx2 and avx512 sets
 * compute e^x and 1 + erf eight values at a time, cpu/activation.c's exp8 and one_plus_erf8;
 * the generic set calls expf and erff) against float64, over a sweep of values and the
 * extremes: 0 and -0, tiny values, |x| where e^-x leaves float's range, infinities and NaN.
 *
 * The bound, from the rounding: e^-x within 2 ulp of the exact value (expf or exp8), 1 + e^-x
 * and the division half an ulp each, so the value is within 3 ulp (3.6e-7 relative) plus
 * float's spacing near the smallest normal where the results underflow (x below -87: the exact
 * value is below 1e-35 in magnitude). The slope dy s (1 + x (1 - s)) is PyTorch's formula; its
 * 1 - s loses s's relative error against 1, so the slope is within 3.6e-7 relative plus
 * |x| s 1.2e-7 absolute (|x| times an ulp of s at 1) plus the same underflow allowance.
 *
 * GELU, 0.5 x (1 + erf(w)) with w = x / sqrt 2 rounded: erfc's sensitivity to w is 2 |w|, so
 * w's half-ulp rounding moves 1 + erf(w) by 6e-8 w^2 relative, and e^-w^2's exponent rounds by
 * as much again; with erfc's own error (NR's fit, 1.2e-7; erff's few ulp) and the products'
 * roundings the value is within (5e-7 + 2e-7 w^2) relative. The generic set's 1 + erff(w)
 * cancels for w below -1 (an ulp of 1, 6e-8, absolute), hence 6e-8 |x| absolute beside it.
 * The slope cdf + x pdf crosses 0 near x = -0.75, where the sum cancels: each term's relative
 * bound times its size, absolute, plus that 6e-8.
 */
#include <math.h>
#include <stdlib.h>

#include "testutil.h"

#include "backend/backend.h"

enum { N = 4096 };
static const double PI = 3.14159265358979323846;

static double silu64(double x) { return x / (1.0 + exp(-x)); }

static double silu_grad64(double x, double dy)
{
    const double s = 1.0 / (1.0 + exp(-x));
    return dy * s * (1.0 + x * (1.0 - s));
}

static double gelu64(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }

static double gelu_grad64(double x, double dy)
{
    return dy * (0.5 * erfc(-x / sqrt(2.0)) + x * exp(-0.5 * x * x) / sqrt(2.0 * PI));
}

/* Both float results equal (NaN included), or within the bound of the file's comment. */
static int within(double got, double want, double extra)
{
    if (isnan(want) || isinf(want))
        return isnan(want) ? isnan(got) : got == want;
    return fabs(got - want) <= 3.6e-7 * fabs(want) + extra + 1e-35;
}

int main(void)
{
    dtnn_error err = {0};
    dtnn_backend *be = dtnn__backend_create("cpu", 1, &err);
    CHECK(be != NULL);
    if (!be)
        return test_finish("test_activations");
    float *x = be_alloc(be, sizeof(float) * N), *y = be_alloc(be, sizeof(float) * N);
    float *dy = be_alloc(be, sizeof(float) * N), *dx = be_alloc(be, sizeof(float) * N);
    float *hx = malloc(sizeof(float) * N), *hy = malloc(sizeof(float) * N);
    float *hdy = malloc(sizeof(float) * N), *hdx = malloc(sizeof(float) * N);
    static const float special[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 87.0f, -87.0f, 87.5f, -87.5f,
                                    88.5f, -88.5f, 89.0f, -89.0f, 100.0f, -100.0f, 1e4f, -1e4f,
                                    3.4e38f, -3.4e38f, INFINITY, -INFINITY, NAN};
    const int n_special = (int)(sizeof special / sizeof special[0]);
    for (int i = 0; i < N; i++) {
        /* the specials, then -30 .. 30 evenly: every rounding case of the polynomial's range */
        hx[i] = i < n_special ? special[i] : -30.0f + 60.0f * (float)(i - n_special) / N;
        hdy[i] = 1.0f + 0.25f * (float)(i % 7);
    }
    be_upload(be, x, hx, sizeof(float) * N);
    be_upload(be, dy, hdy, sizeof(float) * N);
    be_run(be, act_forward, ACT_SILU, 0.0f, 0.0f, N, x, y);
    be_run(be, act_backward, ACT_SILU, 0.0f, 0.0f, N, x, y, dy, dx, 0);
    be_download(be, hy, y, sizeof(float) * N);
    be_download(be, hdx, dx, sizeof(float) * N);
    int bad_y = 0, bad_dx = 0;
    double worst_y = 0.0, worst_dx = 0.0;
    for (int i = 0; i < N; i++) {
        const double xi = hx[i], want = silu64(xi);
        const double s = 1.0 / (1.0 + exp(-xi));
        const double gwant = silu_grad64(xi, hdy[i]);
        const int ok_y = within(hy[i], want, 0.0);
        const int ok_dx = isinf(xi) || within(hdx[i], gwant, fabs(hdy[i] * xi * s) * 1.2e-7);
        if (!ok_y && bad_y++ < 5)
            fprintf(stderr, "FAIL silu(%g) = %.9g, float64 %.9g\n", xi, hy[i], want);
        if (!ok_dx && bad_dx++ < 5)
            fprintf(stderr, "FAIL silu'(%g) * %g = %.9g, float64 %.9g\n", xi, hdy[i], hdx[i],
                    gwant);
        if (isfinite(want) && fabs(want) > 1e-30)
            worst_y = fmax(worst_y, fabs(hy[i] - want) / fabs(want));
        if (isfinite(gwant) && fabs(gwant) > 1e-30)
            worst_dx = fmax(worst_dx, fabs(hdx[i] - gwant) / fabs(gwant));
    }
    printf("silu on %s: %d values, worst relative error %.3g (value), %.3g (slope)\n",
           dtnn_cpu_kernels_name(), N, worst_y, worst_dx);
    CHECK(bad_y == 0);
    CHECK(bad_dx == 0);
    /* accumulate adds the same slope */
    be_run(be, act_backward, ACT_SILU, 0.0f, 0.0f, N, x, y, dy, dx, 1);
    float *twice = malloc(sizeof(float) * N);
    be_download(be, twice, dx, sizeof(float) * N);
    int bad_acc = 0;
    for (int i = 0; i < N; i++)
        bad_acc += !(isnan(hdx[i]) ? isnan(twice[i]) : twice[i] == hdx[i] + hdx[i]);
    CHECK(bad_acc == 0);

    be_run(be, act_forward, ACT_GELU, 0.0f, 0.0f, N, x, y);
    be_run(be, act_backward, ACT_GELU, 0.0f, 0.0f, N, x, y, dy, dx, 0);
    be_download(be, hy, y, sizeof(float) * N);
    be_download(be, hdx, dx, sizeof(float) * N);
    bad_y = bad_dx = 0;
    worst_y = worst_dx = 0.0;
    for (int i = 0; i < N; i++) {
        const double xi = hx[i], w2 = xi * xi / 2.0, rel = 5e-7 + 2e-7 * w2;
        const double want = gelu64(xi), gwant = gelu_grad64(xi, hdy[i]);
        const double cdf = 0.5 * erfc(-xi / sqrt(2.0));
        const double xpdf = fabs(xi) * exp(-0.5 * xi * xi) / sqrt(2.0 * PI);
        const int ok_y = isnan(want) ? isnan(hy[i])
                         : isinf(want) ? hy[i] == want
                                       : fabs(hy[i] - want) <= rel * fabs(want) +
                                                                    6e-8 * fabs(xi) + 1e-35;
        const int ok_dx = isinf(xi) || isnan(xi)
                              ? isnan(gwant) == isnan((double)hdx[i])
                              : fabs(hdx[i] - gwant) <= rel * fabs(gwant) +
                                                            fabs(hdy[i]) * (6e-8 + rel * (cdf + xpdf)) +
                                                            1e-35;
        if (!ok_y && bad_y++ < 5)
            fprintf(stderr, "FAIL gelu(%g) = %.9g, float64 %.9g\n", xi, hy[i], want);
        if (!ok_dx && bad_dx++ < 5)
            fprintf(stderr, "FAIL gelu'(%g) * %g = %.9g, float64 %.9g\n", xi, hdy[i], hdx[i],
                    gwant);
        if (isfinite(want) && fabs(want) > 1e-6)
            worst_y = fmax(worst_y, fabs(hy[i] - want) / fabs(want));
        if (isfinite(gwant) && fabs(gwant) > 1e-6)
            worst_dx = fmax(worst_dx, fabs(hdx[i] - gwant) / fabs(gwant));
    }
    printf("gelu on %s: %d values, worst relative error %.3g (value), %.3g (slope), where "
           "above 1e-6\n", dtnn_cpu_kernels_name(), N, worst_y, worst_dx);
    CHECK(bad_y == 0);
    CHECK(bad_dx == 0);
    free(twice);
    free(hx);
    free(hy);
    free(hdy);
    free(hdx);
    be_free(be, x);
    be_free(be, y);
    be_free(be, dy);
    be_free(be, dx);
    dtnn__backend_free(be);
    return test_finish("test_activations");
}
