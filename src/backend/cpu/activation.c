/*
 * activation.c — the CPU's element-wise activations (ReLU, leaky ReLU, sigmoid, tanh, ReLU6,
 * hard sigmoid, hard swish, clamp, hardtanh, SiLU, GELU) and their derivatives: one loop per
 * kind, so each vectorises on its own; a kind without its own loop here takes the generic one
 * through act_value / act_gradient. On the fast sets SiLU and GELU, whose libm calls do not
 * vectorise, compute e^x and 1 + erf eight values at a time (exp8, one_plus_erf8). All call the per-element formulas of formulas/activation_formulas.h
 * (shared with the CUDA backend, where their definitions and PyTorch's conventions at the
 * joins are given).
 */
#include <math.h>

#include "cpu_kernels.h"
#include "../formulas/activation_formulas.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

/* e^v for 8 floats: v = n ln 2 + r, n = round(v log2 e), r within ln 2 / 2 of 0 (ln 2 in two
 * parts, Cody and Waite, so n ln 2 subtracts exactly), e^r by Cephes' degree-7 polynomial
 * (relative error about 1e-7, that of expf), 2^n built in the exponent field. Above 88.72,
 * where expf overflows, the result is infinity as expf's; otherwise v is clamped to
 * [-87.3, 88] (2^n stays a normal float), so between 88 and 88.72 and below -87.3 it is about
 * 1.7e38 and 1.2e-38 where expf goes on to 3.4e38 and to 0: SiLU divides by 1 + e^-x, and its
 * value there, |x| e^-|x| < 1e-35, is as small either way. A NaN v stays NaN through the
 * clamp's order of operands. */
static inline __m256 exp8(__m256 v)
{
    const __m256 overflows = _mm256_cmp_ps(v, _mm256_set1_ps(88.7228394f), _CMP_GT_OQ);
    const __m256 underflows = _mm256_cmp_ps(v, _mm256_set1_ps(-103.972f), _CMP_LT_OQ);
    v = _mm256_min_ps(_mm256_set1_ps(88.0f), v);
    v = _mm256_max_ps(_mm256_set1_ps(-87.3f), v);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(v, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), v);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i bits = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    const __m256 e = _mm256_blendv_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(bits)),
                                      _mm256_set1_ps(INFINITY), overflows);
    return _mm256_andnot_ps(underflows, e);
}

/* 1 + erf(w) = erfc(-w) for 8 floats: erfc(|w|) by the Chebyshev fit of Numerical Recipes'
 * erfcc, t e^(-w^2 + P(t)) with t = 1 / (1 + |w| / 2) (fractional error below 1.2e-7 over
 * w >= 0), then 2 - erfc(|w|) for w >= 0. So 1 + erf(w) keeps its relative accuracy where it
 * is small (GELU's negative side), which 1 + erf(w) computed from erf loses there. The
 * exponent's rounding, about 6e-8 |w^2|, adds that much relative error where the value is
 * below e^-w^2 (under 1e-7 from |w| > 4 on). */
static inline __m256 one_plus_erf8(__m256 w)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), w);
    const __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.5f), a, one));
    __m256 p = _mm256_set1_ps(0.17087277f);
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.82215223f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.48851587f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.13520398f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.27886807f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.18628806f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.09678418f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.37409196f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.00002368f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.26551223f));
    const __m256 erfc = _mm256_mul_ps(t, exp8(_mm256_fnmadd_ps(a, a, p)));
    const __m256 negative = _mm256_cmp_ps(w, _mm256_setzero_ps(), _CMP_LT_OQ);
    return _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(2.0f), erfc), erfc, negative);
}

/* y = f8(x) over n values, 8 at a time, the tail by the scalar formula f; and dx = g or
 * dx += g likewise for a slope. Static, each called with constant functions, so the compiler
 * makes one loop per activation. */
static void map8(long long n, const float *x, float *y, __m256 (*f8)(__m256), float (*f)(float))
{
    const long long n8 = n & ~7LL;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (long long i = 0; i < n8; i += 8)
        _mm256_storeu_ps(y + i, f8(_mm256_loadu_ps(x + i)));
    for (long long i = n8; i < n; i++)
        y[i] = f(x[i]);
}

