/*
 * parity_elementwise.c — the element-wise family of test_backend_parity: add of 2 and 3
 * inputs (with the fused ReLU, one producer twice, an input not wanted), strided and
 * contiguous row copies, fill, the int64 counter, dropout's masks, the count of non-finite
 * values; add, sub, mul and div with NumPy's broadcasts and a shared constant operand;
 * constant padding; and the option-A shortcut, each against the cpu backend. Tolerances as at
 * the top of test_backend_parity.c: exact where only selecting, copying or adding in the
 * cpu's order, 1e-6 for the other arithmetic.
 */
#include <math.h>
#include <stdlib.h>

#include "parity.h"

void test_elementwise(void)
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

void test_broadcast_pad_shortcut(void)
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
