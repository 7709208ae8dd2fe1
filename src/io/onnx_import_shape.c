/*
 * onnx_import_shape.c — the ONNX operators that only move or rename data: Flatten, Reshape,
 * Squeeze and Unsqueeze where they flatten to [N, features] (dtnn stores [N, F] and
 * [N, F, 1, 1] the same way, so most become no layer at all), Reshape to [N, C, L] or
 * [N, C, H, W] of as many values (the reshape layer: ECA's row of channel means), Dropout
 * and Identity (the identity at inference), Pad (mode constant: zero rows and columns that only Convs read go into their
 * padding, zero channels alone make the option-A shortcut, any other the pad layer), Slice (the
 * shortcut's x[:, :, ::s, ::s]), and the constant folding of Constant, Shape, Gather, Cast,
 * Squeeze, Unsqueeze and Concat that PyTorch writes for Reshape targets. Semantics:
 * onnx/docs/Operators.md.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_import.h"

#define FAIL(...) imp_fail(p, nd, DTNN_ERR_UNSUPPORTED, err, __VA_ARGS__)
#define BAD(...) imp_fail(p, nd, DTNN_ERR_FORMAT, err, __VA_ARGS__)

/* A copy of constant src as output 0 of nd, with new dims of the same element count. dims may
 * point into the value array (an Identity passes its input's own), which making the output
 * value can move: they are copied first. */
static dtnn_status const_copy(imp *p, const Onnx__NodeProto *nd, int src, const int64_t *dims_in,
                              int ndim, dtnn_error *err)
{
    if (ndim < 0 || ndim > IMP_MAX_DIMS)
        return BAD("a constant of %d dimensions", ndim);
    int64_t dims[IMP_MAX_DIMS];
    memcpy(dims, dims_in, sizeof(int64_t) * (size_t)ndim);
    int o = imp_out(p, nd, 0, err);
    if (o < 0)
        return err->code;
    const imp_value *s = &p->v[src];
    dtnn_status st = imp_const_alloc(p, o, s->is_float, dims, ndim, err);
    if (st)
        return st;
    s = &p->v[src];     /* value_new may have moved the array */
    if (p->v[o].count != s->count)
        return BAD("folding '%s' changes its element count", s->name);
    if (s->is_float)
        memcpy(p->v[o].f, s->f, sizeof(float) * s->count);
    else
        memcpy(p->v[o].i, s->i, sizeof(int64_t) * s->count);
    return DTNN_OK;
}

/* Output 0 of nd as layer value x seen with rank r (its data unchanged; rank 5 with that many
 * groups). */
static dtnn_status alias_groups(imp *p, const Onnx__NodeProto *nd, int x, int r, int groups,
                                dtnn_error *err)
{
    int o = imp_out_alias(p, nd, x, err);
    if (o < 0)
        return err->code;
    p->v[o].rank = r;
    p->v[o].groups = r == 5 ? groups : 0;
    return DTNN_OK;
}

static dtnn_status alias_rank(imp *p, const Onnx__NodeProto *nd, int x, int r, dtnn_error *err)
{
    return alias_groups(p, nd, x, r, 0, err);
}

/* [N, C, H, W] -> [N, C*H*W]: no layer when H = W = 1, else a flatten layer. */
static dtnn_status flatten_to(imp *p, const Onnx__NodeProto *nd, int x, int rank,
                              dtnn_error *err)
{
    const imp_value X = p->v[x];
    if (X.h == 1 && X.w == 1)
        return alias_rank(p, nd, x, rank, err);
    return imp_layer_new(p, nd, "flatten", NULL, &x, 1, rank, X.c * X.h * X.w, 1, 1, err) < 0
               ? err->code : DTNN_OK;
}

dtnn_status op_flatten(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    int x = imp_in_layer(p, nd, 0, 0, err);
    if (x < 0)
        return err->code;
    if (imp_axis(imp_attr_int(nd, "axis", 1), p->v[x].rank) != 1)
        return FAIL("attribute axis=%lld: dtnn flattens to [N, features] (axis 1) only",
                    (long long)imp_attr_int(nd, "axis", 1));
    return flatten_to(p, nd, x, 2, err);
}

/* A target of rank r (3 to 5) of a value X with F values per sample, into its per-sample dims
 * d (C, L, 1 or C, H, W or G, C, H, W): the batch kept (0, the batch, or -1 with every other
 * size given), 0 copying X's size there, one -1 inferred. 0 when it is none. */
