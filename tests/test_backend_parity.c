/*
 * test_backend_parity.c — every operation of every registered backend that can be made here
 * (cpu-guarded always, cuda where built and a device is found, any new one by its registry
 * line alone) against the cpu backend's, on
 * odd shapes (batch 1, channels not a multiple of 8, stride 2, padding 0 to 3, kernels 1x1 to
 * 7x7, dilation, groups, broadcasts and shared constants, padding, accumulate and "not
 * wanted" outputs), with the same inputs; bf16 convolutions in each layout of their copies
 * (measured, NCHW and channels-last fixed, on cuda).
 *
 * A backend whose arithmetic is the cpu table's own functions (cpu-guarded) must give the
 * cpu's results bit for bit: the same code on the same inputs. The tolerances below are for a
 * backend with kernels of its own (cuda, whose numbers they were written for).
 *
 * Tolerances, as a fraction of the largest magnitude of the CPU's result:
 *   0 (exact)  what only selects, copies or adds in the CPU's order: argmax, max and average
 *              pooling (the backward gathers in the CPU's order), dropout masks, hit counts,
 *              the finite count, copies, shortcut, broadcast gradients (double sums in order);
 *   1e-6       the other element-wise arithmetic: the kernels compute the CPU's expressions
 *              without FMA contraction, as GCC compiles the CPU's (exact there), but a C
 *              compiler that contracts a * b + c (clang does by default) rounds once less;
 *              and expf / tanhf / exp, whose device versions differ by an ulp or two;
 *   1e-5       batch norm: its double sums are added in another order, and one float rounding
 *              of a folded constant can move by an ulp, which the input gradient's
 *              cancellation (dy - mean - xhat * ...) amplifies;
 *   1e-4       convolutions (cuDNN) and the linear layer (cuBLAS): float sums over up to
 *              C*R*S = 400 products in another order (the CPU's Winograd also rounds
 *              differently), an error that grows like sqrt(terms) * 6e-8.
 * In bf16 (the CPU's emulation, backend/cpu/cpu_conv.c and linear.c, against cuDNN's and
 * cuBLAS's bf16 on the same rounded operands): 1e-5 where the results stay fp32 (the linear
 * layer, every bias gradient), 8e-3 where a convolution's result is rounded to bf16 after fp32
 * sums in another order, which can move it by one bf16 step (2^-8 to 2^-7 of its size).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "backend/backend.h"
#include "conv_case.h"

static dtnn_backend *cpu, *other;
/* 1, or 0 where the backend runs the cpu's very kernels (its compute slots are the cpu
 * table's functions, as cpu-guarded's): then every result must be the cpu's bit for bit. */
static double tol_scale = 1.0;

/* A tensor on both backends: h is the CPU's (input or result), d the GPU's. */
typedef struct {
    float *h, *d;
    size_t n;
} buf;

static buf make(size_t n, unsigned seed, float scale)
{
    buf b = {malloc(sizeof(float) * (n ? n : 1)), be_alloc(other, sizeof(float) * (n ? n : 1)), n};
    test_fill(b.h, n, seed);
    for (size_t i = 0; i < n; i++)
        b.h[i] *= scale;
    be_upload(other, b.d, b.h, sizeof(float) * n);
    return b;
}

static void drop(buf *b)
{
    free(b->h);
    be_free(other, b->d);
}

/* A GPU's result against the CPU's: tolerance tol times the largest magnitude. */
static void check(const char *label, const buf *b, double tol)
{
    float *got = malloc(sizeof(float) * (b->n ? b->n : 1));
    be_download(other, got, b->d, sizeof(float) * b->n);
    double peak = 0.0;
    for (size_t i = 0; i < b->n; i++)
        peak = fmax(peak, fabs(b->h[i]));
    test_compare(label, got, b->h, b->n, tol_scale * tol * (peak > 0 ? peak : 1.0), 0.0);
    free(got);
}

static void check_doubles(const char *label, const double *dev, const double *want, size_t n,
                          double tol)
{
    double *got = malloc(sizeof(double) * n), peak = 0.0, worst = 0.0;
    be_download(other, got, dev, sizeof(double) * n);
    for (size_t i = 0; i < n; i++)
        peak = fmax(peak, fabs(want[i]));
    for (size_t i = 0; i < n; i++)
        worst = fmax(worst, fabs(got[i] - want[i]));
    const int bad = !(worst <= tol_scale * tol * (peak > 0 ? peak : 1.0));
    printf("%-48s n=%-8zu max abs %.3g  (tol %.1g of %.3g)%s\n", label, n, worst, tol, peak,
           bad ? "  FAIL" : "");
    test_failures += bad;
    free(got);
}

static void check_bytes(const char *label, const void *dev, const void *want, size_t bytes)
{
    unsigned char *got = malloc(bytes ? bytes : 1);
    be_download(other, got, dev, bytes);
    const int bad = memcmp(got, want, bytes) != 0;
    printf("%-48s %zu bytes %s\n", label, bytes, bad ? "differ  FAIL" : "identical");
    test_failures += bad;
    free(got);
}

static double *dev_doubles(size_t n) { return be_alloc(other, sizeof(double) * n); }

/* ---- convolution and linear ---------------------------------------------------------------- */

static void test_conv(const conv_case *t, int max_batch, int accumulate, dtnn_precision prec)
{
    const conv_geom g = conv_case_geom(t);
    const conv_desc d = {g, max_batch, (size_t)64 << 20, DTNN_CONV_AUTO, prec};
    const double tol = prec == DTNN_PRECISION_BF16 ? 8e-3 : 1e-4;
    dtnn_error err;
    conv_plan *pc = cpu->op->conv_plan_create(cpu, &d, &err);
    conv_plan *pg = other->op->conv_plan_create(other, &d, &err);
    char label[128];
    snprintf(label, sizeof label, "conv %s %dx%d s%d p%d d%d g%d %d->%d %dx%d n%d",
             dtnn_precision_name(prec), t->R, t->S, t->stride, t->pad, t->dil, t->groups, t->C,
             t->K, t->H, t->W, t->n);
    if (!pc || !pg) {
        fprintf(stderr, "FAIL %s: plan: %s\n", label, err.message);
        test_failures++;
        return;
    }
    printf("%s: cpu %s, %s %s\n", label, cpu->op->conv_method(pc), other->name,
           other->op->conv_method(pg));
    const size_t nx = (size_t)t->n * g.C * g.H * g.W, ny = (size_t)t->n * g.K * g.P * g.Q;
    const size_t nw = (size_t)g.K * (g.C / g.groups) * g.R * g.S;
    buf x = make(nx, 1, 1.0f), w = make(nw, 2, 0.3f), b = make((size_t)g.K, 3, 1.0f);
    buf y = make(ny, 4, 1.0f), dy = make(ny, 5, 1.0f), dw = make(nw, 6, 1.0f);
    buf db = make((size_t)g.K, 7, 1.0f), dx = make(nx, 8, 1.0f);
    void *wc = cpu->op->alloc(cpu, cpu->op->conv_workspace(pc) + 64);
    void *wg = be_alloc(other, other->op->conv_workspace(pg) + 64);
    be_run(cpu, conv_forward, pc, t->n, x.h, w.h, b.h, y.h, wc);
    be_run(other, conv_forward, pg, t->n, x.d, w.d, b.d, y.d, wg);
    be_run(cpu, conv_backward, pc, t->n, x.h, dy.h, w.h, dw.h, db.h, dx.h, accumulate, wc);
    be_run(other, conv_backward, pg, t->n, x.d, dy.d, w.d, dw.d, db.d, dx.d, accumulate, wg);
    char l2[160];
    snprintf(l2, sizeof l2, "%s forward", label);
    check(l2, &y, tol);
    snprintf(l2, sizeof l2, "%s dw (+=)", label);
    check(l2, &dw, tol);
    snprintf(l2, sizeof l2, "%s db (+=)", label);
    check(l2, &db, 1e-4);
    snprintf(l2, sizeof l2, "%s dx (%s)", label, accumulate ? "+=" : "=");
    check(l2, &dx, tol);
    cpu->op->free(cpu, wc);
    be_free(other, wg);
    cpu->op->conv_plan_free(cpu, pc);
    other->op->conv_plan_free(other, pg);
    drop(&x), drop(&w), drop(&b), drop(&y), drop(&dy), drop(&dw), drop(&db), drop(&dx);
}

