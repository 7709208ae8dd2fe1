/*
 * gemm_packed.c — dtnn's own GEMM, the one every convolution path and fully connected layer
 * of the fast kernel sets runs: C = alpha op(A) op(B) + beta C, row-major, any shape and
 * transposition. BLIS's loop order: the sum over k in blocks of KC; per block, op(A) packed
 * into row panels of MR and a block of op(B)'s columns into column panels of NR (zero-padded,
 * so the register tile never reads past a matrix), then jobs of MC rows x JOB_PANELS column
 * panels, each running the MR x NR register tile over its panels with B's panel (KC x NR) in
 * L1 and A's rows in L2. Threads take blocks of C (gemm_packed). The tile is MR = 6 rows by
 * two vectors: 6 x 16 with AVX2, 6 x 32 with AVX-512 (12 accumulators: FMA latency 4 x 2
 * ports on Intel's two 512-bit FMA units, and Zen 4's split zmm alike; 2 loads and 6
 * broadcasts per 12 FMAs). A last column panel of at most one vector runs on a 12 x 1-vector
 * tile instead (tile_12x1v).
 *
 * It does not depend on the BLAS knowing the CPU: Debian's OpenBLAS 0.3.21 runs its SSE3
 * kernels on Intel's family 6 model 207. The generic set keeps the BLAS (gemm_blas.c).
 *
 * Determinism: every element of C is summed by one thread, its KC blocks in order, and the
 * tile's epilogue is the same rounding for full and partial tiles (alpha * sum, then
 * fma(beta, C, that)), so the bits depend neither on the thread count nor on where a tile
 * falls.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"

#if defined(__AVX512F__)
#define GEMM_OWN 1
typedef __m512 vec;
/* KC as AVX2's: B's panel (KC x 32 floats, 32 KiB) fills Zen 4's L1 and two thirds of Intel's
 * 48 KiB, but with 192 the common k = 256 (ResNet-50's bottlenecks) took two blocks, C's
 * tiles loaded and stored twice (measurements: docs/perf-notes.md). */
enum { VW = 16, KC = 256 };
#define VLOAD(p) _mm512_loadu_ps(p)
#define VSTORE(p, v) _mm512_storeu_ps(p, v)
#define VSET1(x) _mm512_set1_ps(x)
#define VMUL(a, b) _mm512_mul_ps(a, b)
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VZERO() _mm512_setzero_ps()
#define KEEP(v) __asm__("" : "+v"(v))
#define VDPBF16(c, a, b) _mm512_dpbf16_ps(c, (__m512bh)(a), (__m512bh)(b))
#define BF16_TARGET __attribute__((target("avx512bf16")))
#define GEMM_ISA "avx512"
#elif defined(__AVX2__) && defined(__FMA__)
#define GEMM_OWN 1
typedef __m256 vec;
enum { VW = 8, KC = 256 };
#define VLOAD(p) _mm256_loadu_ps(p)
#define VSTORE(p, v) _mm256_storeu_ps(p, v)
#define VSET1(x) _mm256_set1_ps(x)
#define VMUL(a, b) _mm256_mul_ps(a, b)
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VZERO() _mm256_setzero_ps()
#define KEEP(v) __asm__("" : "+x"(v))
#define VDPBF16(c, a, b) _mm256_dpbf16_ps(c, (__m256bh)(a), (__m256bh)(b))
#define BF16_TARGET __attribute__((target("avx512bf16,avx512vl")))
#define GEMM_ISA "avx2+fma"
#else
#define GEMM_OWN 0
#endif

#if GEMM_OWN
#include <stdio.h>

/* A job is MC rows x JOB_PANELS column panels: the rows' packed A (96 x 256 floats) stays in
 * L2 while the panels pass. NC bounds the packed block of B (KC x NC floats: 2 MiB). */
enum { MR = 6, NR = 2 * VW, MC = 16 * MR, JOB_PANELS = 8, NC = 2048 };

typedef struct {
    float alpha, beta;
    int overwrite;      /* beta applied and 0 (the first k block, beta 0): C is not read */
} tile_epilogue;

static inline vec tile_out(vec acc, const float *c, vec valpha, vec vbeta, int overwrite)
{
    vec out = VMUL(valpha, acc);
    return overwrite ? out : VFMA(vbeta, VLOAD(c), out);
}

