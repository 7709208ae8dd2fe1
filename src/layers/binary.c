/*
 * binary.c — the two-input element-wise layers `mul` (y = a * b), `sub` (y = a - b) and `div`
 * (y = a / b) with NumPy broadcasting over one sample's C x H x W (ONNX Mul / Sub / Div,
 * torch's *, - and /): equal
 * shapes, a per-channel C x 1 x 1 scale against C x H x W (squeeze-and-excitation, MobileNetV3),
 * a per-sample 1 x 1 x 1 scalar, or any sizes that are equal or 1. The batch is never
 * broadcast: both inputs come from the same samples. Input 0 is a, input 1 is b. No options.
 * Backward sums the gradient over the positions a broadcast input was repeated to (the
 * backend's binary_backward). The broadcasting add is add.c's, whose same-shape add keeps its
 * fusions.
 *
 * With one input, the second operand is a constant the layer holds (layer.h, layer_constant:
 * const_shape, const_value, and for sub reverse = true for c - x): ONNX's Mul / Sub by an
 * initializer, torch's x * c, x / c (GELU's x / sqrt(2)). It is a buffer, not a parameter, as
 * batch norm's running
 * statistics: checkpoints, export and import carry it, training leaves it alone, and only x
 * gets a gradient. One layer with an optional operand rather than a separate scale layer, so
 * that the model file, the exporter and the importer each have one mul and one sub. mul's
 * constant may instead be trainable (trainable = true, named by const_name): a parameter
 * shared by every sample, whose gradient sums dy * x over the batch (ConvNeXt's layer scale,
 * torchvision's <block>.layer_scale [C, 1, 1]).
 */
#include <string.h>

#include "layer.h"

typedef struct {
    binary_kind kind;
    layer_constant k;
    binary_geom g;
} binary_cfg;

static dtnn_status binary_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    binary_cfg *c = cfg;
    dtnn_status st;
    const int reversible = c->kind == BIN_SUB || c->kind == BIN_DIV;
    if (layer_opt_constant(key, value, reversible, &c->k, &st, err))
        return st;
    if (c->kind == BIN_MUL && !strcmp(key, "trainable")) {
        c->k.given = 1;
        return layer_opt_bool(key, value, &c->k.trainable, err);
    }
    if (c->kind == BIN_MUL && !strcmp(key, "const_name")) {
        c->k.given = 1;
        return layer_opt_identifier(key, value, c->k.name, sizeof c->k.name, err);
    }
    return dtnn_error_set(err, DTNN_ERR_ARG, "unknown option '%s' for this layer (const_shape, "
                          "const_value%s)", key,
                          reversible ? ", reverse" : c->kind == BIN_MUL ? ", trainable, const_name"
                                                                        : "");
}

static dtnn_status binary_infer(layer *l, dtnn_error *err)
{
    binary_cfg *c = l->cfg;
    dtnn_status st = layer_constant_infer(l, &c->k, &c->g, err);
    if (st)
        return st;
    l->out = (dtnn_shape){c->g.C, c->g.H, c->g.W};
    return DTNN_OK;
}

/* The operands a and b: the two inputs, or the input and the constant in their order. */
static void operands(const layer *l, const float **a, const float **b)
{
    const binary_cfg *c = l->cfg;
    *a = l->x[0];
    *b = l->n_in == 2 ? l->x[1] : l->p[0];
    if (l->n_in == 1 && c->k.reverse) {
        *a = l->p[0];
        *b = l->x[0];
    }
}

/* A squeeze-excitation block's scale runs the block (model_plan.c, plan_se_fusion): l->se
 * holds the mean, affine, activation, affine and gate layers, whose outputs keep the block's
 * intermediates for the backward, as unfused. */
static se_geom se_block(const layer *l, const float **b1, const float **b2)
{
    layer *const *se = l->se;
    const dtnn_shape x = l->in[l->se_x];
    se_geom g = {.C = x.c, .HW = x.h * x.w, .hidden = se[1]->out.c};
    se[2]->ops->activation(se[2], &g.act, &g.act_a, &g.act_b);
    se[4]->ops->activation(se[4], &g.gate, &g.gate_a, &g.gate_b);
    int bias;
    se[1]->ops->channel_affine(se[1], &bias);
    *b1 = bias ? se[1]->p[1] : NULL;
    se[3]->ops->channel_affine(se[3], &bias);
    *b2 = bias ? se[3]->p[1] : NULL;
    return g;
}

static void se_forward(layer *l, const layer_ctx *ctx)
{
    layer *const *se = l->se;
    const float *b1, *b2;
    const se_geom g = se_block(l, &b1, &b2);
    be_run(ctx->be, se_forward, &g, l->n, l->x[l->se_x], se[1]->p[0], b1, se[3]->p[0], b2,
           se[0]->y, se[1]->y, se[2]->y, se[3]->y, se[4]->y, l->y);
}

static void se_backward(layer *l, const layer_ctx *ctx)
{
    layer *const *se = l->se;
    const float *b1, *b2;
    const se_geom g = se_block(l, &b1, &b2);
    be_run(ctx->be, se_backward, &g, l->n, l->x[l->se_x], l->dy, se[0]->y, se[1]->y, se[2]->y,
           se[3]->y, se[4]->y, se[1]->p[0], se[3]->p[0], se[1]->g[0], b1 ? se[1]->g[1] : NULL,
           se[3]->g[0], b2 ? se[3]->g[1] : NULL, l->dx[l->se_x], l->dx_accumulate[l->se_x],
           ctx->workspace);
}

