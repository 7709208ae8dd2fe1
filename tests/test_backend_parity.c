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
 *
 * This file holds the harness (parity.h), the convolutions and the linear layer, the
 * activations, softmax, permute and matmul, batch norm, and the driver; the other families of
 * cases are in parity_pools.c, parity_elementwise.c and parity_optim.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conv_case.h"
#include "parity.h"

dtnn_backend *cpu, *other;
/* 1, or 0 where the backend runs the cpu's very kernels (its compute slots are the cpu
 * table's functions, as cpu-guarded's): then every result must be the cpu's bit for bit. */
static double tol_scale = 1.0;

buf make(size_t n, unsigned seed, float scale)
{
    buf b = {malloc(sizeof(float) * (n ? n : 1)), be_alloc(other, sizeof(float) * (n ? n : 1)), n};
    test_fill(b.h, n, seed);
    for (size_t i = 0; i < n; i++)
        b.h[i] *= scale;
    be_upload(other, b.d, b.h, sizeof(float) * n);
    return b;
}

void drop(buf *b)
{
    free(b->h);
    be_free(other, b->d);
}

/* A GPU's result against the CPU's: tolerance tol times the largest magnitude. */
void check(const char *label, const buf *b, double tol)
{
    float *got = malloc(sizeof(float) * (b->n ? b->n : 1));
    be_download(other, got, b->d, sizeof(float) * b->n);
    double peak = 0.0;
    for (size_t i = 0; i < b->n; i++)
        peak = fmax(peak, fabs(b->h[i]));
    test_compare(label, got, b->h, b->n, tol_scale * tol * (peak > 0 ? peak : 1.0), 0.0);
    free(got);
}

void check_doubles(const char *label, const double *dev, const double *want, size_t n,
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

void check_bytes(const char *label, const void *dev, const void *want, size_t bytes)
{
    unsigned char *got = malloc(bytes ? bytes : 1);
    be_download(other, got, dev, bytes);
    const int bad = memcmp(got, want, bytes) != 0;
    printf("%-48s %zu bytes %s\n", label, bytes, bad ? "differ  FAIL" : "identical");
    test_failures += bad;
    free(got);
}

double *dev_doubles(size_t n) { return be_alloc(other, sizeof(double) * n); }

/* Whether b's arithmetic is the cpu table's own functions (a wrapper of cpu's, as
 * cpu-guarded), so that its results must equal cpu's exactly. */
int runs_cpu_kernels(const dtnn_backend *b)
{
    const dtnn_backend_ops *o = b->op, *c = cpu->op;
    return o->conv_forward == c->conv_forward && o->conv_backward == c->conv_backward &&
           o->linear_forward == c->linear_forward && o->act_forward == c->act_forward &&
           o->bn_train_forward == c->bn_train_forward && o->loss == c->loss &&
           o->adam_step == c->adam_step && o->binary_forward == c->binary_forward;
}

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
