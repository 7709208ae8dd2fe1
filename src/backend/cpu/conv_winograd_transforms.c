/*
 * conv_winograd_transforms.c — the transforms of the CPU's Winograd convolution
 * (conv_winograd.c describes the method): the filters' G g G^T, the inputs' B^T d B through
 * their parity or phase planes, the outputs' A^T M A, the output gradients' A dy A^T and the
 * filter gradient's G^T dU G, in double where they are computed once per step (filters) and
 * in AVX vectors of 8 or SSE vectors of 4 tiles elsewhere. The vector forms of one transform
 * for both widths are one macro template each, instantiated per width.
 */
#include <string.h>

#include "../../core/half.h"
#include "conv_winograd.h"

#ifdef CONV_WINOGRAD

/* The filter transforms G (alpha x 3, alpha = m + 2): rows for the interpolation points 0,
 * +-1 and infinity (F(2x2)) and 0, +-1, +-2 and infinity (F(4x4)). */
static const double G2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
static const double G4[6][3] = {{1.0 / 4, 0, 0},
                                {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                {0, 0, 1}};

/* v [alpha][alpha] = G g G^T in double, rounded once, for 4 filters at a time (a lane
 * each); inlined with alpha a constant (as a runtime loop bound, transforming 64 x 64
 * filters for F(4x4) was a large share of an 8x8 layer's step), four filters at once since one
 * at a time in scalar double it was still a visible share of a ResNet-20 step (measurements:
 * docs/perf-notes.md): the same multiplies and adds in the same order, four lanes at once,
 * give the same floats. */
static inline __m256d dot3(__m256d a0, __m256d a1, __m256d a2, double b0, double b1,
                           double b2)
{
    return _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(a0, _mm256_set1_pd(b0)),
                                       _mm256_mul_pd(a1, _mm256_set1_pd(b1))),
                         _mm256_mul_pd(a2, _mm256_set1_pd(b2)));
}

static inline void filter_tiles4(int alpha, const double (*G)[3], const __m256d g[3][3],
                                 __m128 *v)
{
    __m256d t[6][3];
    for (int a = 0; a < alpha; a++)
        for (int s = 0; s < 3; s++)
            t[a][s] = dot3(g[0][s], g[1][s], g[2][s], G[a][0], G[a][1], G[a][2]);
    for (int a = 0; a < alpha; a++)
        for (int b = 0; b < alpha; b++)
            v[a * alpha + b] =
                _mm256_cvtpd_ps(dot3(t[a][0], t[a][1], t[a][2], G[b][0], G[b][1], G[b][2]));
}

/* Tap (r, s) of the filter of output o and input i: w [o][i] (forward) or w [i][o] rotated
 * by 180 degrees (input gradient: outs = C, ins = K); 0 past the last output or input; rounded
 * to bf16 where wg asks. */
static inline double filter_tap(const wino_geom *wg, const float *w, int C, int outs, int ins,
                                int for_input_grad, int o, int i, int r, int s)
{
    if (o >= outs || i >= ins)
        return 0.0;
    const float v = for_input_grad ? w[((size_t)i * C + o) * 9 + (2 - r) * 3 + 2 - s]
                                   : w[((size_t)o * C + i) * 9 + r * 3 + s];
    return wg->bf16 & CPU_WINO_BF16 ? bf16_round(v) : v;
}

/* v[xi] = the transforms of 4 filters, tap (r, s) of lane j being tap(o[j], i[j], r, s) */
static inline void filter_lanes(const wino_geom *wg, const float *w, int C, int outs, int ins,
                                int for_input_grad, const int o[4], const int i[4], __m128 *v)
{
    __m256d g[3][3];
    for (int r = 0; r < 3; r++)
        for (int s = 0; s < 3; s++)
            g[r][s] = _mm256_set_pd(filter_tap(wg, w, C, outs, ins, for_input_grad, o[3], i[3], r, s),
                                    filter_tap(wg, w, C, outs, ins, for_input_grad, o[2], i[2], r, s),
                                    filter_tap(wg, w, C, outs, ins, for_input_grad, o[1], i[1], r, s),
                                    filter_tap(wg, w, C, outs, ins, for_input_grad, o[0], i[0], r, s));
    if (wg->m == 2)
        filter_tiles4(4, G2, g, v);
    else
        filter_tiles4(6, G4, g, v);
}

/* Input channels IB at a time: their transforms go to a buffer first and out position by
 * position, in runs of IB * KB (or IB) floats. Written pair by pair, the 16 or 36 stores of a
 * pair were a slab apart (16 KiB for 64 channels: all in one L1 set), and the transform
 * stalled on those conflicts (measurements: docs/perf-notes.md). */
enum { IB = 16 };

/* U as [xi][outs / KB][ins][KB] for wino_tile (channels past the last block's end 0): lanes
 * are KB = 4 output channels. */
static void filters_blocked(const wino_geom *wg, const float *w, int C, int outs, int ins,
                            int for_input_grad, float *u)
{
    const long long nb = (long long)channel_blocks(outs);
#pragma omp parallel for schedule(guided)
    for (long long b = 0; b < nb; b++)
        for (int i0 = 0; i0 < ins; i0 += IB) {
            const int ni = ins - i0 < IB ? ins - i0 : IB;
            __m128 v[IB][XI_MAX];
            for (int i = 0; i < ni; i++) {
                const int o[4] = {(int)b * KB, (int)b * KB + 1, (int)b * KB + 2, (int)b * KB + 3};
                const int in[4] = {i0 + i, i0 + i, i0 + i, i0 + i};
                filter_lanes(wg, w, C, outs, ins, for_input_grad, o, in, v[i]);
            }
            for (int xi = 0; xi < wg->xi; xi++) {
                float *dst = u + (((size_t)xi * nb + b) * ins + i0) * KB;
                for (int i = 0; i < ni; i++)
                    _mm_storeu_ps(dst + i * KB, v[i][xi]);
            }
        }
}

