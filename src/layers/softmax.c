/*
 * softmax.c — softmax over the features of each sample, as torch.nn.Softmax(dim=1) on an
 * [N, F] tensor: y = exp(x - max) / sum(exp(x - max)). The input must be flat (F x 1 x 1), so a
 * feature map is never normalised across channels and pixels by accident; put a flatten layer
 * first. For training a classifier, prefer the model's cross-entropy loss on raw logits, which
 * is more accurate than softmax followed by a log. The arithmetic is the backend's softmax_*.
 */
#include <string.h>

#include "layer.h"

static dtnn_status softmax_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    (void)cfg;
    (void)value;
    return dtnn_error_set(err, DTNN_ERR_ARG, "unknown option '%s' for softmax (it has none)",
                          key);
}

static dtnn_status softmax_infer(layer *l, dtnn_error *err)
{
    dtnn_shape in = l->in[0];
    if (in.h != 1 || in.w != 1)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "softmax input is %dx%dx%d, not a flat vector "
                              "of features: add a flatten layer before it", in.c, in.h, in.w);
    l->out = in;
    return DTNN_OK;
}

static void softmax_forward(layer *l, const layer_ctx *ctx)
{
    be_run(ctx->be, softmax_forward, l->n, l->out.c, l->x[0], l->y);
}

static void softmax_backward(layer *l, const layer_ctx *ctx)
{
    if (l->dx[0])
        be_run(ctx->be, softmax_backward, l->n, l->out.c, l->y, l->dy, l->dx[0],
               l->dx_accumulate[0]);
}

const layer_ops layer_softmax = {
    .type = "softmax",
    .summary = "softmax over the features of each sample (flat input)",
    .cfg_size = 0,
    .min_inputs = 1,
    .max_inputs = 1,
    .set = softmax_set,
    .infer = softmax_infer,
    .forward = softmax_forward,
    .backward = softmax_backward,
    .backward_reads_output = 1,
};
