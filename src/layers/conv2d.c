/*
 * conv2d.c — 2-D convolution as torch.nn.Conv2d: kernel, stride, padding, dilation, groups,
 * optional bias. Weight [K, C/groups, R, S], bias [K]. Asymmetric padding as ONNX Conv's pads:
 * pad_top= pad_bottom= pad_left= pad_right=, each over padding's value, or
 * pads=top,left,bottom,right (ONNX's order); output rows (H + top + bottom - dilated kernel) /
 * stride + 1. The CPU computes such a convolution on its depthwise or im2col path.
 * weight_dims = 2 declares a 1x1 convolution's weight [K, C], as nn.Linear's: ConvNeXt's
 * Linears over the channels of each position, with torchvision's state_dict shapes.
 *
 * How it is computed is the backend's choice, made once per geometry at build (conv_plan: on the
 * CPU Winograd, direct, depthwise, pointwise or im2col, backend/cpu/cpu_conv.c); algo= narrows the
 * choice (auto, direct: all but Winograd, im2col: the reference path every faster one is tested
 * against, tests/test_conv_paths.c). --profile shows the method the plan chose.
 */
#include <string.h>

#include "layer.h"

typedef struct {
    int filters, kh, kw, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups, bias;
    int side[4];                /* pad_top, pad_left, pad_bottom, pad_right; -1: padding's */
    dtnn_conv_algo algo_asked;  /* the option algo= */
    int linear_weight;          /* weight_dims = 2: the weight declared [filters, channels] */
    conv_geom g;                /* derived in infer */
    conv_plan *plan;
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
    c->side[0] = c->side[1] = c->side[2] = c->side[3] = -1;
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
    dtnn_status st;
    if (layer_opt_pad_sides(key, value, c->side, &st, err))
        return st;
    if (!strcmp(key, "dilation"))
        return layer_opt_pair(key, value, 1, &c->dil_h, &c->dil_w, err);
    if (!strcmp(key, "groups"))
        return layer_opt_int(key, value, 1, 1 << 20, &c->groups, err);
    if (!strcmp(key, "bias"))
        return layer_opt_bool(key, value, &c->bias, err);
    if (!strcmp(key, "weight_dims")) {
        if (strcmp(value, "2") && strcmp(value, "4"))
            return dtnn_error_set(err, DTNN_ERR_ARG, "option 'weight_dims': '%s' is not 4 "
                                  "(filters x channels x kernel) or 2 (filters x channels, a "
                                  "1x1 convolution's weight as nn.Linear's)", value);
        c->linear_weight = !strcmp(value, "2");
        return DTNN_OK;
    }
    if (!strcmp(key, "algo")) {
        if (!strcmp(value, "auto") || !strcmp(value, "im2col") || !strcmp(value, "direct")) {
            c->algo_asked = !strcmp(value, "auto")     ? DTNN_CONV_AUTO
                            : !strcmp(value, "im2col") ? DTNN_CONV_IM2COL
                                                       : DTNN_CONV_DIRECT;
            return DTNN_OK;
        }
        return dtnn_error_set(err, DTNN_ERR_ARG, "algo=%s: conv2d's algo is auto (the fastest "
                              "path that applies), direct (auto without Winograd) or im2col "
                              "(the reference)", value);
    }
    return dtnn_error_set(err, DTNN_ERR_ARG, "unknown option '%s' for conv2d (filters, kernel, "
                          "stride, padding, pad_top, pad_bottom, pad_left, pad_right, pads, "
                          "dilation, groups, bias, weight_dims, algo)", key);
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
    const int top = c->side[0] >= 0 ? c->side[0] : c->pad_h;
    const int left = c->side[1] >= 0 ? c->side[1] : c->pad_w;
    const int bottom = c->side[2] >= 0 ? c->side[2] : c->pad_h;
    const int right = c->side[3] >= 0 ? c->side[3] : c->pad_w;
    g->pad_h = top;
    g->pad_w = left;
    g->pad_extra_h = bottom - top;
    g->pad_extra_w = right - left;
    g->dil_h = c->dil_h;
    g->dil_w = c->dil_w;
    g->groups = c->groups;
    int eh = in.h + top + bottom - c->dil_h * (c->kh - 1) - 1;
    int ew = in.w + left + right - c->dil_w * (c->kw - 1) - 1;
    if (eh < 0 || ew < 0)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "kernel %dx%d (dilation %dx%d, padding top "
                              "%d, left %d, bottom %d, right %d) does not fit the %dx%d input",
                              c->kh, c->kw, c->dil_h, c->dil_w, top, left, bottom, right, in.h,
                              in.w);
    g->P = eh / c->stride_h + 1;
    g->Q = ew / c->stride_w + 1;
    l->out = (dtnn_shape){c->filters, g->P, g->Q};

    int cg = in.c / c->groups;
    double fan_in = (double)cg * c->kh * c->kw, fan_out = (double)c->filters * c->kh * c->kw;
    int64_t wd[4] = {c->filters, cg, c->kh, c->kw};
    if (c->linear_weight && (c->kh != 1 || c->kw != 1 || c->groups != 1))
        return dtnn_error_set(err, DTNN_ERR_ARG, "weight_dims = 2 is for a 1x1 convolution of "
                              "one group (this one: %dx%d, %d groups)", c->kh, c->kw, c->groups);
    /* the same values in the same order either way */
    layer_declare(l, "weight", DTNN_TENSOR_PARAM, DTNN_F32, c->linear_weight ? 2 : 4, wd,
                  INIT_WEIGHT, fan_in, fan_out);
    if (c->bias) {
        int64_t bd[1] = {c->filters};
        layer_declare(l, "bias", DTNN_TENSOR_PARAM, DTNN_F32, 1, bd, INIT_BIAS, fan_in, fan_out);
    }
    /* the build's setting narrows the layer's: im2col beats direct beats auto */
    const dtnn_build_params *b = l->build;
    conv_desc d = {*g, b->max_batch, b->workspace_limit, c->algo_asked, b->precision};
    if (b->conv_algo == DTNN_CONV_IM2COL)
        d.algo = DTNN_CONV_IM2COL;
    else if (b->conv_algo == DTNN_CONV_DIRECT && d.algo == DTNN_CONV_AUTO)
        d.algo = DTNN_CONV_DIRECT;
    be_enter(l->be);    /* the plan is made for the threads the backend runs on */
    c->plan = l->be->op->conv_plan_create(l->be, &d, err);
    be_leave(l->be);
    if (!c->plan)
        return err->code;
    l->workspace_bytes = l->be->op->conv_workspace(c->plan);
    return DTNN_OK;
}

