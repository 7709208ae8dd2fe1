/*
 * upsample.c — nearest or bilinear upsampling of each plane by integer factors, as
 * torch.nn.functional.interpolate(x, scale_factor=s, mode=...) and nn.Upsample (HRNet's and
 * every feature pyramid's, U-Net's decoder) and ONNX Resize / Upsample with integer scales.
 * Options: scale = S or SHxSW (2), mode = nearest | bilinear (nearest), align_corners =
 * false | true (bilinear only; PyTorch's default false). Nearest takes input d / s: PyTorch's
 * floor(d * float(1 / s)) is the same for every factor up to 64 but 41, 47, 55 and 61, whose
 * float reciprocal rounds down.
 */
#include <string.h>

#include "layer.h"

typedef struct {
    int sh, sw, bilinear, align_corners, align_given;
    upsample_geom g;
} upsample_cfg;

static void upsample_defaults(void *cfg)
{
    upsample_cfg *c = cfg;
    c->sh = c->sw = 2;
}

static dtnn_status upsample_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    upsample_cfg *c = cfg;
    if (!strcmp(key, "scale")) {
        dtnn_status st = layer_opt_pair(key, value, 1, &c->sh, &c->sw, err);
        if (!st && (c->sh > 64 || c->sw > 64))
            return dtnn_error_set(err, DTNN_ERR_ARG, "scale = %s: factors of 1 to 64", value);
        return st;
    }
    if (!strcmp(key, "mode")) {
        c->bilinear = !strcmp(value, "bilinear") ? 1 : !strcmp(value, "nearest") ? 0 : -1;
        if (c->bilinear >= 0)
            return DTNN_OK;
        return dtnn_error_set(err, DTNN_ERR_ARG, "mode = %s: nearest or bilinear", value);
    }
    if (!strcmp(key, "align_corners")) {
        c->align_given = 1;
        return layer_opt_bool(key, value, &c->align_corners, err);
    }
    return dtnn_error_set(err, DTNN_ERR_ARG, "unknown option '%s' for upsample (scale, mode, "
                          "align_corners)", key);
}

static dtnn_status upsample_infer(layer *l, dtnn_error *err)
{
    upsample_cfg *c = l->cfg;
    const dtnn_shape x = l->in[0];
    if (c->align_given && !c->bilinear)
        return dtnn_error_set(err, DTNN_ERR_ARG, "align_corners applies to mode = bilinear "
                              "only (nearest has no corners to align, as in PyTorch)");
    if ((int64_t)x.h * c->sh > 1 << 20 || (int64_t)x.w * c->sw > 1 << 20)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "upsampling %dx%d by %dx%d is too large",
                              x.h, x.w, c->sh, c->sw);
    c->g = (upsample_geom){x.c, x.h, x.w, c->sh, c->sw, c->bilinear, c->align_corners};
    l->out = (dtnn_shape){x.c, x.h * c->sh, x.w * c->sw};
    return DTNN_OK;
}

static void upsample_forward(layer *l, const layer_ctx *ctx)
{
    const upsample_cfg *c = l->cfg;
    be_run(ctx->be, upsample_forward, &c->g, l->n, l->x[0], l->y);
}

static void upsample_backward(layer *l, const layer_ctx *ctx)
{
    const upsample_cfg *c = l->cfg;
    if (l->dx[0])
        be_run(ctx->be, upsample_backward, &c->g, l->n, l->dy, l->dx[0], l->dx_accumulate[0]);
}

static void upsample_describe(const layer *l, layer_attrs *a)
{
    const upsample_cfg *c = l->cfg;
    a->stride[0] = c->sh;
    a->stride[1] = c->sw;
    a->upsample_bilinear = c->bilinear;
    a->upsample_align_corners = c->align_corners;
}

static double upsample_flops(const layer *l)
{
    const upsample_cfg *c = l->cfg;
    return (c->bilinear ? 7.0 : 0.0) * (double)shape_size(l->out);
}

const layer_ops layer_upsample = {
    .type = "upsample",
    .summary = "nearest or bilinear upsampling by integer factors (interpolate, Resize)",
    .cfg_size = sizeof(upsample_cfg),
    .min_inputs = 1,
    .max_inputs = 1,
    .defaults = upsample_defaults,
    .set = upsample_set,
    .infer = upsample_infer,
    .forward = upsample_forward,
    .backward = upsample_backward,
    .flops = upsample_flops,
    .describe = upsample_describe,
};
