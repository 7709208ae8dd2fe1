/*
 * conv2d.c — 2-D convolution as torch.nn.Conv2d: kernel, stride, padding, dilation, groups,
 * optional bias. Weight [K, C/groups, R, S], bias [K].
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
 *              channels in and out or more (ResNet-20's blocks, VGG's stages down to 8x8):
 *              F(4x4, 3x3) or F(2x2, 3x3) (kernels/conv_winograd.c), 4x or 2.25x fewer
 *              multiply-adds; forward always, backward from 32 channels on, and below the
 *              input gradient where F(4x4) applies (else on the direct or im2col path).
 *   direct     stride 1, dilation 1, one group, kernels up to 7x7, padding below the kernel
 *              size, channels x kernel rows at most 192 (3x3 with up to 64 channels:
 *              ResNet-20/32/56's blocks, the first stage of VGG and ResNet-18/34, the CIFAR
 *              CNNs; LeNet's 5x5): direct AVX2 micro-kernels over zero-padded planes
 *              (kernels/conv_direct.c), no im2col and no col2im; where the build has no
 *              such kernel the layer stays on im2col.
 *   depthwise  groups == C == K (MobileNet's 3x3 depthwise layers): direct loops per channel
 *              plane (kernels/depthwise.c), no workspace.
 *   pointwise  1x1, stride 1, no padding, one group (ResNet-50's bottleneck ends, MobileNetV2's
 *              expansions and projections, DenseNet's bottlenecks): an image [C, H*W] already
 *              is its own column matrix, so one GEMM per image reads x and writes y in place,
 *              with no im2col, no scatter and no workspace.
 *   im2col-tiles  the im2col path with at most 64 filters per group (ResNet's stride-2
 *              layers): its products on kernels/gemm_tiles.c's register tiles, not BLAS.
 */
#include <string.h>

#include "layer.h"

enum {
    CONV_AUTO = 0,
    CONV_IM2COL,
    CONV_DIRECT,
    CONV_WINOGRAD,
    CONV_DEPTHWISE,
    CONV_POINTWISE,
    CONV_IM2COL_TILES
};

typedef struct {
    int filters, kh, kw, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups, bias;
    int algo_asked;             /* CONV_AUTO, CONV_IM2COL or CONV_DIRECT (the option algo=) */
    /* derived in infer */
    int algo;                   /* the path that runs: CONV_IM2COL, _DIRECT, ... */
    conv_geom g;
    int algo_backward;          /* the path of backward: with CONV_WINOGRAD forward, Winograd,
                                 * direct or im2col (narrow or wide layers) */
    int chunk;                  /* images per im2col GEMM */
    int chunk_direct;           /* images per direct pass */
    int weight_grad_direct;     /* the weight gradient on the direct kernels while the rest of
                                 * backward is not (stride 2: im2col; Winograd's narrow layers) */
    int chunk_winograd;         /* images per Winograd forward or input-gradient pass */
    int chunk_weight_grad;      /* images per Winograd weight-gradient pass */
    int slots;                  /* threads (when planned) that run direct and Winograd chunks
                                 * of their own, each with its own scratch; 1 = none */
    size_t pack_floats;         /* im2col-tiles: scratch per group for the packed filters */
} conv2d_cfg;

static void conv2d_defaults(void *cfg)
{
    conv2d_cfg *c = cfg;
    c->filters = 0;
    c->kh = c->kw = 0;
    c->stride_h = c->stride_w = 1;
    c->dil_h = c->dil_w = 1;
    c->groups = 1;
    c->bias = 1;
}

