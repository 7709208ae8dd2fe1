/*
 * onnx_import_ops.c — each ONNX operator the importer knows, as dtnn layers or as constants
 * folded at import time (the Shape -> Gather -> Unsqueeze -> Concat chains that PyTorch writes
 * for a Reshape target). Semantics follow the ONNX operator documents (onnx/docs/Operators.md,
 * opsets 9 to 17: Clip's bounds, Pad's pads, Squeeze's and Unsqueeze's axes are attributes
 * before opsets 11/11/13 and inputs after; Softmax's default axis changes at 13).
 *
 * Windows keep ONNX's four pads (conv2d's and the pools' pads=), ceil_mode and MaxPool's
 * dilations; the element-wise arithmetic and joins are onnx_import_joins.c's; Clip
 * is relu, relu6 or clamp; HardSigmoid (any alpha and beta) and HardSwish are dtnn's own.
 * What dtnn cannot express exactly is refused with the node, its operator and the first
 * unsupported attribute or value: a constant with more than one sample, AveragePool's
 * dilations, reshapes other than a flatten to [N, features]. Nothing is approximated.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_import.h"

#define FAIL(...) imp_fail(p, nd, DTNN_ERR_UNSUPPORTED, err, __VA_ARGS__)
#define BAD(...) imp_fail(p, nd, DTNN_ERR_FORMAT, err, __VA_ARGS__)

static int is_flat(const imp_value *v) { return v->h == 1 && v->w == 1; }

/* Axis a of a rank-r value, negative counting from the end; -1 when out of range. */

/* A float constant input of exactly n values; -1 on error. */
/* ---- convolution and pooling ------------------------------------------------------------ */

typedef struct {
    int kh, kw, sh, sw, dh, dw, P, Q;
    int pad[4];     /* top, left, bottom, right: ONNX's order */
} window;

/* strides, dilations, pads and auto_pad of a 2-D window over an h x w input; the kernel is
 * known. ceil_mode rounds the output size up as PyTorch and dtnn's pools do: a last window
 * that would start in the bottom / right padding is dropped. one_d: a 1-D window over the h
 * of an h x 1 input (Conv1d: one stride, one dilation, pads [begin, end]). */
static dtnn_status window_read(imp *p, const Onnx__NodeProto *nd, int h, int w, int ceil_mode,
                               int one_d, window *g, dtnn_error *err)
{
    int64_t s[2] = {1, 1}, d[2] = {1, 1}, pd[4] = {0, 0, 0, 0};
    const int dims = one_d ? 1 : 2;
    if (imp_attr_ints(nd, "strides", s, 2) > dims || imp_attr_ints(nd, "dilations", d, 2) > dims ||
        imp_attr_ints(nd, "pads", pd, 4) > 2 * dims)
        return FAIL("only %s windows are supported here", one_d ? "1-D" : "2-D");
    if (one_d) {
        pd[2] = pd[1];      /* [begin, end] of the one axis: top and bottom */
        pd[1] = 0;
    }
    for (int k = 0; k < 2; k++)
        if (s[k] < 1 || s[k] > 1 << 16 || d[k] < 1 || d[k] > 1 << 16)
            return BAD("strides and dilations must be positive");
    for (int k = 0; k < 4; k++)
        if (pd[k] < 0 || pd[k] > 1 << 16)
            return FAIL("attribute pads: negative or huge pads are not supported");
    g->sh = (int)s[0], g->sw = (int)s[1], g->dh = (int)d[0], g->dw = (int)d[1];
    const Onnx__AttributeProto *ap = imp_attr(nd, "auto_pad");
    char mode[32] = "NOTSET";
    if (ap && ap->has_s)
        snprintf(mode, sizeof mode, "%.*s", (int)(ap->s.len < 31 ? ap->s.len : 31),
                 (const char *)ap->s.data);
    const int in[2] = {h, w}, kk[2] = {g->kh, g->kw}, st[2] = {g->sh, g->sw},
              dl[2] = {g->dh, g->dw};
    if (!strcmp(mode, "SAME_UPPER") || !strcmp(mode, "SAME_LOWER")) {
        for (int k = 0; k < 2; k++) {
            int64_t out = (in[k] + st[k] - 1) / st[k];
            int64_t total = (out - 1) * st[k] + (int64_t)(kk[k] - 1) * dl[k] + 1 - in[k];
            if (total < 0)
                total = 0;
            if (total > 1 << 16)
                return FAIL("attribute auto_pad=%s: the padding is too large", mode);
            /* the odd one goes at the end (UPPER) or the start (LOWER) */
            const int64_t small = total / 2, big = total - small;
            pd[k] = mode[5] == 'U' ? small : big;
            pd[k + 2] = mode[5] == 'U' ? big : small;
        }
    } else if (!strcmp(mode, "VALID") || !strcmp(mode, "NOTSET")) {
        if (!strcmp(mode, "VALID"))
            pd[0] = pd[1] = pd[2] = pd[3] = 0;
        /* More padding at the end than at the start (how opset 9 exporters write ceil_mode)
         * that no window reaches is no padding: the output size tells. Dropping it keeps the
         * model file's padding= symmetric. Not with ceil_mode, where it could add a window. */
        for (int k = 0; k < 2 && !ceil_mode; k++) {
            const int64_t span = (kk[k] - 1) * (int64_t)dl[k] + 1;
            if (pd[k + 2] > pd[k] && in[k] + 2 * pd[k] >= span &&
                (in[k] + pd[k] + pd[k + 2] - span) / st[k] == (in[k] + 2 * pd[k] - span) / st[k])
                pd[k + 2] = pd[k];
        }
    } else {
        return BAD("attribute auto_pad '%s' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER",
                   mode);
    }
    for (int k = 0; k < 4; k++)
        g->pad[k] = (int)pd[k];
    int out[2];
    for (int k = 0; k < 2; k++) {
        int64_t span = (int64_t)in[k] + pd[k] + pd[k + 2] - (int64_t)(kk[k] - 1) * dl[k] - 1;
        if (span < 0)
            return FAIL("the %dx%d window does not fit the %dx%d input", g->kh, g->kw, h, w);
        out[k] = (int)((span + (ceil_mode ? st[k] - 1 : 0)) / st[k]) + 1;
        if (ceil_mode && (int64_t)(out[k] - 1) * st[k] >= in[k] + pd[k])
            out[k]--;
    }
    g->P = out[0], g->Q = out[1];
    return DTNN_OK;
}

