/*
 * conv_direct.c — direct convolution with stride 1, dilation 1 and one group, kernels up to
 * 7x7 with padding up to kernel - 1: ResNet's 3x3 blocks, VGG's first stage, LeNet's 5x5;
 * and with stride 2 (ResNet's downsampling: strided_pass, strided_input_grad_pass).
 * Forward, input gradient and weight gradient without im2col, with AVX2 + FMA micro-kernels
 * (built where the compiler targets them, as -march=native does on x86-64; elsewhere conv2d
 * keeps its im2col path).
 *
 * Why: through im2col a 16-channel 32x32 layer (ResNet-20's first stage) becomes a GEMM with
 * M = 16 rows, a shape on which OpenBLAS stays far below its peak, and the unfolded columns
 * are R*S times the input, written by im2col and read back by col2im, copies that took a large
 * share of LeNet-5's step (measurements: docs/perf-notes.md).
 *
 * The layout: every input plane is copied once into a zero-padded plane of row stride Wp
 * (the width plus one padding run, shared by neighbouring rows). Output pixel (y, x) gets the
 * "wide" index p = y * Wp + x, and kernel tap (r, s) reads padded index p + r * Wp + s: a
 * contiguous range for every tap, so a run of 24 output pixels costs 3 vector loads per tap
 * whatever the image width. The Wp - Q extra columns of each row are computed and thrown
 * away (3% more work for 3x3 at 32x32, 11% at 8x8).
 *
 * The input gradient is the same kind of pass over the output gradient, padded by kernel - 1 -
 * padding, with the filters transposed and rotated by 180 degrees. The weight gradient sums,
 * per tap, the output gradient laid out wide (zero in the thrown-away columns) against the
 * shifted padded input; the padded output gradient of the input-gradient pass already is that
 * layout, from its first real pixel on (both passes have row stride W + padding).
 *
 * Threads: with at least two images a thread, each thread takes whole chunks of images of its
 * own (cpu_conv_direct_forward, cpu_conv_direct_backward), pads them into its own scratch and
 * sums its own weight gradient, added up in thread order. Otherwise the team splits each
 * chunk: the forward pass and the input gradient by (image, block of 4 output channels), the
 * weight gradient by (block of 4 filters, input channel), each summing the chunk's images in
 * a fixed order. Outputs and input gradients never depend on the thread count; the weight
 * gradient's sums do where threads take images of their own.
 */
#include <stddef.h>
#include <string.h>

#include "cpu_kernels.h"

enum { MAX_KERNEL = 7 };

/* Shapes the kernels take; the same test whether or not this build has them. Stride 2:
 * forward and weight gradient, and the input gradient where its passes cover every input
 * pixel (strided_input_grad_covered). */
static int direct_shape(const conv_geom *g)
{
    return g->groups == 1 && g->stride_h == 1 && g->stride_w == 1 && g->dil_h == 1 &&
           g->dil_w == 1 && g->R <= MAX_KERNEL && g->S <= MAX_KERNEL && g->pad_h < g->R &&
           g->pad_w < g->S;
}

static int strided_shape(const conv_geom *g)
{
    return g->groups == 1 && g->stride_h == 2 && g->stride_w == 2 && g->dil_h == 1 &&
           g->dil_w == 1 && g->R <= MAX_KERNEL && g->S <= MAX_KERNEL && g->pad_h < g->R &&
           g->pad_w < g->S;
}

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#define CONV_DIRECT 1

enum { MR = 4, NR = 24, MAX_TAPS = MAX_KERNEL * MAX_KERNEL };

/* One pass: an R x S correlation of padded planes, the output `rows` x `cols`. */
typedef struct {
    int in_rows, in_cols;   /* the unpadded input, placed at (top, left) in its plane */
    int top, left;
    int R, S, taps;
    int Wp;                 /* row stride of the padded planes */
    int rows, cols;         /* output size */
    int Lo, Lw;             /* wide output pixels rows * Wp, and rounded up to whole tiles */
    size_t Ls;              /* floats per padded plane: every read of every tile is inside */
    ptrdiff_t offsets[MAX_TAPS];
    size_t Lpar;            /* stride 2: floats per parity plane, 4 of them make a plane */
} pass_geom;

static size_t round16(size_t n) { return (n + 15) / 16 * 16; }

