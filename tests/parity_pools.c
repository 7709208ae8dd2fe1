/*
 * parity_pools.c — the pooling family of test_backend_parity: max pooling (forward, argmax,
 * backward), average pooling (padding counted or not, adaptive), sums, means and L2 norms over
 * channels or planes, nearest and bilinear upsampling, and layer normalisation, each against
 * the cpu backend on odd shapes, written and added. All of it selects, copies or sums in the
 * cpu's order with the shared formulas, so every result is exact (tolerance 0; see the top of
 * test_backend_parity.c).
 */
#include <stdlib.h>

#include "parity.h"

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

void test_pools(void)
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
