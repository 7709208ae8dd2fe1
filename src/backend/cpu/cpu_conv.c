/*
 * cpu_conv.c — how the CPU backend computes a convolution: the plan made once per layer
 * geometry when the model is built (which algorithm, how many images a chunk, how much
 * scratch), and forward and backward passes that follow it.
 *
 * Method: im2col + GEMM with the batch folded into the GEMM's N dimension. A chunk of nb images
 * is unfolded side by side into col [C*R*S, nb*P*Q]; per group one GEMM gives
 * [K/groups, nb*P*Q], which is scattered to NCHW with the bias. nb is the largest chunk whose
 * scratch (col + GEMM output) fits a core's L2 cache (and the workspace limit), so the GEMM
 * reads the columns from cache; a layer whose single image needs more goes one image at a
 * time. This is the reference path every faster algorithm is tested against (algo=im2col
 * forces it; tests/test_conv_paths.c compares the paths on odd shapes).
 *
 * Faster paths, picked by algo=auto (the default) when they apply (algo=direct: all but
 * Winograd):
 *   winograd   3x3, stride 1, padding 1, output height even and width a multiple of 8, 16
 *              channels in and out or more (ResNet-20's blocks, VGG's stages down to 8x8),
 *              or in layers over 64 channels a width of 4, 8 or 12 and a height of a
 *              multiple of 4 (VGG's 4x4 stage):
 *              F(4x4, 3x3) or F(2x2, 3x3) (backend/cpu/conv_winograd.c), 4x or 2.25x fewer
 *              multiply-adds; forward always, backward from 32 channels on, and below the
 *              input gradient where F(4x4) applies (else on the direct or im2col path).
 *   winograd-extended  the same on images extended with zero rows and columns to an even
 *              height and a width of a multiple of 8 (conv_extend.c), for layers of 32 to
 *              512 channels the direct kernels do not take, where that adds at most a third
 *              of the pixels (ResNet-50's 28x28, 14x14 and 7x7 stages: 28x32, 16x16 and 8x8,
 *              all F(4x4)).
 *   direct     stride 1, dilation 1, one group, kernels up to 7x7, padding below the kernel
 *              size, channels x kernel rows at most 192 (3x3 with up to 64 channels:
 *              ResNet-20/32/56's blocks, the first stage of VGG and ResNet-18/34, the CIFAR
 *              CNNs; LeNet's 5x5): direct AVX2 micro-kernels over zero-padded planes
 *              (backend/cpu/conv_direct.c), no im2col and no col2im; where the build has no
 *              such kernel the layer stays on im2col.
 *   depthwise  groups == C == K (MobileNet's 3x3 depthwise layers): direct loops per channel
 *              plane (backend/cpu/depthwise.c), no workspace.
 *   pointwise  1x1, stride 1, no padding, one group (ResNet-50's bottleneck ends, MobileNetV2's
 *              expansions and projections, DenseNet's bottlenecks, ConvNeXt's MLPs): an image
 *              [C, H*W] already is its own column matrix, so one GEMM per image, or on small
 *              planes one GEMM for a chunk of images copied side by side
 *              (backend/cpu/conv_pointwise.c).
 *   im2col-tiles  the im2col path with at most 64 filters per group (ResNet's stride-2
 *              layers): its products on backend/cpu/gemm_tiles.c's register tiles, not BLAS.
 */
#include <string.h>

#include "cpu_kernels.h"

enum {
    CONV_AUTO = 0,
    CONV_IM2COL,
    CONV_DIRECT,
    CONV_WINOGRAD,
    CONV_DEPTHWISE,
    CONV_POINTWISE,
    CONV_IM2COL_TILES
};