/* U as xi row-major [outs][ins] matrices for the GEMMs: lanes are 4 consecutive inputs of one
 * output, so each store is 4 floats of a row and IB inputs fill one 64-byte line of each
 * position's row. With lanes along the outputs, stored a float at a time, transforming 512 x
 * 512 filters for F(4x4) took as long as the products of a 4x4 layer at batch 64 (measurements:
 * docs/perf-notes.md). */
static void filters_rows(const wino_geom *wg, const float *w, int C, int outs, int ins,
                         int for_input_grad, float *u)
{
#pragma omp parallel for schedule(guided)
    for (long long ol = 0; ol < outs; ol++)
        for (int i0 = 0; i0 < ins; i0 += IB) {
            const int o = (int)ol, ni = ins - i0 < IB ? ins - i0 : IB;
            __m128 v[IB / 4][XI_MAX];
            for (int q = 0; 4 * q < ni; q++) {
                const int os[4] = {o, o, o, o};
                const int in[4] = {i0 + 4 * q, i0 + 4 * q + 1, i0 + 4 * q + 2, i0 + 4 * q + 3};
                filter_lanes(wg, w, C, outs, ins, for_input_grad, os, in, v[q]);
            }
            for (int xi = 0; xi < wg->xi; xi++) {
                float *dst = u + ((size_t)xi * outs + o) * ins + i0;
                for (int q = 0; 4 * q < ni; q++) {
                    if (4 * q + 4 <= ni) {
                        _mm_storeu_ps(dst + 4 * q, v[q][xi]);
                        continue;
                    }
                    float lanes[4];
                    _mm_storeu_ps(lanes, v[q][xi]);
                    memcpy(dst + 4 * q, lanes, sizeof(float) * (size_t)(ni - 4 * q));
                }
            }
        }
}

/* U = G g G^T, g = w [k][c] (forward) or w [c][k] rotated by 180 degrees (input gradient:
 * outs = C, ins = K), blocked for wino_tile or, with `rows`, as row-major matrices. */
void wino_transform_filters(const wino_geom *wg, const float *w, int K, int C,
                            int for_input_grad, int rows, float *u)
{
    const int outs = for_input_grad ? C : K, ins = for_input_grad ? K : C;
    if (rows)
        filters_rows(wg, w, C, outs, ins, for_input_grad, u);
    else
        filters_blocked(wg, w, C, outs, ins, for_input_grad, u);
}

/* The four parity planes of one zero-padded plane: par[a][b][rr * PW + cc] is padded pixel
 * (2 rr + a, 2 cc + b), padded pixel (y, x) being input pixel (y - 1, x - 1). Input column
 * 2 cc goes to the odd plane at cc, column 2 cc + 1 to the even plane at cc + 1: a row is
 * split 8 floats at a time (cols is a multiple of 8). */
static void split_parity(const wino_geom *wg, const float *src, const float *next, float *par)
{
    const int TW = wg->TW, PW = wg->PW;
    for (int y = 0; y < 2 * wg->TH + 2; y++) {
        if (y < wg->rows)
            prefetch_floats(next + (size_t)y * wg->cols, (size_t)wg->cols);
        float *even = par + (size_t)(y % 2 * 2) * wg->plane + (size_t)(y / 2) * PW;
        float *odd = even + wg->plane;
        if (y == 0 || y > wg->rows) {
            memset(even, 0, sizeof(float) * PW);
            memset(odd, 0, sizeof(float) * PW);
            continue;
        }
        const float *row = src + (size_t)(y - 1) * wg->cols;
        for (int cc = 0; cc < TW; cc += 4) {
            __m128 lo = _mm_loadu_ps(row + 2 * cc), hi = _mm_loadu_ps(row + 2 * cc + 4);
            if (wg->bf16 & CPU_WINO_BF16) {
                lo = round_bf16_4(lo);
                hi = round_bf16_4(hi);
            }
            _mm_storeu_ps(odd + cc, _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)));
            _mm_storeu_ps(even + 1 + cc, _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)));
        }
        even[0] = 0.0f;
        odd[TW] = 0.0f;
    }
}

/* V[xi][tile] (xi_stride floats apart) = B^T d B for every tile of one plane, a vector of
 * tiles at a time: 8 (AVX) where rows of tiles are whole eights, two rows of 4 (AVX, `rows`
 * 2, load taking each half from its row), else 4 (SSE). */
#define TRANSFORM_INPUT(name, vec, lanes, rows, load, store, add, sub)                        \
    static void name(const wino_geom *wg, const float *par, float *v, size_t xi_stride)       \
    {                                                                                          \
        const int PW = wg->PW;                                                                 \
        for (int ty = 0; ty < wg->TH; ty += (rows))                                            \
            for (int tx = 0; tx < wg->TW; tx += (lanes)) {                                     \
                vec e[4][4];                                                                   \
                for (int i = 0; i < 4; i++) {                                                  \
                    const float *pe = par + (size_t)(i % 2 * 2) * wg->plane +                  \
                                      (size_t)(ty + i / 2) * PW + tx;                          \
                    const float *po = pe + wg->plane;                                          \
                    vec d0 = load(pe), d1 = load(po), d2 = load(pe + 1), d3 = load(po + 1);   \
                    e[i][0] = sub(d0, d2);                                                     \
                    e[i][1] = add(d1, d2);                                                     \
                    e[i][2] = sub(d2, d1);                                                     \
                    e[i][3] = sub(d1, d3);                                                     \
                }                                                                              \
                float *dst = v + (size_t)ty * wg->TW + tx;                                     \
                for (int j = 0; j < 4; j++) {                                                  \
                    store(dst + (0 * 4 + j) * xi_stride, sub(e[0][j], e[2][j]));               \
                    store(dst + (1 * 4 + j) * xi_stride, add(e[1][j], e[2][j]));               \
                    store(dst + (2 * 4 + j) * xi_stride, sub(e[2][j], e[1][j]));               \
                    store(dst + (3 * 4 + j) * xi_stride, sub(e[1][j], e[3][j]));               \
                }                                                                              \
            }                                                                                  \
    }