static int resolve_target(const int64_t *t, int r, const imp_value *X, int64_t batch, int64_t F,
                          int64_t d[4])
{
    const int64_t xs[4] = {batch, X->c, X->h, X->w};
    int unknown = -1;
    int64_t known = 1;
    if (!(t[0] == 0 || t[0] == batch || t[0] == -1))
        return 0;
    for (int k = 1; k < r; k++) {
        int64_t v = t[k] == 0 && k < X->rank ? xs[k] : t[k];
        if (v == -1 && unknown < 0 && t[0] != -1)
            unknown = k - 1;
        else if (v < 1 || v > F / known)    /* the product stays within F: no overflow */
            return 0;
        d[k - 1] = v;
        if (v > 0)
            known *= v;
    }
    if (unknown >= 0) {
        if (F % known)
            return 0;
        d[unknown] = F / known;
        known = F;
    }
    if (r == 3)
        d[2] = 1;
    return known == F;
}

/* The reshape layer to per-sample dims d (no layer where they are X's own); rank 5 with that
 * many groups. */
static dtnn_status reshape_to(imp *p, const Onnx__NodeProto *nd, int x, int rank, int groups,
                              const int64_t d[3], dtnn_error *err)
{
    const imp_value X = p->v[x];
    if (d[0] == X.c && d[1] == X.h && d[2] == X.w)
        return alias_groups(p, nd, x, rank, groups, err);
    int o = imp_layer_new(p, nd, "reshape", NULL, &x, 1, rank, (int)d[0], (int)d[1], (int)d[2],
                          err);
    if (o < 0)
        return err->code;
    p->v[o].groups = rank == 5 ? groups : 0;
    imp_opt(&p->l[p->v[o].layer], "shape", "%lldx%lldx%lld", (long long)d[0], (long long)d[1],
            (long long)d[2]);
    return DTNN_OK;
}

dtnn_status op_reshape(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    int c = imp_in(p, nd, 0, err);
    if (c >= 0 && p->v[c].kind == IMP_CONST)
        return fold_reshape(p, nd, err);
    int x = imp_in_layer(p, nd, 0, IMP_ALLOW_GROUPS | IMP_ALLOW_GEN | IMP_ALLOW_NHWC, err);
    int si = x < 0 ? -1 : imp_in_const(p, nd, 1, err);
    if (si < 0)
        return err->code;
    if (imp_attr_int(nd, "allowzero", 0) != 0)
        return FAIL("attribute allowzero=1 is not supported");
    const imp_value *S = &p->v[si];
    const imp_value X = p->v[x];
    const int shape_ok = !S->is_float && S->ndim == 1 && S->count >= 1 &&
                         S->count <= IMP_MAX_DIMS;
    if (X.nhwc) {
        /* a channels-last view reshaped: its data in that order first (dtnn's permute) */
        const int v = imp_gen_from_nhwc(p, nd, x, err);
        if (v < 0)
            return err->code;
        const int r = shape_ok ? imp_gen_reshape(p, nd, v, S->i, (int)S->count, err) : 0;
        return r < 0 ? err->code : r ? DTNN_OK
               : FAIL("a Reshape of the channels-last view '%s' that keeps no batch axis "
                      "first", X.name);
    }
    int done = X.gen && shape_ok ? imp_gen_reshape(p, nd, x, S->i, (int)S->count, err) : 0;
    if (done || X.gen)
        return done < 0 ? err->code
               : done  ? DTNN_OK
                       : FAIL("a Reshape of the tensor '%s' that keeps no batch axis first",
                              X.name);
    if (X.rank == 5)
        for (size_t k = 1; k < S->count && !S->is_float; k++)
            if (S->i[k] == 0)
                return FAIL("a 0 (copy the size) in the target shape of the 5-D '%s' is not "
                            "supported", X.name);
    const int64_t F = (int64_t)X.c * X.h * X.w;
    char shown[96] = "";
    for (size_t k = 0, n = 0; k < S->count && k < 6 && !S->is_float; k++)
        n += (size_t)snprintf(shown + n, sizeof shown - n, "%s%lld", k ? ", " : "",
                              (long long)S->i[k]);
    int ok = !S->is_float && S->ndim == 1 && (S->count == 2 || S->count == 4);
    if (ok) {
        const int64_t *t = S->i;
        ok = (t[0] == 0 || t[0] == p->batch || (t[0] == -1 && t[1] != -1)) &&
             (t[1] == -1 || t[1] == F) && (S->count == 2 || (t[2] == 1 && t[3] == 1));
    }
    if (ok)
        return flatten_to(p, nd, x, (int)S->count, err);
    int64_t d[4];
    if (!S->is_float && S->ndim == 1 && (S->count == 3 || S->count == 4) &&
        resolve_target(S->i, (int)S->count, &X, p->batch, F, d))
        return reshape_to(p, nd, x, (int)S->count, 0, d, err);
    if (!S->is_float && S->ndim == 1 && S->count == 5 &&
        resolve_target(S->i, 5, &X, p->batch, F, d)) {
        /* [N, G, C/G, H, W]: the memory of [N, C, H, W], the groups an axis of their own */
        const int64_t cd[3] = {d[0] * d[1], d[2], d[3]};
        return reshape_to(p, nd, x, 5, (int)d[0], cd, err);
    }
    done = shape_ok ? imp_gen_reshape(p, nd, x, S->i, (int)S->count, err) : 0;
    if (done)
        return done < 0 ? err->code : DTNN_OK;
    return FAIL("target shape [%s] of '%s' is not [N, %lld], nor [N, C, L], [N, C, H, W] or "
                "[N, G, C, H, W] of its %lld values per sample", shown, X.name, (long long)F,
                (long long)F);
}