struct conv_plan {
    conv_geom g;
    int max_batch;
    size_t workspace_limit;     /* scratch the layer should stay under (it may chunk the batch) */
    size_t workspace_bytes;     /* what the plan needs for a full max_batch */
    int algo;                   /* the path that runs: CONV_IM2COL, _DIRECT, ... */
    int algo_backward;          /* the path of backward: with CONV_WINOGRAD forward, Winograd,
                                 * or im2col (wide layers with a side under 32) */
    int chunk;                  /* images per im2col GEMM */
    int chunk_direct;           /* images per direct pass */
    int weight_grad_direct;     /* the weight gradient on the direct kernels while the rest of
                                 * backward is not (stride 2: im2col) */
    int chunk_winograd;         /* images per Winograd forward or input-gradient pass */
    int chunk_weight_grad;      /* images per Winograd weight-gradient pass */
    int slots;                  /* threads (when planned) that run direct and Winograd chunks
                                 * of their own, each with its own scratch; 1 = none */
    size_t pack_floats;         /* im2col-tiles: scratch per group for the packed filters */
    int bf16;                   /* --precision bf16: in passing or on rounded copies (below) */
    size_t fp32_bytes;          /* the fp32 path's scratch; the bf16 copies follow it */
    size_t image_in, image_out; /* floats of one image's input and output */
    size_t weights;             /* floats of the filters */
    /* Winograd on images extended with zeros to gx (conv_extend.c), chunk_extend images at a
     * time, their copies at extend_offset bytes into the workspace */
    int extend;
    conv_geom gx;
    int chunk_extend;
    size_t extend_offset;
    int chunk_pointwise;        /* images per gathered pointwise product; 0: one per image */
};

/* The most images (at least one) whose scratch per chunk (fixed: the part that does not grow
 * with it) fits `budget` and, with the fixed part, the workspace limit. */
static int chunk_for(size_t fixed, size_t per_image, size_t budget, const conv_plan *c)
{
    size_t nb = budget / per_image;
    if (c->workspace_limit > fixed)
        nb = DTNN_MIN(nb, (c->workspace_limit - fixed) / per_image);
    return (int)DTNN_MAX(1, DTNN_MIN((size_t)c->max_batch, nb));
}

/* Chunks whose scratch fits the 1 MiB L2 cache of a core: the GEMM then reads the columns
 * im2col has just written from cache instead of memory, and chunks as large as the workspace
 * trained slower at 1 and at 2 threads (measurements: docs/perf-notes.md).
 * But a chunk has at least IM2COL_MIN_COLUMNS output pixels, past that budget if need be: one
 * image of a 7x7 plane (ResNet-50's stride-2 layers into its last stage, each image's scratch
 * 0.6-1 MiB) made products of 49 columns, which the register tile pads to 64, each repacking
 * the filters' panels for so few columns. */
enum { IM2COL_MIN_COLUMNS = 256 };

static void plan_im2col(conv_plan *c, int tiles)
{
    const conv_geom *g = &c->g;
    size_t per_image = ((size_t)g->C * g->R * g->S + g->K) * g->P * g->Q * sizeof(float);
    c->pack_floats = 0;
    if (tiles) {
        /* one packed filter matrix per group, forward W or backward W^T, packed once a call */
        const int Kg = g->K / g->groups, CRSg = g->C / g->groups * g->R * g->S;
        c->pack_floats = DTNN_MAX(cpu_gemm_tiles_scratch(Kg, CRSg),
                                  cpu_gemm_tiles_scratch(CRSg, Kg)) / sizeof(float);
    }
    const size_t packs = sizeof(float) * c->pack_floats * g->groups;
    const size_t pixels = (size_t)g->P * g->Q;
    const size_t images_for_columns = (IM2COL_MIN_COLUMNS + pixels - 1) / pixels;
    c->chunk = chunk_for(packs, per_image,
                         DTNN_MAX((size_t)1 << 20, images_for_columns * per_image), c);
    c->workspace_bytes = per_image * c->chunk + packs;
}

/* The direct kernels' chunk and scratch: chunks whose padded planes fit the 1 MiB L2 cache of
 * a core (one per thread that runs chunks of its own), so the kernels read what pad_planes
 * has just written from there; with 16 MiB chunks ResNet-20's first stage ran much slower
 * both ways (measurements: docs/perf-notes.md). Returns the workspace bytes. */
static size_t plan_direct(conv_plan *c)
{
    const size_t fixed = cpu_conv_direct_workspace(&c->g, 0, c->slots);
    c->chunk_direct = chunk_for(fixed, cpu_conv_direct_workspace(&c->g, 1, c->slots) - fixed,
                                ((size_t)1 << 20) * (size_t)c->slots, c);
    return cpu_conv_direct_workspace(&c->g, c->chunk_direct, c->slots);
}

/* The extended images' copies after the Winograd scratch: input and output (forward), input,
 * output gradient and input gradient (backward), for chunks of up to 16 MiB of them (and
 * within the workspace limit). */