static const conv_case conv_cases[] = {
        {3, 13, 11, 5, 3, 3, 1, 1, 1, 1, 2},  {3, 15, 15, 7, 5, 5, 2, 2, 1, 1, 1},
        {6, 9, 9, 9, 1, 1, 1, 0, 1, 3, 3},    {5, 17, 17, 6, 7, 7, 2, 3, 1, 1, 1},
        {4, 10, 12, 4, 3, 3, 1, 2, 2, 1, 2},  {6, 8, 8, 6, 3, 3, 1, 1, 1, 6, 2},
        {7, 11, 11, 13, 3, 3, 2, 0, 1, 1, 2}, {16, 8, 8, 16, 3, 3, 1, 1, 1, 1, 4},
        {3, 7, 9, 10, 1, 1, 2, 0, 1, 1, 1},
};

static void test_conv_cases(dtnn_precision prec)
{
    for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++)
        test_conv(&conv_cases[i], conv_cases[i].n, (int)(i % 2), prec);
    /* a batch smaller than the plan's: the per-call descriptors */
    test_conv(&conv_cases[0], 3, 1, prec);
}

static void test_convs(void)
{
    test_conv_cases(DTNN_PRECISION_FP32);
    test_conv_cases(DTNN_PRECISION_BF16);

    /* asymmetric padding: computed (the cpu's kernels), or refused with a message that says
     * so (cuDNN has no such padding) */
    conv_geom g = {0};
    g.C = 3, g.H = g.W = 8, g.K = 4, g.R = g.S = 3, g.P = 9, g.Q = 8;
    g.stride_h = g.stride_w = g.pad_h = g.pad_w = g.dil_h = g.dil_w = g.groups = 1;
    g.pad_extra_h = 1;
    const conv_desc d = {g, 2, (size_t)64 << 20, DTNN_CONV_AUTO, DTNN_PRECISION_FP32};
    dtnn_error err;
    conv_plan *p = other->op->conv_plan_create(other, &d, &err);
    CHECK(p != NULL || strstr(err.message, "asymmetric padding"));
    if (p)
        other->op->conv_plan_free(other, p);
}

static void test_linear(dtnn_precision prec)
{
    const int n = 3, out = 7, in = 13;
    const linear_desc d = {out, in, prec};
    const char *pn = dtnn_precision_name(prec);
    char label[96];
    buf x = make((size_t)n * in, 11, 1.0f), w = make((size_t)out * in, 12, 1.0f);
    buf b = make((size_t)out, 13, 1.0f), y = make((size_t)n * out, 14, 1.0f);
    buf dy = make((size_t)n * out, 15, 1.0f), dw = make((size_t)out * in, 16, 1.0f);
    buf db = make((size_t)out, 17, 1.0f), dx = make((size_t)n * in, 18, 1.0f);
    void *wc = cpu->op->alloc(cpu, cpu->op->linear_workspace(cpu, &d, n) + 64);
    void *wg = be_alloc(other, other->op->linear_workspace(other, &d, n) + 64);
    be_run(cpu, linear_forward, &d, n, x.h, w.h, b.h, y.h, wc);
    be_run(other, linear_forward, &d, n, x.d, w.d, b.d, y.d, wg);
    snprintf(label, sizeof label, "linear %s forward", pn);
    check(label, &y, 1e-5);
    for (int acc = 0; acc < 2; acc++) {
        be_run(cpu, linear_backward, &d, n, x.h, dy.h, w.h, dw.h, db.h, dx.h, acc, wc);
        be_run(other, linear_backward, &d, n, x.d, dy.d, w.d, dw.d, db.d, dx.d, acc, wg);
    }
    snprintf(label, sizeof label, "linear %s dw (+= twice)", pn);
    check(label, &dw, 1e-5);
    snprintf(label, sizeof label, "linear %s db (+= twice)", pn);
    check(label, &db, 1e-6);
    snprintf(label, sizeof label, "linear %s dx (= then +=)", pn);
    check(label, &dx, 1e-5);
    be_run(cpu, linear_forward, &d, n, x.h, w.h, NULL, y.h, wc);
    be_run(other, linear_forward, &d, n, x.d, w.d, NULL, y.d, wg);
    snprintf(label, sizeof label, "linear %s forward, no bias", pn);
    check(label, &y, 1e-5);
    cpu->op->free(cpu, wc);
    be_free(other, wg);
    drop(&x), drop(&w), drop(&b), drop(&y), drop(&dy), drop(&dw), drop(&db), drop(&dx);
}

/* ---- pooling ------------------------------------------------------------------------------ */

static void test_maxpool(int C, int H, int W, int k, int s, int pad, int dil, int n)
{
    pool_geom g = {0};
    g.C = C, g.H = H, g.W = W, g.kh = g.kw = k, g.stride_h = g.stride_w = s;
    g.pad_h = g.pad_w = g.pad_b = g.pad_r = pad, g.dil_h = g.dil_w = dil;
    g.P = (H + 2 * pad - dil * (k - 1) - 1) / s + 1;
    g.Q = (W + 2 * pad - dil * (k - 1) - 1) / s + 1;
    const size_t nx = (size_t)n * C * H * W, ny = (size_t)n * C * g.P * g.Q;
    buf x = make(nx, 21, 1.0f), y = make(ny, 22, 1.0f), dy = make(ny, 23, 1.0f);
    buf dx = make(nx, 24, 1.0f);
    int32_t *ah = malloc(sizeof(int32_t) * ny), *ad = be_alloc(other, sizeof(int32_t) * ny);
    char label[96];
    snprintf(label, sizeof label, "maxpool %dx%d s%d p%d d%d %dx%dx%d n%d", k, k, s, pad, dil, C,
             H, W, n);
    be_run(cpu, maxpool_forward, &g, n, x.h, y.h, ah);
    be_run(other, maxpool_forward, &g, n, x.d, y.d, ad);
    check(label, &y, 0.0);
    check_bytes("  argmax", ad, ah, sizeof(int32_t) * ny);
    for (int acc = 1; acc >= 0; acc--) {
        be_run(cpu, maxpool_backward, &g, n, dy.h, ah, dx.h, acc);
        be_run(other, maxpool_backward, &g, n, dy.d, ad, dx.d, acc);
        check(acc ? "  backward (+=)" : "  backward (=)", &dx, 0.0);
    }
    free(ah);
    be_free(other, ad);
    drop(&x), drop(&y), drop(&dy), drop(&dx);
}