/* Expand: to the input's own shape no layer; [N, C, 1, 1] to [N, C, H, W] (a gate expanded
 * before its Mul, as timm's ECA writes it) the nearest upsampling by H x W, which repeats each
 * value; any other broadcast (of the batch or the channels) is refused. */
dtnn_status op_expand(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    int x = imp_in_layer(p, nd, 0, 0, err), si = x < 0 ? -1 : imp_in_const(p, nd, 1, err);
    if (si < 0)
        return err->code;
    const imp_value X = p->v[x], *S = &p->v[si];
    if (S->is_float || S->ndim != 1 || S->count != (size_t)X.rank || X.rank != 4)
        return FAIL("only an Expand of [N, C, H, W] to a shape of 4 sizes is supported");
    const int64_t in[4] = {p->batch, X.c, X.h, X.w};
    int64_t out[4];
    for (int k = 0; k < 4; k++) {
        const int64_t t = S->i[k];
        if (t != 1 && in[k] != 1 && t != in[k])
            return BAD("shape [%lld, %lld, %lld, %lld] does not broadcast '%s'",
                       (long long)S->i[0], (long long)S->i[1], (long long)S->i[2],
                       (long long)S->i[3], X.name);
        out[k] = t > in[k] ? t : in[k];
    }
    if (out[0] != in[0] || out[1] != in[1] || out[2] > 1 << 14 || out[3] > 1 << 14)
        return FAIL("an Expand of the batch or of the channels is not supported (only a "
                    "[N, C, 1, 1] value over H and W)");
    if (out[2] == X.h && out[3] == X.w)
        return imp_out_alias(p, nd, x, err) < 0 ? err->code : DTNN_OK;
    if (X.h != 1 || X.w != 1)
        return FAIL("only a [N, C, 1, 1] value is expanded over H and W");
    int o = imp_layer_new(p, nd, "upsample", NULL, &x, 1, 4, X.c, (int)out[2], (int)out[3], err);
    if (o < 0)
        return err->code;
    imp_opt(&p->l[p->v[o].layer], "scale", "%lldx%lld", (long long)out[2], (long long)out[3]);
    imp_opt(&p->l[p->v[o].layer], "mode", "%s", "nearest");
    return DTNN_OK;
}

/* The axes of Squeeze / Unsqueeze: an attribute before opset 13, an input after. */
static int read_axes(imp *p, const Onnx__NodeProto *nd, int64_t *axes, dtnn_error *err)
{
    if (p->opset < 13)
        return imp_attr_ints(nd, "axes", axes, IMP_MAX_DIMS) > IMP_MAX_DIMS
                   ? (BAD("too many axes"), -1)
                   : imp_attr_ints(nd, "axes", axes, IMP_MAX_DIMS);
    if (imp_attr(nd, "axes"))
        return BAD("axes is an input from opset 13, not an attribute"), -1;
    int i = imp_in_opt(p, nd, 1, err);
    if (i == -2)
        return -1;
    if (i < 0)
        return 0;
    i = imp_in_const(p, nd, 1, err);
    if (i < 0)
        return -1;
    if (p->v[i].is_float || p->v[i].count > IMP_MAX_DIMS)
        return BAD("input 1 (axes) must be up to %d integers", IMP_MAX_DIMS), -1;
    for (size_t k = 0; k < p->v[i].count; k++)
        axes[k] = p->v[i].i[k];
    return (int)p->v[i].count;
}

