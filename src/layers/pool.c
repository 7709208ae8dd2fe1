/*
 * pool.c — max and average pooling layers as torch.nn.MaxPool2d / AvgPool2d, global average and
 * max pooling (AdaptiveAvgPool2d(1), AdaptiveMaxPool2d(1): one window over the whole input, no
 * options) and adaptive average pooling to a fixed output size (AdaptiveAvgPool2d((h, w)):
 * what lets torchvision's AlexNet and VGG take inputs of any size). The five share the geometry
 * code; max pooling (global too) saves the argmax of every output in aux.
 *
 * Options of maxpool and avgpool (ONNX MaxPool / AveragePool's semantics too):
 *   kernel=KxL  stride=SxT (default: the kernel)  padding=PxQ (all four sides)
 *   pad_top= pad_bottom= pad_left= pad_right= or pads=top,left,bottom,right (ONNX's order):
 *       one side each, over padding's value; each at most kernel - 1 (ONNX's bound; PyTorch
 *       allows only kernel / 2, which any PyTorch model satisfies)
 *   ceil_mode=1   output size rounded up, as PyTorch: the last window must start inside the
 *                 input or the top / left padding, else it is dropped
 *   dilation=DxE  (maxpool only) taps D rows and E columns apart, as MaxPool2d's
 *   count_include_pad=0|1 (avgpool only, default 1 as PyTorch): whether padded positions
 *                 count in the divisor; with ceil_mode, a window reaching past the bottom /
 *                 right padding counts only up to it (PyTorch's rule)
 * Output size (rows; columns alike): (H + top + bottom - ((kh - 1) * dil + 1)) / stride + 1,
 * rounded down, or up with ceil_mode.
 */
#include <string.h>

#include "layer.h"

typedef struct {
    int kind;       /* POOL_* */
    int out_h, out_w;   /* adaptive */
    int kh, kw, stride_h, stride_w, pad_h, pad_w, count_include_pad;
    int side[4];        /* pad_top, pad_left, pad_bottom, pad_right; -1: padding's */
    int ceil_mode, dil_h, dil_w;
    pool_geom g;
} pool_cfg;

enum { POOL_MAX = 0, POOL_AVG, POOL_GLOBAL, POOL_ADAPTIVE, POOL_GLOBAL_MAX };

static int pool_is_max(int kind) { return kind == POOL_MAX || kind == POOL_GLOBAL_MAX; }

static dtnn_status pool_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    pool_cfg *c = cfg;
    if (c->kind == POOL_ADAPTIVE) {
        if (!strcmp(key, "output") || !strcmp(key, "output_size"))
            return layer_opt_pair(key, value, 1, &c->out_h, &c->out_w, err);
        return dtnn_error_set(err, DTNN_ERR_ARG, "unknown option '%s' for adaptive_avgpool "
                              "(output)", key);
    }
    if (c->kind != POOL_GLOBAL && c->kind != POOL_GLOBAL_MAX) {
        if (!strcmp(key, "kernel") || !strcmp(key, "kernel_size"))
            return layer_opt_pair(key, value, 1, &c->kh, &c->kw, err);
        if (!strcmp(key, "stride"))
            return layer_opt_pair(key, value, 1, &c->stride_h, &c->stride_w, err);
        if (!strcmp(key, "padding"))
            return layer_opt_pair(key, value, 0, &c->pad_h, &c->pad_w, err);
        dtnn_status st;
        if (layer_opt_pad_sides(key, value, c->side, &st, err))
            return st;
        if (!strcmp(key, "ceil_mode"))
            return layer_opt_bool(key, value, &c->ceil_mode, err);
        if (c->kind == POOL_MAX && !strcmp(key, "dilation"))
            return layer_opt_pair(key, value, 1, &c->dil_h, &c->dil_w, err);
        if (c->kind == POOL_AVG && !strcmp(key, "count_include_pad"))
            return layer_opt_bool(key, value, &c->count_include_pad, err);
    }
    return dtnn_error_set(err, DTNN_ERR_ARG, "unknown option '%s' for this pooling layer%s", key,
                          c->kind == POOL_GLOBAL || c->kind == POOL_GLOBAL_MAX ?
                          " (it has none)" :
                          c->kind == POOL_MAX ? " (kernel, stride, padding, pad_top, "
                          "pad_bottom, pad_left, pad_right, pads, ceil_mode, dilation)" :
                          " (kernel, stride, padding, pad_top, pad_bottom, pad_left, pad_right, "
                          "pads, ceil_mode, count_include_pad)");
}

