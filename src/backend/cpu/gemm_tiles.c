/*
 * gemm_tiles.c — matrix products with one dimension small (4 to 64: a CIFAR layer's filters),
 * where OpenBLAS reaches a third to a half of its peak: C = op(A) B by 4 x 24 register tiles
 * (the im2col path's forward and input gradient with few filters, Winograd's per-position
 * products; 4 x 48 for those in the AVX-512 set), and C += A B^T by dot products along the
 * long dimension (weight gradients). conv_winograd.c calls the tile kernel directly (through
 * conv_winograd.h's wino_tile) and the dot products for its weight gradient. Every output is summed by one thread in a fixed order, so results do not depend on
 * the thread count. Built with AVX2 + FMA; elsewhere the drivers call BLAS.
 */
#include <stddef.h>
#include <string.h>

#include "cpu_kernels.h"

enum { MR = 4, NR = 24 };

#if defined(__AVX2__) && defined(__FMA__)
#define CPU_TILES 1
#else
#define CPU_TILES 0
#endif

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

size_t cpu_gemm_tiles_scratch(int m, int k)
{
    return sizeof(float) * (round_up((size_t)m, MR) * k + (size_t)k * NR);
}

#if CPU_TILES

/* c[j * ldc + 0..23] = sum over p < steps and t < taps of a[(p * taps + t) * 4 + j] *
 * b[p * step + offsets[t] + 0..23]: a packed as [steps][taps][4]. A GEMM is one tap (offset 0,
 * step = ldb); a direct convolution is one step per input plane and one tap per kernel
 * position (conv_direct.c). AVX2: 12 accumulators, 3 loads and 4 broadcasts per tap, named
 * variables rather than an array, and the tap loop not unrolled: GCC 12 otherwise spilled
 * accumulators to the stack and folded each load into all 12 FMAs (16 loads per 12 FMAs, well
 * below the tile's speed; measurements: docs/perf-notes.md). The empty asm statement keeps the
 * three loaded vectors in registers. */
#define TILE_ROW(j)                                                                            \
    do {                                                                                       \
        __m256 w##j = _mm256_broadcast_ss(a + (j));                                            \
        c##j##0 = _mm256_fmadd_ps(w##j, x0, c##j##0);                                          \
        c##j##1 = _mm256_fmadd_ps(w##j, x1, c##j##1);                                          \
        c##j##2 = _mm256_fmadd_ps(w##j, x2, c##j##2);                                          \
    } while (0)

#if defined(__AVX512F__)
/* The AVX-512 set: the same tile with each row's 24 lanes in one zmm and one ymm, 8 FMAs a
 * tap where AVX2 issues 12 (on Intel's two 512-bit FMA ports, 3/4 of the time). Every lane
 * sums the same products in the same order as the AVX2 form, so the two sets' tiles agree bit
 * for bit. */
#define TILE_ROW_WIDE(j)                                                                       \
    do {                                                                                       \
        __m512 w##j = _mm512_set1_ps(a[j]);                                                    \
        c##j##0 = _mm512_fmadd_ps(w##j, x0, c##j##0);                                          \
        c##j##1 = _mm256_fmadd_ps(_mm512_castps512_ps256(w##j), x1, c##j##1);                  \
    } while (0)

void cpu_tile_4x24_taps(int steps, int taps, const ptrdiff_t *offsets, size_t step,
                        const float *a, const float *b, float *c, size_t ldc)
{
    __m512 c00 = _mm512_setzero_ps(), c10 = c00, c20 = c00, c30 = c00;
    __m256 c01 = _mm256_setzero_ps(), c11 = c01, c21 = c01, c31 = c01;
    for (int p = 0; p < steps; p++, b += step) {
#pragma GCC unroll 1
        for (int t = 0; t < taps; t++, a += MR) {
            const float *bt = b + offsets[t];
            __m512 x0 = _mm512_loadu_ps(bt);
            __m256 x1 = _mm256_loadu_ps(bt + 16);
            __asm__("" : "+v"(x0), "+v"(x1));
            TILE_ROW_WIDE(0);
            TILE_ROW_WIDE(1);
            TILE_ROW_WIDE(2);
            TILE_ROW_WIDE(3);
        }
    }
    _mm512_storeu_ps(c, c00), _mm256_storeu_ps(c + 16, c01);
    c += ldc;
    _mm512_storeu_ps(c, c10), _mm256_storeu_ps(c + 16, c11);
    c += ldc;
    _mm512_storeu_ps(c, c20), _mm256_storeu_ps(c + 16, c21);
    c += ldc;
    _mm512_storeu_ps(c, c30), _mm256_storeu_ps(c + 16, c31);
}

