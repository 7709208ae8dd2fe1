/*
 * add.c — element-wise sum of 2 to 8 inputs of identical shape: the merge of a residual block
 * (He et al. 2016), y = x_0 + x_1 + ... Backward hands dy unchanged to every input.
 *
 * Inputs are visited in increasing index order in backward, because two inputs may be the same
 * producer: the model then marks the first to write its gradient and the second to add to it.
 * No broadcasting: shapes must match exactly. A ReLU right after it may be fused in (layer.h,
 * relu_epilogue): ResNet's add + ReLU in one pass each way.
 */
#include "layer.h"

static dtnn_status add_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    (void)cfg;
    (void)value;
    return dtnn_error_set(err, DTNN_ERR_ARG, "unknown option '%s' for add (it has none)", key);
}

static dtnn_status add_infer(layer *l, dtnn_error *err)
{
    dtnn_shape a = l->in[0];
    for (int i = 1; i < l->n_in; i++) {
        dtnn_shape b = l->in[i];
        if (b.c != a.c || b.h != a.h || b.w != a.w)
            return dtnn_error_set(err, DTNN_ERR_SHAPE, "add needs inputs of one shape: input 0 "
                                  "is %dx%dx%d but input %d is %dx%dx%d", a.c, a.h, a.w, i,
                                  b.c, b.h, b.w);
    }
    l->out = a;
    return DTNN_OK;
}

/* One pass over all inputs, ((x_0 + x_1) + x_2) + ..., the fused ReLU on the last. */
static void add_forward(layer *l, const layer_ctx *ctx)
{
    be_run(ctx->be, add_forward, shape_size(l->out) * (size_t)l->n, l->n_in, l->x,
           l->relu_fused, l->y);
}

/* Every input's gradient is dy, or with a fused ReLU dy where y > 0; when two inputs are one
 * producer, the first writes and the second adds (dx_accumulate). */
static void add_backward(layer *l, const layer_ctx *ctx)
{
    be_run(ctx->be, add_backward, shape_size(l->out) * (size_t)l->n,
           l->relu_fused ? l->y : NULL, l->dy, l->n_in, l->dx, l->dx_accumulate);
}

static const char *add_method(const layer *l) { return l->relu_fused ? "+relu" : ""; }

static double add_flops(const layer *l)
{
    return (double)(l->n_in - 1) * (double)shape_size(l->out);
}

const layer_ops layer_add = {
    .type = "add",
    .summary = "element-wise sum of 2 to 8 inputs of one shape (residual connections)",
    .cfg_size = 0,
    .min_inputs = 2,
    .max_inputs = 8,
    .set = add_set,
    .infer = add_infer,
    .forward = add_forward,
    .backward = add_backward,
    .flops = add_flops,
    .method = add_method,
    .relu_epilogue = 1,
};