static void test_avgpool(int C, int H, int W, int k, int s, int pad, int include_pad,
                         int adaptive_p, int adaptive_q, int n)
{
    pool_geom g = {0};
    g.C = C, g.H = H, g.W = W, g.kh = g.kw = k, g.stride_h = g.stride_w = s;
    g.pad_h = g.pad_w = g.pad_b = g.pad_r = pad, g.dil_h = g.dil_w = 1;
    g.count_include_pad = include_pad;
    g.adaptive = adaptive_p > 0;
    g.P = g.adaptive ? adaptive_p : (H + 2 * pad - k) / s + 1;
    g.Q = g.adaptive ? adaptive_q : (W + 2 * pad - k) / s + 1;
    const size_t nx = (size_t)n * C * H * W, ny = (size_t)n * C * g.P * g.Q;
    buf x = make(nx, 31, 1.0f), y = make(ny, 32, 1.0f), dy = make(ny, 33, 1.0f);
    buf dx = make(nx, 34, 1.0f);
    char label[96];
    snprintf(label, sizeof label, "avgpool %s%dx%d s%d p%d incl%d %dx%dx%d -> %dx%d n%d",
             g.adaptive ? "adaptive " : "", k, k, s, pad, include_pad, C, H, W, g.P, g.Q, n);
    be_run(cpu, avgpool_forward, &g, n, x.h, y.h);
    be_run(other, avgpool_forward, &g, n, x.d, y.d);
    check(label, &y, 0.0);
    for (int acc = 1; acc >= 0; acc--) {
        be_run(cpu, avgpool_backward, &g, n, dy.h, dx.h, acc);
        be_run(other, avgpool_backward, &g, n, dy.d, dx.d, acc);
        check(acc ? "  backward (+=)" : "  backward (=)", &dx, 0.0);
    }
    drop(&x), drop(&y), drop(&dy), drop(&dx);
}

/* Sums and means over the channels or each plane: double sums in index order and one
 * rounding, the CPU's formula in every backend, so exact. */
static void test_reduce(int C, int H, int W, int over_channels, int mean, int l2, int n)
{
    const reduce_geom g = {C, H * W, over_channels, mean, l2};
    const size_t nx = (size_t)n * C * H * W, ny = (size_t)n * (over_channels ? H * W : C);
    buf x = make(nx, 41, 1.0f), y = make(ny, 42, 1.0f), dy = make(ny, 43, 1.0f);
    buf dx = make(nx, 44, 1.0f);
    char label[96];
    snprintf(label, sizeof label, "reduce %s over %s %dx%dx%d n%d",
             l2 ? "l2" : mean ? "mean" : "sum",
             over_channels ? "channels" : "planes", C, H, W, n);
    be_run(cpu, reduce_forward, &g, n, x.h, y.h);
    be_run(other, reduce_forward, &g, n, x.d, y.d);
    check(label, &y, 0.0);
    for (int acc = 1; acc >= 0; acc--) {
        be_run(cpu, reduce_backward, &g, n, x.h, y.h, dy.h, dx.h, acc);
        be_run(other, reduce_backward, &g, n, x.d, y.d, dy.d, dx.d, acc);
        check(acc ? "  backward (+=)" : "  backward (=)", &dx, 0.0);
    }
    drop(&x), drop(&y), drop(&dy), drop(&dx);
}

/* Nearest and bilinear upsampling: the shared formulas, so exact. */
static void test_upsample(int C, int H, int W, int sh, int sw, int bilinear, int align, int n)
{
    const upsample_geom g = {C, H, W, sh, sw, bilinear, align};
    const size_t nx = (size_t)n * C * H * W, ny = nx * sh * sw;
    buf x = make(nx, 51, 1.0f), y = make(ny, 52, 1.0f), dy = make(ny, 53, 1.0f);
    buf dx = make(nx, 54, 1.0f);
    char label[96];
    snprintf(label, sizeof label, "upsample %s%s %dx%d %dx%dx%d n%d",
             bilinear ? "bilinear" : "nearest", align ? " align" : "", sh, sw, C, H, W, n);
    be_run(cpu, upsample_forward, &g, n, x.h, y.h);
    be_run(other, upsample_forward, &g, n, x.d, y.d);
    check(label, &y, 0.0);
    for (int acc = 1; acc >= 0; acc--) {
        be_run(cpu, upsample_backward, &g, n, dy.h, dx.h, acc);
        be_run(other, upsample_backward, &g, n, dy.d, dx.d, acc);
        check(acc ? "  backward (+=)" : "  backward (=)", &dx, 0.0);
    }
    drop(&x), drop(&y), drop(&dy), drop(&dx);
}

/* Layer normalisation over channels: the shared formulas in the CPU's order, so exact; with
 * and without affine parameters, parameter gradients added (they accumulate). */
static void test_layernorm(int C, int H, int W, int affine, int n)
{
    const layernorm_geom g = {C, H * W, 1e-5f};
    const size_t nx = (size_t)n * C * H * W, np_ = (size_t)n * H * W;
    buf x = make(nx, 61, 1.0f), y = make(nx, 62, 1.0f), dy = make(nx, 63, 1.0f);
    buf dx = make(nx, 64, 1.0f), gamma = make(C, 65, 1.0f), beta = make(C, 66, 1.0f);
    buf mean = make(np_, 67, 1.0f), rstd = make(np_, 68, 1.0f);
    buf dg = make(C, 69, 1.0f), db = make(C, 70, 1.0f);
    char label[96];
    snprintf(label, sizeof label, "layernorm %s%dx%dx%d n%d", affine ? "" : "(no affine) ", C,
             H, W, n);
    be_run(cpu, layernorm_forward, &g, n, x.h, affine ? gamma.h : NULL, affine ? beta.h : NULL,
           y.h, mean.h, rstd.h);
    be_run(other, layernorm_forward, &g, n, x.d, affine ? gamma.d : NULL,
           affine ? beta.d : NULL, y.d, mean.d, rstd.d);
    check(label, &y, 0.0);
    check("  saved mean", &mean, 0.0);
    check("  saved rstd", &rstd, 0.0);
    for (int acc = 1; acc >= 0; acc--) {
        be_run(cpu, layernorm_backward, &g, n, x.h, affine ? gamma.h : NULL, mean.h, rstd.h,
               dy.h, dx.h, acc, affine ? dg.h : NULL, affine ? db.h : NULL);
        be_run(other, layernorm_backward, &g, n, x.d, affine ? gamma.d : NULL, mean.d, rstd.d,
               dy.d, dx.d, acc, affine ? dg.d : NULL, affine ? db.d : NULL);
        check(acc ? "  backward (+=)" : "  backward (=)", &dx, 0.0);
        if (affine) {
            check("  weight gradient (+=)", &dg, 0.0);
            check("  bias gradient (+=)", &db, 0.0);
        }
    }
    drop(&x), drop(&y), drop(&dy), drop(&dx), drop(&gamma), drop(&beta);
    drop(&mean), drop(&rstd), drop(&dg), drop(&db);
}

static void test_pools(void)
{
    test_layernorm(7, 3, 5, 1, 2);
    test_layernorm(3, 1, 1, 0, 3);
    test_layernorm(1, 4, 4, 1, 1);
    test_upsample(3, 5, 4, 2, 2, 0, 0, 2);
    test_upsample(2, 3, 7, 3, 1, 1, 0, 1);
    test_upsample(2, 4, 3, 2, 4, 1, 1, 2);
    test_upsample(1, 1, 2, 4, 2, 1, 0, 1);
    test_reduce(7, 5, 3, 1, 1, 0, 2);
    test_reduce(3, 9, 11, 1, 0, 0, 1);
    test_reduce(5, 6, 6, 0, 0, 0, 3);
    test_reduce(1, 1, 1, 0, 1, 0, 2);
    test_reduce(6, 4, 5, 0, 0, 1, 2);
    test_reduce(7, 3, 3, 1, 0, 1, 2);
    test_maxpool(3, 9, 11, 3, 2, 1, 1, 2);
    test_maxpool(5, 8, 8, 2, 2, 0, 1, 1);
    test_maxpool(2, 10, 7, 2, 1, 1, 2, 3);
    test_maxpool(3, 13, 13, 3, 2, 0, 1, 1);
    test_avgpool(3, 9, 11, 3, 2, 1, 1, 0, 0, 2);
    test_avgpool(3, 9, 11, 3, 2, 1, 0, 0, 0, 2);
    test_avgpool(5, 7, 5, 0, 1, 0, 1, 3, 2, 2);
    test_avgpool(7, 6, 6, 0, 1, 0, 1, 1, 1, 1);
}

