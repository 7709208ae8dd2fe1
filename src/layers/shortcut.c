/*
 * shortcut.c — the parameter-free "option A" shortcut of the CIFAR ResNets of He et al. 2016
 * (section 4.2): when a stage halves the resolution and widens the channels, the identity is
 * subsampled and zero-padded in the channel dimension. As the widely used PyTorch version:
 *
 *     y = F.pad(x[:, :, ::stride, ::stride], (0, 0, 0, 0, pad, K - C - pad))
 *
 * Options: filters (K >= C, required), stride (2), offset (the channel where the C input
 * channels land; default (K - C) / 2, i.e. pad = K/4 for the usual K = 2C). Output height is
 * ceil(H / stride), as the slice ::stride gives. Backward scatters dy of the kept positions back
 * into dx; every other input position gets zero.
 */
#include <string.h>

#include "layer.h"

typedef struct {
    int filters, stride, offset;    /* offset -1: centre the input channels */
    int C, H, W, P, Q, at;          /* derived: input, output size, channel offset used */
} shortcut_cfg;

static void shortcut_defaults(void *cfg)
{
    shortcut_cfg *c = cfg;
    c->filters = 0;
    c->stride = 2;
    c->offset = -1;
}

static dtnn_status shortcut_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    shortcut_cfg *c = cfg;
    if (!strcmp(key, "filters") || !strcmp(key, "out_channels"))
        return layer_opt_int(key, value, 1, 1 << 20, &c->filters, err);
    if (!strcmp(key, "stride"))
        return layer_opt_int(key, value, 1, 1 << 20, &c->stride, err);
    if (!strcmp(key, "offset"))
        return layer_opt_int(key, value, 0, 1 << 20, &c->offset, err);
    return dtnn_error_set(err, DTNN_ERR_ARG,
                          "unknown option '%s' for shortcut_a (filters, stride, offset)", key);
}

static dtnn_status shortcut_infer(layer *l, dtnn_error *err)
{
    shortcut_cfg *c = l->cfg;
    dtnn_shape in = l->in[0];
    if (c->filters <= 0)
        return dtnn_error_set(err, DTNN_ERR_ARG, "shortcut_a needs filters= (output channels)");
    if (c->filters < in.c)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "shortcut_a filters=%d is fewer than the %d "
                              "channels of its %dx%dx%d input (option A only pads channels)",
                              c->filters, in.c, in.c, in.h, in.w);
    c->at = c->offset >= 0 ? c->offset : (c->filters - in.c) / 2;
    if (c->at + in.c > c->filters)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "shortcut_a offset=%d puts the %d input "
                              "channels past filters=%d (offset must be at most %d)", c->at,
                              in.c, c->filters, c->filters - in.c);
    c->C = in.c;
    c->H = in.h;
    c->W = in.w;
    c->P = (in.h - 1) / c->stride + 1;
    c->Q = (in.w - 1) / c->stride + 1;
    l->out = (dtnn_shape){c->filters, c->P, c->Q};
    return DTNN_OK;
}

static shortcut_geom geometry(const shortcut_cfg *c)
{
    return (shortcut_geom){c->C, c->H, c->W, c->filters, c->P, c->Q, c->stride, c->at};
}

static void shortcut_forward(layer *l, const layer_ctx *ctx)
{
    const shortcut_geom g = geometry(l->cfg);
    be_run(ctx->be, shortcut_forward, &g, l->n, l->x[0], l->y);
}

static void shortcut_backward(layer *l, const layer_ctx *ctx)
{
    const shortcut_geom g = geometry(l->cfg);
    if (l->dx[0])
        be_run(ctx->be, shortcut_backward, &g, l->n, l->dy, l->dx[0], l->dx_accumulate[0]);
}

static void shortcut_describe(const layer *l, layer_attrs *a)
{
    const shortcut_cfg *c = l->cfg;
    *a = (layer_attrs){.stride = {c->stride, c->stride}, .outputs = c->filters,
                       .offset = c->at};
}

const layer_ops layer_shortcut_a = {
    .type = "shortcut_a",
    .summary = "ResNet option-A shortcut: subsample by stride, zero-pad channels (filters, "
               "stride=2, offset)",
    .cfg_size = sizeof(shortcut_cfg),
    .min_inputs = 1,
    .max_inputs = 1,
    .defaults = shortcut_defaults,
    .set = shortcut_set,
    .infer = shortcut_infer,
    .forward = shortcut_forward,
    .backward = shortcut_backward,
    .describe = shortcut_describe,
};