/* 4 floats at p in the low half, 4 at p + next in the high half */
static inline __m256 load_halves(const float *p, size_t next)
{
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(p)), _mm_loadu_ps(p + next),
                                1);
}
/* (the transform's local PW: the next tile row of a parity plane) */
#define LOAD_ROW_PAIR(p) load_halves((p), (size_t)PW)

TRANSFORM_INPUT(transform_input8, __m256, 8, 1, _mm256_loadu_ps, _mm256_storeu_ps,
                _mm256_add_ps, _mm256_sub_ps)
TRANSFORM_INPUT(transform_input8_pair, __m256, 8, 2, LOAD_ROW_PAIR, _mm256_storeu_ps,
                _mm256_add_ps, _mm256_sub_ps)
TRANSFORM_INPUT(transform_input4, __m128, 4, 1, _mm_loadu_ps, _mm_storeu_ps, _mm_add_ps,
                _mm_sub_ps)

/* Outputs of a vector of tiles (A^T m A) from m[xi * xi_stride ..], written or added to the
 * two output rows at `out` (row stride cols), + bias: 8 tiles (AVX) or 4 (SSE), as the input
 * transform. The two output columns of each tile are interleaved into a row with unpacks;
 * the second half of the tiles goes `second` floats on (the next 8 columns, or for a pair of
 * tile rows two output rows down). */
#define TRANSFORM_OUTPUT(name, vec, load, store, add, sub, set1, interleave, second, rnd)     \
    static void name(const float *m, size_t xi_stride, float bias, int round, int cols,       \
                     float *out, int accumulate)                                               \
    {                                                                                          \
        vec s[2][4];                                                                           \
        for (int j = 0; j < 4; j++) {                                                          \
            vec m0 = load(m + (0 * 4 + j) * xi_stride), m1 = load(m + (1 * 4 + j) * xi_stride); \
            vec m2 = load(m + (2 * 4 + j) * xi_stride), m3 = load(m + (3 * 4 + j) * xi_stride); \
            s[0][j] = add(add(m0, m1), m2);                                                    \
            s[1][j] = sub(sub(m1, m2), m3);                                                    \
        }                                                                                      \
        const vec b = set1(bias);                                                              \
        for (int a = 0; a < 2; a++) {                                                          \
            vec even = add(add(s[a][0], s[a][1]), s[a][2]);                                    \
            vec odd = sub(sub(s[a][1], s[a][2]), s[a][3]);                                     \
            if (round) {                                                                       \
                even = rnd(even);                                                              \
                odd = rnd(odd);                                                                \
            }                                                                                  \
            even = add(even, b);                                                               \
            odd = add(odd, b);                                                                 \
            vec lo, hi;                                                                        \
            interleave(even, odd, lo, hi);                                                     \
            float *row = out + (size_t)a * cols;                                               \
            const size_t half = (second);                                                      \
            if (accumulate) {                                                                  \
                lo = add(lo, load(row));                                                       \
                hi = add(hi, load(row + half));                                                \
            }                                                                                  \
            store(row, lo);                                                                    \
            store(row + half, hi);                                                             \
        }                                                                                      \
    }

#define INTERLEAVE4(e, o, lo, hi) ((lo) = _mm_unpacklo_ps(e, o), (hi) = _mm_unpackhi_ps(e, o))
/* 256-bit unpacks work within 128-bit halves: put the halves back in order */
#define INTERLEAVE8(e, o, lo, hi)                                                              \
    do {                                                                                       \
        __m256 l_ = _mm256_unpacklo_ps(e, o), h_ = _mm256_unpackhi_ps(e, o);                   \
        (lo) = _mm256_permute2f128_ps(l_, h_, 0x20);                                           \
        (hi) = _mm256_permute2f128_ps(l_, h_, 0x31);                                           \
    } while (0)

TRANSFORM_OUTPUT(transform_output8, __m256, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_add_ps,
                 _mm256_sub_ps, _mm256_set1_ps, INTERLEAVE8, 8, round_bf16_8)
TRANSFORM_OUTPUT(transform_output8_pair, __m256, _mm256_loadu_ps, _mm256_storeu_ps,
                 _mm256_add_ps, _mm256_sub_ps, _mm256_set1_ps, INTERLEAVE8, 2 * (size_t)cols,
                 round_bf16_8)
TRANSFORM_OUTPUT(transform_output4, __m128, _mm_loadu_ps, _mm_storeu_ps, _mm_add_ps,
                 _mm_sub_ps, _mm_set1_ps, INTERLEAVE4, 4, round_bf16_4)

/* F(4x4, 3x3). A tile is 4x4 outputs from a 6x6 block of the padded input, so tiles step by 4
 * columns: each padded row is split into its four column phases (padded column 4 q + p at
 * [p][q]), and the six columns of a vector of tiles are then contiguous loads (phases 0-3 at
 * q, phases 0 and 1 at q + 1). The 1-D transforms (Lavin and Gray's matrices):
 *   B^T d: [4d0 - 5d2 + d4, (d4 - 4d2) +- (d3 - 4d1), (d4 - d2) +- 2(d3 - d1), 4d1 - 5d3 + d5]
 *   A^T m: [m0 + (m1 + m2) + (m3 + m4), (m1 - m2) + 2(m3 - m4), (m1 + m2) + 4(m3 + m4),
 *           (m1 - m2) + 8(m3 - m4) + m5]
 * A tile's four output columns lie in four vectors (a lane per tile) and are put in row order
 * with 4x4 transposes within 128-bit lanes (and, for AVX, a 128-bit permute). */
