/*
 * test_gemm.c — dtnn_sgemm, the GEMM every convolution path and fully connected layer runs, on
 * the kernel set DTNN_CPU picks (ctest runs it on the default set, as _generic on the BLAS and,
 * where the build has AVX-512, as _avx2 and _avx512): every transposition, alpha and beta, leading
 * dimensions past the row, and shapes on each side of the register tile's edges (6 rows; 16
 * or 32 columns; a last panel of at most 8 or 16 columns, which a 12-row tile takes), of the k
 * blocks (256; 192 before) and of the column blocks (2048); and strided products (below),
 * each with its own C or all summed into one.
 *
 * Tolerance, from the rounding: each element is a float sum of k products (each product exact
 * inside an FMA, or rounded once), in any order and grouping, then scaled by alpha and added
 * to beta C; every step rounds once, at most k + 2 steps on any path to the result, so
 * |got - exact| <= gamma(k + 2) (|alpha| sum |a||b| + |beta c|), gamma(j) = j u / (1 - j u),
 * u = 2^-24 (Higham, Accuracy and Stability, 3.1 and 3.5). The exact value is computed in
 * double, whose own error is 2^29 times smaller.
 *
 * Bitwise, for dtnn's own GEMM (not the BLAS, whose edge kernels may sum in another order):
 * the result does not depend on the thread count, nor on where an element falls in the
 * register tiles (the top-left corner of a product equals the product of the corner), by
 * construction: one job sums each tile, its k blocks in order, with the same epilogue for
 * full and cut tiles (src/backend/cpu/gemm_packed.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "backend/cpu/cpu_kernels.h"

typedef struct {
    int trans_a, trans_b, m, n, k;
    float alpha, beta;
} gemm_case;

typedef struct {
    int lda, ldb, ldc;
    float *a, *b, *c0;
} operands;

static void operands_make(const gemm_case *t, operands *o, unsigned seed)
{
    const int a_rows = t->trans_a ? t->k : t->m, a_cols = t->trans_a ? t->m : t->k;
    const int b_rows = t->trans_b ? t->n : t->k, b_cols = t->trans_b ? t->k : t->n;
    o->lda = a_cols + 3;
    o->ldb = b_cols + 5;
    o->ldc = t->n + 2;
    o->a = malloc(sizeof(float) * ((size_t)a_rows * o->lda + 1));
    o->b = malloc(sizeof(float) * ((size_t)b_rows * o->ldb + 1));
    o->c0 = malloc(sizeof(float) * (size_t)t->m * o->ldc);
    test_fill(o->a, (size_t)a_rows * o->lda + 1, seed);
    test_fill(o->b, (size_t)b_rows * o->ldb + 1, seed + 1);
    test_fill(o->c0, (size_t)t->m * o->ldc, seed + 2);
    /* beta 0 must overwrite, as a BLAS does: a NaN in C must not survive */
    if (t->beta == 0.0f)
        for (size_t i = 0; i < (size_t)t->m * o->ldc; i += 7)
            o->c0[i] = NAN;
}

static void operands_free(operands *o)
{
    free(o->a), free(o->b), free(o->c0);
}

static float *run(const gemm_case *t, const operands *o, int m, int n)
{
    float *c = malloc(sizeof(float) * (size_t)t->m * o->ldc);
    memcpy(c, o->c0, sizeof(float) * (size_t)t->m * o->ldc);
    dtnn_sgemm(t->trans_a, t->trans_b, m, n, t->k, t->alpha, o->a, o->lda, o->b, o->ldb,
               t->beta, c, o->ldc);
    return c;
}