/* One packed tile: a as [steps][MR], b as [steps][NR] slots of 32 bits: a float each, or
 * (bf16) a pair of bfloat16 along k, multiplied by vdpbf16ps: two products a lane, summed in
 * fp32 (subnormal operands and results flushed to zero, as AVX512_BF16 defines it). Named
 * accumulators and the empty asm on the loaded vectors, as gemm_tiles.c's: without them GCC
 * 12 spilled or re-read operands. */
#define MADD_F32(w, b, c) VFMA(w, b, c)
#define MADD_BF16(w, b, c) VDPBF16(c, w, b)
#define TILE_ROW(j, MADD)                                                                      \
    do {                                                                                       \
        vec w##j = VSET1(a[j]);                                                                \
        c##j##0 = MADD(w##j, b0, c##j##0);                                                     \
        c##j##1 = MADD(w##j, b1, c##j##1);                                                     \
    } while (0)
#define TILE_STORE(j)                                                                          \
    do {                                                                                       \
        float *cj = c + (size_t)(j) * ldc;                                                     \
        VSTORE(cj, tile_out(c##j##0, cj, va, vb, ep->overwrite));                              \
        VSTORE(cj + VW, tile_out(c##j##1, cj + VW, va, vb, ep->overwrite));                    \
    } while (0)
#define TILE_BODY(MADD)                                                                        \
    vec c00 = VZERO(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;                  \
    vec c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;                      \
    _Pragma("GCC unroll 2") for (int p = 0; p < steps; p++, a += MR, b += NR)                  \
    {                                                                                          \
        vec b0 = VLOAD(b), b1 = VLOAD(b + VW);                                                 \
        KEEP(b0);                                                                              \
        KEEP(b1);                                                                              \
        TILE_ROW(0, MADD);                                                                     \
        TILE_ROW(1, MADD);                                                                     \
        TILE_ROW(2, MADD);                                                                     \
        TILE_ROW(3, MADD);                                                                     \
        TILE_ROW(4, MADD);                                                                     \
        TILE_ROW(5, MADD);                                                                     \
    }                                                                                          \
    const vec va = VSET1(ep->alpha), vb = VSET1(ep->beta);                                     \
    TILE_STORE(0);                                                                             \
    TILE_STORE(1);                                                                             \
    TILE_STORE(2);                                                                             \
    TILE_STORE(3);                                                                             \
    TILE_STORE(4);                                                                             \
    TILE_STORE(5)

typedef void tile_fn(int steps, const float *a, const float *b, float *c, size_t ldc,
                     const tile_epilogue *ep);

static void tile_6x2v(int steps, const float *a, const float *b, float *c, size_t ldc,
                      const tile_epilogue *ep)
{
    TILE_BODY(MADD_F32);
}

BF16_TARGET static void tile_6x2v_bf16(int steps, const float *a, const float *b, float *c,
                                       size_t ldc, const tile_epilogue *ep)
{
    TILE_BODY(MADD_BF16);
}

/* A column panel of at most VW columns (the last of a row of C whose length is no multiple of
 * NR: ResNet-50's 14x14 planes, 196 = 6 x 32 + 4 with AVX-512) on the full tile computed NR
 * columns, twice those it has: twelve rows (two panels of A, ap1 = ap0 past the last) by one
 * vector, its 12 accumulators as many as the full tile's. Each lane sums its products in the
 * same order as a full tile's, so the bits do not change; the tile goes to a local block
 * (alpha applied, C unread), combined with C as tile_partial does. */
#define NARROW_ROW(j, a, MADD) n##j = MADD(VSET1((a)[(j) % MR]), b0, n##j)
#define NARROW_STORE(j) VSTORE(t + (j) * VW, VMUL(va, n##j))
#define TILE_NARROW_BODY(MADD)                                                                 \
    vec n0 = VZERO(), n1 = n0, n2 = n0, n3 = n0, n4 = n0, n5 = n0;                             \
    vec n6 = n0, n7 = n0, n8 = n0, n9 = n0, n10 = n0, n11 = n0;                                \
    for (int p = 0; p < steps; p++, a0 += MR, a1 += MR, b += NR) {                             \
        vec b0 = VLOAD(b);                                                                     \
        KEEP(b0);                                                                              \
        NARROW_ROW(0, a0, MADD);                                                               \
        NARROW_ROW(1, a0, MADD);                                                               \
        NARROW_ROW(2, a0, MADD);                                                               \
        NARROW_ROW(3, a0, MADD);                                                               \
        NARROW_ROW(4, a0, MADD);                                                               \
        NARROW_ROW(5, a0, MADD);                                                               \
        NARROW_ROW(6, a1, MADD);                                                               \
        NARROW_ROW(7, a1, MADD);                                                               \
        NARROW_ROW(8, a1, MADD);                                                               \
        NARROW_ROW(9, a1, MADD);                                                               \
        NARROW_ROW(10, a1, MADD);                                                              \
        NARROW_ROW(11, a1, MADD);                                                              \
    }                                                                                          \
    const vec va = VSET1(alpha);                                                               \
    NARROW_STORE(0), NARROW_STORE(1), NARROW_STORE(2), NARROW_STORE(3);                        \
    NARROW_STORE(4), NARROW_STORE(5), NARROW_STORE(6), NARROW_STORE(7);                        \
    NARROW_STORE(8), NARROW_STORE(9), NARROW_STORE(10), NARROW_STORE(11)

typedef void narrow_fn(int steps, const float *a0, const float *a1, const float *b, float *t,
                       float alpha);

static void tile_12x1v(int steps, const float *a0, const float *a1, const float *b, float *t,
                       float alpha)
{
    TILE_NARROW_BODY(MADD_F32);
}

BF16_TARGET static void tile_12x1v_bf16(int steps, const float *a0, const float *a1,
                                        const float *b, float *t, float alpha)
{
    TILE_NARROW_BODY(MADD_BF16);
}

/* The block t [rows][VW] (alpha applied) into C's first cols columns: fma(beta, C, t), as a
 * full tile's lanes, or t alone where C is not read. */
static void combine_block(const float *t, int ld_t, float *c, size_t ldc, int rows, int cols,
                          const tile_epilogue *ep)
{
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            float *ci = c + (size_t)i * ldc + j;
            *ci = ep->overwrite ? t[i * ld_t + j] : fmaf(ep->beta, *ci, t[i * ld_t + j]);
        }
}

/* A tile cut by the edge of C: computed whole into a local tile (alpha applied, C unread),
 * then the covered part combined with C by the same fma as a full tile's lanes. */
static void tile_partial(tile_fn *tile, int steps, const float *a, const float *b, float *c,
                         size_t ldc, int rows, int cols, const tile_epilogue *ep)
{
    float t[MR][NR];
    const tile_epilogue local = {ep->alpha, 0.0f, 1};
    tile(steps, a, b, t[0], NR, &local);
    combine_block(t[0], NR, c, ldc, rows, cols, ep);
}

/* Whether this CPU multiplies bf16 pairs (AVX512_BF16; its ymm form also needs AVX512VL):
 * libgcc's check includes the OS's saved AVX-512 state. */
static int has_bf16_dot(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512vl");
}

typedef struct {
    int trans_a, trans_b, m, n, k;
    const float *a, *b;
    int lda, ldb;
    float *c;
    int ldc;
    float alpha, beta;
    int count;                          /* products; the pointers are the first's */
    size_t stride_a, stride_b, stride_c;
    int bf16;                           /* operands bf16 values, packed as pairs */
} gemm_args;

/* The upper halves of two floats (bf16 values: exact) as one pair slot, lo first along k. */
static inline float bf16_pair(float lo, float hi)
{
    uint32_t l, h;
    memcpy(&l, &lo, sizeof l);
    memcpy(&h, &hi, sizeof h);
    const uint32_t pair = (h & 0xffff0000u) | (l >> 16);
    float out;
    memcpy(&out, &pair, sizeof out);
    return out;
}

/* 8 x 8 floats transposed in ymm registers: out[q] = (in[0][q], ..., in[7][q]). */
static inline void transpose8(__m256 r[8])
{
    __m256 t[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    __m256 u[8];
    for (int i = 0; i < 2; i++)
        for (int h = 0; h < 2; h++) {
            const __m256 a = t[4 * i + h], b = t[4 * i + 2 + h];
            u[4 * i + 2 * h] = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 1, 0));
            u[4 * i + 2 * h + 1] = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 2, 3, 2));
        }
    for (int q = 0; q < 4; q++) {
        r[q] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x20);
        r[4 + q] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x31);
    }
}

