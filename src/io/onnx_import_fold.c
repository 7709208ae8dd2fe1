/*
 * onnx_import_fold.c — constant folding of the index arithmetic PyTorch writes around a
 * constant F.pad from opset 11 (ConstantOfShape -> Concat -> Reshape -> Slice with step -1 ->
 * Transpose -> Reshape -> Cast gives Pad its pads input): ConstantOfShape, and Reshape, Slice
 * and Transpose of constants; and Add, Sub, Mul and Div of two constants (MobileViT's scale
 * factors, shape arithmetic). Only constants: on computed values these operators are the
 * layers of onnx_import_shape.c or unsupported. Semantics: onnx/docs/Operators.md.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_import.h"

#define FAIL(...) imp_fail(p, nd, DTNN_ERR_UNSUPPORTED, err, __VA_ARGS__)
#define BAD(...) imp_fail(p, nd, DTNN_ERR_FORMAT, err, __VA_ARGS__)

/* o[k] = s[base + sum idx[d] * step[d]] over the index space dims[0..ndim) in row-major order. */
static void gather_strided(imp_value *o, const imp_value *s, int ndim, const int64_t *dims,
                           int64_t base, const int64_t *step)
{
    int64_t idx[IMP_MAX_DIMS] = {0};
    for (size_t k = 0; k < o->count; k++) {
        int64_t off = base;
        for (int d = 0; d < ndim; d++)
            off += idx[d] * step[d];
        if (o->is_float)
            o->f[k] = s->f[off];
        else
            o->i[k] = s->i[off];
        for (int d = ndim - 1; d >= 0; d--) {
            if (++idx[d] < dims[d])
                break;
            idx[d] = 0;
        }
    }
}

static void strides_of(const imp_value *s, int64_t *st)
{
    int64_t acc = 1;
    for (int d = s->ndim - 1; d >= 0; d--) {
        st[d] = acc;
        acc *= s->dims[d];
    }
}

dtnn_status op_constant_of_shape(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    int64_t dims[IMP_MAX_DIMS];
    int n = imp_const_ints(p, nd, 0, dims, IMP_MAX_DIMS, err);
    if (n < 0)
        return err->code;
    /* Shapes and pads are small: a larger fill is no index arithmetic (and would only take
     * memory the file does not hold). */
    int64_t count = 1;
    for (int d = 0; d < n; d++) {
        if (dims[d] < 0 || dims[d] > 1 << 20 || (count *= dims[d]) > 1 << 20)
            return FAIL("input 0: a constant of more than 2^20 elements is not folded");
    }
    /* The fill value: a one-element tensor (default float 0), read into a scratch value. */
    const Onnx__AttributeProto *a = imp_attr(nd, "value");
    int is_float = 1;
    float fv = 0.0f;
    int64_t iv = 0;
    if (a && a->t) {
        int t = imp_value_inner(p, err);
        if (t < 0 || imp_const_from_tensor(p, t, a->t, "ConstantOfShape value", err))
            return err->code;
        if (p->v[t].count != 1)
            return BAD("attribute value must hold one element");
        is_float = p->v[t].is_float;
        fv = is_float ? p->v[t].f[0] : 0.0f;
        iv = is_float ? 0 : p->v[t].i[0];
    }
    int o = imp_out(p, nd, 0, err);
    if (o < 0 || imp_const_alloc(p, o, is_float, dims, n, err))
        return err->code;
    for (size_t k = 0; k < p->v[o].count; k++) {
        if (is_float)
            p->v[o].f[k] = fv;
        else
            p->v[o].i[k] = iv;
    }
    return DTNN_OK;
}

