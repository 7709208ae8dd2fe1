/*
 * reshape.c — reinterprets C x H x W as another shape of as many values, NCHW memory order
 * kept (torch's view / reshape of a contiguous tensor): ECA's channel descriptor [C, 1, 1]
 * seen as one row [1, C, 1] for a 1-D convolution across the channels, and back. Option:
 * shape = CxHxW (required). flatten is the reshape to (C*H*W) x 1 x 1.
 */
#include <stdio.h>
#include <string.h>

#include "layer.h"

typedef struct {
    int c, h, w;
} reshape_cfg;

static dtnn_status reshape_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    reshape_cfg *r = cfg;
    if (strcmp(key, "shape"))
        return dtnn_error_set(err, DTNN_ERR_ARG, "unknown option '%s' for reshape (shape)", key);
    int used = 0;
    if (sscanf(value, "%dx%dx%d%n", &r->c, &r->h, &r->w, &used) != 3 || value[used] ||
        r->c < 1 || r->h < 1 || r->w < 1)
        return dtnn_error_set(err, DTNN_ERR_ARG, "reshape: shape = %s is not CxHxW of "
                              "positive sizes", value);
    return DTNN_OK;
}

static dtnn_status reshape_infer(layer *l, dtnn_error *err)
{
    const reshape_cfg *r = l->cfg;
    if (!r->c)
        return dtnn_error_set(err, DTNN_ERR_ARG, "reshape needs shape = CxHxW");
    const dtnn_shape in = l->in[0], out = {r->c, r->h, r->w};
    if (shape_size(out) != shape_size(in))
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "reshape: %dx%dx%d holds %zu values, its "
                              "input %dx%dx%d %zu", out.c, out.h, out.w, shape_size(out), in.c,
                              in.h, in.w, shape_size(in));
    l->out = out;
    return DTNN_OK;
}

const layer_ops layer_reshape = {
    .type = "reshape",
    .summary = "C x H x W -> another shape of as many values (memory order kept)",
    .cfg_size = sizeof(reshape_cfg),
    .min_inputs = 1,
    .max_inputs = 1,
    .set = reshape_set,
    .infer = reshape_infer,
    .forward = layer_view_forward,
    .backward = layer_view_backward,
    .inplace = LAYER_VIEW,
};