/* r[0..5]: 8 consecutive values of each of MR = 6 rows, stored as 8 packed columns of 6 at
 * dst, dst + MR, ... (4 + 2 lanes each: a masked store is microcoded on AMD Zen). */
static inline void store_rows6_transposed(__m256 r[8], float *dst)
{
    r[6] = r[7] = _mm256_setzero_ps();
    transpose8(r);
    for (int q = 0; q < 8; q++) {
        float *d = dst + (size_t)q * MR;
        _mm_storeu_ps(d, _mm256_castps256_ps128(r[q]));
        _mm_storel_pi((__m64 *)(d + 4), _mm256_extractf128_ps(r[q], 1));
    }
}

static float op_a(const gemm_args *g, int i, int p)
{
    return g->trans_a ? g->a[(size_t)p * g->lda + i] : g->a[(size_t)i * g->lda + p];
}

static float op_b(const gemm_args *g, int p, int j)
{
    return g->trans_b ? g->b[(size_t)j * g->ldb + p] : g->b[(size_t)p * g->ldb + j];
}

/* 16 consecutive floats (bf16 values) as 8 pair slots: the upper halves, in order. */
static inline __m256 pairs8(const float *x)
{
    const __m256i upper = _mm256_setr_epi8(2, 3, 6, 7, 10, 11, 14, 15, -1, -1, -1, -1, -1, -1,
                                           -1, -1, 2, 3, 6, 7, 10, 11, 14, 15, -1, -1, -1, -1,
                                           -1, -1, -1, -1);
    const __m256i lo = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)x), upper);
    const __m256i hi = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)(x + 8)), upper);
    /* 64-bit quarters: slots 0-1, 4-5, 2-3, 6-7, put in order */
    const __m256i q = _mm256_unpacklo_epi64(lo, hi);
    return _mm256_castsi256_ps(_mm256_permute4x64_epi64(q, _MM_SHUFFLE(3, 1, 2, 0)));
}