dtnn_status fold_reshape(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    int x = imp_in_const(p, nd, 0, err);
    int64_t t[IMP_MAX_DIMS];
    int n = x < 0 ? -1 : imp_const_ints(p, nd, 1, t, IMP_MAX_DIMS, err);
    if (n < 0)
        return err->code;
    const imp_value X = p->v[x];
    int64_t known = 1;
    int infer = -1;
    for (int d = 0; d < n; d++) {
        if (t[d] == 0 && d < X.ndim)
            t[d] = X.dims[d];
        if (t[d] == -1 && infer < 0)
            infer = d;
        else if (t[d] < 0 || t[d] > (int64_t)1 << 31 || (known *= t[d]) > (int64_t)1 << 31)
            return BAD("target shape has a bad dimension %lld", (long long)t[d]);
    }
    if (infer >= 0)
        t[infer] = known ? (int64_t)X.count / known : 0;
    int o = imp_out(p, nd, 0, err);
    if (o < 0 || imp_const_alloc(p, o, X.is_float, t, n, err))
        return err->code;
    if (p->v[o].count != p->v[x].count)
        return BAD("reshaping %zu values of '%s' into %zu", p->v[x].count, p->v[x].name,
                   p->v[o].count);
    if (X.is_float)
        memcpy(p->v[o].f, p->v[x].f, sizeof(float) * X.count);
    else
        memcpy(p->v[o].i, p->v[x].i, sizeof(int64_t) * X.count);
    return DTNN_OK;
}

/* A Transpose of computed value x that moves only axes of size 1 (ResNeSt's radix softmax of
 * one cardinal group: [N, 1, R, C] to [N, R, 1, C]) keeps the memory order: a reshape (no
 * layer where dtnn's C x H x W stays). 1 done, 0 not such a Transpose, -1 error. */
static int unit_transpose(imp *p, const Onnx__NodeProto *nd, int x, const int64_t *perm, int n,
                          dtnn_error *err)
{
    const imp_value X = p->v[x];
    int64_t d[IMP_MAX_DIMS], od[5] = {1, 1, 1, 1, 1};
    if (X.nhwc || X.gen || n != X.rank || n < 2 || n > 5 || perm[0] != 0)
        return 0;
    imp_layer_dims(&X, p->batch, d);
    int seen[5] = {0}, last = 0;
    for (int k = 0; k < n; k++) {
        if (perm[k] < 0 || perm[k] >= n || seen[perm[k]]++)
            return 0;
        od[k] = d[perm[k]];
        if (k && d[perm[k]] != 1) {
            if (perm[k] < last)
                return 0;
            last = (int)perm[k];
        }
    }
    const int c = (int)(n == 5 ? od[1] * od[2] : od[1]), h = (int)(n == 5 ? od[3] : od[2]);
    const int w = (int)(n == 5 ? od[4] : od[3]);
    int o;
    if (c == X.c && h == X.h && w == X.w) {
        o = imp_out_alias(p, nd, x, err);
    } else {
        o = imp_layer_new(p, nd, "reshape", NULL, &x, 1, n, c, h, w, err);
        if (o >= 0)
            imp_opt(&p->l[p->v[o].layer], "shape", "%dx%dx%d", c, h, w);
    }
    if (o < 0)
        return -1;
    p->v[o].groups = n == 5 ? (int)od[1] : 0;
    return 1;
}

/* A Transpose of a computed [N, C, H, W] value to channels-last ([0, 2, 3, 1]) or back
 * ([0, 3, 1, 2]): no layer, the value marked (ConvNeXt's LayerNorm2d, torchvision's
 * permute - layer_norm - permute); or one that moves only axes of size 1. */