#define F4_KERNELS(sfx, vec, lanes, load, store, add, sub, mul, fmadd, set1, unpacklo, unpackhi, \
                   shuffle, rnd)                                                               \
    static inline void bt6_##sfx(const vec d[6], vec o[6])                                     \
    {                                                                                          \
        const vec four = set1(4.0f), mfour = set1(-4.0f), mfive = set1(-5.0f);                 \
        const vec a = fmadd(mfour, d[2], d[4]), b = fmadd(mfour, d[1], d[3]);                  \
        const vec c = sub(d[4], d[2]), e = mul(set1(2.0f), sub(d[3], d[1]));                   \
        o[0] = fmadd(four, d[0], fmadd(mfive, d[2], d[4]));                                    \
        o[1] = add(a, b);                                                                      \
        o[2] = sub(a, b);                                                                      \
        o[3] = add(c, e);                                                                      \
        o[4] = sub(c, e);                                                                      \
        o[5] = fmadd(four, d[1], fmadd(mfive, d[3], d[5]));                                    \
    }                                                                                          \
    static inline void at6_##sfx(const vec m[6], vec o[4])                                     \
    {                                                                                          \
        const vec a = add(m[1], m[2]), b = sub(m[1], m[2]);                                    \
        const vec c = add(m[3], m[4]), d = sub(m[3], m[4]);                                    \
        o[0] = add(add(m[0], a), c);                                                           \
        o[1] = fmadd(set1(2.0f), d, b);                                                        \
        o[2] = fmadd(set1(4.0f), c, a);                                                        \
        o[3] = add(fmadd(set1(8.0f), d, b), m[5]);                                             \
    }                                                                                          \
    /* r[0..3] -> their 4x4 transposes within each 128-bit lane */                             \
    static inline void transpose4_##sfx(vec r[4])                                              \
    {                                                                                          \
        const vec t0 = unpacklo(r[0], r[1]), t1 = unpackhi(r[0], r[1]);                        \
        const vec t2 = unpacklo(r[2], r[3]), t3 = unpackhi(r[2], r[3]);                        \
        r[0] = shuffle(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));                                       \
        r[1] = shuffle(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));                                       \
        r[2] = shuffle(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));                                       \
        r[3] = shuffle(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));                                       \
    }                                                                                          \
    /* V of a vector of tiles (B^T d B) from the rows d[i] of their 6x6 blocks */              \
    static inline void input_tiles_##sfx(const vec d[6][6], float *dst, size_t xi_stride)      \
    {                                                                                          \
        vec e[6][6];                                                                           \
        for (int i = 0; i < 6; i++)                                                            \
            bt6_##sfx(d[i], e[i]);                                                             \
        for (int j = 0; j < 6; j++) {                                                          \
            const vec col[6] = {e[0][j], e[1][j], e[2][j], e[3][j], e[4][j], e[5][j]};         \
            vec o[6];                                                                          \
            bt6_##sfx(col, o);                                                                 \
            for (int k = 0; k < 6; k++)                                                        \
                store(dst + (size_t)(k * 6 + j) * xi_stride, o[k]);                            \
        }                                                                                      \
    }                                                                                          \
    /* V[xi][tile] = B^T d B for every tile of one plane, from its phase planes */             \
    static void transform_input6_##sfx(const wino_geom *wg, const float *par, float *v,         \
                                       size_t xi_stride)                                        \
    {                                                                                          \
        const size_t pl = wg->plane;                                                           \
        for (int ty = 0; ty < wg->TH; ty++)                                                    \
            for (int tx = 0; tx < wg->TW; tx += (lanes)) {                                     \
                vec d[6][6];                                                                   \
                for (int i = 0; i < 6; i++) {                                                  \
                    const float *p = par + (size_t)(4 * ty + i) * wg->PW + tx;                 \
                    d[i][0] = load(p);                                                         \
                    d[i][1] = load(p + pl);                                                    \
                    d[i][2] = load(p + 2 * pl);                                                \
                    d[i][3] = load(p + 3 * pl);                                                \
                    d[i][4] = load(p + 1);                                                     \
                    d[i][5] = load(p + pl + 1);                                                \
                }                                                                              \
                input_tiles_##sfx(d, v + (size_t)ty * wg->TW + tx, xi_stride);                 \
            }                                                                                  \
    }                                                                                          \
    /* A^T m A of a vector of tiles in two halves: the columns' transforms s (A^T m), then \
     * per output row a the row's (s[a] A, + bias) in o, in transpose4's order (SSE: o[t] is \
     * tile t's row a). A row at a time, stored before the next: all 16 rows' vectors at once \
     * did not fit the registers, and their spills were read back in halves. */               \
    static inline void output_columns_##sfx(const float *m, size_t xi_stride, vec s[4][6])    \
    {                                                                                          \
        for (int j = 0; j < 6; j++) {                                                          \
            vec col[6], c[4];                                                                  \
            for (int i = 0; i < 6; i++)                                                        \
                col[i] = load(m + (size_t)(i * 6 + j) * xi_stride);                            \
            at6_##sfx(col, c);                                                                 \
            for (int a = 0; a < 4; a++)                                                        \
                s[a][j] = c[a];                                                                \
        }                                                                                      \
    }                                                                                          \
    static inline void output_row_##sfx(const vec s[6], float bias, int round, vec o[4])      \
    {                                                                                          \
        at6_##sfx(s, o);                                                                       \
        for (int k = 0; k < 4; k++)                                                            \
            o[k] = add(round ? rnd(o[k]) : o[k], set1(bias));                                  \
        transpose4_##sfx(o);                                                                   \
    }