/* ---- activations, softmax ------------------------------------------------------------------ */

static void test_activations(void)
{
    const size_t n = 1001;
    buf x = make(n, 41, 5.0f), y = make(n, 42, 1.0f), dy = make(n, 43, 1.0f);
    buf dx = make(n, 44, 1.0f), xpos = make(n, 45, 5.0f);
    /* sqrt's domain: |x| + 0.1 */
    for (size_t i = 0; i < n; i++)
        xpos.h[i] = fabsf(xpos.h[i]) + 0.1f;
    be_upload(other, xpos.d, xpos.h, sizeof(float) * n);
#define ACT_KIND_NAME(kind, name) name,
    static const char *const names[ACT_KIND_COUNT] = {DTNN_ACT_KINDS(ACT_KIND_NAME)};
#undef ACT_KIND_NAME
    /* every kind of the list; exact where the formula only selects or clamps, else 1e-6 (an
     * expf, erff or tanhf of the device, or one contraction, as at the top of the file) */
    for (int k = 0; k < ACT_KIND_COUNT; k++) {
        const float a = k == ACT_LEAKY_RELU ? 0.01f : -1.5f, b = 2.25f;
        const double tol =
            k == ACT_RELU || k == ACT_RELU6 || k == ACT_CLAMP || k == ACT_HARDTANH ? 0.0 : 1e-6;
        char label[64];
        const buf *in = k == ACT_SQRT ? &xpos : &x;
        be_run(cpu, act_forward, (act_kind)k, a, b, n, in->h, y.h);
        be_run(other, act_forward, (act_kind)k, a, b, n, in->d, y.d);
        snprintf(label, sizeof label, "%s forward", names[k]);
        check(label, &y, tol);
        /* backward from the CPU's y on both, so that only the backward is compared */
        be_upload(other, y.d, y.h, sizeof(float) * n);
        be_run(cpu, act_backward, (act_kind)k, a, b, n, in->h, y.h, dy.h, dx.h, k % 2);
        be_run(other, act_backward, (act_kind)k, a, b, n, in->d, y.d, dy.d, dx.d, k % 2);
        snprintf(label, sizeof label, "%s backward (%s)", names[k], k % 2 ? "+=" : "=");
        check(label, &dx, 1e-6);
    }
    /* hardsigmoid above ran ONNX's formula (alpha -1.5, beta 2.25); PyTorch's constants take
     * the other branch, relu6(x + 3) / 6 */
    be_run(cpu, act_forward, ACT_HARDSIGMOID, 1.0f / 6.0f, 0.5f, n, x.h, y.h);
    be_run(other, act_forward, ACT_HARDSIGMOID, 1.0f / 6.0f, 0.5f, n, x.d, y.d);
    check("hardsigmoid (PyTorch's 1/6, 1/2) forward", &y, 1e-6);
    be_upload(other, y.d, y.h, sizeof(float) * n);
    be_run(cpu, act_backward, ACT_HARDSIGMOID, 1.0f / 6.0f, 0.5f, n, x.h, y.h, dy.h, dx.h, 0);
    be_run(other, act_backward, ACT_HARDSIGMOID, 1.0f / 6.0f, 0.5f, n, x.d, y.d, dy.d, dx.d, 0);
    check("hardsigmoid (PyTorch's 1/6, 1/2) backward", &dx, 1e-6);
    drop(&x), drop(&y), drop(&dy), drop(&dx), drop(&xpos);

    /* row-wise (inner 1) and across 3 channel groups of 4 x 5 positions */
    const int rows = 5, cols = 37;
    buf sx = make((size_t)rows * cols, 45, 4.0f), sy = make((size_t)rows * cols, 46, 1.0f);
    buf sdy = make((size_t)rows * cols, 47, 1.0f), sdx = make((size_t)rows * cols, 48, 1.0f);
    const int shapes[2][3] = {{rows, cols, 1}, {3, 3, 20}};
    for (int k = 0; k < 2; k++) {
        const int r = shapes[k][0], c = shapes[k][1], in = shapes[k][2];
        be_run(cpu, softmax_forward, r, c, in, sx.h, sy.h);
        be_run(other, softmax_forward, r, c, in, sx.d, sy.d);
        check(k ? "softmax forward across groups" : "softmax forward", &sy, 1e-6);
        be_upload(other, sy.d, sy.h, sizeof(float) * rows * cols);
        be_run(cpu, softmax_backward, r, c, in, sy.h, sdy.h, sdx.h, 1);
        be_run(other, softmax_backward, r, c, in, sy.d, sdy.d, sdx.d, 1);
        check(k ? "softmax backward across groups (+=)" : "softmax backward (+=)", &sdx, 1e-6);
    }
    drop(&sx), drop(&sy), drop(&sdy), drop(&sdx);

    /* a 4-D permutation of 2 samples, written and added; 3 x 2 products of 5x4 by 4x6, plain
     * and with each operand transposed, written and added */
    const permute_geom pg = {4, {2, 3, 4, 5}, {2, 0, 3, 1}};
    buf px = make(240, 49, 1.0f), py = make(240, 50, 1.0f);
    for (int acc = 0; acc < 2; acc++) {
        be_run(cpu, permute, &pg, 2, px.h, py.h, acc);
        be_run(other, permute, &pg, 2, px.d, py.d, acc);
        check(acc ? "permute (+=)" : "permute", &py, 0.0);
    }
    drop(&px), drop(&py);
    const matmul_geom mg = {2, 5, 6, 4};
    buf ma = make(3 * 2 * 20, 51, 1.0f), mb = make(3 * 2 * 24, 52, 1.0f);
    buf mc = make(3 * 2 * 30, 53, 1.0f);
    for (int k = 0; k < 4; k++) {
        const int ta = k & 1, tb = k >> 1;
        be_run(cpu, matmul, &mg, 3, ta, tb, ma.h, mb.h, mc.h, k == 3);
        be_run(other, matmul, &mg, 3, ta, tb, ma.d, mb.d, mc.d, k == 3);
        check(k == 3 ? "matmul, both transposed (+=)" : "matmul", &mc, 1e-6);
    }
    drop(&ma), drop(&mb), drop(&mc);
}

/* ---- batch norm ---------------------------------------------------------------------------- */