static dtnn_status pool_infer(layer *l, dtnn_error *err)
{
    pool_cfg *c = l->cfg;
    dtnn_shape in = l->in[0];
    pool_geom *g = &c->g;
    *g = (pool_geom){0};
    g->dil_h = g->dil_w = 1;
    g->C = in.c;
    g->H = in.h;
    g->W = in.w;
    if (c->kind == POOL_GLOBAL || c->kind == POOL_GLOBAL_MAX) {
        g->kh = in.h;
        g->kw = in.w;
        g->stride_h = g->stride_w = 1;
        g->P = g->Q = 1;
    } else if (c->kind == POOL_ADAPTIVE) {
        if (c->out_h <= 0)
            return dtnn_error_set(err, DTNN_ERR_ARG, "adaptive_avgpool needs output=HxW");
        g->adaptive = 1;
        g->P = c->out_h;
        g->Q = c->out_w;
        /* The largest window, for the FLOP count. */
        g->kh = (in.h + g->P - 1) / g->P + 1;
        g->kw = (in.w + g->Q - 1) / g->Q + 1;
    } else {
        if (c->kh <= 0)
            return dtnn_error_set(err, DTNN_ERR_ARG, "pooling needs kernel=");
        g->kh = c->kh;
        g->kw = c->kw;
        g->stride_h = c->stride_h > 0 ? c->stride_h : c->kh;
        g->stride_w = c->stride_w > 0 ? c->stride_w : c->kw;
        g->dil_h = c->dil_h;
        g->dil_w = c->dil_w;
        const int pads[4] = {c->side[0] >= 0 ? c->side[0] : c->pad_h,
                             c->side[1] >= 0 ? c->side[1] : c->pad_w,
                             c->side[2] >= 0 ? c->side[2] : c->pad_h,
                             c->side[3] >= 0 ? c->side[3] : c->pad_w};
        g->pad_h = pads[0];
        g->pad_w = pads[1];
        g->pad_b = pads[2];
        g->pad_r = pads[3];
        if (pads[0] >= c->kh || pads[2] >= c->kh || pads[1] >= c->kw || pads[3] >= c->kw)
            return dtnn_error_set(err, DTNN_ERR_ARG, "padding top %d, left %d, bottom %d, right "
                                  "%d: each must be below the kernel %dx%d", pads[0], pads[1],
                                  pads[2], pads[3], c->kh, c->kw);
        const int span_h = (g->kh - 1) * g->dil_h + 1, span_w = (g->kw - 1) * g->dil_w + 1;
        const int top_h = in.h + pads[0], top_w = in.w + pads[1];
        int eh = top_h + pads[2] - span_h, ew = top_w + pads[3] - span_w;
        if (eh < 0 || ew < 0)
            return dtnn_error_set(err, DTNN_ERR_SHAPE, "kernel %dx%d (dilation %dx%d) does not "
                                  "fit the %dx%d input with its padding", g->kh, g->kw,
                                  g->dil_h, g->dil_w, in.h, in.w);
        const int up_h = c->ceil_mode ? g->stride_h - 1 : 0;
        const int up_w = c->ceil_mode ? g->stride_w - 1 : 0;
        g->P = (eh + up_h) / g->stride_h + 1;
        g->Q = (ew + up_w) / g->stride_w + 1;
        /* PyTorch's ceil-mode rule: a last window that would start in the bottom / right
         * padding is dropped. */
        if (c->ceil_mode && (g->P - 1) * g->stride_h >= top_h)
            g->P--;
        if (c->ceil_mode && (g->Q - 1) * g->stride_w >= top_w)
            g->Q--;
    }
    g->count_include_pad = c->count_include_pad;
    l->out = (dtnn_shape){in.c, g->P, g->Q};
    l->aux_bytes = pool_is_max(c->kind) ? sizeof(int32_t) * shape_size(l->out) : 0;
    return DTNN_OK;
}

