/*
 * binary.c — the two-input element-wise layers `mul` (y = a * b) and `sub` (y = a - b) with
 * NumPy broadcasting over one sample's C x H x W (ONNX Mul / Sub, torch's * and -): equal
 * shapes, a per-channel C x 1 x 1 scale against C x H x W (squeeze-and-excitation, MobileNetV3),
 * a per-sample 1 x 1 x 1 scalar, or any sizes that are equal or 1. The batch is never
 * broadcast: both inputs come from the same samples. Input 0 is a, input 1 is b. No options.
 * Backward sums the gradient over the positions a broadcast input was repeated to (the
 * backend's binary_backward). The broadcasting add is add.c's, whose same-shape add keeps its
 * fusions.
 */
#include "layer.h"

typedef struct {
    binary_kind kind;
    binary_geom g;
} binary_cfg;

static dtnn_status binary_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    (void)cfg;
    (void)value;
    return dtnn_error_set(err, DTNN_ERR_ARG, "unknown option '%s' for this layer (it has none)",
                          key);
}

static dtnn_status binary_infer(layer *l, dtnn_error *err)
{
    binary_cfg *c = l->cfg;
    dtnn_status st = layer_broadcast_geom(l, &c->g, err);
    if (st)
        return st;
    l->out = (dtnn_shape){c->g.C, c->g.H, c->g.W};
    return DTNN_OK;
}

static void binary_forward(layer *l, const layer_ctx *ctx)
{
    binary_cfg *c = l->cfg;
    be_run(ctx->be, binary_forward, c->kind, &c->g, l->n, l->x[0], l->x[1], l->y);
}

/* When both inputs are one producer, the model has the second add to the first
 * (dx_accumulate), which the backend does after writing the first in full. */
static void binary_backward(layer *l, const layer_ctx *ctx)
{
    binary_cfg *c = l->cfg;
    if (l->dx[0] || l->dx[1])
        be_run(ctx->be, binary_backward, c->kind, &c->g, l->n, l->x[0], l->x[1], l->dy,
               l->dx[0], l->dx_accumulate[0], l->dx[1], l->dx_accumulate[1]);
}

static double binary_flops(const layer *l) { return (double)shape_size(l->out); }

#define BINARY_LAYER(ident, type_name, kind_value, text)                                      \
    static void ident##_defaults(void *cfg)                                                   \
    {                                                                                         \
        binary_cfg *c = cfg;                                                                  \
        c->kind = kind_value;                                                                 \
    }                                                                                         \
    const layer_ops layer_##ident = {                                                         \
        .type = type_name,                                                                    \
        .summary = text,                                                                      \
        .cfg_size = sizeof(binary_cfg),                                                       \
        .min_inputs = 2,                                                                      \
        .max_inputs = 2,                                                                      \
        .defaults = ident##_defaults,                                                         \
        .set = binary_set,                                                                    \
        .infer = binary_infer,                                                                \
        .forward = binary_forward,                                                            \
        .backward = binary_backward,                                                          \
        .flops = binary_flops,                                                                \
    };

BINARY_LAYER(mul, "mul", BIN_MUL,
             "a * b of 2 inputs, broadcast as NumPy (per-channel or per-sample scales)")
BINARY_LAYER(sub, "sub", BIN_SUB, "a - b of 2 inputs, broadcast as NumPy")
