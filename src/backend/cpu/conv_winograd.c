/*
 * conv_winograd.c — 3x3 convolution with stride 1 and padding 1 (ResNet's and VGG's 3x3
 * layers) by Winograd's minimal filtering F(m x m, 3x3) (Lavin and Gray, 2016): forward pass,
 * input gradient and weight gradient. Each m x m block of outputs comes from an alpha x alpha
 * block (alpha = m + 2) of the padded input as
 * Y = A^T [sum over channels of (G g G^T) . (B^T d B)] A, alpha^2 products per channel pair:
 *   F(2x2, 3x3): 16 where direct convolution needs 36, 2.25 times fewer multiply-adds;
 *   F(4x4, 3x3): 36 where it needs 144, 4 times fewer, for the forward pass and the input
 *     gradient where a row of tiles is whole groups of 4, or 2 on planes 8 wide (below,
 *     tile_size). The weight gradient stays on F(2x2) (its sums over every tile of the batch
 *     amplify F(4x4)'s error).
 *
 * Shapes: output height even and width a multiple of 8 (so a row of F(2x2) tiles is whole
 * groups of 4), which every CIFAR and ImageNet stage of those networks has down to 8x8; and
 * in wide layers planes of 4, 8 or 12 columns with a height a multiple of 4 (VGG's 4x4 stage
 * at 64x64 input), on F(4x4) a tile at a time (conv_winograd_small.c); elsewhere conv2d uses
 * the direct kernels or im2col. Built where the compiler targets AVX2 + FMA, as
 * conv_direct.c.
 *
 * Per chunk of images:
 *   1. each input plane is split into four planes of the zero-padded image (F(2x2): its
 *      (row parity, column parity) planes; F(4x4): its column phases mod 4), so the block of
 *      every tile in a row of tiles is a set of contiguous loads, and transformed to
 *      V [alpha^2][ins][tiles] (B^T d B, 4 or 8 tiles at a time);
 *   2. for each block of TB tiles (24; 48 in the AVX-512 set) and 4 output channels, alpha^2
 *      small GEMMs over the input channels (M[xi] = U[xi] V[xi], U = the transformed
 *      filters), kept in a buffer of 6 or 13.5 KiB (twice that at TB = 48) and turned into
 *      outputs (A^T M A) at once, so M never goes to memory. Wide layers (more than 64
 *      channels) run the products as GEMMs instead, through M [alpha^2][outs][tiles]
 *      (winograd_gemm_pass).
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

#include "conv_winograd.h"

/* Wide layers (more than 64 channels in or out: VGG's deeper stages) multiply their
 * transformed tiles with BLAS, as GEMMs of [outs][ins] by [ins][tiles]: there the filters of
 * one position (up to 512 x 512) no longer stay in cache for wino_tile, which streamed them
 * from memory once per block of TB tiles. */
enum { WIDE = 64 };
static int wide(const conv_geom *g) { return g->C > WIDE || g->K > WIDE; }

/* Planes narrower than a vector row of F(4x4) tiles (4, 8 or 12 wide, height a multiple of
 * 4) in wide layers: F(4x4) one tile at a time (conv_winograd_small.c). */
static int small_plane(const conv_geom *g)
{
    return wide(g) && g->W < 16 && g->W % 4 == 0 && g->H % 4 == 0;
}

static int winograd_shape(const conv_geom *g)
{
    return g->groups == 1 && g->R == 3 && g->S == 3 && g->stride_h == 1 && g->stride_w == 1 &&
           g->dil_h == 1 && g->dil_w == 1 && g->pad_h == 1 && g->pad_w == 1 && g->H >= 2 &&
           ((g->H % 2 == 0 && g->W % 8 == 0) || small_plane(g));
}

#ifdef CONV_WINOGRAD

/* F(4x4, 3x3) where rows of tiles are whole groups of 4 (width a multiple of 16, height of
 * 4): its transforms cost about what F(2x2)'s do per output, and its products 1.8x less, so
 * those layers run faster. On planes 8 wide (height a multiple of 8: ResNet-20's 8x8 stage)
 * two rows of 2 tiles fill an SSE vector, read straight from the plane; there F(4x4) ran
 * faster than F(2x2) with 16, 32 and 64 channels (measurements: docs/perf-notes.md). In wide
 * layers, where the products outweigh the transforms, other planes under 16 wide take F(4x4)
 * a tile at a time (small_plane). */
