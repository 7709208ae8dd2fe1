/*
 * activation.c — the element-wise activation layers: relu, leaky_relu (slope, default 0.01 as
 * PyTorch), sigmoid, tanh, relu6 (MobileNetV2's min(max(x, 0), 6)), hardsigmoid and hardswish
 * (MobileNetV3's relu6(x + 3) / 6 and x relu6(x + 3) / 6, as nn.Hardsigmoid / nn.Hardswish;
 * hardsigmoid also takes alpha= and beta=, ONNX's max(0, min(1, alpha x + beta)), for models
 * from other frameworks: Keras writes 0.2 and 0.5),
 * clamp (min=, max=: torch.clamp, and ONNX Clip; a bound left out is infinite) and hardtanh
 * (min=, max=, default -1 and 1, also min_val= / max_val= as nn.Hardtanh). clamp and hardtanh
 * compute the same values and differ only at the bounds in backward, as in PyTorch: clamp
 * passes the gradient at x == min or max, hardtanh does not. gelu is nn.GELU (approximate=
 * none, the erf form, or tanh), ConvNeXt's and the transformers' activation; silu is nn.SiLU
 * (x sigmoid(x), EfficientNet's swish). They differ only in the kernel
 * they call, so they share one file and one set of functions with small ops tables, rather
 * than copies of the same code.
 */
#include <math.h>
#include <string.h>

#include "layer.h"

typedef struct {
    act_kind kind;
    float slope;
    float lo, hi;   /* clamp, hardtanh */
    float alpha, beta;  /* hardsigmoid */
} act_cfg;

static dtnn_status act_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    act_cfg *c = cfg;
    if (c->kind == ACT_LEAKY_RELU && (!strcmp(key, "slope") || !strcmp(key, "negative_slope")))
        return layer_opt_float(key, value, -1e6, 1e6, &c->slope, err);
    if (c->kind == ACT_HARDSIGMOID && !strcmp(key, "alpha"))
        return layer_opt_float(key, value, -1e6, 1e6, &c->alpha, err);
    if (c->kind == ACT_HARDSIGMOID && !strcmp(key, "beta"))
        return layer_opt_float(key, value, -1e6, 1e6, &c->beta, err);
    if ((c->kind == ACT_GELU || c->kind == ACT_GELU_TANH) && !strcmp(key, "approximate")) {
        if (strcmp(value, "none") && strcmp(value, "tanh"))
            return dtnn_error_set(err, DTNN_ERR_ARG, "approximate=%s: none (erf, the default) or "
                                  "tanh, as nn.GELU", value);
        c->kind = strcmp(value, "tanh") ? ACT_GELU : ACT_GELU_TANH;
        return DTNN_OK;
    }
    if (c->kind == ACT_CLAMP || c->kind == ACT_HARDTANH) {
        /* Finite bounds only: an infinite one is the default of clamp, and a NaN would make
         * every comparison false. */
        if (!strcmp(key, "min") || !strcmp(key, "min_val"))
            return layer_opt_float(key, value, -1e30, 1e30, &c->lo, err);
        if (!strcmp(key, "max") || !strcmp(key, "max_val"))
            return layer_opt_float(key, value, -1e30, 1e30, &c->hi, err);
    }
    return dtnn_error_set(err, DTNN_ERR_ARG, "unknown option '%s' for this activation%s", key,
                          c->kind == ACT_LEAKY_RELU ? " (slope)" :
                          c->kind == ACT_CLAMP || c->kind == ACT_HARDTANH ? " (min, max)" :
                          c->kind == ACT_HARDSIGMOID ? " (alpha, beta)" :
                          c->kind == ACT_GELU || c->kind == ACT_GELU_TANH ? " (approximate)" :
                          " (it has none)");
}

static dtnn_status act_infer(layer *l, dtnn_error *err)
{
    const act_cfg *c = l->cfg;
    if (c->lo > c->hi)
        return dtnn_error_set(err, DTNN_ERR_ARG, "%s: min=%g is above max=%g", l->ops->type,
                              (double)c->lo, (double)c->hi);
    l->out = l->in[0];
    return DTNN_OK;
}

/* The kernel's two scalars: the slope, hardsigmoid's alpha and beta, or the bounds. */
static float act_a(const act_cfg *c)
{
    return c->kind == ACT_LEAKY_RELU ? c->slope : c->kind == ACT_HARDSIGMOID ? c->alpha : c->lo;
}

static float act_b(const act_cfg *c) { return c->kind == ACT_HARDSIGMOID ? c->beta : c->hi; }

