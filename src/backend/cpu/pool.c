/*
 * pool.c — max and average pooling (kernel, stride, padding on each side, max pooling's
 * dilation), forward and backward, as torch.nn.MaxPool2d / AvgPool2d (count_include_pad
 * selectable) and AdaptiveAvgPool2d. Max pooling keeps the index of each maximum (first one on
 * ties, like PyTorch) so backward routes the gradient there. The output size (ceil mode or
 * not) comes with the geometry; the kernels only visit the taps inside the input. The window,
 * tie and divisor rules are formulas/pool_formulas.h's, shared with the CUDA kernels.
 */
#include <math.h>
#include <string.h>

#include "../../core/internal.h"
#include "../formulas/pool_formulas.h"
#include "cpu_kernels.h"

#if defined(__AVX2__) && defined(__FMA__)
/* Stride 2 along rows (LeNet's and VGG's 2x2 / 2, ResNet's 3x3 / 2), undilated: 8 (or 4)
 * outputs of a row at once, each tap's inputs x[a], x[a + 2], ..., x[a + 14] gathered from two
 * loads at a and a + 7 (so nothing past the last tap is read) by a shuffle and a permute. The
 * choice is the rows-at-a-time path's, in the same tap order. With 14 outputs a row (LeNet-5's
 * first pooling) the compiler's stride-2 loops ran a third of the row scalar, and a step's two
 * poolings took as long as its first convolution (measurements: docs/perf-notes.md). */
static inline __m256 evens8(const float *a)
{
    const __m256 lo = _mm256_loadu_ps(a), hi = _mm256_loadu_ps(a + 7);
    const __m256 mixed = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 2, 0));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(mixed), 0xd8));
}

static inline __m128 evens4(const float *a)
{
    return _mm_shuffle_ps(_mm_loadu_ps(a), _mm_loadu_ps(a + 3), _MM_SHUFFLE(3, 1, 2, 0));
}

#define STRIDE2_OUTPUTS(name, vec, ivec, evens, cmp, or, andnot, blend, iblend, iset1, iadd,  \
                        iramp, store, istore)                                                  \
    static void name(const pool_geom *g, const float *xp, float *yr, int32_t *ar, int hs,     \
                     int q)                                                                    \
    {                                                                                          \
        const int W = g->W, w0 = 2 * q - g->pad_w;                                             \
        vec best = evens(xp + (size_t)hs * W + w0);                                            \
        ivec at = iadd(iset1(hs * W + w0), iramp);                                             \
        for (int i = 0; i < g->kh; i++)                                                        \
            for (int j = i == 0; j < g->kw; j++) {                                             \
                const int32_t base = (hs + i * g->dil_h) * W + w0 + j;                         \
                const vec v = evens(xp + base);                                                \
                const vec take = or(cmp(v, best, _CMP_GT_OQ),                                  \
                                    andnot(cmp(best, best, _CMP_UNORD_Q),                      \
                                           cmp(v, v, _CMP_UNORD_Q)));                          \
                best = blend(best, v, take);                                                   \
                at = iblend(at, iadd(iset1(base), iramp), take);                               \
            }                                                                                  \
        store(yr + q, best);                                                                   \
        istore(ar + q, at);                                                                    \
    }

#define IBLEND8(a, b, m)                                                                       \
    _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), m))
#define IBLEND4(a, b, m)                                                                       \
    _mm_castps_si128(_mm_blendv_ps(_mm_castsi128_ps(a), _mm_castsi128_ps(b), m))
#define ISTORE8(p, v) _mm256_storeu_si256((__m256i *)(p), v)
#define ISTORE4(p, v) _mm_storeu_si128((__m128i *)(p), v)
STRIDE2_OUTPUTS(stride2_outputs8, __m256, __m256i, evens8, _mm256_cmp_ps, _mm256_or_ps,
                _mm256_andnot_ps, _mm256_blendv_ps, IBLEND8, _mm256_set1_epi32,
                _mm256_add_epi32, _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14),
                _mm256_storeu_ps, ISTORE8)