/* bf16: as the float panels below, each slot a pair along k ([steps][MR] and [steps][NR],
 * steps = kc / 2 rounded up), zero past the matrix and past an odd k. Where k runs along
 * memory (untransposed A, transposed B: a weight gradient's operands), 8 rows' pairs8 go
 * through transpose8; untransposed B (the columns of im2col, a pointwise convolution's
 * images) pairs two rows 8 lanes at a time. The rest, a slot at a time. */
static void pack_a_panel_bf16(const gemm_args *g, int panel, int p0, int kc, float *dst)
{
    const int i0 = panel * MR, rows = g->m - i0 < MR ? g->m - i0 : MR;
    int s = 0;
    if (!g->trans_a && rows == MR)
        for (; 2 * (s + 8) <= kc; s += 8) {
            __m256 r[8];
            for (int j = 0; j < MR; j++)
                r[j] = pairs8(g->a + (size_t)(i0 + j) * g->lda + p0 + 2 * s);
            store_rows6_transposed(r, dst + (size_t)s * MR);
        }
    for (; s < (kc + 1) / 2; s++)
        for (int j = 0; j < MR; j++) {
            const int i = i0 + j, p = p0 + 2 * s;
            const float lo = j < rows ? op_a(g, i, p) : 0.0f;
            const float hi = j < rows && 2 * s + 1 < kc ? op_a(g, i, p + 1) : 0.0f;
            dst[(size_t)s * MR + j] = bf16_pair(lo, hi);
        }
}

static void pack_b_panel_bf16(const gemm_args *g, int j0, int p0, int kc, float *dst)
{
    const int cols = g->n - j0 < NR ? g->n - j0 : NR;
    int s = 0;
    if (!g->trans_b && cols == NR) {
        const __m256i upper = _mm256_set1_epi32((int)0xffff0000u);
        for (; 2 * s + 1 < kc; s++) {
            const float *r0 = g->b + (size_t)(p0 + 2 * s) * g->ldb + j0, *r1 = r0 + g->ldb;
            for (int j = 0; j < NR; j += 8) {
                const __m256i lo = _mm256_loadu_si256((const __m256i *)(r0 + j));
                const __m256i hi = _mm256_loadu_si256((const __m256i *)(r1 + j));
                const __m256i pair =
                    _mm256_or_si256(_mm256_and_si256(hi, upper), _mm256_srli_epi32(lo, 16));
                _mm256_storeu_si256((__m256i *)(dst + (size_t)s * NR + j), pair);
            }
        }
    }
    for (int jj = 0; jj < NR; jj += 8) {
        int t = s;
        if (g->trans_b && jj + 8 <= cols)
            for (; 2 * (t + 8) <= kc; t += 8) {
                __m256 r[8];
                for (int c = 0; c < 8; c++)
                    r[c] = pairs8(g->b + (size_t)(j0 + jj + c) * g->ldb + p0 + 2 * t);
                transpose8(r);
                for (int q = 0; q < 8; q++)
                    _mm256_storeu_ps(dst + (size_t)(t + q) * NR + jj, r[q]);
            }
        for (; t < (kc + 1) / 2; t++)
            for (int j = jj; j < jj + 8; j++) {
                const int p = p0 + 2 * t;
                const float lo = j < cols ? op_b(g, p, j0 + j) : 0.0f;
                const float hi = j < cols && 2 * t + 1 < kc ? op_b(g, p + 1, j0 + j) : 0.0f;
                dst[(size_t)t * NR + j] = bf16_pair(lo, hi);
            }
    }
}