static void conv2d_forward(layer *l, const layer_ctx *ctx)
{
    conv2d_cfg *c = l->cfg;
    be_run(ctx->be, conv_forward, c->plan, l->n, l->x[0], l->p[0], c->bias ? l->p[1] : NULL,
           l->y, ctx->workspace);
}

static void conv2d_backward(layer *l, const layer_ctx *ctx)
{
    conv2d_cfg *c = l->cfg;
    be_run(ctx->be, conv_backward, c->plan, l->n, l->x[0], l->dy, l->p[0], l->g[0],
           c->bias ? l->g[1] : NULL, l->dx[0], l->dx_accumulate[0], ctx->workspace);
}

static const char *conv2d_method(const layer *l)
{
    const conv2d_cfg *c = l->cfg;
    return c->plan ? l->be->op->conv_method(c->plan) : "";
}

static void conv2d_release(layer *l)
{
    conv2d_cfg *c = l->cfg;
    if (c->plan)
        l->be->op->conv_plan_free(l->be, c->plan);
    c->plan = NULL;
}

static double conv2d_flops(const layer *l)
{
    const conv2d_cfg *c = l->cfg;
    const conv_geom *g = &c->g;
    return 2.0 * g->K * g->P * g->Q * (double)(g->C / g->groups) * g->R * g->S;
}

static void conv2d_describe(const layer *l, layer_attrs *a)
{
    const conv2d_cfg *c = l->cfg;
    *a = (layer_attrs){.kernel = {c->kh, c->kw}, .stride = {c->stride_h, c->stride_w},
                       .pad = {c->g.pad_h, c->g.pad_w},
                       .pad_extra = {c->g.pad_extra_h, c->g.pad_extra_w},
                       .dilation = {c->dil_h, c->dil_w},
                       .groups = c->groups, .bias = c->bias, .outputs = c->filters};
}

/* A 1x1 convolution of one group on 1 x 1 planes is a fully connected layer: its weight
 * [filters, channels, 1, 1] is [out, in]. Not in bf16, where the convolution rounds. */
static int conv2d_channel_affine(const layer *l, int *bias)
{
    const conv2d_cfg *c = l->cfg;
    *bias = c->bias;
    return c->kh == 1 && c->kw == 1 && c->groups == 1 && c->g.pad_h == 0 && c->g.pad_w == 0 &&
           c->g.pad_extra_h == 0 && c->g.pad_extra_w == 0 && l->in[0].h == 1 &&
           l->in[0].w == 1 && l->out.h == 1 && l->out.w == 1 &&
           l->build->precision == DTNN_PRECISION_FP32;
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
    .release = conv2d_release,
    .flops = conv2d_flops,
    .method = conv2d_method,
    .describe = conv2d_describe,
    .channel_affine = conv2d_channel_affine,
};