static void plan_extend(conv_plan *c)
{
    const conv_geom *x = &c->gx;
    const size_t per_image = sizeof(float) * (size_t)(2 * x->C + x->K) * x->H * x->W;
    c->extend_offset = (c->workspace_bytes + 63) / 64 * 64;
    c->chunk_extend = chunk_for(c->extend_offset, per_image, (size_t)16 << 20, c);
    c->workspace_bytes = c->extend_offset + per_image * c->chunk_extend;
}

static void plan(conv_plan *c, dtnn_conv_algo asked)
{
    const conv_geom *g = &c->g;
    c->algo = c->algo_backward = CONV_IM2COL;
    const int fast = asked != DTNN_CONV_IM2COL;
    /* Asymmetric padding: only the paths that bound every tap by the input (depthwise,
     * im2col) take it; the direct and Winograd kernels size their padded planes from the
     * symmetric padding, and pointwise assumes P x Q = H x W. */
    const int symmetric = g->pad_extra_h == 0 && g->pad_extra_w == 0;
    if (fast && g->groups == g->C && g->K == g->C) {
        c->algo = c->algo_backward = CONV_DEPTHWISE;
        c->workspace_bytes = 0;
        return;
    }
    if (fast && symmetric && g->groups == 1 && g->R == 1 && g->S == 1 &&
        g->stride_h == 1 && g->stride_w == 1 && g->pad_h == 0 && g->pad_w == 0) {
        c->algo = c->algo_backward = CONV_POINTWISE;
        c->chunk_pointwise = cpu_conv_pointwise_chunk(g, c->max_batch, c->workspace_limit);
        c->workspace_bytes = cpu_conv_pointwise_workspace(g, c->chunk_pointwise);
        return;
    }
    c->slots = DTNN_MAX(cpu_threads(), 1);
    /* The direct kernel sums each output over C input planes (forward) and each input
     * gradient over K output planes; it wins while a tile's R rows of those planes and the
     * filter block stay in L1 (3x3 with 64 channels: 24 + 9 KiB). With 128 to 512 channels
     * of 3x3 it re-read them from L2 and lost to im2col (vgg16-64's deep layers; measurements:
     * docs/perf-notes.md). */
    const int direct_fits = fast && symmetric && g->C * g->R <= 192 && g->K * g->R <= 192;
    const int direct_kind = direct_fits ? cpu_conv_direct_supported(g) : 0;
    /* Stride 2 (ResNet's downsampling 3x3s): on the direct kernels over parity planes, the
     * input gradient as four passes over the output gradient (conv_direct.c). Through im2col
     * the forward copied the input 9 times and that copy took longer than the products, and
     * im2col + col2im took most of the input gradient. Below 16x16 outputs only the forward
     * is direct: a row of each plane is too short for the passes' per-call overhead, and
     * there the backward was slower with either its weight gradient or its input gradient
     * direct than on im2col (measurements: docs/perf-notes.md). */
    const int stride2 = g->stride_h == 2 || g->stride_w == 2;
    const int direct = direct_kind == 2 && (!stride2 || g->P * g->Q >= 256);
    const int strided = direct_kind && stride2 && !direct;
    int winograd_tile = asked == DTNN_CONV_AUTO && symmetric ? cpu_conv_winograd_supported(g) : 0;
    /* Sizes Winograd's tiles do not take, in layers too wide for the direct kernels
     * (ResNet-50's 28x28, 14x14 and 7x7 stages ran on im2col at about 70% of the FMA peak):
     * on images extended with zeros to a size Winograd takes (conv_extend.c), where that adds
     * at most a third (28x28 -> 28x32, 14x14 -> 16x16, 7x7 -> 8x8) and the layer has the
     * channels for Winograd's backward too (below). */
    c->extend = 0;
    if (asked == DTNN_CONV_AUTO && symmetric && !winograd_tile && !direct_fits &&
        DTNN_MIN(g->C, g->K) >= 32) {
        const conv_geom x = cpu_conv_extended(g);
        if ((size_t)x.H * x.W * 3 <= (size_t)g->H * g->W * 4 &&
            (winograd_tile = cpu_conv_winograd_supported(&x))) {
            c->extend = 1;
            c->gx = x;
        }
    }
    const conv_geom *wgeo = c->extend ? &c->gx : g;
    /* Winograd from 16 channels in and out: with 3 (an RGB input) the transforms cost more
     * than the products they save (vgg16-64's first layer ran slower on Winograd than
     * direct; measurements: docs/perf-notes.md). */
    const int winograd = DTNN_MIN(g->C, g->K) >= 16 && winograd_tile;
    /* Winograd backward (the weight gradient's F(2x2), the input gradient's F(4x4) or F(2x2))
     * in narrow layers, and in wide ones from 32 channels on both sides. Narrow layers of 16
     * to 31 channels once ran backward faster with the weight gradient on the direct kernels;
     * since the dot products read runs of blocks (cpu_gemm_dots) and 8-wide planes take
     * F(4x4), all-Winograd is faster at every such shape tried (ResNet-20's first stage:
     * measurements: docs/perf-notes.md). Wide layers with a side under 32 (16 -> 80
     * channels, no zoo model has one) keep the im2col backward: not measured against it. */
    const int winograd_backward =
        winograd && (DTNN_MIN(g->C, g->K) >= 32 || DTNN_MAX(g->C, g->K) <= 64);
    /* A scratch per thread (slots) unless one image a thread already passes the workspace
     * limit (large images, many threads): then one, the team splitting every chunk. */
    for (;;) {
        c->workspace_bytes = 0;
        c->weight_grad_direct = 0;
        if (!winograd_backward && direct) {
            c->algo = c->algo_backward = CONV_DIRECT;
            c->workspace_bytes = plan_direct(c);
        } else if (!winograd_backward) {
            /* im2col with few filters per group: the products on gemm_tiles.c's register tiles,
             * not BLAS, whose kernels stay far below peak with M = 16 to 64 rows (ResNet-20's
             * stride-2 layers; measurements: docs/perf-notes.md). */
            const int tiles = fast && g->K / g->groups <= 64;
            plan_im2col(c, tiles);
            c->algo = c->algo_backward = tiles ? CONV_IM2COL_TILES : CONV_IM2COL;
            if (strided) {
                /* stride 2 below 16x16 outputs, or a padding whose input gradient the direct
                 * passes do not cover (then the weight gradient is direct from 16x16 on) */
                c->algo = CONV_DIRECT;
                c->weight_grad_direct = g->P * g->Q >= 256;
                c->workspace_bytes = DTNN_MAX(c->workspace_bytes, plan_direct(c));
            }
        }
        if (winograd) {
            c->algo = CONV_WINOGRAD;
            c->chunk_winograd = cpu_conv_winograd_chunk(wgeo, c->max_batch, c->workspace_limit,
                                                        c->slots, 0);
            c->workspace_bytes =
                DTNN_MAX(c->workspace_bytes,
                         cpu_conv_winograd_workspace(wgeo, c->chunk_winograd, c->slots, 0));
        }
        if (winograd_backward) {
            c->algo_backward = CONV_WINOGRAD;
            c->chunk_weight_grad = cpu_conv_winograd_chunk(wgeo, c->max_batch,
                                                           c->workspace_limit, c->slots, 1);
            c->workspace_bytes = DTNN_MAX(
                c->workspace_bytes,
                cpu_conv_winograd_workspace(wgeo, c->chunk_weight_grad, c->slots, 1));
        }
        if (c->extend)
            plan_extend(c);
        if (c->slots == 1 || c->workspace_bytes <= c->workspace_limit)
            break;
        c->slots = 1;
    }
}