static int tile_size(const conv_geom *g)
{
    return g->H % 4 == 0 && (g->W % 16 == 0 || small_plane(g) || (g->W == 8 && g->H % 8 == 0))
               ? 4
               : 2;
}

/* the geometry of the forward pass and input gradient, or of the weight gradient (F(2x2)) */
static wino_geom make_geom(const conv_geom *g, int weight_grad, int bf16)
{
    wino_geom w;
    w.bf16 = bf16;
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
    /* F(4x4) on planes 8 wide, tile rows in pairs (transform_input6_quad) */
    w.quad = w.m == 4 && w.cols == 8 && w.TH % 2 == 0;
    if (w.quad)
        w.plane = 0;
    /* other rows of fewer than 4 tiles (F(4x4) below 16 columns, F(2x2) below 8) */
    w.small = w.TW % 4 != 0 && !w.quad;
    if (w.small) {
        w.pair = 0;
        w.lanes = 1;
        w.plane = 0;
    }
    return w;
}

static size_t filter_floats(const wino_geom *wg, int ins, int outs)
{
    return round16((size_t)wg->xi * channel_blocks(outs) * ins * KB);
}

/* Floats of the weight gradient's scratch for a chunk of nb images: parity planes, V and D. */
static size_t grad_chunk_floats(const wino_geom *wg, int nb, int C, int K)
{
    const size_t cols = tile_cols(nb * wg->tiles);
    return (size_t)nb * C * parity_floats(wg) + wg->xi * (slab(C, cols) + slab(K, cols));
}

/* Whether a team runs a chunk's xi products a GEMM a thread (each GEMM on one thread) rather
 * than each GEMM on the whole team: with enough positions to share out evenly. Split inside,
 * every thread packed the whole of one operand of every product (the weight gradient's D, of
 * K rows by the chunk's tiles; the passes' U where the tiles outnumber the channels), and
 * ResNet-50's 28x28 stage ran its backward barely faster at 2 threads than at 1
 * (measurements: docs/perf-notes.md). A GEMM's bits do not depend on its thread count, so
 * neither do these sums. */
