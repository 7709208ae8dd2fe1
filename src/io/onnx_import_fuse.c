/*
 * onnx_import_fuse.c — activations that ONNX opsets before their operator write as
 * arithmetic, taken back into one dtnn layer as they are imported:
 *   SiLU  x * Sigmoid(x)                              (torch.onnx's nn.SiLU before opset 24)
 *   GELU  (x * (Erf(x / sqrt 2) + 1)) * 0.5           (torch.onnx's nn.GELU before opset 20)
 *   LayerNorm over the channels, d / Sqrt(ReduceMean(Pow(d, 2)) + eps) * weight + bias with
 *         d = x - ReduceMean(x)                       (torch.onnx's nn.LayerNorm before 17)
 * One layer instead of two or five: one pass over the tensor each way and one stored tensor,
 * where the chain stored each step for its backward. Each intermediate value must be used by
 * the next step only, so nothing else sees what the fusion removes. The fused layer computes
 * the same function in another order of the same float operations: PyTorch's own (gelu: x *
 * 0.5 * (1 + erf(x / sqrt 2))), within a few ulps of the chain.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "onnx_import.h"

/* The layer computing value v as its output, used by one node only; NULL otherwise. */
static imp_layer *single_use_layer(imp *p, int v, const char *type)
{
    const imp_value *V = &p->v[v];
    if (V->kind != IMP_LAYER || V->layer < 0)
        return NULL;
    imp_layer *l = &p->l[V->layer];
    return !strcmp(l->type, type) && l->out == v && imp_uses(p, V->name) == 1 ? l : NULL;
}

/* Whether layer l is x (op) k for the scalar constant k == want (to 1e-6 relative), k second. */
static int const_step(const imp *p, const imp_layer *l, float want)
{
    if (l->n_in != 1 || l->n_bind != 1 || strcmp(l->bind[0].suffix, "constant") ||
        strstr(l->opts, "reverse"))
        return 0;
    const imp_value *K = &p->v[l->bind[0].value];
    return K->is_float && K->count == 1 && fabsf(K->f[0] - want) <= 1e-6f * fabsf(want);
}

int imp_fuse_silu(imp *p, const Onnx__NodeProto *nd, const int ins[2], dtnn_error *err)
{
    for (int k = 0; k < 2; k++) {
        imp_layer *l = single_use_layer(p, ins[k], "sigmoid");
        if (!l || l->n_in != 1 || l->in[0] != ins[1 - k])
            continue;
        snprintf(l->type, sizeof l->type, "%s", "silu");
        return imp_out_alias(p, nd, ins[k], err) < 0 ? -1 : 1;
    }
    return 0;
}

int imp_fuse_gelu(imp *p, const Onnx__NodeProto *nd, int m, int half, dtnn_error *err)
{
    const imp_value *H = &p->v[half];
    if (!H->is_float || H->count != 1 || H->f[0] != 0.5f)
        return 0;
    imp_layer *lm = single_use_layer(p, m, "mul");
    if (!lm || lm->n_in != 2)
        return 0;
    for (int k = 0; k < 2; k++) {
        const int x = lm->in[k], a = lm->in[1 - k];
        imp_layer *la = single_use_layer(p, a, "add");
        imp_layer *le = la && const_step(p, la, 1.0f) ? single_use_layer(p, la->in[0], "erf")
                                                       : NULL;
        imp_layer *ld = le ? single_use_layer(p, le->in[0], "div") : NULL;
        int scaled = ld && const_step(p, ld, 1.41421356f);
        if (le && !ld) {
            ld = single_use_layer(p, le->in[0], "mul");
            scaled = ld && const_step(p, ld, 0.70710678f);
        }
        /* the four layers are the model's last, in order: the fusion drops the last three */
        const int first = ld ? (int)(ld - p->l) : -1;
        if (!scaled || ld->in[0] != x || le != ld + 1 || la != ld + 2 || lm != ld + 3 ||
            first + 4 != p->n_l)
            continue;
        snprintf(ld->type, sizeof ld->type, "%s", "gelu");
        ld->opts[0] = '\0';
        ld->n_bind = 0;
        p->n_l = first + 1;
        return imp_out_alias(p, nd, ld->out, err) < 0 ? -1 : 1;
    }
    return 0;
}