F4_KERNELS(avx, __m256, 8, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_add_ps, _mm256_sub_ps,
           _mm256_mul_ps, _mm256_fmadd_ps, _mm256_set1_ps, _mm256_unpacklo_ps,
           _mm256_unpackhi_ps, _mm256_shuffle_ps, round_bf16_8)
F4_KERNELS(sse, __m128, 4, _mm_loadu_ps, _mm_storeu_ps, _mm_add_ps, _mm_sub_ps, _mm_mul_ps,
           _mm_fmadd_ps, _mm_set1_ps, _mm_unpacklo_ps, _mm_unpackhi_ps, _mm_shuffle_ps,
           round_bf16_4)

/* Part of an output row (one tile's, or two tiles' with AVX) written or added at dst. The
 * scatters below put output_row's o in place, `row` being that row of the first tile's outputs
 * (row stride cols). */
static inline void put_row(float *dst, __m128 v, int accumulate)
{
    _mm_storeu_ps(dst, accumulate ? _mm_add_ps(v, _mm_loadu_ps(dst)) : v);
}

static inline void put_row8(float *dst, __m256 v, int accumulate)
{
    _mm256_storeu_ps(dst, accumulate ? _mm256_add_ps(v, _mm256_loadu_ps(dst)) : v);
}

/* AVX: a vector holds tiles t and t + 4 in its halves (transpose4's order); q[t] = tiles
 * 2t, 2t + 1 (of 8 in a row) in order */
static inline void halves_in_order(const __m256 r[4], __m256 q[4])
{
    q[0] = _mm256_permute2f128_ps(r[0], r[1], 0x20);
    q[1] = _mm256_permute2f128_ps(r[2], r[3], 0x20);
    q[2] = _mm256_permute2f128_ps(r[0], r[1], 0x31);
    q[3] = _mm256_permute2f128_ps(r[2], r[3], 0x31);
}

/* 8 tiles in a row (AVX) */
static inline void scatter_row8(float *row, int cols, const __m256 r[4], int accumulate)
{
    (void)cols;
    __m256 q[4];
    halves_in_order(r, q);
    for (int t = 0; t < 4; t++)
        put_row8(row + 8 * t, q[t], accumulate);
}

/* 4 tiles in a row (SSE) */
static inline void scatter_row4(float *row, int cols, const __m128 r[4], int accumulate)
{
    (void)cols;
    for (int t = 0; t < 4; t++)
        put_row(row + 4 * t, r[t], accumulate);
}

/* rows of 4 tiles in pairs (AVX): tiles 0-3 of two tile rows, 4 output rows apart */
static inline void scatter_pair(float *row, int cols, const __m256 r[4], int accumulate)
{
    __m256 q[4];
    halves_in_order(r, q);
    for (int t = 0; t < 4; t++)
        put_row8(row + (size_t)(t / 2 * 4) * cols + 8 * (t % 2), q[t], accumulate);
}

/* rows of 2 tiles in pairs (SSE, planes 8 wide) */
static inline void scatter_quad(float *row, int cols, const __m128 r[4], int accumulate)
{
    for (int t = 0; t < 4; t++)
        put_row(row + (size_t)(t / 2 * 4) * cols + 4 * (t % 2), r[t], accumulate);
}

/* Outputs of a vector of tiles from m[xi * xi_stride ..], written or added from `out` on,
 * the first tile's first output (row stride cols), + bias: a row of outputs at a time,
 * `scatter` putting each tile's part of it in place. */
#define TRANSFORM_OUTPUT6(name, sfx, vec, scatter)                                             \
    static void name(const float *m, size_t xi_stride, float bias, int round, int cols,       \
                     float *out, int accumulate)                                               \
    {                                                                                          \
        vec s[4][6];                                                                           \
        output_columns_##sfx(m, xi_stride, s);                                                 \
        for (int a = 0; a < 4; a++) {                                                          \
            vec o[4];                                                                          \
            output_row_##sfx(s[a], bias, round, o);                                            \
            scatter(out + (size_t)a * cols, cols, o, accumulate);                              \
        }                                                                                      \
    }

TRANSFORM_OUTPUT6(transform_output6_avx, avx, __m256, scatter_row8)
TRANSFORM_OUTPUT6(transform_output6_sse, sse, __m128, scatter_row4)
TRANSFORM_OUTPUT6(transform_output6_pair, avx, __m256, scatter_pair)
TRANSFORM_OUTPUT6(transform_output6_quad, sse, __m128, scatter_quad)

/* F(4x4) on rows of 4 tiles (16x16 images) in pairs: tile rows ty and ty + 1 in the two
 * halves of each vector, 4 padded rows apart in the phase planes and 4 output rows apart. */
static void transform_input6_pair(const wino_geom *wg, const float *par, float *v,
                                  size_t xi_stride)
{
    const size_t pl = wg->plane, down = 4 * (size_t)wg->PW;
    for (int ty = 0; ty < wg->TH; ty += 2) {
        __m256 d[6][6];
        for (int i = 0; i < 6; i++) {
            const float *p = par + (size_t)(4 * ty + i) * wg->PW;
            d[i][0] = load_halves(p, down);
            d[i][1] = load_halves(p + pl, down);
            d[i][2] = load_halves(p + 2 * pl, down);
            d[i][3] = load_halves(p + 3 * pl, down);
            d[i][4] = load_halves(p + 1, down);
            d[i][5] = load_halves(p + pl + 1, down);
        }
        input_tiles_avx(d, v + (size_t)ty * wg->TW, xi_stride);
    }
}

