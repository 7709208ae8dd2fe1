/*
 * conv_winograd.c — 3x3 convolution with stride 1 and padding 1 (ResNet's and VGG's 3x3
 * layers) by Winograd's minimal filtering F(m x m, 3x3) (Lavin and Gray, 2016): forward pass,
 * input gradient and weight gradient. Each m x m block of outputs comes from an alpha x alpha
 * block (alpha = m + 2) of the padded input as
 * Y = A^T [sum over channels of (G g G^T) . (B^T d B)] A, alpha^2 products per channel pair:
 *   F(2x2, 3x3): 16 where direct convolution needs 36, 2.25 times fewer multiply-adds;
 *   F(4x4, 3x3): 36 where it needs 144, 4 times fewer, for the forward pass and the input
 *     gradient where a row of tiles is whole groups of 4 (below, tile_size). The weight
 *     gradient stays on F(2x2) (its sums over every tile of the batch amplify F(4x4)'s error).
 *
 * Shapes: output height even and width a multiple of 8 (so a row of F(2x2) tiles is whole
 * groups of 4), which every CIFAR and ImageNet stage of those networks has down to 8x8;
 * elsewhere conv2d uses the direct kernels or im2col. Built where the compiler targets AVX2 +
 * FMA, as conv_direct.c.
 *
 * Per chunk of images:
 *   1. each input plane is split into four planes of the zero-padded image (F(2x2): its
 *      (row parity, column parity) planes; F(4x4): its column phases mod 4), so the block of
 *      every tile in a row of tiles is a set of contiguous loads, and transformed to
 *      V [alpha^2][ins][tiles] (B^T d B, 4 or 8 tiles at a time);
 *   2. for each block of 24 tiles and 4 output channels, alpha^2 small GEMMs over the input
 *      channels (M[xi] = U[xi] V[xi], U = the transformed filters), kept in a 6 or 13.5 KiB
 *      buffer and turned into outputs (A^T M A) at once, so M never goes to memory. Wide
 *      layers (more than 64 channels) run the products as BLAS GEMMs instead, through M
 *      [alpha^2][outs][tiles] (winograd_gemm_pass).
 * The input gradient is the same computation over the output gradient with the filters
 * transposed and rotated by 180 degrees (for padding 1 and a 3x3 kernel its padding is 1);
 * the weight gradient is below (winograd_weight_grad).
 *
 * Accuracy: F(2x2)'s transforms have coefficients 0, +-1 and +-1/2, so its results differ
 * from direct summation by a few ulps of the largest intermediate; F(4x4)'s reach 8 (and 1/24
 * in G), so its error is about ten times larger, a few 1e-6 of the sum of |x w| (tolerances in
 * tests/test_conv_paths.c).
 * Threads: narrow layers give each thread whole chunks of images of its own (forward pass
 * and input gradient: winograd_pass; weight gradient: a share of the images each, summed
 * into a dU of its own: winograd_weight_grad), so no thread reads what another wrote within
 * a pass; with fewer than two images a thread, and in wide layers, the team splits each
 * chunk instead: (image, channel) for the transforms, (tile block, channel block) for the
 * products and (position, channel blocks) for the weight gradient's. Outputs and input
 * gradients are summed in one fixed order, so they do not depend on the thread count; the
 * weight gradient's per-thread sums do, as do the wide form's GEMMs (BLAS's, as on the
 * im2col path).
 */
#include <stddef.h>
#include <string.h>

#include "cpu_kernels.h"

static int winograd_shape(const conv_geom *g)
{
    return g->groups == 1 && g->R == 3 && g->S == 3 && g->stride_h == 1 && g->stride_w == 1 &&
           g->dil_h == 1 && g->dil_w == 1 && g->pad_h == 1 && g->pad_w == 1 && g->H % 2 == 0 &&
           g->W % 8 == 0 && g->H >= 2;
}

#if defined(__AVX2__) && defined(__FMA__)
#define CONV_WINOGRAD 1

enum { KB = 4, TB = 24 };   /* channel block, tile block */
enum { XI_MAX = 36 };       /* transformed positions of F(4x4, 3x3) */

typedef struct {
    int m;              /* outputs per tile side: 2 for F(2x2, 3x3), 4 for F(4x4, 3x3) */
    int xi;             /* transformed positions: (m + 2)^2 */
    int rows, cols;     /* image size (input = output) */
    int TH, TW;         /* tiles per column and row */
    int PW;             /* row stride of a parity or phase plane: TW + 1 */
    size_t plane;       /* floats per such plane, with room for the last group's reads */
    int tiles;          /* per image */
    int lanes;          /* tiles a transform handles at once: 8 (AVX) or 4 (SSE) */
    int pair;           /* 4 tiles a row, rows in pairs: two rows of tiles in one AVX vector */
} wino_geom;

