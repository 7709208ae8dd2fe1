/*
 * add.c — element-wise sum of 2 to 8 inputs of identical shape: the merge of a residual block
 * (He et al. 2016), y = x_0 + x_1 + ... Backward hands dy unchanged to every input.
 *
 * Inputs are visited in increasing index order in backward, because two inputs may be the same
 * producer: the model then marks the first to write its gradient and the second to add to it.
 * A ReLU right after it may be fused in (layer.h, relu_epilogue): ResNet's add + ReLU in one
 * pass each way.
 *
 * Two inputs of different shapes are broadcast as NumPy (ONNX Add): each size equal or 1, e.g.
 * a per-channel C x 1 x 1 bias on C x H x W; backward then sums the gradient over the repeated
 * positions (the backend's binary ops, as mul and sub in binary.c). Such an add is never fused
 * (model_plan.c fuses only adds of one shape).
 *
 * One input and a constant the layer holds (layer.h, layer_constant: const_shape,
 * const_value) is x + c, ONNX's Add of an initializer that is no MatMul's bias: the same
 * broadcast, the constant a buffer that only checkpoints and imports change, as in mul and sub.
 */
#include "layer.h"

typedef struct {
    int broadcast;
    layer_constant k;
    binary_geom g;
} add_cfg;

static dtnn_status add_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    add_cfg *c = cfg;
    dtnn_status st;
    if (layer_opt_constant(key, value, 0, &c->k, &st, err))
        return st;
    return dtnn_error_set(err, DTNN_ERR_ARG, "unknown option '%s' for add (const_shape, "
                          "const_value)", key);
}

static dtnn_status add_infer(layer *l, dtnn_error *err)
{
    add_cfg *c = l->cfg;
    dtnn_shape a = l->in[0];
    c->broadcast = 0;
    if (l->n_in == 1 || c->k.given) {
        dtnn_status st = layer_constant_infer(l, &c->k, &c->g, err);
        if (st)
            return st;
        c->broadcast = 1;
        l->out = (dtnn_shape){c->g.C, c->g.H, c->g.W};
        return DTNN_OK;
    }
    for (int i = 1; i < l->n_in; i++) {
        dtnn_shape b = l->in[i];
        if (b.c == a.c && b.h == a.h && b.w == a.w)
            continue;
        if (l->n_in != 2)
            return dtnn_error_set(err, DTNN_ERR_SHAPE, "add of more than 2 inputs needs "
                                  "inputs of one shape: input 0 is %dx%dx%d but input %d is "
                                  "%dx%dx%d", a.c, a.h, a.w, i, b.c, b.h, b.w);
        dtnn_status st = layer_broadcast_geom(l, &c->g, err);
        if (st)
            return st;
        c->broadcast = 1;
        l->out = (dtnn_shape){c->g.C, c->g.H, c->g.W};
        return DTNN_OK;
    }
    l->out = a;
    return DTNN_OK;
}

/* One pass over all inputs, ((x_0 + x_1) + x_2) + ..., the fused ReLU on the last. */
static void add_forward(layer *l, const layer_ctx *ctx)
{
    add_cfg *c = l->cfg;
    if (c->broadcast)
        be_run(ctx->be, binary_forward, BIN_ADD, &c->g, l->n, l->x[0],
               l->n_in == 1 ? l->p[0] : l->x[1], l->y);
    else
        be_run(ctx->be, add_forward, shape_size(l->out) * (size_t)l->n, l->n_in, l->x,
               l->relu_fused, l->y);
}

/* Every input's gradient is dy, or with a fused ReLU dy where y > 0; when two inputs are one
 * producer, the first writes and the second adds (dx_accumulate). */
static void add_backward(layer *l, const layer_ctx *ctx)
{
    add_cfg *c = l->cfg;
    if (c->broadcast && l->n_in == 1)
        be_run(ctx->be, binary_backward, BIN_ADD, &c->g, l->n, l->x[0], l->p[0], l->dy,
               l->dx[0], l->dx_accumulate[0], NULL, 0);
    else if (c->broadcast)
        be_run(ctx->be, binary_backward, BIN_ADD, &c->g, l->n, l->x[0], l->x[1], l->dy,
               l->dx[0], l->dx_accumulate[0], l->dx[1], l->dx_accumulate[1]);
    else
        be_run(ctx->be, add_backward, shape_size(l->out) * (size_t)l->n,
               l->relu_fused ? l->y : NULL, l->dy, l->n_in, l->dx, l->dx_accumulate);
}

static void add_describe(const layer *l, layer_attrs *a)
{
    *a = (layer_attrs){.constant = l->n_in == 1};
}

static const char *add_method(const layer *l) { return l->relu_fused ? "+relu" : ""; }

static double add_flops(const layer *l)
{
    return (double)(l->n_in > 1 ? l->n_in - 1 : 1) * (double)shape_size(l->out);
}

const layer_ops layer_add = {
    .type = "add",
    .summary = "element-wise sum of 2 to 8 inputs of one shape (residual connections), or of 2 "
               "broadcast as NumPy, or x + a constant (const_shape, const_value)",
    .cfg_size = sizeof(add_cfg),
    .min_inputs = 1,
    .max_inputs = 8,
    .set = add_set,
    .infer = add_infer,
    .forward = add_forward,
    .backward = add_backward,
    .flops = add_flops,
    .method = add_method,
    .describe = add_describe,
    .relu_epilogue = 1,
    .sums_inputs = 1,
};
