/*
 * onnx_import_joins.c — the importer's element-wise arithmetic and joins: Add (also Sum), Mul,
 * Sub and Div of two computed values, broadcast as NumPy over one sample (dtnn's add, mul,
 * sub, div), and of a computed value and a constant, the one-input form of those: the
 * constant a buffer of the layer, a module's parameter a trainable one, a MatMul's bias the
 * linear's or the 1x1 convolution's; Concat of channels; joins of more inputs than one dtnn
 * layer takes, as chains. The activations written as arithmetic are fused on the way
 * (onnx_import_fuse.c).
 */
#include <stdio.h>
#include <string.h>

#include "onnx_import.h"

#define FAIL(...) imp_fail(p, nd, DTNN_ERR_UNSUPPORTED, err, __VA_ARGS__)
#define BAD(...) imp_fail(p, nd, DTNN_ERR_FORMAT, err, __VA_ARGS__)

/* How many of ins[0..n) one layer joins: up to `most`, and as many as fit the model file's
 * 512-character "inputs =" line. */
static int join_width(const imp *p, const int *ins, int n, int most)
{
    int k = 0;
    size_t len = 0;
    while (k < n && k < most) {
        const imp_value *v = &p->v[ins[k]];
        len += (v->layer < 0 ? 5 : strlen(p->l[v->layer].name)) + 2;
        if (len > 480 && k >= 2)
            break;
        k++;
    }
    return k;
}

/* Layer `type` over ins[0..n): dtnn's add takes up to 8 inputs and concat 16, so a longer
 * join (DenseNet concatenates up to 25) is a chain, each link joining the previous one's
 * result with the next inputs; both operations are associative. ins is overwritten. */
static dtnn_status join(imp *p, const Onnx__NodeProto *nd, const char *type, int *ins, int n,
                        int rank, dtnn_error *err)
{
    const int concat = !strcmp(type, "concat");
    int max;
    while ((max = join_width(p, ins, n, concat ? 16 : 8)) < n) {
        int c = 0;
        for (int k = 0; k < max; k++)
            c = concat ? c + p->v[ins[k]].c : p->v[ins[k]].c;
        const imp_value X = p->v[ins[0]];
        int o = imp_layer_inner(p, nd, type, ins, max, rank, c, X.h, X.w, err);
        if (o < 0)
            return err->code;
        ins[0] = o;
        memmove(ins + 1, ins + max, sizeof(int) * (size_t)(n - max));
        n -= max - 1;
    }
    int c = 0;
    for (int k = 0; k < n; k++)
        c = concat ? c + p->v[ins[k]].c : p->v[ins[k]].c;
    const imp_value X = p->v[ins[0]];
    return imp_layer_new(p, nd, type, NULL, ins, n, rank, c, X.h, X.w, err) < 0 ? err->code
                                                                                : DTNN_OK;
}

/* The suffix of a Mul's constant that is a module's parameter, or NULL. torch.onnx names a
 * parameter by its state_dict name, "features.1.0.layer_scale" (ConvNeXt's layer scale, timm's
 * gamma): an initializer, or an Identity of one where parameters of equal values were
 * deduplicated; the constants it makes itself are onnx::... initializers and "/scope/..."
 * node outputs, and dtnn's exporter writes its buffers as <layer>.constant and the constants
 * of its decompositions with a '/'. The parameter is trained with the model, its tensor keeps
 * that name. */