static dtnn_status transpose_view(imp *p, const Onnx__NodeProto *nd, int x, dtnn_error *err)
{
    int64_t perm[IMP_MAX_DIMS];
    const int n = imp_attr_ints(nd, "perm", perm, IMP_MAX_DIMS);
    if (n > IMP_MAX_DIMS)
        return FAIL("attribute perm has %d entries", n);
    const int to_last = n == 4 && perm[0] == 0 && perm[1] == 2 && perm[2] == 3 && perm[3] == 1;
    const int back = n == 4 && perm[0] == 0 && perm[1] == 3 && perm[2] == 1 && perm[3] == 2;
    const int view = p->v[x].rank == 4 && !p->v[x].gen &&
                     (to_last ? !p->v[x].nhwc : back && p->v[x].nhwc);
    /* the channels-last view first: a [N, C, 1, 1] one still meets its LayerNormalization;
     * then a reshape where only unit axes move, then the permute layer */
    int done = !view && n <= 5 ? unit_transpose(p, nd, x, perm, n, err) : 0;
    if (!view && !done && !p->v[x].nhwc)
        done = imp_gen_transpose(p, nd, x, perm, n, err);
    if (done)
        return done < 0 ? err->code : DTNN_OK;
    if (!view)
        return FAIL("a Transpose of a computed value that moves its batch axis anywhere but "
                    "first or second (the second only before a Split or Gather of axis 0) is "
                    "not supported");
    int o = imp_out_alias(p, nd, x, err);
    if (o < 0)
        return err->code;
    p->v[o].nhwc = to_last;
    return DTNN_OK;
}

dtnn_status op_transpose(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    int c = imp_in(p, nd, 0, err);
    if (c < 0)
        return err->code;
    if (p->v[c].kind == IMP_LAYER) {
        int v = imp_in_layer(p, nd, 0, IMP_ALLOW_NHWC | IMP_ALLOW_GROUPS | IMP_ALLOW_GEN, err);
        return v < 0 ? err->code : transpose_view(p, nd, v, err);
    }
    int x = imp_in_const(p, nd, 0, err);
    if (x < 0)
        return err->code;
    const imp_value X = p->v[x];
    int64_t perm[IMP_MAX_DIMS], st[IMP_MAX_DIMS], dims[IMP_MAX_DIMS], step[IMP_MAX_DIMS];
    int n = imp_attr_ints(nd, "perm", perm, IMP_MAX_DIMS);
    if (n == 0) {
        n = X.ndim;
        for (int d = 0; d < n; d++)
            perm[d] = n - 1 - d;
    }
    if (n != X.ndim)
        return BAD("attribute perm has %d entries for %d dimensions", n, X.ndim);
    strides_of(&X, st);
    int seen[IMP_MAX_DIMS] = {0};
    for (int d = 0; d < n; d++) {
        if (perm[d] < 0 || perm[d] >= n || seen[perm[d]]++)
            return BAD("attribute perm is not a permutation");
        dims[d] = X.dims[perm[d]];
        step[d] = st[perm[d]];
    }
    int o = imp_out(p, nd, 0, err);
    if (o < 0 || imp_const_alloc(p, o, X.is_float, dims, n, err))
        return err->code;
    gather_strided(&p->v[o], &p->v[x], n, dims, 0, step);
    return DTNN_OK;
}

