/*
 * external.c — a layer computed by the caller's functions (dtnn_external_ops: the Python
 * package's layers written in Python). Its values cross to host copies around each call, so
 * it runs on every backend; its gradients are added into the backend's buffers through the
 * table's axpby, as every layer's accumulation. The first failure of a function is kept and
 * reported by the model after that forward or backward (layer_ops.failure).
 */
#include <stdlib.h>
#include <string.h>

#include "external.h"

enum { MAX_IN = DTNN_EXTERNAL_MAX_INPUTS, MAX_P = DTNN_EXTERNAL_MAX_PARAMS };

typedef struct {
    dtnn_external_ops ops;
    dtnn_external_params params;
    int tensor[MAX_P];          /* the parameters' indices into l->t */
    size_t param_count[MAX_P];
    float *host;                /* one block holding the host copies below */
    const float *hx[MAX_IN];
    float *hx_w[MAX_IN], *hdx[MAX_IN], *hp[MAX_P], *hdp[MAX_P], *hy, *hdy;
    dtnn_error failure;         /* the first failure (code DTNN_OK: none) */
} external_cfg;

void layer_external_bind(layer *l, const dtnn_external_ops *ops)
{
    external_cfg *c = l->cfg;
    c->ops = *ops;
}

static dtnn_status external_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    (void)cfg;
    (void)value;
    return dtnn_error_set(err, DTNN_ERR_ARG, "an external layer takes no option '%s'", key);
}

static dtnn_status declare_params(layer *l, external_cfg *c, dtnn_error *err)
{
    static const layer_init inits[] = {INIT_ZEROS, INIT_ONES, INIT_WEIGHT, INIT_BIAS};
    const dtnn_external_params *p = &c->params;
    if (p->count < 0 || p->count > MAX_P)
        return dtnn_error_set(err, DTNN_ERR_ARG, "%d parameters: at most %d", p->count, MAX_P);
    for (int k = 0; k < p->count; k++) {
        if (p->ndim[k] < 1 || p->ndim[k] > 4 || (unsigned)p->init[k] > DTNN_EXTERNAL_BIAS ||
            !memchr(p->names[k], '\0', sizeof p->names[k]) || !p->names[k][0])
            return dtnn_error_set(err, DTNN_ERR_ARG, "parameter %d: a name of 1 to 23 "
                                  "characters, 1 to 4 dimensions and a known init", k);
        size_t count = 1;
        for (int d = 0; d < p->ndim[k]; d++) {
            if (p->dims[k][d] < 1 || p->dims[k][d] > (1 << 28))
                return dtnn_error_set(err, DTNN_ERR_ARG, "parameter '%s': dimension %d is %lld",
                                      p->names[k], d, (long long)p->dims[k][d]);
            count *= (size_t)p->dims[k][d];
        }
        double fan_in = p->fan_in[k] > 0 ? p->fan_in[k]
                        : p->ndim[k] == 1 ? (double)p->dims[k][0]
                                          : (double)count / (double)p->dims[k][0];
        c->tensor[k] = layer_declare(l, p->names[k], DTNN_TENSOR_PARAM, DTNN_F32, p->ndim[k],
                                     p->dims[k], inits[p->init[k]], fan_in,
                                     (double)p->dims[k][0]);
        if (c->tensor[k] < 0)
            return dtnn_error_set(err, DTNN_ERR_ARG, "parameter '%s' could not be declared "
                                  "(name used twice?)", p->names[k]);
        c->param_count[k] = count;
    }
    return DTNN_OK;
}

/* The host copies: inputs (also written by nobody: hx_w aliases them for the copies in),
 * input gradients, parameters and their gradients, output and its gradient. */
static dtnn_status host_block(layer *l, external_cfg *c, dtnn_error *err)
{
    const size_t batch = (size_t)l->build->max_batch;
    size_t floats = 2 * batch * shape_size(l->out), largest = batch * shape_size(l->out);
    for (int i = 0; i < l->n_in; i++) {
        floats += 2 * batch * shape_size(l->in[i]);
        largest = DTNN_MAX(largest, batch * shape_size(l->in[i]));
    }
    for (int k = 0; k < c->params.count; k++) {
        floats += 2 * c->param_count[k];
        largest = DTNN_MAX(largest, c->param_count[k]);
    }
    c->host = malloc(sizeof(float) * floats);
    if (!c->host)
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for %zu floats of host "
                              "copies", floats);
    float *at = c->host;
    for (int i = 0; i < l->n_in; i++) {
        c->hx_w[i] = at;
        c->hx[i] = at;
        c->hdx[i] = at + batch * shape_size(l->in[i]);
        at += 2 * batch * shape_size(l->in[i]);
    }
    for (int k = 0; k < c->params.count; k++) {
        c->hp[k] = at;
        c->hdp[k] = at + c->param_count[k];
        at += 2 * c->param_count[k];
    }
    c->hy = at;
    c->hdy = at + batch * shape_size(l->out);
    /* the gradients are uploaded to the workspace and added from there */
    l->workspace_bytes = sizeof(float) * largest;
    return DTNN_OK;
}