static void pool_forward(layer *l, const layer_ctx *ctx)
{
    pool_cfg *c = l->cfg;
    if (pool_is_max(c->kind))
        be_run(ctx->be, maxpool_forward, &c->g, l->n, l->x[0], l->y, l->aux);
    else
        be_run(ctx->be, avgpool_forward, &c->g, l->n, l->x[0], l->y);
}

static void pool_backward(layer *l, const layer_ctx *ctx)
{
    pool_cfg *c = l->cfg;
    if (!l->dx[0])
        return;
    if (pool_is_max(c->kind))
        be_run(ctx->be, maxpool_backward, &c->g, l->n, l->dy, l->aux, l->dx[0],
               l->dx_accumulate[0]);
    else
        be_run(ctx->be, avgpool_backward, &c->g, l->n, l->dy, l->dx[0], l->dx_accumulate[0]);
}

static double pool_flops(const layer *l)
{
    const pool_cfg *c = l->cfg;
    return (double)shape_size(l->out) * c->g.kh * c->g.kw;
}

/* The geometry infer() resolved: a global pool is one window over the whole input. */
static void pool_describe(const layer *l, layer_attrs *a)
{
    const pool_cfg *c = l->cfg;
    const pool_geom *g = &c->g;
    *a = (layer_attrs){.kernel = {g->kh, g->kw}, .stride = {g->stride_h, g->stride_w},
                       .pad = {g->pad_h, g->pad_w},
                       .pad_extra = {g->pad_b - g->pad_h, g->pad_r - g->pad_w},
                       .dilation = {g->dil_h, g->dil_w}, .ceil_mode = c->ceil_mode,
                       .count_include_pad = g->count_include_pad,
                       .output_size = {c->out_h, c->out_w}};
}

/* Global average pooling, or adaptive average pooling to 1 x 1: each plane's mean. */
static int pool_plane_mean(const layer *l)
{
    const pool_cfg *c = l->cfg;
    return c->kind == POOL_GLOBAL || (c->kind == POOL_ADAPTIVE && l->out.h == 1 && l->out.w == 1);
}

#define POOL_LAYER(ident, type_name, kind_value, text)                                        \
    static void ident##_defaults(void *cfg)                                                   \
    {                                                                                         \
        pool_cfg *c = cfg;                                                                    \
        *c = (pool_cfg){0};                                                                   \
        c->kind = kind_value;                                                                 \
        c->count_include_pad = 1;                                                             \
        c->dil_h = c->dil_w = 1;                                                              \
        c->side[0] = c->side[1] = c->side[2] = c->side[3] = -1;                               \
    }                                                                                         \
    const layer_ops layer_##ident = {                                                         \
        .type = type_name,                                                                    \
        .summary = text,                                                                      \
        .cfg_size = sizeof(pool_cfg),                                                         \
        .min_inputs = 1,                                                                      \
        .max_inputs = 1,                                                                      \
        .defaults = ident##_defaults,                                                         \
        .set = pool_set,                                                                      \
        .infer = pool_infer,                                                                  \
        .forward = pool_forward,                                                              \
        .backward = pool_backward,                                                            \
        .flops = pool_flops,                                                                  \
        .describe = pool_describe,                                                            \
        .plane_mean = pool_plane_mean,                                                        \
    };

POOL_LAYER(maxpool, "maxpool", POOL_MAX, "max pooling (kernel, stride=kernel, padding)")
POOL_LAYER(avgpool, "avgpool", POOL_AVG,
           "average pooling (kernel, stride=kernel, padding, count_include_pad)")
POOL_LAYER(global_avgpool, "global_avgpool", POOL_GLOBAL, "mean over H x W -> C x 1 x 1")
POOL_LAYER(global_maxpool, "global_maxpool", POOL_GLOBAL_MAX, "max over H x W -> C x 1 x 1")
POOL_LAYER(adaptive_avgpool, "adaptive_avgpool", POOL_ADAPTIVE,
           "average pooling to a fixed output=HxW from any input size (AdaptiveAvgPool2d)")