dtnn_status fold_slice(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    int x = imp_in_const(p, nd, 0, err);
    int64_t s[IMP_MAX_DIMS], e[IMP_MAX_DIMS], ax[IMP_MAX_DIMS], sp[IMP_MAX_DIMS];
    int n = x < 0 ? -1 : imp_const_ints(p, nd, 1, s, IMP_MAX_DIMS, err);
    int ne = n < 0 ? -1 : imp_const_ints(p, nd, 2, e, IMP_MAX_DIMS, err);
    if (ne < 0)
        return err->code;
    const imp_value X = p->v[x];
    int na = n, ns = n;
    for (int k = 0; k < n; k++) {
        ax[k] = k;
        sp[k] = 1;
    }
    if (imp_in_opt(p, nd, 3, err) >= 0 && (na = imp_const_ints(p, nd, 3, ax, 8, err)) < 0)
        return err->code;
    if (imp_in_opt(p, nd, 4, err) >= 0 && (ns = imp_const_ints(p, nd, 4, sp, 8, err)) < 0)
        return err->code;
    if (ne != n || na != n || ns != n)
        return BAD("starts, ends, axes and steps differ in length");
    int64_t start[IMP_MAX_DIMS], step[IMP_MAX_DIMS], dims[IMP_MAX_DIMS], st[IMP_MAX_DIMS];
    strides_of(&X, st);
    for (int d = 0; d < X.ndim; d++) {
        start[d] = 0;
        step[d] = 1;
        dims[d] = X.dims[d];
    }
    for (int k = 0; k < n; k++) {
        int64_t a = ax[k] < 0 ? ax[k] + X.ndim : ax[k], dim;
        if (a < 0 || a >= X.ndim || sp[k] == 0 || sp[k] > 1 << 30 || sp[k] < -(1 << 30))
            return BAD("axis %lld or step 0 is out of range", (long long)ax[k]);
        dim = X.dims[a];
        /* Clamping as the operator document: [0, dim] for positive steps, [-1, dim - 1]
         * for negative ones. */
        int64_t b = s[k] < 0 ? s[k] + dim : s[k], en = e[k] < 0 ? e[k] + dim : e[k];
        if (e[k] < -dim)
            en = -1;
        if (sp[k] > 0) {
            b = b < 0 ? 0 : b > dim ? dim : b;
            en = en < 0 ? 0 : en > dim ? dim : en;
            dims[a] = en > b ? (en - b + sp[k] - 1) / sp[k] : 0;
        } else {
            b = b < -1 ? -1 : b > dim - 1 ? dim - 1 : b;
            en = en < -1 ? -1 : en > dim - 1 ? dim - 1 : en;
            dims[a] = b > en ? (b - en - sp[k] - 1) / -sp[k] : 0;
        }
        start[a] = b;
        step[a] = sp[k];
    }
    int64_t base = 0, ostep[IMP_MAX_DIMS];
    for (int d = 0; d < X.ndim; d++) {
        base += start[d] * st[d];
        ostep[d] = step[d] * st[d];
    }
    int o = imp_out(p, nd, 0, err);
    if (o < 0 || imp_const_alloc(p, o, X.is_float, dims, X.ndim, err))
        return err->code;
    gather_strided(&p->v[o], &p->v[x], X.ndim, dims, base, ostep);
    return DTNN_OK;
}

/* Where one operand's element for output index idx lies (right-aligned, broadcast where its
 * size is 1). */
static int64_t operand_offset(const imp_value *v, int out_ndim, const int64_t *idx)
{
    int64_t off = 0, stride = 1;
    for (int d = v->ndim - 1; d >= 0; d--) {
        const int od = out_ndim - v->ndim + d;
        off += (v->dims[d] == 1 ? 0 : idx[od]) * stride;
        stride *= v->dims[d];
    }
    return off;
}

static float as_float(const imp_value *v, int64_t off)
{
    return v->is_float ? v->f[off] : (float)v->i[off];
}

/* Integer arithmetic wraps as the two's complement hardware does (a hostile file's overflow is
 * a wrong shape later, never undefined behaviour here). */
static int64_t int_op(char op, int64_t x, int64_t y)
{
    const uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
    switch (op) {
    case 'S':
        return (int64_t)(ux - uy);
    case 'M':
        return (int64_t)(ux * uy);
    case 'D':
        return y == -1 ? (int64_t)(0 - ux) : x / y;
    default:
        return (int64_t)(ux + uy);
    }
}

