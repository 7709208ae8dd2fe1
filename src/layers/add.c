/*
 * add.c — element-wise sum of 2 to 8 inputs of identical shape: the merge of a residual block
 * (He et al. 2016), y = x_0 + x_1 + ... Backward hands dy unchanged to every input.
 *
 * Inputs are visited in increasing index order in backward, because two inputs may be the same
 * producer: the model then marks the first to write its gradient and the second to add to it.
 * No broadcasting: shapes must match exactly.
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

/* One pass over all inputs (a copy and then one pass per further input read y again each
 * time), split over the threads: memory-bound, and two cores draw more bandwidth than one.
 * The sum is ((x_0 + x_1) + x_2) + ... as before, so results are unchanged. */
static void add_forward(layer *l, const layer_ctx *ctx)
{
    (void)ctx;
    const long long count = (long long)(shape_size(l->out) * (size_t)l->n);
    float *y = l->y;
    const float *a = l->x[0], *b = l->x[1];
#pragma omp parallel for schedule(static) if (count > 65536)
    for (long long i = 0; i < count; i++)
        y[i] = a[i] + b[i];
    for (int k = 2; k < l->n_in; k++) {
        const float *x = l->x[k];
#pragma omp parallel for schedule(static) if (count > 65536)
        for (long long i = 0; i < count; i++)
            y[i] += x[i];
    }
}

static void add_backward(layer *l, const layer_ctx *ctx)
{
    (void)ctx;
    const long long count = (long long)(shape_size(l->out) * (size_t)l->n);
    const float *dy = l->dy;
    for (int k = 0; k < l->n_in; k++) {
        float *dx = l->dx[k];
        if (!dx)
            continue;
        if (!l->dx_accumulate[k]) {
#pragma omp parallel for schedule(static) if (count > 65536)
            for (long long i = 0; i < count; i++)
                dx[i] = dy[i];
            continue;
        }
#pragma omp parallel for schedule(static) if (count > 65536)
        for (long long i = 0; i < count; i++)
            dx[i] += dy[i];
    }
}

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
};