/* Against the exact product, within the bound above; untouched past n in each row. */
static void check_bound(const gemm_case *t, const operands *o, const float *c)
{
    const double u = ldexp(1.0, -24), j = t->k + 2.0, gamma = j * u / (1.0 - j * u);
    int bad = 0, padding_touched = 0;
    double worst = 0.0;
    for (int i = 0; i < t->m; i++) {
        for (int col = 0; col < t->n; col++) {
            double sum = 0.0, mag = 0.0;
            for (int p = 0; p < t->k; p++) {
                const double av = t->trans_a ? o->a[(size_t)p * o->lda + i]
                                             : o->a[(size_t)i * o->lda + p];
                const double bv = t->trans_b ? o->b[(size_t)col * o->ldb + p]
                                             : o->b[(size_t)p * o->ldb + col];
                sum += av * bv;
                mag += fabs(av * bv);
            }
            const double c0 = t->beta == 0.0f ? 0.0 : o->c0[(size_t)i * o->ldc + col];
            const double want = t->alpha * sum + t->beta * c0;
            const double bound = gamma * (fabs(t->alpha) * mag + fabs(t->beta * c0));
            const double err = fabs(c[(size_t)i * o->ldc + col] - want);
            if (!(err <= bound))
                bad++;
            if (bound > 0 && err / bound > worst)
                worst = err / bound;
        }
        for (int col = t->n; col < o->ldc; col++) {
            const float was = o->c0[(size_t)i * o->ldc + col], is = c[(size_t)i * o->ldc + col];
            if (memcmp(&was, &is, sizeof was))
                padding_touched++;
        }
    }
    printf("gemm %c%c m %4d n %4d k %4d alpha %g beta %g: worst error %.3f of the bound%s\n",
           t->trans_a ? 'T' : 'N', t->trans_b ? 'T' : 'N', t->m, t->n, t->k, (double)t->alpha,
           (double)t->beta, worst, bad ? "  FAIL" : "");
    CHECK(bad == 0);
    CHECK(padding_touched == 0);
}

/* The corner [0, m') x [0, n') of the whole product, computed alone: the same bits. */
static void check_corner(const gemm_case *t, const operands *o, const float *whole)
{
    const int m2 = t->m > 7 ? t->m - 7 : t->m, n2 = t->n > 17 ? t->n - 17 : t->n;
    float *c = run(t, o, m2, n2);
    int differ = 0;
    for (int i = 0; i < m2; i++)
        differ += memcmp(c + (size_t)i * o->ldc, whole + (size_t)i * o->ldc,
                         sizeof(float) * n2) != 0;
    CHECK(differ == 0);
    free(c);
}

/* Strided products (a pointwise convolution's batch: dtnn__sgemm_strided, the chosen set's):
 * `count` products, A shared (stride 0) or one each, C one each or all summed into one (beta
 * applied once). Each output against its exact sum, within gamma(j) of the magnitudes as
 * above, j = k + 2 or, summed into one C, count k + 2; and bitwise the same at 1 and 2
 * threads, which take whole products (count even) or blocks of each product (odd). */
typedef struct {
    int count, trans_a, trans_b, m, n, k, shared_a, shared_c;
    float beta;
} strided_case;

static void check_strided(const strided_case *t, unsigned seed, int own)
{
    const size_t a_len = (size_t)t->m * t->k, b_len = (size_t)t->k * t->n;
    const size_t c_len = (size_t)t->m * t->n;
    const size_t sa = t->shared_a ? 0 : a_len, sc = t->shared_c ? 0 : c_len;
    const int lda = t->trans_a ? t->m : t->k, ldb = t->trans_b ? t->k : t->n;
    const int outs = t->shared_c ? 1 : t->count;
    float *a = malloc(sizeof(float) * a_len * (t->shared_a ? 1 : t->count));
    float *b = malloc(sizeof(float) * b_len * t->count);
    float *c0 = malloc(sizeof(float) * c_len * outs), *c[2];
    test_fill(a, a_len * (t->shared_a ? 1 : t->count), seed);
    test_fill(b, b_len * t->count, seed + 1);
    test_fill(c0, c_len * outs, seed + 2);
    for (int th = 1; th <= 2; th++) {
        dtnn_set_threads(th);
        c[th - 1] = malloc(sizeof(float) * c_len * outs);
        memcpy(c[th - 1], c0, sizeof(float) * c_len * outs);
        dtnn__sgemm_strided(t->count, t->trans_a, t->trans_b, t->m, t->n, t->k, 1.0f, a, lda,
                            sa, b, ldb, b_len, t->beta, c[th - 1], t->n, sc, 0);
    }
    if (own)
        CHECK(memcmp(c[0], c[1], sizeof(float) * c_len * outs) == 0);
    const double u = ldexp(1.0, -24);
    const double j = (t->shared_c ? (double)t->count * t->k : t->k) + 2.0;
    const double gamma = j * u / (1.0 - j * u);
    int bad = 0;
    double worst = 0.0;
    for (int o = 0; o < outs; o++)
        for (int i = 0; i < t->m; i++)
            for (int col = 0; col < t->n; col++) {
                double sum = 0.0, mag = 0.0;
                for (int item = 0; item < t->count; item++) {
                    if (!t->shared_c && item != o)
                        continue;
                    const float *ai = a + item * sa, *bi = b + item * b_len;
                    for (int p = 0; p < t->k; p++) {
                        const double av = t->trans_a ? ai[(size_t)p * lda + i]
                                                     : ai[(size_t)i * lda + p];
                        const double bv = t->trans_b ? bi[(size_t)col * ldb + p]
                                                     : bi[(size_t)p * ldb + col];
                        sum += av * bv;
                        mag += fabs(av * bv);
                    }
                }
                const double c_was = c0[o * c_len + (size_t)i * t->n + col];
                const double want = sum + (double)t->beta * c_was;
                const double bound = gamma * (mag + fabs((double)t->beta * c_was));
                const double err = fabs(c[1][o * c_len + (size_t)i * t->n + col] - want);
                if (!(err <= bound))
                    bad++;
                if (bound > 0 && err / bound > worst)
                    worst = err / bound;
            }
    printf("strided %d x %c%c m %3d n %3d k %3d, A %s, C %s: worst error %.3f of the bound%s\n",
           t->count, t->trans_a ? 'T' : 'N', t->trans_b ? 'T' : 'N', t->m, t->n, t->k,
           t->shared_a ? "shared" : "each", t->shared_c ? "shared" : "each", worst,
           bad ? "  FAIL" : "");
    CHECK(bad == 0);
    free(a), free(b), free(c0), free(c[0]), free(c[1]);
}