static dtnn_status conv2d_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    conv2d_cfg *c = cfg;
    if (!strcmp(key, "filters") || !strcmp(key, "out_channels"))
        return layer_opt_int(key, value, 1, 1 << 20, &c->filters, err);
    if (!strcmp(key, "kernel") || !strcmp(key, "kernel_size"))
        return layer_opt_pair(key, value, 1, &c->kh, &c->kw, err);
    if (!strcmp(key, "stride"))
        return layer_opt_pair(key, value, 1, &c->stride_h, &c->stride_w, err);
    if (!strcmp(key, "padding"))
        return layer_opt_pair(key, value, 0, &c->pad_h, &c->pad_w, err);
    if (!strcmp(key, "dilation"))
        return layer_opt_pair(key, value, 1, &c->dil_h, &c->dil_w, err);
    if (!strcmp(key, "groups"))
        return layer_opt_int(key, value, 1, 1 << 20, &c->groups, err);
    if (!strcmp(key, "bias"))
        return layer_opt_bool(key, value, &c->bias, err);
    if (!strcmp(key, "algo")) {
        if (!strcmp(value, "auto") || !strcmp(value, "im2col") || !strcmp(value, "direct")) {
            c->algo_asked = !strcmp(value, "auto")     ? CONV_AUTO
                            : !strcmp(value, "im2col") ? CONV_IM2COL
                                                       : CONV_DIRECT;
            return DTNN_OK;
        }
        return dtnn_error_set(err, DTNN_ERR_ARG, "algo=%s: conv2d's algo is auto (the fastest "
                              "path that applies), direct (auto without Winograd) or im2col "
                              "(the reference)", value);
    }
    return dtnn_error_set(err, DTNN_ERR_ARG, "unknown option '%s' for conv2d (filters, kernel, "
                          "stride, padding, dilation, groups, bias, algo)", key);
}

/* The most images (at least one) whose scratch per chunk (fixed: the part that does not grow
 * with it) fits `budget` and, with the fixed part, the workspace limit. */
static int chunk_for(size_t fixed, size_t per_image, size_t budget, const layer *l)
{
    size_t nb = budget / per_image;
    if (l->workspace_limit > fixed)
        nb = DTNN_MIN(nb, (l->workspace_limit - fixed) / per_image);
    return (int)DTNN_MAX(1, DTNN_MIN((size_t)l->max_batch, nb));
}

/* Chunks whose scratch fits the 1 MiB L2 cache of a core: the GEMM then reads the columns
 * im2col has just written from cache instead of memory. Measured (dtnn bench, batch 64, 1
 * thread, images/s with 0.5 / 1 / 64 MiB chunks): resnet20 96 / 93 / 69, cifarcnn 220 /
 * 215 / 167; 2 threads: resnet20 155 / 160 / 129, cifarcnn 384 / 383 / 341. */
static void plan_im2col(conv2d_cfg *c, layer *l, const dtnn_backend *be, int tiles)
{
    const conv_geom *g = &c->g;
    size_t per_image = ((size_t)g->C * g->R * g->S + g->K) * g->P * g->Q * sizeof(float);
    c->pack_floats = 0;
    if (tiles) {
        /* one packed filter matrix per group, forward W or backward W^T, packed once a call */
        const int Kg = g->K / g->groups, CRSg = g->C / g->groups * g->R * g->S;
        c->pack_floats = DTNN_MAX(be->gemm_tiles_scratch(Kg, CRSg),
                                  be->gemm_tiles_scratch(CRSg, Kg)) / sizeof(float);
    }
    const size_t packs = sizeof(float) * c->pack_floats * g->groups;
    c->chunk = chunk_for(packs, per_image, (size_t)1 << 20, l);
    l->workspace_bytes = per_image * c->chunk + packs;
}

/* The direct kernels' chunk and scratch: chunks whose padded planes fit the 1 MiB L2 cache of
 * a core (one per thread that runs chunks of its own), so the kernels read what pad_planes
 * has just written from there: with 16 MiB chunks ResNet-20's first stage ran at 7.5 / 15.5
 * ms forward / backward per layer instead of 4.7 / 9.0. Returns the workspace bytes. */
static size_t plan_direct(conv2d_cfg *c, const layer *l, const dtnn_backend *be)
{
    const size_t fixed = be->conv_direct_workspace(&c->g, 0, c->slots);
    c->chunk_direct = chunk_for(fixed, be->conv_direct_workspace(&c->g, 1, c->slots) - fixed,
                                ((size_t)1 << 20) * (size_t)c->slots, l);
    return be->conv_direct_workspace(&c->g, c->chunk_direct, c->slots);
}