/* F(4x4) on planes 8 wide (8x8: ResNet-20's 64-channel stage, ResNet-50's 7x7 stage
 * extended): rows of 2 tiles, tile rows ty and ty + 1 in the four lanes of an SSE vector, in
 * tile order ((ty, 0), (ty, 1), (ty + 1, 0), (ty + 1, 1)). Read straight from the plane, with
 * no phase planes: a padded row's columns 0-3, 4-7 and 8-9 are byte shifts of its two
 * vectors, a 4x4 transpose of two rows' 0-3 and 4-7 gives the tiles' columns 0-3, and two
 * shuffles columns 4 and 5. */
static inline void quad_row(const wino_geom *wg, const float *src, int y, __m128 r[3])
{
    if (y < 0 || y >= wg->rows) {
        r[0] = r[1] = r[2] = _mm_setzero_ps();
        return;
    }
    __m128 lo = _mm_loadu_ps(src + (size_t)y * 8), hi = _mm_loadu_ps(src + (size_t)y * 8 + 4);
    if (wg->bf16 & CPU_WINO_BF16) {
        lo = round_bf16_4(lo);
        hi = round_bf16_4(hi);
    }
    const __m128i l = _mm_castps_si128(lo), h = _mm_castps_si128(hi);
    r[0] = _mm_castsi128_ps(_mm_slli_si128(l, 4));      /* 0, x0, x1, x2 */
    r[1] = _mm_castsi128_ps(_mm_alignr_epi8(h, l, 12)); /* x3 .. x6 */
    r[2] = _mm_castsi128_ps(_mm_srli_si128(h, 12));     /* x7, 0 */
}

static void transform_input6_quad(const wino_geom *wg, const float *src, float *v,
                                  size_t xi_stride)
{
    for (int ty = 0; ty < wg->TH; ty += 2) {
        __m128 d[6][6];
        for (int i = 0; i < 6; i++) {
            __m128 a[3], b[3];
            quad_row(wg, src, 4 * ty + i - 1, a);
            quad_row(wg, src, 4 * ty + i + 3, b);
            __m128 r[4] = {a[0], a[1], b[0], b[1]};
            transpose4_sse(r);
            for (int j = 0; j < 4; j++)
                d[i][j] = r[j];
            const __m128 t0 = _mm_unpacklo_ps(a[1], a[2]), t1 = _mm_unpacklo_ps(b[1], b[2]);
            d[i][4] = _mm_movelh_ps(t0, t1);
            d[i][5] = _mm_movehl_ps(t1, t0);
        }
        input_tiles_sse(d, v + (size_t)ty * 2, xi_stride);
    }
}

/* The four column phases of one zero-padded plane: par[p][y * PW + q] is padded pixel
 * (y, 4 q + p), padded pixel (y, x) being input pixel (y - 1, x - 1). Input columns 4 q ..
 * 4 q + 3 go to phases 1, 2, 3 at q and phase 0 at q + 1: a row is split 16 floats at a
 * time by a 4x4 transpose (cols is a multiple of 16). */
static void split_phases(const wino_geom *wg, const float *src, const float *next, float *par)
{
    const int PW = wg->PW, TW = wg->TW;
    const size_t pl = wg->plane;
    for (int y = 0; y < wg->rows + 2; y++) {
        if (y < wg->rows)
            prefetch_floats(next + (size_t)y * wg->cols, (size_t)wg->cols);
        float *p0 = par + (size_t)y * PW;
        if (y == 0 || y > wg->rows) {
            for (int p = 0; p < 4; p++)
                memset(p0 + p * pl, 0, sizeof(float) * PW);
            continue;
        }
        const float *row = src + (size_t)(y - 1) * wg->cols;
        for (int q = 0; q < TW; q += 4) {
            __m128 r[4] = {_mm_loadu_ps(row + 4 * q), _mm_loadu_ps(row + 4 * q + 4),
                           _mm_loadu_ps(row + 4 * q + 8), _mm_loadu_ps(row + 4 * q + 12)};
            for (int k = 0; (wg->bf16 & CPU_WINO_BF16) && k < 4; k++)
                r[k] = round_bf16_4(r[k]);
            transpose4_sse(r);
            _mm_storeu_ps(p0 + pl + q, r[0]);
            _mm_storeu_ps(p0 + 2 * pl + q, r[1]);
            _mm_storeu_ps(p0 + 3 * pl + q, r[2]);
            _mm_storeu_ps(p0 + 1 + q, r[3]);
        }
        p0[0] = 0.0f;
        p0[pl + TW] = p0[2 * pl + TW] = p0[3 * pl + TW] = 0.0f;
    }
}

/* The dispatch of one plane's input transform and of a vector of tiles' output transform
 * over the tile size and vector width. */
static void transform_plane(const wino_geom *wg, const float *src, const float *next, float *par,
                            float *v, size_t xi_stride)
{
    if (wg->small) {
        wino_small_input(wg, src, v, xi_stride);
    } else if (wg->quad) {
        transform_input6_quad(wg, src, v, xi_stride);
    } else if (wg->m == 2) {
        split_parity(wg, src, next, par);
        if (wg->pair)
            transform_input8_pair(wg, par, v, xi_stride);
        else if (wg->lanes == 8)
            transform_input8(wg, par, v, xi_stride);
        else
            transform_input4(wg, par, v, xi_stride);
    } else {
        split_phases(wg, src, next, par);
        if (wg->pair)
            transform_input6_pair(wg, par, v, xi_stride);
        else if (wg->lanes == 8)
            transform_input6_avx(wg, par, v, xi_stride);
        else
            transform_input6_sse(wg, par, v, xi_stride);
    }
}

