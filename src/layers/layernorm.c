/*
 * layernorm.c — layer normalisation over the channels of each position: ConvNeXt's
 * LayerNorm2d (torchvision: permute to channels-last, F.layer_norm over C, permute back), and
 * nn.LayerNorm(F) on [N, F] features (F x 1 x 1). Tensors weight and bias [C] (ones and
 * zeros, as PyTorch) unless affine = false (then none); eps = 1e-5 (ConvNeXt's 1e-6 is an option). The
 * same in training and evaluation: no running statistics. Each forward saves the positions'
 * mean and 1 / sqrt(var + eps) for backward. With axis = last it normalises each row of W
 * values of a C x H x W input instead (nn.LayerNorm(W) on [N, ..., W]: a transformer's norms),
 * weight and bias [W]. Options: eps, affine, axis = channels | last.
 */
#include <string.h>

#include "layer.h"

typedef struct {
    float eps;
    int affine;
    int last;           /* axis = last: each row of W values */
    int rows;           /* the backend's samples per sample (C x H with last, else 1) */
    layernorm_geom g;
} layernorm_cfg;

static void layernorm_defaults(void *cfg)
{
    layernorm_cfg *c = cfg;
    c->eps = 1e-5f;
    c->affine = 1;
}

static dtnn_status layernorm_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    layernorm_cfg *c = cfg;
    if (!strcmp(key, "eps"))
        return layer_opt_float(key, value, 1e-12, 1.0, &c->eps, err);
    if (!strcmp(key, "affine"))
        return layer_opt_bool(key, value, &c->affine, err);
    if (!strcmp(key, "axis"))
        return layer_opt_last_axis("layernorm", value, "channels", &c->last, err);
    return dtnn_error_set(err, DTNN_ERR_ARG, "unknown option '%s' for layernorm (eps, affine, "
                          "axis)", key);
}

static dtnn_status layernorm_infer(layer *l, dtnn_error *err)
{
    layernorm_cfg *c = l->cfg;
    const dtnn_shape x = l->in[0];
    const int features = c->last ? x.w : x.c;
    const int64_t cd[1] = {features};
    if (c->affine) {
        layer_declare(l, "weight", DTNN_TENSOR_PARAM, DTNN_F32, 1, cd, INIT_ONES, features,
                      features);
        layer_declare(l, "bias", DTNN_TENSOR_PARAM, DTNN_F32, 1, cd, INIT_ZEROS, features,
                      features);
    }
    /* over rows of W: the backend's [n C H, W, 1] */
    c->rows = c->last ? x.c * x.h : 1;
    dtnn_status st = layer_rows_fit(l, (size_t)c->rows, err);
    if (st)
        return st;
    c->g = c->last ? (layernorm_geom){x.w, 1, c->eps} : (layernorm_geom){x.c, x.h * x.w, c->eps};
    l->out = x;
    l->aux_bytes = 2 * sizeof(float) * (size_t)c->rows * c->g.HW;
    return DTNN_OK;
}

/* The saved statistics: means of the positions of max_batch samples, then their rstd. */
static float *saved(const layer *l, int which)
{
    const layernorm_cfg *c = l->cfg;
    return (float *)l->aux + (size_t)which * l->build->max_batch * c->rows * c->g.HW;
}

static void layernorm_forward(layer *l, const layer_ctx *ctx)
{
    const layernorm_cfg *c = l->cfg;
    const float *gamma = c->affine ? l->p[0] : NULL, *beta = c->affine ? l->p[1] : NULL;
    be_run(ctx->be, layernorm_forward, &c->g, l->n * c->rows, l->x[0], gamma, beta, l->y,
           saved(l, 0), saved(l, 1));
}

static void layernorm_backward(layer *l, const layer_ctx *ctx)
{
    const layernorm_cfg *c = l->cfg;
    float *dgamma = c->affine ? l->g[0] : NULL, *dbeta = c->affine ? l->g[1] : NULL;
    if (!l->dx[0] && !dgamma && !dbeta)
        return;
    be_run(ctx->be, layernorm_backward, &c->g, l->n * c->rows, l->x[0],
           c->affine ? (const float *)l->p[0] : NULL, saved(l, 0), saved(l, 1), l->dy, l->dx[0],
           l->dx_accumulate[0], dgamma, dbeta);
}

static void layernorm_describe(const layer *l, layer_attrs *a)
{
    const layernorm_cfg *c = l->cfg;
    a->eps = c->eps;
    a->bias = c->affine;
    a->last_axis = c->last;
}

static double layernorm_flops(const layer *l) { return 8.0 * (double)shape_size(l->in[0]); }

const layer_ops layer_layernorm = {
    .type = "layernorm",
    .summary = "layer normalisation over the channels of each position (LayerNorm2d, "
               "LayerNorm of features)",
    .cfg_size = sizeof(layernorm_cfg),
    .min_inputs = 1,
    .max_inputs = 1,
    .defaults = layernorm_defaults,
    .set = layernorm_set,
    .infer = layernorm_infer,
    .forward = layernorm_forward,
    .backward = layernorm_backward,
    .flops = layernorm_flops,
    .describe = layernorm_describe,
    .normalizes = 1,
};