static pass_geom make_pass(int in_rows, int in_cols, int top, int left, int R, int S)
{
    pass_geom p;
    p.in_rows = in_rows;
    p.in_cols = in_cols;
    p.top = top;
    p.left = left;
    p.R = R;
    p.S = S;
    p.taps = R * S;
    p.Lpar = 0;
    /* One padding run between rows serves as the right padding of a row and the left padding
     * of the next: a row is `left` zeros then the input, and reads past its end land on the
     * next row's zeros. A 3x3 / 1 row is W + 1 wide, not W + 2: 8x8 images waste 11% of the
     * tile work instead of 33%. */
    p.Wp = in_cols + left;
    p.rows = in_rows + 2 * top - R + 1;
    p.cols = in_cols + 2 * left - S + 1;
    p.Lo = p.rows * p.Wp;
    p.Lw = (p.Lo + NR - 1) / NR * NR;
    /* tiles read up to Lw - 1 + (R - 1) * Wp + S - 1; the weight gradient, in threes of taps
     * from s0 <= S - 1, up to 2 more, and through shared dy planes (below) up to 6 more */
    size_t plane = (size_t)(in_rows + 2 * top) * p.Wp + left;
    size_t reach = (size_t)p.Lw + (size_t)(R - 1) * p.Wp + S + 8;
    p.Ls = round16(plane > reach ? plane : reach);
    for (int r = 0; r < R; r++)
        for (int s = 0; s < S; s++)
            p.offsets[r * S + s] = (ptrdiff_t)r * p.Wp + s;
    return p;
}

/* Stride 2 as a stride-1 pass over the four (row parity, column parity) planes of the
 * padded input: tap (r, s) of output (p, q) reads padded pixel (2p + r, 2q + s), which is
 * pixel (p + r/2, q + s/2) of parity plane (r % 2, s % 2). The planes of a channel lie one
 * after the other, so a tap is again one offset from the channel's start and the tile kernel
 * runs unchanged, 9 multiply-adds per output for 3x3, where im2col first copied the input 9
 * times. Row stride Q + (S - 1) / 2: the last (S - 1) / 2 columns of a row are thrown away. */
static pass_geom strided_pass(const conv_geom *g)
{
    pass_geom p;
    memset(&p, 0, sizeof p);
    p.in_rows = g->H;
    p.in_cols = g->W;
    p.top = g->pad_h;
    p.left = g->pad_w;
    p.R = g->R;
    p.S = g->S;
    p.taps = g->R * g->S;
    p.rows = g->P;
    p.cols = g->Q;
    p.Wp = g->Q + (g->S - 1) / 2;
    p.Lo = p.rows * p.Wp;
    p.Lw = (p.Lo + NR - 1) / NR * NR;
    /* reads reach Lw - 1 + the largest in-plane shift, and the weight gradient's 2 more */
    size_t plane = (size_t)(g->P + (g->R - 1) / 2) * p.Wp;
    size_t reach = (size_t)p.Lw + (size_t)((g->R - 1) / 2) * p.Wp + (g->S - 1) / 2 + 8;
    p.Lpar = round16(plane > reach ? plane : reach);
    p.Ls = 4 * p.Lpar;
    for (int r = 0; r < g->R; r++)
        for (int s = 0; s < g->S; s++)
            p.offsets[r * g->S + s] = (ptrdiff_t)((r % 2) * 2 + s % 2) * (ptrdiff_t)p.Lpar +
                                      (ptrdiff_t)(r / 2) * p.Wp + s / 2;
    return p;
}

static pass_geom forward_pass(const conv_geom *g)
{
    if (g->stride_h == 2)
        return strided_pass(g);
    return make_pass(g->H, g->W, g->pad_h, g->pad_w, g->R, g->S);
}

/* Stride 2's input gradient as four stride-1 passes over the padded output gradient, one
 * per parity class (a, b) of the padded input pixel (y + pad_h, x + pad_w): dx (y, x) sums
 * only the taps (r, s) = (a + 2i, b + 2j), over dy (Y' - i, X' - j) with y = 2Y' + a - pad_h,
 * x = 2X' + b - pad_w. A 3x3 kernel's classes have 4, 2, 2 and 1 taps: 9 multiply-adds per
 * input pixel and channel, where im2col + col2im wrote and re-read 9 columns per pixel (most
 * of the layer's backward; measurements: docs/perf-notes.md). dy is padded once, by the largest
 * class's reach (ceil(R / 2) - 1 rows above, as many columns left); the tile kernel and its
 * wide layout are the stride-1 pass's, each class with its own taps and filters. */
static pass_geom strided_input_grad_pass(const conv_geom *g)
{
    const int top = (g->R + 1) / 2 - 1, left = (g->S + 1) / 2 - 1;
    return make_pass(g->P, g->Q, top, left, top + 1, left + 1);
}

static pass_geom input_grad_pass(const conv_geom *g)
{
    if (g->stride_h == 2)
        return strided_input_grad_pass(g);
    return make_pass(g->P, g->Q, g->R - 1 - g->pad_h, g->S - 1 - g->pad_w, g->R, g->S);
}

/* The four parity classes, (a, b) = (0, 0), (0, 1), (1, 0), (1, 1) as class 2a + b: their
 * taps, kernel tap (a + 2i, b + 2j) of each, and its offset in d's padded dy (it reads
 * (Y' - i, X' - j)). The filter packing and the passes both walk this one list. */
typedef struct {
    int taps[4];
    int tap[4][MAX_TAPS];           /* r * S + s */
    ptrdiff_t offsets[4][MAX_TAPS];
} parity_classes;

