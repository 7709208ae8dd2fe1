/*
 * reduce.c — the sum, mean or L2 norm of each sample over its channels (output 1 x H x W:
 * torch.mean(x, 1, keepdim=True), CBAM's channel pooling, ONNX ReduceMean / ReduceSum /
 * ReduceL2 over axis 1) or over each plane (output C x 1 x 1: x.sum((2, 3)), x.norm(dim=(2,
 * 3)) of ConvNeXt-V2's global response normalisation; the mean over a plane is
 * global_avgpool). Over the channels, groups = G reduces across G equal groups of them instead
 * (output C/G x H x W: x.view(N, G, C / G, H, W).sum(1), the radix sum of ResNeSt's and SKNet's
 * split attention); the arithmetic is the same channel reduction on G "channels" of
 * C/G x H x W values each. Options: axes = channels | spatial (required), op = mean | sum | l2
 * (mean), groups (axes = channels only).
 */
#include <string.h>

#include "layer.h"

typedef struct {
    int axes;           /* 0: not given, 1 channels, 2 spatial */
    int op;             /* 0 mean, 1 sum, 2 l2 */
    int groups;         /* over channels: across this many groups (0: all of them) */
    reduce_geom g;
} reduce_cfg;

static dtnn_status reduce_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    reduce_cfg *c = cfg;
    if (!strcmp(key, "axes")) {
        c->axes = !strcmp(value, "channels") ? 1 : !strcmp(value, "spatial") ? 2 : -1;
        if (c->axes > 0)
            return DTNN_OK;
    } else if (!strcmp(key, "op")) {
        c->op = !strcmp(value, "sum") ? 1 : !strcmp(value, "mean") ? 0 : !strcmp(value, "l2") ? 2
                                                                                          : -1;
        if (c->op >= 0)
            return DTNN_OK;
    } else if (!strcmp(key, "groups")) {
        return layer_opt_int(key, value, 1, 1 << 24, &c->groups, err);
    } else {
        return dtnn_error_set(err, DTNN_ERR_ARG, "unknown option '%s' for reduce (axes, op, "
                              "groups)", key);
    }
    return dtnn_error_set(err, DTNN_ERR_ARG, "%s = %s: axes is channels or spatial, op mean, "
                          "sum or l2", key, value);
}

static dtnn_status reduce_infer(layer *l, dtnn_error *err)
{
    reduce_cfg *c = l->cfg;
    const dtnn_shape x = l->in[0];
    if (!c->axes)
        return dtnn_error_set(err, DTNN_ERR_ARG, "reduce needs axes = channels or spatial");
    if (c->groups && c->axes != 1)
        return dtnn_error_set(err, DTNN_ERR_ARG, "reduce: groups is for axes = channels");
    if (c->groups && x.c % c->groups)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "reduce: groups = %d does not divide the "
                              "input's %d channels", c->groups, x.c);
    if (c->axes == 1) {
        const int groups = c->groups ? c->groups : x.c;
        c->g = (reduce_geom){groups, x.c / groups * x.h * x.w, 1, c->op == 0, c->op == 2};
        l->out = (dtnn_shape){x.c / groups, x.h, x.w};
    } else {
        c->g = (reduce_geom){x.c, x.h * x.w, 0, c->op == 0, c->op == 2};
        l->out = (dtnn_shape){x.c, 1, 1};
    }
    return DTNN_OK;
}

static void reduce_forward(layer *l, const layer_ctx *ctx)
{
    const reduce_cfg *c = l->cfg;
    be_run(ctx->be, reduce_forward, &c->g, l->n, l->x[0], l->y);
}

static void reduce_backward(layer *l, const layer_ctx *ctx)
{
    const reduce_cfg *c = l->cfg;
    if (l->dx[0])
        be_run(ctx->be, reduce_backward, &c->g, l->n, l->x[0], l->y, l->dy, l->dx[0],
               l->dx_accumulate[0]);
}

static void reduce_describe(const layer *l, layer_attrs *a)
{
    const reduce_cfg *c = l->cfg;
    a->reduce_over_channels = c->axes == 1;
    a->reduce_sum = c->op == 1;
    a->reduce_l2 = c->op == 2;
    a->reduce_groups = c->groups;
}

static double reduce_flops(const layer *l)
{
    const reduce_cfg *c = l->cfg;
    return (c->op == 2 ? 2.0 : 1.0) * (double)shape_size(l->in[0]);
}

static int reduce_plane_mean(const layer *l)
{
    const reduce_cfg *c = l->cfg;
    return c->axes == 2 && c->op == 0;
}

const layer_ops layer_reduce = {
    .type = "reduce",
    .summary = "sum, mean or L2 norm over the channels (1 x H x W), across channel groups "
               "(C/G x H x W) or over each plane (C x 1 x 1)",
    .cfg_size = sizeof(reduce_cfg),
    .min_inputs = 1,
    .max_inputs = 1,
    /* an L2 norm's backward divides by it (static for every op: the cost is a shared buffer
     * given up after a reduction, which an in-place ReLU rarely follows) */
    .backward_reads_output = 1,
    .set = reduce_set,
    .infer = reduce_infer,
    .forward = reduce_forward,
    .backward = reduce_backward,
    .flops = reduce_flops,
    .describe = reduce_describe,
    .plane_mean = reduce_plane_mean,
};