/* Winograd's per-position products in the AVX-512 set (conv_winograd.h's TB): 4 x 48, three
 * zmm a row, 12 accumulators as the AVX2 tile, 3 loads and 4 broadcasts per 12 FMAs. Lanes
 * sum as cpu_tile_4x24's do, so the products agree bit for bit with the AVX2 set's. */
#define TILE48_ROW(j)                                                                          \
    do {                                                                                       \
        __m512 w##j = _mm512_set1_ps(a[j]);                                                    \
        c##j##0 = _mm512_fmadd_ps(w##j, x0, c##j##0);                                          \
        c##j##1 = _mm512_fmadd_ps(w##j, x1, c##j##1);                                          \
        c##j##2 = _mm512_fmadd_ps(w##j, x2, c##j##2);                                          \
    } while (0)

void cpu_tile_4x48(int k, const float *a, const float *b, size_t ldb, float *c, size_t ldc)
{
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c02 = c00, c10 = c00, c11 = c00, c12 = c00;
    __m512 c20 = c00, c21 = c00, c22 = c00, c30 = c00, c31 = c00, c32 = c00;
    for (int p = 0; p < k; p++, a += MR, b += ldb) {
        __m512 x0 = _mm512_loadu_ps(b), x1 = _mm512_loadu_ps(b + 16);
        __m512 x2 = _mm512_loadu_ps(b + 32);
        __asm__("" : "+v"(x0), "+v"(x1), "+v"(x2));
        TILE48_ROW(0);
        TILE48_ROW(1);
        TILE48_ROW(2);
        TILE48_ROW(3);
    }
    _mm512_storeu_ps(c, c00), _mm512_storeu_ps(c + 16, c01), _mm512_storeu_ps(c + 32, c02);
    c += ldc;
    _mm512_storeu_ps(c, c10), _mm512_storeu_ps(c + 16, c11), _mm512_storeu_ps(c + 32, c12);
    c += ldc;
    _mm512_storeu_ps(c, c20), _mm512_storeu_ps(c + 16, c21), _mm512_storeu_ps(c + 32, c22);
    c += ldc;
    _mm512_storeu_ps(c, c30), _mm512_storeu_ps(c + 16, c31), _mm512_storeu_ps(c + 32, c32);
}
#else
void cpu_tile_4x24_taps(int steps, int taps, const ptrdiff_t *offsets, size_t step,
                        const float *a, const float *b, float *c, size_t ldc)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c02 = c00, c10 = c00, c11 = c00, c12 = c00;
    __m256 c20 = c00, c21 = c00, c22 = c00, c30 = c00, c31 = c00, c32 = c00;
    for (int p = 0; p < steps; p++, b += step) {
#pragma GCC unroll 1
        for (int t = 0; t < taps; t++, a += MR) {
            const float *bt = b + offsets[t];
            __m256 x0 = _mm256_loadu_ps(bt), x1 = _mm256_loadu_ps(bt + 8);
            __m256 x2 = _mm256_loadu_ps(bt + 16);
            __asm__("" : "+x"(x0), "+x"(x1), "+x"(x2));
            TILE_ROW(0);
            TILE_ROW(1);
            TILE_ROW(2);
            TILE_ROW(3);
        }
    }
    _mm256_storeu_ps(c, c00), _mm256_storeu_ps(c + 8, c01), _mm256_storeu_ps(c + 16, c02);
    c += ldc;
    _mm256_storeu_ps(c, c10), _mm256_storeu_ps(c + 8, c11), _mm256_storeu_ps(c + 16, c12);
    c += ldc;
    _mm256_storeu_ps(c, c20), _mm256_storeu_ps(c + 8, c21), _mm256_storeu_ps(c + 16, c22);
    c += ldc;
    _mm256_storeu_ps(c, c30), _mm256_storeu_ps(c + 8, c31), _mm256_storeu_ps(c + 16, c32);
}
#endif


