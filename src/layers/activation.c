/*
 * activation.c — the element-wise activation layers: relu, leaky_relu (slope, default 0.01 as
 * PyTorch), sigmoid, tanh and relu6 (MobileNetV2's min(max(x, 0), 6)). They differ only in
 * the kernel they call, so they share one file and one set of functions with five small ops
 * tables, rather than five copies of the same code.
 */
#include <string.h>

#include "layer.h"

typedef struct {
    act_kind kind;
    float slope;
} act_cfg;

static dtnn_status act_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    act_cfg *c = cfg;
    if (c->kind == ACT_LEAKY_RELU && (!strcmp(key, "slope") || !strcmp(key, "negative_slope")))
        return layer_opt_float(key, value, -1e6, 1e6, &c->slope, err);
    return dtnn_error_set(err, DTNN_ERR_ARG, "unknown option '%s' for this activation%s", key,
                          c->kind == ACT_LEAKY_RELU ? " (slope)" : " (it has none)");
}

static dtnn_status act_infer(layer *l, dtnn_error *err)
{
    (void)err;
    l->out = l->in[0];
    return DTNN_OK;
}

static void act_forward(layer *l, const layer_ctx *ctx)
{
    act_cfg *c = l->cfg;
    be_run(ctx->be, act_forward, c->kind, c->slope, shape_size(l->out) * l->n, l->x[0], l->y);
}

static void act_backward(layer *l, const layer_ctx *ctx)
{
    act_cfg *c = l->cfg;
    if (l->dx[0])
        be_run(ctx->be, act_backward, c->kind, c->slope, shape_size(l->out) * l->n, l->x[0],
               l->y, l->dy, l->dx[0], l->dx_accumulate[0]);
}

static void act_describe(const layer *l, layer_attrs *a)
{
    const act_cfg *c = l->cfg;
    *a = (layer_attrs){.alpha = c->slope};
}

#define ACT_LAYER(ident, type_name, kind_value, text, in_place, reads_output)                \
    static void ident##_defaults(void *cfg)                                                   \
    {                                                                                         \
        act_cfg *c = cfg;                                                                     \
        c->kind = kind_value;                                                                 \
        c->slope = 0.01f;                                                                     \
    }                                                                                         \
    const layer_ops layer_##ident = {                                                         \
        .type = type_name,                                                                    \
        .summary = text,                                                                      \
        .cfg_size = sizeof(act_cfg),                                                          \
        .min_inputs = 1,                                                                      \
        .max_inputs = 1,                                                                      \
        .defaults = ident##_defaults,                                                         \
        .set = act_set,                                                                       \
        .infer = act_infer,                                                                   \
        .forward = act_forward,                                                               \
        .backward = act_backward,                                                             \
        .describe = act_describe,                                                             \
        .inplace = in_place,                                                                  \
        .backward_reads_output = reads_output,                                                \
    };

/* In place: ReLU and ReLU6 (their output tells where the input was positive, and below 6);
 * not leaky ReLU, whose slope may be negative. */
ACT_LAYER(relu, "relu", ACT_RELU, "max(x, 0)", LAYER_INPLACE, 0)
ACT_LAYER(leaky_relu, "leaky_relu", ACT_LEAKY_RELU, "x > 0 ? x : slope * x (slope=0.01)", 0, 0)
ACT_LAYER(sigmoid, "sigmoid", ACT_SIGMOID, "1 / (1 + exp(-x))", 0, 1)
ACT_LAYER(tanh, "tanh", ACT_TANH, "tanh(x)", 0, 1)
ACT_LAYER(relu6, "relu6", ACT_RELU6, "min(max(x, 0), 6)", LAYER_INPLACE, 0)