static parity_classes make_classes(const conv_geom *g, const pass_geom *d)
{
    parity_classes pc;
    for (int cl = 0; cl < 4; cl++) {
        const int a = cl / 2, b = cl % 2;
        pc.taps[cl] = 0;
        for (int i = 0; a + 2 * i < g->R; i++)
            for (int j = 0; b + 2 * j < g->S; j++) {
                pc.tap[cl][pc.taps[cl]] = (a + 2 * i) * g->S + b + 2 * j;
                pc.offsets[cl][pc.taps[cl]++] = (ptrdiff_t)(d->top - i) * d->Wp + (d->left - j);
            }
    }
    return pc;
}

/* Whether the classes' passes reach every input pixel: pixel (y, x) of class (a, b) is pass
 * output (Y', X') = ((y + pad_h - a) / 2, (x + pad_w - b) / 2), inside the pass's rows x cols
 * for the last row and column. */
static int strided_input_grad_covered(const conv_geom *g)
{
    const pass_geom d = strided_input_grad_pass(g);
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++)
            if ((g->H - 1 + g->pad_h - a) / 2 >= d.rows || (g->W - 1 + g->pad_w - b) / 2 >= d.cols)
                return 0;
    return 1;
}

/* The weight gradient reads dy laid out as the forward pass's wide output (row stride Wp,
 * zero in the thrown-away columns). The input-gradient pass's padded dy planes are that,
 * from their first real pixel on, where they also reach as far: both passes have row stride
 * W + padding, and the forward output has no more rows than the input unless the padding
 * is more than half the kernel (then the weight gradient gets planes of its own). */
static int dy_planes_shared(const pass_geom *f, const pass_geom *d)
{
    return f->Wp == d->Wp && f->rows <= d->rows;
}

static size_t dy_wide_plane(const pass_geom *f) { return round16((size_t)f->Lw + 8); }

static size_t blocks(int channels) { return (size_t)(channels + MR - 1) / MR; }

/* Copies `planes` rows x cols planes into planes of Ls floats, row stride Wp, each placed at
 * (top, left), zero everywhere else. */
static void pad_planes(long long planes, int rows, int cols, int top, int left, int Wp,
                       size_t Ls, const float *src, float *dst, int team)
{
    const size_t first = (size_t)top * Wp + left, used = (size_t)(top + rows) * Wp + left;
#pragma omp parallel for schedule(guided) if (team)
    for (long long pl = 0; pl < planes; pl++) {
        const float *s = src + (size_t)pl * rows * cols;
        const float *next = s + (size_t)rows * cols;
        float *d = dst + (size_t)pl * Ls;
        memset(d, 0, sizeof(float) * first);
        for (int y = 0; y < rows; y++) {
            prefetch_floats(next + (size_t)y * cols, (size_t)cols);
            float *row = d + first + (size_t)y * Wp;
            /* rows are short (8 to 64 floats in CIFAR nets): a loop, not a memcpy call each */
            const float *sr = s + (size_t)y * cols;
            for (int q = 0; q < cols; q++)
                row[q] = sr[q];
            for (int q = cols; q < Wp; q++)     /* right padding, then the next row's left */
                row[q] = 0.0f;
        }
        memset(d + used, 0, sizeof(float) * (Ls - used));
    }
}

/* One input row into its two column-parity rows of Wp floats: padded column u = x + left
 * goes to parity plane u % 2 at u / 2, so x = 2m lands at m + left / 2 in plane left % 2 and
 * x = 2m + 1 at m + (left + 1) / 2 in the other; columns past Wp are never read by a tap and
 * are dropped. Sixteen inputs at a time are split by a shuffle (whose in-lane result a 64-bit
 * permute puts in order) and stored unaligned. */
static void split_row(const float *src, int W, int left, int Wp, float *even_plane_row,
                      float *odd_plane_row)
{
    float *to_even_x = left % 2 ? odd_plane_row : even_plane_row;
    float *to_odd_x = left % 2 ? even_plane_row : odd_plane_row;
    const int e0 = left / 2, o0 = (left + 1) / 2;
    /* the evens and odds that fit: x = 2m needs m + e0 < Wp, x = 2m + 1 needs m + o0 < Wp */
    const int ne = (W + 1) / 2 < Wp - e0 ? (W + 1) / 2 : Wp - e0;
    const int no = W / 2 < Wp - o0 ? W / 2 : Wp - o0;
    /* the padding around them: a column or two (a memset call per row cost more than the
     * split) */
    for (int j = 0; j < e0; j++)
        to_even_x[j] = 0.0f;
    for (int j = e0 + ne; j < Wp; j++)
        to_even_x[j] = 0.0f;
    for (int j = 0; j < o0; j++)
        to_odd_x[j] = 0.0f;
    for (int j = o0 + no; j < Wp; j++)
        to_odd_x[j] = 0.0f;
    int m = 0;
    for (; 2 * m + 16 <= W && m + 8 <= ne && m + 8 <= no; m += 8) {
        const __m256 lo = _mm256_loadu_ps(src + 2 * m), hi = _mm256_loadu_ps(src + 2 * m + 8);
        const __m256 ev = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
        const __m256 od = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
        _mm256_storeu_ps(to_even_x + e0 + m,
                         _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xd8)));
        _mm256_storeu_ps(to_odd_x + o0 + m,
                         _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(od), 0xd8)));
    }
    for (int j = m; j < ne; j++)
        to_even_x[e0 + j] = src[2 * j];
    for (int j = m; j < no; j++)
        to_odd_x[o0 + j] = src[2 * j + 1];
}