static dtnn_status conv2d_infer(layer *l, dtnn_error *err)
{
    conv2d_cfg *c = l->cfg;
    dtnn_shape in = l->in[0];
    if (c->filters <= 0 || c->kh <= 0)
        return dtnn_error_set(err, DTNN_ERR_ARG, "conv2d needs filters= and kernel=");
    if (in.c % c->groups || c->filters % c->groups)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "groups=%d must divide the input channels "
                              "(%d) and filters (%d)", c->groups, in.c, c->filters);
    conv_geom *g = &c->g;
    g->C = in.c;
    g->H = in.h;
    g->W = in.w;
    g->K = c->filters;
    g->R = c->kh;
    g->S = c->kw;
    g->stride_h = c->stride_h;
    g->stride_w = c->stride_w;
    g->pad_h = c->pad_h;
    g->pad_w = c->pad_w;
    g->dil_h = c->dil_h;
    g->dil_w = c->dil_w;
    g->groups = c->groups;
    int eh = in.h + 2 * c->pad_h - c->dil_h * (c->kh - 1) - 1;
    int ew = in.w + 2 * c->pad_w - c->dil_w * (c->kw - 1) - 1;
    if (eh < 0 || ew < 0)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "kernel %dx%d (dilation %dx%d, padding "
                              "%dx%d) does not fit the %dx%d input", c->kh, c->kw, c->dil_h,
                              c->dil_w, c->pad_h, c->pad_w, in.h, in.w);
    g->P = eh / c->stride_h + 1;
    g->Q = ew / c->stride_w + 1;
    l->out = (dtnn_shape){c->filters, g->P, g->Q};

    int cg = in.c / c->groups;
    double fan_in = (double)cg * c->kh * c->kw, fan_out = (double)c->filters * c->kh * c->kw;
    int64_t wd[4] = {c->filters, cg, c->kh, c->kw};
    layer_declare(l, "weight", DTNN_TENSOR_PARAM, DTNN_F32, 4, wd, INIT_WEIGHT, fan_in, fan_out);
    if (c->bias) {
        int64_t bd[1] = {c->filters};
        layer_declare(l, "bias", DTNN_TENSOR_PARAM, DTNN_F32, 1, bd, INIT_BIAS, fan_in, fan_out);
    }
    c->algo = c->algo_backward = CONV_IM2COL;
    /* the build's setting narrows the layer's: im2col beats direct beats auto */
    int asked = c->algo_asked;
    if (l->conv_algo == DTNN_CONV_IM2COL)
        asked = CONV_IM2COL;
    else if (l->conv_algo == DTNN_CONV_DIRECT && asked == CONV_AUTO)
        asked = CONV_DIRECT;
    const int fast = asked != CONV_IM2COL;
    if (fast && c->groups == in.c && c->filters == in.c) {
        c->algo = c->algo_backward = CONV_DEPTHWISE;
        l->workspace_bytes = 0;
        return DTNN_OK;
    }
    if (fast && c->groups == 1 && c->kh == 1 && c->kw == 1 &&
        c->stride_h == 1 && c->stride_w == 1 && c->pad_h == 0 && c->pad_w == 0) {
        c->algo = c->algo_backward = CONV_POINTWISE;
        l->workspace_bytes = 0;
        return DTNN_OK;
    }
    /* The model builds with the CPU backend, the only one so far; layers see it at run time. */
    const dtnn_backend *be = dtnn_backend_cpu();
    c->slots = DTNN_MAX(be->threads(), 1);
    /* The direct kernel sums each output over C input planes (forward) and each input
     * gradient over K output planes; it wins while a tile's R rows of those planes and the
     * filter block stay in L1 (3x3 with 64 channels: 24 + 9 KiB). With 128 to 512 channels
     * of 3x3 it re-read them from L2 and lost to im2col by up to 2x (vgg16-64's deep layers,
     * dtnn bench --profile with --conv-algo auto and im2col). */
    const int direct_fits = fast && in.c * c->kh <= 192 && c->filters * c->kh <= 192;
    const int direct_kind = direct_fits ? be->conv_direct_supported(g) : 0;
    /* Stride 2 (ResNet's downsampling 3x3s): on the direct kernels over parity planes, the
     * input gradient as four passes over the output gradient (conv_direct.c). Through im2col
     * the forward copied the input 9 times and that copy took twice as long as the products;
     * im2col + col2im took three quarters of the input gradient: ResNet-20's 16 -> 32 layer
     * (16x16 out) backward 11.0-11.3 -> 8.2-10.7 ms. Below 16x16 outputs only the forward
     * is direct: a row of each plane is too short for the passes' per-call overhead. There
     * ResNet-20's 32 -> 64 layer (8x8 out) took 11.1-11.5 ms backward with the weight
     * gradient direct against im2col's 9.9-10.4, and 12.3-12.5 with the input gradient direct
     * against 10.2-11.1 (one-layer models, dtnn bench --profile, alternating). */
    const int stride2 = c->stride_h == 2 || c->stride_w == 2;
    const int direct = direct_kind == 2 && (!stride2 || g->P * g->Q >= 256);
    const int strided = direct_kind && stride2 && !direct;
    /* Winograd from 16 channels in and out: with 3 (an RGB input) the transforms cost more
     * than the products they save (vgg16-64's first layer, forward 18 ms direct, 28 ms
     * Winograd; dtnn bench --profile, batch 64, 1 thread). */
    const int winograd_tile = asked == CONV_AUTO ? be->conv_winograd_supported(g) : 0;
    const int winograd = DTNN_MIN(in.c, c->filters) >= 16 && winograd_tile;
    /* Winograd backward from 32 channels on. Below, the transforms (their cost per
     * multiply-add falls with the channel count) ate the gain: ResNet-20's 16-channel stage
     * took 14.7 ms a layer backward against the direct kernels' 14.0 (whose input gradient
     * shares its padded planes with the weight gradient), while its 32- and 64-channel stages
     * went from 14.8 and 15.5 to 11.2 and 11.7 (dtnn bench --profile, batch 64, 1 thread,
     * --conv-algo direct vs auto). */
    const int winograd_backward = winograd && DTNN_MIN(in.c, c->filters) >= 32;
    /* With F(4x4) tiles the 16-channel input gradient is on Winograd too and the weight
     * gradient stays direct: ResNet-20's 16-channel layer backward took 9.5-10.7 ms that way,
     * 11.1-11.6 all direct, 9.3-10.3 all Winograd (whose F(4x4) weight gradient was off by
     * 1.2e-3 on test_conv_paths' 128-channel case, where the test allows 2e-4 and F(2x2)
     * stays within it, and no faster at 32 channels: 7.8-10.0 against 8.7-9.8 ms) (dtnn
     * bench --profile, batch 64, 1 thread, alternating). */
    const int winograd_input_grad = winograd && !winograd_backward && winograd_tile == 4 && direct;
    /* A scratch per thread (slots) unless one image a thread already passes the workspace
     * limit (large images, many threads): then one, the team splitting every chunk. */
    for (;;) {
        l->workspace_bytes = 0;
        c->weight_grad_direct = 0;
        if (!winograd_backward && direct) {
            c->algo = c->algo_backward = CONV_DIRECT;
            l->workspace_bytes = plan_direct(c, l, be);
        } else if (!winograd_backward) {
            /* im2col with few filters per group: the products on gemm_tiles.c's register tiles,
             * not BLAS, whose kernels reach a third to a half of peak with M = 16 to 64 rows
             * (ResNet-20's stride-2 layers). */
            const int tiles = fast && c->filters / c->groups <= 64;
            plan_im2col(c, l, be, tiles);
            c->algo = c->algo_backward = tiles ? CONV_IM2COL_TILES : CONV_IM2COL;
            if (strided) {
                /* stride 2 below 16x16 outputs, or a padding whose input gradient the direct
                 * passes do not cover (then the weight gradient is direct from 16x16 on) */
                c->algo = CONV_DIRECT;
                c->weight_grad_direct = g->P * g->Q >= 256;
                l->workspace_bytes = DTNN_MAX(l->workspace_bytes, plan_direct(c, l, be));
            }
        }
        if (winograd) {
            c->algo = CONV_WINOGRAD;
            c->chunk_winograd = be->conv_winograd_chunk(g, l->max_batch, l->workspace_limit,
                                                        c->slots, 0);
            l->workspace_bytes =
                DTNN_MAX(l->workspace_bytes,
                         be->conv_winograd_workspace(g, c->chunk_winograd, c->slots, 0));
        }
        if (winograd_input_grad) {
            c->algo_backward = CONV_WINOGRAD;
            c->weight_grad_direct = 1;
        }
        if (winograd_backward) {
            c->algo_backward = CONV_WINOGRAD;
            c->chunk_weight_grad = be->conv_winograd_chunk(g, l->max_batch, l->workspace_limit,
                                                           c->slots, 1);
            l->workspace_bytes = DTNN_MAX(
                l->workspace_bytes,
                be->conv_winograd_workspace(g, c->chunk_weight_grad, c->slots, 1));
        }
        if (c->slots == 1 || l->workspace_bytes <= l->workspace_limit)
            break;
        c->slots = 1;
    }
    return DTNN_OK;
}

