/*
 * softmax.c — softmax over the features of each sample, as torch.nn.Softmax(dim=1) on an
 * [N, F] tensor: y = exp(x - max) / sum(exp(x - max)). Without options the input must be flat
 * (F x 1 x 1), so a feature map is never normalised across channels and pixels by accident;
 * put a flatten layer first. With groups = G the C channels are G equal groups and the softmax
 * runs across the groups at each channel of a group and each pixel, as
 * x.view(N, G, C / G, H, W).softmax(1): the radix softmax of ResNeSt's and SKNet's split
 * attention; groups = C is a softmax over the channels at each pixel (ONNX Softmax, axis 1, of
 * a feature map). With axis = last it runs over each row of W values of a C x H x W input
 * (softmax(dim=-1) of [N, ..., W]: attention's weights). For training a classifier, prefer the model's cross-entropy loss on raw
 * logits, which is more accurate than softmax followed by a log. The arithmetic is the
 * backend's softmax_*.
 */
#include <string.h>

#include "layer.h"

typedef struct {
    int groups;         /* 0: over all features of a flat input */
    int last;           /* axis = last: over each row of W values */
} softmax_cfg;

static dtnn_status softmax_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    softmax_cfg *c = cfg;
    if (!strcmp(key, "axis"))
        return layer_opt_last_axis("softmax", value, "features", &c->last, err);
    if (!strcmp(key, "groups"))
        return layer_opt_int(key, value, 1, 1 << 24, &c->groups, err);
    return dtnn_error_set(err, DTNN_ERR_ARG, "unknown option '%s' for softmax (groups, axis)",
                          key);
}

static dtnn_status softmax_infer(layer *l, dtnn_error *err)
{
    const softmax_cfg *c = l->cfg;
    dtnn_shape in = l->in[0];
    if (c->groups && c->last)
        return dtnn_error_set(err, DTNN_ERR_ARG, "softmax: groups and axis = last exclude each "
                              "other");
    if (!c->groups && !c->last && (in.h != 1 || in.w != 1))
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "softmax input is %dx%dx%d, not a flat vector "
                              "of features: add a flatten layer before it (or set groups: "
                              "groups = %d is a softmax over the channels at each pixel)", in.c,
                              in.h, in.w, in.c);
    if (c->groups && in.c % c->groups)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "softmax: groups = %d does not divide the "
                              "input's %d channels", c->groups, in.c);
    l->out = in;
    return c->last ? layer_rows_fit(l, (size_t)in.c * in.h, err) : DTNN_OK;
}

/* The backend's [rows, cols, inner]: across the groups at each remaining position, or over
 * each row of W. */
static void softmax_lines(const layer *l, int *rows, int *cols, int *inner)
{
    const softmax_cfg *c = l->cfg;
    const int last = c->last && !c->groups;
    *rows = last ? l->n * l->out.c * l->out.h : l->n;
    *cols = last ? l->out.w : c->groups ? c->groups : l->out.c;
    *inner = last ? 1 : (int)(shape_size(l->out) / (size_t)*cols);
}

static void softmax_forward(layer *l, const layer_ctx *ctx)
{
    int rows, cols, inner;
    softmax_lines(l, &rows, &cols, &inner);
    be_run(ctx->be, softmax_forward, rows, cols, inner, l->x[0], l->y);
}

static void softmax_backward(layer *l, const layer_ctx *ctx)
{
    int rows, cols, inner;
    softmax_lines(l, &rows, &cols, &inner);
    if (l->dx[0])
        be_run(ctx->be, softmax_backward, rows, cols, inner, l->y, l->dy, l->dx[0],
               l->dx_accumulate[0]);
}

static void softmax_describe(const layer *l, layer_attrs *a)
{
    const softmax_cfg *c = l->cfg;
    a->softmax_groups = c->groups;
    a->last_axis = c->last;
}

const layer_ops layer_softmax = {
    .type = "softmax",
    .summary = "softmax over the features of each sample (flat input), or across channel "
               "groups (groups = G)",
    .cfg_size = sizeof(softmax_cfg),
    .min_inputs = 1,
    .max_inputs = 1,
    .set = softmax_set,
    .infer = softmax_infer,
    .forward = softmax_forward,
    .backward = softmax_backward,
    .describe = softmax_describe,
    .backward_reads_output = 1,
};