void cpu_tile_4x24(int k, const float *a, const float *b, size_t ldb, float *c, size_t ldc)
{
    static const ptrdiff_t none = 0;
    cpu_tile_4x24_taps(k, 1, &none, ldb, a, b, c, ldc);
}

/* acc[j][i][0..7] += the lanes of sum over t in [t0, t1) of a[j][t] * b[i][t]: 12
 * accumulators, 3 + 4 loads per 12 FMAs (the asm statements as above: without them GCC 12
 * re-read a or b inside every FMA, 15 or 16 loads per 12 FMAs); t1 - t0 a multiple of 8.
 * The accumulators live in memory between calls, so a caller can cut the sum into pieces
 * (with AVX2 the same lanes as one call over the whole length; the AVX-512 form sums each
 * call's part in 16 lanes first, so there the cut moves the rounding). Also the direct
 * convolution's weight gradient (4 filters' dy rows against 3 shifted input rows,
 * conv_direct.c). */
#define DOT_ROW(j)                                                                             \
    do {                                                                                       \
        __m256 d = _mm256_loadu_ps(a[j] + t);                                                  \
        __asm__("" : "+x"(d));                                                                 \
        c##j##0 = _mm256_fmadd_ps(d, x0, c##j##0);                                             \
        c##j##1 = _mm256_fmadd_ps(d, x1, c##j##1);                                             \
        c##j##2 = _mm256_fmadd_ps(d, x2, c##j##2);                                             \
    } while (0)

static void dot_4x3_ymm(const float *const a[4], const float *const b[3], size_t t0, size_t t1,
                        float acc[4][3][8])
{
    __m256 c00 = _mm256_loadu_ps(acc[0][0]), c01 = _mm256_loadu_ps(acc[0][1]);
    __m256 c02 = _mm256_loadu_ps(acc[0][2]), c10 = _mm256_loadu_ps(acc[1][0]);
    __m256 c11 = _mm256_loadu_ps(acc[1][1]), c12 = _mm256_loadu_ps(acc[1][2]);
    __m256 c20 = _mm256_loadu_ps(acc[2][0]), c21 = _mm256_loadu_ps(acc[2][1]);
    __m256 c22 = _mm256_loadu_ps(acc[2][2]), c30 = _mm256_loadu_ps(acc[3][0]);
    __m256 c31 = _mm256_loadu_ps(acc[3][1]), c32 = _mm256_loadu_ps(acc[3][2]);
    for (size_t t = t0; t < t1; t += 8) {
        __m256 x0 = _mm256_loadu_ps(b[0] + t), x1 = _mm256_loadu_ps(b[1] + t);
        __m256 x2 = _mm256_loadu_ps(b[2] + t);
        __asm__("" : "+x"(x0), "+x"(x1), "+x"(x2));
        DOT_ROW(0);
        DOT_ROW(1);
        DOT_ROW(2);
        DOT_ROW(3);
    }
    _mm256_storeu_ps(acc[0][0], c00), _mm256_storeu_ps(acc[0][1], c01);
    _mm256_storeu_ps(acc[0][2], c02), _mm256_storeu_ps(acc[1][0], c10);
    _mm256_storeu_ps(acc[1][1], c11), _mm256_storeu_ps(acc[1][2], c12);
    _mm256_storeu_ps(acc[2][0], c20), _mm256_storeu_ps(acc[2][1], c21);
    _mm256_storeu_ps(acc[2][2], c22), _mm256_storeu_ps(acc[3][0], c30);
    _mm256_storeu_ps(acc[3][1], c31), _mm256_storeu_ps(acc[3][2], c32);
}