/* The padding options of conv2d, maxpool and avgpool: padding= when all sides agree with
 * their opposite, else pads= (ONNX's order, as the layers read it). eh, ew: a pending Pad. */
static void window_opts(imp_layer *l, const window *win, int eh, int ew)
{
    const int t = win->pad[0] + eh, le = win->pad[1] + ew, b = win->pad[2] + eh,
              r = win->pad[3] + ew;
    if (t == b && le == r)
        imp_opt(l, "padding", "%dx%d", t, le);
    else
        imp_opt(l, "pads", "%d,%d,%d,%d", t, le, b, r);
}

static dtnn_status op_conv(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    int x = imp_in_layer(p, nd, 0, 1, err), wi = x < 0 ? -1 : imp_in_const(p, nd, 1, err);
    if (wi < 0)
        return err->code;
    int bi = imp_in_opt(p, nd, 2, err);
    if (bi == -2)
        return err->code;
    const imp_value X = p->v[x], *W = &p->v[wi];
    /* A 1-D convolution over [N, C, L] (ECA's across the channels) is a 2-D one over L x 1. */
    const int one_d = X.rank == 3;
    if (X.rank != 4 && !one_d)
        return FAIL("input '%s' has rank %d; dtnn's convolutions are over [N, C, H, W] or "
                    "[N, C, L]", X.name, X.rank);
    if (!W->is_float || W->ndim != X.rank)
        return FAIL("weight '%s' is not a float32 [K, C/groups, %s] tensor", W->name,
                    one_d ? "L" : "R, S");
    const int64_t g = imp_attr_int(nd, "group", 1);
    const int64_t K = W->dims[0];
    if (g < 1 || X.c % g || X.c / g != W->dims[1] || K % g || K < 1)
        return BAD("weight '%s' [%lld, %lld, ...] does not fit %d input channels in %lld "
                   "groups", W->name, (long long)K, (long long)W->dims[1], X.c, (long long)g);
    int64_t ks[2] = {W->dims[2], one_d ? 1 : W->dims[3]};
    if (imp_attr_ints(nd, "kernel_shape", ks, 2) &&
        (ks[0] != W->dims[2] || (!one_d && ks[1] != W->dims[3])))
        return BAD("attribute kernel_shape does not match weight '%s'", W->name);
    if (one_d)
        ks[1] = 1;
    if (ks[0] < 1 || ks[1] < 1 || ks[0] > 1 << 16 || ks[1] > 1 << 16)
        return FAIL("a %lldx%lld kernel is not supported", (long long)ks[0], (long long)ks[1]);
    if (bi >= 0 && imp_const_floats(p, nd, 2, (size_t)K, err) < 0)
        return err->code;
    window win = {.kh = (int)ks[0], .kw = (int)ks[1]};
    dtnn_status st = window_read(p, nd, X.h + 2 * X.pad_h, X.w + 2 * X.pad_w, 0, one_d, &win,
                                 err);
    if (st)
        return st;
    int o = imp_layer_new(p, nd, "conv2d", W->name, &x, 1, X.rank, (int)K, win.P, win.Q, err);
    if (o < 0)
        return err->code;
    imp_layer *l = &p->l[p->v[o].layer];
    imp_opt(l, "filters", "%lld", (long long)K);
    imp_opt(l, "kernel", "%dx%d", win.kh, win.kw);
    imp_opt(l, "stride", "%dx%d", win.sh, win.sw);
    window_opts(l, &win, X.pad_h, X.pad_w);
    imp_opt(l, "dilation", "%dx%d", win.dh, win.dw);
    imp_opt(l, "groups", "%lld", (long long)g);
    imp_opt(l, "bias", "%s", bi >= 0 ? "true" : "false");
    imp_bind_add(l, "weight", wi, 0);
    if (bi >= 0)
        imp_bind_add(l, "bias", bi, 0);
    return DTNN_OK;
}