STRIDE2_OUTPUTS(stride2_outputs4, __m128, __m128i, evens4, _mm_cmp_ps, _mm_or_ps,
                _mm_andnot_ps, _mm_blendv_ps, IBLEND4, _mm_set1_epi32, _mm_add_epi32,
                _mm_setr_epi32(0, 2, 4, 6), _mm_storeu_ps, ISTORE4)

/* Whether the rows of [q0, q1) take the vectors above; then they cover it, the last vector
 * overlapping the one before where the count is not a multiple (the same values again). */
static int stride2_rows(const pool_geom *g, int q0, int q1)
{
    return g->stride_w == 2 && g->dil_w == 1 && q1 - q0 >= 4;
}

static void stride2_row(const pool_geom *g, const float *xp, float *yr, int32_t *ar, int hs,
                        int q0, int q1)
{
    const int lanes = q1 - q0 >= 8 ? 8 : 4;
    for (int q = q0;; q += lanes) {
        const int at = q + lanes <= q1 ? q : q1 - lanes;
        if (lanes == 8)
            stride2_outputs8(g, xp, yr, ar, hs, at);
        else
            stride2_outputs4(g, xp, yr, ar, hs, at);
        if (at + lanes >= q1)
            break;
    }
}
#else
static int stride2_rows(const pool_geom *g, int q0, int q1)
{
    (void)g, (void)q0, (void)q1;
    return 0;
}

static void stride2_row(const pool_geom *g, const float *xp, float *yr, int32_t *ar, int hs,
                        int q0, int q1)
{
    (void)g, (void)xp, (void)yr, (void)ar, (void)hs, (void)q0, (void)q1;
}
#endif

/* The outputs [p0, p1) x [q0, q1) of one plane, whose windows lie inside the image: the same
 * choice as pool_max_window (the first maximum wins ties, the first NaN wins and stays), made
 * a whole output row at a time, tap by tap, with selects the compiler vectorises. Per output,
 * LeNet-5's first pooling was a large share of its training step, and ResNet-50's padded
 * 3x3 / 2 pooling took as long as a 1x1 convolution (measurements: docs/perf-notes.md). */
static void maxpool_block_inside(const pool_geom *g, const float *xp, float *yp, int32_t *ap,
                                 int p0, int p1, int q0, int q1)
{
    const int W = g->W, Q = g->Q, sw = g->stride_w;
    const int vectors = stride2_rows(g, q0, q1);
    for (int p = p0; p < p1; p++) {
        const int hs = p * g->stride_h - g->pad_h;
        float *yr = yp + (size_t)p * Q;
        int32_t *ar = ap + (size_t)p * Q;
        if (vectors) {
            stride2_row(g, xp, yr, ar, hs, q0, q1);
            continue;
        }
        for (int q = q0; q < q1; q++) {
            ar[q] = hs * W + q * sw - g->pad_w;
            yr[q] = xp[ar[q]];
        }
        for (int i = 0; i < g->kh; i++)
            for (int j = 0; j < g->kw; j++) {
                const int32_t base = (hs + i * g->dil_h) * W + j * g->dil_w - g->pad_w;
                /* an index, not a row pointer: base may lie before the plane (the padding) */
                for (int q = q0; q < q1; q++) {
                    const float v = xp[base + q * sw], best = yr[q];
                    const int take = (v > best) | ((v != v) & (best == best));
                    yr[q] = take ? v : best;
                    ar[q] = take ? base + q * sw : ar[q];
                }
            }
    }
}

/* The outputs along one axis whose windows lie inside: [*lo, *hi). */
static void inside_range(int outs, int stride, int pad, int k, int dil, int size, int *lo,
                         int *hi)
{
    *lo = (pad + stride - 1) / stride;
    const int last = size - 1 - (k - 1) * dil + pad;   /* start + pad of the last window inside */
    *hi = last < 0 ? 0 : last / stride + 1;
    if (*hi > outs)
        *hi = outs;
    if (*lo > *hi)
        *lo = *hi;
}