#if defined(__AVX512F__)
/* The AVX-512 set: 16 lanes a step while 16 remain, their halves then added into acc's 8
 * lanes, and a last 8 as AVX2 does (sums in another order than the AVX2 set's: the two sets
 * differ by rounding here). */
#define DOT_ROW_WIDE(j)                                                                        \
    do {                                                                                       \
        __m512 d = _mm512_loadu_ps(a[j] + t);                                                  \
        __asm__("" : "+v"(d));                                                                 \
        c##j##0 = _mm512_fmadd_ps(d, x0, c##j##0);                                             \
        c##j##1 = _mm512_fmadd_ps(d, x1, c##j##1);                                             \
        c##j##2 = _mm512_fmadd_ps(d, x2, c##j##2);                                             \
    } while (0)

static void fold_into(float lanes[8], __m512 v)
{
    /* the upper half through the AVX-512F extract (the 32x8 form needs DQ) */
    const __m256 upper = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    const __m256 halves = _mm256_add_ps(_mm512_castps512_ps256(v), upper);
    _mm256_storeu_ps(lanes, _mm256_add_ps(_mm256_loadu_ps(lanes), halves));
}

void cpu_dot_4x3(const float *const a[4], const float *const b[3], size_t t0, size_t t1,
                 float acc[4][3][8])
{
    const size_t wide_end = t0 + (t1 - t0) / 16 * 16;
    if (wide_end > t0) {
        __m512 c00 = _mm512_setzero_ps(), c01 = c00, c02 = c00, c10 = c00, c11 = c00, c12 = c00;
        __m512 c20 = c00, c21 = c00, c22 = c00, c30 = c00, c31 = c00, c32 = c00;
        for (size_t t = t0; t < wide_end; t += 16) {
            __m512 x0 = _mm512_loadu_ps(b[0] + t), x1 = _mm512_loadu_ps(b[1] + t);
            __m512 x2 = _mm512_loadu_ps(b[2] + t);
            __asm__("" : "+v"(x0), "+v"(x1), "+v"(x2));
            DOT_ROW_WIDE(0);
            DOT_ROW_WIDE(1);
            DOT_ROW_WIDE(2);
            DOT_ROW_WIDE(3);
        }
        fold_into(acc[0][0], c00), fold_into(acc[0][1], c01), fold_into(acc[0][2], c02);
        fold_into(acc[1][0], c10), fold_into(acc[1][1], c11), fold_into(acc[1][2], c12);
        fold_into(acc[2][0], c20), fold_into(acc[2][1], c21), fold_into(acc[2][2], c22);
        fold_into(acc[3][0], c30), fold_into(acc[3][1], c31), fold_into(acc[3][2], c32);
    }
    if (wide_end < t1)
        dot_4x3_ymm(a, b, wide_end, t1, acc);
}
#else
void cpu_dot_4x3(const float *const a[4], const float *const b[3], size_t t0, size_t t1,
                 float acc[4][3][8])
{
    dot_4x3_ymm(a, b, t0, t1, acc);
}
#endif

/* The same for two rows of B (acc's first two columns): the last blocks of a B whose rows are
 * no multiple of 3, which a 4 x 3 block covered with a repeated row whose sums were dropped
 * (16 channels: 18 rows' work for 16). 8 accumulators, 6 loads per 8 FMAs; each lane sums as
 * the 4 x 3 block's do, in both sets, so the bits do not depend on which block a row is in. */
#define DOT2_ROW(j)                                                                            \
    do {                                                                                       \
        __m256 d = _mm256_loadu_ps(a[j] + t);                                                  \
        __asm__("" : "+x"(d));                                                                 \
        c##j##0 = _mm256_fmadd_ps(d, x0, c##j##0);                                             \
        c##j##1 = _mm256_fmadd_ps(d, x1, c##j##1);                                             \
    } while (0)

