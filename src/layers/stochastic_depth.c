/*
 * stochastic_depth.c — torchvision.ops.StochasticDepth (Huang et al. 2016): in training a
 * residual branch is dropped for a whole sample (mode=row, the default) or for the whole batch
 * (mode=batch) with probability p, and kept ones are scaled by 1 / (1 - p); evaluation is the
 * identity. EfficientNet's and ConvNeXt's blocks end with one before their residual add.
 *
 * Built from the backend's existing operations, so every backend has it: the per-sample
 * factors s (0 or 1 / (1 - p)) are inverted dropout applied to a vector of ones, with the mask
 * drawn as dropout.c's, from (seed, this layer's index, step * max_batch + sample); then y = x
 * * s broadcast over each sample (binary mul), and backward dx = dy * s. As dropout, masks
 * match PyTorch in distribution, not bit for bit; they do not depend on the thread count, and a
 * resumed step replays its mask.
 */
#include <string.h>

#include "layer.h"

typedef struct {
    float p;
    int batch_mode;     /* one draw for the whole batch */
    binary_geom g;      /* x [C, H, W] times s [1, 1, 1] */
} sd_cfg;

static void sd_defaults(void *cfg)
{
    sd_cfg *c = cfg;
    c->p = 0.0f;
}

static dtnn_status sd_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    sd_cfg *c = cfg;
    if (!strcmp(key, "p"))
        return layer_opt_drop_probability(key, value, &c->p, err);
    if (!strcmp(key, "mode")) {
        if (strcmp(value, "row") && strcmp(value, "batch"))
            return dtnn_error_set(err, DTNN_ERR_ARG, "option 'mode': '%s' is not row or batch",
                                  value);
        c->batch_mode = !strcmp(value, "batch");
        return DTNN_OK;
    }
    return dtnn_error_set(err, DTNN_ERR_ARG, "unknown option '%s' for stochastic_depth (p, mode)",
                          key);
}

/* aux, per sample: the factor s, a one, the mask byte: [s: max_batch floats][ones: max_batch
 * floats][mask: max_batch bytes]. */
static dtnn_status sd_infer(layer *l, dtnn_error *err)
{
    (void)err;
    sd_cfg *c = l->cfg;
    l->out = l->in[0];
    c->g = (binary_geom){l->out.c, l->out.h, l->out.w, {l->out.c, l->out.h, l->out.w},
                         {1, 1, 1}, 0, c->batch_mode};
    l->aux_bytes = c->p > 0.0f ? 2 * sizeof(float) + 1 : 0;
    return DTNN_OK;
}

static float *factors(const layer *l) { return (float *)l->aux; }

static void sd_forward(layer *l, const layer_ctx *ctx)
{
    const sd_cfg *c = l->cfg;
    const size_t count = shape_size(l->out) * (size_t)l->n;
    if (!ctx->training || c->p == 0.0f) {
        be_run(ctx->be, copy_rows, 1, count, l->y, count, l->x[0], count, 0);
        return;
    }
    const size_t max_batch = (size_t)l->build->max_batch;
    float *s = factors(l), *ones = s + max_batch;
    uint8_t *mask = (uint8_t *)(ones + max_batch);
    const size_t draws = c->batch_mode ? 1 : (size_t)l->n;
    be_run(ctx->be, fill, ones, draws, 1.0f);
    be_run(ctx->be, dropout_forward, draws, c->p, 1.0f / (1.0f - c->p), ctx->seed,
           (uint64_t)l->index, (uint64_t)ctx->step * max_batch, ones, s, mask);
    be_run(ctx->be, binary_forward, BIN_MUL, &c->g, l->n, l->x[0], s, l->y);
}

static void sd_backward(layer *l, const layer_ctx *ctx)
{
    const sd_cfg *c = l->cfg;
    if (!l->dx[0])
        return;
    const size_t count = shape_size(l->out) * (size_t)l->n;
    if (c->p == 0.0f) {
        be_run(ctx->be, copy_rows, 1, count, l->dx[0], count, l->dy, count,
               l->dx_accumulate[0]);
        return;
    }
    be_run(ctx->be, binary_backward, BIN_MUL, &c->g, l->n, l->x[0], factors(l), l->dy,
           l->dx[0], l->dx_accumulate[0], NULL, 0);
}

const layer_ops layer_stochastic_depth = {
    .type = "stochastic_depth",
    .summary = "torchvision's StochasticDepth: in training zero a whole sample (mode=row) or "
               "the whole batch (mode=batch) with probability p, scale the rest by 1/(1-p); "
               "the identity in evaluation (p=0)",
    .cfg_size = sizeof(sd_cfg),
    .min_inputs = 1,
    .max_inputs = 1,
    .defaults = sd_defaults,
    .set = sd_set,
    .infer = sd_infer,
    .forward = sd_forward,
    .backward = sd_backward,
};