/* outputs of the `lanes` tiles from tile (ty, tx) of a plane at `plane` */
void wino_transform_output(const wino_geom *wg, const float *m, size_t xi_stride, float bias,
                             int ty, int tx, float *plane, int accumulate)
{
    float *out = plane + (size_t)(wg->m * ty) * wg->cols + wg->m * tx;
    const int round = wg->bf16 & CPU_WINO_BF16;
    if (wg->small)
        wino_small_output(wg, m, xi_stride, bias, out, accumulate);
    else if (wg->quad)
        transform_output6_quad(m, xi_stride, bias, round, wg->cols, out, accumulate);
    else if (wg->m == 4 && wg->pair)
        transform_output6_pair(m, xi_stride, bias, round, wg->cols, out, accumulate);
    else if (wg->m == 4 && wg->lanes == 8)
        transform_output6_avx(m, xi_stride, bias, round, wg->cols, out, accumulate);
    else if (wg->m == 4)
        transform_output6_sse(m, xi_stride, bias, round, wg->cols, out, accumulate);
    else if (wg->pair)
        transform_output8_pair(m, xi_stride, bias, round, wg->cols, out, accumulate);
    else if (wg->lanes == 8)
        transform_output8(m, xi_stride, bias, round, wg->cols, out, accumulate);
    else
        transform_output4(m, xi_stride, bias, round, wg->cols, out, accumulate);
}

/* V [xi][ins][ldv] = B^T d B of every tile of images n0 .. n0 + nb - 1 of in [n, ins, rows,
 * cols] (tile index = image * tiles + tile), each plane split into parity planes at par first;
 * the columns past the last tile are zeroed, since blocks of TB read them (garbage there would
 * only be thrown away, but denormals or NaNs would cost time). */
void wino_transform_inputs(const wino_geom *wg, int n0, int nb, int ins, const float *in,
                             float *par, float *v, size_t ldv, int team)
{
    const size_t plane_in = (size_t)wg->rows * wg->cols, xi_stride = slab(ins, ldv);
    const int T = nb * wg->tiles;
    const long long planes = (long long)nb * ins;
#pragma omp parallel for schedule(guided) if (team)
    for (long long pl = 0; pl < planes; pl++) {
        const int i = (int)(pl / ins), c = (int)(pl % ins);
        float *pp = par + (size_t)pl * parity_floats(wg);
        const float *src = in + ((size_t)(n0 + i) * ins + c) * plane_in;
        transform_plane(wg, src, src + plane_in, pp, v + (size_t)c * ldv + (size_t)i * wg->tiles,
                        xi_stride);
    }
    for (int xi = 0; xi < wg->xi; xi++)
        for (int c = 0; c < ins; c++)
            memset(v + xi * xi_stride + (size_t)c * ldv + T, 0,
                   sizeof(float) * (ldv - (size_t)T));
}

/* The weight gradient. With Y = A^T [sum over c of U_c . V_c] A, U = G g G^T:
 * dL/dU[k][c] = sum over tiles of (A dY A^T) . V_c, and dL/dg = G^T (dL/dU) G. So per chunk
 * the output gradient's m x m tiles become alpha x alpha (A dY A^T) in D [xi][K][ldv], V is
 * the forward's input transform (computed again: keeping it would hold 2.25-4x every such
 * layer's input for the whole step), and xi products D V^T, over tiles, sum into
 * dU [xi][K][C]; dw gets G^T dU G at the end: 16 (36) multiply-adds per channel pair and
 * output block of 2x2 (4x4) where direct summation needs 36 (144). */

/* D[xi][tile] (xi_stride floats apart) = A dy A^T for every 2x2 tile of one output-gradient
 * plane, a vector of tiles at a time; the two columns of each tile are split apart from a row
 * of 2 * lanes floats (for AVX the in-lane shuffle is put back in order by a permute). */
#define DEINTERLEAVE8(row, next, even, odd)                                                    \
    do {                                                                                       \
        __m256 lo_ = _mm256_loadu_ps(row), hi_ = _mm256_loadu_ps((row) + (next));              \
        (even) = _mm256_castpd_ps(_mm256_permute4x64_pd(                                       \
            _mm256_castps_pd(_mm256_shuffle_ps(lo_, hi_, _MM_SHUFFLE(2, 0, 2, 0))), 0xd8));    \
        (odd) = _mm256_castpd_ps(_mm256_permute4x64_pd(                                        \
            _mm256_castps_pd(_mm256_shuffle_ps(lo_, hi_, _MM_SHUFFLE(3, 1, 3, 1))), 0xd8));    \
    } while (0)
#define DEINTERLEAVE4(row, next, even, odd)                                                    \
    do {                                                                                       \
        __m128 lo_ = _mm_loadu_ps(row), hi_ = _mm_loadu_ps((row) + (next));                    \
        (even) = _mm_shuffle_ps(lo_, hi_, _MM_SHUFFLE(2, 0, 2, 0));                            \
        (odd) = _mm_shuffle_ps(lo_, hi_, _MM_SHUFFLE(3, 1, 3, 1));                             \
    } while (0)

/* `rows` tile rows at a time (2: a pair of rows of 4 tiles, the second half of each vector
 * from the output rows two below, `second` floats on) */
