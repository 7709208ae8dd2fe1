/*
 * conv3x3.c — direct 3x3 convolution with stride 1, padding 1, dilation 1 and one group: the
 * layers of ResNet's basic blocks, VGG and the CIFAR CNNs. Forward, input gradient and weight
 * gradient without im2col, with AVX2 + FMA micro-kernels (built where the compiler targets
 * them, as -march=native does on x86-64; elsewhere conv2d keeps its im2col path).
 *
 * Why: through im2col a 16-channel 32x32 layer (ResNet-20's first stage) becomes a GEMM with
 * M = 16 rows, a shape on which OpenBLAS reaches a third to a half of its peak, and the
 * unfolded columns are 9x the input, written by im2col and read back by col2im.
 *
 * The layout: every channel plane is copied once into a zero-padded plane of row stride
 * Wp = W + 2. Output pixel (y, x) gets the "wide" index p = y * Wp + x, and kernel tap (r, s)
 * reads padded index p + r * Wp + s: a contiguous range for every tap, so a run of 24 output
 * pixels costs 3 vector loads per tap whatever the image width. The 2 extra columns of each
 * row are computed and thrown away (6% more work at 32x32, 25% at 8x8).
 *
 * The input gradient is the same convolution of the padded output gradient with the filters
 * transposed and rotated by 180 degrees. The weight gradient sums, per tap, the wide output
 * gradient against the shifted padded input; the padding of dy's plane is what makes the
 * thrown-away columns zero there.
 *
 * Threads: the forward pass and the input gradient split (image, block of 4 output channels);
 * the weight gradient splits (block of 4 filters, input channel), each summing all images in
 * a fixed order, so no result depends on the thread count.
 */
#include <string.h>

#include "cpu_kernels.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#define CONV3X3_DIRECT 1

enum { MR = 4, NR = 24, TAPS = 9 };

typedef struct {
    int H, W;   /* image size; the output has the same */
    int Wp;     /* padded row stride, W + 2 */
    int Lo;     /* wide output pixels, H * Wp */
    int Lw;     /* Lo rounded up to whole NR-pixel tiles */
    size_t Ls;  /* floats per padded plane: every tap of every tile reads inside it */
} padded_geom;

static size_t round16(size_t n) { return (n + 15) / 16 * 16; }

static padded_geom padded_geometry(const conv_geom *g)
{
    padded_geom pg;
    pg.H = g->H;
    pg.W = g->W;
    pg.Wp = g->W + 2;
    pg.Lo = g->H * pg.Wp;
    pg.Lw = (pg.Lo + NR - 1) / NR * NR;
    size_t plane = (size_t)(g->H + 2) * pg.Wp, reach = (size_t)pg.Lw + 2 * pg.Wp + 2;
    pg.Ls = round16(plane > reach ? plane : reach);
    return pg;
}

static size_t blocks(int channels) { return (size_t)(channels + MR - 1) / MR; }

/* Copies `planes` H x W planes into zero-padded planes of pg->Ls floats each. */
static void pad_planes(const padded_geom *pg, long long planes, const float *src, float *dst)
{
    const int H = pg->H, W = pg->W, Wp = pg->Wp;
#pragma omp parallel for schedule(static)
    for (long long pl = 0; pl < planes; pl++) {
        const float *s = src + (size_t)pl * H * W;
        float *d = dst + (size_t)pl * pg->Ls;
        memset(d, 0, sizeof(float) * (size_t)(Wp + 1));
        for (int y = 0; y < H; y++) {
            float *row = d + (size_t)(y + 1) * Wp + 1;
            /* rows are short (8 to 64 floats in CIFAR nets): a loop, not a memcpy call each */
            const float *sr = s + (size_t)y * W;
            for (int q = 0; q < W; q++)
                row[q] = sr[q];
            row[W] = 0.0f;      /* right padding of this row */
            row[W + 1] = 0.0f;  /* left padding of the next */
        }
        size_t used = (size_t)(H + 1) * Wp + 1;
        memset(d + used, 0, sizeof(float) * (pg->Ls - used));
    }
}

/* Filters w [K, C, 3, 3] as blocks [K/MR][C][tap][MR] for the forward pass, or, when
 * `for_input_grad`, as the filters of the input gradient, [C/MR][K][tap][MR] with the taps
 * rotated by 180 degrees. Channels past the last block's end are zero. */
