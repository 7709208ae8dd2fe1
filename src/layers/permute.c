/*
 * permute.c — reorders the axes of each sample's tensor, as torch.permute on [N, d0, d1, ...]
 * with the batch axis kept first: self-attention's split of channels into heads and its merge
 * back, MobileViT's unfolding of patches. Options: dims = d0xd1x... (the input's per-sample
 * dims, up to 6, their product its size), perm = p0,p1,... (output axis k is input axis p_k,
 * as torch's dims). The output's C x H x W is the leading dims' product x the last two (one
 * dim: C x 1 x 1), so a softmax, layernorm or linear over W acts on the last axis. Backward
 * permutes the gradient back by the inverse permutation.
 */
#include <string.h>

#include "layer.h"

typedef struct {
    int rank, n_perm;   /* rank 0: dims not given */
    int dims[PERMUTE_MAX_DIMS];
    int perm[PERMUTE_MAX_DIMS];
    permute_geom g, inverse;    /* set in infer */
} permute_cfg;

static dtnn_status permute_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    permute_cfg *c = cfg;
    if (!strcmp(key, "dims")) {
        c->rank = layer_opt_list(value, 'x', 1, 1 << 24, PERMUTE_MAX_DIMS, c->dims);
        if (c->rank > 0)
            return DTNN_OK;
        c->rank = 0;
        return dtnn_error_set(err, DTNN_ERR_ARG, "permute: dims = %s is not 1 to %d positive "
                              "sizes joined by 'x'", value, PERMUTE_MAX_DIMS);
    }
    if (!strcmp(key, "perm")) {
        c->n_perm = layer_opt_list(value, ',', 0, PERMUTE_MAX_DIMS - 1, PERMUTE_MAX_DIMS,
                                   c->perm);
        if (c->n_perm > 0)
            return DTNN_OK;
        c->n_perm = 0;
        return dtnn_error_set(err, DTNN_ERR_ARG, "permute: perm = %s is not 1 to %d axes "
                              "joined by ','", value, PERMUTE_MAX_DIMS);
    }
    return dtnn_error_set(err, DTNN_ERR_ARG, "unknown option '%s' for permute (dims, perm)",
                          key);
}

static dtnn_status permute_infer(layer *l, dtnn_error *err)
{
    permute_cfg *c = l->cfg;
    if (!c->rank || c->n_perm != c->rank)
        return dtnn_error_set(err, DTNN_ERR_ARG, "permute needs dims and a perm of as many "
                              "axes (dims has %d, perm %d)", c->rank, c->n_perm);
    size_t size;
    dtnn_status st = layer_permutation(c->dims, c->perm, c->rank, &c->g, &c->inverse, &l->out,
                                       &size, err);
    const dtnn_shape in = l->in[0];
    if (!st && size != shape_size(in))
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "permute: dims hold %zu values, the input "
                              "%dx%dx%d %zu", size, in.c, in.h, in.w, shape_size(in));
    return st;
}

static void permute_forward(layer *l, const layer_ctx *ctx)
{
    const permute_cfg *c = l->cfg;
    be_run(ctx->be, permute, &c->g, l->n, l->x[0], l->y, 0);
}

static void permute_backward(layer *l, const layer_ctx *ctx)
{
    const permute_cfg *c = l->cfg;
    if (l->dx[0])
        be_run(ctx->be, permute, &c->inverse, l->n, l->dy, l->dx[0], l->dx_accumulate[0]);
}

static void permute_describe(const layer *l, layer_attrs *a)
{
    const permute_cfg *c = l->cfg;
    a->permute = c->g;
}

const layer_ops layer_permute = {
    .type = "permute",
    .summary = "reorders each sample's axes (dims = d0xd1x..., perm = p0,p1,...)",
    .cfg_size = sizeof(permute_cfg),
    .min_inputs = 1,
    .max_inputs = 1,
    .set = permute_set,
    .infer = permute_infer,
    .forward = permute_forward,
    .backward = permute_backward,
    .describe = permute_describe,
};