/* --precision bf16 without rounded copies: the Winograd passes round as they go (wino_bf16
 * below); backward only where one Winograd call has all of dw (not the extended path's
 * chunks). */
static int bf16_forward_in_passing(const conv_plan *c) { return c->algo == CONV_WINOGRAD; }
static int bf16_backward_in_passing(const conv_plan *c)
{
    return c->algo_backward == CONV_WINOGRAD && !c->extend;
}

conv_plan *cpu_conv_plan_create(dtnn_backend *be, const conv_desc *d, dtnn_error *err)
{
    (void)be;
    conv_plan *c = calloc(1, sizeof *c);
    if (!c) {
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory planning a convolution");
        return NULL;
    }
    c->g = d->g;
    c->max_batch = d->max_batch;
    c->workspace_limit = d->workspace_limit;
    plan(c, d->algo);
    const conv_geom *g = &c->g;
    c->image_in = (size_t)g->C * g->H * g->W;
    c->image_out = (size_t)g->K * g->P * g->Q;
    c->weights = (size_t)g->K * (g->C / g->groups) * g->R * g->S;
    c->bf16 = d->precision == DTNN_PRECISION_BF16;
    c->fp32_bytes = (c->workspace_bytes + 63) / 64 * 64;
    if (c->bf16 && !(bf16_forward_in_passing(c) && bf16_backward_in_passing(c)))
        c->workspace_bytes = c->fp32_bytes + sizeof(float) * (2 * c->image_in * c->max_batch +
                                                              2 * c->weights +
                                                              c->image_out * c->max_batch);
    return c;
}