dtnn_status op_squeeze(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    const int un = !strcmp(nd->op_type, "Unsqueeze");
    int x = imp_in(p, nd, 0, err);
    int64_t axes[IMP_MAX_DIMS];
    int na = x < 0 ? -1 : read_axes(p, nd, axes, err);
    if (na < 0)
        return err->code;
    const imp_value X = p->v[x];
    const int rank = X.kind == IMP_CONST ? X.ndim : X.rank;
    const int out_rank = un ? rank + na : rank - na;
    int mark[IMP_MAX_DIMS] = {0};
    if (na == 0 && !un && X.kind == IMP_CONST) {
        for (int d = 0; d < rank; d++)
            mark[d] = X.dims[d] == 1;
    } else {
        if (na == 0 || out_rank < 0 || out_rank > IMP_MAX_DIMS)
            return FAIL("%s without axes or with too many is not supported", nd->op_type);
        for (int k = 0; k < na; k++) {
            int a = imp_axis(axes[k], un ? out_rank : rank);
            if (a < 0 || mark[a])
                return BAD("axis %lld is out of range or repeated", (long long)axes[k]);
            mark[a] = 1;
        }
    }
    if (X.kind == IMP_CONST) {
        int64_t dims[IMP_MAX_DIMS];
        int n = 0;
        if (un) {
            for (int d = 0, s = 0; d < out_rank; d++)
                dims[n++] = mark[d] ? 1 : X.dims[s++];
        } else {
            for (int d = 0; d < rank; d++) {
                if (mark[d] && X.dims[d] != 1)
                    return BAD("axis %d of '%s' is not of size 1", d, X.name);
                if (!mark[d])
                    dims[n++] = X.dims[d];
            }
        }
        return const_copy(p, nd, x, dims, n, err);
    }
    if (imp_in_layer(p, nd, 0, IMP_ALLOW_GROUPS | IMP_ALLOW_GEN, err) < 0)
        return err->code;
    const int lead = !un && na == 1 && mark[0] ? imp_gen_squeeze_lead(p, nd, x, err) : 0;
    if (lead)
        return lead < 0 ? err->code : DTNN_OK;
    if (X.gen)
        return FAIL("only axis 0 of q, k and v split before the batch is squeezed from a "
                    "tensor");
    /* [N, C, H, W] <-> [N, 1, C, H, W] (axis 1): one group of a split attention's stack */
    if (na == 1 && mark[1] && (un ? rank == 4 : rank == 5 && X.groups == 1))
        return alias_groups(p, nd, x, out_rank, 1, err);
    /* [N, C, 1, 1] <-> [N, C] is the only other change of rank a dtnn value has. */
    if (mark[0] || mark[1] || (un ? rank != 2 : rank != 4 || X.h != 1 || X.w != 1) ||
        na != 2)
        return FAIL("axes: dtnn only squeezes [N, C, 1, 1] to [N, C] (axes 2, 3) and "
                    "unsqueezes back, and unsqueezes [N, C, H, W] at axis 1 (and back)");
    return alias_rank(p, nd, x, out_rank, err);
}

dtnn_status op_identity(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    int x = imp_in(p, nd, 0, err);
    if (x < 0)
        return err->code;
    if (!strcmp(nd->op_type, "Dropout") && p->opset >= 12) {
        int t = imp_in_opt(p, nd, 2, err);
        if (t == -2)
            return err->code;
        if (t >= 0 && ((t = imp_in_const(p, nd, 2, err)) < 0 || p->v[t].count != 1 ||
                       (p->v[t].is_float ? p->v[t].f[0] != 0.0f : p->v[t].i[0] != 0)))
            return t < 0 ? err->code : FAIL("input training_mode must be false");
    }
    if (p->v[x].kind == IMP_CONST)
        return const_copy(p, nd, x, p->v[x].dims, p->v[x].ndim, err);
    if (imp_in_layer(p, nd, 0, 0, err) < 0)
        return err->code;
    return imp_out_alias(p, nd, x, err) < 0 ? err->code : DTNN_OK;
}

dtnn_status op_constant(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    if (nd->n_attribute != 1)
        return BAD("a Constant needs exactly one value attribute");
    const Onnx__AttributeProto *a = nd->attribute[0];
    int o = imp_out(p, nd, 0, err);
    if (o < 0)
        return err->code;
    if (!strcmp(a->name, "value")) {
        if (!a->t)
            return BAD("attribute value has no tensor");
        return imp_const_from_tensor(p, o, a->t, "Constant", err);
    }
    const int is_float = !strcmp(a->name, "value_float") || !strcmp(a->name, "value_floats");
    const int scalar = !strcmp(a->name, "value_float") || !strcmp(a->name, "value_int");
    int64_t n = scalar ? 1 : (int64_t)(is_float ? a->n_floats : a->n_ints);
    if ((scalar && !(is_float ? a->has_f : a->has_i)))
        return BAD("attribute %s has no value", a->name);
    dtnn_status st = imp_const_alloc(p, o, is_float, &n, scalar ? 0 : 1, err);
    for (int64_t k = 0; !st && k < n; k++) {
        if (is_float)
            p->v[o].f[k] = scalar ? a->f : a->floats[k];
        else
            p->v[o].i[k] = scalar ? a->i : a->ints[k];
    }
    return st;
}