/* Stride 2: each input plane as its four parity planes of the zero-padded plane (above), an
 * input row at a time into both column parities. Scalar, with a bounds test per pixel, and
 * even gathering each parity plane's row separately (two passes over every input row, half of
 * them misaligned by the left padding into a scalar tail), this copy was a large share of a
 * stride-2 layer's step (measurements: docs/perf-notes.md). */
static void split_parity_planes(const pass_geom *p, long long planes, const float *src,
                                float *dst, int team)
{
    const int H = p->in_rows, W = p->in_cols, Wp = p->Wp;
    const int rows = (int)(p->Lpar / (size_t)Wp);
#pragma omp parallel for schedule(guided) if (team)
    for (long long pl = 0; pl < planes; pl++) {
        const float *s = src + (size_t)pl * H * W;
        const float *next = s + (size_t)H * W;
        for (int a = 0; a < 2; a++) {
            float *d0 = dst + (size_t)pl * p->Ls + (size_t)(a * 2) * p->Lpar;
            float *d1 = d0 + p->Lpar;
            for (int i = 0; i < rows; i++) {
                const int y = 2 * i + a - p->top;
                if (y >= 0 && y < H) {
                    prefetch_floats(next + (size_t)y * W, (size_t)W);
                    split_row(s + (size_t)y * W, W, p->left, Wp, d0 + (size_t)i * Wp,
                              d1 + (size_t)i * Wp);
                } else {
                    memset(d0 + (size_t)i * Wp, 0, sizeof(float) * Wp);
                    memset(d1 + (size_t)i * Wp, 0, sizeof(float) * Wp);
                }
            }
            memset(d0 + (size_t)rows * Wp, 0, sizeof(float) * (p->Lpar - (size_t)rows * Wp));
            memset(d1 + (size_t)rows * Wp, 0, sizeof(float) * (p->Lpar - (size_t)rows * Wp));
        }
    }
}

static void pad_input(const pass_geom *p, long long planes, const float *src, float *dst,
                      int team)
{
    if (p->Lpar)
        split_parity_planes(p, planes, src, dst, team);
    else
        pad_planes(planes, p->in_rows, p->in_cols, p->top, p->left, p->Wp, p->Ls, src, dst,
                   team);
}

/* Filters w [K, C, R, S] as blocks [K/MR][C][tap][MR] for the forward pass, or, when
 * `for_input_grad`, as the filters of the input gradient, [C/MR][K][tap][MR] with the taps
 * rotated by 180 degrees. Channels past the last block's end are zero. */
static void pack_filters(const float *w, int K, int C, int taps, int for_input_grad,
                         float *packed)
{
    const int outs = for_input_grad ? C : K, ins = for_input_grad ? K : C;
    const long long nb = (long long)blocks(outs);
#pragma omp parallel for schedule(guided)
    for (long long b = 0; b < nb; b++)
        for (int i = 0; i < ins; i++)
            for (int t = 0; t < taps; t++)
                for (int j = 0; j < MR; j++) {
                    int o = (int)b * MR + j;
                    float v = 0.0f;
                    if (o < outs)
                        v = for_input_grad ? w[((size_t)i * C + o) * taps + (taps - 1 - t)]
                                           : w[((size_t)o * C + i) * taps + t];
                    packed[((b * ins + i) * taps + t) * MR + j] = v;
                }
}

/* Writes (or adds) the real pixels of a tile into `outs` NCHW planes of rows x cols from
 * channel o0; the thrown-away columns and pixels past the last row are skipped. */
static void store_tile(const pass_geom *pg, float tile[MR][NR], int p0, int o0, int outs,
                       const float *bias, float *out, int accumulate)
{
    const int cols = pg->cols, Wp = pg->Wp, end = p0 + NR < pg->Lo ? p0 + NR : pg->Lo;
    const int nj = outs - o0 < MR ? outs - o0 : MR;
    const size_t plane = (size_t)pg->rows * cols;
    for (int p = p0; p < end;) {
        int y = p / Wp, x = p % Wp;
        int run = Wp - x < end - p ? Wp - x : end - p;
        int valid = cols - x < run ? cols - x : run;
        for (int j = 0; j < nj; j++) {
            const float *t = tile[j] + (p - p0);
            float *d = out + (size_t)(o0 + j) * plane + (size_t)y * cols + x;
            cpu_store_row(d, t, valid, bias ? bias[o0 + j] : 0.0f, accumulate);
        }
        p += run;
    }
}

