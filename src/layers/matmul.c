/*
 * matmul.c — the matrix product of two computed tensors, batched over their leading axis, as
 * torch.matmul on [N, B, M, K] and [N, B, K, N']: self-attention's q k^T and its weights
 * times v. Input a is B x M x K (C x H x W), input b B x K x N'; the output B x M x N'. No
 * options. Backward: da = dy b^T, db = a^T dy, each one batched product.
 */
#include "layer.h"

typedef struct {
    matmul_geom g;
} matmul_cfg;

static dtnn_status matmul_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    (void)cfg;
    (void)value;
    return dtnn_error_set(err, DTNN_ERR_ARG, "unknown option '%s' for matmul (it has none)",
                          key);
}

static dtnn_status matmul_infer(layer *l, dtnn_error *err)
{
    matmul_cfg *c = l->cfg;
    const dtnn_shape a = l->in[0], b = l->in[1];
    if (a.c != b.c || a.w != b.h)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "matmul: %dx%dx%d times %dx%dx%d: the "
                              "batches (C) must be equal and a's W (%d) b's H (%d)", a.c, a.h,
                              a.w, b.c, b.h, b.w, a.w, b.h);
    c->g = (matmul_geom){a.c, a.h, b.w, a.w};
    l->out = (dtnn_shape){a.c, a.h, b.w};
    return DTNN_OK;
}

static void matmul_forward(layer *l, const layer_ctx *ctx)
{
    const matmul_cfg *c = l->cfg;
    be_run(ctx->be, matmul, &c->g, l->n, 0, 0, l->x[0], l->x[1], l->y, 0);
}

static void matmul_backward(layer *l, const layer_ctx *ctx)
{
    const matmul_geom g = ((const matmul_cfg *)l->cfg)->g;
    if (l->dx[0]) {
        const matmul_geom ga = {g.batch, g.M, g.K, g.N};
        be_run(ctx->be, matmul, &ga, l->n, 0, 1, l->dy, l->x[1], l->dx[0], l->dx_accumulate[0]);
    }
    if (l->dx[1]) {
        const matmul_geom gb = {g.batch, g.K, g.N, g.M};
        be_run(ctx->be, matmul, &gb, l->n, 1, 0, l->x[0], l->dy, l->dx[1], l->dx_accumulate[1]);
    }
}

static double matmul_flops(const layer *l)
{
    const matmul_cfg *c = l->cfg;
    return 2.0 * c->g.batch * c->g.M * c->g.N * c->g.K;
}

const layer_ops layer_matmul = {
    .type = "matmul",
    .summary = "batched matrix product of two computed tensors (B x M x K times B x K x N)",
    .cfg_size = sizeof(matmul_cfg),
    .min_inputs = 2,
    .max_inputs = 2,
    .set = matmul_set,
    .infer = matmul_infer,
    .forward = matmul_forward,
    .backward = matmul_backward,
    .flops = matmul_flops,
};
