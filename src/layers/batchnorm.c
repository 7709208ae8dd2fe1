/*
 * batchnorm.c — batch normalisation as torch.nn.BatchNorm2d over C x H x W, and as
 * torch.nn.BatchNorm1d when the input is a flat C x 1 x 1 vector (one channel per feature).
 * Ioffe & Szegedy 2015. Options: eps (1e-5) and momentum (0.1), with PyTorch's meaning.
 *
 * Training normalises with the batch statistics, updates running_mean/running_var and counts
 * num_batches_tracked; evaluation uses the running estimates, and so does training for a
 * batch norm frozen with --freeze-bn (l->eval_mode), whose backward is then the per-channel
 * scale of that normalisation. The per-channel batch mean and
 * 1/sqrt(var + eps) of the last training forward are kept in aux for backward. Backward is
 * defined for training-mode forwards only (the model never runs backward after an eval forward).
 * Not supported: affine=False, track_running_stats=False, momentum=None (cumulative average).
 * A ReLU right after it may be fused in (layer.h, relu_epilogue). The arithmetic lives in the
 * backend's bn_* kernels. With synchronised batch norm (the layer context carries a
 * reduction) the per-channel sums are added over the ranks between the kernel phases, as
 * torch.nn.SyncBatchNorm; otherwise the same phases run channel by channel, each channel's
 * back to back while it is in cache (bn_train_forward / bn_train_backward), with the same
 * results.
 */
#include <math.h>
#include <string.h>

#include "layer.h"

typedef struct {
    float eps, momentum;
    int channels, hw;
    double count;           /* values per channel (over all ranks) in the last forward */
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
    /* Per-channel double sums plus the count (see batchnorm_forward). */
    l->workspace_bytes = sizeof(double) * (2 * (size_t)in.c + 1);
    return DTNN_OK;
}

/* Sums per-channel statistics over the ranks when batch norm is synchronised (buf backend
 * memory, extra host memory, one message); returns 0 when that failed, in which case the
 * caller poisons its output so the loss check stops training. */
static int reduce(const layer_ctx *ctx, double *buf, size_t n, double *extra, size_t n_extra)
{
    return !ctx->reduce_sum ||
           ctx->reduce_sum(ctx->reduce_user, buf, n, extra, n_extra) == DTNN_OK;
}

/* The layers fused in (layer.h): a ReLU, or the add after it and that add's ReLU. With the
 * add, the model has made l->y the add's output. */
static bn_epilogue epilogue(const layer *l, int backward)
{
    bn_epilogue ep = {l->relu_fused, NULL, NULL, NULL, 0};
    const layer *a = l->residual_add;
    if (a) {
        ep.relu = a->relu_fused;
        ep.res = a->x[l->residual_slot];
        ep.out = a->y;
        ep.dres = backward ? a->dx[l->residual_slot] : NULL;
        ep.dres_accumulate = a->dx_accumulate[l->residual_slot];
    }
    return ep;
}

/* Synchronised: the phases with the ranks' sums added between them. Workspace: sum [C],
 * sumsq [C]; the sample count travels with them. Returns 0 when the reduction failed. */
static int forward_synchronised(layer *l, const layer_ctx *ctx)
{
    batchnorm_cfg *c = l->cfg;
    const int C = c->channels;
    float *save_mean = l->aux, *save_invstd = save_mean + C;
    double *sum = ctx->workspace, *sumsq = sum + C;
    be_run(ctx->be, bn_moments, l->n, C, c->hw, l->x[0], l->p[BN_RUNNING_MEAN], sum, sumsq);
    double count = (double)l->n * c->hw;
    const int ok = reduce(ctx, sum, 2 * (size_t)C, &count, 1);
    const bn_epilogue ep = epilogue(l, 0);
    be_run(ctx->be, bn_apply_train, l->n, C, c->hw, l->x[0], l->p[BN_WEIGHT], l->p[BN_BIAS],
           sum, sumsq, count, c->eps, c->momentum, &ep, l->y, save_mean, save_invstd,
           l->p[BN_RUNNING_MEAN], l->p[BN_RUNNING_VAR]);
    c->count = count;
    return ok;
}