/* Rows [MR * panel, + MR) of op(A), columns [p0, p0 + kc), as [kc][MR]; rows past m zero.
 * Untransposed A is a transpose of MR rows: 8 columns at a time (store_rows6_transposed);
 * packing one element at a time cost as much as a quarter of a product whose other side is
 * 64 long (a pointwise convolution's weight gradient). */
static void pack_a_panel(const gemm_args *g, int panel, int p0, int kc, float *dst)
{
    if (g->bf16) {
        pack_a_panel_bf16(g, panel, p0, kc, dst);
        return;
    }
    const int i0 = panel * MR, rows = g->m - i0 < MR ? g->m - i0 : MR;
    int p = 0;
    if (!g->trans_a && rows == MR) {
        for (; p + 8 <= kc; p += 8) {
            __m256 r[8];
            for (int j = 0; j < MR; j++)
                r[j] = _mm256_loadu_ps(g->a + (size_t)(i0 + j) * g->lda + p0 + p);
            store_rows6_transposed(r, dst + (size_t)p * MR);
        }
    }
    for (; p < kc; p++)
        for (int j = 0; j < MR; j++) {
            const int i = i0 + j;
            float v = 0.0f;
            if (j < rows)
                v = g->trans_a ? g->a[(size_t)(p0 + p) * g->lda + i]
                               : g->a[(size_t)i * g->lda + p0 + p];
            dst[(size_t)p * MR + j] = v;
        }
}

/* Columns [j0, j0 + NR) of op(B), rows [p0, p0 + kc), as [kc][NR]; columns past n zero.
 * Transposed B (a weight gradient's input side) by 8 x 8 blocks through transpose8, for the
 * same reason as A's. */
static void pack_b_panel(const gemm_args *g, int j0, int p0, int kc, float *dst)
{
    if (g->bf16) {
        pack_b_panel_bf16(g, j0, p0, kc, dst);
        return;
    }
    const int cols = g->n - j0 < NR ? g->n - j0 : NR;
    if (!g->trans_b) {
        for (int p = 0; p < kc; p++) {
            const float *row = g->b + (size_t)(p0 + p) * g->ldb + j0;
            if (cols == NR) {
                VSTORE(dst + (size_t)p * NR, VLOAD(row));
                VSTORE(dst + (size_t)p * NR + VW, VLOAD(row + VW));
                continue;
            }
            memcpy(dst + (size_t)p * NR, row, sizeof(float) * cols);
            memset(dst + (size_t)p * NR + cols, 0, sizeof(float) * (NR - cols));
        }
        return;
    }
    for (int jj = 0; jj < NR; jj += 8) {
        int p = 0;
        if (jj + 8 <= cols)
            for (; p + 8 <= kc; p += 8) {
                __m256 r[8];
                for (int t = 0; t < 8; t++)
                    r[t] = _mm256_loadu_ps(g->b + (size_t)(j0 + jj + t) * g->ldb + p0 + p);
                transpose8(r);
                for (int q = 0; q < 8; q++)
                    _mm256_storeu_ps(dst + (size_t)(p + q) * NR + jj, r[q]);
            }
        for (; p < kc; p++)
            for (int j = jj; j < jj + 8; j++)
                dst[(size_t)p * NR + j] =
                    j < cols ? g->b[(size_t)(j0 + j) * g->ldb + p0 + p] : 0.0f;
    }
}

/* One job: rows [MC * mb, + MC) against column panels [panel0, panel1) of the packed block
 * starting at column jc. */