static size_t round16(size_t n) { return (n + 15) / 16 * 16; }

/* F(4x4, 3x3) where rows of tiles are whole groups of 4 (width a multiple of 16, height of
 * 4): its transforms cost about what F(2x2)'s do per output, and its products 1.8x less, so
 * those layers run faster. On 8x8 images (ResNet-20's 64-channel stage), with two rows of 2
 * tiles in the lanes of an SSE vector, it was slower than F(2x2) (measurements:
 * docs/perf-notes.md). */
static int tile_size(const conv_geom *g)
{
    return g->H % 4 == 0 && g->W % 16 == 0 ? 4 : 2;
}

/* the geometry of the forward pass and input gradient, or of the weight gradient (F(2x2)) */
static wino_geom make_geom(const conv_geom *g, int weight_grad)
{
    wino_geom w;
    w.m = weight_grad ? 2 : tile_size(g);
    w.xi = (w.m + 2) * (w.m + 2);
    w.rows = g->H;
    w.cols = g->W;
    w.TH = w.rows / w.m;
    w.TW = w.cols / w.m;
    w.PW = w.TW + 1;
    /* F(2x2): four (row parity, column parity) planes of TH + 1 rows; F(4x4): four column
     * phase planes of every padded row */
    const int plane_rows = w.m == 2 ? w.TH + 1 : w.rows + 2;
    w.plane = round16((size_t)plane_rows * w.PW + 4);
    w.tiles = w.TH * w.TW;
    /* Rows of 4 tiles (F(4x4) on 16x16 images, F(2x2) on 8x8: ResNet-20's 32- and 64-channel
     * stages) in pairs, tile rows ty and ty + 1 in the halves of an AVX vector: with SSE's 4
     * lanes their transforms took twice the instructions. */
    w.pair = w.TW == 4 && w.TH % 2 == 0;
    w.lanes = w.TW % 8 == 0 || w.pair ? 8 : 4;
    return w;
}

/* Wide layers (more than 64 channels in or out: VGG's deeper stages) multiply their
 * transformed tiles with BLAS, as GEMMs of [outs][ins] by [ins][tiles]: there the filters of
 * one position (up to 512 x 512) no longer stay in cache for cpu_tile_4x24, which streamed them
 * from memory once per block of 24 tiles. */
enum { WIDE = 64 };
static int wide(const conv_geom *g) { return g->C > WIDE || g->K > WIDE; }

/* Floats from one position's slab of transformed tiles ([xi][rows][ldv]) to the next: 64
 * bytes more than its rows, so the 16 or 36 positions a transform writes at once fall into
 * different cache sets. Slabs of a multiple of 4 KiB put all 16 into one set of the 8-way L1,
 * and the input transform stalled on those conflicts (measurements: docs/perf-notes.md). */
static size_t slab(int rows, size_t ldv)
{
    return ldv ? (size_t)rows * ldv + 16 : 0;   /* 0 for no tiles: the scratch's fixed part */
}

static size_t channel_blocks(int channels) { return (size_t)(channels + KB - 1) / KB; }
static size_t tile_cols(int tiles) { return (size_t)(tiles + TB - 1) / TB * TB; }

static size_t filter_floats(const wino_geom *wg, int ins, int outs)
{
    return round16((size_t)wg->xi * channel_blocks(outs) * ins * KB);
}

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

/* U = G g G^T, g = w [k][c] (forward) or w [c][k] rotated by 180
 * degrees (input gradient: outs = C, ins = K), as [xi][outs / KB][ins][KB] for cpu_tile_4x24
 * (channels past the last block's end 0) or, with `rows`, as xi row-major [outs][ins]
 * matrices for BLAS. */