/* The im2col path's product with group gi's filters W_g [Kg, CRSg]: out [m, ld] = W_g b
 * (forward: b = the columns) or, with `trans`, W_g^T b (input gradient: b = dy), on
 * gemm_tiles.c's register tiles with the filters packed once a call (algo im2col-tiles) or on
 * BLAS. */
static void filter_product(const layer_ctx *ctx, const conv2d_cfg *c, int tiles, int trans,
                           int gi, const float *w, const float *b, int ld, float *out,
                           float *packs)
{
    const conv_geom *g = &c->g;
    const int Kg = g->K / g->groups, CRSg = g->C / g->groups * g->R * g->S;
    const int m = trans ? CRSg : Kg, k = trans ? Kg : CRSg;
    if (tiles)
        ctx->be->gemm_tiles(m, ld, k, b, ld, out, ld, packs + gi * c->pack_floats);
    else
        ctx->be->gemm(trans, 0, m, ld, k, 1.0f, w + (size_t)gi * Kg * CRSg, CRSg, b, ld, 0.0f,
                      out, ld);
}

static void conv2d_forward(layer *l, const layer_ctx *ctx)
{
    conv2d_cfg *c = l->cfg;
    const conv_geom *g = &c->g;
    const int PQ = g->P * g->Q, CRS = g->C * g->R * g->S, G = g->groups;
    const int Kg = g->K / G, CRSg = CRS / G;
    const float *w = l->p[0], *b = c->bias ? l->p[1] : NULL;
    const float *x = l->x[0];
    if (c->algo == CONV_DEPTHWISE) {
        ctx->be->dw_conv_forward(g, l->n, x, w, b, l->y);
        return;
    }
    if (c->algo == CONV_DIRECT) {
        ctx->be->conv_direct_forward(g, l->n, c->chunk_direct, c->slots, x, w, b, l->y,
                                     ctx->workspace);
        return;
    }
    if (c->algo == CONV_WINOGRAD) {
        ctx->be->conv_winograd_forward(g, l->n, c->chunk_winograd, c->slots, x, w, b,
                                       l->y, ctx->workspace);
        return;
    }
    if (c->algo == CONV_POINTWISE) {
        for (int i = 0; i < l->n; i++) {
            float *y = l->y + (size_t)i * g->K * PQ;
            ctx->be->gemm(0, 0, g->K, PQ, g->C, 1.0f, w, g->C, x + (size_t)i * g->C * PQ, PQ,
                          0.0f, y, PQ);
            for (int k = 0; b && k < g->K; k++)
                for (int j = 0; j < PQ; j++)
                    y[(size_t)k * PQ + j] += b[k];
        }
        return;
    }
    const int tiles = c->algo == CONV_IM2COL_TILES;
    float *packs = ctx->workspace;
    for (int gi = 0; tiles && gi < G; gi++)
        ctx->be->gemm_tiles_pack(0, Kg, CRSg, w + (size_t)gi * Kg * CRSg, CRSg,
                                 packs + gi * c->pack_floats);
    for (int n0 = 0; n0 < l->n; n0 += c->chunk) {
        int nb = DTNN_MIN(c->chunk, l->n - n0);
        int ld = nb * PQ;
        float *col = packs + G * c->pack_floats, *tmp = col + (size_t)CRS * ld;
        ctx->be->im2col(g, x + (size_t)n0 * g->C * g->H * g->W, nb, col, ld);
        for (int gi = 0; gi < G; gi++)
            filter_product(ctx, c, tiles, 0, gi, w, col + (size_t)gi * CRSg * ld, ld,
                           tmp + (size_t)gi * Kg * ld, packs);
        for (int i = 0; i < nb; i++) {
            float *y = l->y + (size_t)(n0 + i) * g->K * PQ;
            for (int k = 0; k < g->K; k++) {
                const float *src = tmp + (size_t)k * ld + i * PQ;
                float bk = b ? b[k] : 0.0f;
                float *dst = y + (size_t)k * PQ;
                for (int j = 0; j < PQ; j++)
                    dst[j] = src[j] + bk;
            }
        }
    }
}