dtnn_status op_shape(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    int x = imp_in(p, nd, 0, err);
    if (x < 0)
        return err->code;
    const imp_value X = p->v[x];
    int64_t dims[IMP_MAX_DIMS];
    int r;
    if (X.kind == IMP_CONST) {
        r = X.ndim;
        memcpy(dims, X.dims, sizeof(int64_t) * (size_t)r);
    } else {
        r = imp_layer_dims(&X, p->batch, dims);
    }
    /* opset 15: start and end slice the shape, clamped as Slice's. */
    int64_t s = imp_attr_int(nd, "start", 0), e = imp_attr_int(nd, "end", r);
    s = s < 0 ? s + r : s;
    e = e < 0 ? e + r : e;
    s = s < 0 ? 0 : s > r ? r : s;
    e = e < 0 ? 0 : e > r ? r : e;
    int64_t n = e > s ? e - s : 0;
    int o = imp_out(p, nd, 0, err);
    if (o < 0 || imp_const_alloc(p, o, 0, &n, 1, err))
        return err->code;
    for (int64_t k = 0; k < n; k++)
        p->v[o].i[k] = dims[s + k];
    return DTNN_OK;
}

dtnn_status op_gather(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    const int c = imp_in(p, nd, 0, err);
    if (c >= 0 && p->v[c].kind == IMP_LAYER) {
        /* q, k or v of a tensor whose axis 0 they are (x[0] of torch's unbind) */
        const int x = imp_in_layer(p, nd, 0, IMP_ALLOW_GEN, err);
        const int i = x < 0 ? -1 : imp_in_const(p, nd, 1, err);
        if (i < 0)
            return err->code;
        const int done = imp_attr_int(nd, "axis", 0) == 0 && !p->v[i].is_float &&
                                 p->v[i].ndim == 0
                             ? imp_gen_gather(p, nd, x, p->v[i].i[0], err)
                             : 0;
        return done > 0 ? DTNN_OK : done < 0 ? err->code
               : FAIL("a Gather of a computed value other than one index of axis 0 of q, k "
                      "and v before the batch is not supported");
    }
    int d = imp_in_const(p, nd, 0, err), ix = d < 0 ? -1 : imp_in_const(p, nd, 1, err);
    if (ix < 0)
        return err->code;
    /* out = D's dims before axis, I's dims, D's dims after axis (EfficientFormer's
     * attention_biases[:, attention_bias_idxs] as well as shape vectors) */
    const int a = p->v[d].ndim ? imp_axis(imp_attr_int(nd, "axis", 0), p->v[d].ndim) : -1;
    if (a < 0 || p->v[ix].is_float || p->v[d].ndim + p->v[ix].ndim - 1 > IMP_MAX_DIMS)
        return FAIL("only a Gather of a constant with integer indices on one of its axes is "
                    "folded");
    int64_t dims[IMP_MAX_DIMS];
    int nd_out = 0;
    size_t outer = 1, inner = 1;
    for (int k = 0; k < p->v[d].ndim; k++) {
        if (k == a)
            for (int j = 0; j < p->v[ix].ndim; j++)
                dims[nd_out++] = p->v[ix].dims[j];
        else
            dims[nd_out++] = p->v[d].dims[k];
        if (k < a)
            outer *= (size_t)p->v[d].dims[k];
        if (k > a)
            inner *= (size_t)p->v[d].dims[k];
    }
    int o = imp_out(p, nd, 0, err);
    if (o < 0 || imp_const_alloc(p, o, p->v[d].is_float, dims, nd_out, err))
        return err->code;
    const imp_value *D = &p->v[d], *I = &p->v[ix];
    const int64_t A = D->dims[a];
    for (size_t k = 0; k < I->count; k++) {
        const int64_t j = I->i[k] < 0 ? I->i[k] + A : I->i[k];
        if (j < 0 || j >= A)
            return BAD("index %lld is out of range for '%s'", (long long)I->i[k], D->name);
        for (size_t q = 0; q < outer; q++) {
            const size_t from = (q * (size_t)A + (size_t)j) * inner;
            const size_t to = (q * I->count + k) * inner;
            if (D->is_float)
                memcpy(p->v[o].f + to, D->f + from, sizeof(float) * inner);
            else
                memcpy(p->v[o].i + to, D->i + from, sizeof(int64_t) * inner);
        }
    }
    return DTNN_OK;
}

dtnn_status op_cast(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    int x = imp_in(p, nd, 0, err);
    if (x < 0)
        return err->code;
    const int64_t to = imp_attr_int(nd, "to", 0);
    const int to_float = to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    const int to_int = to == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 ||
                       to == ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
    if (p->v[x].kind == IMP_LAYER) {
        if (!to_float || imp_in_layer(p, nd, 0, 0, err) < 0)
            return to_float ? err->code : FAIL("attribute to=%lld: dtnn values are float32",
                                               (long long)to);
        return imp_out_alias(p, nd, x, err) < 0 ? err->code : DTNN_OK;
    }
    if (!to_float && !to_int)
        return FAIL("attribute to=%lld: constants are folded as float32 or integers",
                    (long long)to);
    int o = imp_out(p, nd, 0, err);
    if (o < 0 || imp_const_alloc(p, o, to_float, p->v[x].dims, p->v[x].ndim, err))
        return err->code;
    const imp_value *X = &p->v[x];
    for (size_t k = 0; k < X->count; k++) {
        if (to_float)
            p->v[o].f[k] = X->is_float ? X->f[k] : (float)X->i[k];
        else
            p->v[o].i[k] = X->is_float ? (int64_t)X->f[k] : X->i[k];
    }
    return DTNN_OK;
}