static void transform_filters(const wino_geom *wg, const float *w, int K, int C,
                              int for_input_grad, int rows, float *u)
{
    /* Input channels IB at a time: their transforms go to a buffer first and out position
     * by position, in runs of IB * KB (or IB) floats. Written pair by pair, the 16 or 36
     * stores of a pair were a slab apart (16 KiB for 64 channels: all in one L1 set), and
     * the transform stalled on those conflicts (measurements: docs/perf-notes.md). */
    enum { IB = 16 };
    const int outs = for_input_grad ? C : K, ins = for_input_grad ? K : C;
    const int m = wg->m, xis = wg->xi;
    const long long nb = (long long)channel_blocks(outs);
#pragma omp parallel for schedule(guided)
    for (long long b = 0; b < nb; b++)
        for (int i0 = 0; i0 < ins; i0 += IB) {
            const int ni = ins - i0 < IB ? ins - i0 : IB;
            __m128 v[IB][XI_MAX]; /* lane j: output channel b * KB + j */
            for (int i = 0; i < ni; i++) {
                double g[3][3][KB] = {{{0}}};
                for (int j = 0; j < KB; j++) {
                    const int o = (int)b * KB + j, c = i0 + i;
                    for (int r = 0; r < 3 && o < outs; r++)
                        for (int s = 0; s < 3; s++)
                            g[r][s][j] = for_input_grad
                                             ? w[((size_t)c * C + o) * 9 + (2 - r) * 3 + 2 - s]
                                             : w[((size_t)o * C + c) * 9 + r * 3 + s];
                }
                __m256d gv[3][3];
                for (int r = 0; r < 3; r++)
                    for (int s = 0; s < 3; s++)
                        gv[r][s] = _mm256_loadu_pd(g[r][s]);
                if (m == 2)
                    filter_tiles4(4, G2, gv, v[i]);
                else
                    filter_tiles4(6, G4, gv, v[i]);
            }
            for (int xi = 0; xi < xis; xi++) {
                if (!rows) {
                    float *dst = u + (((size_t)xi * nb + b) * ins + i0) * KB;
                    for (int i = 0; i < ni; i++)
                        _mm_storeu_ps(dst + i * KB, v[i][xi]);
                    continue;
                }
                for (int i = 0; i < ni; i++) {
                    float lanes[KB];
                    _mm_storeu_ps(lanes, v[i][xi]);
                    for (int j = 0; j < KB && (int)b * KB + j < outs; j++)
                        u[((size_t)xi * outs + (size_t)b * KB + j) * ins + i0 + i] = lanes[j];
                }
            }
        }
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
#define TRANSFORM_OUTPUT(name, vec, load, store, add, sub, set1, interleave, second)          \
    static void name(const float *m, size_t xi_stride, float bias, int cols, float *out,      \
                     int accumulate)                                                          \
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
            vec even = add(add(add(s[a][0], s[a][1]), s[a][2]), b);                            \
            vec odd = add(sub(sub(s[a][1], s[a][2]), s[a][3]), b);                             \
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
                 _mm256_sub_ps, _mm256_set1_ps, INTERLEAVE8, 8)
TRANSFORM_OUTPUT(transform_output8_pair, __m256, _mm256_loadu_ps, _mm256_storeu_ps,
                 _mm256_add_ps, _mm256_sub_ps, _mm256_set1_ps, INTERLEAVE8, 2 * (size_t)cols)
TRANSFORM_OUTPUT(transform_output4, __m128, _mm_loadu_ps, _mm_storeu_ps, _mm_add_ps,
                 _mm_sub_ps, _mm_set1_ps, INTERLEAVE4, 4)

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
                   shuffle, scatter4)                                                          \
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
    /* A^T m A of a vector of tiles, + bias: o[a][t] holds output row a of the tiles in        \
     * transpose4's order (SSE: o[a][t] is tile t's) */                                        \
    static inline void output_tiles_##sfx(const float *m, size_t xi_stride, float bias,        \
                                          vec o[4][4])                                         \
    {                                                                                          \
        vec s[4][6];                                                                           \
        for (int j = 0; j < 6; j++) {                                                          \
            vec col[6], c[4];                                                                  \
            for (int i = 0; i < 6; i++)                                                        \
                col[i] = load(m + (size_t)(i * 6 + j) * xi_stride);                            \
            at6_##sfx(col, c);                                                                 \
            for (int a = 0; a < 4; a++)                                                        \
                s[a][j] = c[a];                                                                \
        }                                                                                      \
        const vec b = set1(bias);                                                              \
        for (int a = 0; a < 4; a++) {                                                          \
            at6_##sfx(s[a], o[a]);                                                             \
            for (int k = 0; k < 4; k++)                                                        \
                o[a][k] = add(o[a][k], b);                                                     \
            transpose4_##sfx(o[a]);                                                            \
        }                                                                                      \
    }                                                                                          \
    /* Outputs of a vector of tiles in a row, written or added to the four output rows at     \
     * `out` (row stride cols) */                                                              \
    static void transform_output6_##sfx(const float *m, size_t xi_stride, float bias,          \
                                        int cols, float *out, int accumulate)                  \
    {                                                                                          \
        vec o[4][4];                                                                           \
        output_tiles_##sfx(m, xi_stride, bias, o);                                             \
        for (int a = 0; a < 4; a++)                                                            \
            scatter4(out + (size_t)a * cols, o[a], accumulate);                                \
    }