dtnn_status fold_binary(imp *p, const Onnx__NodeProto *nd, int a, int b, dtnn_error *err)
{
    const imp_value A = p->v[a], B = p->v[b];
    /* Add and Sum of two add; Sub, Mul, Div, Pow */
    const char op = !strcmp(nd->op_type, "Sub")   ? 'S'
                    : !strcmp(nd->op_type, "Mul") ? 'M'
                    : !strcmp(nd->op_type, "Div") ? 'D'
                    : !strcmp(nd->op_type, "Pow") ? 'P'
                                                  : 'A';
    const int ndim = A.ndim > B.ndim ? A.ndim : B.ndim;
    int64_t dims[IMP_MAX_DIMS];
    int64_t count = 1;
    for (int d = 0; d < ndim; d++) {
        const int da = d - (ndim - A.ndim), db = d - (ndim - B.ndim);
        const int64_t sa = da >= 0 ? A.dims[da] : 1, sb = db >= 0 ? B.dims[db] : 1;
        if (sa != sb && sa != 1 && sb != 1)
            return BAD("constants '%s' and '%s' do not broadcast (dimension %d: %lld and %lld)",
                       A.name, B.name, d, (long long)sa, (long long)sb);
        dims[d] = sa == 1 ? sb : sa;
        /* no larger than the file's own constants (a weight), or 2^20 by broadcasting */
        if ((count *= dims[d]) > (int64_t)(A.count > B.count ? A.count : B.count) &&
            count > 1 << 20)
            return FAIL("a broadcast of constants to more than 2^20 elements is not folded");
    }
    /* ONNX takes one type for both; float where either is, integer arithmetic otherwise */
    const int is_float = A.is_float || B.is_float;
    int o = imp_out(p, nd, 0, err);
    if (o < 0 || imp_const_alloc(p, o, is_float, dims, ndim, err))
        return err->code;
    int64_t idx[IMP_MAX_DIMS] = {0};
    const imp_value *va = &p->v[a], *vb = &p->v[b];
    for (size_t k = 0; k < p->v[o].count; k++) {
        const int64_t oa = operand_offset(va, ndim, idx), ob = operand_offset(vb, ndim, idx);
        if (is_float) {
            const float fx = as_float(va, oa), fy = as_float(vb, ob);
            p->v[o].f[k] = op == 'A' ? fx + fy : op == 'S' ? fx - fy : op == 'M' ? fx * fy
                           : op == 'P' ? powf(fx, fy) : fx / fy;
        } else {
            if (op == 'D' && vb->i[ob] == 0)
                return BAD("integer division of '%s' by zero", A.name);
            if (op == 'P')
                return FAIL("Pow of integer constants is not folded");
            p->v[o].i[k] = int_op(op, va->i[oa], vb->i[ob]);
        }
        for (int d = ndim - 1; d >= 0; d--) {
            if (++idx[d] < dims[d])
                break;
            idx[d] = 0;
        }
    }
    return DTNN_OK;
}

/* Bound k of a Clip of a constant: its input (opset 11+) or attribute, as a double; the
 * default when it is left out. */
static dtnn_status clip_bound(imp *p, const Onnx__NodeProto *nd, int k, double dflt,
                              double *out, dtnn_error *err)
{
    *out = dflt;
    if (p->opset < 11) {
        *out = imp_attr_float(nd, k == 1 ? "min" : "max", (float)dflt);
        return DTNN_OK;
    }
    int i = imp_in_opt(p, nd, k, err);
    if (i == -2)
        return err->code;
    if (i >= 0) {
        if ((i = imp_in_const(p, nd, k, err)) < 0)
            return err->code;
        if (p->v[i].count != 1)
            return BAD("bound '%s' is not a scalar", p->v[i].name);
        *out = p->v[i].is_float ? (double)p->v[i].f[0] : (double)p->v[i].i[0];
    }
    return DTNN_OK;
}

static double unary_value(const char *op, double v, double lo, double hi)
{
    if (!strcmp(op, "Ceil"))
        return ceil(v);
    if (!strcmp(op, "Floor"))
        return floor(v);
    if (!strcmp(op, "Neg"))
        return -v;
    if (!strcmp(op, "Abs"))
        return fabs(v);
    if (!strcmp(op, "Sqrt"))
        return sqrt(v);
    if (!strcmp(op, "Relu"))
        return v > 0 ? v : 0;
    if (!strcmp(op, "Sigmoid"))
        return 1.0 / (1.0 + exp(-v));
    if (!strcmp(op, "Tanh"))
        return tanh(v);
    if (!strcmp(op, "Erf"))
        return erf(v);
    return v < lo ? lo : v > hi ? hi : v;  /* Clip */
}