static void slope8(long long n, const float *x, const float *dy, float *dx, int accumulate,
                   __m256 (*g8)(__m256, __m256), float (*g)(float, float))
{
    const long long n8 = n & ~7LL;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (long long i = 0; i < n8; i += 8) {
        __m256 v = g8(_mm256_loadu_ps(x + i), _mm256_loadu_ps(dy + i));
        if (accumulate)
            v = _mm256_add_ps(_mm256_loadu_ps(dx + i), v);
        _mm256_storeu_ps(dx + i, v);
    }
    for (long long i = n8; i < n; i++)
        dx[i] = accumulate ? dx[i] + g(x[i], dy[i]) : g(x[i], dy[i]);
}

/* GELU x (1 + erf(x / sqrt 2)) / 2 and its slope dy (cdf + x pdf), cdf = (1 + erf) / 2,
 * pdf = e^(-x^2 / 2) / sqrt(2 pi), as the formulas (erff and expf per value made GELU
 * ConvNeXt's dearest element-wise layer). */
static __m256 gelu8(__m256 v)
{
    const __m256 c = one_plus_erf8(_mm256_mul_ps(v, _mm256_set1_ps(ACT_GELU_SQRT1_2)));
    return _mm256_mul_ps(_mm256_mul_ps(v, _mm256_set1_ps(0.5f)), c);
}

static __m256 gelu_grad8(__m256 v, __m256 dy)
{
    const __m256 cdf = _mm256_mul_ps(
        _mm256_set1_ps(0.5f), one_plus_erf8(_mm256_mul_ps(v, _mm256_set1_ps(ACT_GELU_SQRT1_2))));
    const __m256 pdf = _mm256_mul_ps(
        exp8(_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(-0.5f), v), v)),
        _mm256_set1_ps(ACT_GELU_ALPHA));
    return _mm256_mul_ps(dy, _mm256_fmadd_ps(v, pdf, cdf));
}

/* SiLU x / (1 + e^-x) and its slope dy s (1 + x (1 - s)), s = 1 / (1 + e^-x), as the
 * formulas write them, on exp8: expf, a libm call per value, made SiLU 5x dearer than a ReLU
 * pass (EfficientNet's most frequent layer). */
static __m256 silu8(__m256 v)
{
    const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), v));
    return _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

static __m256 silu_grad8(__m256 v, __m256 dy)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), v));
    const __m256 s = _mm256_div_ps(one, _mm256_add_ps(one, e));
    const __m256 slope = _mm256_add_ps(one, _mm256_mul_ps(v, _mm256_sub_ps(one, s)));
    return _mm256_mul_ps(_mm256_mul_ps(dy, s), slope);
}
#endif

/* _Pragma takes one string: this makes it of a pragma with a macro argument inside. */
#define ACT_PRAGMA(text) _Pragma(#text)

/* y = expr for every i, split over the threads from more than `above` values on (below, a
 * fork/join costs more than the pass; sigmoid and tanh, dearer per value, split sooner). */
#define ACT_MAP(above, expr)                                                                  \
    do {                                                                                      \
        ACT_PRAGMA(omp parallel for schedule(static) if (n > above))                          \
        for (long long i = 0; i < n; i++)                                                     \
            y[i] = (expr);                                                                    \
    } while (0)