/* out [n, outs, rows, cols] (+)= correlation of `in` (n x ins padded planes) with the packed
 * filters, + bias. One job = one image and one block of MR output channels. */
static void direct_pass(const pass_geom *pg, int n, int ins, int outs, const float *in,
                        const float *packed, const float *bias, float *out, int accumulate,
                        int team)
{
    const long long nb = (long long)blocks(outs), jobs = (long long)n * nb;
    const size_t out_image = (size_t)outs * pg->rows * pg->cols;
#pragma omp parallel for schedule(guided) if (team)
    for (long long job = 0; job < jobs; job++) {
        const int i = (int)(job / nb), b = (int)(job % nb);
        const float *img = in + (size_t)i * ins * pg->Ls;
        const float *wb = packed + (size_t)b * ins * pg->taps * MR;
        float tile[MR][NR];
        for (int p0 = 0; p0 < pg->Lw; p0 += NR) {
            cpu_tile_4x24_taps(ins, pg->taps, pg->offsets, pg->Ls, wb, img + p0, tile[0], NR);
            store_tile(pg, tile, p0, b * MR, outs, bias, out + (size_t)i * out_image,
                       accumulate);
        }
    }
}

/* Stride 2's input-gradient filters: class by class, [C/MR][K][class taps][MR], each tap
 * w [k][c][r][s] of the class's list. */
static void pack_strided_filters(const conv_geom *g, const parity_classes *pc, const float *w,
                                 float *packed)
{
    const int K = g->K, C = g->C, RS = g->R * g->S;
    const long long nb = (long long)blocks(C);
    for (int cl = 0; cl < 4; cl++) {
        const int taps = pc->taps[cl];
#pragma omp parallel for schedule(guided)
        for (long long cb = 0; cb < nb; cb++)
            for (int k = 0; k < K; k++)
                for (int t = 0; t < taps; t++)
                    for (int j = 0; j < MR; j++) {
                        const int c = (int)cb * MR + j;
                        packed[((cb * K + k) * taps + t) * MR + j] =
                            c < C ? w[((size_t)k * C + c) * RS + pc->tap[cl][t]] : 0.0f;
                    }
        packed += nb * K * taps * MR;
    }
}

static inline void put(float *dst, float v, int accumulate)
{
    *dst = accumulate ? *dst + v : v;
}

static inline void put4(float *dst, __m128 v, int accumulate)
{
    _mm_storeu_ps(dst, accumulate ? _mm_add_ps(_mm_loadu_ps(dst), v) : v);
}

/* Writes (or adds) the tiles of classes (a, 0) and (a, 1) at wide pixels p0 .. into the
 * input-gradient planes of channels c0 ..: pass pixel (Y', X') of class (a, b) is input
 * pixel (2Y' + a - pad_h, 2X' + b - pad_w), so both classes' rows interleave into every
 * column of an input row, padded column u = 2X' + b: four X' at a time by unpacks into 8
 * contiguous columns. Pixels outside the input are skipped. Class by class, every other
 * column by scalar stores, these stores were a visible share of the layer's step
 * (measurements: docs/perf-notes.md). */
static void store_class_pair(const conv_geom *g, const pass_geom *d, float t0[MR][NR],
                             float t1[MR][NR], int p0, int c0, int a, float *dx, int accumulate)
{
    const int end = p0 + NR < d->Lo ? p0 + NR : d->Lo;
    const int nj = g->C - c0 < MR ? g->C - c0 : MR;
    const int pad = g->pad_w;
    const size_t plane = (size_t)g->H * g->W;
    for (int p = p0; p < end;) {
        const int Y = p / d->Wp, X = p % d->Wp;
        const int run = p + (d->Wp - X) < end ? d->Wp - X : end - p;
        const int y = 2 * Y + a - g->pad_h;
        /* padded columns u of the run inside the input: pad <= u < pad + W */
        const int lo = 2 * X > pad ? 2 * X : pad;
        const int hi = 2 * (X + run) < pad + g->W ? 2 * (X + run) : pad + g->W;
        for (int jj = 0; y >= 0 && y < g->H && jj < nj; jj++) {
            /* e[X'] and o[X']: classes (a, 0) and (a, 1) at pass column X' */
            const float *e = t0[jj] + (p - p0) - X, *o = t1[jj] + (p - p0) - X;
            float *row = dx + (size_t)(c0 + jj) * plane + (size_t)y * g->W;
            int u = lo;
            if (u < hi && u % 2)
                put(row + u - pad, o[u / 2], accumulate), u++;
            for (; u + 8 <= hi; u += 8) {
                const __m128 ev = _mm_loadu_ps(e + u / 2), od = _mm_loadu_ps(o + u / 2);
                put4(row + u - pad, _mm_unpacklo_ps(ev, od), accumulate);
                put4(row + u - pad + 4, _mm_unpackhi_ps(ev, od), accumulate);
            }
            for (; u < hi; u++)
                put(row + u - pad, u % 2 ? o[u / 2] : e[u / 2], accumulate);
        }
        p += run;
    }
}