static void pack_filters(const float *w, int K, int C, int for_input_grad, float *packed)
{
    const int outs = for_input_grad ? C : K, ins = for_input_grad ? K : C;
    const long long nb = (long long)blocks(outs);
#pragma omp parallel for schedule(static)
    for (long long b = 0; b < nb; b++)
        for (int i = 0; i < ins; i++)
            for (int t = 0; t < TAPS; t++)
                for (int j = 0; j < MR; j++) {
                    int o = (int)b * MR + j;
                    float v = 0.0f;
                    if (o < outs)
                        v = for_input_grad ? w[((size_t)i * C + o) * TAPS + (TAPS - 1 - t)]
                                           : w[((size_t)o * C + i) * TAPS + t];
                    packed[((b * ins + i) * TAPS + t) * MR + j] = v;
                }
}

/* One tile: MR output channels x NR wide pixels from p0, summed over `ins` padded input
 * planes. 12 accumulators + 3 input vectors + 1 broadcast fill the 16 ymm registers; they are
 * named variables, not an array, because GCC 12 otherwise shuffled them between registers
 * and folded each input load into every FMA (4 loads per vector instead of 1), at 38 GFLOP/s
 * instead of [measured below]. */
#define TILE_ROW(j)                                                                            \
    do {                                                                                       \
        __m256 w##j = _mm256_broadcast_ss(wb + (j));                                           \
        a##j##0 = _mm256_fmadd_ps(w##j, x0, a##j##0);                                          \
        a##j##1 = _mm256_fmadd_ps(w##j, x1, a##j##1);                                          \
        a##j##2 = _mm256_fmadd_ps(w##j, x2, a##j##2);                                          \
    } while (0)

static void tile_4x24(const padded_geom *pg, int ins, const float *in, const float *wb,
                      float out[MR][NR])
{
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a10 = a00, a11 = a00, a12 = a00;
    __m256 a20 = a00, a21 = a00, a22 = a00, a30 = a00, a31 = a00, a32 = a00;
    const int Wp = pg->Wp;
    const ptrdiff_t offsets[TAPS] = {0, 1, 2, Wp, Wp + 1, Wp + 2, 2 * Wp, 2 * Wp + 1, 2 * Wp + 2};
    for (int c = 0; c < ins; c++, in += pg->Ls) {
#pragma GCC unroll 1
        for (int t = 0; t < TAPS; t++, wb += MR) {
            const float *src = in + offsets[t];
            __m256 x0 = _mm256_loadu_ps(src);
            __m256 x1 = _mm256_loadu_ps(src + 8);
            __m256 x2 = _mm256_loadu_ps(src + 16);
            TILE_ROW(0);
            TILE_ROW(1);
            TILE_ROW(2);
            TILE_ROW(3);
        }
    }
    _mm256_storeu_ps(out[0], a00), _mm256_storeu_ps(out[0] + 8, a01);
    _mm256_storeu_ps(out[0] + 16, a02), _mm256_storeu_ps(out[1], a10);
    _mm256_storeu_ps(out[1] + 8, a11), _mm256_storeu_ps(out[1] + 16, a12);
    _mm256_storeu_ps(out[2], a20), _mm256_storeu_ps(out[2] + 8, a21);
    _mm256_storeu_ps(out[2] + 16, a22), _mm256_storeu_ps(out[3], a30);
    _mm256_storeu_ps(out[3] + 8, a31), _mm256_storeu_ps(out[3] + 16, a32);
}

/* Writes (or adds) the real pixels of a tile into `outs` NCHW planes of H x W from channel
 * o0; the thrown-away columns x >= W and pixels past the last row are skipped. */
static void store_tile(const padded_geom *pg, float tile[MR][NR], int p0, int o0, int outs,
                       const float *bias, float *out, int accumulate)
{
    const int W = pg->W, Wp = pg->Wp, end = p0 + NR < pg->Lo ? p0 + NR : pg->Lo;
    const int nj = outs - o0 < MR ? outs - o0 : MR;
    const size_t plane = (size_t)pg->H * W;
    for (int p = p0; p < end;) {
        int y = p / Wp, x = p % Wp;
        int run = Wp - x < end - p ? Wp - x : end - p;
        int valid = W - x < run ? W - x : run;
        for (int j = 0; j < nj; j++) {
            const float *t = tile[j] + (p - p0);
            float *d = out + (size_t)(o0 + j) * plane + (size_t)y * W + x;
            float b = bias ? bias[o0 + j] : 0.0f;
            if (accumulate)
                for (int q = 0; q < valid; q++)
                    d[q] += t[q];
            else
                for (int q = 0; q < valid; q++)
                    d[q] = t[q] + b;
        }
        p += run;
    }
}

