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

/* One pass over all inputs (a copy and then one pass per further input read y again each
 * time), split over the threads: memory-bound, and two cores draw more bandwidth than one.
 * The sum is ((x_0 + x_1) + x_2) + ... as before, so results are unchanged; a fused ReLU
 * clamps the last pass's result (a NaN stays NaN, as ReLU's). */
static void add_forward(layer *l, const layer_ctx *ctx)
{
    (void)ctx;
    const long long count = (long long)(shape_size(l->out) * (size_t)l->n);
    float *y = l->y;
    const float *a = l->x[0], *b = l->x[1];
    const int relu_now = l->relu_fused && l->n_in == 2;
#pragma omp parallel for schedule(static) if (count > 65536)
    for (long long i = 0; i < count; i++) {
        const float v = a[i] + b[i];
        y[i] = relu_now && v < 0.0f ? 0.0f : v;
    }
    for (int k = 2; k < l->n_in; k++) {
        const float *x = l->x[k];
        const int relu = l->relu_fused && k == l->n_in - 1;
#pragma omp parallel for schedule(static) if (count > 65536)
        for (long long i = 0; i < count; i++) {
            const float v = y[i] + x[i];
            y[i] = relu && v < 0.0f ? 0.0f : v;
        }
    }
}

/* Every input's gradient is dy, or with a fused ReLU dy where y > 0: made once per block of
 * values and handed to all inputs while in L1, so dy and y are read once. Inputs in increasing
 * order within a block: when two are one producer, the first writes and the second adds. */
enum { ADD_BLOCK = 1024 };

static void add_backward(layer *l, const layer_ctx *ctx)
{
    (void)ctx;
    const long long count = (long long)(shape_size(l->out) * (size_t)l->n);
    const long long blocks = (count + ADD_BLOCK - 1) / ADD_BLOCK;
#pragma omp parallel for schedule(static) if (count > 65536)
    for (long long bl = 0; bl < blocks; bl++) {
        const long long i0 = bl * ADD_BLOCK;
        const int len = (int)(count - i0 < ADD_BLOCK ? count - i0 : ADD_BLOCK);
        float masked[ADD_BLOCK];
        const float *g = l->dy + i0;
        if (l->relu_fused) {
            const float *y = l->y + i0;
            for (int i = 0; i < len; i++)
                masked[i] = y[i] > 0.0f ? g[i] : 0.0f;
            g = masked;
        }
        for (int k = 0; k < l->n_in; k++) {
            float *dx = l->dx[k] ? l->dx[k] + i0 : NULL;
            if (!dx)
                continue;
            if (l->dx_accumulate[k])
                for (int i = 0; i < len; i++)
                    dx[i] += g[i];
            else
                for (int i = 0; i < len; i++)
                    dx[i] = g[i];
        }
    }
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