static void batchnorm_forward(layer *l, const layer_ctx *ctx)
{
    batchnorm_cfg *c = l->cfg;
    const int C = c->channels;
    const float *gamma = l->p[BN_WEIGHT], *beta = l->p[BN_BIAS];
    float *running_mean = l->p[BN_RUNNING_MEAN], *running_var = l->p[BN_RUNNING_VAR];
    const bn_epilogue ep = epilogue(l, 0);
    /* eval_mode: frozen with --freeze-bn, eval-mode also in training (layer.h) */
    if (!ctx->training || l->eval_mode) {
        be_run(ctx->be, bn_forward_eval, l->n, C, c->hw, l->x[0], gamma, beta, running_mean,
               running_var, c->eps, &ep, l->y);
        return;
    }
    if (ctx->reduce_sum) {
        if (!forward_synchronised(l, ctx))
            be_run(ctx->be, fill, l->y, shape_size(l->out) * l->n, NAN);
    } else {
        float *save_mean = l->aux, *save_invstd = save_mean + C;
        be_run(ctx->be, bn_train_forward, l->n, C, c->hw, l->x[0], gamma, beta, c->eps,
               c->momentum, &ep, l->y, save_mean, save_invstd, running_mean, running_var);
        c->count = (double)l->n * c->hw;
    }
    be_run(ctx->be, add_i64, l->p[BN_NUM_BATCHES], 1);
}

/* With a ReLU or an add fused in, dy is the gradient at their output (layer.h); the add's
 * residual gets its gradient in the sums phase. Workspace: sdy [C], sdyx [C]. */
static void batchnorm_backward(layer *l, const layer_ctx *ctx)
{
    batchnorm_cfg *c = l->cfg;
    const int C = c->channels;
    const float *save_mean = l->aux, *save_invstd = save_mean + C;
    const float *gamma = l->p[BN_WEIGHT], *beta = l->p[BN_BIAS];
    double *sdy = ctx->workspace, *sdyx = sdy + C;
    if (l->eval_mode) {
        if (l->dx[0])
            be_run(ctx->be, bn_backward_eval, l->n, C, c->hw, l->dy, gamma,
                   l->p[BN_RUNNING_VAR], c->eps, l->dx[0], l->dx_accumulate[0]);
        return;
    }
    const bn_epilogue ep = epilogue(l, 1);
    if (!ctx->reduce_sum)
        be_run(ctx->be, bn_train_backward, l->n, C, c->hw, l->x[0], l->dy, gamma, beta, &ep,
               save_mean, save_invstd, sdy, sdyx, l->dx[0], l->dx_accumulate[0]);
    else
        be_run(ctx->be, bn_backward_sums, l->n, C, c->hw, l->x[0], l->dy, gamma, beta, &ep,
               save_mean, save_invstd, sdy, sdyx);
    /* This rank's sums: when synchronised, the gradient all-reduce adds the ranks'. */
    be_run(ctx->be, bn_param_grads, C, sdy, sdyx, l->g[BN_WEIGHT], l->g[BN_BIAS]);
    if (!ctx->reduce_sum)
        return;
    int ok = reduce(ctx, sdy, 2 * (size_t)C, NULL, 0);
    if (!l->dx[0])
        return;
    be_run(ctx->be, bn_backward_apply, l->n, C, c->hw, l->x[0], l->dy, gamma, beta, &ep,
           save_mean, save_invstd, sdy, sdyx, c->count, l->dx[0], l->dx_accumulate[0]);
    if (!ok)
        be_run(ctx->be, fill, l->dx[0], shape_size(l->in[0]) * l->n, NAN);
}

static const char *batchnorm_method(const layer *l)
{
    if (l->residual_add)
        return l->residual_add->relu_fused ? "+add+relu" : "+add";
    return l->relu_fused ? "+relu" : "";
}

static double batchnorm_flops(const layer *l)
{
    /* One multiply-add per value at inference (scale and shift folded per channel). */
    return 2.0 * (double)shape_size(l->out);
}

static void batchnorm_describe(const layer *l, layer_attrs *a)
{
    const batchnorm_cfg *c = l->cfg;
    *a = (layer_attrs){.eps = c->eps};
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
    .method = batchnorm_method,
    .describe = batchnorm_describe,
    .relu_epilogue = 1,
    .residual_epilogue = 1,
    .eval_when_frozen = 1,
    .normalizes = 1,
};