/* out [n, outs, H, W] (+)= conv3x3(in, packed filters) + bias, in being n x ins padded
 * planes. One job = one image and one block of MR output channels. */
static void direct_pass(const padded_geom *pg, int n, int ins, int outs, const float *in,
                        const float *packed, const float *bias, float *out, int accumulate)
{
    const long long nb = (long long)blocks(outs), jobs = (long long)n * nb;
    const size_t out_image = (size_t)outs * pg->H * pg->W;
#pragma omp parallel for schedule(static)
    for (long long job = 0; job < jobs; job++) {
        const int i = (int)(job / nb), b = (int)(job % nb);
        const float *img = in + (size_t)i * ins * pg->Ls;
        const float *wb = packed + (size_t)b * ins * TAPS * MR;
        float tile[MR][NR];
        for (int p0 = 0; p0 < pg->Lw; p0 += NR) {
            tile_4x24(pg, ins, img + p0, wb, tile);
            store_tile(pg, tile, p0, b * MR, outs, bias, out + (size_t)i * out_image,
                       accumulate);
        }
    }
}

static float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The products of one kernel row r: sums[j][s] += sum over p < L8 of dy_j[p] * xr[p + s]
 * for MR filters j and the 3 taps s. 12 accumulators, the 3 shifted inputs and one dy vector
 * take all 16 ymm registers; the empty asm statements keep the loaded vectors in registers,
 * since GCC 12 otherwise re-read x or dy from memory inside every FMA (15 or 16 loads per
 * 12 FMAs instead of 7, and the loop bound by loads). */