static void conv2d_backward(layer *l, const layer_ctx *ctx)
{
    conv2d_cfg *c = l->cfg;
    const conv_geom *g = &c->g;
    const int PQ = g->P * g->Q, CRS = g->C * g->R * g->S, G = g->groups;
    const int Kg = g->K / G, CRSg = CRS / G;
    const size_t in_size = (size_t)g->C * g->H * g->W;
    const float *w = l->p[0];
    float *dw = l->g[0];
    const float *x = l->x[0];
    float *dx = l->dx[0];
    /* The bias gradient is the same per-channel sum of dy whatever the path. */
    if (c->bias)
        ctx->be->bias_grad(l->n, g->K, PQ, l->dy, l->g[1]);
    if (c->algo == CONV_DEPTHWISE) {
        ctx->be->dw_conv_backward_weight(g, l->n, x, l->dy, dw);
        if (dx)
            ctx->be->dw_conv_backward_data(g, l->n, l->dy, w, dx, l->dx_accumulate[0]);
        return;
    }
    if (c->algo_backward == CONV_WINOGRAD) {
        if (c->weight_grad_direct)
            ctx->be->conv_direct_backward(g, l->n, c->chunk_direct, c->slots, x, l->dy, w, dw,
                                          NULL, 0, ctx->workspace);
        ctx->be->conv_winograd_backward(g, l->n, c->chunk_winograd, c->slots,
                                        c->chunk_weight_grad, x, l->dy, w,
                                        c->weight_grad_direct ? NULL : dw, dx,
                                        l->dx_accumulate[0], ctx->workspace);
        return;
    }
    if (c->algo_backward == CONV_DIRECT) {
        ctx->be->conv_direct_backward(g, l->n, c->chunk_direct, c->slots, x, l->dy, w, dw, dx,
                                      l->dx_accumulate[0], ctx->workspace);
        return;
    }
    if (c->algo == CONV_POINTWISE) {
        for (int i = 0; i < l->n; i++) {
            const float *dy = l->dy + (size_t)i * g->K * PQ, *xi = x + (size_t)i * g->C * PQ;
            ctx->be->gemm(0, 1, g->K, g->C, PQ, 1.0f, dy, PQ, xi, PQ, 1.0f, dw, g->C);
            if (dx)
                ctx->be->gemm(1, 0, g->C, PQ, g->K, 1.0f, w, g->C, dy, PQ,
                              l->dx_accumulate[0] ? 1.0f : 0.0f, dx + (size_t)i * g->C * PQ, PQ);
        }
        return;
    }
    /* stride 2 with a direct forward: the weight gradient on the direct kernels too */
    const int direct_weights = c->algo == CONV_DIRECT && c->weight_grad_direct;
    if (direct_weights) {
        ctx->be->conv_direct_backward(g, l->n, c->chunk_direct, c->slots, x, l->dy, w, dw,
                                      NULL, 0, ctx->workspace);
        if (!dx)
            return;
    }
    const int tiles = c->algo_backward == CONV_IM2COL_TILES;
    float *packs = ctx->workspace;
    for (int gi = 0; tiles && dx && gi < G; gi++)
        ctx->be->gemm_tiles_pack(1, CRSg, Kg, w + (size_t)gi * Kg * CRSg, CRSg,
                                 packs + gi * c->pack_floats);
    for (int n0 = 0; n0 < l->n; n0 += c->chunk) {
        int nb = DTNN_MIN(c->chunk, l->n - n0);
        int ld = nb * PQ;
        float *col = packs + G * c->pack_floats, *tmp = col + (size_t)CRS * ld;
        /* dy [nb, K, PQ] -> tmp [K, nb * PQ] */
        for (int i = 0; i < nb; i++) {
            const float *dy = l->dy + (size_t)(n0 + i) * g->K * PQ;
            for (int k = 0; k < g->K; k++)
                memcpy(tmp + (size_t)k * ld + i * PQ, dy + (size_t)k * PQ, sizeof(float) * PQ);
        }
        if (!direct_weights)
            ctx->be->im2col(g, x + (size_t)n0 * in_size, nb, col, ld);
        for (int gi = 0; gi < G && !direct_weights; gi++) {
            const float *tg = tmp + (size_t)gi * Kg * ld, *cg = col + (size_t)gi * CRSg * ld;
            float *dwg = dw + (size_t)gi * Kg * CRSg;
            if (tiles)
                ctx->be->gemm_dots(Kg, CRSg, ld, tg, ld, cg, ld, dwg, CRSg);
            else
                ctx->be->gemm(0, 1, Kg, CRSg, ld, 1.0f, tg, ld, cg, ld, 1.0f, dwg, CRSg);
        }
        if (!dx)
            continue;
        for (int gi = 0; gi < G; gi++)
            filter_product(ctx, c, tiles, 1, gi, w, tmp + (size_t)gi * Kg * ld, ld,
                           col + (size_t)gi * CRSg * ld, packs);
        float *dxn = dx + (size_t)n0 * in_size;
        if (!l->dx_accumulate[0])
            memset(dxn, 0, sizeof(float) * in_size * nb);
        ctx->be->col2im(g, col, ld, nb, dxn);
    }
}

