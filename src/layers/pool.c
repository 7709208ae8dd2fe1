/*
 * pool.c — max and average pooling layers as torch.nn.MaxPool2d / AvgPool2d (kernel, stride =
 * kernel by default, padding, floor mode), global average and max pooling (AdaptiveAvgPool2d(1),
 * AdaptiveMaxPool2d(1): one window over the whole input, no options) and
 * adaptive average pooling to a fixed output size (AdaptiveAvgPool2d((h, w)): what lets
 * torchvision's AlexNet and VGG take inputs of any size). The four share the geometry code; max
 * pooling (global too) saves the argmax of every output in aux.
 */
#include <string.h>

#include "layer.h"

typedef struct {
    int kind;       /* POOL_* */
    int out_h, out_w;   /* adaptive */
    int kh, kw, stride_h, stride_w, pad_h, pad_w, count_include_pad;
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
        if (c->kind == POOL_AVG && !strcmp(key, "count_include_pad"))
            return layer_opt_bool(key, value, &c->count_include_pad, err);
    }
    return dtnn_error_set(err, DTNN_ERR_ARG, "unknown option '%s' for this pooling layer%s", key,
                          c->kind == POOL_GLOBAL || c->kind == POOL_GLOBAL_MAX ?
                          " (it has none)" :
                          " (kernel, stride, padding)");
}

static dtnn_status pool_infer(layer *l, dtnn_error *err)
{
    pool_cfg *c = l->cfg;
    dtnn_shape in = l->in[0];
    pool_geom *g = &c->g;
    *g = (pool_geom){0};
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
        g->pad_h = c->pad_h;
        g->pad_w = c->pad_w;
        if (2 * c->pad_h > c->kh || 2 * c->pad_w > c->kw)
            return dtnn_error_set(err, DTNN_ERR_ARG, "padding %dx%d must be at most half the "
                                  "kernel %dx%d", c->pad_h, c->pad_w, c->kh, c->kw);
        int eh = in.h + 2 * g->pad_h - g->kh, ew = in.w + 2 * g->pad_w - g->kw;
        if (eh < 0 || ew < 0)
            return dtnn_error_set(err, DTNN_ERR_SHAPE, "kernel %dx%d does not fit the %dx%d "
                                  "input", g->kh, g->kw, in.h, in.w);
        g->P = eh / g->stride_h + 1;
        g->Q = ew / g->stride_w + 1;
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
                       .pad = {g->pad_h, g->pad_w}, .count_include_pad = g->count_include_pad,
                       .output_size = {c->out_h, c->out_w}};
}

#define POOL_LAYER(ident, type_name, kind_value, text)                                        \
    static void ident##_defaults(void *cfg)                                                   \
    {                                                                                         \
        pool_cfg *c = cfg;                                                                    \
        *c = (pool_cfg){0};                                                                   \
        c->kind = kind_value;                                                                 \
        c->count_include_pad = 1;                                                             \
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
    };

POOL_LAYER(maxpool, "maxpool", POOL_MAX, "max pooling (kernel, stride=kernel, padding)")
POOL_LAYER(avgpool, "avgpool", POOL_AVG,
           "average pooling (kernel, stride=kernel, padding, count_include_pad)")
POOL_LAYER(global_avgpool, "global_avgpool", POOL_GLOBAL, "mean over H x W -> C x 1 x 1")
POOL_LAYER(global_maxpool, "global_maxpool", POOL_GLOBAL_MAX, "max over H x W -> C x 1 x 1")
POOL_LAYER(adaptive_avgpool, "adaptive_avgpool", POOL_ADAPTIVE,
           "average pooling to a fixed output=HxW from any input size (AdaptiveAvgPool2d)")