static const char *parameter_suffix(const char *type, const imp_value *K)
{
    const char *dot = strrchr(K->name, '.');
    if (strcmp(type, "mul") || !dot || dot == K->name || strpbrk(K->name, "/:") ||
        !strcmp(dot + 1, "constant") || strlen(dot + 1) < 1 || strlen(dot + 1) > 23)
        return NULL;
    for (const char *s = dot + 1; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return NULL;
    return dot + 1;
}

/* x op c for layer value x and constant c, as the one-input form of dtnn's add, mul or sub
 * (c - x with reverse): c's dims align on the right with x's [N, C, H, W] or [N, F], as
 * NumPy's; its batch dimension, if it has one, must be 1. The constant becomes the layer's
 * tensor "constant" [C, H, W], or, a module's parameter, a trainable one of its own name. */
static dtnn_status const_operand(imp *p, const Onnx__NodeProto *nd, const char *type, int x,
                                 int k, int reverse, dtnn_error *err)
{
    const imp_value X = p->v[x], *K = &p->v[k];
    if (!K->is_float)
        return FAIL("constant '%s' holds integers; dtnn's %s takes a float32 constant",
                    K->name, type);
    if (K->ndim > X.rank)
        return FAIL("constant '%s' has rank %d, above its other operand's %d", K->name,
                    K->ndim, X.rank);
    /* the constant's dims as [N, C, H, W] (x of rank 2: [N, F, 1, 1]); of a tensor, its
     * last two axes are H and W and any before them must be 1 */
    int64_t kd[4] = {1, 1, 1, 1};
    if (X.gen) {
        /* the ONNX axis that holds the batch, counted from the end: a constant must not vary
         * along it (it has one sample) */
        const int batch_from_end = X.gen == IMP_GEN_BATCH    ? X.rank
                                   : X.gen == IMP_GEN_MERGED ? X.nsd
                                                             : X.nsd - 1;
        for (int d = 0; d < K->ndim; d++) {
            const int from_end = K->ndim - d;
            if (from_end == batch_from_end && K->dims[d] != 1)
                return FAIL("constant '%s' varies along the axis of '%s' that holds the batch",
                            K->name, X.name);
            if (from_end > 2 && K->dims[d] != 1)
                return FAIL("constant '%s' varies along an axis before the last two of the "
                            "tensor '%s'", K->name, X.name);
            if (from_end <= 2)
                kd[4 - from_end] = K->dims[d];
        }
    }
    for (int d = 0; d < K->ndim && !X.gen; d++)
        kd[X.rank - K->ndim + d] = K->dims[d];
    if (X.nhwc) {
        /* ONNX's [N, H, W, C] of a channels-last view is dtnn's [N, C, H, W] */
        const int64_t nchw[4] = {kd[0], kd[3], kd[1], kd[2]};
        memcpy(kd, nchw, sizeof kd);
    }
    if (kd[0] != 1)
        return FAIL("constant '%s' has %lld samples; dtnn broadcasts a constant of one sample "
                    "over the batch", K->name, (long long)kd[0]);
    const int xs[3] = {X.c, X.h, X.w};
    int ks[3], os[3];
    for (int d = 0; d < 3; d++) {
        if (kd[d + 1] > 1 << 24)
            return FAIL("constant '%s' is too large", K->name);
        ks[d] = (int)kd[d + 1];
        if (ks[d] != xs[d] && ks[d] != 1 && xs[d] != 1)
            return FAIL("constant '%s' %dx%dx%d and input '%s' %dx%dx%d do not broadcast "
                        "(each size must be equal or 1)", K->name, ks[0], ks[1], ks[2], X.name,
                        xs[0], xs[1], xs[2]);
        os[d] = ks[d] > xs[d] ? ks[d] : xs[d];
    }
    if (!X.gen && X.rank == 2 && (os[1] != 1 || os[2] != 1))
        return FAIL("constant '%s' would make the flat value '%s' 4-D", K->name, X.name);
    if (X.gen && (os[0] != X.c || os[1] != X.h || os[2] != X.w))
        return FAIL("constant '%s' would broadcast the tensor '%s' to another shape", K->name,
                    X.name);
    const char *param = parameter_suffix(type, K);
    int o = imp_layer_new(p, nd, type, param ? K->name : NULL, &x, 1, X.rank, os[0], os[1],
                          os[2], err);
    if (o < 0)
        return err->code;
    imp_layout_copy(&p->v[o], &X);
    imp_layer *l = &p->l[p->v[o].layer];
    imp_opt(l, "const_shape", "%dx%dx%d", ks[0], ks[1], ks[2]);
    if (reverse)
        imp_opt(l, "reverse", "true");
    if (param) {
        imp_opt(l, "trainable", "true");
        imp_opt(l, "const_name", "%s", param);
    }
    imp_bind_add(l, param ? param : "constant", k, 0);
    return DTNN_OK;
}

/* x + b for the bias b [K] of a channels-last MatMul (ConvNeXt's Linear between its permutes,
 * imported as a 1x1 convolution without bias), x its only use: that convolution's bias. 1
 * when taken, 0 when not that pattern, -1 on error. */
static int pointwise_bias(imp *p, const Onnx__NodeProto *nd, int x, int b, dtnn_error *err)
{
    const imp_value *X = &p->v[x], *B = &p->v[b];
    imp_layer *l = X->layer >= 0 ? &p->l[X->layer] : NULL;
    char *no_bias = l ? strstr(l->opts, "bias = false\n") : NULL;
    if (!l || !X->nhwc || strcmp(l->type, "conv2d") || !no_bias || l->out != x ||
        imp_uses(p, X->name) != 1 || !B->is_float || B->ndim != 1 || B->count != (size_t)X->c)
        return 0;
    memmove(no_bias, no_bias + strlen("bias = false\n"),
            strlen(no_bias + strlen("bias = false\n")) + 1);
    imp_bind_add(l, "bias", b, 0);
    return imp_out_alias(p, nd, x, err) < 0 ? -1 : 1;
}

/* x + b for a constant b: a MatMul's bias when x is that MatMul's only use and b fits it,
 * else dtnn's add of a constant. */
static dtnn_status add_constant(imp *p, const Onnx__NodeProto *nd, int x, int b, dtnn_error *err)
{
    const int norm = imp_fuse_layernorm(p, nd, x, b, err);
    if (norm)
        return norm < 0 ? err->code : DTNN_OK;
    const int taken = pointwise_bias(p, nd, x, b, err);
    if (taken)
        return taken < 0 ? err->code : DTNN_OK;
    const imp_value *X = &p->v[x], *B = &p->v[b];
    imp_layer *l = X->layer >= 0 ? &p->l[X->layer] : NULL;
    if (!l || strcmp(l->type, "linear") || l->bias || l->out != x || imp_uses(p, X->name) != 1 ||
        !B->is_float || B->count != (size_t)l->outputs ||
        !(B->ndim == 1 || (B->ndim == 2 && B->dims[0] == 1)))
        return const_operand(p, nd, "add", x, b, 0, err);
    l->bias = 1;
    imp_bind_add(l, "bias", b, 0);
    return imp_out_alias(p, nd, x, err) < 0 ? err->code : DTNN_OK;
}

/* Layer `type` of layer values ins[0] and ins[1] broadcast as NumPy, one sample's C x H x W
 * each (the batch is never broadcast: both come from the same samples); 5-D values of as many
 * groups broadcast as their [N, C, H, W] memory does. */
static dtnn_status broadcast_layer(imp *p, const Onnx__NodeProto *nd, const char *type,
                                   int *ins, dtnn_error *err)
{
    const imp_value *A = &p->v[ins[0]], *B = &p->v[ins[1]];
    if (A->nhwc != B->nhwc)
        return FAIL("inputs '%s' and '%s': one is a channels-last view and the other is not",
                    A->name, B->name);
    if (A->rank != B->rank)
        return FAIL("inputs '%s' (rank %d) and '%s' (rank %d) differ in rank; dtnn broadcasts "
                    "values of one rank", A->name, A->rank, B->name, B->rank);
    if (A->groups != B->groups)
        return FAIL("inputs '%s' and '%s' have %d and %d groups on axis 1; dtnn broadcasts 5-D "
                    "values of as many groups", A->name, B->name, A->groups, B->groups);
    if ((A->gen || B->gen) &&
        (A->gen != B->gen || A->nsd != B->nsd || memcmp(A->sd, B->sd, sizeof A->sd)))
        return FAIL("inputs '%s' and '%s': tensors of other shapes or batch layouts; dtnn "
                    "joins tensors of one shape", A->name, B->name);
    const int sa[3] = {A->c, A->h, A->w}, sb[3] = {B->c, B->h, B->w};
    int so[3];
    for (int k = 0; k < 3; k++) {
        if (sa[k] != sb[k] && sa[k] != 1 && sb[k] != 1)
            return FAIL("inputs '%s' %dx%dx%d and '%s' %dx%dx%d do not broadcast (each size "
                        "must be equal or 1)", A->name, sa[0], sa[1], sa[2], B->name, sb[0],
                        sb[1], sb[2]);
        so[k] = sa[k] > sb[k] ? sa[k] : sb[k];
    }
    const imp_value layout = *A;
    const int o = imp_layer_new(p, nd, type, NULL, ins, 2, layout.rank, so[0], so[1], so[2],
                                err);
    if (o < 0)
        return err->code;
    imp_layout_copy(&p->v[o], &layout);
    return DTNN_OK;
}

dtnn_status op_add(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    const int n = (int)nd->n_input;
    if (n < 1 || n > IMP_MAX_JOIN)
        return FAIL("%d inputs (dtnn takes 1 to %d)", n, IMP_MAX_JOIN);
    int ins[IMP_MAX_JOIN] = {0}, rank = 2;
    for (int k = 0; k < n; k++)
        if ((ins[k] = imp_in(p, nd, k, err)) < 0)
            return err->code;
    if (n == 2 && p->v[ins[0]].kind == IMP_CONST && p->v[ins[1]].kind == IMP_CONST)
        return fold_binary(p, nd, ins[0], ins[1], err);
    for (int k = 0; k < n; k++) {
        if (n == 2 && p->v[ins[k]].kind == IMP_CONST && p->v[ins[1 - k]].kind == IMP_LAYER) {
            if (imp_in_layer(p, nd, 1 - k, IMP_ALLOW_NHWC | IMP_ALLOW_GEN, err) < 0)
                return err->code;
            return add_constant(p, nd, ins[1 - k], ins[k], err);
        }
        if (imp_in_layer(p, nd, k,
                         n == 2 ? IMP_ALLOW_NHWC | IMP_ALLOW_GROUPS | IMP_ALLOW_GEN : 0, err) < 0)
            return err->code;
        const imp_value *v = &p->v[ins[k]], *v0 = &p->v[ins[0]];
        /* dtnn's add broadcasts two inputs (Add, and Sum of two) */
        if (n == 2 && k == 1)
            return broadcast_layer(p, nd, "add", ins, err);
        if (v->c != v0->c || v->h != v0->h || v->w != v0->w)
            return FAIL("inputs '%s' %dx%dx%d and '%s' %dx%dx%d differ in shape; dtnn adds "
                        "more than two inputs only of one shape", v0->name, v0->c, v0->h,
                        v0->w, v->name, v->c, v->h, v->w);
        if (v->rank > rank)
            rank = v->rank;
    }
    if (n == 1)
        return imp_out_alias(p, nd, ins[0], err) < 0 ? err->code : DTNN_OK;
    return join(p, nd, "add", ins, n, rank, err);
}

/* Mul and Sub of two computed values, broadcast: dtnn's mul and sub; of a computed value and
 * a constant (either order): their one-input form. */
dtnn_status op_binary(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    if (nd->n_input != 2)
        return BAD("%zu inputs (it takes 2)", nd->n_input);
    const char *type = nd->op_type[0] == 'M' ? "mul" : nd->op_type[0] == 'D' ? "div" : "sub";
    int ins[2];
    for (int k = 0; k < 2; k++)
        if ((ins[k] = imp_in(p, nd, k, err)) < 0)
            return err->code;
    const int c0 = p->v[ins[0]].kind == IMP_CONST, c1 = p->v[ins[1]].kind == IMP_CONST;
    if (c0 && c1)
        return fold_binary(p, nd, ins[0], ins[1], err);
    for (int k = 0; k < 2; k++)
        if (p->v[ins[k]].kind != IMP_CONST &&
            imp_in_layer(p, nd, k,
                         IMP_ALLOW_NHWC | IMP_ALLOW_GEN | (c0 || c1 ? 0 : IMP_ALLOW_GROUPS),
                         err) < 0)
            return err->code;
    /* GELU's last step, (x * (erf(x / sqrt 2) + 1)) * 0.5: one gelu (onnx_import_fuse.c) */
    const int gelu = type[0] == 'm' && (c0 || c1)
                         ? imp_fuse_gelu(p, nd, ins[c0 ? 1 : 0], ins[c0 ? 0 : 1], err)
                         : 0;
    if (gelu)
        return gelu < 0 ? err->code : DTNN_OK;
    /* Mul commutes: x * c either way; Sub and Div with the constant first are c - x, c / x */
    if (c0 || c1)
        return const_operand(p, nd, type, ins[c0 ? 1 : 0], ins[c0 ? 0 : 1], c0 && type[0] != 'm',
                             err);
    const int silu = type[0] == 'm' ? imp_fuse_silu(p, nd, ins, err) : 0;
    if (silu)
        return silu < 0 ? err->code : DTNN_OK;
    return broadcast_layer(p, nd, type, ins, err);
}

/* Pow by a constant exponent of a computed value: 2 (x * x, the square in a LayerNorm as
 * opsets before 17 write it), 1 (x itself) or 0.5 (its square root); of constants, folded. */
dtnn_status op_pow(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    if (nd->n_input != 2)
        return BAD("%zu inputs (it takes 2)", nd->n_input);
    int ins[2];
    for (int k = 0; k < 2; k++)
        if ((ins[k] = imp_in(p, nd, k, err)) < 0)
            return err->code;
    const imp_value *E = &p->v[ins[1]];
    if (p->v[ins[0]].kind == IMP_CONST && E->kind == IMP_CONST)
        return fold_binary(p, nd, ins[0], ins[1], err);
    if (E->kind != IMP_CONST || E->count != 1)
        return FAIL("only a single constant exponent is supported (2, 1 or 0.5)");
    const int x = imp_in_layer(p, nd, 0, IMP_ALLOW_NHWC, err);
    if (x < 0)
        return err->code;
    const double e = E->is_float ? (double)E->f[0] : (double)E->i[0];
    const imp_value X = p->v[x];
    if (e == 1.0)
        return imp_out_alias(p, nd, x, err) < 0 ? err->code : DTNN_OK;
    if (e != 2.0 && e != 0.5)
        return FAIL("exponent %g: dtnn raises a computed value to the power 2, 1 or 0.5 only",
                    e);
    const int square[2] = {x, x};
    const int o = e == 2.0 ? imp_layer_new(p, nd, "mul", NULL, square, 2, X.rank, X.c, X.h, X.w,
                                           err)
                           : imp_layer_new(p, nd, "sqrt", NULL, &x, 1, X.rank, X.c, X.h, X.w,
                                           err);
    if (o < 0)
        return err->code;
    p->v[o].nhwc = X.nhwc;
    return DTNN_OK;
}

/* Concat of constants (shape vectors, axis 0) is folded; of layers it is a channel concat. */
dtnn_status op_concat(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    const int n = (int)nd->n_input;
    if (n < 1 || n > IMP_MAX_JOIN)
        return FAIL("%d inputs (dtnn takes 1 to %d)", n, IMP_MAX_JOIN);
    int ins[IMP_MAX_JOIN] = {0}, n_const = 0;
    size_t total = 0;
    for (int k = 0; k < n; k++) {
        if ((ins[k] = imp_in(p, nd, k, err)) < 0)
            return err->code;
        n_const += p->v[ins[k]].kind == IMP_CONST;
        total += p->v[ins[k]].count;
    }
    const int64_t axis = imp_attr_int(nd, "axis", 1);
    if (n_const == n) {
        /* 1-D constants of one type: shape vectors, and pads computed in float (TF-"same") */
        const int is_float = p->v[ins[0]].is_float;
        for (int k = 0; k < n; k++)
            if (p->v[ins[k]].ndim != 1 || p->v[ins[k]].is_float != is_float)
                return FAIL("only 1-D constants of one type are folded");
        int o = imp_out(p, nd, 0, err);
        int64_t dims[1] = {(int64_t)total};
        if (o < 0 || imp_const_alloc(p, o, is_float, dims, 1, err))
            return err->code;
        size_t at = 0;
        for (int k = 0; k < n; k++)
            for (size_t j = 0; j < p->v[ins[k]].count; j++, at++) {
                if (is_float)
                    p->v[o].f[at] = p->v[ins[k]].f[j];
                else
                    p->v[o].i[at] = p->v[ins[k]].i[j];
            }
        return DTNN_OK;
    }
    int rank = 0, groups = 0;
    for (int k = 0; k < n; k++) {
        if (imp_in_layer(p, nd, k, IMP_ALLOW_GROUPS, err) < 0)
            return err->code;
        const imp_value *v = &p->v[ins[k]], *v0 = &p->v[ins[0]];
        if (v->h != v0->h || v->w != v0->w)
            return BAD("inputs differ in height or width");
        /* [N, G_k, C, H, W] along axis 1: the channels of the groups in a row */
        if ((v->rank == 5) != (v0->rank == 5) ||
            (v->rank == 5 && v->c / v->groups != v0->c / v0->groups))
            return BAD("inputs '%s' and '%s' differ in rank or in their groups' size", v0->name,
                       v->name);
        rank = v->rank > rank ? v->rank : rank;
        groups += v->groups;
    }
    if (imp_axis(axis, rank) != 1)
        return FAIL("attribute axis=%lld: dtnn concatenates channels (axis 1)",
                    (long long)axis);
    if (n == 1)
        return imp_out_alias(p, nd, ins[0], err) < 0 ? err->code : DTNN_OK;
    dtnn_status st = join(p, nd, "concat", ins, n, rank, err);
    if (!st && rank == 5)
        p->v[imp_value_of(p, nd->output[0])].groups = groups;
    return st;
}

