/*
 * onnx_import_reduce.c — ReduceMean, ReduceSum and ReduceL2: over H and W of [N, C, H, W] (a
 * mean is global_avgpool, a sum or norm the reduce layer over each plane; keepdims 0 gives
 * [N, C]) and over the channels (the reduce layer over channels: [N, 1, H, W] with keepdims
 * 1; [N, H, W] has no dtnn form). On a channels-last view (a Transpose [0, 2, 3, 1] being
 * followed) the axes are its own: 1, 2 the plane and 3 the channels, the result still a view.
 * ReduceSum's axes are an input from opset 13; the others' are an attribute up to 17 (the last
 * opset imported). No axes reduces everything (refused), unless noop_with_empty_axes. Of a
 * constant (a weight being standardised) any reduction is folded (onnx_import_fold.c). Over
 * axis 1 of a 5-D [N, G, C, H, W] (the sum of a split attention's paths) it is the reduce
 * layer across G channel groups.
 */
#include <string.h>

#include "onnx_import.h"

#define FAIL(...) imp_fail(p, nd, DTNN_ERR_UNSUPPORTED, err, __VA_ARGS__)

enum { OVER_NONE, OVER_SPATIAL, OVER_CHANNELS, OVER_GROUPS };
enum { OP_MEAN, OP_SUM, OP_L2 };

/* Which of dtnn's two reductions the axes name, for a value of that rank (a channels-last
 * view's axes taken back to channels-first). */
static int reduction_of(const int64_t *axes, int na, int rank, int nhwc)
{
    static const int from_nhwc[4] = {0, 2, 3, 1};
    int seen[5] = {0, 0, 0, 0, 0};
    for (int k = 0; k < na; k++) {
        int a = imp_axis(axes[k], rank);
        if (a >= 0 && nhwc)
            a = from_nhwc[a];
        if (a < 0 || seen[a]++)
            return OVER_NONE;
    }
    if (rank == 4 && na == 2 && seen[2] && seen[3])
        return OVER_SPATIAL;
    if ((rank == 4 || rank == 2) && na == 1 && seen[1])
        return OVER_CHANNELS;
    if (rank == 5 && na == 1 && seen[1])
        return OVER_GROUPS;
    return OVER_NONE;
}

static dtnn_status reduce_node(imp *p, const Onnx__NodeProto *nd, int op, dtnn_error *err)
{
    static const char *const names[3] = {"mean", "sum", "L2 norm"};
    const int c = imp_in(p, nd, 0, err);
    const int folding = c >= 0 && p->v[c].kind == IMP_CONST;
    int x = folding ? c
                    : imp_in_layer(p, nd, 0, IMP_ALLOW_NHWC | IMP_ALLOW_GROUPS | IMP_ALLOW_GEN,
                                   err);
    if (x < 0)
        return err->code;
    const imp_value X = p->v[x];
    int64_t axes[IMP_MAX_DIMS];
    int na;
    if (op == OP_SUM && p->opset >= 13) {
        na = imp_in_opt(p, nd, 1, err) >= 0 ? imp_const_ints(p, nd, 1, axes, IMP_MAX_DIMS, err)
                                            : 0;
        if (na < 0)
            return err->code;
        if (na == 0 && imp_attr_int(nd, "noop_with_empty_axes", 0) && !folding)
            return imp_out_alias(p, nd, x, err) < 0 ? err->code : DTNN_OK;
    } else {
        na = imp_attr_ints(nd, "axes", axes, IMP_MAX_DIMS);
    }
    const int keep = imp_attr_int(nd, "keepdims", 1) != 0;
    if (folding && na <= IMP_MAX_DIMS)
        return fold_reduce(p, nd, x, op, axes, na, keep, err);
    if (X.gen) {
        /* the mean over a transformer's tokens: [N, T, F] to [N, F] */
        const int done = na == 1 && imp_axis(axes[0], X.rank) == 1 && !keep && op != OP_L2
                             ? imp_gen_token_reduce(p, nd, x, op == OP_SUM ? "sum" : "mean", err)
                             : 0;
        return done > 0 ? DTNN_OK : done < 0 ? err->code
               : FAIL("only the %s over axis 1 of a tensor [N, T, F] (its tokens) is supported",
                      names[op]);
    }
    const int over = na > 4 ? OVER_NONE : reduction_of(axes, na, X.rank, X.nhwc);
    if (over == OVER_NONE || ((over == OVER_CHANNELS || X.nhwc) && !keep))
        return FAIL("only the %s over H and W of [N, C, H, W] (axes 2, 3; of a channels-last "
                    "view 1, 2), over the channels (axis 1; 3) or over axis 1 of [N, G, C, H, "
                    "W] is supported, keeping the dimensions where it is over the channels or "
                    "of a view", names[op]);
    int o;
    if (over == OVER_GROUPS && X.groups == 1 && op != OP_L2) {
        /* the sum or mean of one value is that value */
        if ((o = imp_out_alias(p, nd, x, err)) < 0)
            return err->code;
        p->v[o].rank = keep ? 5 : 4;
        p->v[o].groups = keep;
        return DTNN_OK;
    }
    if (over == OVER_GROUPS)
        o = imp_layer_new(p, nd, "reduce", NULL, &x, 1, keep ? 5 : 4, X.c / X.groups, X.h, X.w,
                          err);
    else if (over == OVER_SPATIAL && op == OP_MEAN)
        o = imp_layer_new(p, nd, "global_avgpool", NULL, &x, 1, keep ? 4 : 2, X.c, 1, 1, err);
    else if (over == OVER_SPATIAL)
        o = imp_layer_new(p, nd, "reduce", NULL, &x, 1, keep ? 4 : 2, X.c, 1, 1, err);
    else
        o = imp_layer_new(p, nd, "reduce", NULL, &x, 1, X.rank, 1, X.h, X.w, err);
    if (o < 0)
        return err->code;
    imp_layer *l = &p->l[p->v[o].layer];
    if (!strcmp(l->type, "reduce")) {
        static const char *const ops[3] = {"mean", "sum", "l2"};
        imp_opt(l, "axes", "%s", over == OVER_SPATIAL ? "spatial" : "channels");
        imp_opt(l, "op", "%s", ops[op]);
        if (over == OVER_GROUPS)
            imp_opt(l, "groups", "%d", X.groups);
    }
    p->v[o].nhwc = X.nhwc;
    p->v[o].groups = over == OVER_GROUPS && keep ? 1 : 0;
    return DTNN_OK;
}

dtnn_status op_reduce_mean(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    return reduce_node(p, nd, OP_MEAN, err);
}

dtnn_status op_reduce_sum(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    return reduce_node(p, nd, OP_SUM, err);
}

dtnn_status op_reduce_l2(imp *p, const Onnx__NodeProto *nd, dtnn_error *err)
{
    return reduce_node(p, nd, OP_L2, err);
}