static void run_job(const gemm_args *g, const float *pa, const float *pb, int steps, int jc,
                    int mb, int panel0, int panel1, const tile_epilogue *ep)
{
    tile_fn *tile = g->bf16 ? tile_6x2v_bf16 : tile_6x2v;
    narrow_fn *narrow = g->bf16 ? tile_12x1v_bf16 : tile_12x1v;
    const int r_end = (mb + 1) * MC < g->m ? (mb + 1) * MC : g->m;
    for (int pn = panel0; pn < panel1; pn++) {
        const int c0 = jc + pn * NR, cols = g->n - c0 < NR ? g->n - c0 : NR;
        const float *bp = pb + (size_t)pn * steps * NR;
        if (cols <= VW) {
            for (int r0 = mb * MC; r0 < r_end; r0 += 2 * MR) {
                const int rows = r_end - r0 < 2 * MR ? r_end - r0 : 2 * MR;
                const float *ap = pa + (size_t)(r0 / MR) * steps * MR;
                float t[2 * MR][VW];
                narrow(steps, ap, rows > MR ? ap + (size_t)steps * MR : ap, bp, t[0], ep->alpha);
                combine_block(t[0], VW, g->c + (size_t)r0 * g->ldc + c0, (size_t)g->ldc, rows,
                              cols, ep);
            }
            continue;
        }
        for (int r0 = mb * MC; r0 < r_end; r0 += MR) {
            const int rows = g->m - r0 < MR ? g->m - r0 : MR;
            const float *ap = pa + (size_t)(r0 / MR) * steps * MR;
            float *ct = g->c + (size_t)r0 * g->ldc + c0;
            if (rows == MR && cols == NR)
                tile(steps, ap, bp, ct, (size_t)g->ldc, ep);
            else
                tile_partial(tile, steps, ap, bp, ct, (size_t)g->ldc, rows, cols, ep);
        }
    }
}

static void scale_c(const gemm_args *g)
{
    for (int item = 0; item < (g->stride_c ? g->count : 1); item++)
        for (int i = 0; i < g->m; i++)
            for (int j = 0; j < g->n; j++) {
                float *ci = g->c + item * g->stride_c + (size_t)i * g->ldc + j;
                *ci = g->beta == 0.0f ? 0.0f : g->beta * *ci;
            }
}

/* Products with a C each (stride_c: a pointwise convolution's images) run one at a time, all
 * their k blocks before the next: with the k blocks outermost, each block passed over every
 * product's C, which left the caches between blocks (ResNet-50's 14x14 stage: 32 images' C,
 * 6.4 MB, four times at k = 1024). A shared A is then packed whole, once. Products into one C
 * (a weight gradient over images) keep the blocks outermost: C sums the products in order,
 * block by block, as it always has. */
static int product_by_product(const gemm_args *g) { return g->count > 1 && g->stride_c; }

typedef struct {
    int kcb;            /* k block: KC floats, or 2 KC bf16 values as KC pair slots */
    int blocks;         /* k blocks */
    size_t a_block;     /* floats of one k block of packed A */
    size_t a_len, b_len;
} pack_sizes;

static pack_sizes pack_sizes_of(const gemm_args *g)
{
    pack_sizes z;
    z.kcb = g->bf16 ? 2 * KC : KC;
    z.blocks = (g->k + z.kcb - 1) / z.kcb;
    const int kc_max = g->k < z.kcb ? g->k : z.kcb;
    const int steps_max = g->bf16 ? (kc_max + 1) / 2 : kc_max;
    const int nc_max = g->n < NC ? g->n : NC;
    z.a_block = (size_t)((g->m + MR - 1) / MR) * MR * steps_max;
    z.a_len = product_by_product(g) && !g->stride_a ? z.a_block * z.blocks : z.a_block;
    z.b_len = (size_t)((nc_max + NR - 1) / NR) * NR * steps_max;
    return z;
}

/* One k block [p0, p0 + kc) of one product `it`, its A packed at pa: B's column blocks packed
 * in turn into pb, and the jobs over them. */