static dtnn_status external_infer(layer *l, dtnn_error *err)
{
    external_cfg *c = l->cfg;
    if (!c->ops.forward)
        return dtnn_error_set(err, DTNN_ERR_ARG, "an external layer needs a forward function");
    if (l->build->training && !c->ops.backward)
        return dtnn_error_set(err, DTNN_ERR_ARG, "external layer of type '%s' has no backward "
                              "function: build the model for inference only (training 0)",
                              c->ops.type ? c->ops.type : "?");
    int in_chw[3 * MAX_IN], out_chw[3];
    for (int i = 0; i < l->n_in; i++) {
        in_chw[3 * i] = l->in[i].c;
        in_chw[3 * i + 1] = l->in[i].h;
        in_chw[3 * i + 2] = l->in[i].w;
    }
    out_chw[0] = l->in[0].c;
    out_chw[1] = l->in[0].h;
    out_chw[2] = l->in[0].w;
    c->params.count = 0;
    if (c->ops.infer) {
        dtnn_error e = {0};
        dtnn_status st = c->ops.infer(c->ops.user, l->n_in, in_chw, out_chw, &c->params, &e);
        if (st)
            return dtnn_error_set(err, st, "%s", e.message[0] ? e.message : "infer failed");
    }
    if (out_chw[0] < 1 || out_chw[1] < 1 || out_chw[2] < 1)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "output shape %dx%dx%d", out_chw[0],
                              out_chw[1], out_chw[2]);
    l->out = (dtnn_shape){out_chw[0], out_chw[1], out_chw[2]};
    dtnn_status st = declare_params(l, c, err);
    return st ? st : host_block(l, c, err);
}

static void fail(external_cfg *c, dtnn_status st, const char *what)
{
    c->failure.code = st;
    if (!c->failure.message[0])
        dtnn_error_set(&c->failure, st, "its %s function failed", what);
}

static void download_inputs(layer *l, external_cfg *c, dtnn_backend *be)
{
    for (int i = 0; i < l->n_in; i++)
        be_download(be, c->hx_w[i], l->x[i], sizeof(float) * (size_t)l->n * shape_size(l->in[i]));
    for (int k = 0; k < c->params.count; k++)
        be_download(be, c->hp[k], l->p[c->tensor[k]], sizeof(float) * c->param_count[k]);
}

/* Each forward and backward starts afresh: a failure is reported once, by the pass it broke
 * (the caller may fix its cause and run again). */
static void external_forward(layer *l, const layer_ctx *ctx)
{
    external_cfg *c = l->cfg;
    c->failure = (dtnn_error){0};
    download_inputs(l, c, ctx->be);
    dtnn_status st = c->ops.forward(c->ops.user, l->n, ctx->training, c->hx,
                                    (const float *const *)c->hp, c->hy, &c->failure);
    if (st) {
        fail(c, st, "forward");
        return;
    }
    be_upload(ctx->be, l->y, c->hy, sizeof(float) * (size_t)l->n * shape_size(l->out));
}

/* dst = src (host) or dst += src, through the workspace. */
static void give_gradient(const layer_ctx *ctx, float *dst, const float *src, size_t count,
                          int accumulate)
{
    if (!accumulate) {
        be_upload(ctx->be, dst, src, sizeof(float) * count);
        return;
    }
    be_upload(ctx->be, ctx->workspace, src, sizeof(float) * count);
    be_run(ctx->be, axpby, count, 1.0f, (const float *)ctx->workspace, 1.0f, dst);
}

static void external_backward(layer *l, const layer_ctx *ctx)
{
    external_cfg *c = l->cfg;
    c->failure = (dtnn_error){0};
    download_inputs(l, c, ctx->be);
    const size_t out = (size_t)l->n * shape_size(l->out);
    be_download(ctx->be, c->hy, l->y, sizeof(float) * out);
    be_download(ctx->be, c->hdy, l->dy, sizeof(float) * out);
    float *dx[MAX_IN], *dp[MAX_P];
    for (int i = 0; i < l->n_in; i++)
        dx[i] = l->dx[i] ? c->hdx[i] : NULL;
    for (int k = 0; k < c->params.count; k++)
        dp[k] = l->g[c->tensor[k]] ? c->hdp[k] : NULL;
    dtnn_status st = c->ops.backward(c->ops.user, l->n, c->hx, (const float *const *)c->hp,
                                     c->hy, c->hdy, dx, dp, &c->failure);
    if (st) {
        fail(c, st, "backward");
        return;
    }
    for (int i = 0; i < l->n_in; i++)
        if (dx[i])
            give_gradient(ctx, l->dx[i], dx[i], (size_t)l->n * shape_size(l->in[i]),
                          l->dx_accumulate[i]);
    for (int k = 0; k < c->params.count; k++)
        if (dp[k])
            give_gradient(ctx, l->g[c->tensor[k]], dp[k], c->param_count[k], 1);
}

static dtnn_status external_failure(const layer *l, dtnn_error *err)
{
    const external_cfg *c = l->cfg;
    if (!c->failure.code)
        return DTNN_OK;
    return dtnn_error_set(err, c->failure.code, "layer '%s' (%s): %s", l->name,
                          c->ops.type ? c->ops.type : "external", c->failure.message);
}

static void external_release(layer *l)
{
    external_cfg *c = l->cfg;
    free(c->host);
    c->host = NULL;
}

const layer_ops layer_external = {
    .type = "external",
    .summary = "a layer computed by the caller's functions (dtnn_model_add_external)",
    .cfg_size = sizeof(external_cfg),
    .min_inputs = 1,
    .max_inputs = MAX_IN,
    .set = external_set,
    .infer = external_infer,
    .forward = external_forward,
    .backward = external_backward,
    .release = external_release,
    .backward_reads_output = 1,
    .failure = external_failure,
};