dtnn_status fold_unary(imp *p, const Onnx__NodeProto *nd, int x, dtnn_error *err)
{
    double lo = -INFINITY, hi = INFINITY;
    const int clip = !strcmp(nd->op_type, "Clip");
    dtnn_status st;
    if (clip && ((st = clip_bound(p, nd, 1, -INFINITY, &lo, err)) ||
                 (st = clip_bound(p, nd, 2, INFINITY, &hi, err))))
        return st;
    const int exact_on_ints = clip || !strcmp(nd->op_type, "Neg") ||
                              !strcmp(nd->op_type, "Abs") || !strcmp(nd->op_type, "Relu") ||
                              !strcmp(nd->op_type, "Ceil") || !strcmp(nd->op_type, "Floor");
    if (!p->v[x].is_float && !exact_on_ints)
        return FAIL("%s of integer constant '%s' is not folded", nd->op_type, p->v[x].name);
    int64_t dims[IMP_MAX_DIMS];
    const int ndim = p->v[x].ndim;
    memcpy(dims, p->v[x].dims, sizeof(int64_t) * (size_t)ndim);
    int o = imp_out(p, nd, 0, err);
    if (o < 0 || imp_const_alloc(p, o, p->v[x].is_float, dims, ndim, err))
        return err->code;
    const imp_value *v = &p->v[x];  /* making the output may have moved the array */
    for (size_t k = 0; k < v->count; k++) {
        if (v->is_float)
            p->v[o].f[k] = (float)unary_value(nd->op_type, (double)v->f[k], lo, hi);
        else
            p->v[o].i[k] = (int64_t)unary_value(nd->op_type, (double)v->i[k], lo, hi);
    }
    return DTNN_OK;
}

/* ---- reductions and batch normalisation of constants (weight standardisation) ------------ */

/* ReduceMean, ReduceSum or ReduceL2 (op 0, 1, 2) of constant x over axes (none: all) in
 * double, keepdims or not: what NFNets' weight standardisation computes of a weight. */
dtnn_status fold_reduce(imp *p, const Onnx__NodeProto *nd, int x, int op, const int64_t *axes,
                        int na, int keep, dtnn_error *err)
{
    const imp_value X = p->v[x];
    if (!X.is_float)
        return FAIL("a reduction of the integer constant '%s' is not folded", X.name);
    int reduced[IMP_MAX_DIMS] = {0};
    for (int k = 0; k < na; k++) {
        const int a = imp_axis(axes[k], X.ndim);
        if (a < 0 || reduced[a]++)
            return BAD("axes of '%s' out of range or repeated", X.name);
    }
    int64_t dims[IMP_MAX_DIMS];
    int ndim = 0;
    for (int d = 0; d < X.ndim; d++)
        if (!(na == 0 || reduced[d]) || keep)
            dims[ndim++] = na == 0 || reduced[d] ? 1 : X.dims[d];
    int o = imp_out(p, nd, 0, err);
    if (o < 0 || imp_const_alloc(p, o, 1, dims, ndim, err))
        return err->code;
    const imp_value *src = &p->v[x];
    imp_value *out = &p->v[o];
    double *acc = calloc(out->count ? out->count : 1, sizeof(double));
    if (!acc)
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
    int64_t idx[IMP_MAX_DIMS] = {0};
    const size_t per = out->count ? src->count / out->count : 0;
    for (size_t k = 0; k < src->count; k++) {
        /* the output element: the kept dims' indices, row-major */
        int64_t at = 0;
        for (int d = 0; d < X.ndim; d++)
            if (!(na == 0 || reduced[d]))
                at = at * X.dims[d] + idx[d];
        const double v = src->f[k];
        acc[at] += op == 2 ? v * v : v;
        for (int d = X.ndim - 1; d >= 0; d--) {
            if (++idx[d] < X.dims[d])
                break;
            idx[d] = 0;
        }
    }
    for (size_t j = 0; j < out->count; j++)
        out->f[j] = (float)(op == 2 ? sqrt(acc[j]) : op == 0 ? acc[j] / (double)per : acc[j]);
    free(acc);
    return DTNN_OK;
}