static void run_block(const gemm_args *it, const float *pa, float *pb, int p0, int kc,
                      int steps, const tile_epilogue *ep)
{
    const int mblocks = (it->m + MC - 1) / MC;
    for (int jc = 0; jc < it->n; jc += NC) {
        const int nc = it->n - jc < NC ? it->n - jc : NC;
        const int b_panels = (nc + NR - 1) / NR;
        const int groups = (b_panels + JOB_PANELS - 1) / JOB_PANELS;
        for (int pn = 0; pn < b_panels; pn++)
            pack_b_panel(it, jc + pn * NR, p0, kc, pb + (size_t)pn * NR * steps);
        /* rows-major: consecutive jobs reuse one block of A from L2 */
        for (int job = 0; job < mblocks * groups; job++) {
            const int mb = job / groups, grp = job % groups;
            const int panel1 = (grp + 1) * JOB_PANELS;
            run_job(it, pa, pb, steps, jc, mb, grp * JOB_PANELS,
                    panel1 < b_panels ? panel1 : b_panels, ep);
        }
    }
}

static void pack_a_block(const gemm_args *it, int p0, int kc, int steps, float *pa)
{
    const int a_panels = (it->m + MR - 1) / MR;
    for (int pn = 0; pn < a_panels; pn++)
        pack_a_panel(it, pn, p0, kc, pa + (size_t)pn * MR * steps);
}

static gemm_args product(const gemm_args *g, int item)
{
    gemm_args it = *g;
    it.a += item * g->stride_a;
    it.b += item * g->stride_b;
    it.c += item * g->stride_c;
    return it;
}

/* The packed products on the calling thread, in pa (pack_sizes' a_len + b_len floats). */
static void gemm_serial(const gemm_args *g, float *pa)
{
    const pack_sizes z = pack_sizes_of(g);
    float *pb = pa + z.a_len;
    if (product_by_product(g)) {
        const tile_epilogue first = {g->alpha, g->beta, g->beta == 0.0f};
        const tile_epilogue later = {g->alpha, 1.0f, 0};
        for (int bl = 0; !g->stride_a && bl < z.blocks; bl++) {
            const int p0 = bl * z.kcb, kc = g->k - p0 < z.kcb ? g->k - p0 : z.kcb;
            pack_a_block(g, p0, kc, g->bf16 ? (kc + 1) / 2 : kc, pa + z.a_block * bl);
        }
        for (int item = 0; item < g->count; item++) {
            const gemm_args it = product(g, item);
            for (int bl = 0; bl < z.blocks; bl++) {
                const int p0 = bl * z.kcb, kc = g->k - p0 < z.kcb ? g->k - p0 : z.kcb;
                const int steps = g->bf16 ? (kc + 1) / 2 : kc;
                float *pa_block = g->stride_a ? pa : pa + z.a_block * bl;
                if (g->stride_a)
                    pack_a_block(&it, p0, kc, steps, pa_block);
                run_block(&it, pa_block, pb, p0, kc, steps, bl == 0 ? &first : &later);
            }
        }
        return;
    }
    for (int p0 = 0; p0 < g->k; p0 += z.kcb) {
        const int kc = g->k - p0 < z.kcb ? g->k - p0 : z.kcb;
        const int steps = g->bf16 ? (kc + 1) / 2 : kc;
        for (int item = 0; item < g->count; item++) {
            const gemm_args it = product(g, item);
            const int first = p0 == 0 && (g->stride_c || item == 0);
            const tile_epilogue ep = {g->alpha, first ? g->beta : 1.0f,
                                      first && g->beta == 0.0f};
            /* a shared A (stride 0) packed once per k block for all products */
            if (item == 0 || g->stride_a)
                pack_a_block(&it, p0, kc, steps, pa);
            run_block(&it, pa, pb, p0, kc, steps, &ep);
        }
    }
}

/* Products with a C each split whole between the threads where they divide evenly (or
 * nearly: at least 8 a thread): each thread packs only its own products' B, where a split of
 * every product's rows had each thread pack all of B (ResNet-50's 14x14 stage, whose C has
 * more rows than columns), and no split falls inside a row of tiles (measurements:
 * docs/perf-notes.md). */
static int split_products(const gemm_args *g, int threads)
{
    return product_by_product(g) && (g->count % threads == 0 || g->count >= 8 * threads);
}

/* Thread t's part of the products: a run of whole products (split_products), else a block of
 * C's columns (NR-aligned) or, where C has more rows than columns, of its rows (MR-aligned);
 * empty (count, m or n 0) when it has none. */
