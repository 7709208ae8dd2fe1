/*
 * onnx_import_norm.c — the normalisations: BatchNormalization (inference form: its running
 * statistics into dtnn's batchnorm) and LayerNormalization (opset 17, over the last axis of
 * [N, features] or of a channels-last view: dtnn's layernorm); and the check of a node's
 * constant float inputs they and the other operators share.
 */
#include "onnx_import.h"

#define FAIL(...) imp_fail(p, nd, DTNN_ERR_UNSUPPORTED, err, __VA_ARGS__)
#define BAD(...) imp_fail(p, nd, DTNN_ERR_FORMAT, err, __VA_ARGS__)

int imp_const_floats(imp *p, const Onnx__NodeProto *nd, int k, size_t n, dtnn_error *err)
{
    int i = imp_in_const(p, nd, k, err);
    if (i < 0)
        return -1;
    const imp_value *v = &p->v[i];
    if (!v->is_float || v->count != n) {
        FAIL("input %d '%s' must be %zu float32 values, it has %zu (%s)", k, v->name, n,
             v->count, v->is_float ? "float32" : "integers");
        return -1;
    }
    return i;
}

dtnn_status op_batchnorm(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    const int c = imp_in(p, nd, 0, err);
    if (c >= 0 && p->v[c].kind == IMP_CONST)
        return fold_batchnorm(p, nd, c, err);
    int x = imp_in_layer(p, nd, 0, 0, err);
    if (x < 0)
        return err->code;
    const imp_value X = p->v[x];
    if (imp_attr_int(nd, "training_mode", 0) != 0)
        return FAIL("attribute training_mode=1 is not supported (inference graphs only)");
    if (imp_attr_int(nd, "spatial", 1) != 1)
        return FAIL("attribute spatial=0 is not supported");
    if (p->opset < 7 && imp_attr_int(nd, "is_test", 0) == 0)
        return FAIL("attribute is_test=0: before opset 7 that is training mode (inference "
                    "graphs only)");
    int t[4];
    for (int k = 0; k < 4; k++)
        if ((t[k] = imp_const_floats(p, nd, k + 1, (size_t)X.c, err)) < 0)
            return err->code;
    for (size_t j = 0; j < p->v[t[3]].count; j++)
        if (!(p->v[t[3]].f[j] >= 0.0f))
            return BAD("input 4 '%s' (the variance) has a negative or NaN value",
                       p->v[t[3]].name);
    const float eps = imp_attr_float(nd, "epsilon", 1e-5f);
    const float momentum = imp_attr_float(nd, "momentum", 0.9f);
    if (!(eps > 0.0f) || !(momentum >= 0.0f && momentum < 1.0f))
        return FAIL("epsilon %g must be positive and momentum %g in [0, 1)", eps, momentum);
    int o = imp_layer_new(p, nd, "batchnorm", p->v[t[0]].name, &x, 1, X.rank, X.c, X.h, X.w,
                          err);
    if (o < 0)
        return err->code;
    imp_layer *l = &p->l[p->v[o].layer];
    imp_opt(l, "eps", "%.9g", eps);
    /* ONNX keeps `momentum` of the old statistics, PyTorch and dtnn take it of the new. */
    imp_opt(l, "momentum", "%.7g", (double)(1.0f - momentum));
    static const char *const sfx[4] = {"weight", "bias", "running_mean", "running_var"};
    for (int k = 0; k < 4; k++)
        imp_bind_add(l, sfx[k], t[k], 0);
    return DTNN_OK;
}

/* LayerNormalization (opset 17) over the last axis: of [N, F] features, or of a channels-last
 * view of [N, C, H, W] (over C: dtnn's layernorm, whose output stays channels-last for the
 * Transpose back). Scale and B are constants of the normalised size. */
dtnn_status op_layernorm(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    int x = imp_in_layer(p, nd, 0, IMP_ALLOW_NHWC | IMP_ALLOW_GEN, err);
    if (x < 0)
        return err->code;
    const int axis = imp_axis(imp_attr_int(nd, "axis", -1), p->v[x].rank);
    /* [N, C, L] over L: its rows as a tensor's last axis */
    if (!p->v[x].gen && p->v[x].rank == 3 && axis == 2 && (x = imp_gen_view(p, nd, x, err)) < 0)
        return err->code;
    const imp_value X = p->v[x];
    /* a tensor's last axis: a transformer's norm over the features of each token */
    const int rows = ((X.gen && X.gen != IMP_GEN_LEAD && X.nsd >= 2) ||
                      (!X.gen && !X.nhwc && X.rank == 4)) &&
                     axis == X.rank - 1;
    if (!(X.rank == 2 && axis == 1) && !(X.nhwc && axis == 3) && !rows)
        return FAIL("only the normalisation over the last axis of [N, features] or of a "
                    "channels-last [N, H, W, C] (a Transpose 0, 2, 3, 1 before it) is supported");
    if (imp_in_opt(p, nd, 2, err) < 0)
        return FAIL("a LayerNormalization without B is not supported");
    int t[2];
    for (int k = 0; k < 2; k++)
        if ((t[k] = imp_const_floats(p, nd, k + 1, (size_t)(rows ? X.w : X.c), err)) < 0)
            return err->code;
    const float eps = imp_attr_float(nd, "epsilon", 1e-5f);
    if (!(eps > 0.0f))
        return FAIL("epsilon %g must be positive", eps);
    int o = imp_layer_new(p, nd, "layernorm", p->v[t[0]].name, &x, 1, X.rank, X.c, X.h, X.w,
                          err);
    if (o < 0)
        return err->code;
    imp_layout_copy(&p->v[o], &X);
    imp_layer *l = &p->l[p->v[o].layer];
    imp_opt(l, "eps", "%.9g", eps);
    if (rows)
        imp_opt(l, "axis", "last");
    imp_bind_add(l, "weight", t[0], 0);
    imp_bind_add(l, "bias", t[1], 0);
    return DTNN_OK;
}