static dtnn_status op_pool(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    const int is_max = !strcmp(nd->op_type, "MaxPool");
    int x = imp_in_layer(p, nd, 0, 0, err);
    if (x < 0)
        return err->code;
    const imp_value X = p->v[x];
    if (X.rank != 4)
        return FAIL("input '%s' has rank %d; dtnn's pools are 2-D, over [N, C, H, W]", X.name,
                    X.rank);
    int64_t ks[2] = {0, 0};
    if (imp_attr_ints(nd, "kernel_shape", ks, 2) != 2 || ks[0] < 1 || ks[1] < 1 ||
        ks[0] > 1 << 16 || ks[1] > 1 << 16)
        return BAD("attribute kernel_shape must be two positive sizes");
    /* storage_order only orders the Indices output, which dtnn's MaxPool does not have. */
    if (is_max && imp_attr_int(nd, "storage_order", 0) != 0 && nd->n_output > 1)
        return FAIL("attribute storage_order=1 with the Indices output is not supported");
    const int ceil_mode = imp_attr_int(nd, "ceil_mode", 0) != 0;
    window win = {.kh = (int)ks[0], .kw = (int)ks[1]};
    dtnn_status st = window_read(p, nd, X.h, X.w, ceil_mode, 0, &win, err);
    if (st)
        return st;
    for (int k = 0; k < 4; k++)
        if (win.pad[k] >= (k % 2 ? win.kw : win.kh))
            return FAIL("attribute pads [%d, %d, %d, %d]: each must be below the %dx%d kernel "
                        "(ONNX's bound, and dtnn's)", win.pad[0], win.pad[1], win.pad[2],
                        win.pad[3], win.kh, win.kw);
    int o = imp_layer_new(p, nd, is_max ? "maxpool" : "avgpool", NULL, &x, 1, 4, X.c, win.P,
                          win.Q, err);
    if (o < 0)
        return err->code;
    imp_layer *l = &p->l[p->v[o].layer];
    imp_opt(l, "kernel", "%dx%d", win.kh, win.kw);
    imp_opt(l, "stride", "%dx%d", win.sh, win.sw);
    window_opts(l, &win, 0, 0);
    if (ceil_mode)
        imp_opt(l, "ceil_mode", "1");
    if (is_max && (win.dh != 1 || win.dw != 1))
        imp_opt(l, "dilation", "%dx%d", win.dh, win.dw);
    if (!is_max)
        imp_opt(l, "count_include_pad", "%s",
                imp_attr_int(nd, "count_include_pad", 0) ? "true" : "false");
    return DTNN_OK;
}

/* GlobalAveragePool and GlobalMaxPool */
static dtnn_status op_global_pool(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    const char *type = strcmp(nd->op_type, "GlobalMaxPool") ? "global_avgpool" : "global_maxpool";
    int x = imp_in_layer(p, nd, 0, 0, err);
    if (x < 0)
        return err->code;
    if (p->v[x].rank != 4)
        return FAIL("input '%s' is not 4-D [N, C, H, W]", p->v[x].name);
    const int c = p->v[x].c;
    return imp_layer_new(p, nd, type, NULL, &x, 1, 4, c, 1, 1, err) < 0
               ? err->code : DTNN_OK;
}

/* ReduceMean over H and W (squeeze-and-excitation and the classifier's pooling as timm and
 * torch.mean((2, 3)) write them): global average pooling, [N, C, 1, 1] with keepdims (the
 * default) or [N, C] without. Other axes have no dtnn layer yet and are refused by name. */
/* ---- activations -------------------------------------------------------------------------- */

