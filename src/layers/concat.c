/*
 * concat.c — channel concatenation of 2 to 16 inputs, as torch.cat(xs, dim=1) on NCHW tensors:
 * every input must have the same H x W; the output has the sum of their channels, input 0 first.
 * Per sample each input is one contiguous block of C_i * H * W values, so forward and backward
 * are block copies. Backward visits inputs in increasing index order, because two inputs may be
 * the same producer (the first writes its gradient, the second adds).
 */
#include <string.h>

#include "layer.h"

static dtnn_status concat_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    (void)cfg;
    (void)value;
    return dtnn_error_set(err, DTNN_ERR_ARG, "unknown option '%s' for concat (it has none)",
                          key);
}

static dtnn_status concat_infer(layer *l, dtnn_error *err)
{
    dtnn_shape a = l->in[0];
    int channels = 0;
    for (int i = 0; i < l->n_in; i++) {
        dtnn_shape b = l->in[i];
        if (b.h != a.h || b.w != a.w)
            return dtnn_error_set(err, DTNN_ERR_SHAPE, "concat needs inputs of one height and "
                                  "width: input 0 is %dx%dx%d but input %d is %dx%dx%d", a.c,
                                  a.h, a.w, i, b.c, b.h, b.w);
        channels += b.c;
    }
    l->out = (dtnn_shape){channels, a.h, a.w};
    return DTNN_OK;
}

/* Input k's block sits at `offset` inside each output sample: a strided copy per input. */
static void concat_forward(layer *l, const layer_ctx *ctx)
{
    const size_t out_size = shape_size(l->out);
    size_t offset = 0;
    for (int k = 0; k < l->n_in; k++) {
        const size_t in_size = shape_size(l->in[k]);
        be_run(ctx->be, copy_rows, (size_t)l->n, in_size, l->y + offset, out_size, l->x[k],
               in_size, 0);
        offset += in_size;
    }
}

static void concat_backward(layer *l, const layer_ctx *ctx)
{
    const size_t out_size = shape_size(l->out);
    size_t offset = 0;
    for (int k = 0; k < l->n_in; k++) {
        const size_t in_size = shape_size(l->in[k]);
        if (l->dx[k])
            be_run(ctx->be, copy_rows, (size_t)l->n, in_size, l->dx[k], in_size,
                   l->dy + offset, out_size, l->dx_accumulate[k]);
        offset += in_size;
    }
}

const layer_ops layer_concat = {
    .type = "concat",
    .summary = "channel concatenation of 2 to 16 inputs of one height and width",
    .cfg_size = 0,
    .min_inputs = 2,
    .max_inputs = 16,
    .set = concat_set,
    .infer = concat_infer,
    .forward = concat_forward,
    .backward = concat_backward,
};