#define WG_ROW(j)                                                                              \
    do {                                                                                       \
        __m256 d = _mm256_loadu_ps(dy##j + p);                                                 \
        __asm__("" : "+x"(d));                                                                 \
        a##j##0 = _mm256_fmadd_ps(d, x0, a##j##0);                                             \
        a##j##1 = _mm256_fmadd_ps(d, x1, a##j##1);                                             \
        a##j##2 = _mm256_fmadd_ps(d, x2, a##j##2);                                             \
    } while (0)

static void weight_grad_row(const float *xr, const float *dy0, const float *dy1,
                            const float *dy2, const float *dy3, int n, size_t x_image,
                            size_t dy_image, int L8, double sums[MR][3])
{
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a10 = a00, a11 = a00, a12 = a00;
    __m256 a20 = a00, a21 = a00, a22 = a00, a30 = a00, a31 = a00, a32 = a00;
    for (int i = 0; i < n; i++) {
        for (int p = 0; p < L8; p += 8) {
            __m256 x0 = _mm256_loadu_ps(xr + p);
            __m256 x1 = _mm256_loadu_ps(xr + p + 1);
            __m256 x2 = _mm256_loadu_ps(xr + p + 2);
            __asm__("" : "+x"(x0), "+x"(x1), "+x"(x2));
            WG_ROW(0);
            WG_ROW(1);
            WG_ROW(2);
            WG_ROW(3);
        }
        xr += x_image, dy0 += dy_image, dy1 += dy_image, dy2 += dy_image, dy3 += dy_image;
    }
    const __m256 acc[MR][3] = {{a00, a01, a02}, {a10, a11, a12}, {a20, a21, a22},
                               {a30, a31, a32}};
    for (int j = 0; j < MR; j++)
        for (int s = 0; s < 3; s++)
            sums[j][s] += hsum(acc[j][s]);
}

/* dw [K, C, 3, 3] += sum over images and pixels of dy (wide, padded planes dyp) times the
 * shifted padded input xp. One job = a block of MR filters and one input channel. */
static void weight_grad(const padded_geom *pg, int n, int C, int K, const float *xp,
                        const float *dyp, float *dw)
{
    const long long jobs = (long long)blocks(K) * C;
    const int Wp = pg->Wp, L8 = (pg->Lo + 7) / 8 * 8;
#pragma omp parallel for schedule(static)
    for (long long job = 0; job < jobs; job++) {
        const int b = (int)(job / C), c = (int)(job % C);
        double sum[3][MR][3] = {{{0}}};     /* [r][j][s] */
        const float *dy[MR];
        for (int j = 0; j < MR; j++) {
            /* past the last filter: any valid plane, its sums are dropped below */
            int k = b * MR + j < K ? b * MR + j : K - 1;
            /* wide pixel p of dy sits at padded index p + Wp + 1 */
            dy[j] = dyp + (size_t)k * pg->Ls + Wp + 1;
        }
        /* A chunk holds at most a few hundred images (1 MiB of planes), each adding at most
         * a few thousand products per lane: float lanes, summed in double per chunk. */
        for (int r = 0; r < 3; r++)
            weight_grad_row(xp + (size_t)c * pg->Ls + r * Wp, dy[0], dy[1], dy[2], dy[3], n,
                            (size_t)C * pg->Ls, (size_t)K * pg->Ls, L8, sum[r]);
        for (int j = 0; j < MR && b * MR + j < K; j++)
            for (int t = 0; t < TAPS; t++)
                dw[((size_t)(b * MR + j) * C + c) * TAPS + t] += (float)sum[t / 3][j][t % 3];
    }
}
#endif

int cpu_conv3x3_available(void)
{
#ifdef CONV3X3_DIRECT
    return 1;
#else
    return 0;
#endif
}

size_t cpu_conv3x3_workspace(const conv_geom *g, int images)
{
#ifdef CONV3X3_DIRECT
    padded_geom pg = padded_geometry(g);
    return sizeof(float) * (round16(blocks(g->K) * g->C * TAPS * MR) +
                            round16(blocks(g->C) * g->K * TAPS * MR) +
                            (size_t)images * (g->C + g->K) * pg.Ls);
#else
    (void)g;
    (void)images;
    return 0;
#endif
}

void cpu_conv3x3_forward(const conv_geom *g, int n, int chunk, const float *x, const float *w,
                         const float *bias, float *y, float *workspace)
{
#ifdef CONV3X3_DIRECT
    padded_geom pg = padded_geometry(g);
    const size_t in_image = (size_t)g->C * g->H * g->W, out_image = (size_t)g->K * g->H * g->W;
    float *packed = workspace;
    float *xp = packed + round16(blocks(g->K) * g->C * TAPS * MR);
    pack_filters(w, g->K, g->C, 0, packed);
    for (int n0 = 0; n0 < n; n0 += chunk) {
        int nb = n - n0 < chunk ? n - n0 : chunk;
        pad_planes(&pg, (long long)nb * g->C, x + n0 * in_image, xp);
        direct_pass(&pg, nb, g->C, g->K, xp, packed, bias, y + n0 * out_image, 0);
    }
#else
    (void)g, (void)n, (void)chunk, (void)x, (void)w, (void)bias, (void)y, (void)workspace;
#endif
}

void cpu_conv3x3_backward(const conv_geom *g, int n, int chunk, const float *x,
                          const float *dy, const float *w, float *dw, float *db, float *dx,
                          int accumulate, float *workspace)
{
#ifdef CONV3X3_DIRECT
    padded_geom pg = padded_geometry(g);
    const int C = g->C, K = g->K;
    const size_t plane = (size_t)g->H * g->W, in_image = C * plane, out_image = K * plane;
    float *packed = workspace + round16(blocks(K) * C * TAPS * MR);
    float *xp = packed + round16(blocks(C) * K * TAPS * MR);
    float *dyp = xp + (size_t)chunk * C * pg.Ls;
    if (db) {
#pragma omp parallel for schedule(static)
        for (int k = 0; k < K; k++) {
            double s = 0.0;
            for (int i = 0; i < n; i++) {
                const float *d = dy + ((size_t)i * K + k) * plane;
                for (size_t j = 0; j < plane; j++)
                    s += d[j];
            }
            db[k] += (float)s;
        }
    }
    if (dx)
        pack_filters(w, K, C, 1, packed);
    for (int n0 = 0; n0 < n; n0 += chunk) {
        int nb = n - n0 < chunk ? n - n0 : chunk;
        pad_planes(&pg, (long long)nb * C, x + n0 * in_image, xp);
        pad_planes(&pg, (long long)nb * K, dy + n0 * out_image, dyp);
        weight_grad(&pg, nb, C, K, xp, dyp, dw);
        if (dx)
            direct_pass(&pg, nb, K, C, dyp, packed, NULL, dx + n0 * in_image, accumulate);
    }
#else
    (void)g, (void)n, (void)chunk, (void)x, (void)dy, (void)w, (void)dw, (void)db, (void)dx;
    (void)accumulate, (void)workspace;
#endif
}