/* Whether every reader of value `name` is a Conv reading it as its input (and no graph output
 * is it): then zero padding can be that Conv's own. */
static int only_convs_read(const imp *p, const char *name)
{
    const Onnx__GraphProto *g = p->mp->graph;
    for (size_t k = 0; k < g->n_node; k++)
        for (size_t q = 0; q < g->node[k]->n_input; q++)
            if (g->node[k]->input[q] && !strcmp(g->node[k]->input[q], name) &&
                (q != 0 || !g->node[k]->op_type || strcmp(g->node[k]->op_type, "Conv")))
                return 0;
    for (size_t k = 0; k < g->n_output; k++)
        if (g->output[k]->name && !strcmp(g->output[k]->name, name))
            return 0;
    return 1;
}

/* Pad with mode constant: zero rows and columns, the same on both sides, before Convs only are
 * those Convs' padding; zero channels alone are the option-A shortcut's (widening a Slice's
 * before it); any other (another value, asymmetric sides, before another operator) is dtnn's
 * pad layer. */
dtnn_status op_pad(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    int x = imp_in_layer(p, nd, 0, 1, err);
    if (x < 0)
        return err->code;
    const Onnx__AttributeProto *ma = imp_attr(nd, "mode");
    if (ma && ma->has_s && (ma->s.len != 8 || memcmp(ma->s.data, "constant", 8)))
        return FAIL("attribute mode='%.*s': dtnn pads with a constant only (mode constant)",
                    (int)ma->s.len, (const char *)ma->s.data);
    int64_t pd[8];
    float value = 0.0f;
    int n;
    if (p->opset < 11) {
        n = imp_attr_ints(nd, "pads", pd, 8);
        value = imp_attr_float(nd, "value", 0.0f);
    } else {
        if (nd->n_input > 3)
            return FAIL("input axes is not supported");
        const Onnx__AttributeProto *pa = imp_attr(nd, "pads");
        if (pa)
            return BAD("pads is an input from opset 11, not an attribute");
        int pi = imp_in_const(p, nd, 1, err);
        if (pi < 0)
            return err->code;
        if (p->v[pi].is_float || p->v[pi].count > 8)
            return BAD("input 1 (pads) must be integers");
        n = (int)p->v[pi].count;
        for (int k = 0; k < n; k++)
            pd[k] = p->v[pi].i[k];
        int vi = imp_in_opt(p, nd, 2, err);
        if (vi == -2)
            return err->code;
        if (vi >= 0) {
            if ((vi = imp_in_const(p, nd, 2, err)) < 0)
                return err->code;
            if (p->v[vi].count != 1)
                return BAD("input 2 (constant_value) is not a scalar");
            value = p->v[vi].is_float ? p->v[vi].f[0] : (float)p->v[vi].i[0];
        }
    }
    const imp_value X = p->v[x];
    if (n != 8 || X.rank != 4)
        return FAIL("pads: only 4-D [N, C, H, W] values are padded");
    if (!isfinite(value) || fabsf(value) > 1e30f)
        return FAIL("constant value %g: dtnn pads with a finite value", value);
    for (int k = 0; k < 8; k++)
        if (pd[k] < 0 || pd[k] > 1 << 16)
            return FAIL("pads: negative (cropping) or huge pads are not supported");
    if (pd[0] || pd[4])
        return FAIL("pads: the batch dimension cannot be padded");
    const int chans = pd[1] || pd[5], spatial = pd[2] || pd[3] || pd[6] || pd[7];
    const int fold_conv = value == 0.0f && !chans && pd[2] == pd[6] && pd[3] == pd[7] &&
                          only_convs_read(p, nd->output[0]);
    if (!fold_conv && !(value == 0.0f && chans && !spatial)) {
        if (X.pad_h || X.pad_w)
            return FAIL("pads: a Pad after a Pad that waits for a Conv is not supported");
        const int K = X.c + (int)(pd[1] + pd[5]), P = X.h + (int)(pd[2] + pd[6]),
                  Q = X.w + (int)(pd[3] + pd[7]);
        int o = imp_layer_new(p, nd, "pad", NULL, &x, 1, 4, K, P, Q, err);
        if (o < 0)
            return err->code;
        imp_layer *l = &p->l[p->v[o].layer];
        imp_opt(l, "pads", "%d,%d,%d,%d", (int)pd[2], (int)pd[3], (int)pd[6], (int)pd[7]);
        if (chans) {
            imp_opt(l, "pad_front", "%d", (int)pd[1]);
            imp_opt(l, "pad_back", "%d", (int)pd[5]);
        }
        if (value != 0.0f)
            imp_opt(l, "value", "%.9g", value);
        return DTNN_OK;
    }
    if ((pd[1] || pd[5]) && (X.pad_h || X.pad_w))
        return FAIL("pads: channels and rows or columns at once are not supported");
    if (pd[1] || pd[5]) {
        /* Zero channels: the option-A shortcut, widening the Slice's shortcut before it. */
        const int K = X.c + (int)pd[1] + (int)pd[5];
        imp_layer *l = X.layer >= 0 ? &p->l[X.layer] : NULL;
        if (l && !strcmp(l->type, "shortcut_a") && l->out == x && l->filters == X.c &&
            imp_uses(p, X.name) == 1) {
            l->filters = K;
            l->offset = (int)pd[1];
            int o = imp_out_alias(p, nd, x, err);
            if (o < 0)
                return err->code;
            p->v[o].c = K;
            return DTNN_OK;
        }
        int o = imp_layer_new(p, nd, "shortcut_a", NULL, &x, 1, 4, K, X.h, X.w, err);
        if (o < 0)
            return err->code;
        l = &p->l[p->v[o].layer];
        l->filters = K;
        l->stride = 1;
        l->offset = (int)pd[1];
        return DTNN_OK;
    }
    int o = imp_out_alias(p, nd, x, err);
    if (o < 0)
        return err->code;
    p->v[o].pad_h += (int)pd[2];
    p->v[o].pad_w += (int)pd[3];
    return DTNN_OK;
}

