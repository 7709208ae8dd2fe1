/*
 * pad.c — constant padding of each sample, torch.nn.functional.pad(x, (left, right, top,
 * bottom, front, back), value=v) and ONNX Pad with mode "constant": rows on top and bottom,
 * columns left and right, and optionally channels in front and at the back, all set to one
 * fill value. Options: pad_top, pad_bottom, pad_left, pad_right (or pads = t,l,b,r as the
 * convolutions), pad_front, pad_back, value (0). Backward crops the gradient back to the
 * input, since the padded positions do not depend on it. Zero padding right before a
 * convolution is better written as the convolution's own padding (no extra pass); this layer
 * is for the rest: another fill, or padding before a pool or an activation. Cropping and the
 * reflect / edge modes are not supported.
 */
#include <string.h>

#include "layer.h"

typedef struct {
    int side[4];            /* top, left, bottom, right */
    int front, back;
    float value;
    pad_geom g;
} pad_cfg;

static dtnn_status pad_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    pad_cfg *c = cfg;
    dtnn_status st;
    if (layer_opt_pad_sides(key, value, c->side, &st, err))
        return st;
    if (!strcmp(key, "pad_front"))
        return layer_opt_int(key, value, 0, 1 << 20, &c->front, err);
    if (!strcmp(key, "pad_back"))
        return layer_opt_int(key, value, 0, 1 << 20, &c->back, err);
    if (!strcmp(key, "value"))
        return layer_opt_float(key, value, -1e30, 1e30, &c->value, err);
    return dtnn_error_set(err, DTNN_ERR_ARG, "unknown option '%s' for pad (pad_top, pad_bottom, "
                          "pad_left, pad_right, pads, pad_front, pad_back, value)", key);
}

static dtnn_status pad_infer(layer *l, dtnn_error *err)
{
    pad_cfg *c = l->cfg;
    const dtnn_shape in = l->in[0];
    c->g = (pad_geom){.C = in.c, .H = in.h, .W = in.w, .top = c->side[0], .left = c->side[1],
                      .bottom = c->side[2], .right = c->side[3], .front = c->front,
                      .back = c->back, .value = c->value};
    const long long K = (long long)c->front + in.c + c->back,
                    P = (long long)c->side[0] + in.h + c->side[2],
                    Q = (long long)c->side[1] + in.w + c->side[3];
    if (K * P * Q > (1LL << 31))
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "pad: the %lldx%lldx%lld output of the "
                              "%dx%dx%d input is too large", K, P, Q, in.c, in.h, in.w);
    l->out = (dtnn_shape){(int)K, (int)P, (int)Q};
    return DTNN_OK;
}

static void pad_forward(layer *l, const layer_ctx *ctx)
{
    pad_cfg *c = l->cfg;
    be_run(ctx->be, pad_forward, &c->g, l->n, l->x[0], l->y);
}

static void pad_backward(layer *l, const layer_ctx *ctx)
{
    pad_cfg *c = l->cfg;
    if (l->dx[0])
        be_run(ctx->be, pad_backward, &c->g, l->n, l->dy, l->dx[0], l->dx_accumulate[0]);
}

static void pad_describe(const layer *l, layer_attrs *a)
{
    const pad_cfg *c = l->cfg;
    *a = (layer_attrs){.pad_sides = {c->side[0], c->side[1], c->side[2], c->side[3], c->front,
                                     c->back},
                       .pad_value = c->value};
}

const layer_ops layer_pad = {
    .type = "pad",
    .summary = "constant padding of rows, columns and channels (pad_top, pad_bottom, pad_left, "
               "pad_right, pad_front, pad_back, value)",
    .cfg_size = sizeof(pad_cfg),
    .min_inputs = 1,
    .max_inputs = 1,
    .set = pad_set,
    .infer = pad_infer,
    .forward = pad_forward,
    .backward = pad_backward,
    .describe = pad_describe,
};
