/*
 * onnx_import_fuse.c — activations that ONNX opsets before their operator write as
 * arithmetic, taken back into one dtnn layer as they are imported:
 *   SiLU  x * Sigmoid(x)                              (torch.onnx's nn.SiLU before opset 24)
 *   GELU  (x * (Erf(x / sqrt 2) + 1)) * 0.5           (torch.onnx's nn.GELU before opset 20)
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