/* Whether constant k holds one value per channel of X, as an element-wise operand of X
 * broadcasts it: [C] on a channels-last view or on [N, F] (the last axis), [C, 1, 1] (leading
 * 1s allowed) on [N, C, H, W]. */
static int per_channel(const imp *p, int k, const imp_value *X)
{
    const imp_value *K = &p->v[k];
    if (!K->is_float || K->count != (size_t)X->c || K->ndim > X->rank)
        return 0;
    int from_end = 0;   /* the axis of K's values, counted from the last */
    for (int d = 0; d < K->ndim; d++)
        if (K->dims[d] != 1)
            from_end = K->ndim - 1 - d;
    return X->c == 1 || (X->nhwc || X->rank == 2 ? from_end == 0 : from_end == 2);
}

static int is_channel_mean(const imp_layer *l)
{
    return !strcmp(l->type, "reduce") && l->n_in == 1 && strstr(l->opts, "axes = channels\n") &&
           strstr(l->opts, "op = mean\n");
}

/* nd adds the constant b to x. The chain's eight layers (reduce, sub, mul of d by itself,
 * reduce, add of eps, sqrt, div, mul by the weight) are the model's last, in that order, each
 * output used by the next step only (d by the square and the division): they become one
 * layernorm named after the weight's module, as opset 17's LayerNormalization imports. The
 * function is the same; layernorm computes d * rstd where the chain divides by the root, a few
 * ulps apart. */
int imp_fuse_layernorm(imp *p, const Onnx__NodeProto *nd, int x, int b, dtnn_error *err)
{
    const int first = p->n_l - 8;
    static const char *const types[8] = {"reduce", "sub", "mul", "reduce",
                                         "add",    "sqrt", "div", "mul"};
    if (first < 0)
        return 0;
    imp_layer *c = &p->l[first];
    for (int k = 0; k < 8; k++) {
        const imp_value *out = &p->v[c[k].out];
        if (strcmp(c[k].type, types[k]) || out->layer != first + k ||
            imp_uses(p, out->name) != (k == 1 ? 2 : 1))
            return 0;
    }
    const int in = c[0].in[0], d = c[1].out;
    if (!is_channel_mean(&c[0]) || c[1].n_in != 2 || c[1].in[0] != in ||
        c[1].in[1] != c[0].out || c[2].n_in != 2 || c[2].in[0] != d || c[2].in[1] != d ||
        !is_channel_mean(&c[3]) || c[3].in[0] != c[2].out || c[4].in[0] != c[3].out ||
        c[5].in[0] != c[4].out || c[6].n_in != 2 || c[6].in[0] != d ||
        c[6].in[1] != c[5].out || c[7].n_in != 1 || c[7].n_bind != 1 ||
        c[7].in[0] != c[6].out || x != c[7].out || strstr(c[6].opts, "reverse"))
        return 0;
    const imp_value X = p->v[in];
    const imp_value *E = c[4].n_bind == 1 ? &p->v[c[4].bind[0].value] : NULL;
    const int weight = c[7].bind[0].value;
    /* eps: a positive scalar (const_step checks the add's form against its own value) */
    if (!E || !E->is_float || E->count != 1 || !(E->f[0] > 0.0f) ||
        !const_step(p, &c[4], E->f[0]) || !per_channel(p, weight, &X) ||
        !per_channel(p, b, &X) || !(X.rank == 2 || X.rank == 4))
        return 0;
    const float eps = E->f[0];
    /* the chain's names are free again: the layernorm takes its module's */
    for (int k = 0; k < 8; k++)
        c[k].name[0] = '\0';
    p->n_l = first;
    const int o = imp_layer_new(p, nd, "layernorm", p->v[weight].name, &in, 1, X.rank, X.c, X.h,
                                X.w, err);
    if (o < 0)
        return -1;
    p->v[o].nhwc = X.nhwc;
    imp_layer *l = &p->l[p->v[o].layer];
    imp_opt(l, "eps", "%.9g", eps);
    imp_bind_add(l, "weight", weight, 0);
    imp_bind_add(l, "bias", b, 0);
    return 1;
}