/* An element-wise layer: on a channels-last view too, whose output stays one. */
/* The one-input layer `type` of value x, its output laid out as x. */
static dtnn_status activation_of(imp *p, const Onnx__NodeProto *nd, const char *type, int x,
                                 imp_layer **out, dtnn_error *err)
{
    const imp_value X = p->v[x];
    int o = imp_layer_new(p, nd, type, NULL, &x, 1, X.rank, X.c, X.h, X.w, err);
    if (o < 0)
        return err->code;
    imp_layout_copy(&p->v[o], &X);
    if (out)
        *out = &p->l[p->v[o].layer];
    return DTNN_OK;
}

static dtnn_status activation(imp *p, const Onnx__NodeProto *nd, const char *type,
                              imp_layer **out, dtnn_error *err)
{
    int x = imp_in_layer(p, nd, 0, IMP_ALLOW_NHWC | IMP_ALLOW_GROUPS | IMP_ALLOW_GEN, err);
    return x < 0 ? err->code : activation_of(p, nd, type, x, out, err);
}

static dtnn_status op_unary(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    int c = imp_in(p, nd, 0, err);
    if (c < 0)
        return err->code;
    if (p->v[c].kind == IMP_CONST)
        return fold_unary(p, nd, c, err);
    static const char *const map[][2] = {{"Relu", "relu"}, {"Sigmoid", "sigmoid"},
                                         {"Tanh", "tanh"}, {"LeakyRelu", "leaky_relu"},
                                         {"Erf", "erf"}, {"Sqrt", "sqrt"}};
    for (size_t k = 0; k < sizeof map / sizeof map[0]; k++) {
        if (strcmp(nd->op_type, map[k][0]))
            continue;
        imp_layer *l = NULL;
        dtnn_status st = activation(p, nd, map[k][1], &l, err);
        if (!st && k == 3)
            imp_opt(l, "slope", "%.9g", imp_attr_float(nd, "alpha", 0.01f));
        return st;
    }
    return FAIL("%s of a computed value is not supported (of constants it is folded)",
                nd->op_type);
}

static dtnn_status op_clip(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    int c = imp_in(p, nd, 0, err);
    if (c < 0)
        return err->code;
    if (p->v[c].kind == IMP_CONST)
        return fold_unary(p, nd, c, err);
    float lo = -INFINITY, hi = INFINITY;
    if (p->opset < 11) {
        lo = imp_attr_float(nd, "min", lo);
        hi = imp_attr_float(nd, "max", hi);
    } else {
        for (int k = 1; k <= 2; k++) {
            int i = imp_in_opt(p, nd, k, err);
            if (i == -2)
                return err->code;
            if (i >= 0) {
                if ((i = imp_const_floats(p, nd, k, 1, err)) < 0)
                    return err->code;
                *(k == 1 ? &lo : &hi) = p->v[i].f[0];
            }
        }
    }
    if (lo != lo || hi != hi || lo > hi)
        return FAIL("bounds min=%g max=%g: NaN or min above max is not supported", lo, hi);
    if (lo == 0.0f && hi == 6.0f)
        return activation(p, nd, "relu6", NULL, err);
    if (lo == 0.0f && hi == INFINITY)
        return activation(p, nd, "relu", NULL, err);
    /* clamp takes bounds within 1e30 (a left-out one is infinite). Converters write
     * -FLT_MAX / FLT_MAX for "no bound", which clips only infinities: taken as none. */
    if (lo == -FLT_MAX)
        lo = -INFINITY;
    if (hi == FLT_MAX)
        hi = INFINITY;
    if ((isfinite(lo) && fabsf(lo) > 1e30f) || (isfinite(hi) && fabsf(hi) > 1e30f))
        return FAIL("bounds min=%g max=%g: dtnn's clamp takes bounds within 1e30", lo, hi);
    imp_layer *l = NULL;
    dtnn_status st = activation(p, nd, "clamp", &l, err);
    if (!st && lo > -1e30f)
        imp_opt(l, "min", "%.9g", lo);
    if (!st && hi < 1e30f)
        imp_opt(l, "max", "%.9g", hi);
    return st;
}

/* HardSigmoid max(0, min(1, alpha x + beta)): dtnn's hardsigmoid, which computes PyTorch's
 * relu6(x + 3) / 6 for alpha 1/6 and beta 1/2 (what torch.onnx writes) and the formula as
 * written for other constants (ONNX's defaults 0.2 and 0.5, Keras'). */