static const char *conv2d_method(const layer *l)
{
    static const char *const names[] = {"auto",      "im2col",    "direct",      "winograd",
                                        "depthwise", "pointwise", "im2col-tiles"};
    const conv2d_cfg *c = l->cfg;
    if (c->algo == CONV_DIRECT && c->algo_backward != CONV_DIRECT)
        return c->algo_backward == CONV_IM2COL_TILES ? "direct/im2col-tiles" : "direct/im2col";
    if (c->algo == CONV_WINOGRAD && c->algo_backward == CONV_WINOGRAD && c->weight_grad_direct)
        return "winograd/wino+direct";
    if (c->algo != CONV_WINOGRAD || c->algo_backward == CONV_WINOGRAD)
        return names[c->algo];
    return c->algo_backward == CONV_DIRECT         ? "winograd/direct"
           : c->algo_backward == CONV_IM2COL_TILES ? "winograd/im2col-tiles"
                                                   : "winograd/im2col";
}

static double conv2d_flops(const layer *l)
{
    const conv2d_cfg *c = l->cfg;
    const conv_geom *g = &c->g;
    return 2.0 * g->K * g->P * g->Q * (double)(g->C / g->groups) * g->R * g->S;
}

const layer_ops layer_conv2d = {
    .type = "conv2d",
    .summary = "2-D convolution (filters, kernel, stride, padding, dilation, groups, bias, "
               "algo=auto|direct|im2col)",
    .cfg_size = sizeof(conv2d_cfg),
    .min_inputs = 1,
    .max_inputs = 1,
    .defaults = conv2d_defaults,
    .set = conv2d_set,
    .infer = conv2d_infer,
    .forward = conv2d_forward,
    .backward = conv2d_backward,
    .flops = conv2d_flops,
    .method = conv2d_method,
};