/* SSE: tile t's row at row + 4 t */
static inline void scatter4_sse(float *row, const __m128 r[4], int accumulate)
{
    for (int t = 0; t < 4; t++)
        _mm_storeu_ps(row + 4 * t, accumulate ? _mm_add_ps(r[t], _mm_loadu_ps(row + 4 * t)) : r[t]);
}

/* AVX: a vector holds tiles t and t + 4 in its halves, the order transpose4 works in */
static inline void scatter4_avx(float *row, const __m256 r[4], int accumulate)
{
    __m256 q[4] = {_mm256_permute2f128_ps(r[0], r[1], 0x20), _mm256_permute2f128_ps(r[2], r[3], 0x20),
                   _mm256_permute2f128_ps(r[0], r[1], 0x31), _mm256_permute2f128_ps(r[2], r[3], 0x31)};
    for (int t = 0; t < 4; t++)
        _mm256_storeu_ps(row + 8 * t,
                         accumulate ? _mm256_add_ps(q[t], _mm256_loadu_ps(row + 8 * t)) : q[t]);
}

F4_KERNELS(avx, __m256, 8, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_add_ps, _mm256_sub_ps,
           _mm256_mul_ps, _mm256_fmadd_ps, _mm256_set1_ps, _mm256_unpacklo_ps,
           _mm256_unpackhi_ps, _mm256_shuffle_ps, scatter4_avx)
F4_KERNELS(sse, __m128, 4, _mm_loadu_ps, _mm_storeu_ps, _mm_add_ps, _mm_sub_ps, _mm_mul_ps,
           _mm_fmadd_ps, _mm_set1_ps, _mm_unpacklo_ps, _mm_unpackhi_ps, _mm_shuffle_ps,
           scatter4_sse)

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