/* bf16: the GEMMs' operands are rounded copies (cpu_conv_forward, cpu_conv_backward below),
 * which the GEMM may multiply as bf16 pairs. */
static int gemm_flags(const conv_plan *c) { return c->bf16 ? CPU_GEMM_BF16 : 0; }

/* The im2col path's product with group gi's filters W_g [Kg, CRSg]: out [m, ld] = W_g b
 * (forward: b = the columns) or, with `trans`, W_g^T b (input gradient: b = dy), on
 * gemm_tiles.c's register tiles with the filters packed once a call (algo im2col-tiles) or on
 * BLAS. */
static void filter_product(const conv_plan *c, int tiles, int trans,
                           int gi, const float *w, const float *b, int ld, float *out,
                           float *packs)
{
    const conv_geom *g = &c->g;
    const int Kg = g->K / g->groups, CRSg = g->C / g->groups * g->R * g->S;
    const int m = trans ? CRSg : Kg, k = trans ? Kg : CRSg;
    if (tiles)
        cpu_gemm_tiles(m, ld, k, b, ld, out, ld, packs + gi * c->pack_floats);
    else
        cpu_gemm_strided(1, trans, 0, m, ld, k, 1.0f, w + (size_t)gi * Kg * CRSg, CRSg, 0, b, ld,
                         0, 0.0f, out, ld, 0, gemm_flags(c));
}

/* --precision bf16 in the Winograd passes: operands rounded as the transforms read them and
 * outputs as they are written, and dw's sum where one call has the whole batch (whole_dw), so
 * the passes need no rounded copies (cpu_conv_forward, cpu_conv_backward). On the copies
 * (the other paths' route) the same flags round what is already rounded: no change. */
static int wino_bf16(const conv_plan *c, int whole_dw)
{
    return c->bf16 ? CPU_WINO_BF16 | (whole_dw ? CPU_WINO_BF16_DW : 0) : 0;
}

/* Winograd on zero-extended copies (conv_extend.c), chunk_extend images at a time. */
static float *extend_buffer(const conv_plan *c, void *workspace)
{
    return (float *)(void *)((char *)workspace + c->extend_offset);
}

static void extended_forward(const conv_plan *c, int n, const float *x, const float *w,
                             const float *b, float *y, void *workspace)
{
    const conv_geom *g = &c->g, *gx = &c->gx;
    float *xe = extend_buffer(c, workspace);
    float *ye = xe + (size_t)c->chunk_extend * gx->C * gx->H * gx->W;
    for (int n0 = 0; n0 < n; n0 += c->chunk_extend) {
        const int nb = DTNN_MIN(c->chunk_extend, n - n0);
        cpu_extend_planes(x + (size_t)n0 * g->C * g->H * g->W, (size_t)nb * g->C, g->H, g->W,
                          gx->H, gx->W, xe);
        cpu_conv_winograd_forward(gx, nb, c->chunk_winograd, c->slots, wino_bf16(c, 0), xe, w,
                                  b, ye, workspace);
        cpu_crop_planes(ye, (size_t)nb * g->K, gx->H, gx->W, g->P, g->Q,
                        y + (size_t)n0 * g->K * g->P * g->Q, 0);
    }
}

/* The weight gradient adds over the chunks (dw += in each call); the input gradient is
 * cropped into dx, or added where accumulate. */
