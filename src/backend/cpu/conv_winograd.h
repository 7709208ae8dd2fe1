/*
 * conv_winograd.h — what the two halves of the CPU's Winograd convolution share, inside
 * src/backend/cpu/: the tile geometry and the layout of the transformed tiles and filters,
 * and the transforms (conv_winograd_transforms.c) that the plan and the batched products
 * (conv_winograd.c) call. conv_winograd.c's top comment describes the method. AVX2 + FMA
 * compiles only, as the kernels.
 */
#ifndef DTNN_CONV_WINOGRAD_H
#define DTNN_CONV_WINOGRAD_H

#include <stddef.h>

#include "cpu_kernels.h"

#if defined(__AVX2__) && defined(__FMA__)
#define CONV_WINOGRAD 1

/* channel block, tile block: the products' register tile is KB x TB (gemm_tiles.c), as wide
 * as a set's vectors allow: 3 ymm or 3 zmm a row */
#if defined(__AVX512F__)
enum { KB = 4, TB = 48 };
static inline void wino_tile(int k, const float *u, const float *v, size_t ldv, float *m,
                             size_t ldm)
{
    cpu_tile_4x48(k, u, v, ldv, m, ldm);
}
#else
enum { KB = 4, TB = 24 };
static inline void wino_tile(int k, const float *u, const float *v, size_t ldv, float *m,
                             size_t ldm)
{
    cpu_tile_4x24(k, u, v, ldv, m, ldm);
}
#endif
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
    int quad;           /* F(4x4) on planes 8 wide: two rows of 2 tiles in one SSE vector, read
                           from the plane (no phase planes) */
    int small;          /* too few tiles a row for a vector: one tile at a time, read from the
                           plane (conv_winograd_small.c; no parity or phase planes) */
    int bf16;           /* CPU_WINO_BF16_* flags: --precision bf16's roundings, done in passing */
} wino_geom;

/* x rounded to bf16, ties to even, NaN quieted: core/half.h's bf16_round, 8 or 4 lanes. */
static inline __m256 round_bf16_8(__m256 x)
{
    const __m256i u = _mm256_castps_si256(x), upper = _mm256_set1_epi32((int)0xffff0000u);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_and_si256(
        _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), upper);
    const __m256i quiet = _mm256_or_si256(_mm256_and_si256(u, upper), _mm256_set1_epi32(0x400000));
    return _mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_castsi256_ps(quiet),
                            _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

static inline __m128 round_bf16_4(__m128 x)
{
    const __m128i u = _mm_castps_si128(x), upper = _mm_set1_epi32((int)0xffff0000u);
    const __m128i lsb = _mm_and_si128(_mm_srli_epi32(u, 16), _mm_set1_epi32(1));
    const __m128i r =
        _mm_and_si128(_mm_add_epi32(u, _mm_add_epi32(lsb, _mm_set1_epi32(0x7fff))), upper);
    const __m128i quiet = _mm_or_si128(_mm_and_si128(u, upper), _mm_set1_epi32(0x400000));
    return _mm_blendv_ps(_mm_castsi128_ps(r), _mm_castsi128_ps(quiet), _mm_cmp_ps(x, x, _CMP_UNORD_Q));
}

static inline size_t round16(size_t n) { return (n + 15) / 16 * 16; }

/* Floats from one position's slab of transformed tiles ([xi][rows][ldv]) to the next: 64
 * bytes more than its rows, so the 16 or 36 positions a transform writes at once fall into
 * different cache sets. Slabs of a multiple of 4 KiB put all 16 into one set of the 8-way L1,
 * and the input transform stalled on those conflicts (measurements: docs/perf-notes.md). */
static inline size_t slab(int rows, size_t ldv)
{
    return ldv ? (size_t)rows * ldv + 16 : 0;   /* 0 for no tiles: the scratch's fixed part */
}

static inline size_t channel_blocks(int channels) { return (size_t)(channels + KB - 1) / KB; }
static inline size_t tile_cols(int tiles) { return (size_t)(tiles + TB - 1) / TB * TB; }

/* Floats of one input plane's four parity or phase planes (one set per (image, channel) of a
 * chunk). */
static inline size_t parity_floats(const wino_geom *wg) { return 4 * wg->plane; }

/* The transforms (conv_winograd_transforms.c). Filters: U = G g G^T of w [K, C, 3, 3], for
 * the forward pass or (for_input_grad) the input gradient, as [xi][outs / KB][ins][KB] or,
 * with rows, xi row-major [outs][ins] matrices. Inputs: V [xi][ins][ldv] = B^T d B of every
 * tile of images n0 .. n0 + nb - 1, through parity planes at par. Output: the lanes tiles
 * from tile (ty, tx) of a plane, A^T M A (+ bias, or added). Gradients: D [xi][K][ldv] = A dy
 * A^T. Filter gradient: dw [K, C, 3, 3] += G^T dU G. */
void wino_transform_filters(const wino_geom *wg, const float *w, int K, int C,
                            int for_input_grad, int rows, float *u);
void wino_transform_inputs(const wino_geom *wg, int n0, int nb, int ins, const float *in,
                           float *par, float *v, size_t ldv, int team);
void wino_transform_output(const wino_geom *wg, const float *m, size_t xi_stride, float bias,
                           int ty, int tx, float *plane, int accumulate);
void wino_transform_grads(const wino_geom *wg, int n0, int nb, int K, const float *dy,
                          float *d, size_t ldv, int team);
void wino_filter_grad(const wino_geom *wg, int K, int C, const float *du, float *dw);

/* The same one tile at a time (conv_winograd_small.c): V of every tile of one plane (tile t
 * at v + t), the outputs of one tile (F(4x4) only) at `out`, its first output in the plane,
 * D of every tile of one output gradient plane (F(2x2)). */
void wino_small_input(const wino_geom *wg, const float *src, float *v, size_t xi_stride);
void wino_small_output(const wino_geom *wg, const float *m, size_t xi_stride, float bias,
                       float *out, int accumulate);
void wino_small_grad(const wino_geom *wg, const float *dy, float *d, size_t xi_stride);

#endif
#endif