/* ONNX's clamping of a Slice bound on an axis of `size` (step 1). */
static int64_t slice_bound(int64_t b, int size)
{
    if (b < 0)
        b += size;
    return b < 0 ? 0 : b > size ? size : b;
}

/* A slice layer for output k of nd: channels [start, end) of value x. */
static dtnn_status channel_range(imp *p, const Onnx__NodeProto *nd, int k, int x, int start,
                                 int end, dtnn_error *err)
{
    const imp_value X = p->v[x];
    int o = imp_layer_output(p, nd, k, "slice", &x, 1, X.rank, end - start, X.h, X.w, err);
    if (o < 0)
        return err->code;
    imp_layer *l = &p->l[p->v[o].layer];
    imp_opt(l, "start", "%d", start);
    imp_opt(l, "end", "%d", end);
    return DTNN_OK;
}

/* x[:, start:end] (Slice on axis 1 with step 1): the slice layer. */
static dtnn_status slice_channels(imp *p, const Onnx__NodeProto *nd, int x, int64_t start,
                                  int64_t end, int64_t step, dtnn_error *err)
{
    const int C = p->v[x].c;
    if (step != 1)
        return FAIL("a Slice of channels with step %lld (dtnn slices channels with step 1)",
                    (long long)step);
    start = slice_bound(start, C);
    end = slice_bound(end, C);
    if (start >= end)
        return FAIL("a Slice of channels [%lld, %lld) of %d is empty", (long long)start,
                    (long long)end, C);
    if (start == 0 && end == C)
        return imp_out_alias(p, nd, x, err) < 0 ? err->code : DTNN_OK;
    return channel_range(p, nd, 0, x, (int)start, (int)end, err);
}