/* BatchNormalization of a constant X [N, C, ...]: with training_mode 1 normalised by its own
 * mean and biased variance per channel (what F.batch_norm(weight, training=True) makes of
 * NFNets' weights), else by the inputs' running statistics; then scale and bias. The running
 * outputs of training mode (1 and 2), where named, are folded as well, as ONNX's function
 * body defines them (the biased variance). */
dtnn_status fold_batchnorm(imp *p, const Onnx__NodeProto *nd, int x, dtnn_error *err)
{
    const imp_value X = p->v[x];
    if (!X.is_float || X.ndim < 2)
        return FAIL("a batch normalisation of the constant '%s' of rank %d is not folded",
                    X.name, X.ndim);
    const int64_t C = X.dims[1];
    int t[4];
    for (int k = 0; k < 4; k++)
        if ((t[k] = imp_const_floats(p, nd, k + 1, (size_t)C, err)) < 0)
            return err->code;
    const int training = imp_attr_int(nd, "training_mode", 0) != 0;
    const double eps = imp_attr_float(nd, "epsilon", 1e-5f);
    const double momentum = imp_attr_float(nd, "momentum", 0.9f);
    const size_t inner = X.count / (size_t)(X.dims[0] * C);
    double *mean = calloc((size_t)C * 2, sizeof(double));
    if (!mean)
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
    double *var = mean + C;
    const size_t per = (size_t)X.dims[0] * inner;
    for (int64_t c = 0; c < C; c++) {
        if (!training) {
            mean[c] = p->v[t[2]].f[c];
            var[c] = p->v[t[3]].f[c];
            continue;
        }
        double s = 0.0, s2 = 0.0;
        for (int64_t n = 0; n < X.dims[0]; n++)
            for (size_t j = 0; j < inner; j++)
                s += X.f[((size_t)n * C + c) * inner + j];
        mean[c] = s / (double)per;
        for (int64_t n = 0; n < X.dims[0]; n++)
            for (size_t j = 0; j < inner; j++) {
                const double d = X.f[((size_t)n * C + c) * inner + j] - mean[c];
                s2 += d * d;
            }
        var[c] = s2 / (double)per;
    }
    dtnn_status st = DTNN_OK;
    int o = imp_out(p, nd, 0, err);
    if (o < 0 || imp_const_alloc(p, o, 1, X.dims, X.ndim, err))
        st = err->code;
    for (size_t k = 0; !st && k < p->v[o].count; k++) {
        const int64_t c = (int64_t)(k / inner) % C;
        p->v[o].f[k] = (float)((p->v[x].f[k] - mean[c]) / sqrt(var[c] + eps) *
                                   p->v[t[0]].f[c] + p->v[t[1]].f[c]);
    }
    for (size_t r = 1; !st && training && r < 3 && r < nd->n_output; r++) {
        if (!nd->output[r][0])
            continue;
        const int64_t cd[1] = {C};
        int ro = imp_out(p, nd, (int)r, err);
        if (ro < 0 || imp_const_alloc(p, ro, 1, cd, 1, err)) {
            st = err->code;
            break;
        }
        const float *running = p->v[t[r + 1]].f;
        for (int64_t c = 0; c < C; c++)
            p->v[ro].f[c] = (float)(running[c] * momentum +
                                    (r == 1 ? mean[c] : var[c]) * (1.0 - momentum));
    }
    free(mean);
    return st;
}