static void test_batchnorm_case(int n, int C, int hw, int relu, int res)
{
    const size_t nx = (size_t)n * C * hw;
    buf x = make(nx, 51, 2.0f), gamma = make((size_t)C, 52, 1.0f), beta = make((size_t)C, 53, 1.0f);
    buf rm = make((size_t)C, 54, 0.5f), rv = make((size_t)C, 55, 0.4f), r = make(nx, 56, 1.0f);
    buf y = make(nx, 57, 1.0f), sm = make((size_t)C, 58, 1.0f), si = make((size_t)C, 59, 1.0f);
    buf dy = make(nx, 60, 1.0f), dx = make(nx, 61, 1.0f), dres = make(nx, 62, 1.0f);
    for (int c = 0; c < C; c++)
        rv.h[c] = fabsf(rv.h[c]) + 0.5f;
    be_upload(other, rv.d, rv.h, sizeof(float) * C);
    bn_epilogue eh = {relu, res ? r.h : NULL, y.h, res ? dres.h : NULL, 1};
    bn_epilogue ed = {relu, res ? r.d : NULL, y.d, res ? dres.d : NULL, 1};
    const bn_epilogue *eph = relu || res ? &eh : NULL, *epd = relu || res ? &ed : NULL;
    char label[96], l2[128];
    snprintf(label, sizeof label, "bn n%d C%d hw%d relu%d res%d", n, C, hw, relu, res);
    const float eps = 1e-5f, mom = 0.1f;

    be_run(cpu, bn_train_forward, n, C, hw, x.h, gamma.h, beta.h, eps, mom, eph, y.h, sm.h, si.h,
           rm.h, rv.h);
    be_run(other, bn_train_forward, n, C, hw, x.d, gamma.d, beta.d, eps, mom, epd, y.d, sm.d, si.d,
           rm.d, rv.d);
    snprintf(l2, sizeof l2, "%s train_forward y", label);
    check(l2, &y, 1e-5);
    check("  save_mean", &sm, 1e-5);
    check("  save_invstd", &si, 1e-5);
    check("  running_mean", &rm, 1e-5);
    check("  running_var", &rv, 1e-5);
    /* the rest from the CPU's forward results on both */
    be_upload(other, y.d, y.h, sizeof(float) * nx);
    be_upload(other, sm.d, sm.h, sizeof(float) * C);
    be_upload(other, si.d, si.h, sizeof(float) * C);
    be_upload(other, rm.d, rm.h, sizeof(float) * C);
    be_upload(other, rv.d, rv.h, sizeof(float) * C);

    double *sdy = malloc(sizeof(double) * C), *sdyx = malloc(sizeof(double) * C);
    double *gsdy = dev_doubles((size_t)C), *gsdyx = dev_doubles((size_t)C);
    be_run(cpu, bn_train_backward, n, C, hw, x.h, dy.h, gamma.h, beta.h, eph, sm.h, si.h, sdy,
           sdyx, dx.h, 1);
    be_run(other, bn_train_backward, n, C, hw, x.d, dy.d, gamma.d, beta.d, epd, sm.d, si.d, gsdy,
           gsdyx, dx.d, 1);
    check_doubles("  train_backward sum(dy)", gsdy, sdy, (size_t)C, 1e-12);
    check_doubles("  train_backward sum(dy xhat)", gsdyx, sdyx, (size_t)C, 1e-12);
    check("  train_backward dx (+=)", &dx, 1e-5);
    if (res)
        check("  train_backward dres (+=)", &dres, 0.0);

    /* the phases one by one, as synchronised batch norm calls them */
    double *sum = malloc(sizeof(double) * C), *sumsq = malloc(sizeof(double) * C);
    double *gsum = dev_doubles((size_t)C), *gsumsq = dev_doubles((size_t)C);
    be_run(cpu, bn_moments, n, C, hw, x.h, rm.h, sum, sumsq);
    be_run(other, bn_moments, n, C, hw, x.d, rm.d, gsum, gsumsq);
    check_doubles("  moments sum", gsum, sum, (size_t)C, 1e-12);
    check_doubles("  moments sumsq", gsumsq, sumsq, (size_t)C, 1e-12);
    be_upload(other, gsum, sum, sizeof(double) * C);
    be_upload(other, gsumsq, sumsq, sizeof(double) * C);
    const double count = 2.0 * n * hw;     /* as if a second rank had as many values */
    be_run(cpu, bn_apply_train, n, C, hw, x.h, gamma.h, beta.h, sum, sumsq, count, eps, mom, eph,
           y.h, sm.h, si.h, rm.h, rv.h);
    be_run(other, bn_apply_train, n, C, hw, x.d, gamma.d, beta.d, gsum, gsumsq, count, eps, mom,
           epd, y.d, sm.d, si.d, rm.d, rv.d);
    check("  apply_train y", &y, 1e-5);
    check("  apply_train running_var", &rv, 1e-6);
    be_upload(other, y.d, y.h, sizeof(float) * nx);
    be_upload(other, sm.d, sm.h, sizeof(float) * C);
    be_upload(other, si.d, si.h, sizeof(float) * C);
    be_run(cpu, bn_backward_sums, n, C, hw, x.h, dy.h, gamma.h, beta.h, eph, sm.h, si.h, sdy,
           sdyx);
    be_run(other, bn_backward_sums, n, C, hw, x.d, dy.d, gamma.d, beta.d, epd, sm.d, si.d, gsdy,
           gsdyx);
    check_doubles("  backward_sums sum(dy xhat)", gsdyx, sdyx, (size_t)C, 1e-12);
    be_upload(other, gsdy, sdy, sizeof(double) * C);
    be_upload(other, gsdyx, sdyx, sizeof(double) * C);
    be_run(cpu, bn_backward_apply, n, C, hw, x.h, dy.h, gamma.h, beta.h, eph, sm.h, si.h, sdy,
           sdyx, count, dx.h, 0);
    be_run(other, bn_backward_apply, n, C, hw, x.d, dy.d, gamma.d, beta.d, epd, sm.d, si.d, gsdy,
           gsdyx, count, dx.d, 0);
    check("  backward_apply dx (=)", &dx, 1e-5);

    buf dg = make((size_t)C, 63, 1.0f), dbt = make((size_t)C, 64, 1.0f);
    be_run(cpu, bn_param_grads, C, sdy, sdyx, dg.h, dbt.h);
    be_run(other, bn_param_grads, C, gsdy, gsdyx, dg.d, dbt.d);
    be_run(cpu, bn_param_grads, C, sdy, sdyx, NULL, dbt.h);
    be_run(other, bn_param_grads, C, gsdy, gsdyx, NULL, dbt.d);
    check("  param_grads dgamma", &dg, 0.0);
    check("  param_grads dbeta (twice)", &dbt, 0.0);

    be_run(cpu, bn_forward_eval, n, C, hw, x.h, gamma.h, beta.h, rm.h, rv.h, eps, eph, y.h);
    be_run(other, bn_forward_eval, n, C, hw, x.d, gamma.d, beta.d, rm.d, rv.d, eps, epd, y.d);
    check("  forward_eval", &y, 1e-6);
    be_run(cpu, bn_backward_eval, n, C, hw, dy.h, gamma.h, rv.h, eps, dx.h, 1);
    be_run(other, bn_backward_eval, n, C, hw, dy.d, gamma.d, rv.d, eps, dx.d, 1);
    check("  backward_eval (+=)", &dx, 1e-6);

    free(sdy), free(sdyx), free(sum), free(sumsq);
    be_free(other, gsdy), be_free(other, gsdyx), be_free(other, gsum), be_free(other, gsumsq);
    drop(&x), drop(&gamma), drop(&beta), drop(&rm), drop(&rv), drop(&r), drop(&y), drop(&sm);
    drop(&si), drop(&dy), drop(&dx), drop(&dres), drop(&dg), drop(&dbt);
}

static void test_batchnorm(void)
{
    test_batchnorm_case(3, 5, 21, 0, 0);
    test_batchnorm_case(1, 7, 9, 1, 0);
    test_batchnorm_case(2, 3, 1, 1, 1);
    test_batchnorm_case(4, 6, 1111, 1, 1);  /* more values per channel than a block's threads */
}

/* ---- element-wise, broadcast, dropout, shortcut ------------------------------------------ */

