/*
 * dropout.c — inverted dropout as torch.nn.Dropout (Srivastava et al. 2014): in training each
 * value is kept with probability 1 - p and scaled by 1 / (1 - p), so evaluation is the identity.
 *
 * The keep decision of element i (flat index into the batch) is a pure function of the model
 * seed, this layer's index and the step: dtnn__hash_uniform(seed, index, step * E + i) >= p,
 * where E is the element count of a full max_batch. So a mask never depends on the thread
 * count, the same step replays the same mask (resumed runs), and steps never share counters.
 * The mask is kept in aux (one byte per value) for backward. PyTorch's own random stream is not
 * reproduced: masks match PyTorch in distribution, not bit for bit.
 */
#include <string.h>

#include "layer.h"

typedef struct {
    float p;
    float scale;                /* 1 / (1 - p) */
    uint64_t elements_per_step; /* values in a full max_batch */
} dropout_cfg;

static void dropout_defaults(void *cfg)
{
    dropout_cfg *c = cfg;
    c->p = 0.5f;
}

static dtnn_status dropout_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    dropout_cfg *c = cfg;
    if (!strcmp(key, "p"))
        return layer_opt_drop_probability(key, value, &c->p, err);
    return dtnn_error_set(err, DTNN_ERR_ARG, "unknown option '%s' for dropout (p)", key);
}

static dtnn_status dropout_infer(layer *l, dtnn_error *err)
{
    (void)err;
    dropout_cfg *c = l->cfg;
    l->out = l->in[0];
    c->scale = 1.0f / (1.0f - c->p);
    c->elements_per_step = (uint64_t)shape_size(l->out) * (uint64_t)l->build->max_batch;
    l->aux_bytes = c->p > 0.0f ? shape_size(l->out) : 0;   /* uint8 mask [n, C, H, W] */
    return DTNN_OK;
}

static void dropout_forward(layer *l, const layer_ctx *ctx)
{
    dropout_cfg *c = l->cfg;
    const size_t count = shape_size(l->out) * (size_t)l->n;
    if (!ctx->training || c->p == 0.0f) {
        be_run(ctx->be, copy_rows, 1, count, l->y, count, l->x[0], count, 0);
        return;
    }
    be_run(ctx->be, dropout_forward, count, c->p, c->scale, ctx->seed, (uint64_t)l->index,
           (uint64_t)ctx->step * c->elements_per_step, l->x[0], l->y, l->aux);
}

static void dropout_backward(layer *l, const layer_ctx *ctx)
{
    dropout_cfg *c = l->cfg;
    if (!l->dx[0])
        return;
    const size_t count = shape_size(l->out) * (size_t)l->n;
    if (c->p == 0.0f)
        be_run(ctx->be, copy_rows, 1, count, l->dx[0], count, l->dy, count,
               l->dx_accumulate[0]);
    else
        be_run(ctx->be, dropout_backward, count, c->scale, l->aux, l->dy, l->dx[0],
               l->dx_accumulate[0]);
}

const layer_ops layer_dropout = {
    .type = "dropout",
    .summary = "inverted dropout: zero with probability p, scale the rest by 1/(1-p) (p=0.5)",
    .cfg_size = sizeof(dropout_cfg),
    .min_inputs = 1,
    .max_inputs = 1,
    .defaults = dropout_defaults,
    .set = dropout_set,
    .infer = dropout_infer,
    .forward = dropout_forward,
    .backward = dropout_backward,
};