/* Split along axis 1 (torch.split, torch.chunk): one slice layer per output that is used. */
dtnn_status op_split(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    int x = imp_in_layer(p, nd, 0, IMP_ALLOW_GEN, err);
    if (x < 0)
        return err->code;
    const imp_value X = p->v[x];
    const int axis = imp_axis(imp_attr_int(nd, "axis", 0), X.rank);
    const int lead = X.gen == IMP_GEN_LEAD && axis == 0;
    const int last = !lead && axis == X.rank - 1 &&
                     ((X.gen && X.nsd >= 2) || (!X.gen && X.rank == 4 && axis == 3));
    if (!lead && !last && (X.gen || axis != 1 || (X.rank != 4 && X.rank != 2)))
        return FAIL("only a Split of channels (axis 1 of NCHW or of [N, features]), of the last "
                    "axis, or of q, k and v before the batch (axis 0) is supported");
    const int outs = (int)nd->n_output;
    int64_t sizes[64];
    if (outs < 1 || outs > 64)
        return FAIL("%d outputs (dtnn splits into 1 to 64)", outs);
    int given = p->opset >= 13 ? (imp_in_opt(p, nd, 1, err) >= 0
                                      ? imp_const_ints(p, nd, 1, sizes, 64, err) : 0)
                               : imp_attr_ints(nd, "split", sizes, 64);
    if (given < 0)
        return err->code;
    const int whole = lead ? X.sd[0] : last ? X.w : X.c;
    if (given == 0) {
        if (whole % outs)
            return BAD("%d do not split into %d equal parts", whole, outs);
        for (int k = 0; k < outs; k++)
            sizes[k] = whole / outs;
    } else if (given != outs) {
        return BAD("%d split sizes for %d outputs", given, outs);
    }
    if (lead || last) {
        const int done = lead ? imp_gen_split(p, nd, x, sizes, outs, err)
                              : imp_gen_split_last(p, nd, x, sizes, outs, err);
        return done > 0 ? DTNN_OK : done < 0 ? err->code : FAIL("this Split is not supported");
    }
    int64_t start = 0;
    for (int k = 0; k < outs; k++) {
        if (sizes[k] < 0 || start + sizes[k] > X.c)
            return BAD("split sizes that do not add up to the %d channels", X.c);
        dtnn_status st = DTNN_OK;
        if (sizes[k] > 0 && nd->output[k] && nd->output[k][0] && imp_uses(p, nd->output[k]))
            st = channel_range(p, nd, k, x, (int)start, (int)(start + sizes[k]), err);
        if (st)
            return st;
        start += sizes[k];
    }
    return start == X.c ? DTNN_OK : BAD("split sizes add up to %lld of %d channels",
                                        (long long)start, X.c);
}

/* x[:, :, ::s, ::s]: the option-A shortcut's subsampling (its channel Pad may follow). */
dtnn_status op_slice(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    int c = imp_in(p, nd, 0, err);
    if (c >= 0 && p->v[c].kind == IMP_CONST) {
        if (p->opset < 10)
            return FAIL("a Slice of a constant before opset 10 is not supported");
        return fold_slice(p, nd, err);
    }
    int x = imp_in_layer(p, nd, 0, 0, err);
    if (x < 0)
        return err->code;
    int64_t st[4], en[4], ax[4] = {0, 1, 2, 3}, sp[4] = {1, 1, 1, 1};
    int n, ne, na, ns;
    if (p->opset < 10) {
        /* Slice-1: starts, ends and axes are attributes; no steps. */
        n = imp_attr_ints(nd, "starts", st, 4);
        ne = imp_attr_ints(nd, "ends", en, 4);
        na = imp_attr_ints(nd, "axes", ax, 4);
        na = na ? na : n;
        ns = n;
        if (n < 1 || n > 4)
            return BAD("starts has %d values (1 to 4)", n);
    } else {
        n = imp_const_ints(p, nd, 1, st, 4, err);
        ne = n < 0 ? -1 : imp_const_ints(p, nd, 2, en, 4, err);
        if (ne < 0)
            return err->code;
        na = ns = n;
        if (imp_in_opt(p, nd, 3, err) >= 0 && (na = imp_const_ints(p, nd, 3, ax, 4, err)) < 0)
            return err->code;
        if (imp_in_opt(p, nd, 4, err) >= 0 && (ns = imp_const_ints(p, nd, 4, sp, 4, err)) < 0)
            return err->code;
    }
    if (ne != n || na != n || ns != n)
        return BAD("starts, ends, axes and steps differ in length");
    const imp_value X = p->v[x];
    if (n == 1 && imp_axis(ax[0], X.rank) == 1)
        return slice_channels(p, nd, x, st[0], en[0], sp[0], err);
    const int size[4] = {0, X.c, X.h, X.w};
    int step[4] = {1, 1, 1, 1};
    for (int k = 0; k < n; k++) {
        int a = imp_axis(ax[k], X.rank);
        if (a < 0)
            return BAD("axis %lld is out of range", (long long)ax[k]);
        if (st[k] != 0 || en[k] < size[a] || sp[k] < 1 || sp[k] > 1 << 16 || a < 2 ||
            X.rank != 4)
            return FAIL("only x[:, :, ::s, ::s] (start 0, to the end, step s on H and W) and "
                        "x[:, a:b] (channels, step 1) are supported");
        step[a] = (int)sp[k];
    }
    if (step[2] != step[3])
        return FAIL("steps %d and %d on H and W differ", step[2], step[3]);
    if (step[2] == 1)
        return imp_out_alias(p, nd, x, err) < 0 ? err->code : DTNN_OK;
    const int s = step[2];
    int o = imp_layer_new(p, nd, "shortcut_a", NULL, &x, 1, 4, X.c, (X.h + s - 1) / s,
                          (X.w + s - 1) / s, err);
    if (o < 0)
        return err->code;
    imp_layer *l = &p->l[p->v[o].layer];
    l->filters = X.c;
    l->stride = s;
    l->offset = 0;
    return DTNN_OK;
}