int main(void)
{
    if (tu_kernels_unavailable("test_gemm"))
        return 77;
    char name[128];
    const int own = strncmp(dtnn_cpu_gemm_name(name, sizeof name), "dtnn", 4) == 0;
    printf("test_gemm: cpu kernels %s, gemm %s\n", dtnn_cpu_kernels_name(), name);
    const gemm_case cases[] = {
        {0, 0, 1, 1, 1, 1.0f, 0.0f},       {0, 0, 5, 15, 3, 1.0f, 0.0f},
        {0, 0, 6, 16, 7, 1.0f, 1.0f},      {0, 0, 7, 33, 191, 0.5f, 0.0f},
        {1, 0, 13, 31, 192, 1.0f, 1.0f},   {0, 1, 12, 32, 193, -2.0f, 0.25f},
        {1, 1, 19, 47, 257, 1.0f, 0.0f},   {0, 0, 64, 100, 0, 1.0f, 0.5f},
        {0, 1, 64, 576, 1100, 1.0f, 1.0f}, {1, 0, 100, 2100, 300, 1.0f, 0.0f},
        {0, 0, 97, 2049, 64, 1.0f, -1.0f}, {0, 1, 200, 10, 512, 1.0f, 0.0f},
        {0, 0, 1024, 196, 256, 1.0f, 0.0f}, {1, 0, 26, 49, 70, 1.0f, 0.5f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const gemm_case *t = &cases[i];
        operands o;
        operands_make(t, &o, 11 + (unsigned)i);
        dtnn_set_threads(2);
        float *c = run(t, &o, t->m, t->n);
        check_bound(t, &o, c);
        if (own) {
            dtnn_set_threads(1);
            float *c1 = run(t, &o, t->m, t->n);
            CHECK(memcmp(c, c1, sizeof(float) * (size_t)t->m * o.ldc) == 0);
            free(c1);
            check_corner(t, &o, c);
        }
        free(c);
        operands_free(&o);
    }
    const strided_case strided[] = {
        {4, 0, 0, 30, 196, 600, 1, 0, 0.0f}, {5, 1, 0, 40, 70, 300, 1, 0, 0.5f},
        {6, 0, 0, 13, 33, 400, 0, 0, 1.0f},  {4, 0, 1, 24, 20, 530, 0, 1, 0.25f},
    };
    for (size_t i = 0; i < sizeof strided / sizeof strided[0]; i++)
        check_strided(&strided[i], 101 + 3 * (unsigned)i, own);
    return test_finish("test_gemm");
}