static void test_elementwise(void)
{
    const size_t n = 777;
    buf a = make(n, 71, 1.0f), b = make(n, 72, 1.0f), c = make(n, 73, 1.0f), y = make(n, 74, 1.0f);
    const float *xh[3] = {a.h, b.h, c.h}, *xd[3] = {a.d, b.d, c.d};
    for (int k = 2; k <= 3; k++)
        for (int relu = 0; relu < 2; relu++) {
            char label[64];
            be_run(cpu, add_forward, n, k, xh, relu, y.h);
            be_run(other, add_forward, n, k, xd, relu, y.d);
            snprintf(label, sizeof label, "add of %d forward, relu %d", k, relu);
            check(label, &y, 0.0);
        }
    /* backward with the fused ReLU's output; inputs 0 and 1 one producer, input 2 not wanted */
    buf dy = make(n, 75, 1.0f), d01 = make(n, 76, 1.0f);
    float *dxh[3] = {d01.h, d01.h, NULL}, *dxd[3] = {d01.d, d01.d, NULL};
    const int acc[3] = {0, 1, 0};
    be_upload(other, y.d, y.h, sizeof(float) * n);
    be_run(cpu, add_backward, n, y.h, dy.h, 3, dxh, acc);
    be_run(other, add_backward, n, y.d, dy.d, 3, dxd, acc);
    check("add backward (one producer twice)", &d01, 0.0);
    be_run(cpu, add_backward, n, NULL, dy.h, 2, dxh, acc);
    be_run(other, add_backward, n, NULL, dy.d, 2, dxd, acc);
    check("add backward, no relu", &d01, 0.0);

    /* strided rows: a concat's part, written then added */
    const size_t rows = 7, cols = 5, ld_dst = 9, ld_src = 6;
    buf dst = make(rows * ld_dst, 77, 1.0f), src = make(rows * ld_src, 78, 1.0f);
    for (int accumulate = 0; accumulate < 2; accumulate++) {
        be_run(cpu, copy_rows, rows, cols, dst.h, ld_dst, src.h, ld_src, accumulate);
        be_run(other, copy_rows, rows, cols, dst.d, ld_dst, src.d, ld_src, accumulate);
        check(accumulate ? "copy_rows strided (+=)" : "copy_rows strided (=)", &dst, 0.0);
    }
    be_run(cpu, copy_rows, 3, ld_src, dst.h, ld_src, src.h, ld_src, 0);
    be_run(other, copy_rows, 3, ld_src, dst.d, ld_src, src.d, ld_src, 0);
    check("copy_rows contiguous", &dst, 0.0);

    be_run(cpu, fill, y.h, n - 3, 0.625f);
    be_run(other, fill, y.d, n - 3, 0.625f);
    check("fill", &y, 0.0);
    int64_t counter = 1234567890123ll, *dcounter = be_alloc(other, sizeof counter);
    be_upload(other, dcounter, &counter, sizeof counter);
    be_run(other, add_i64, dcounter, 987654321);
    counter += 987654321;
    check_bytes("add_i64", dcounter, &counter, sizeof counter);
    be_free(other, dcounter);

    /* dropout: the CPU's masks from the same hash */
    uint8_t *mh = malloc(n), *md = be_alloc(other, n);
    const float p = 0.3f, scale = 1.0f / 0.7f;
    be_run(cpu, dropout_forward, n, p, scale, 42, 7, 1000003, a.h, y.h, mh);
    be_run(other, dropout_forward, n, p, scale, 42, 7, 1000003, a.d, y.d, md);
    check_bytes("dropout mask", md, mh, n);
    check("dropout forward", &y, 0.0);
    be_run(cpu, dropout_backward, n, scale, mh, dy.h, d01.h, 1);
    be_run(other, dropout_backward, n, scale, md, dy.d, d01.d, 1);
    check("dropout backward (+=)", &d01, 1e-6);
    free(mh);
    be_free(other, md);

    float *bad = malloc(sizeof(float) * n);
    test_fill(bad, n, 79);
    bad[0] = NAN, bad[5] = INFINITY, bad[n - 1] = -INFINITY, bad[400] = NAN;
    float *dbad = be_alloc(other, sizeof(float) * n);
    be_upload(other, dbad, bad, sizeof(float) * n);
    const size_t want = be_count_nonfinite(cpu, bad, n), got = be_count_nonfinite(other, dbad, n);
    printf("%-48s cpu %zu, %s %zu%s\n", "count_nonfinite", want, other->name, got,
           want == got && got == 4 ? "" : "  FAIL");
    test_failures += !(want == got && got == 4);
    free(bad);
    be_free(other, dbad);
    drop(&a), drop(&b), drop(&c), drop(&y), drop(&dy), drop(&d01), drop(&dst), drop(&src);
}

/* b_shared: b is one sample for the whole batch (a layer's constant), with no gradient */
static void test_binary_case(const int as[3], const int bs[3], int n, int b_shared)
{
    binary_geom g = {4, 3, 5, {as[0], as[1], as[2]}, {bs[0], bs[1], bs[2]}, 0, b_shared};
    const size_t na = (size_t)n * as[0] * as[1] * as[2];
    const size_t nb = (size_t)(b_shared ? 1 : n) * bs[0] * bs[1] * bs[2];
    const size_t ny = (size_t)n * g.C * g.H * g.W;
    buf a = make(na, 81, 1.0f), b = make(nb, 82, 1.0f), y = make(ny, 83, 1.0f);
    buf dy = make(ny, 84, 1.0f), da = make(na, 85, 1.0f), db = make(nb, 86, 1.0f);
    static const char *const kinds[] = {"add", "sub", "mul", "div"};
    for (int k = BIN_ADD; k <= BIN_DIV; k++) {
        char label[96];
        be_run(cpu, binary_forward, (binary_kind)k, &g, n, a.h, b.h, y.h);
        be_run(other, binary_forward, (binary_kind)k, &g, n, a.d, b.d, y.d);
        snprintf(label, sizeof label, "%s (%d,%d,%d) (%d,%d,%d)%s n%d forward", kinds[k],
                 as[0], as[1], as[2], bs[0], bs[1], bs[2], b_shared ? " shared" : "", n);
        check(label, &y, 0.0);
        if (b_shared) {
            be_run(cpu, binary_backward, (binary_kind)k, &g, n, a.h, b.h, dy.h, da.h, 1, NULL, 0);
            be_run(other, binary_backward, (binary_kind)k, &g, n, a.d, b.d, dy.d, da.d, 1, NULL, 0);
            check("  da (+=), b shared", &da, 1e-6);
            continue;
        }
        be_run(cpu, binary_backward, (binary_kind)k, &g, n, a.h, b.h, dy.h, da.h, 0, db.h, 1);
        be_run(other, binary_backward, (binary_kind)k, &g, n, a.d, b.d, dy.d, da.d, 0, db.d, 1);
        check("  da (=)", &da, 0.0);
        check("  db (+=)", &db, 1e-6);
        be_run(cpu, binary_backward, (binary_kind)k, &g, n, a.h, b.h, dy.h, NULL, 0, db.h, 0);
        be_run(other, binary_backward, (binary_kind)k, &g, n, a.d, b.d, dy.d, NULL, 0, db.d, 0);
        check("  db alone (=)", &db, 0.0);
    }
    drop(&a), drop(&b), drop(&y), drop(&dy), drop(&da), drop(&db);
}

