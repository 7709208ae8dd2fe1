/*
 * slice.c — a range of channels, x[:, start:end] on NCHW tensors (torch.split and
 * torch.chunk are several of them over one input; ONNX Slice on axis 1 and Split). Options:
 * start (0), end (the input's channels). Per sample the range is one contiguous block of
 * (end - start) H W values, so forward and backward are block copies; backward writes zeros
 * outside the range when it writes the input's gradient rather than adding to it.
 */
#include <string.h>

#include "layer.h"

typedef struct {
    int start, end;     /* end 0: to the last channel */
} slice_cfg;

static dtnn_status slice_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    slice_cfg *c = cfg;
    if (!strcmp(key, "start"))
        return layer_opt_int(key, value, 0, 1 << 24, &c->start, err);
    if (!strcmp(key, "end"))
        return layer_opt_int(key, value, 1, 1 << 24, &c->end, err);
    return dtnn_error_set(err, DTNN_ERR_ARG, "unknown option '%s' for slice (start, end)", key);
}

static dtnn_status slice_infer(layer *l, dtnn_error *err)
{
    slice_cfg *c = l->cfg;
    const dtnn_shape x = l->in[0];
    const int end = c->end ? c->end : x.c;
    if (c->start >= end || end > x.c)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "slice of channels [%d, %d) of an input of "
                              "%d channels: need 0 <= start < end <= %d", c->start, end, x.c,
                              x.c);
    c->end = end;
    l->out = (dtnn_shape){end - c->start, x.h, x.w};
    return DTNN_OK;
}

static void slice_forward(layer *l, const layer_ctx *ctx)
{
    const slice_cfg *c = l->cfg;
    const size_t plane = (size_t)l->in[0].h * l->in[0].w;
    be_run(ctx->be, copy_rows, (size_t)l->n, shape_size(l->out), l->y, shape_size(l->out),
           l->x[0] + (size_t)c->start * plane, shape_size(l->in[0]), 0);
}

static void slice_backward(layer *l, const layer_ctx *ctx)
{
    if (!l->dx[0])
        return;
    const slice_cfg *c = l->cfg;
    const size_t plane = (size_t)l->in[0].h * l->in[0].w, in = shape_size(l->in[0]);
    if (!l->dx_accumulate[0])
        be_run(ctx->be, fill, l->dx[0], (size_t)l->n * in, 0.0f);
    be_run(ctx->be, copy_rows, (size_t)l->n, shape_size(l->out),
           l->dx[0] + (size_t)c->start * plane, in, l->dy, shape_size(l->out),
           l->dx_accumulate[0]);
}

static void slice_describe(const layer *l, layer_attrs *a)
{
    const slice_cfg *c = l->cfg;
    a->channels[0] = c->start;
    a->channels[1] = c->end;
}

const layer_ops layer_slice = {
    .type = "slice",
    .summary = "channels start to end of the input (x[:, start:end]; split, chunk)",
    .cfg_size = sizeof(slice_cfg),
    .min_inputs = 1,
    .max_inputs = 1,
    .set = slice_set,
    .infer = slice_infer,
    .forward = slice_forward,
    .backward = slice_backward,
    .describe = slice_describe,
};