static int positions_parallel(const wino_geom *wg)
{
    return cpu_threads() > 1 && wg->xi >= 4 * cpu_threads();
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
    wino_transform_inputs(wg, n0, nb, C, x, par, v, ldv, team);
    wino_transform_grads(wg, n0, nb, K, dy, d, ldv, team);
    const int gemms = wide(g) || (g->C >= 64 && g->K >= 64);
#pragma omp parallel for schedule(dynamic, 1) if (team && gemms && positions_parallel(wg))
    for (int xi = 0; xi < wg->xi; xi++) {
        const float *dp = d + xi * slab(K, ldv), *vp = v + xi * slab(C, ldv);
        float *dup = du + (size_t)xi * K * C;
        if (gemms)
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
    wino_filter_grad(wg, K, C, du, dw);
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
        wino_transform_inputs(wg, n0, nb, ins, in, par, v, ldv, 1);
#pragma omp parallel for schedule(dynamic, 1) if (positions_parallel(wg))
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
                wino_transform_output(wg, mk + r, m_stride, bk, r / wg->TW, r % wg->TW, o,
                                      accumulate);
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
    wino_transform_inputs(wg, n0, nb, ins, in, par, v, ldv, team);
    const long long tblocks = (long long)(ldv / TB), jobs = tblocks * kblocks;
    const int xis = wg->xi, lanes = wg->lanes;
    const size_t out_image = (size_t)outs * plane_in;
#pragma omp parallel for schedule(guided) if (team)
    for (long long job = 0; job < jobs; job++) {
        const int tb = (int)(job / kblocks), kb = (int)(job % kblocks);
        /* M of the block: [KB][xi][TB], 6 KiB (F(2x2)) or 13.5 KiB (F(4x4)) at TB = 24 */
        float m[KB * XI_MAX * TB];
        for (int xi = 0; xi < xis; xi++)
            wino_tile(ins, u + ((size_t)xi * kblocks + kb) * ins * KB,
                          v + xi * xi_stride + (size_t)tb * TB, ldv, m + xi * TB,
                          (size_t)xis * TB);
        for (int j = 0; j < KB && kb * KB + j < outs; j++) {
            const int k = kb * KB + j;
            for (int g = 0; g < TB && tb * TB + g < T; g += lanes) {
                const int t = tb * TB + g, i = t / wg->tiles, r = t % wg->tiles;
                float *o = out + (size_t)(n0 + i) * out_image + (size_t)k * plane_in;
                wino_transform_output(wg, m + (size_t)j * xis * TB + g, TB, bias ? bias[k] : 0.0f,
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
    const wino_geom wg = make_geom(g, weight_grad, 0);
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
    /* The largest chunk within both, by bisection over the real sizes: a chunk's tiles round
     * up to blocks of TB, so one image's scratch overstates a chunk's share of it, up to TB
     * times on planes of one tile (VGG's 4x4 stage at 64x64 input: chunks of 4 images, whose
     * products re-read 36 filter matrices of 512 x 512 every 4 images). */
    int lo = 1, hi = max_batch > 1 ? max_batch : 1;
    while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        const size_t need = cpu_conv_winograd_workspace(g, mid, own, weight_grad);
        if (need - fixed <= budget && (limit <= fixed || need <= limit))
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
#else
    (void)g, (void)max_batch, (void)limit, (void)slots, (void)weight_grad;
    return 1;
#endif
}

void cpu_conv_winograd_forward(const conv_geom *g, int n, int chunk, int slots, int bf16,
                               const float *x, const float *w, const float *bias, float *y,
                               float *workspace)
{
#ifdef CONV_WINOGRAD
    const wino_geom wg = make_geom(g, 0, bf16);
    const size_t fixed = cpu_conv_winograd_workspace(g, 0, slots, 0) / sizeof(float);
    wino_transform_filters(&wg, w, g->K, g->C, 0, wide(g), workspace);
    if (wide(g))
        winograd_gemm_pass(&wg, n, chunk, g->C, g->K, x, workspace, bias, y, 0,
                           workspace + fixed);
    else
        winograd_pass(&wg, n, chunk, slots, g->C, g->K, x, workspace, bias, y, 0,
                      workspace + fixed);
#else
    (void)g, (void)n, (void)chunk, (void)slots, (void)bf16, (void)x, (void)w, (void)bias, (void)y;
    (void)workspace;
#endif
}

void cpu_conv_winograd_backward(const conv_geom *g, int n, int chunk, int slots,
                                int weight_grad_chunk, int bf16, const float *x, const float *dy,
                                const float *w, float *dw, float *dx, int accumulate,
                                float *workspace)
{
#ifdef CONV_WINOGRAD
    const wino_geom wg = make_geom(g, 0, bf16), wgw = make_geom(g, 1, bf16);
    size_t fixed = cpu_conv_winograd_workspace(g, 0, slots, 1) / sizeof(float);
    if (dw)
        winograd_weight_grad(g, &wgw, n, weight_grad_chunk, slots, x, dy, dw, workspace,
                             workspace + fixed);
    if (!dx)
        return;
    fixed = cpu_conv_winograd_workspace(g, 0, slots, 0) / sizeof(float);
    wino_transform_filters(&wg, w, g->K, g->C, 1, wide(g), workspace);
    if (wide(g))
        winograd_gemm_pass(&wg, n, chunk, g->K, g->C, dy, workspace, NULL, dx, accumulate,
                           workspace + fixed);
    else
        winograd_pass(&wg, n, chunk, slots, g->K, g->C, dy, workspace, NULL, dx, accumulate,
                      workspace + fixed);
#else
    (void)g, (void)n, (void)chunk, (void)slots, (void)weight_grad_chunk, (void)bf16, (void)x;
    (void)dy, (void)w;
    (void)dw, (void)dx, (void)accumulate, (void)workspace;
#endif
}