static dtnn_status op_hardsigmoid(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    const float alpha = imp_attr_float(nd, "alpha", 0.2f), beta = imp_attr_float(nd, "beta", 0.5f);
    if (!isfinite(alpha) || !isfinite(beta) || fabsf(alpha) > 1e6f || fabsf(beta) > 1e6f)
        return FAIL("attributes alpha=%.9g beta=%.9g must be finite, at most 1e6", alpha, beta);
    imp_layer *l = NULL;
    dtnn_status st = activation(p, nd, "hardsigmoid", &l, err);
    if (!st && !(alpha == 1.0f / 6.0f && beta == 0.5f)) {
        imp_opt(l, "alpha", "%.9g", alpha);
        imp_opt(l, "beta", "%.9g", beta);
    }
    return st;
}

static dtnn_status op_hardswish(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    return activation(p, nd, "hardswish", NULL, err);
}

/* Softmax over the features of [N, F] (and, before opset 13, which flattens from `axis` on,
 * over axis 1 of a flat [N, C, 1, 1]); from opset 13, over axis 1 of [N, C, H] or
 * [N, C, H, W] (across the channels at each position) or of [N, G, C/G, H, W] (across a split
 * attention's groups): dtnn's softmax with groups. */
static dtnn_status op_softmax(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    int x = imp_in_layer(p, nd, 0, IMP_ALLOW_GROUPS | IMP_ALLOW_GEN, err);
    if (x < 0)
        return err->code;
    const imp_value X = p->v[x];
    int axis = imp_axis(imp_attr_int(nd, "axis", p->opset < 13 ? 1 : -1), X.rank);
    const int rows = (X.gen && X.gen != IMP_GEN_LEAD && X.nsd >= 2) ||
                     (X.rank == 4 && !is_flat(&X)) || (X.rank == 3 && X.h > 1);
    /* before opset 13 Softmax flattens from `axis` on: from the last, that axis alone */
    if (rows && axis == X.rank - 1) {
        /* attention's weights: over the last axis ([N, C, L] over L: its rows, as a tensor) */
        if ((x = imp_gen_view(p, nd, x, err)) < 0)
            return err->code;
        imp_layer *l = NULL;
        dtnn_status st = activation_of(p, nd, "softmax", x, &l, err);
        if (!st)
            imp_opt(l, "axis", "last");
        return st;
    }
    if (X.gen)
        return FAIL("attribute axis: a softmax of a tensor runs over its last axis only");
    if (axis == 1 && (X.rank == 2 || (p->opset < 13 && X.rank != 5 && is_flat(&X))))
        return activation(p, nd, "softmax", NULL, err);
    if (axis != 1 || p->opset < 13)
        return FAIL("attribute axis: dtnn's softmax runs over the features of [N, F] or, from "
                    "opset 13, over axis 1 (the channels or channel groups)");
    imp_layer *l = NULL;
    dtnn_status st = activation(p, nd, "softmax", &l, err);
    if (!st)
        imp_opt(l, "groups", "%d", X.rank == 5 ? X.groups : X.c);
    return st;
}

/* ---- dense layers ------------------------------------------------------------------------ */

/* linear from flat value x and 2-D weight wi ([out, in], or [in, out] when transposed). */
static dtnn_status linear_new(imp *p, const Onnx__NodeProto *nd, int x, int wi, int transposed,
                              int bi, dtnn_error *err)
{
    const imp_value X = p->v[x], *W = &p->v[wi];
    /* [N, C, 1] is flat in memory but a batch of C rows to ONNX's MatMul */
    if (!is_flat(&X) || X.rank == 3)
        return FAIL("input '%s' is %dx%dx%d (rank %d), not [N, features]", X.name, X.c, X.h,
                    X.w, X.rank);
    if (!W->is_float || W->ndim != 2 || W->dims[transposed ? 0 : 1] != X.c)
        return BAD("weight '%s' is not a float32 matrix with %d inputs", W->name, X.c);
    const int outs = (int)W->dims[transposed ? 1 : 0];
    if (outs < 1)
        return BAD("weight '%s' has no outputs", W->name);
    if (bi >= 0 && (!p->v[bi].is_float || p->v[bi].count != (size_t)outs))
        return FAIL("bias '%s' must be %d float32 values, it has %zu (%s)", p->v[bi].name, outs,
                    p->v[bi].count, p->v[bi].is_float ? "float32" : "integers");
    int o = imp_layer_new(p, nd, "linear", W->name, &x, 1, 2, outs, 1, 1, err);
    if (o < 0)
        return err->code;
    imp_layer *l = &p->l[p->v[o].layer];
    l->outputs = outs;
    l->bias = bi >= 0;
    imp_bind_add(l, "weight", wi, transposed);
    if (bi >= 0)
        imp_bind_add(l, "bias", bi, 0);
    return DTNN_OK;
}

