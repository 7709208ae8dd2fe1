/*
 * linear.c — fully connected layer as torch.nn.Linear: y = x W^T + b, weight [out, in].
 * The input must be a flat feature vector per sample (c x 1 x 1): put a flatten layer before it,
 * so that a model never reinterprets a feature map silently. With axis = last it applies to
 * each row of W values of a C x H x W input instead (torch.nn.Linear on [N, ..., W]: a
 * transformer's projections and MLP), the output C x H x outputs.
 */
#include <string.h>

#include "layer.h"

typedef struct {
    int outputs, bias, in_features;
    int last;                   /* axis = last: over each row of W values */
    int rows;                   /* rows a sample (1 unless last) */
    linear_desc d;              /* set in infer */
} linear_cfg;

static void linear_defaults(void *cfg)
{
    linear_cfg *c = cfg;
    c->outputs = 0;
    c->bias = 1;
}

static dtnn_status linear_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    linear_cfg *c = cfg;
    if (!strcmp(key, "outputs") || !strcmp(key, "out_features") || !strcmp(key, "units"))
        return layer_opt_int(key, value, 1, 1 << 24, &c->outputs, err);
    if (!strcmp(key, "bias"))
        return layer_opt_bool(key, value, &c->bias, err);
    if (!strcmp(key, "axis"))
        return layer_opt_last_axis("linear", value, "features", &c->last, err);
    return dtnn_error_set(err, DTNN_ERR_ARG,
                          "unknown option '%s' for linear (outputs, bias, axis)", key);
}

static dtnn_status linear_infer(layer *l, dtnn_error *err)
{
    linear_cfg *c = l->cfg;
    dtnn_shape in = l->in[0];
    if (c->outputs <= 0)
        return dtnn_error_set(err, DTNN_ERR_ARG, "linear needs outputs=");
    if (!c->last && (in.h != 1 || in.w != 1))
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "input is %dx%dx%d, not a flat vector: add a "
                              "flatten layer before it (or axis = last, over each row of W)",
                              in.c, in.h, in.w);
    const int features = c->last ? in.w : in.c;
    c->in_features = features;
    c->rows = c->last ? in.c * in.h : 1;
    l->out = c->last ? (dtnn_shape){in.c, in.h, c->outputs} : (dtnn_shape){c->outputs, 1, 1};
    int64_t wd[2] = {c->outputs, features};
    layer_declare(l, "weight", DTNN_TENSOR_PARAM, DTNN_F32, 2, wd, INIT_WEIGHT, features,
                  c->outputs);
    if (c->bias) {
        int64_t bd[1] = {c->outputs};
        layer_declare(l, "bias", DTNN_TENSOR_PARAM, DTNN_F32, 1, bd, INIT_BIAS, features,
                      c->outputs);
    }
    dtnn_status st = layer_rows_fit(l, (size_t)c->rows, err);
    if (st)
        return st;
    c->d = (linear_desc){c->outputs, features, l->build->precision};
    l->workspace_bytes = l->be->op->linear_workspace(l->be, &c->d,
                                                     l->build->max_batch * c->rows);
    return DTNN_OK;
}

static void linear_forward(layer *l, const layer_ctx *ctx)
{
    linear_cfg *c = l->cfg;
    be_run(ctx->be, linear_forward, &c->d, l->n * c->rows, l->x[0], l->p[0],
           c->bias ? l->p[1] : NULL, l->y, ctx->workspace);
}

static void linear_backward(layer *l, const layer_ctx *ctx)
{
    linear_cfg *c = l->cfg;
    be_run(ctx->be, linear_backward, &c->d, l->n * c->rows, l->x[0], l->dy, l->p[0], l->g[0],
           c->bias ? l->g[1] : NULL, l->dx[0], l->dx_accumulate[0], ctx->workspace);
}

static double linear_flops(const layer *l)
{
    const linear_cfg *c = l->cfg;
    return 2.0 * c->outputs * (double)c->in_features * c->rows;
}

static void linear_describe(const layer *l, layer_attrs *a)
{
    const linear_cfg *c = l->cfg;
    *a = (layer_attrs){.outputs = c->outputs, .bias = c->bias, .last_axis = c->last};
}

const layer_ops layer_linear = {
    .type = "linear",
    .summary = "fully connected layer (outputs, bias)",
    .cfg_size = sizeof(linear_cfg),
    .min_inputs = 1,
    .max_inputs = 1,
    .defaults = linear_defaults,
    .set = linear_set,
    .infer = linear_infer,
    .forward = linear_forward,
    .backward = linear_backward,
    .flops = linear_flops,
    .describe = linear_describe,
};