static void dot_4x2_ymm(const float *const a[4], const float *const b[2], size_t t0, size_t t1,
                        float acc[4][3][8])
{
    __m256 c00 = _mm256_loadu_ps(acc[0][0]), c01 = _mm256_loadu_ps(acc[0][1]);
    __m256 c10 = _mm256_loadu_ps(acc[1][0]), c11 = _mm256_loadu_ps(acc[1][1]);
    __m256 c20 = _mm256_loadu_ps(acc[2][0]), c21 = _mm256_loadu_ps(acc[2][1]);
    __m256 c30 = _mm256_loadu_ps(acc[3][0]), c31 = _mm256_loadu_ps(acc[3][1]);
    for (size_t t = t0; t < t1; t += 8) {
        __m256 x0 = _mm256_loadu_ps(b[0] + t), x1 = _mm256_loadu_ps(b[1] + t);
        __asm__("" : "+x"(x0), "+x"(x1));
        DOT2_ROW(0);
        DOT2_ROW(1);
        DOT2_ROW(2);
        DOT2_ROW(3);
    }
    _mm256_storeu_ps(acc[0][0], c00), _mm256_storeu_ps(acc[0][1], c01);
    _mm256_storeu_ps(acc[1][0], c10), _mm256_storeu_ps(acc[1][1], c11);
    _mm256_storeu_ps(acc[2][0], c20), _mm256_storeu_ps(acc[2][1], c21);
    _mm256_storeu_ps(acc[3][0], c30), _mm256_storeu_ps(acc[3][1], c31);
}

#if defined(__AVX512F__)
#define DOT2_ROW_WIDE(j)                                                                       \
    do {                                                                                       \
        __m512 d = _mm512_loadu_ps(a[j] + t);                                                  \
        __asm__("" : "+v"(d));                                                                 \
        c##j##0 = _mm512_fmadd_ps(d, x0, c##j##0);                                             \
        c##j##1 = _mm512_fmadd_ps(d, x1, c##j##1);                                             \
    } while (0)

static void dot_4x2(const float *const a[4], const float *const b[2], size_t t0, size_t t1,
                    float acc[4][3][8])
{
    const size_t wide_end = t0 + (t1 - t0) / 16 * 16;
    if (wide_end > t0) {
        __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00;
        __m512 c20 = c00, c21 = c00, c30 = c00, c31 = c00;
        for (size_t t = t0; t < wide_end; t += 16) {
            __m512 x0 = _mm512_loadu_ps(b[0] + t), x1 = _mm512_loadu_ps(b[1] + t);
            __asm__("" : "+v"(x0), "+v"(x1));
            DOT2_ROW_WIDE(0);
            DOT2_ROW_WIDE(1);
            DOT2_ROW_WIDE(2);
            DOT2_ROW_WIDE(3);
        }
        fold_into(acc[0][0], c00), fold_into(acc[0][1], c01);
        fold_into(acc[1][0], c10), fold_into(acc[1][1], c11);
        fold_into(acc[2][0], c20), fold_into(acc[2][1], c21);
        fold_into(acc[3][0], c30), fold_into(acc[3][1], c31);
    }
    if (wide_end < t1)
        dot_4x2_ymm(a, b, wide_end, t1, acc);
}
#else
static void dot_4x2(const float *const a[4], const float *const b[2], size_t t0, size_t t1,
                    float acc[4][3][8])
{
    dot_4x2_ymm(a, b, t0, t1, acc);
}
#endif

#endif

/* op(A) (m x k; A is k x m when trans_a) into the scratch, once for any number of products
 * with it: as blocks [m / 4][k][4], rows past m zero (without AVX2: row-major, for BLAS). */
void cpu_gemm_tiles_pack(int trans_a, int m, int k, const float *a, int lda, float *scratch)
{
    const int simd = CPU_TILES;
    const long long blocks = (long long)(round_up((size_t)m, MR) / MR);
#pragma omp parallel for schedule(guided)
    for (long long bl = 0; bl < blocks; bl++)
        for (int p = 0; p < k; p++)
            for (int j = 0; j < MR; j++) {
                const int r = (int)bl * MR + j;
                float v = 0.0f;
                if (r < m)
                    v = trans_a ? a[(size_t)p * lda + r] : a[(size_t)r * lda + p];
                if (simd)
                    scratch[((size_t)bl * k + p) * MR + j] = v;
                else if (r < m)
                    scratch[(size_t)r * k + p] = v;
            }
}