static gemm_args thread_part(const gemm_args *g, int t, int threads)
{
    gemm_args p = *g;
    if (split_products(g, threads)) {
        const int lo = (int)((long long)g->count * t / threads);
        const int hi = (int)((long long)g->count * (t + 1) / threads);
        p.count = hi - lo;
        p.a += (size_t)lo * g->stride_a;
        p.b += (size_t)lo * g->stride_b;
        p.c += (size_t)lo * g->stride_c;
        return p;
    }
    const int split_n = g->n >= g->m, len = split_n ? g->n : g->m, align = split_n ? NR : MR;
    int block = (len + threads - 1) / threads;
    block = (block + align - 1) / align * align;
    const int lo = t * block < len ? t * block : len, hi = lo + block < len ? lo + block : len;
    if (split_n) {
        p.n = hi - lo;
        p.b += g->trans_b ? (size_t)lo * g->ldb : (size_t)lo;
        p.c += lo;
    } else {
        p.m = hi - lo;
        p.a += g->trans_a ? (size_t)lo : (size_t)lo * g->lda;
        p.c += (size_t)lo * g->ldc;
    }
    return p;
}

/* The packed products; 0, or -1 when their buffers cannot be had (the caller falls back,
 * nothing written). With T threads each takes whole products or a contiguous block of C and
 * runs them alone, as the BLAS path splits: one fork and join, no barrier between
 * packing and tiles (a finer split, with the team packing together, trained vgg16-64 20%
 * slower at 2 threads on this 2-vCPU VM, whose second core at times runs slower). Every
 * element is summed the same way whatever block holds it (tile edges fall on NR and MR
 * multiples, cut tiles round as full ones), so the bits do not depend on the threads. */
static int gemm_packed(const gemm_args *g)
{
    if (g->k <= 0) {
        scale_c(g);
        return 0;
    }
    int threads = 1;
#ifdef _OPENMP
    /* Below ~1 MFLOP a fork/join costs more than it saves; inside a thread's own chunk
     * (Winograd's per-thread products) that thread runs it alone. */
    if (!omp_in_parallel() && 2.0 * g->count * g->m * g->n * g->k >= 1e6)
        threads = omp_get_max_threads();
#endif
    const pack_sizes z = pack_sizes_of(g);
    const size_t per_thread = (z.a_len + z.b_len + 15) / 16 * 16;
    /* not dtnn__alloc_aligned: its zeroing would be a third pass over the packed blocks */
    float *scratch = aligned_alloc(64, sizeof(float) * per_thread * threads);
    if (!scratch)
        return -1;
    if (threads == 1) {
        gemm_serial(g, scratch);
    } else {
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int t = 0; t < threads; t++) {
            const gemm_args part = thread_part(g, t, threads);
            if (part.count > 0 && part.m > 0 && part.n > 0)
                gemm_serial(&part, scratch + per_thread * t);
        }
    }
    free(scratch);
    return 0;
}

void cpu_gemm_strided(int count, int trans_a, int trans_b, int m, int n, int k, float alpha,
                      const float *a, int lda, size_t stride_a, const float *b, int ldb,
                      size_t stride_b, float beta, float *c, int ldc, size_t stride_c,
                      int flags)
{
    if (m <= 0 || n <= 0 || count <= 0)
        return;
    const int bf16 = (flags & CPU_GEMM_BF16) && has_bf16_dot();
    const gemm_args g = {trans_a, trans_b, m, n, k, a, b, lda, ldb, c, ldc, alpha, beta,
                         count, stride_a, stride_b, stride_c, bf16};
    if (gemm_packed(&g) != 0)
        cpu_gemm_strided_blas(count, trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb,
                              stride_b, beta, c, ldc, stride_c);
}

const char *cpu_gemm_name(char *buf, size_t len)
{
    snprintf(buf, len, "dtnn packed %dx%d tile (%s)", MR, NR, GEMM_ISA);
    return buf;
}

int cpu_gemm_bf16_dot(void) { return has_bf16_dot(); }

#else

void cpu_gemm_strided(int count, int trans_a, int trans_b, int m, int n, int k, float alpha,
                      const float *a, int lda, size_t stride_a, const float *b, int ldb,
                      size_t stride_b, float beta, float *c, int ldc, size_t stride_c,
                      int flags)
{
    (void)flags;
    cpu_gemm_strided_blas(count, trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb,
                          stride_b, beta, c, ldc, stride_c);
}

const char *cpu_gemm_name(char *buf, size_t len) { return dtnn_blas_name(buf, len); }

int cpu_gemm_bf16_dot(void) { return 0; }

#endif

void cpu_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
              int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    cpu_gemm_strided(1, trans_a, trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0,
                     0);
}