static void transform_output6_pair(const float *m, size_t xi_stride, float bias, int cols,
                                   float *out, int accumulate)
{
    __m256 o[4][4];
    output_tiles_avx(m, xi_stride, bias, o);
    for (int a = 0; a < 4; a++) {
        const __m256 *r = o[a];
        /* row a of tiles 0-3 of each tile row (scatter4_avx's order) */
        const __m256 q[4] = {_mm256_permute2f128_ps(r[0], r[1], 0x20),
                             _mm256_permute2f128_ps(r[2], r[3], 0x20),
                             _mm256_permute2f128_ps(r[0], r[1], 0x31),
                             _mm256_permute2f128_ps(r[2], r[3], 0x31)};
        for (int t = 0; t < 4; t++) {
            float *dst = out + (size_t)(a + t / 2 * 4) * cols + 8 * (t % 2);
            _mm256_storeu_ps(dst, accumulate ? _mm256_add_ps(q[t], _mm256_loadu_ps(dst)) : q[t]);
        }
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
    if (wg->m == 2) {
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
static void transform_output(const wino_geom *wg, const float *m, size_t xi_stride, float bias,
                             int ty, int tx, float *plane, int accumulate)
{
    float *out = plane + (size_t)(wg->m * ty) * wg->cols + wg->m * tx;
    if (wg->m == 4 && wg->pair)
        transform_output6_pair(m, xi_stride, bias, wg->cols, out, accumulate);
    else if (wg->m == 4 && wg->lanes == 8)
        transform_output6_avx(m, xi_stride, bias, wg->cols, out, accumulate);
    else if (wg->m == 4)
        transform_output6_sse(m, xi_stride, bias, wg->cols, out, accumulate);
    else if (wg->pair)
        transform_output8_pair(m, xi_stride, bias, wg->cols, out, accumulate);
    else if (wg->lanes == 8)
        transform_output8(m, xi_stride, bias, wg->cols, out, accumulate);
    else
        transform_output4(m, xi_stride, bias, wg->cols, out, accumulate);
}

/* Floats of one input plane's four parity or phase planes (one set per (image, channel) of a
 * chunk). */
static size_t parity_floats(const wino_geom *wg) { return 4 * wg->plane; }

/* V [xi][ins][ldv] = B^T d B of every tile of images n0 .. n0 + nb - 1 of in [n, ins, rows,
 * cols] (tile index = image * tiles + tile), each plane split into parity planes at par first;
 * the columns past the last tile are zeroed, since blocks of 24 read them (garbage there would
 * only be thrown away, but denormals or NaNs would cost time). */
static void transform_inputs(const wino_geom *wg, int n0, int nb, int ins, const float *in,
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
#define TRANSFORM_GRAD(name, vec, lanes, rows, second, deinterleave, store, add, sub, zero)   \
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
               _mm256_add_ps, _mm256_sub_ps, _mm256_setzero_ps())
TRANSFORM_GRAD(transform_grad8_pair, __m256, 8, 2, 2 * (size_t)wg->cols, DEINTERLEAVE8,
               _mm256_storeu_ps, _mm256_add_ps, _mm256_sub_ps, _mm256_setzero_ps())
TRANSFORM_GRAD(transform_grad4, __m128, 4, 1, 4, DEINTERLEAVE4, _mm_storeu_ps, _mm_add_ps,
               _mm_sub_ps, _mm_setzero_ps())

/* D [xi][K][ldv] = A dy A^T of every tile of images n0 .. n0 + nb - 1 of dy [n, K, rows, cols],
 * zero past the last tile. */
static void transform_grads(const wino_geom *wg, int n0, int nb, int K, const float *dy,
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
        if (wg->pair)
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
                             float *dw)
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
            dw[r * 3 + s] += (float)acc;
        }
}

/* dw [K, C, 3, 3] += G^T dU G, dU [16][K][C] (the weight gradient is F(2x2)'s). */
static void filter_grad(int K, int C, const float *du, float *dw)
{
    const size_t pairs = (size_t)K * C;
#pragma omp parallel for schedule(guided)
    for (long long kc = 0; kc < (long long)pairs; kc++)
        pair_grad(4, G2, du + kc, pairs, dw + (size_t)kc * 9);
}

/* Floats of the weight gradient's scratch for a chunk of nb images: parity planes, V and D. */
static size_t grad_chunk_floats(const wino_geom *wg, int nb, int C, int K)
{
    const size_t cols = tile_cols(nb * wg->tiles);
    return (size_t)nb * C * parity_floats(wg) + wg->xi * (slab(C, cols) + slab(K, cols));
}

/* dU [16][K][C] += the products D V^T over the tiles of images n0 .. n0 + nb - 1, by
 * gemm_tiles.c's dot products below 64 channels in or out (their 4-filter blocks keep a row
 * of D in registers) and by BLAS from 64 in and out on, as the im2col path's weight
 * gradients. With 64 and 64 BLAS's packed kernels are faster; below, BLAS gained nothing
 * (measurements: docs/perf-notes.md). On the whole team or, without `team`, on the calling
 * thread alone (the products' own loops then run on it too: nested teams are inactive). */
static void weight_grad_chunk(const conv_geom *g, const wino_geom *wg, int n0, int nb,
                              const float *x, const float *dy, float *du, float *scratch,
                              int team)
{
    const int C = g->C, K = g->K;
    /* the tiles, rounded up to 8 for the dot products: the columns past them are zero */
    const size_t ldv = tile_cols(nb * wg->tiles), len = ((size_t)nb * wg->tiles + 7) / 8 * 8;
    float *par = scratch, *v = par + (size_t)nb * C * parity_floats(wg);
    float *d = v + wg->xi * slab(C, ldv);
    transform_inputs(wg, n0, nb, C, x, par, v, ldv, team);
    transform_grads(wg, n0, nb, K, dy, d, ldv, team);
    for (int xi = 0; xi < wg->xi; xi++) {
        const float *dp = d + xi * slab(K, ldv), *vp = v + xi * slab(C, ldv);
        float *dup = du + (size_t)xi * K * C;
        if (wide(g) || (g->C >= 64 && g->K >= 64))
            cpu_gemm(0, 1, K, C, (int)len, 1.0f, dp, (int)ldv, vp, (int)ldv, 1.0f, dup, C);
        else
            cpu_gemm_dots(K, C, (int)len, dp, (int)ldv, vp, (int)ldv, dup, C);
    }
}

/* dw [K, C, 3, 3] += the weight gradient over n images, `chunk` at a time: per chunk, xi
 * products D V^T over the tiles add into dU [16][K][C] (du: slots of those, the first the
 * total); dw gets G^T dU G at the end. Narrow layers with `slots` threads and at least two
 * images a thread: each thread sums its own share of the images (n / threads, in chunks)
 * into a dU of its own, added up in thread order at the end, so no thread reads what
 * another transformed (as the forward pass, winograd_pass). The sums then depend on the
 * thread count, as BLAS's do; on one thread, and otherwise with the whole team on every
 * chunk, they are the same as ever. */
static void winograd_weight_grad(const conv_geom *g, const wino_geom *wg, int n, int chunk,
                                 int slots, const float *x, const float *dy, float *dw,
                                 float *du, float *scratch)
{
    const int C = g->C, K = g->K;
    const size_t pairs = (size_t)K * C, du_floats = round16(wg->xi * pairs);
    const int own = wide(g) ? 1 : cpu_own_threads(slots, n);
    if (own > 1) {
        const size_t stride = grad_chunk_floats(wg, chunk, C, K);
#pragma omp parallel num_threads(own)
        {
            const int t = cpu_thread_index();
            int lo, hi;
            const int size = cpu_share(n, chunk, &lo, &hi);
            float *mine = du + (size_t)t * du_floats;
            memset(mine, 0, sizeof(float) * wg->xi * pairs);
            for (int n0 = lo; n0 < hi; n0 += size)
                weight_grad_chunk(g, wg, n0, hi - n0 < size ? hi - n0 : size, x, dy, mine,
                                  scratch + (size_t)t * stride, 0);
            /* thread 0's sums are the total's start */
            cpu_add_parts(du, du + du_floats, du_floats, cpu_team_size() - 1, wg->xi * pairs);
        }
    } else {
        memset(du, 0, sizeof(float) * wg->xi * pairs);
        for (int n0 = 0; n0 < n; n0 += chunk)
            weight_grad_chunk(g, wg, n0, n - n0 < chunk ? n - n0 : chunk, x, dy, du, scratch, 1);
    }
    filter_grad(K, C, du, dw);
}

/* The wide form of a pass: V as below, then xi BLAS GEMMs M[xi] = U[xi] V[xi] ([outs][ins]
 * by [ins][tiles]) into M [xi][outs][ldv], then outputs per (image, channel) plane. */
static void winograd_gemm_pass(const wino_geom *wg, int n, int chunk, int ins, int outs,
                               const float *in, const float *u, const float *bias, float *out,
                               int accumulate, float *scratch)
{
    const size_t plane = (size_t)wg->rows * wg->cols, out_image = (size_t)outs * plane;
    for (int n0 = 0; n0 < n; n0 += chunk) {
        const int nb = n - n0 < chunk ? n - n0 : chunk;
        const size_t ldv = tile_cols(nb * wg->tiles), m_stride = slab(outs, ldv);
        float *par = scratch, *v = par + (size_t)nb * ins * parity_floats(wg);
        float *m = v + wg->xi * slab(ins, ldv);
        transform_inputs(wg, n0, nb, ins, in, par, v, ldv, 1);
        for (int xi = 0; xi < wg->xi; xi++)
            cpu_gemm(0, 0, outs, (int)ldv, ins, 1.0f, u + (size_t)xi * outs * ins, ins,
                     v + xi * slab(ins, ldv), (int)ldv, 0.0f, m + xi * m_stride, (int)ldv);
        const long long planes = (long long)nb * outs;
#pragma omp parallel for schedule(guided)
        for (long long pl = 0; pl < planes; pl++) {
            const int i = (int)(pl / outs), k = (int)(pl % outs);
            const float *mk = m + (size_t)k * ldv + (size_t)i * wg->tiles;
            float *o = out + (size_t)(n0 + i) * out_image + (size_t)k * plane;
            const float bk = bias ? bias[k] : 0.0f;
            for (int r = 0; r < wg->tiles; r += wg->lanes)
                transform_output(wg, mk + r, m_stride, bk, r / wg->TW, r % wg->TW, o, accumulate);
        }
    }
}

/* Floats of a narrow pass's scratch for a chunk of nb images: parity planes and V. */
static size_t chunk_floats(const wino_geom *wg, int nb, int ins)
{
    return (size_t)nb * ins * parity_floats(wg) + wg->xi * slab(ins, tile_cols(nb * wg->tiles));
}

/* out (+)= the 3x3 / pad 1 correlation for images n0 .. n0 + nb - 1 (below), on the whole
 * team or, without `team`, on the calling thread alone. */
static void winograd_chunk(const wino_geom *wg, int n0, int nb, int ins, int outs,
                           const float *in, const float *u, const float *bias, float *out,
                           int accumulate, float *scratch, int team)
{
    const size_t plane_in = (size_t)wg->rows * wg->cols;
    const long long kblocks = (long long)channel_blocks(outs);
    const int T = nb * wg->tiles;
    const size_t ldv = tile_cols(T), xi_stride = slab(ins, ldv);
    float *par = scratch, *v = par + (size_t)nb * ins * parity_floats(wg);
    transform_inputs(wg, n0, nb, ins, in, par, v, ldv, team);
    const long long tblocks = (long long)(ldv / TB), jobs = tblocks * kblocks;
    const int xis = wg->xi, lanes = wg->lanes;
    const size_t out_image = (size_t)outs * plane_in;
#pragma omp parallel for schedule(guided) if (team)
    for (long long job = 0; job < jobs; job++) {
        const int tb = (int)(job / kblocks), kb = (int)(job % kblocks);
        /* M of the block: [KB][xi][TB], 6 KiB (F(2x2)) or 13.5 KiB (F(4x4)) */
        float m[KB * XI_MAX * TB];
        for (int xi = 0; xi < xis; xi++)
            cpu_tile_4x24(ins, u + ((size_t)xi * kblocks + kb) * ins * KB,
                          v + xi * xi_stride + (size_t)tb * TB, ldv, m + xi * TB,
                          (size_t)xis * TB);
        for (int j = 0; j < KB && kb * KB + j < outs; j++) {
            const int k = kb * KB + j;
            for (int g = 0; g < TB && tb * TB + g < T; g += lanes) {
                const int t = tb * TB + g, i = t / wg->tiles, r = t % wg->tiles;
                float *o = out + (size_t)(n0 + i) * out_image + (size_t)k * plane_in;
                transform_output(wg, m + (size_t)j * xis * TB + g, TB, bias ? bias[k] : 0.0f,
                                 r / wg->TW, r % wg->TW, o, accumulate);
            }
        }
    }
}

/* out [n, outs, rows, cols] (+)= the 3x3 / pad 1 correlation of in [n, ins, rows, cols]
 * with the filters transformed into u, + bias, in chunks of at most `chunk` images. With
 * `slots` scratch areas and at least two images a thread, each thread takes whole chunks
 * (the fewest rounds of equal chunks): its transformed tiles stay in its own core's L2 from
 * the transform to the products, and a chunk needs no barrier. With the whole team on every
 * chunk, half of a thread's reads came from the other core and two barriers a chunk
 * waited for the slower thread (measurements: docs/perf-notes.md). Each output's sums are the
 * same either way. */
static void winograd_pass(const wino_geom *wg, int n, int chunk, int slots, int ins, int outs,
                          const float *in, const float *u, const float *bias, float *out,
                          int accumulate, float *scratch)
{
    const int own = cpu_own_threads(slots, n);
    if (own > 1) {
        const int size = cpu_equal_chunk(n, own, chunk);
        const long long chunks = (n + size - 1) / size;
        const size_t stride = chunk_floats(wg, chunk, ins);
#pragma omp parallel for schedule(dynamic, 1) num_threads(own)
        for (long long ch = 0; ch < chunks; ch++) {
            const int n0 = (int)ch * size, nb = n - n0 < size ? n - n0 : size;
            winograd_chunk(wg, n0, nb, ins, outs, in, u, bias, out, accumulate,
                           scratch + (size_t)cpu_thread_index() * stride, 0);
        }
        return;
    }
    for (int n0 = 0; n0 < n; n0 += chunk)
        winograd_chunk(wg, n0, n - n0 < chunk ? n - n0 : chunk, ins, outs, in, u, bias, out,
                       accumulate, scratch, 1);
}
#endif

int cpu_conv_winograd_supported(const conv_geom *g)
{
#ifdef CONV_WINOGRAD
    return winograd_shape(g) ? tile_size(g) : 0;
#else
    (void)winograd_shape;
    (void)g;
    return 0;
#endif
}

/* Scratch of a forward or input-gradient pass (transformed filters, then per chunk parity
 * planes and V, and for wide layers M) or of the weight gradient (dU, then per chunk parity
 * planes, V and D). */
size_t cpu_conv_winograd_workspace(const conv_geom *g, int chunk, int slots, int weight_grad)
{
#ifdef CONV_WINOGRAD
    const wino_geom wg = make_geom(g, weight_grad);
    const size_t cols = tile_cols(chunk * wg.tiles), pairs = (size_t)g->K * g->C;
    const size_t xi = (size_t)wg.xi;
    const size_t own = !wide(g) && slots > 1 ? (size_t)slots : 1;
    if (weight_grad)
        return sizeof(float) *
               own * (round16(xi * pairs) + grad_chunk_floats(&wg, chunk, g->C, g->K));
    const int most = g->C > g->K ? g->C : g->K;
    if (wide(g))
        return sizeof(float) * (round16(xi * pairs) + (size_t)chunk * most * parity_floats(&wg) +
                                xi * (slab(g->C, cols) + slab(g->K, cols)));
    /* the forward's filters or the input gradient's, whichever is larger (blocks of 4 pad
     * the output channels) */
    const size_t fwd = filter_floats(&wg, g->C, g->K), bwd = filter_floats(&wg, g->K, g->C);
    const size_t filters = fwd > bwd ? fwd : bwd;
    return sizeof(float) * (filters + own * chunk_floats(&wg, chunk, most));
#else
    (void)g, (void)chunk, (void)slots, (void)weight_grad;
    return 0;
#endif
}

/* Images per chunk: the most (at least one, at most max_batch) whose scratch fits `budget`
 * beside the fixed part, and the workspace limit with it.
 *   narrow forward / input gradient: 1 MiB, the transformed tiles stay in L2;
 *   narrow weight gradient: 4 MiB; it reads one of 16 position slices at a time, summing over
 *     tiles, so a slice stays within L2 and the sums are long; smaller chunks make short sums
 *     (the 8x8 stage's 1 MiB chunk sums 32 tiles a call), and at 8 MiB the transformed tiles
 *     no longer stay in L2 between the transforms and the products (measurements:
 *     docs/perf-notes.md);
 *   wide: 16 MiB, so the GEMMs have a few hundred tiles for their N. */
int cpu_conv_winograd_chunk(const conv_geom *g, int max_batch, size_t limit, int slots,
                            int weight_grad)
{
#ifdef CONV_WINOGRAD
    const size_t mib = (size_t)1 << 20;
    const int own = !wide(g) && slots > 1 ? slots : 1;
    const size_t budget = (wide(g) ? 16 * mib : weight_grad ? 4 * mib : mib) * own;
    const size_t fixed = cpu_conv_winograd_workspace(g, 0, own, weight_grad);
    const size_t per = cpu_conv_winograd_workspace(g, 1, own, weight_grad) - fixed;
    size_t nb = budget / per;
    if (limit > fixed && (limit - fixed) / per < nb)
        nb = (limit - fixed) / per;
    if (nb > (size_t)max_batch)
        nb = (size_t)max_batch;
    return nb ? (int)nb : 1;
#else
    (void)g, (void)max_batch, (void)limit, (void)slots, (void)weight_grad;
    return 1;
#endif
}

void cpu_conv_winograd_forward(const conv_geom *g, int n, int chunk, int slots, const float *x,
                               const float *w, const float *bias, float *y, float *workspace)
{
#ifdef CONV_WINOGRAD
    const wino_geom wg = make_geom(g, 0);
    const size_t fixed = cpu_conv_winograd_workspace(g, 0, slots, 0) / sizeof(float);
    transform_filters(&wg, w, g->K, g->C, 0, wide(g), workspace);
    if (wide(g))
        winograd_gemm_pass(&wg, n, chunk, g->C, g->K, x, workspace, bias, y, 0,
                           workspace + fixed);
    else
        winograd_pass(&wg, n, chunk, slots, g->C, g->K, x, workspace, bias, y, 0,
                      workspace + fixed);
#else
    (void)g, (void)n, (void)chunk, (void)slots, (void)x, (void)w, (void)bias, (void)y;
    (void)workspace;
#endif
}

void cpu_conv_winograd_backward(const conv_geom *g, int n, int chunk, int slots,
                                int weight_grad_chunk, const float *x, const float *dy,
                                const float *w, float *dw, float *dx, int accumulate,
                                float *workspace)
{
#ifdef CONV_WINOGRAD
    const wino_geom wg = make_geom(g, 0), wgw = make_geom(g, 1);
    size_t fixed = cpu_conv_winograd_workspace(g, 0, slots, 1) / sizeof(float);
    if (dw)
        winograd_weight_grad(g, &wgw, n, weight_grad_chunk, slots, x, dy, dw, workspace,
                             workspace + fixed);
    if (!dx)
        return;
    fixed = cpu_conv_winograd_workspace(g, 0, slots, 0) / sizeof(float);
    transform_filters(&wg, w, g->K, g->C, 1, wide(g), workspace);
    if (wide(g))
        winograd_gemm_pass(&wg, n, chunk, g->K, g->C, dy, workspace, NULL, dx, accumulate,
                           workspace + fixed);
    else
        winograd_pass(&wg, n, chunk, slots, g->K, g->C, dy, workspace, NULL, dx, accumulate,
                      workspace + fixed);
#else
    (void)g, (void)n, (void)chunk, (void)slots, (void)weight_grad_chunk, (void)x, (void)dy, (void)w;
    (void)dw, (void)dx, (void)accumulate, (void)workspace;
#endif
}