void cpu_act_forward(act_kind kind, float a, float b, size_t count, const float *x, float *y)
{
    const long long n = (long long)count;
    switch (kind) {
    case ACT_RELU:
        ACT_MAP(65536, act_relu(x[i]));
        break;
    case ACT_LEAKY_RELU:
        ACT_MAP(65536, act_leaky_relu(x[i], a));
        break;
    case ACT_SIGMOID:
        ACT_MAP(16384, act_sigmoid(x[i]));
        break;
    case ACT_TANH:
        ACT_MAP(16384, act_tanh(x[i]));
        break;
    case ACT_RELU6:
        ACT_MAP(65536, act_relu6(x[i]));
        break;
    case ACT_HARDSIGMOID:
        if (act_hardsigmoid_is_torch(a, b))
            ACT_MAP(65536, act_hardsigmoid_torch(x[i]));
        else
            ACT_MAP(65536, act_hardsigmoid_affine(x[i], a, b));
        break;
    case ACT_HARDSWISH:
        ACT_MAP(65536, act_hardswish(x[i]));
        break;
    case ACT_CLAMP:
    case ACT_HARDTANH:
        ACT_MAP(65536, act_clamp(x[i], a, b));
        break;
#if defined(__AVX2__) && defined(__FMA__)
    case ACT_GELU:
        map8(n, x, y, gelu8, act_gelu);
        break;
#endif
    case ACT_SILU:
#if defined(__AVX2__) && defined(__FMA__)
        map8(n, x, y, silu8, act_silu);
#else
        ACT_MAP(16384, act_silu(x[i]));
#endif
        break;
    default: {
        const int torch = act_hardsigmoid_is_torch(a, b);
        ACT_MAP(16384, act_value(kind, x[i], a, b, torch));
        break;
    }
    }
}

/* dx = g or dx += g, with the branch hoisted out of the loop so both loops vectorise. */
#define ACT_STORE(expr)                                                                       \
    do {                                                                                      \
        if (accumulate) {                                                                     \
            _Pragma("omp parallel for schedule(static) if (n > 65536)")                       \
            for (long long i = 0; i < n; i++)                                                 \
                dx[i] += (expr);                                                              \
        } else {                                                                              \
            _Pragma("omp parallel for schedule(static) if (n > 65536)")                       \
            for (long long i = 0; i < n; i++)                                                 \
                dx[i] = (expr);                                                               \
        }                                                                                     \
    } while (0)

void cpu_act_backward(act_kind kind, float a, float b, size_t count, const float *x,
                      const float *y, const float *dy, float *dx, int accumulate)
{
    const long long n = (long long)count;
    switch (kind) {
    case ACT_RELU:
        ACT_STORE(act_relu_grad(x[i], dy[i]));
        break;
    case ACT_LEAKY_RELU:
        ACT_STORE(act_leaky_relu_grad(x[i], dy[i], a));
        break;
    case ACT_SIGMOID:
        ACT_STORE(act_sigmoid_grad(y[i], dy[i]));
        break;
    case ACT_TANH:
        ACT_STORE(act_tanh_grad(y[i], dy[i]));
        break;
    case ACT_RELU6:
        ACT_STORE(act_relu6_grad(x[i], dy[i]));
        break;
    case ACT_HARDSIGMOID:
        if (act_hardsigmoid_is_torch(a, b))
            ACT_STORE(act_hardsigmoid_torch_grad(x[i], dy[i]));
        else
            ACT_STORE(act_hardsigmoid_affine_grad(x[i], dy[i], a, b));
        break;
    case ACT_HARDSWISH:
        ACT_STORE(act_hardswish_grad(x[i], dy[i]));
        break;
    case ACT_CLAMP:
        ACT_STORE(act_clamp_grad(x[i], dy[i], a, b));
        break;
    case ACT_HARDTANH:
        ACT_STORE(act_hardtanh_grad(x[i], dy[i], a, b));
        break;
#if defined(__AVX2__) && defined(__FMA__)
    case ACT_GELU:
        slope8(n, x, dy, dx, accumulate, gelu_grad8, act_gelu_grad);
        break;
#endif
    case ACT_SILU:
#if defined(__AVX2__) && defined(__FMA__)
        slope8(n, x, dy, dx, accumulate, silu_grad8, act_silu_grad);
#else
        ACT_STORE(act_silu_grad(x[i], dy[i]));
#endif
        break;
    default: {
        const int torch = act_hardsigmoid_is_torch(a, b), reads_y = act_gradient_reads_output(kind);
        ACT_STORE(act_gradient(kind, x[i], reads_y ? y[i] : 0.0f, dy[i], a, b, torch));
        break;
    }
    }
}