void cpu_gemm_tiles(int m, int n, int k, const float *b, int ldb, float *c, int ldc,
                    float *scratch)
{
#if CPU_TILES
    const float *packed = scratch;
    float *tail = scratch + round_up((size_t)m, MR) * k;
    /* the last columns (n % 24) from a zero-padded copy, so no tile reads past B's rows */
    const int full = n / NR * NR, rest = n - full;
    for (int p = 0; rest && p < k; p++) {
        memcpy(tail + (size_t)p * NR, b + (size_t)p * ldb + full, sizeof(float) * rest);
        memset(tail + (size_t)p * NR + rest, 0, sizeof(float) * (NR - rest));
    }
    const long long mblocks = (long long)(round_up((size_t)m, MR) / MR);
    const long long nblocks = (n + NR - 1) / NR, jobs = mblocks * nblocks;
    /* column-block major: consecutive jobs of a thread reuse one 24-column panel of B from
     * L1 (its rows are far apart) against the small packed A */
#pragma omp parallel for schedule(guided)
    for (long long job = 0; job < jobs; job++) {
        const int nb = (int)(job / mblocks), mb = (int)(job % mblocks);
        const int r0 = mb * MR, c0 = nb * NR, rows = m - r0 < MR ? m - r0 : MR;
        const int cols = n - c0 < NR ? n - c0 : NR;
        const float *ap = packed + (size_t)mb * k * MR;
        if (rows == MR && cols == NR) {
            cpu_tile_4x24(k, ap, b + c0, (size_t)ldb, c + (size_t)r0 * ldc + c0, (size_t)ldc);
            continue;
        }
        float t[MR][NR];
        cpu_tile_4x24(k, ap, cols == NR ? b + c0 : tail, cols == NR ? (size_t)ldb : NR, t[0],
                      NR);
        for (int j = 0; j < rows; j++)
            memcpy(c + (size_t)(r0 + j) * ldc + c0, t[j], sizeof(float) * cols);
    }
#else
    cpu_gemm(0, 0, m, n, k, 1.0f, scratch, k, b, ldb, 0.0f, c, ldc);
#endif
}

/* Blocks of 4 rows of A and 3 of B (dot_blocks_of); a job is a run of up to DOT_RUN blocks of A against a
 * group of up to DOT_GROUP blocks of B, and runs the reduction in pieces of DOT_PIECE, the
 * pieces outermost: the piece of the group's rows (up to 48 x 2 KiB) stays in L2 while the
 * run's pieces of A pass, each (8 KiB) in L1 while the group's rows stream past it. Over the
 * whole length at once, every block read its 7 rows from L2 (Winograd's weight gradient: a
 * sum over up to thousands of tiles), much slower per FLOP than the 4 x 24 tile; with one
 * block of A a job, every block re-read the group's rows from L3 (ResNet-50's 7x7 / 2 input
 * layer: 147 rows of 12544 pixels an image, read 16 times, and its backward ran slower at 2
 * threads than at 1) (measurements: docs/perf-notes.md). Each sum adds the same pieces in the
 * same order however the jobs fall, so the bits do not depend on the threads. */
enum { DOT_GROUP = 16, DOT_PIECE = 512, DOT_RUN = 8 };

#if CPU_TILES
/* B's rows in blocks of 3, the last one or two of 2 where n is no multiple of 3 (one block of
 * 2, its second row repeated, for n = 1): block g's first row and its width. */
typedef struct {
    int threes, blocks;
} dot_blocks;

static dot_blocks dot_blocks_of(int n)
{
    const int twos = n == 1 ? 1 : n % 3 == 0 ? 0 : n % 3 == 2 ? 1 : 2;
    const int threes = (n - 2 * twos) / 3 > 0 ? (n - 2 * twos) / 3 : 0;
    return (dot_blocks){threes, threes + twos};
}