/* Gemm: alpha * A B' + beta * C with A the computed [N, in] value and B, C constants. alpha
 * and beta are folded into copies of B and C (rounding of the product, not of the sum, moves),
 * and a C of one value, [1] or [1, 1], is spread over the outputs; a C with a row per sample
 * has no linear layer to become. */
static dtnn_status op_gemm(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    const float alpha = imp_attr_float(nd, "alpha", 1.0f), beta = imp_attr_float(nd, "beta", 1.0f);
    if (imp_attr_int(nd, "transA", 0) != 0)
        return FAIL("attribute transA=1 is not supported: the batch is A's first dimension");
    /* Gemm before opset 7: broadcast=1 is the later versions' broadcasting of C. */
    if (imp_attr(nd, "broadcast") && (p->opset >= 7 || imp_attr_int(nd, "broadcast", 0) != 1))
        return FAIL("attribute broadcast=%lld is not supported",
                    (long long)imp_attr_int(nd, "broadcast", 0));
    int x = imp_in_layer(p, nd, 0, 0, err), wi = x < 0 ? -1 : imp_in_const(p, nd, 1, err);
    if (wi < 0)
        return err->code;
    int bi = imp_in_opt(p, nd, 2, err);
    if (bi == -2)
        return err->code;
    const int transposed = imp_attr_int(nd, "transB", 0) == 0;
    const imp_value *W = &p->v[wi];
    if (!W->is_float || W->ndim != 2)
        return BAD("weight '%s' is not a float32 matrix", W->name);
    if (alpha != 1.0f) {
        int s = imp_value_inner(p, err);
        if (s < 0 || imp_const_alloc(p, s, 1, p->v[wi].dims, 2, err))
            return err->code;
        for (size_t k = 0; k < p->v[s].count; k++)
            p->v[s].f[k] = alpha * p->v[wi].f[k];
        wi = s;
    }
    const int64_t outs = p->v[wi].dims[transposed ? 1 : 0];
    if (bi >= 0 && p->v[bi].is_float && (p->v[bi].count == 1 || beta != 1.0f)) {
        const imp_value *C = &p->v[bi];
        if (C->count != 1 && C->count != (size_t)outs)
            return FAIL("bias '%s' has %zu values for %lld outputs: a bias per sample is not "
                        "supported", C->name, C->count, (long long)outs);
        int s = imp_value_inner(p, err);
        if (s < 0 || imp_const_alloc(p, s, 1, &outs, 1, err))
            return err->code;
        for (int64_t k = 0; k < outs; k++)
            p->v[s].f[k] = beta * p->v[bi].f[p->v[bi].count == 1 ? 0 : k];
        bi = s;
    }
    return linear_new(p, nd, x, wi, transposed, bi, err);
}

/* x @ W for a channels-last view x [N, H, W, C] and W [C, K] (ConvNeXt's Linear between its
 * permutes): a 1x1 convolution, weight W transposed to [K, C, 1, 1], its output a view too. */
static dtnn_status pointwise_new(imp *p, const Onnx__NodeProto *nd, int x, int wi,
                                 dtnn_error *err)
{
    const imp_value X = p->v[x], *W = &p->v[wi];
    if (!W->is_float || W->ndim != 2 || W->dims[0] != X.c || W->dims[1] < 1 ||
        W->dims[1] > 1 << 20)
        return BAD("weight '%s' is not a float32 [%d, K] matrix for the channels-last value "
                   "'%s'", W->name, X.c, X.name);
    const int K = (int)W->dims[1];
    int o = imp_layer_new(p, nd, "conv2d", W->name, &x, 1, 4, K, X.h, X.w, err);
    if (o < 0)
        return err->code;
    p->v[o].nhwc = 1;
    imp_layer *l = &p->l[p->v[o].layer];
    imp_opt(l, "filters", "%d", K);
    imp_opt(l, "kernel", "1");
    imp_opt(l, "bias", "false");
    imp_bind_add(l, "weight", wi, 1);
    return DTNN_OK;
}

/* x @ W for a tensor x [..., K] and W [K, M]: linear over the last axis (a transformer's
 * projections), the output a tensor of the same dims but the last. */
