/*
 * flatten.c — reshapes C x H x W to (C*H*W) x 1 x 1, as torch.nn.Flatten: NCHW memory order is
 * kept, so a following linear layer sees PyTorch's feature order.
 */
#include <string.h>

#include "layer.h"

static dtnn_status flatten_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    (void)cfg;
    (void)value;
    return dtnn_error_set(err, DTNN_ERR_ARG, "unknown option '%s' for flatten (it has none)",
                          key);
}

static dtnn_status flatten_infer(layer *l, dtnn_error *err)
{
    (void)err;
    l->out = (dtnn_shape){(int)shape_size(l->in[0]), 1, 1};
    return DTNN_OK;
}

const layer_ops layer_flatten = {
    .type = "flatten",
    .summary = "C x H x W -> (C*H*W) features",
    .cfg_size = 0,
    .min_inputs = 1,
    .max_inputs = 1,
    .set = flatten_set,
    .infer = flatten_infer,
    .forward = layer_view_forward,
    .backward = layer_view_backward,
    .inplace = LAYER_VIEW,
};
