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

static void concat_forward(layer *l, const layer_ctx *ctx)
{
    (void)ctx;
    const size_t out_size = shape_size(l->out);
    size_t offset = 0;  /* of input k's block inside one output sample */
    for (int k = 0; k < l->n_in; k++) {
        const size_t in_size = shape_size(l->in[k]);
        for (int s = 0; s < l->n; s++)
            memcpy(l->y + s * out_size + offset, l->x[k] + s * in_size, sizeof(float) * in_size);
        offset += in_size;
    }
}

static void concat_backward(layer *l, const layer_ctx *ctx)
{
    (void)ctx;
    const size_t out_size = shape_size(l->out);
    size_t offset = 0;
    for (int k = 0; k < l->n_in; k++) {
        const size_t in_size = shape_size(l->in[k]);
        float *dx = l->dx[k];
        if (dx) {
            for (int s = 0; s < l->n; s++) {
                const float *src = l->dy + s * out_size + offset;
                float *dst = dx + s * in_size;
                if (!l->dx_accumulate[k]) {
                    memcpy(dst, src, sizeof(float) * in_size);
                    continue;
                }
                for (size_t i = 0; i < in_size; i++)
                    dst[i] += src[i];
            }
        }
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