static void test_broadcast_pad_shortcut(void)
{
    const int full[3] = {4, 3, 5}, chan[3] = {4, 1, 1}, one[3] = {1, 1, 1};
    const int rowv[3] = {1, 3, 1}, cw[3] = {4, 1, 5};
    test_binary_case(full, full, 2, 0);
    test_binary_case(full, chan, 3, 0);
    test_binary_case(one, full, 1, 0);
    test_binary_case(rowv, cw, 2, 0);
    test_binary_case(full, chan, 3, 1);
    test_binary_case(full, full, 2, 1);

    /* constant padding: channels, rows and columns, unequal sides */
    const pad_geom pads[] = {{3, 5, 7, 1, 2, 0, 3, 0, 0, 0.0f}, {2, 4, 4, 0, 0, 0, 0, 1, 2, -1.5f},
                             {5, 3, 6, 2, 0, 1, 1, 1, 0, 0.25f}};
    for (size_t i = 0; i < sizeof pads / sizeof pads[0]; i++) {
        const pad_geom *g = &pads[i];
        const int n = 2, K = g->front + g->C + g->back, P = g->top + g->H + g->bottom;
        const int Q = g->left + g->W + g->right;
        const size_t nx = (size_t)n * g->C * g->H * g->W, ny = (size_t)n * K * P * Q;
        buf x = make(nx, 95, 1.0f), y = make(ny, 96, 1.0f), dy = make(ny, 97, 1.0f);
        buf dx = make(nx, 98, 1.0f);
        char label[96];
        snprintf(label, sizeof label, "pad %dx%dx%d -> %dx%dx%d value %g", g->C, g->H, g->W, K,
                 P, Q, (double)g->value);
        be_run(cpu, pad_forward, g, n, x.h, y.h);
        be_run(other, pad_forward, g, n, x.d, y.d);
        check(label, &y, 0.0);
        for (int acc = 1; acc >= 0; acc--) {
            be_run(cpu, pad_backward, g, n, dy.h, dx.h, acc);
            be_run(other, pad_backward, g, n, dy.d, dx.d, acc);
            check(acc ? "  backward (+=)" : "  backward (=)", &dx, 0.0);
        }
        drop(&x), drop(&y), drop(&dy), drop(&dx);
    }

    const shortcut_geom cases[] = {{3, 9, 9, 8, 5, 5, 2, 2}, {5, 8, 6, 5, 8, 6, 1, 0},
                                   {4, 7, 8, 12, 4, 4, 2, 4}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const shortcut_geom *g = &cases[i];
        const int n = 2;
        const size_t nx = (size_t)n * g->C * g->H * g->W, ny = (size_t)n * g->K * g->P * g->Q;
        buf x = make(nx, 91, 1.0f), y = make(ny, 92, 1.0f), dy = make(ny, 93, 1.0f);
        buf dx = make(nx, 94, 1.0f);
        char label[96];
        snprintf(label, sizeof label, "shortcut %d->%d %dx%d stride %d at %d", g->C, g->K, g->H,
                 g->W, g->stride, g->at);
        be_run(cpu, shortcut_forward, g, n, x.h, y.h);
        be_run(other, shortcut_forward, g, n, x.d, y.d);
        check(label, &y, 0.0);
        for (int acc = 1; acc >= 0; acc--) {
            be_run(cpu, shortcut_backward, g, n, dy.h, dx.h, acc);
            be_run(other, shortcut_backward, g, n, dy.d, dx.d, acc);
            check(acc ? "  backward (+=)" : "  backward (=)", &dx, 0.0);
        }
        drop(&x), drop(&y), drop(&dy), drop(&dx);
    }
}

/* ---- losses and optimizers ------------------------------------------------------------------ */

static void test_losses(void)
{
    const int n = 300, k = 10;     /* more samples than the kernel's threads */
    buf z = make((size_t)n * k, 101, 3.0f), dz = make((size_t)n * k, 102, 1.0f);
    /* [2n]: the mixed cases' partner labels follow */
    int32_t *labels = malloc(sizeof(int32_t) * 2 * n),
            *dlabels = be_alloc(other, sizeof(int32_t) * 2 * n);
    for (int i = 0; i < n; i++) {
        labels[i] = (i * 7 + 3) % k;
        labels[n + i] = (i * 3 + 1) % k;
    }
    be_upload(other, dlabels, labels, sizeof(int32_t) * 2 * n);
    /* ties, for the ranks: a sample whose logits are all equal */
    for (int j = 0; j < k; j++)
        z.h[j] = 0.5f;
    be_upload(other, z.d, z.h, sizeof(float) * n * k);
    double *dout = dev_doubles(3);
    const loss_desc cases[] = {
        {DTNN_LOSS_CROSS_ENTROPY, 0.0f, 1.0f}, {DTNN_LOSS_CROSS_ENTROPY, 0.1f, 1.0f},
        {DTNN_LOSS_BCE, 0.0f, 1.0f},           {DTNN_LOSS_MSE, 0.0f, 1.0f},
        {DTNN_LOSS_CROSS_ENTROPY, 0.1f, 0.3f}, {DTNN_LOSS_BCE, 0.0f, 0.7f},
        {DTNN_LOSS_MSE, 0.0f, 0.3f}};
    static const char *const names[] = {"cross-entropy", "cross-entropy smoothed 0.1", "bce",
                                        "mse", "cross-entropy smoothed, mixed", "bce mixed",
                                        "mse mixed"};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double out[3];
        char label[96];
        be_run(cpu, loss, &cases[c], n, k, z.h, labels, dz.h, 1.0f / n, out);
        be_run(other, loss, &cases[c], n, k, z.d, dlabels, dz.d, 1.0f / n, dout);
        snprintf(label, sizeof label, "loss %s: dz", names[c]);
        check(label, &dz, 1e-6);
        snprintf(label, sizeof label, "loss %s: sum, top-1, top-5", names[c]);
        check_doubles(label, dout, out, 3, 1e-12);
    }
    double out[3];
    be_run(other, loss, &cases[0], n, k, z.d, dlabels, NULL, 1.0f, dout);
    be_run(cpu, loss, &cases[0], n, k, z.h, labels, NULL, 1.0f, out);
    check_doubles("loss without gradient", dout, out, 3, 1e-12);
    free(labels);
    be_free(other, dlabels);
    be_free(other, dout);
    drop(&z), drop(&dz);
}

static int runs_cpu_kernels(const dtnn_backend *b);