/* dx [n, C, H, W] (+)= stride 2's input gradient from the padded dy planes (n x K, d's
 * layout) and pack_strided_filters' filters. One job = one image and one block of MR input
 * channels: per block of wide pixels, the two classes of a row parity, then the other two;
 * the four write disjoint pixels, and a class without taps (a 1x1 or 2x2 kernel's odd rows
 * or columns) writes zeros. */
static void strided_input_grad(const conv_geom *g, const pass_geom *d,
                               const parity_classes *pc, int n, const float *dyp,
                               const float *packed, float *dx, int accumulate, int team)
{
    const long long nb = (long long)blocks(g->C), jobs = (long long)n * nb;
    const size_t in_image = (size_t)g->C * g->H * g->W;
    /* class cl's filters for channel block cb at first[cl] + cb * K * taps * MR */
    const float *first[4];
    first[0] = packed;
    for (int cl = 1; cl < 4; cl++)
        first[cl] = first[cl - 1] + (size_t)nb * g->K * pc->taps[cl - 1] * MR;
#pragma omp parallel for schedule(guided) if (team)
    for (long long job = 0; job < jobs; job++) {
        const int i = (int)(job / nb), cb = (int)(job % nb);
        const float *img = dyp + (size_t)i * g->K * d->Ls;
        float *dxi = dx + (size_t)i * in_image;
        float tiles[2][MR][NR];
        for (int p0 = 0; p0 < d->Lw; p0 += NR)
            for (int a = 0; a < 2; a++) {
                for (int b = 0; b < 2; b++) {
                    const int cl = 2 * a + b, taps = pc->taps[cl];
                    if (taps)
                        cpu_tile_4x24_taps(g->K, taps, pc->offsets[cl], d->Ls,
                                           first[cl] + (size_t)cb * g->K * taps * MR,
                                           img + p0, tiles[b][0], NR);
                    else
                        memset(tiles[b], 0, sizeof tiles[b]);
                }
                store_class_pair(g, d, tiles[0], tiles[1], p0, cb * MR, a, dxi, accumulate);
            }
    }
}

/* dw [K, C, R, S] += sum over images and pixels of dy (wide planes of dy_plane floats) times
 * the shifted padded input xp: per three taps (r, s0 .. s0 + 2) of MR filters, the dot
 * products of gemm_tiles.c (4 dy rows against 3 shifted x rows, 8 float lanes each kept in
 * acc between calls). One job = a block of MR filters and one input channel; image by
 * image, all R x S taps, so the image's 4 dy planes and x plane (20 KiB for a CIFAR plane)
 * are read from L1 by every tap after the first. Tap by tap over the whole chunk, each tap
 * read them from L2 again, and backward was slower (measurements: docs/perf-notes.md). The
 * sums are the same, in the same order. */
static void weight_grad(const pass_geom *pg, int n, int C, int K, const float *xp,
                        const float *dyw, size_t dy_plane, float *dw, int team)
{
    const long long jobs = (long long)blocks(K) * C;
    const int R = pg->R, S = pg->S, L8 = (pg->Lo + 7) / 8 * 8;
    const size_t x_image = (size_t)C * pg->Ls, dy_image = (size_t)K * dy_plane;
#pragma omp parallel for schedule(guided) if (team)
    for (long long job = 0; job < jobs; job++) {
        const int b = (int)(job / C), c = (int)(job % C);
        /* [r][s0 / 3][j][s][lane]: a chunk holds at most a few hundred images (1 MiB of
         * planes), each adding at most a few thousand products per lane, so float lanes,
         * summed in double at the end of the chunk */
        float acc[MAX_KERNEL][(MAX_KERNEL + 2) / 3][MR][3][8];
        memset(acc, 0, sizeof acc[0] * R);
        const float *dy[MR];
        for (int j = 0; j < MR; j++) {
            /* past the last filter: any valid plane, its sums are dropped below */
            int k = b * MR + j < K ? b * MR + j : K - 1;
            dy[j] = dyw + (size_t)k * dy_plane;
        }
        for (int i = 0; i < n; i++) {
            const float *xi = xp + (size_t)i * x_image + (size_t)c * pg->Ls;
            const size_t di = (size_t)i * dy_image;
            const float *const dyi[MR] = {dy[0] + di, dy[1] + di, dy[2] + di, dy[3] + di};
            for (int r = 0; r < R; r++)
                for (int s0 = 0; s0 < S; s0 += 3) {
                    /* taps past S: any valid plane, their sums are dropped below */
                    const float *xt[3];
                    for (int e = 0; e < 3; e++)
                        xt[e] = xi + pg->offsets[r * S + (s0 + e < S ? s0 + e : S - 1)];
                    cpu_dot_4x3(dyi, xt, 0, (size_t)L8, acc[r][s0 / 3]);
                }
        }
        for (int j = 0; j < MR && b * MR + j < K; j++)
            for (int r = 0; r < R; r++)
                for (int s = 0; s < S; s++) {
                    const double sum = cpu_hsum8(_mm256_loadu_ps(acc[r][s / 3][j][s % 3]));
                    dw[(((size_t)(b * MR + j) * C + c) * R + r) * S + s] += (float)sum;
                }
    }
}
#endif