static void extended_backward(const conv_plan *c, int n, const float *x, const float *dy,
                              const float *w, float *dw, float *dx, int accumulate,
                              void *workspace)
{
    const conv_geom *g = &c->g, *gx = &c->gx;
    const size_t plane = (size_t)gx->H * gx->W;
    float *xe = extend_buffer(c, workspace);
    float *dye = xe + (size_t)c->chunk_extend * gx->C * plane;
    float *dxe = dye + (size_t)c->chunk_extend * gx->K * plane;
    for (int n0 = 0; n0 < n; n0 += c->chunk_extend) {
        const int nb = DTNN_MIN(c->chunk_extend, n - n0);
        if (dw)
            cpu_extend_planes(x + (size_t)n0 * g->C * g->H * g->W, (size_t)nb * g->C, g->H,
                              g->W, gx->H, gx->W, xe);
        cpu_extend_planes(dy + (size_t)n0 * g->K * g->P * g->Q, (size_t)nb * g->K, g->P, g->Q,
                          gx->H, gx->W, dye);
        cpu_conv_winograd_backward(gx, nb, c->chunk_winograd, c->slots, c->chunk_weight_grad,
                                   wino_bf16(c, 0), xe, dye, w, dw, dx ? dxe : NULL, 0,
                                   workspace);
        if (dx)
            cpu_crop_planes(dxe, (size_t)nb * g->C, gx->H, gx->W, g->H, g->W,
                            dx + (size_t)n0 * g->C * g->H * g->W, accumulate);
    }
}

static void forward_f32(const conv_plan *c, int n, const float *x, const float *w,
                        const float *b, float *y, void *workspace)
{
    const conv_geom *g = &c->g;
    const int PQ = g->P * g->Q, CRS = g->C * g->R * g->S, G = g->groups;
    const int Kg = g->K / G, CRSg = CRS / G;
    if (c->algo == CONV_DEPTHWISE) {
        cpu_dw_conv_forward(g, n, x, w, b, y);
        return;
    }
    if (c->algo == CONV_DIRECT) {
        cpu_conv_direct_forward(g, n, c->chunk_direct, c->slots, x, w, b, y,
                                     workspace);
        return;
    }
    if (c->algo == CONV_WINOGRAD && c->extend) {
        extended_forward(c, n, x, w, b, y, workspace);
        return;
    }
    if (c->algo == CONV_WINOGRAD) {
        cpu_conv_winograd_forward(g, n, c->chunk_winograd, c->slots, wino_bf16(c, 0), x, w, b,
                                  y, workspace);
        return;
    }
    if (c->algo == CONV_POINTWISE) {
        cpu_conv_pointwise_forward(g, n, c->chunk_pointwise, x, w, b, y, workspace,
                                   gemm_flags(c));
        return;
    }
    const int tiles = c->algo == CONV_IM2COL_TILES;
    float *packs = workspace;
    for (int gi = 0; tiles && gi < G; gi++)
        cpu_gemm_tiles_pack(0, Kg, CRSg, w + (size_t)gi * Kg * CRSg, CRSg,
                                 packs + gi * c->pack_floats);
    for (int n0 = 0; n0 < n; n0 += c->chunk) {
        int nb = DTNN_MIN(c->chunk, n - n0);
        int ld = nb * PQ;
        float *col = packs + G * c->pack_floats, *tmp = col + (size_t)CRS * ld;
        cpu_im2col(g, x + (size_t)n0 * g->C * g->H * g->W, nb, col, ld);
        for (int gi = 0; gi < G; gi++)
            filter_product(c, tiles, 0, gi, w, col + (size_t)gi * CRSg * ld, ld,
                           tmp + (size_t)gi * Kg * ld, packs);
        cpu_scatter_images(tmp, nb, g->K, PQ, (size_t)g->K * PQ, b, 0,
                           y + (size_t)n0 * g->K * PQ);
    }
}