static dtnn_status rows_linear(imp *p, const Onnx__NodeProto *nd, int x, int wi, dtnn_error *err)
{
    imp_value X = p->v[x];
    const imp_value *W = &p->v[wi];
    if (!X.gen) {   /* [N, C, H, W]: the matrices are its rows of W */
        const int sd[3] = {X.c, X.h, X.w};
        X.gen = IMP_GEN_BATCH, X.nsd = 3;
        memcpy(X.sd, sd, sizeof sd);
    }
    if (!W->is_float || W->ndim != 2 || W->dims[0] != X.w || W->dims[1] < 1 ||
        W->dims[1] > 1 << 20)
        return BAD("weight '%s' is not a float32 [%d, M] matrix for the last axis of '%s'",
                   W->name, X.w, X.name);
    const int outs = (int)W->dims[1];
    int o = imp_layer_new(p, nd, "linear", W->name, &x, 1, X.rank, X.c, X.h, outs, err);
    if (o < 0)
        return err->code;
    int sd[IMP_SAMPLE_DIMS];
    memcpy(sd, X.sd, sizeof sd);
    sd[X.nsd - 1] = outs;
    imp_gen_set(&p->v[o], X.gen, sd, X.nsd);
    imp_layer *l = &p->l[p->v[o].layer];
    l->outputs = outs;
    imp_opt(l, "axis", "last");
    imp_bind_add(l, "weight", wi, 1);
    return DTNN_OK;
}

static dtnn_status op_matmul(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    int x = imp_in_layer(p, nd, 0, IMP_ALLOW_NHWC | IMP_ALLOW_GEN, err);
    int b = x < 0 ? -1 : imp_in(p, nd, 1, err);
    if (b < 0)
        return err->code;
    if (p->v[b].kind == IMP_LAYER) {
        /* a product of two computed values: attention's q k^T and its weights times v */
        if (imp_in_layer(p, nd, 1, IMP_ALLOW_GEN, err) < 0 ||
            (p->v[x].nhwc && (x = imp_gen_from_nhwc(p, nd, x, err)) < 0) ||
            (x = imp_gen_view(p, nd, x, err)) < 0 || (b = imp_gen_view(p, nd, b, err)) < 0)
            return err->code;
        return imp_gen_matmul(p, nd, x, b, err);
    }
    int wi = imp_in_const(p, nd, 1, err);
    if (wi < 0)
        return err->code;
    /* [N, T, F] @ W: a transformer's projection of each token */
    if (!p->v[x].gen && p->v[x].rank == 3 && (x = imp_gen_view(p, nd, x, err)) < 0)
        return err->code;
    if (p->v[x].nhwc)
        return pointwise_new(p, nd, x, wi, err);
    if ((p->v[x].gen && p->v[x].gen != IMP_GEN_LEAD && p->v[x].nsd >= 2) ||
        (!p->v[x].gen && p->v[x].rank == 4 && !is_flat(&p->v[x])))
        return rows_linear(p, nd, x, wi, err);
    if (p->v[x].gen)
        return FAIL("a MatMul of the tensor '%s' by a constant is not supported", p->v[x].name);
    return linear_new(p, nd, x, wi, 1, -1, err);
}

static const char *const a_none[] = {NULL};
static const char *const a_conv[] = {"auto_pad", "dilations", "group", "kernel_shape", "pads",
                                     "strides", NULL};
static const char *const a_maxpool[] = {"auto_pad", "ceil_mode", "dilations", "kernel_shape",
                                        "pads", "storage_order", "strides", NULL};
static const char *const a_avgpool[] = {"auto_pad", "ceil_mode", "count_include_pad",
                                        "kernel_shape", "pads", "strides", NULL};
static const char *const a_bn[] = {"epsilon", "momentum", "spatial", "training_mode",
                                   "is_test", NULL};
static const char *const a_leaky[] = {"alpha", NULL};
static const char *const a_clip[] = {"min", "max", NULL};
static const char *const a_hsig[] = {"alpha", "beta", NULL};
static const char *const a_axis[] = {"axis", NULL};
static const char *const a_gemm[] = {"alpha", "beta", "transA", "transB", "broadcast", NULL};
static const char *const a_reshape[] = {"allowzero", NULL};
static const char *const a_axes[] = {"axes", NULL};
static const char *const a_dropout[] = {"ratio", "seed", "is_test", NULL};
static const char *const a_constant[] = {"value", "value_float", "value_floats", "value_int",
                                         "value_ints", NULL};
static const char *const a_shape[] = {"start", "end", NULL};
static const char *const a_cast[] = {"to", "saturate", NULL};
static const char *const a_pad[] = {"mode", "pads", "value", NULL};
static const char *const a_slice[] = {"starts", "ends", "axes", NULL};
static const char *const a_split[] = {"axis", "split", NULL};
static const char *const a_resize[] = {"mode", "coordinate_transformation_mode", "nearest_mode",
                                       "cubic_coeff_a", "exclude_outside",
                                       "extrapolation_value", NULL};
static const char *const a_upsample[] = {"mode", "scales", NULL};
static const char *const a_layernorm[] = {"axis", "epsilon", "stash_type", NULL};
static const char *const a_value[] = {"value", NULL};
static const char *const a_perm[] = {"perm", NULL};
static const char *const a_reduce_sum[] = {"axes", "keepdims", "noop_with_empty_axes", NULL};