static void test_optimizers(void)
{
    const size_t n = 1001;
    buf w = make(n, 111, 1.0f), g = make(n, 112, 1.0f), s1 = make(n, 113, 1.0f);
    buf s2 = make(n, 114, 1.0f), s3 = make(n, 115, 1.0f);
    for (size_t i = 0; i < n; i++)
        s2.h[i] = fabsf(s2.h[i]), s3.h[i] *= 0.1f;
    be_upload(other, s2.d, s2.h, sizeof(float) * n);
    be_upload(other, s3.d, s3.h, sizeof(float) * n);
    for (int first = 1; first >= 0; first--) {
        const sgd_args a = {0.05f, 1e-4f, 0.9f, 0.9f, first, !first, 1};
        be_run(cpu, sgd_step, &a, n, w.h, g.h, s1.h);
        be_run(other, sgd_step, &a, n, w.d, g.d, s1.d);
    }
    check("sgd (momentum, then nesterov) w", &w, 1e-6);
    check("  momentum buffer", &s1, 1e-6);
    const adam_args ad = {0.9f, 0.999f, 0.1f, 0.001f, 1e-8f, 0.01f, 0.3f, 0.0f, 0.999f, 1};
    be_run(cpu, adam_step, &ad, n, w.h, g.h, s1.h, s2.h);
    be_run(other, adam_step, &ad, n, w.d, g.d, s1.d, s2.d);
    const adam_args l2 = {0.9f, 0.999f, 0.1f, 0.001f, 1e-8f, 0.01f, 0.3f, 0.01f, 1.0f, 0};
    be_run(cpu, adam_step, &l2, n, w.h, g.h, s1.h, s2.h);
    be_run(other, adam_step, &l2, n, w.d, g.d, s1.d, s2.d);
    check("adamw then adam (l2) w", &w, 1e-6);
    check("  m1", &s1, 1e-6);
    check("  m2", &s2, 1e-6);
    const rmsprop_args r = {0.99f, 0.01f, 1e-4f, 1e-8f, 0.9f, 0.01f};
    be_run(cpu, rmsprop_step, &r, n, w.h, g.h, s2.h, s1.h, s3.h);
    be_run(other, rmsprop_step, &r, n, w.d, g.d, s2.d, s1.d, s3.d);
    be_run(cpu, rmsprop_step, &r, n, w.h, g.h, s2.h, NULL, NULL);
    be_run(other, rmsprop_step, &r, n, w.d, g.d, s2.d, NULL, NULL);
    check("rmsprop (centered + momentum, then plain) w", &w, 1e-6);
    check("  square_avg", &s2, 1e-6);
    check("  momentum", &s1, 1e-6);
    check("  grad_avg", &s3, 1e-6);
    const nadam_args na = {1e-4f, 0.1f, 0.999f, 0.001f, 0.002f, 1e-8f, -0.01f, -0.08f};
    be_run(cpu, nadam_step, &na, n, w.h, g.h, s1.h, s2.h);
    be_run(other, nadam_step, &na, n, w.d, g.d, s1.d, s2.d);
    check("nadam w", &w, 1e-6);
    check("  m1", &s1, 1e-6);
    check("  m2", &s2, 1e-6);
    for (int nesterov = 0; nesterov < 2; nesterov++) {
        const lars_args la = {0.02f, 5e-4f, 0.9f, nesterov};
        be_run(cpu, lars_step, &la, n, w.h, g.h, s1.h);
        be_run(other, lars_step, &la, n, w.d, g.d, s1.d);
    }
    check("lars (plain, then nesterov) w", &w, 1e-6);
    check("  momentum", &s1, 1e-6);
    const lamb_args lb = {0.1f, 0.999f, 0.001f, 0.19f, 0.0447f, 1e-6f, 0.01f};
    be_run(cpu, lamb_direction, &lb, n, w.h, g.h, s1.h, s2.h, s3.h);
    be_run(other, lamb_direction, &lb, n, w.d, g.d, s1.d, s2.d, s3.d);
    check("lamb direction", &s3, 1e-6);
    check("  m1", &s1, 1e-6);
    check("  m2", &s2, 1e-6);
    be_run(cpu, axpby, n, -0.3f, s3.h, 1.0f, w.h);
    be_run(other, axpby, n, -0.3f, s3.d, 1.0f, w.d);
    be_run(cpu, axpby, n, 0.0f, NULL, 0.7f, w.h);
    be_run(other, axpby, n, 0.0f, NULL, 0.7f, w.d);
    check("axpby (w - 0.3 u, then 0.7 w)", &w, 1e-6);
    /* Sums of squares: three segments, one empty and one past a 4096-value block. */
    const size_t big = 9001;
    buf x = make(big, 116, 1.0f);
    const size_t begin[3] = {0, 10, 10}, end[3] = {10, 10, big};
    double want[3], got[3];
    be_run(cpu, segment_sumsq, 3, begin, end, x.h, want);
    be_run(other, segment_sumsq, 3, begin, end, x.d, got);
    for (int s = 0; s < 3; s++) {
        double exact = 0.0;
        for (size_t i = begin[s]; i < end[s]; i++)
            exact += (double)x.h[i] * x.h[i];
        /* double sums of at most 9001 exact float squares: relative error < 9001 * 2^-53 */
        if (fabs(want[s] - exact) > 1e-12 * exact || fabs(got[s] - exact) > 1e-12 * exact) {
            fprintf(stderr, "FAIL segment_sumsq %d: cpu %.17g, %s %.17g, exact %.17g\n", s,
                    want[s], other->name, got[s], exact);
            test_failures++;
        }
        if (runs_cpu_kernels(other) && got[s] != want[s]) {
            fprintf(stderr, "FAIL segment_sumsq %d: %s differs from cpu\n", s, other->name);
            test_failures++;
        }
    }
    printf("segment_sumsq: %g %g %g\n", want[0], want[1], want[2]);
    drop(&x);
    drop(&w), drop(&g), drop(&s1), drop(&s2), drop(&s3);
}

/* Whether b's arithmetic is the cpu table's own functions (a wrapper of cpu's, as
 * cpu-guarded), so that its results must equal cpu's exactly. */
static int runs_cpu_kernels(const dtnn_backend *b)
{
    const dtnn_backend_ops *o = b->op, *c = cpu->op;
    return o->conv_forward == c->conv_forward && o->conv_backward == c->conv_backward &&
           o->linear_forward == c->linear_forward && o->act_forward == c->act_forward &&
           o->bn_train_forward == c->bn_train_forward && o->loss == c->loss &&
           o->adam_step == c->adam_step && o->binary_forward == c->binary_forward;
}

/* cuda only: bf16 convolutions again with each layout of their copies fixed (in the main run
 * the measurement took one per geometry); nhwc falls back to nchw where cuDNN has no
 * algorithm for it, which the method names printed show. */
static void test_cuda_layouts(void)
{
    dtnn_error err;
    const char *layouts[] = {"nchw", "nhwc"};
    for (int l = 0; l < 2; l++) {
        setenv("DTNN_CUDA_CONV_LAYOUT", layouts[l], 1);
        dtnn_backend *measured = other;
        other = dtnn__backend_create("cuda", 0, &err);
        CHECK_OK(other ? DTNN_OK : err.code, &err);
        if (other) {
            printf("bf16 convolutions, copies in %s:\n", layouts[l]);
            test_conv_cases(DTNN_PRECISION_BF16);
            if (be_check(other, &err) != DTNN_OK) {
                fprintf(stderr, "FAIL: cuda backend (%s): %s\n", layouts[l], err.message);
                test_failures++;
            }
            dtnn__backend_free(other);
        }
        other = measured;
    }
    unsetenv("DTNN_CUDA_CONV_LAYOUT");
}

static void test_backend(const char *name)
{
    dtnn_error err;
    other = dtnn__backend_create(name, 0, &err);
    if (!other) {
        fprintf(stderr, "FAIL: backend %s: %s\n", name, err.message);
        test_failures++;
        return;
    }
    tol_scale = runs_cpu_kernels(other) ? 0.0 : 1.0;
    printf("==== %s against cpu (%s)\n", name,
           tol_scale == 0.0 ? "the cpu's kernels: bit for bit" : "the stated tolerances");
    test_convs();
    if (!strcmp(name, "cuda"))
        test_cuda_layouts();
    test_linear(DTNN_PRECISION_FP32);
    test_linear(DTNN_PRECISION_BF16);
    test_pools();
    test_activations();
    test_batchnorm();
    test_elementwise();
    test_broadcast_pad_shortcut();
    test_losses();
    test_optimizers();
    if (be_check(other, &err) != DTNN_OK) {
        fprintf(stderr, "FAIL: %s backend: %s\n", name, err.message);
        test_failures++;
    }
    dtnn__backend_free(other);
    other = NULL;
}

/* Every registered backend but cpu that can be made on this machine; the others are named
 * with the reason (a cuda build without a device, say). */
int main(void)
{
    dtnn_error err;
    cpu = dtnn__backend_create("cpu", 0, &err);
    if (!cpu) {
        fprintf(stderr, "FAIL: backend cpu: %s\n", err.message);
        return 1;
    }
    int tested = 0;
    for (int i = 0; i < dtnn_device_count(); i++) {
        int usable;
        char why[512];
        const char *name = dtnn_device_name(i, &usable, why, sizeof why);
        if (!strcmp(name, "cpu"))
            continue;
        if (!usable) {
            printf("==== %s: not here (%s)\n", name, why);
            continue;
        }
        test_backend(name);
        tested++;
    }
    CHECK(tested >= 1);     /* cpu-guarded runs everywhere */
    dtnn__backend_free(cpu);
    return test_finish("test_backend_parity");
}