int cpu_conv_direct_supported(const conv_geom *g)
{
#ifdef CONV_DIRECT
    if (direct_shape(g))
        return 2;
    return strided_shape(g) ? (strided_input_grad_covered(g) ? 2 : 1) : 0;
#else
    (void)direct_shape;
    (void)strided_shape;
    (void)g;
    return 0;
#endif
}

#ifdef CONV_DIRECT
/* Floats of both packed filter sets, at the workspace's start. */
static size_t packs_floats(const conv_geom *g, const pass_geom *f)
{
    return round16(blocks(g->K) * g->C * f->taps * MR) +
           round16(blocks(g->C) * g->K * f->taps * MR);
}

/* Floats of a chunk's scratch: padded input planes, padded output-gradient planes and, where
 * the two passes cannot share them, the weight gradient's wide ones. */
static size_t chunk_floats(const conv_geom *g, const pass_geom *f, const pass_geom *d, int chunk)
{
    size_t per_image = (size_t)g->C * f->Ls;
    if (dy_planes_shared(f, d))
        per_image += (size_t)g->K * d->Ls;
    else
        per_image += (size_t)g->K * (d->Ls + dy_wide_plane(f));
    return (size_t)chunk * per_image;
}


/* One chunk of images n0 .. n0 + nb - 1 of the backward pass, with its scratch at `base`
 * (laid out for `chunk` images): pad, weight gradient into dw, input gradient. */
static void backward_chunk(const conv_geom *g, const pass_geom *f, const pass_geom *d,
                           const parity_classes *classes, int chunk, int n0, int nb,
                           const float *x, const float *dy, const float *packed, float *dw,
                           float *dx, int accumulate, float *base, int team)
{
    const int C = g->C, K = g->K, shared = dy_planes_shared(f, d);
    const size_t in_image = (size_t)C * g->H * g->W, out_image = (size_t)K * g->P * g->Q;
    float *xp = base, *dyp = xp + (size_t)chunk * C * f->Ls;
    float *dyw = shared ? dyp + (size_t)d->top * d->Wp + d->left : dyp + (size_t)chunk * K * d->Ls;
    const size_t dyw_plane = shared ? d->Ls : dy_wide_plane(f);
    /* dw NULL: a frozen weight (--freeze), whose gradient nobody reads. */
    if (dw)
        pad_input(f, (long long)nb * C, x + n0 * in_image, xp, team);
    if (dx || (shared && dw))
        pad_input(d, (long long)nb * K, dy + n0 * out_image, dyp, team);
    if (!shared && dw)
        pad_planes((long long)nb * K, g->P, g->Q, 0, 0, f->Wp, dyw_plane, dy + n0 * out_image,
                   dyw, team);
    if (dw)
        weight_grad(f, nb, C, K, xp, dyw, dyw_plane, dw, team);
    if (dx && f->Lpar)
        strided_input_grad(g, d, classes, nb, dyp, packed, dx + n0 * in_image, accumulate, team);
    else if (dx)
        direct_pass(d, nb, K, C, dyp, packed, NULL, dx + n0 * in_image, accumulate, team);
}
#endif

/* The packed filters, then a chunk's scratch per thread that takes images of its own and,
 * with more than one, a weight gradient each. */
size_t cpu_conv_direct_workspace(const conv_geom *g, int chunk, int slots)
{
#ifdef CONV_DIRECT
    pass_geom f = forward_pass(g), d = input_grad_pass(g);
    const size_t own = slots > 1 ? (size_t)slots : 1;
    const size_t partials = own > 1 ? own * round16((size_t)g->K * g->C * f.taps) : 0;
    return sizeof(float) * (packs_floats(g, &f) + own * chunk_floats(g, &f, &d, chunk) + partials);
#else
    (void)g, (void)chunk, (void)slots;
    return 0;
#endif
}

/* With several threads and at least two images each, every thread takes whole chunks of
 * images of its own (the fewest rounds of equal chunks): it pads its images into its own
 * scratch and the tile kernels read them from its own core's L2, with no barrier between
 * the copy and the products. Split by the team chunk by chunk, a thread read planes the
 * other had padded, and in this VM's slow periods (the vCPUs apparently far apart) that ran
 * at 1-thread speed. The outputs are the same either way. */