#define TRANSFORM_GRAD(name, vec, lanes, rows, second, deinterleave, store, add, sub, zero,   \
                       rnd)                                                                    \
    static void name(const wino_geom *wg, const float *dy, const float *next, float *d,       \
                     size_t xi_stride)                                                         \
    {                                                                                          \
        for (int ty = 0; ty < wg->TH; ty += (rows)) {                                          \
            prefetch_floats(next + (size_t)(2 * ty) * wg->cols, 2 * (size_t)(rows) * wg->cols); \
            for (int tx = 0; tx < wg->TW; tx += (lanes)) {                                     \
                const float *r0 = dy + (size_t)(2 * ty) * wg->cols + 2 * tx;                   \
                vec a, b, c, e;                                                                \
                deinterleave(r0, (second), a, b);                                              \
                deinterleave(r0 + wg->cols, (second), c, e);                                   \
                if (wg->bf16 & CPU_WINO_BF16) {                                                \
                    a = rnd(a);                                                                \
                    b = rnd(b);                                                                \
                    c = rnd(c);                                                                \
                    e = rnd(e);                                                                \
                }                                                                              \
                /* A dy: rows [a b], [a+c b+e], [a-c b-e], [-c -e]; then each row [p q] */     \
                /* times A^T: [p, p+q, p-q, -q] */                                             \
                const vec p[4] = {a, add(a, c), sub(a, c), sub(zero, c)};                      \
                const vec q[4] = {b, add(b, e), sub(b, e), sub(zero, e)};                      \
                float *dst = d + (size_t)ty * wg->TW + tx;                                     \
                for (int i = 0; i < 4; i++) {                                                  \
                    store(dst + (size_t)(i * 4 + 0) * xi_stride, p[i]);                        \
                    store(dst + (size_t)(i * 4 + 1) * xi_stride, add(p[i], q[i]));             \
                    store(dst + (size_t)(i * 4 + 2) * xi_stride, sub(p[i], q[i]));             \
                    store(dst + (size_t)(i * 4 + 3) * xi_stride, sub(zero, q[i]));             \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }

TRANSFORM_GRAD(transform_grad8, __m256, 8, 1, 8, DEINTERLEAVE8, _mm256_storeu_ps,
               _mm256_add_ps, _mm256_sub_ps, _mm256_setzero_ps(), round_bf16_8)
TRANSFORM_GRAD(transform_grad8_pair, __m256, 8, 2, 2 * (size_t)wg->cols, DEINTERLEAVE8,
               _mm256_storeu_ps, _mm256_add_ps, _mm256_sub_ps, _mm256_setzero_ps(), round_bf16_8)
TRANSFORM_GRAD(transform_grad4, __m128, 4, 1, 4, DEINTERLEAVE4, _mm_storeu_ps, _mm_add_ps,
               _mm_sub_ps, _mm_setzero_ps(), round_bf16_4)

/* D [xi][K][ldv] = A dy A^T of every tile of images n0 .. n0 + nb - 1 of dy [n, K, rows, cols],
 * zero past the last tile. */
void wino_transform_grads(const wino_geom *wg, int n0, int nb, int K, const float *dy,
                            float *d, size_t ldv, int team)
{
    const size_t plane = (size_t)wg->rows * wg->cols;
    const int T = nb * wg->tiles;
    const long long planes = (long long)nb * K;
#pragma omp parallel for schedule(guided) if (team)
    for (long long pl = 0; pl < planes; pl++) {
        const int i = (int)(pl / K), k = (int)(pl % K);
        const float *src = dy + ((size_t)(n0 + i) * K + k) * plane;
        float *dk = d + (size_t)k * ldv + (size_t)i * wg->tiles;
        if (wg->small)
            wino_small_grad(wg, src, dk, slab(K, ldv));
        else if (wg->pair)
            transform_grad8_pair(wg, src, src + plane, dk, slab(K, ldv));
        else if (wg->lanes == 8)
            transform_grad8(wg, src, src + plane, dk, slab(K, ldv));
        else
            transform_grad4(wg, src, src + plane, dk, slab(K, ldv));
    }
    for (int xi = 0; xi < wg->xi; xi++)
        for (int k = 0; k < K; k++)
            memset(d + xi * slab(K, ldv) + (size_t)k * ldv + T, 0,
                   sizeof(float) * (ldv - (size_t)T));
}

/* dw of one channel pair += G^T dU G, dU [alpha][alpha] of the pair `stride` floats apart;
 * inlined with alpha a constant (with it a loop bound the compiler did not unroll, and these
 * sums were a visible share of a 64-channel layer's step; measurements: docs/perf-notes.md). */
static inline void pair_grad(int alpha, const double (*G)[3], const float *du, size_t stride,
                             int round, float *dw)
{
    double t[3][6];
    for (int r = 0; r < 3; r++)
        for (int j = 0; j < alpha; j++) {
            t[r][j] = 0.0;
            for (int i = 0; i < alpha; i++)
                t[r][j] += G[i][r] * du[(size_t)(i * alpha + j) * stride];
        }
    for (int r = 0; r < 3; r++)
        for (int s = 0; s < 3; s++) {
            double acc = 0.0;
            for (int j = 0; j < alpha; j++)
                acc += t[r][j] * G[j][s];
            dw[r * 3 + s] += round ? bf16_round((float)acc) : (float)acc;
        }
}

/* dw [K, C, 3, 3] += G^T dU G, dU [16][K][C] (the weight gradient is F(2x2)'s), each rounded
 * to bf16 before the sum where wg asks (CPU_WINO_BF16_DW). */
void wino_filter_grad(const wino_geom *wg, int K, int C, const float *du, float *dw)
{
    const size_t pairs = (size_t)K * C;
    const int round = (wg->bf16 & CPU_WINO_BF16_DW) != 0;
#pragma omp parallel for schedule(guided)
    for (long long kc = 0; kc < (long long)pairs; kc++)
        pair_grad(4, G2, du + kc, pairs, round, dw + (size_t)kc * 9);
}

#else
/* This compile has no AVX2: the transforms are not built (an empty file is not C). */
typedef int conv_winograd_transforms_unused;
#endif