static void binary_forward(layer *l, const layer_ctx *ctx)
{
    if (l->se[0]) {
        se_forward(l, ctx);
        return;
    }
    binary_cfg *c = l->cfg;
    const float *a, *b;
    operands(l, &a, &b);
    be_run(ctx->be, binary_forward, c->kind, &c->g, l->n, a, b, l->y);
}

/* A trainable constant's gradient, sum over the batch of dy * x reduced to its shape: sample
 * by sample (one sample of x against the constant is the two-input form's geometry), each
 * added in order into the gradient, which the step began at zero. */
static void constant_grad(layer *l, const layer_ctx *ctx, const float *x)
{
    const binary_cfg *c = l->cfg;
    binary_geom g = c->g;
    g.a_shared = g.b_shared = 0;
    const size_t xs = shape_size(l->in[0]), ys = shape_size(l->out);
    for (int i = 0; i < l->n; i++)
        be_run(ctx->be, binary_backward, c->kind, &g, 1, x + i * xs, l->p[0], l->dy + i * ys,
               NULL, 0, l->g[0], 1);
}

/* When both inputs are one producer, the model has the second add to the first
 * (dx_accumulate), which the backend does after writing the first in full. A constant has no
 * gradient unless trainable. */
static void binary_backward(layer *l, const layer_ctx *ctx)
{
    if (l->se[0]) {
        se_backward(l, ctx);
        return;
    }
    binary_cfg *c = l->cfg;
    const float *a, *b;
    operands(l, &a, &b);
    if (l->n_in == 1 && c->k.trainable && l->g[0])
        constant_grad(l, ctx, a);
    if (l->n_in == 1) {
        if (l->dx[0])
            be_run(ctx->be, binary_backward, c->kind, &c->g, l->n, a, b, l->dy,
                   c->k.reverse ? NULL : l->dx[0], l->dx_accumulate[0],
                   c->k.reverse ? l->dx[0] : NULL, l->dx_accumulate[0]);
    } else if (l->dx[0] || l->dx[1]) {
        be_run(ctx->be, binary_backward, c->kind, &c->g, l->n, a, b, l->dy, l->dx[0],
               l->dx_accumulate[0], l->dx[1], l->dx_accumulate[1]);
    }
}

static void binary_describe(const layer *l, layer_attrs *a)
{
    const binary_cfg *c = l->cfg;
    *a = (layer_attrs){.constant = l->n_in == 1, .reverse = c->k.reverse};
}

/* The slot of the C x H x W input of a product with a C x 1 x 1 one, else -1. */
static int binary_channel_scale(const layer *l)
{
    const binary_cfg *c = l->cfg;
    if (c->kind != BIN_MUL || l->n_in != 2)
        return -1;
    for (int k = 0; k < l->n_in; k++) {
        const dtnn_shape x = l->in[k], s = l->in[1 - k];
        if (x.c == l->out.c && x.h == l->out.h && x.w == l->out.w && s.c == x.c && s.h == 1 &&
            s.w == 1)
            return k;
    }
    return -1;
}

static const char *binary_method(const layer *l)
{
    return l->se[0] ? "squeeze-excitation" : "";
}

static double binary_flops(const layer *l) { return (double)shape_size(l->out); }

#define BINARY_LAYER(ident, type_name, kind_value, text)                                      \
    static void ident##_defaults(void *cfg)                                                   \
    {                                                                                         \
        binary_cfg *c = cfg;                                                                  \
        c->kind = kind_value;                                                                 \
        c->k.value = kind_value == BIN_MUL || kind_value == BIN_DIV ? 1.0f : 0.0f;            \
    }                                                                                         \
    const layer_ops layer_##ident = {                                                         \
        .type = type_name,                                                                    \
        .summary = text,                                                                      \
        .cfg_size = sizeof(binary_cfg),                                                       \
        .min_inputs = 1,                                                                      \
        .max_inputs = 2,                                                                      \
        .defaults = ident##_defaults,                                                         \
        .set = binary_set,                                                                    \
        .infer = binary_infer,                                                                \
        .forward = binary_forward,                                                            \
        .backward = binary_backward,                                                          \
        .flops = binary_flops,                                                                \
        .describe = binary_describe,                                                          \
        .method = binary_method,                                                              \
        .channel_scale = binary_channel_scale,                                                \
    };

BINARY_LAYER(mul, "mul", BIN_MUL,
             "a * b of 2 inputs, broadcast as NumPy (per-channel or per-sample scales), or x * "
             "a constant (const_shape, const_value)")
BINARY_LAYER(sub, "sub", BIN_SUB,
             "a - b of 2 inputs, broadcast as NumPy, or x - a constant (const_shape, "
             "const_value; reverse: constant - x)")
BINARY_LAYER(div, "div", BIN_DIV,
             "a / b of 2 inputs, broadcast as NumPy, or x / a constant (const_shape, "
             "const_value; reverse: constant / x)")