void cpu_conv_direct_forward(const conv_geom *g, int n, int chunk, int slots, const float *x,
                             const float *w, const float *bias, float *y, float *workspace)
{
#ifdef CONV_DIRECT
    pass_geom f = forward_pass(g), d = input_grad_pass(g);
    const size_t in_image = (size_t)g->C * g->H * g->W, out_image = (size_t)g->K * g->P * g->Q;
    float *packed = workspace, *scratch = workspace + packs_floats(g, &f);
    pack_filters(w, g->K, g->C, f.taps, 0, packed);
    const int own = cpu_own_threads(slots, n);
    if (own > 1) {
        const int size = cpu_equal_chunk(n, own, chunk);
        const long long chunks = (n + size - 1) / size;
        const size_t stride = chunk_floats(g, &f, &d, chunk);
#pragma omp parallel for schedule(dynamic, 1) num_threads(own)
        for (long long ch = 0; ch < chunks; ch++) {
            const int n0 = (int)ch * size, nb = n - n0 < size ? n - n0 : size;
            float *xp = scratch + (size_t)cpu_thread_index() * stride;
            pad_input(&f, (long long)nb * g->C, x + n0 * in_image, xp, 0);
            direct_pass(&f, nb, g->C, g->K, xp, packed, bias, y + n0 * out_image, 0, 0);
        }
        return;
    }
    for (int n0 = 0; n0 < n; n0 += chunk) {
        int nb = n - n0 < chunk ? n - n0 : chunk;
        pad_input(&f, (long long)nb * g->C, x + n0 * in_image, scratch, 1);
        direct_pass(&f, nb, g->C, g->K, scratch, packed, bias, y + n0 * out_image, 0, 1);
    }
#else
    (void)g, (void)n, (void)chunk, (void)slots, (void)x, (void)w, (void)bias, (void)y;
    (void)workspace;
#endif
}

/* Backward as the forward pass: with several threads and at least two images each, every
 * thread takes its share of the images (n / threads, in equal chunks) and sums its weight
 * gradient apart, added to dw in thread order at the end; so the weight gradient's sums
 * depend on the thread count (the input gradient's do not). */
void cpu_conv_direct_backward(const conv_geom *g, int n, int chunk, int slots, const float *x,
                              const float *dy, const float *w, float *dw, float *dx,
                              int accumulate, float *workspace)
{
#ifdef CONV_DIRECT
    pass_geom f = forward_pass(g), d = input_grad_pass(g);
    const int C = g->C, K = g->K;
    const parity_classes classes = make_classes(g, &d);     /* stride 2's input gradient */
    if (f.Lpar && !strided_input_grad_covered(g))
        dx = NULL;  /* the caller computes the input gradient (im2col) */
    if (!dx && !dw)
        return;
    float *packed = workspace + round16(blocks(K) * C * f.taps * MR);
    float *scratch = workspace + packs_floats(g, &f);
    if (dx && f.Lpar)
        pack_strided_filters(g, &classes, w, packed);
    else if (dx)
        pack_filters(w, K, C, f.taps, 1, packed);
    /* x is padded again, not kept from the forward pass: keeping it would hold a padded copy
     * of every direct layer's input for the whole step (resnet20: about 70 MB more), to save
     * a copy that is a small part of the step (measurements: docs/perf-notes.md). */
    const int own = cpu_own_threads(slots, n);
    if (own > 1) {
        const size_t stride = chunk_floats(g, &f, &d, chunk);
        const size_t dw_floats = (size_t)K * C * f.taps, part = round16(dw_floats);
        float *parts = scratch + (size_t)slots * stride;
#pragma omp parallel num_threads(own)
        {
            const int t = cpu_thread_index();
            int lo, hi;
            const int size = cpu_share(n, chunk, &lo, &hi);
            float *mine = dw ? parts + (size_t)t * part : NULL;
            if (mine)
                memset(mine, 0, sizeof(float) * dw_floats);
            for (int n0 = lo; n0 < hi; n0 += size)
                backward_chunk(g, &f, &d, &classes, chunk, n0, hi - n0 < size ? hi - n0 : size,
                               x, dy, packed, mine, dx, accumulate,
                               scratch + (size_t)t * stride, 0);
            if (dw)
                cpu_add_parts(dw, parts, part, cpu_team_size(), dw_floats);
        }
        return;
    }
    for (int n0 = 0; n0 < n; n0 += chunk)
        backward_chunk(g, &f, &d, &classes, chunk, n0, n - n0 < chunk ? n - n0 : chunk, x, dy,
                       packed, dw, dx, accumulate, scratch, 1);
#else
    (void)g, (void)n, (void)chunk, (void)slots, (void)x, (void)dy, (void)w, (void)dw, (void)dx;
    (void)accumulate, (void)workspace;
#endif
}