static void backward_f32(const conv_plan *c, int n, const float *x, const float *dy,
                         const float *w, float *dw, float *db, float *dx, int accumulate,
                         void *workspace)
{
    const conv_geom *g = &c->g;
    const int PQ = g->P * g->Q, CRS = g->C * g->R * g->S, G = g->groups;
    const int Kg = g->K / G, CRSg = CRS / G;
    const size_t in_size = (size_t)g->C * g->H * g->W;
    /* The bias gradient is the same per-channel sum of dy whatever the path. */
    if (db)
        cpu_bias_grad(n, g->K, PQ, dy, db);
    /* dw NULL: a frozen weight (--freeze); no path computes its gradient then. */
    if (c->algo == CONV_DEPTHWISE) {
        if (dw)
            cpu_dw_conv_backward_weight(g, n, x, dy, dw);
        if (dx)
            cpu_dw_conv_backward_data(g, n, dy, w, dx, accumulate);
        return;
    }
    if (c->algo_backward == CONV_WINOGRAD && c->extend) {
        extended_backward(c, n, x, dy, w, dw, dx, accumulate, workspace);
        return;
    }
    if (c->algo_backward == CONV_WINOGRAD) {
        cpu_conv_winograd_backward(g, n, c->chunk_winograd, c->slots, c->chunk_weight_grad,
                                   wino_bf16(c, 1), x, dy, w, dw, dx, accumulate, workspace);
        return;
    }
    if (c->algo_backward == CONV_DIRECT) {
        cpu_conv_direct_backward(g, n, c->chunk_direct, c->slots, x, dy, w, dw, dx,
                                      accumulate, workspace);
        return;
    }
    if (c->algo == CONV_POINTWISE) {
        cpu_conv_pointwise_backward(g, n, c->chunk_pointwise, x, dy, w, dw, dx, accumulate,
                                    workspace, gemm_flags(c));
        return;
    }
    /* stride 2 with a direct forward: the weight gradient on the direct kernels too */
    const int direct_weights = c->algo == CONV_DIRECT && c->weight_grad_direct;
    if (!dx && !dw)
        return;
    if (direct_weights && dw) {
        cpu_conv_direct_backward(g, n, c->chunk_direct, c->slots, x, dy, w, dw,
                                      NULL, 0, workspace);
        if (!dx)
            return;
    }
    const int tiles = c->algo_backward == CONV_IM2COL_TILES;
    float *packs = workspace;
    for (int gi = 0; tiles && dx && gi < G; gi++)
        cpu_gemm_tiles_pack(1, CRSg, Kg, w + (size_t)gi * Kg * CRSg, CRSg,
                                 packs + gi * c->pack_floats);
    for (int n0 = 0; n0 < n; n0 += c->chunk) {
        int nb = DTNN_MIN(c->chunk, n - n0);
        int ld = nb * PQ;
        float *col = packs + G * c->pack_floats, *tmp = col + (size_t)CRS * ld;
        cpu_gather_images(dy + (size_t)n0 * g->K * PQ, nb, g->K, PQ, (size_t)g->K * PQ, tmp);
        if (!direct_weights && dw)
            cpu_im2col(g, x + (size_t)n0 * in_size, nb, col, ld);
        for (int gi = 0; gi < G && !direct_weights && dw; gi++) {
            const float *tg = tmp + (size_t)gi * Kg * ld, *cg = col + (size_t)gi * CRSg * ld;
            float *dwg = dw + (size_t)gi * Kg * CRSg;
            if (tiles)
                cpu_gemm_dots(Kg, CRSg, ld, tg, ld, cg, ld, dwg, CRSg);
            else
                cpu_gemm_strided(1, 0, 1, Kg, CRSg, ld, 1.0f, tg, ld, 0, cg, ld, 0, 1.0f, dwg,
                                 CRSg, 0, gemm_flags(c));
        }
        if (!dx)
            continue;
        for (int gi = 0; gi < G; gi++)
            filter_product(c, tiles, 1, gi, w, tmp + (size_t)gi * Kg * ld, ld,
                           col + (size_t)gi * CRSg * ld, packs);
        float *dxn = dx + (size_t)n0 * in_size;
        if (!accumulate)
            memset(dxn, 0, sizeof(float) * in_size * nb);
        cpu_col2im(g, col, ld, nb, dxn);
    }
}

/* bf16 (dtnn.h): the fp32 path on copies of x, w and dy rounded to bf16, its outputs rounded
 * before the bias (forward) or the sum into dw and dx (backward), as cuDNN's bf16 passes write
 * them; the bias gradient from the unrounded dy. Winograd passes do the same roundings in
 * passing where they can (bf16_*_in_passing), and a plan whose passes both do has no copies.
 * The copies, after the fp32 path's scratch: x [n, C, H, W], w, dy [n, K, P, Q], then the
 * unrounded dw and dx. */
typedef struct {
    float *x, *w, *dy, *dw, *dx;
} bf16_copies;

