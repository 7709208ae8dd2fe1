/*
 * batchnorm.c — batch normalisation as torch.nn.BatchNorm2d over C x H x W, and as
 * torch.nn.BatchNorm1d when the input is a flat C x 1 x 1 vector (one channel per feature).
 * Ioffe & Szegedy 2015. Options: eps (1e-5) and momentum (0.1), with PyTorch's meaning.
 *
 * Training normalises with the batch statistics, updates running_mean/running_var and counts
 * num_batches_tracked; evaluation uses the running estimates. The per-channel batch mean and
 * 1/sqrt(var + eps) of the last training forward are kept in aux for backward. Backward is
 * defined for training-mode forwards only (the model never runs backward after an eval forward).
 * Not supported: affine=False, track_running_stats=False, momentum=None (cumulative average).
 * The arithmetic lives in the backend's bn_* kernels.
 */
#include <string.h>

#include "layer.h"

typedef struct {
    float eps, momentum;
    int channels, hw;
} batchnorm_cfg;

enum { BN_WEIGHT = 0, BN_BIAS, BN_RUNNING_MEAN, BN_RUNNING_VAR, BN_NUM_BATCHES };

static void batchnorm_defaults(void *cfg)
{
    batchnorm_cfg *c = cfg;
    c->eps = 1e-5f;
    c->momentum = 0.1f;
}

static dtnn_status batchnorm_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    batchnorm_cfg *c = cfg;
    if (!strcmp(key, "eps")) {
        dtnn_status st = layer_opt_float(key, value, 0.0, 1.0, &c->eps, err);
        if (st == DTNN_OK && !(c->eps > 0.0f))
            return dtnn_error_set(err, DTNN_ERR_ARG, "option 'eps': '%s' must be positive",
                                  value);
        return st;
    }
    if (!strcmp(key, "momentum"))
        return layer_opt_float(key, value, 0.0, 1.0, &c->momentum, err);
    return dtnn_error_set(err, DTNN_ERR_ARG,
                          "unknown option '%s' for batchnorm (eps, momentum)", key);
}

static dtnn_status batchnorm_infer(layer *l, dtnn_error *err)
{
    (void)err;
    batchnorm_cfg *c = l->cfg;
    dtnn_shape in = l->in[0];
    c->channels = in.c;
    c->hw = in.h * in.w;
    l->out = in;
    int64_t cd[1] = {in.c};
    int64_t none[1] = {0};
    layer_declare(l, "weight", DTNN_TENSOR_PARAM, DTNN_F32, 1, cd, INIT_ONES, in.c, in.c);
    layer_declare(l, "bias", DTNN_TENSOR_PARAM, DTNN_F32, 1, cd, INIT_ZEROS, in.c, in.c);
    layer_declare(l, "running_mean", DTNN_TENSOR_BUFFER, DTNN_F32, 1, cd, INIT_ZEROS, 0, 0);
    layer_declare(l, "running_var", DTNN_TENSOR_BUFFER, DTNN_F32, 1, cd, INIT_ONES, 0, 0);
    /* A 0-d int64 tensor, exactly as PyTorch's state_dict holds it. */
    layer_declare(l, "num_batches_tracked", DTNN_TENSOR_BUFFER, DTNN_I64, 0, none, INIT_ZEROS,
                  0, 0);
    /* save_mean [C] then save_invstd [C]: per channel, so independent of the batch. */
    l->aux_bytes = 0;
    l->aux_fixed_bytes = 2 * sizeof(float) * (size_t)in.c;
    return DTNN_OK;
}

static void batchnorm_forward(layer *l, const layer_ctx *ctx)
{
    batchnorm_cfg *c = l->cfg;
    const float *gamma = l->p[BN_WEIGHT], *beta = l->p[BN_BIAS];
    float *running_mean = l->p[BN_RUNNING_MEAN], *running_var = l->p[BN_RUNNING_VAR];
    if (!ctx->training) {
        ctx->be->bn_forward_eval(l->n, c->channels, c->hw, l->x[0], gamma, beta, running_mean,
                                 running_var, c->eps, l->y);
        return;
    }
    float *save_mean = l->aux, *save_invstd = save_mean + c->channels;
    ctx->be->bn_forward_train(l->n, c->channels, c->hw, l->x[0], gamma, beta, c->eps,
                              c->momentum, l->y, save_mean, save_invstd, running_mean,
                              running_var);
    int64_t *tracked = l->p[BN_NUM_BATCHES];
    (*tracked)++;
}

static void batchnorm_backward(layer *l, const layer_ctx *ctx)
{
    batchnorm_cfg *c = l->cfg;
    const float *save_mean = l->aux, *save_invstd = save_mean + c->channels;
    ctx->be->bn_backward(l->n, c->channels, c->hw, l->x[0], l->dy, l->p[BN_WEIGHT], save_mean,
                         save_invstd, l->g[BN_WEIGHT], l->g[BN_BIAS], l->dx[0],
                         l->dx_accumulate[0]);
}

static double batchnorm_flops(const layer *l)
{
    /* One multiply-add per value at inference (scale and shift folded per channel). */
    return 2.0 * (double)shape_size(l->out);
}

const layer_ops layer_batchnorm = {
    .type = "batchnorm",
    .summary = "batch normalisation, BatchNorm2d / BatchNorm1d on flat input (eps, momentum)",
    .cfg_size = sizeof(batchnorm_cfg),
    .min_inputs = 1,
    .max_inputs = 1,
    .defaults = batchnorm_defaults,
    .set = batchnorm_set,
    .infer = batchnorm_infer,
    .forward = batchnorm_forward,
    .backward = batchnorm_backward,
    .flops = batchnorm_flops,
};