void cpu_maxpool_forward(const pool_geom *g, int n, const float *x, float *y, int32_t *argmax)
{
    const int planes = n * g->C, P = g->P, Q = g->Q;
    int p0, p1, q0, q1;
    inside_range(P, g->stride_h, g->pad_h, g->kh, g->dil_h, g->H, &p0, &p1);
    inside_range(Q, g->stride_w, g->pad_w, g->kw, g->dil_w, g->W, &q0, &q1);
#pragma omp parallel for schedule(guided)
    for (int pl = 0; pl < planes; pl++) {
        const float *xp = x + (size_t)pl * g->H * g->W;
        float *yp = y + (size_t)pl * P * Q;
        int32_t *ap = argmax + (size_t)pl * P * Q;
        maxpool_block_inside(g, xp, yp, ap, p0, p1, q0, q1);
        /* the border: windows that reach into the padding */
        for (int p = 0; p < P; p++) {
            const int interior = p >= p0 && p < p1;
            for (int q = 0; q < Q; q++) {
                if (interior && q == q0)
                    q = q1;
                if (q >= Q)
                    break;
                yp[p * Q + q] = pool_max_window(g, xp, p, q, &ap[p * Q + q]);
            }
        }
    }
}

void cpu_maxpool_backward(const pool_geom *g, int n, const float *dy, const int32_t *argmax,
                          float *dx, int accumulate)
{
    const int planes = n * g->C;
#pragma omp parallel for schedule(guided)
    for (int pl = 0; pl < planes; pl++) {
        float *dxp = dx + (size_t)pl * g->H * g->W;
        const float *dyp = dy + (size_t)pl * g->P * g->Q;
        const int32_t *ap = argmax + (size_t)pl * g->P * g->Q;
        if (!accumulate)
            memset(dxp, 0, sizeof(float) * g->H * g->W);
        for (int i = 0; i < g->P * g->Q; i++)
            if (ap[i] >= 0)
                dxp[ap[i]] += dyp[i];
    }
}

void cpu_avgpool_forward(const pool_geom *g, int n, const float *x, float *y)
{
    const int planes = n * g->C;
#pragma omp parallel for schedule(guided)
    for (int pl = 0; pl < planes; pl++) {
        const float *xp = x + (size_t)pl * g->H * g->W;
        float *yp = y + (size_t)pl * g->P * g->Q;
        for (int p = 0; p < g->P; p++) {
            for (int q = 0; q < g->Q; q++) {
                int h0, h1, w0, w1;
                float divisor = pool_avg_window(g, p, q, &h0, &h1, &w0, &w1);
                float sum = 0.0f;
                for (int h = h0; h < h1; h++)
                    for (int w = w0; w < w1; w++)
                        sum += xp[h * g->W + w];
                yp[p * g->Q + q] = sum / divisor;
            }
        }
    }
}

void cpu_avgpool_backward(const pool_geom *g, int n, const float *dy, float *dx, int accumulate)
{
    const int planes = n * g->C;
#pragma omp parallel for schedule(guided)
    for (int pl = 0; pl < planes; pl++) {
        float *dxp = dx + (size_t)pl * g->H * g->W;
        const float *dyp = dy + (size_t)pl * g->P * g->Q;
        if (!accumulate)
            memset(dxp, 0, sizeof(float) * g->H * g->W);
        for (int p = 0; p < g->P; p++) {
            for (int q = 0; q < g->Q; q++) {
                int h0, h1, w0, w1;
                float divisor = pool_avg_window(g, p, q, &h0, &h1, &w0, &w1);
                float v = dyp[p * g->Q + q] / divisor;
                for (int h = h0; h < h1; h++)
                    for (int w = w0; w < w1; w++)
                        dxp[h * g->W + w] += v;
            }
        }
    }
}