static bf16_copies copies_at(const conv_plan *c, void *workspace)
{
    bf16_copies b;
    b.x = (float *)((char *)workspace + c->fp32_bytes);
    b.w = b.x + c->image_in * c->max_batch;
    b.dy = b.w + c->weights;
    b.dw = b.dy + c->image_out * c->max_batch;
    b.dx = b.dw + c->weights;
    return b;
}

void cpu_conv_forward(dtnn_backend *be, const conv_plan *c, int n, const float *x, const float *w,
                      const float *b, float *y, void *workspace)
{
    (void)be;
    if (!c->bf16) {
        forward_f32(c, n, x, w, b, y, workspace);
        return;
    }
    if (bf16_forward_in_passing(c)) {
        /* the passes round x, w and y themselves (wino_bf16); y before the bias */
        forward_f32(c, n, x, w, b, y, workspace);
        return;
    }
    const conv_geom *g = &c->g;
    const size_t PQ = (size_t)g->P * g->Q;
    bf16_copies r = copies_at(c, workspace);
    cpu_round_bf16(c->image_in * n, x, r.x);
    cpu_round_bf16(c->weights, w, r.w);
    forward_f32(c, n, r.x, r.w, NULL, y, workspace);
    cpu_round_bf16(c->image_out * n, y, y);
    for (int i = 0; b && i < n; i++)
        for (int k = 0; k < g->K; k++) {
            float *yk = y + ((size_t)i * g->K + k) * PQ;
            for (size_t j = 0; j < PQ; j++)
                yk[j] += b[k];
        }
}

void cpu_conv_backward(dtnn_backend *be, const conv_plan *c, int n, const float *x, const float *dy,
                       const float *w, float *dw, float *db, float *dx, int accumulate,
                       void *workspace)
{
    (void)be;
    if (!c->bf16) {
        backward_f32(c, n, x, dy, w, dw, db, dx, accumulate, workspace);
        return;
    }
    const conv_geom *g = &c->g;
    const size_t in = c->image_in * n, out = c->image_out * n, weights = c->weights;
    if (db)
        cpu_bias_grad(n, g->K, g->P * g->Q, dy, db);
    if (!dw && !dx)
        return;
    if (bf16_backward_in_passing(c)) {
        /* the passes round x, dy, w, dx and dw's sum themselves (wino_bf16) */
        backward_f32(c, n, x, dy, w, dw, NULL, dx, accumulate, workspace);
        return;
    }
    bf16_copies r = copies_at(c, workspace);
    cpu_round_bf16(out, dy, r.dy);
    if (dw) {
        cpu_round_bf16(in, x, r.x);
        memset(r.dw, 0, sizeof(float) * weights);
    }
    if (dx)
        cpu_round_bf16(weights, w, r.w);
    backward_f32(c, n, dw ? r.x : x, r.dy, dx ? r.w : w, dw ? r.dw : NULL, NULL,
                 dx ? r.dx : NULL, 0, workspace);
    if (dw)
        cpu_store_bf16(weights, r.dw, dw, 1);
    if (dx)
        cpu_store_bf16(in, r.dx, dx, accumulate);
}

const char *cpu_conv_method(const conv_plan *c)
{
    static const char *const names[] = {"auto",      "im2col",    "direct",      "winograd",
                                        "depthwise", "pointwise", "im2col-tiles"};
    if (c->extend)
        return "winograd-extended";
    if (c->algo == CONV_POINTWISE && c->chunk_pointwise)
        return "pointwise-gathered";
    if (c->algo == CONV_DIRECT && c->algo_backward != CONV_DIRECT)
        return c->algo_backward == CONV_IM2COL_TILES ? "direct/im2col-tiles" : "direct/im2col";
    if (c->algo != CONV_WINOGRAD || c->algo_backward == CONV_WINOGRAD)
        return names[c->algo];
    /* Winograd forward, backward not: wide layers with a side under 32 (plan) */
    return c->algo_backward == CONV_IM2COL_TILES ? "winograd/im2col-tiles" : "winograd/im2col";
}

void cpu_conv_plan_free(dtnn_backend *be, conv_plan *p)
{
    (void)be;
    free(p);
}

size_t cpu_conv_workspace(const conv_plan *p) { return p->workspace_bytes; }