/* since9: the oldest version of the operator that computes what its opset-9 version computes
 * for every attribute this importer accepts (from ONNX's operator changelog). A model of an
 * older opset imports where every operator it uses is at least that version: ONNX's node
 * tests declare the opset an operator last changed in (1 for GlobalAveragePool), PyTorch's
 * converted tests opset 6. MaxPool 8 added only the Indices' storage_order, AveragePool 7
 * count_include_pad with the old behaviour as its default; BatchNormalization 6's is_test and
 * Gemm 6's broadcast are checked where they are read. Element-wise operators before 7
 * broadcast by their own rule, Dropout before 7 trained by default: those stay at 7. */
static const struct {
    const char *op;
    op_fn fn;
    const char *const *attrs;
    int since9;
} ops[] = {
    {"Conv", op_conv, a_conv, 1},
    {"MaxPool", op_pool, a_maxpool, 1},
    {"AveragePool", op_pool, a_avgpool, 1},
    {"GlobalAveragePool", op_global_pool, a_none, 1},
    {"GlobalMaxPool", op_global_pool, a_none, 1},
    {"ReduceMean", op_reduce_mean, a_reduce_sum, 1},
    {"ReduceSum", op_reduce_sum, a_reduce_sum, 1},
    {"ReduceL2", op_reduce_l2, a_reduce_sum, 1},
    {"Expand", op_expand, a_none, 8},
    {"BatchNormalization", op_batchnorm, a_bn, 6},
    {"Relu", op_unary, a_none, 6},
    {"Sigmoid", op_unary, a_none, 6},
    {"Tanh", op_unary, a_none, 6},
    {"Erf", op_unary, a_none, 9},
    {"Sqrt", op_unary, a_none, 6},
    {"Ceil", op_unary, a_none, 6},
    {"Floor", op_unary, a_none, 6},
    {"Neg", op_unary, a_none, 6},
    {"Abs", op_unary, a_none, 6},
    {"LeakyRelu", op_unary, a_leaky, 6},
    {"Clip", op_clip, a_clip, 6},
    {"HardSigmoid", op_hardsigmoid, a_hsig, 6},
    {"HardSwish", op_hardswish, a_none, 14},
    {"Softmax", op_softmax, a_axis, 1},
    {"Gemm", op_gemm, a_gemm, 6},
    {"MatMul", op_matmul, a_none, 9},
    {"Add", op_add, a_none, 7},
    {"Sum", op_add, a_none, 8},
    {"Mul", op_binary, a_none, 7},
    {"Sub", op_binary, a_none, 7},
    {"Div", op_binary, a_none, 7},
    {"Pow", op_pow, a_none, 7},
    {"Concat", op_concat, a_axis, 4},
    {"Flatten", op_flatten, a_axis, 1},
    {"Reshape", op_reshape, a_reshape, 5},
    {"Squeeze", op_squeeze, a_axes, 1},
    {"Unsqueeze", op_squeeze, a_axes, 1},
    {"Dropout", op_identity, a_dropout, 7},
    {"Identity", op_identity, a_none, 1},
    {"Constant", op_constant, a_constant, 9},
    {"Shape", op_shape, a_shape, 1},
    {"Gather", op_gather, a_axis, 1},
    {"Cast", op_cast, a_cast, 9},
    {"Pad", op_pad, a_pad, 2},
    {"Slice", op_slice, a_slice, 1},
    {"Split", op_split, a_split, 2},
    {"Resize", op_resize, a_resize, 10},
    {"Upsample", op_resize, a_upsample, 7},
    {"LayerNormalization", op_layernorm, a_layernorm, 17},
    {"ConstantOfShape", op_constant_of_shape, a_value, 9},
    {"Transpose", op_transpose, a_perm, 1},
};

dtnn_status imp_node(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        if (strcmp(nd->op_type, ops[k].op))
            continue;
        if (p->opset < ops[k].since9)
            return FAIL("the model's operator set %d has %s as it was before opset %d; dtnn "
                        "imports opsets 9 to 17, older ones where an operator is as in opset 9",
                        p->opset, nd->op_type, ops[k].since9);
        const char *bad = imp_attr_unknown(nd, ops[k].attrs);
        if (bad)
            return FAIL("attribute '%s' is not supported", bad);
        return ops[k].fn(p, nd, err);
    }
    char list[600];
    size_t n = 0;
    for (size_t k = 0; k < sizeof ops / sizeof ops[0] && n < sizeof list; k++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", k ? ", " : "", ops[k].op);
    return FAIL("operator %s is not supported by dtnn's importer (supported: %s)", nd->op_type,
                list);
}