static void act_forward(layer *l, const layer_ctx *ctx)
{
    act_cfg *c = l->cfg;
    be_run(ctx->be, act_forward, c->kind, act_a(c), act_b(c), shape_size(l->out) * l->n,
           l->x[0], l->y);
}

static void act_backward(layer *l, const layer_ctx *ctx)
{
    act_cfg *c = l->cfg;
    if (l->dx[0])
        be_run(ctx->be, act_backward, c->kind, act_a(c), act_b(c), shape_size(l->out) * l->n,
               l->x[0], l->y, l->dy, l->dx[0], l->dx_accumulate[0]);
}

static void act_describe(const layer *l, layer_attrs *a)
{
    const act_cfg *c = l->cfg;
    *a = (layer_attrs){.alpha = c->kind == ACT_HARDSIGMOID ? c->alpha : c->slope,
                       .beta = c->beta, .bounds = {c->lo, c->hi},
                       .approximate = c->kind == ACT_GELU_TANH};
}

static int act_activation(const layer *l, act_kind *kind, float *a, float *b)
{
    const act_cfg *c = l->cfg;
    *kind = c->kind;
    *a = act_a(c);
    *b = act_b(c);
    return 1;
}

#define ACT_LAYER(ident, type_name, kind_value, text, in_place, reads_output, lo_, hi_)      \
    static void ident##_defaults(void *cfg)                                                   \
    {                                                                                         \
        act_cfg *c = cfg;                                                                     \
        c->kind = kind_value;                                                                 \
        c->slope = 0.01f;                                                                     \
        c->alpha = 1.0f / 6.0f;                                                               \
        c->beta = 0.5f;                                                                       \
        c->lo = lo_;                                                                          \
        c->hi = hi_;                                                                          \
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
        .activation = act_activation,                                                         \
        .inplace = in_place,                                                                  \
        .backward_reads_output = reads_output,                                                \
        .fusable_relu = (kind_value) == ACT_RELU,                                             \
    };

/* In place: ReLU and ReLU6 (their output tells where the input was positive, and below 6);
 * not leaky ReLU, whose slope may be negative, nor the hard ones and clamp, whose backward
 * needs the input itself (clamp's output is always inside its bounds). */
ACT_LAYER(relu, "relu", ACT_RELU, "max(x, 0)", LAYER_INPLACE, 0, 0.0f, 0.0f)
ACT_LAYER(leaky_relu, "leaky_relu", ACT_LEAKY_RELU, "x > 0 ? x : slope * x (slope=0.01)", 0, 0,
          0.0f, 0.0f)
ACT_LAYER(sigmoid, "sigmoid", ACT_SIGMOID, "1 / (1 + exp(-x))", 0, 1, 0.0f, 0.0f)
ACT_LAYER(tanh, "tanh", ACT_TANH, "tanh(x)", 0, 1, 0.0f, 0.0f)
ACT_LAYER(relu6, "relu6", ACT_RELU6, "min(max(x, 0), 6)", LAYER_INPLACE, 0, 0.0f, 6.0f)
ACT_LAYER(hardsigmoid, "hardsigmoid", ACT_HARDSIGMOID,
          "relu6(x + 3) / 6, or max(0, min(1, alpha x + beta)) (alpha=1/6, beta=0.5)", 0, 0, 0.0f,
          0.0f)
ACT_LAYER(hardswish, "hardswish", ACT_HARDSWISH, "x * relu6(x + 3) / 6", 0, 0, 0.0f, 0.0f)
ACT_LAYER(clamp, "clamp", ACT_CLAMP, "min(max(x, min), max) (min=-inf, max=inf; torch.clamp)",
          0, 0, -INFINITY, INFINITY)
ACT_LAYER(gelu, "gelu", ACT_GELU,
          "x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), or with approximate=tanh 0.5 x (1 + "
          "tanh(sqrt(2 / pi) (x + 0.044715 x^3))) (nn.GELU)", 0, 0, 0.0f, 0.0f)
ACT_LAYER(hardtanh, "hardtanh", ACT_HARDTANH, "min(max(x, min), max) (min=-1, max=1)", 0, 0,
          -1.0f, 1.0f)
ACT_LAYER(erf, "erf", ACT_ERF, "erf(x) (torch.erf, ONNX Erf)", 0, 0, 0.0f, 0.0f)
ACT_LAYER(silu, "silu", ACT_SILU, "x * sigmoid(x) = x / (1 + exp(-x)) (nn.SiLU, swish)", 0, 0,
          0.0f, 0.0f)
ACT_LAYER(sqrt, "sqrt", ACT_SQRT, "sqrt(x) (torch.sqrt, ONNX Sqrt; NaN below 0)", 0, 1, 0.0f,
          0.0f)
