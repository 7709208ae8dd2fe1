/*
 * onnx_export_tensor.c — the ONNX forms of the attention layers: permute as Reshape to
 * [N, dims...], Transpose (the batch's axis kept first) and Reshape back to [N, C, H, W];
 * matmul as MatMul of the two 4-D values (ONNX broadcasts the leading [N, C] as a batch of
 * H x W matrices, which is the layer's own product); softmax over the last axis as Softmax of
 * axis 3 (every opset: before 13 it flattens from axis 3 on, which is the last axis alone),
 * layernorm as LayerNormalization of axis -1 (opset 17) and linear as the weight's Transpose,
 * MatMul and Add of the bias, all on the 4-D value, whose last axis is the layer's W. The
 * importer reads each back as the same layer (onnx_import_tensor.c).
 */
#include <stdio.h>

#include "onnx_emit.h"

/* Node op of layer l reading ins, writing `out` (the layer's output or a step of its own). */
static const char *step(onnx_writer *w, const emit_ctx *c, const char *name, const char *op,
                        const char *const *ins, int n, int last)
{
    const char *out = last ? c->out : onnxw_printf(w, "%s/%s", c->l->name, name);
    const char *node = last ? c->l->name : out;
    return out && onnxw_node(w, op, node, ins, n, out) && !w->oom ? out : NULL;
}

/* A Reshape of x to [0, dims...] under the initializer <layer>.<what>. */
static const char *reshape(onnx_writer *w, const emit_ctx *c, const char *what, const char *x,
                           const int64_t *dims, int n, int last)
{
    const char *shape = onnxw_printf(w, "%s.%s", c->l->name, what);
    if (!x || !shape || onnxw_const_i64(w, shape, dims, n))
        return NULL;
    const char *ins[2] = {x, shape};
    return step(w, c, what, "Reshape", ins, 2, last);
}

emit_result emit_permute(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    (void)err;
    const layer *l = c->l;
    const permute_geom *g = &c->a.permute;
    int64_t dims[PERMUTE_MAX_DIMS + 1] = {0};
    int perm[PERMUTE_MAX_DIMS + 1] = {0};
    for (int k = 0; k < g->rank; k++) {
        dims[k + 1] = g->dims[k];
        perm[k + 1] = g->perm[k] + 1;
    }
    const char *x = reshape(w, c, "dims", onnxw_input_as(w, l, 0, 4), dims, g->rank + 1, 0);
    const char *t = x ? onnxw_printf(w, "%s/%s", l->name, "permuted") : NULL;
    Onnx__NodeProto *nd = t ? onnxw_node(w, "Transpose", t, &x, 1, t) : NULL;
    if (!nd)
        return EMIT_NOMEM;
    onnxw_attr_ints(w, nd, "perm", perm, g->rank + 1);
    const int64_t back[4] = {0, l->out.c, l->out.h, l->out.w};
    return reshape(w, c, "shape", t, back, 4, 1) ? EMIT_OK : EMIT_NOMEM;
}

emit_result emit_matmul(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    (void)err;
    const char *ins[2] = {onnxw_input_as(w, c->l, 0, 4), onnxw_input_as(w, c->l, 1, 4)};
    if (!ins[0] || !ins[1])
        return EMIT_NOMEM;
    return step(w, c, "matmul", "MatMul", ins, 2, 1) ? EMIT_OK : EMIT_NOMEM;
}

emit_result emit_last_axis(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    const layer *l = c->l;
    const char *type = l->ops->type, *x = onnxw_input_as(w, l, 0, 4);
    if (!x)
        return EMIT_NOMEM;
    if (type[0] == 's') {       /* softmax */
        const char *ins[1] = {x};
        Onnx__NodeProto *nd = onnxw_node(w, "Softmax", l->name, ins, 1, c->out);
        onnxw_attr_int(w, nd, "axis", 3);
        return made(w, nd);
    }
    if (type[1] == 'a') {       /* layernorm */
        if (w->opset < 17) {
            dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "layer '%s' (layernorm): "
                           "LayerNormalization is in ONNX from opset 17: export with --opset 17",
                           l->name);
            return EMIT_ERROR;
        }
        if (!c->a.bias) {
            dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "layer '%s' (layernorm, axis = last, "
                           "affine = false) has no ONNX form in this exporter", l->name);
            return EMIT_ERROR;
        }
        const char *ins[3] = {x, onnxw_tensor_init(w, l, "weight", err),
                              onnxw_tensor_init(w, l, "bias", err)};
        if (!ins[1] || !ins[2])
            return EMIT_ERROR;
        Onnx__NodeProto *nd = onnxw_node(w, "LayerNormalization", l->name, ins, 3, c->out);
        onnxw_attr_float(w, nd, "epsilon", c->a.eps);
        onnxw_attr_int(w, nd, "axis", -1);
        return made(w, nd);
    }
    /* linear: x [N, C, H, in] @ W^T [in, out] (+ b) */
    const char *wt = onnxw_tensor_init(w, l, "weight", err);
    if (!wt)
        return EMIT_ERROR;
    const char *wt_t = step(w, c, "weight_t", "Transpose", &wt, 1, 0);
    const char *ins[2] = {x, wt_t};
    const char *y = wt_t ? step(w, c, "matmul", "MatMul", ins, 2, !c->a.bias) : NULL;
    if (!y)
        return EMIT_NOMEM;
    if (!c->a.bias)
        return EMIT_OK;
    const char *bias_ins[2] = {y, onnxw_tensor_init(w, l, "bias", err)};
    if (!bias_ins[1])
        return EMIT_ERROR;
    return step(w, c, "bias", "Add", bias_ins, 2, 1) ? EMIT_OK : EMIT_NOMEM;
}
