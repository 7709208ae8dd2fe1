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
#include <math.h>
#include <string.h>

#include "layer.h"

typedef struct {
    float eps, momentum;
    int channels, hw;
    double global_count;    /* values per channel over all ranks in the last synced forward */
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
    /* Synchronised statistics: per-channel double sums plus the global count. */
    l->workspace_bytes = sizeof(double) * (2 * (size_t)in.c + 1);
    return DTNN_OK;
}

/* The value of x[i, ch, j] for the per-channel loops below. */
#define BN_AT(base, i, ch) ((base) + ((size_t)(i) * c->channels + (ch)) * c->hw)

/* Training forward with statistics over every rank's batch (torch.nn.SyncBatchNorm): the
 * per-channel sum and count are all-reduced for the mean, then the squared deviations for the
 * biased variance, as the single-process kernel computes them, in double. */
static void batchnorm_forward_sync(layer *l, const layer_ctx *ctx)
{
    batchnorm_cfg *c = l->cfg;
    const int C = c->channels, hw = c->hw, n = l->n;
    const float *x = l->x[0], *gamma = l->p[BN_WEIGHT], *beta = l->p[BN_BIAS];
    float *running_mean = l->p[BN_RUNNING_MEAN], *running_var = l->p[BN_RUNNING_VAR];
    float *save_mean = l->aux, *save_invstd = save_mean + C;
    double *acc = ctx->workspace;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < C; ch++) {
        double sum = 0.0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < hw; j++)
                sum += BN_AT(x, i, ch)[j];
        acc[ch] = sum;
    }
    acc[C] = (double)n * hw;
    int failed = ctx->reduce_sum(ctx->reduce_user, acc, (size_t)C + 1) != DTNN_OK;
    const double m = acc[C];
    for (int ch = 0; ch < C; ch++)
        acc[C + 1 + ch] = acc[ch] / m;        /* the means, kept past the next reduction */
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < C; ch++) {
        double mean = acc[C + 1 + ch], sq = 0.0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < hw; j++) {
                double d = BN_AT(x, i, ch)[j] - mean;
                sq += d * d;
            }
        acc[ch] = sq;
    }
    failed |= ctx->reduce_sum(ctx->reduce_user, acc, (size_t)C) != DTNN_OK;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < C; ch++) {
        double mean = acc[C + 1 + ch], var = acc[ch] / m;
        float invstd = (float)(1.0 / sqrt(var + c->eps));
        float fmean = (float)mean, scale = gamma[ch] * invstd, shift = beta[ch];
        /* A failed reduction poisons the output, so the loss check stops training. */
        if (failed)
            scale = shift = NAN;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < hw; j++)
                BN_AT(l->y, i, ch)[j] = (BN_AT(x, i, ch)[j] - fmean) * scale + shift;
        save_mean[ch] = fmean;
        save_invstd[ch] = invstd;
        double unbiased = m > 1 ? acc[ch] / (m - 1) : var;
        running_mean[ch] = (float)((1.0 - c->momentum) * running_mean[ch] + c->momentum * mean);
        running_var[ch] = (float)((1.0 - c->momentum) * running_var[ch] + c->momentum * unbiased);
    }
    c->global_count = m;
}

/* Backward of the synchronised forward: gamma and beta get this rank's sums (the gradient
 * all-reduce adds the ranks), dx needs the global sums. */
static void batchnorm_backward_sync(layer *l, const layer_ctx *ctx)
{
    batchnorm_cfg *c = l->cfg;
    const int C = c->channels, hw = c->hw, n = l->n;
    const float *x = l->x[0], *gamma = l->p[BN_WEIGHT];
    const float *save_mean = l->aux, *save_invstd = save_mean + C;
    double *acc = ctx->workspace;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < C; ch++) {
        double sdy = 0.0, sdyx = 0.0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < hw; j++) {
                float dy = BN_AT(l->dy, i, ch)[j];
                sdy += dy;
                sdyx += dy * (double)((BN_AT(x, i, ch)[j] - save_mean[ch]) * save_invstd[ch]);
            }
        l->g[BN_WEIGHT][ch] += (float)sdyx;
        l->g[BN_BIAS][ch] += (float)sdy;
        acc[ch] = sdy;
        acc[C + ch] = sdyx;
    }
    int failed = ctx->reduce_sum(ctx->reduce_user, acc, 2 * (size_t)C) != DTNN_OK;
    if (!l->dx[0])
        return;
    const double m = c->global_count;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < C; ch++) {
        const float k = failed ? NAN : gamma[ch] * save_invstd[ch];
        const float mdy = (float)(acc[ch] / m), mdyx = (float)(acc[C + ch] / m);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < hw; j++) {
                float xhat = (BN_AT(x, i, ch)[j] - save_mean[ch]) * save_invstd[ch];
                float g = k * (BN_AT(l->dy, i, ch)[j] - mdy - xhat * mdyx);
                float *dx = &BN_AT(l->dx[0], i, ch)[j];
                *dx = l->dx_accumulate[0] ? *dx + g : g;
            }
    }
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
    int64_t *tracked = l->p[BN_NUM_BATCHES];
    if (ctx->reduce_sum) {
        batchnorm_forward_sync(l, ctx);
        (*tracked)++;
        return;
    }
    float *save_mean = l->aux, *save_invstd = save_mean + c->channels;
    ctx->be->bn_forward_train(l->n, c->channels, c->hw, l->x[0], gamma, beta, c->eps,
                              c->momentum, l->y, save_mean, save_invstd, running_mean,
                              running_var);
    (*tracked)++;
}

static void batchnorm_backward(layer *l, const layer_ctx *ctx)
{
    batchnorm_cfg *c = l->cfg;
    if (ctx->reduce_sum) {
        batchnorm_backward_sync(l, ctx);
        return;
    }
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