static int dot_block_row(const dot_blocks *d, int g)
{
    return g < d->threes ? 3 * g : 3 * d->threes + 2 * (g - d->threes);
}
#endif

void cpu_gemm_dots(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                   float *c, int ldc)
{
#if CPU_TILES
    if (m <= 0 || n <= 0)
        return;
    const dot_blocks db = dot_blocks_of(n);
    const long long mblocks = (m + 3) / 4, nblocks = db.blocks;
    const long long groups = (nblocks + DOT_GROUP - 1) / DOT_GROUP;
    /* runs of at most DOT_RUN blocks, shorter where that gives each thread two jobs; the
     * count of runs then follows from their length, so none is empty */
    const int threads = cpu_team_size() > 1 ? 1 : cpu_threads();
    long long runs = (mblocks + DOT_RUN - 1) / DOT_RUN;
    const long long want = (2LL * threads + groups - 1) / groups;
    if (runs < want)
        runs = want < mblocks ? want : mblocks;
    const long long run = (mblocks + runs - 1) / runs;
    runs = (mblocks + run - 1) / run;
    const long long jobs = groups * runs;
    const size_t len = (size_t)k / 8 * 8;
/* not inside a thread's own chunk (conv_winograd.c): that thread runs it alone */
#pragma omp parallel for schedule(guided) if (!omp_in_parallel())
    for (long long job = 0; job < jobs; job++) {
        const int nb0 = (int)(job / runs) * DOT_GROUP, mb0 = (int)((job % runs) * run);
        const int nbs = (int)(nblocks - nb0 < DOT_GROUP ? nblocks - nb0 : DOT_GROUP);
        const int nms = (int)(mblocks - mb0 < run ? mblocks - mb0 : run);
        const float *ar[DOT_RUN][4], *br[DOT_GROUP][3];
        /* rows past the end: any valid row, their sums are dropped below */
        for (int r = 0; r < nms; r++)
            for (int j = 0; j < 4; j++) {
                const int row = (mb0 + r) * 4 + j;
                ar[r][j] = a + (size_t)(row < m ? row : m - 1) * lda;
            }
        int width[DOT_GROUP];
        for (int g = 0; g < nbs; g++) {
            width[g] = nb0 + g < db.threes ? 3 : 2;
            for (int i = 0; i < width[g]; i++) {
                const int row = dot_block_row(&db, nb0 + g) + i;
                br[g][i] = b + (size_t)(row < n ? row : n - 1) * ldb;
            }
        }
        float acc[DOT_RUN][DOT_GROUP][4][3][8];
        for (int r = 0; r < nms; r++)
            memset(acc[r], 0, sizeof acc[r][0] * nbs);
        for (size_t t0 = 0; t0 < len; t0 += DOT_PIECE) {
            const size_t t1 = len - t0 < DOT_PIECE ? len : t0 + DOT_PIECE;
            for (int r = 0; r < nms; r++)
                for (int g = 0; g < nbs; g++) {
                    if (width[g] == 3)
                        cpu_dot_4x3(ar[r], br[g], t0, t1, acc[r][g]);
                    else
                        dot_4x2(ar[r], br[g], t0, t1, acc[r][g]);
                }
        }
        for (int r = 0; r < nms; r++)
            for (int g = 0; g < nbs; g++) {
                const int row0 = (mb0 + r) * 4, col0 = dot_block_row(&db, nb0 + g);
                for (int j = 0; j < 4 && row0 + j < m; j++)
                    for (int i = 0; i < width[g] && col0 + i < n; i++) {
                        double sum = cpu_hsum8(_mm256_loadu_ps(acc[r][g][j][i]));
                        for (size_t t = len; t < (size_t)k; t++)
                            sum += (double)ar[r][j][t] * br[g][i][t];
                        c[(size_t)(row0 + j) * ldc + col0 + i] += (float)sum;
                    }
            }
    }
#else
    cpu_gemm(0, 1, m, n, k, 1.0f, a, lda, b, ldb, 1.0f, c, ldc);
#endif
}
