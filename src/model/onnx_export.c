/*
 * onnx_export.c — writes a built model's inference graph as an ONNX model file: one node per
 * layer (named as the layer), the parameters and batch-norm running statistics as initializers
 * named as the model's tensors (PyTorch state_dict names), input "input" [N, C, H, W] and
 * output "output" with a symbolic batch dimension N. The messages are the C structs protoc-c
 * generates at build time from the onnx.proto of Debian's libonnx-dev (CMake: DTNN_ONNX), and
 * protobuf-c packs them.
 *
 * The graph is the model in evaluation form: batch norm is BatchNormalization with the running
 * statistics, dropout and stochastic depth are dropped (the identity at inference), a ReLU that
 * the build fused into the batch norm or add before it is its own Relu node, relu6 is Clip(0, 6), and the option-A
 * shortcut is Slice (every stride-th row and column) then Pad (zero channels on both sides),
 * a constant operand of add, mul or sub is an initializer input of Add, Mul or Sub, and pad is
 * Pad with its fill as constant_value.
 * Values are 4-D [N, C, H, W] up to a flatten and 2-D [N, F] after it; a layer that needs the
 * other rank (linear after a global pool, a pool after a linear) gets a Flatten or Reshape node.
 * Operator semantics follow the ONNX operator documents (onnx/docs/Operators.md) for opsets 11
 * to 17. Not done: the dataset normalisation a checkpoint records (the graph takes normalised
 * input, as dtnn_model_forward does), external data for models over 2 GiB (protobuf's limit).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "onnx_emit.h"

/* The option-A shortcut: Slice keeps rows and columns 0, s, 2s, ... (the output's
 * ceil(H / s), as x[:, :, ::s, ::s]), Pad adds the zero channels before and after. */
static const char *emit_shortcut(onnx_writer *w, const layer *l, const layer_attrs *a,
                                 const char *x, const char *out)
{
    const int C = l->in[0].c, K = a->outputs, s = a->stride[0];
    if (s > 1) {
        const int64_t starts[2] = {0, 0}, ends[2] = {INT64_MAX, INT64_MAX}, axes[2] = {2, 3},
                      steps[2] = {s, s};
        const char *names[4] = {onnxw_printf(w, "%s.%s", l->name, "slice_starts"),
                                onnxw_printf(w, "%s.%s", l->name, "slice_ends"),
                                onnxw_printf(w, "%s.%s", l->name, "slice_axes"),
                                onnxw_printf(w, "%s.%s", l->name, "slice_steps")};
        const char *sliced = K > C ? onnxw_printf(w, "%s/%s", l->name, "slice") : out;
        if (!names[0] || !names[1] || !names[2] || !names[3] || !sliced ||
            onnxw_const_i64(w, names[0], starts, 2) || onnxw_const_i64(w, names[1], ends, 2) ||
            onnxw_const_i64(w, names[2], axes, 2) || onnxw_const_i64(w, names[3], steps, 2))
            return NULL;
        const char *ins[5] = {x, names[0], names[1], names[2], names[3]};
        if (!onnxw_node(w, "Slice", K > C ? sliced : l->name, ins, 5, sliced))
            return NULL;
        x = sliced;
    }
    if (K > C) {
        /* pads: [begin of N, C, H, W, end of N, C, H, W] */
        const int64_t pads[8] = {0, a->offset, 0, 0, 0, K - C - a->offset, 0, 0};
        const char *pname = onnxw_printf(w, "%s.%s", l->name, "pads");
        if (!pname || onnxw_const_i64(w, pname, pads, 8))
            return NULL;
        const char *ins[2] = {x, pname};
        Onnx__NodeProto *nd = onnxw_node(w, "Pad", l->name, ins, 2, out);
        onnxw_attr_string(w, nd, "mode", "constant");
        return nd && !w->oom ? out : NULL;
    }
    if (s == 1) /* neither: the identity */
        return onnxw_node(w, "Identity", l->name, &x, 1, out) ? out : NULL;
    return out;
}

emit_result made(const onnx_writer *w, const Onnx__NodeProto *nd)
{
    return nd && !w->oom ? EMIT_OK : EMIT_NOMEM;
}

/* Input 0's rank, for operators that keep it. */
static int input_rank(const onnx_writer *w, const layer *l)
{
    return l->in_ids[0] == DTNN_INPUT ? 4 : w->rank[l->in_ids[0]];
}

static emit_result emit_conv2d(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    const layer *l = c->l;
    /* rank 4: a weight declared [K, C] (weight_dims = 2) is Conv's [K, C, 1, 1] */
    const char *ins[3] = {onnxw_input_as(w, l, 0, 4),
                          onnxw_tensor_init_rank(w, l, "weight", 4, err),
                          c->a.bias ? onnxw_tensor_init(w, l, "bias", err) : ""};
    if (!ins[1] || !ins[2])
        return EMIT_ERROR;
    if (!ins[0])
        return EMIT_NOMEM;
    Onnx__NodeProto *nd = onnxw_node(w, "Conv", l->name, ins, c->a.bias ? 3 : 2, c->out);
    onnxw_attr_window(w, nd, &c->a);
    onnxw_attr_ints(w, nd, "dilations", c->a.dilation, 2);
    onnxw_attr_int(w, nd, "group", c->a.groups);
    return made(w, nd);
}

static emit_result emit_linear(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    const layer *l = c->l;
    const char *ins[3] = {onnxw_input_as(w, l, 0, 2), onnxw_tensor_init(w, l, "weight", err),
                          c->a.bias ? onnxw_tensor_init(w, l, "bias", err) : ""};
    if (!ins[1] || !ins[2])
        return EMIT_ERROR;
    if (!ins[0])
        return EMIT_NOMEM;
    Onnx__NodeProto *nd = onnxw_node(w, "Gemm", l->name, ins, c->a.bias ? 3 : 2, c->out);
    onnxw_attr_int(w, nd, "transB", 1);   /* y = x W^T + b with W [out, in], as nn.Linear */
    c->rank = 2;
    return made(w, nd);
}

static emit_result emit_batchnorm(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    const layer *l = c->l;
    const char *ins[5] = {onnxw_input_as(w, l, 0, 0), onnxw_tensor_init(w, l, "weight", err), NULL, NULL,
                          NULL};
    if (ins[1] && (ins[2] = onnxw_tensor_init(w, l, "bias", err)) &&
        (ins[3] = onnxw_tensor_init(w, l, "running_mean", err)))
        ins[4] = onnxw_tensor_init(w, l, "running_var", err);
    if (!ins[4])
        return EMIT_ERROR;
    Onnx__NodeProto *nd = onnxw_node(w, "BatchNormalization", l->name, ins, 5, c->out);
    onnxw_attr_float(w, nd, "epsilon", c->a.eps);
    c->rank = input_rank(w, l);
    return made(w, nd);
}

/* Relu, Sigmoid, Tanh, LeakyRelu: the ONNX operator of the same name. */
static emit_result emit_activation(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    (void)err;
    static const char *const ops[][2] = {{"relu", "Relu"}, {"sigmoid", "Sigmoid"},
                                         {"tanh", "Tanh"}, {"leaky_relu", "LeakyRelu"},
                                         {"erf", "Erf"}, {"sqrt", "Sqrt"}};
    const layer *l = c->l;
    const char *op = "";
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
        if (!strcmp(l->ops->type, ops[k][0]))
            op = ops[k][1];
    const char *x = onnxw_input_as(w, l, 0, 0);
    if (!x)
        return EMIT_NOMEM;
    Onnx__NodeProto *nd = onnxw_node(w, op, l->name, &x, 1, c->out);
    if (!strcmp(l->ops->type, "leaky_relu"))
        onnxw_attr_float(w, nd, "alpha", c->a.alpha);
    c->rank = input_rank(w, l);
    return made(w, nd);
}

/* Clip takes its bounds as inputs from opset 11: two scalars every relu6 shares. */
static emit_result emit_relu6(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    (void)err;
    if (!w->have_clip6 && (onnxw_const_f32(w, "dtnn.relu6_min", 0.0f) ||
                           onnxw_const_f32(w, "dtnn.relu6_max", 6.0f)))
        return EMIT_NOMEM;
    w->have_clip6 = 1;
    const char *ins[3] = {onnxw_input_as(w, c->l, 0, 0), "dtnn.relu6_min", "dtnn.relu6_max"};
    if (!ins[0])
        return EMIT_NOMEM;
    c->rank = input_rank(w, c->l);
    return made(w, onnxw_node(w, "Clip", c->l->name, ins, 3, c->out));
}

/* clamp and hardtanh: Clip with this layer's bounds as scalar inputs; an infinite one (clamp
 * without it) is an omitted input, which Clip reads as no bound. */
static emit_result emit_clip(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    (void)err;
    const layer *l = c->l;
    const char *lo = isinf(c->a.bounds[0]) ? "" : onnxw_printf(w, "%s%s", l->name, ".min");
    const char *hi = isinf(c->a.bounds[1]) ? "" : onnxw_printf(w, "%s%s", l->name, ".max");
    if (!lo || !hi || (*lo && onnxw_const_f32(w, lo, c->a.bounds[0])) ||
        (*hi && onnxw_const_f32(w, hi, c->a.bounds[1])))
        return EMIT_NOMEM;
    const char *ins[3] = {onnxw_input_as(w, l, 0, 0), lo, hi};
    if (!ins[0])
        return EMIT_NOMEM;
    c->rank = input_rank(w, l);
    return made(w, onnxw_node(w, "Clip", l->name, ins, *hi ? 3 : *lo ? 2 : 1, c->out));
}

/* relu6(x + 3) / 6 is HardSigmoid with alpha 1/6, beta 1/2 (hardsigmoid's defaults);
 * HardSwish (opset 14) is x times it, written as that product for older opsets. */
static emit_result emit_hard(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    (void)err;
    const layer *l = c->l;
    const int swish = !strcmp(l->ops->type, "hardswish");
    const char *x = onnxw_input_as(w, l, 0, 0);
    if (!x)
        return EMIT_NOMEM;
    c->rank = input_rank(w, l);
    if (swish && w->opset >= 14)
        return made(w, onnxw_node(w, "HardSwish", l->name, &x, 1, c->out));
    const char *gate = swish ? onnxw_printf(w, "%s%s", l->name, ".gate") : c->out;
    if (!gate)
        return EMIT_NOMEM;
    Onnx__NodeProto *nd = onnxw_node(w, "HardSigmoid", swish ? gate : l->name, &x, 1, gate);
    if (!nd)
        return EMIT_NOMEM;
    onnxw_attr_float(w, nd, "alpha", swish ? 1.0f / 6.0f : c->a.alpha);
    onnxw_attr_float(w, nd, "beta", swish ? 0.5f : c->a.beta);
    if (swish) {
        const char *ins[2] = {x, gate};
        nd = onnxw_node(w, "Mul", l->name, ins, 2, c->out);
    }
    return made(w, nd);
}

/* add, mul, sub of x and the constant (c - x with reverse): the constant is the initializer
 * <layer>.constant [C, H, W], as in the checkpoint, against a 4-D [N, C, H, W] x, which
 * NumPy's broadcast aligns on the right as the layer does. A flat [N, F] x is reshaped to
 * [N, F, 1, 1] for it, since a [C, H, W] constant would broadcast wrongly against [N, F]. */
static emit_result emit_constant_operand(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    const layer *l = c->l;
    const char *type = l->ops->type;
    /* the layer's one tensor: "constant", or a trainable mul's const_name */
    const char *ins[2] = {onnxw_input_as(w, l, 0, 4), onnxw_tensor_init(w, l, l->t[0].suffix,
                                                                        err)};
    if (!ins[1])
        return EMIT_ERROR;
    if (!ins[0])
        return EMIT_NOMEM;
    if (c->a.reverse) {
        const char *x0 = ins[0];
        ins[0] = ins[1];
        ins[1] = x0;
    }
    c->rank = 4;
    return made(w, onnxw_node(w, type[0] == 'm'   ? "Mul"
                                 : type[0] == 's' ? "Sub"
                                 : type[0] == 'd' ? "Div"
                                                  : "Add",
                            l->name, ins, 2, c->out));
}

static emit_result emit_pad(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    (void)err;
    const layer *l = c->l;
    /* pads: [begin of N, C, H, W, end of N, C, H, W]; the fill is constant_value */
    const int *sd = c->a.pad_sides;
    const int64_t pads[8] = {0, sd[4], sd[0], sd[1], 0, sd[5], sd[2], sd[3]};
    const char *pname = onnxw_printf(w, "%s.%s", l->name, "pads");
    const char *vname = onnxw_printf(w, "%s.%s", l->name, "value");
    if (!pname || !vname || onnxw_const_i64(w, pname, pads, 8) ||
        onnxw_const_f32(w, vname, c->a.pad_value))
        return EMIT_NOMEM;
    const char *ins[3] = {onnxw_input_as(w, l, 0, 4), pname, vname};
    if (!ins[0])
        return EMIT_NOMEM;
    Onnx__NodeProto *nd = onnxw_node(w, "Pad", l->name, ins, 3, c->out);
    onnxw_attr_string(w, nd, "mode", "constant");
    return made(w, nd);
}

/* x[:, start:end]: Slice on axis 1 (opset 10's form, starts, ends and axes as inputs). */
static emit_result emit_slice(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    (void)err;
    const layer *l = c->l;
    const int64_t starts[1] = {c->a.channels[0]}, ends[1] = {c->a.channels[1]}, axes[1] = {1};
    const char *sname = onnxw_printf(w, "%s.%s", l->name, "starts");
    const char *ename = onnxw_printf(w, "%s.%s", l->name, "ends");
    const char *aname = onnxw_printf(w, "%s.%s", l->name, "axes");
    if (!sname || !ename || !aname || onnxw_const_i64(w, sname, starts, 1) ||
        onnxw_const_i64(w, ename, ends, 1) || onnxw_const_i64(w, aname, axes, 1))
        return EMIT_NOMEM;
    const char *ins[4] = {onnxw_input_as(w, l, 0, 4), sname, ename, aname};
    if (!ins[0])
        return EMIT_NOMEM;
    return made(w, onnxw_node(w, "Slice", l->name, ins, 4, c->out));
}

/* Input 0 of layer l seen as [N, G, C/G, H, W] (the channel groups of a split attention), as
 * the value <layer>/groups; NULL out of memory. */
static const char *input_as_groups(onnx_writer *w, const layer *l, int groups)
{
    const dtnn_shape x = l->in[0];
    const int64_t shape[5] = {0, groups, x.c / groups, x.h, x.w};
    const char *ins[2] = {onnxw_input_as(w, l, 0, 4), onnxw_printf(w, "%s.%s", l->name, "groups")};
    const char *out = onnxw_printf(w, "%s/%s", l->name, "groups");
    if (!ins[0] || !ins[1] || !out || onnxw_const_i64(w, ins[1], shape, 5))
        return NULL;
    return onnxw_node(w, "Reshape", out, ins, 2, out) && !w->oom ? out : NULL;
}

/* reduce: ReduceMean, ReduceSum or ReduceL2 over axis 1 or axes 2, 3, keeping the dimensions
 * (the layer's output is 1 x H x W or C x 1 x 1), or across channel groups as timm writes it
 * (Reshape to [N, G, C/G, H, W], the reduction over axis 1 without keeping it); ReduceSum takes
 * its axes as an input from 13 (the others from 18, beyond the opsets written here). */
static emit_result emit_reduce(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    (void)err;
    const layer *l = c->l;
    const int chan = c->a.reduce_over_channels, sum = c->a.reduce_sum, l2 = c->a.reduce_l2;
    const int grouped = chan && c->a.reduce_groups;
    const int axes[2] = {chan ? 1 : 2, 3};
    const int n_axes = chan ? 1 : 2;
    const char *ins[2] = {grouped ? input_as_groups(w, l, c->a.reduce_groups)
                                  : onnxw_input_as(w, l, 0, 4), NULL};
    if (!ins[0])
        return EMIT_NOMEM;
    const int as_input = sum && w->opset >= 13;
    if (as_input) {
        const int64_t v[2] = {axes[0], axes[1]};
        if (!(ins[1] = onnxw_printf(w, "%s.%s", l->name, "axes")) ||
            onnxw_const_i64(w, ins[1], v, n_axes))
            return EMIT_NOMEM;
    }
    Onnx__NodeProto *nd = onnxw_node(w, l2 ? "ReduceL2" : sum ? "ReduceSum" : "ReduceMean",
                                     l->name, ins, as_input ? 2 : 1, c->out);
    if (!as_input)
        onnxw_attr_ints(w, nd, "axes", axes, n_axes);
    onnxw_attr_int(w, nd, "keepdims", !grouped);
    return made(w, nd);
}

/* upsample: Resize by scales [1, 1, sh, sw] (opset 11's inputs: X, an empty roi, scales),
 * nearest as torch writes it (asymmetric, floor: each value repeated), bilinear as linear
 * with pytorch_half_pixel or align_corners. */
static emit_result emit_upsample(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    (void)err;
    const layer *l = c->l;
    const float scales[4] = {1.0f, 1.0f, (float)c->a.stride[0], (float)c->a.stride[1]};
    const char *ins[3] = {onnxw_input_as(w, l, 0, 4), onnxw_printf(w, "%s.%s", l->name, "roi"),
                          onnxw_printf(w, "%s.%s", l->name, "scales")};
    if (!ins[0] || !ins[1] || !ins[2] || onnxw_const_f32s(w, ins[1], scales, 0) ||
        onnxw_const_f32s(w, ins[2], scales, 4))
        return EMIT_NOMEM;
    Onnx__NodeProto *nd = onnxw_node(w, "Resize", l->name, ins, 3, c->out);
    const int bilinear = c->a.upsample_bilinear;
    onnxw_attr_string(w, nd, "mode", bilinear ? "linear" : "nearest");
    onnxw_attr_string(w, nd, "coordinate_transformation_mode",
                      !bilinear                      ? "asymmetric"
                      : c->a.upsample_align_corners ? "align_corners"
                                                     : "pytorch_half_pixel");
    if (!bilinear)
        onnxw_attr_string(w, nd, "nearest_mode", "floor");
    return made(w, nd);
}

/* layernorm: LayerNormalization (opset 17) over the last axis, of [N, F] features directly and
 * of [N, C, H, W] between Transposes to channels-last and back, as torch writes LayerNorm2d;
 * without affine parameters, Scale ones and B zeros. */
static emit_result emit_layernorm(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    const layer *l = c->l;
    if (w->opset < 17) {
        dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "layer '%s' (layernorm): LayerNormalization "
                       "is in ONNX from opset 17: export with --opset 17", l->name);
        return EMIT_ERROR;
    }
    const int rank = input_rank(w, l), C = l->in[0].c;
    const char *ins[3] = {onnxw_input_as(w, l, 0, rank), NULL, NULL};
    if (c->a.bias) {
        if (!(ins[1] = onnxw_tensor_init(w, l, "weight", err)) ||
            !(ins[2] = onnxw_tensor_init(w, l, "bias", err)))
            return EMIT_ERROR;
    } else {
        float *v = onnxw_alloc(w, sizeof(float) * 2 * (size_t)C);
        ins[1] = onnxw_printf(w, "%s.%s", l->name, "ones");
        ins[2] = onnxw_printf(w, "%s.%s", l->name, "zeros");
        if (!v || !ins[1] || !ins[2])
            return EMIT_NOMEM;
        for (int k = 0; k < C; k++)
            v[k] = 1.0f, v[C + k] = 0.0f;
        if (onnxw_const_f32s(w, ins[1], v, C) || onnxw_const_f32s(w, ins[2], v + C, C))
            return EMIT_NOMEM;
    }
    if (!ins[0])
        return EMIT_NOMEM;
    c->rank = rank;
    if (rank == 2) {
        Onnx__NodeProto *nd = onnxw_node(w, "LayerNormalization", l->name, ins, 3, c->out);
        onnxw_attr_float(w, nd, "epsilon", c->a.eps);
        onnxw_attr_int(w, nd, "axis", -1);
        return made(w, nd);
    }
    static const int to_last[4] = {0, 2, 3, 1}, back[4] = {0, 3, 1, 2};
    const char *last = onnxw_printf(w, "%s.%s", l->name, "channels_last");
    const char *normed = onnxw_printf(w, "%s.%s", l->name, "normalized");
    if (!last || !normed)
        return EMIT_NOMEM;
    Onnx__NodeProto *t1 = onnxw_node(w, "Transpose", last, ins, 1, last);
    onnxw_attr_ints(w, t1, "perm", to_last, 4);
    const char *ln_ins[3] = {last, ins[1], ins[2]};
    Onnx__NodeProto *nd = onnxw_node(w, "LayerNormalization", l->name, ln_ins, 3, normed);
    onnxw_attr_float(w, nd, "epsilon", c->a.eps);
    onnxw_attr_int(w, nd, "axis", -1);
    Onnx__NodeProto *t2 = onnxw_node(w, "Transpose", normed, &normed, 1, c->out);
    onnxw_attr_ints(w, t2, "perm", back, 4);
    return t1 && nd ? made(w, t2) : EMIT_NOMEM;
}

/* mul and sub of two computed values (ONNX's broadcasting is NumPy's, as the layers'); add
 * (Add, or Sum of more than two) and concat along channels, their inputs in one rank. */
static emit_result emit_nary(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    (void)err;
    const layer *l = c->l;
    const char *type = l->ops->type;
    c->rank = onnxw_common_rank(w, l);
    const char *ins[16];
    for (int k = 0; k < l->n_in; k++)
        if (!(ins[k] = onnxw_input_as(w, l, k, c->rank)))
            return EMIT_NOMEM;
    const char *op = !strcmp(type, "mul")      ? "Mul"
                     : !strcmp(type, "sub")    ? "Sub"
                     : !strcmp(type, "div")    ? "Div"
                     : !strcmp(type, "concat") ? "Concat"
                     : l->n_in == 2            ? "Add"
                                               : "Sum";
    Onnx__NodeProto *nd = onnxw_node(w, op, l->name, ins, l->n_in, c->out);
    if (!strcmp(type, "concat"))
        onnxw_attr_int(w, nd, "axis", 1);
    return made(w, nd);
}

static emit_result emit_pool(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    (void)err;
    const layer *l = c->l;
    const int max = !strcmp(l->ops->type, "maxpool");
    const char *x = onnxw_input_as(w, l, 0, 4);
    if (!x)
        return EMIT_NOMEM;
    Onnx__NodeProto *nd = onnxw_node(w, max ? "MaxPool" : "AveragePool", l->name, &x, 1, c->out);
    onnxw_attr_window(w, nd, &c->a);
    if (!max)
        onnxw_attr_int(w, nd, "count_include_pad", c->a.count_include_pad);
    if (c->a.ceil_mode)
        onnxw_attr_int(w, nd, "ceil_mode", 1);
    if (max && (c->a.dilation[0] != 1 || c->a.dilation[1] != 1))
        onnxw_attr_ints(w, nd, "dilations", c->a.dilation, 2);
    return made(w, nd);
}

static emit_result emit_global_pool(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    (void)err;
    const char *x = onnxw_input_as(w, c->l, 0, 4);
    const int max = !strcmp(c->l->ops->type, "global_maxpool");
    return x ? made(w, onnxw_node(w, max ? "GlobalMaxPool" : "GlobalAveragePool", c->l->name, &x,
                                1, c->out))
             : EMIT_NOMEM;
}

/* Adaptive windows are fixed ones when the output divides the input (the only case ONNX's
 * pooling operators express): kernel = stride = input / output. */
static emit_result emit_adaptive_avgpool(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    const layer *l = c->l;
    const dtnn_shape in = l->in[0];
    const int *size = c->a.output_size;
    if (in.h % size[0] || in.w % size[1]) {
        dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "layer '%s' (adaptive_avgpool): output "
                       "%dx%d does not divide its %dx%d input, so its windows differ in size, "
                       "which no ONNX pooling operator expresses; export the model at an input "
                       "size that the output divides", l->name, size[0], size[1], in.h, in.w);
        return EMIT_ERROR;
    }
    layer_attrs p = {.kernel = {in.h / size[0], in.w / size[1]}};
    p.stride[0] = p.kernel[0];
    p.stride[1] = p.kernel[1];
    const char *x = onnxw_input_as(w, l, 0, 4);
    if (!x)
        return EMIT_NOMEM;
    Onnx__NodeProto *nd = onnxw_node(w, "AveragePool", l->name, &x, 1, c->out);
    onnxw_attr_window(w, nd, &p);
    return made(w, nd);
}

/* A value already [N, F] is passed on as it is, unless it must become "output". */
static emit_result emit_flatten(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    (void)err;
    const layer *l = c->l;
    const char *x = onnxw_input_as(w, l, 0, 0);
    c->rank = 2;
    if (!x)
        return EMIT_NOMEM;
    if (!c->last && l->in_ids[0] != DTNN_INPUT && w->rank[l->in_ids[0]] == 2) {
        c->out = x;
        return EMIT_OK;
    }
    Onnx__NodeProto *nd = onnxw_node(w, "Flatten", l->name, &x, 1, c->out);
    onnxw_attr_int(w, nd, "axis", 1);
    return made(w, nd);
}

/* reshape: Reshape to [N, C, H, W] of the layer's output shape (the batch kept by 0). */
static emit_result emit_reshape(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    (void)err;
    const layer *l = c->l;
    const char *ins[2] = {onnxw_input_as(w, l, 0, 4), NULL};
    const int64_t shape[4] = {0, l->out.c, l->out.h, l->out.w};
    if (!ins[0] || !(ins[1] = onnxw_printf(w, "%s.%s", l->name, "shape")) ||
        onnxw_const_i64(w, ins[1], shape, 4))
        return EMIT_NOMEM;
    return made(w, onnxw_node(w, "Reshape", l->name, ins, 2, c->out));
}

/* The identity at inference: consumers read the input itself. The last layer still needs a
 * node to produce "output". */
static emit_result emit_dropout(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    (void)err;
    const char *x = onnxw_input_as(w, c->l, 0, 0);
    c->rank = input_rank(w, c->l);
    if (!x)
        return EMIT_NOMEM;
    if (!c->last) {
        c->out = x;
        return EMIT_OK;
    }
    return made(w, onnxw_node(w, "Identity", c->l->name, &x, 1, c->out));
}

/* softmax: over [N, F], or across channel groups as Softmax over axis 1 of the input seen as
 * [N, G, C/G, H, W] and reshaped back (before opset 13 Softmax flattens the axes after its
 * own, so it cannot say this in one node). */
static emit_result emit_softmax(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    const layer *l = c->l;
    const int groups = c->a.softmax_groups;
    if (groups && w->opset < 13) {
        dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "layer '%s': a softmax across channel groups "
                       "is one ONNX Softmax from opset 13: export with --opset 13 or later",
                       l->name);
        return EMIT_ERROR;
    }
    const char *x = groups ? input_as_groups(w, l, groups) : onnxw_input_as(w, l, 0, 2);
    if (!x)
        return EMIT_NOMEM;
    const char *y = groups ? onnxw_printf(w, "%s/%s", l->name, "softmax") : c->out;
    Onnx__NodeProto *nd = y ? onnxw_node(w, "Softmax", groups ? y : l->name, &x, 1, y) : NULL;
    if (!nd)
        return EMIT_NOMEM;
    onnxw_attr_int(w, nd, "axis", 1);
    c->rank = groups ? 4 : 2;
    if (!groups)
        return made(w, nd);
    const int64_t shape[4] = {0, l->out.c, l->out.h, l->out.w};
    const char *ins[2] = {y, onnxw_printf(w, "%s.%s", l->name, "shape")};
    if (!ins[1] || onnxw_const_i64(w, ins[1], shape, 4))
        return EMIT_NOMEM;
    return made(w, onnxw_node(w, "Reshape", l->name, ins, 2, c->out));
}

/* One step of a decomposed layer: op of a and either value b or the scalar constant v
 * (b NULL: the initializer <layer>/<step>_value), as the value <layer>/<step> or the layer's
 * out. */
static const char *emit_step(onnx_writer *w, const emit_ctx *c, const char *step, const char *op,
                             const char *a, const char *b, float v, int last)
{
    const char *out = last ? c->out : onnxw_printf(w, "%s/%s", c->l->name, step);
    const char *node = last ? c->l->name : out;
    if (!b) {
        /* a '/' in the name: not a module's parameter to the importer (a Mul by one trains) */
        b = onnxw_printf(w, "%s/%s_value", c->l->name, step);
        if (!b || onnxw_const_f32(w, b, v))
            return NULL;
    }
    const char *ins[2] = {a, b};
    return out && onnxw_node(w, op, node, ins, 2, out) ? out : NULL;
}

/* gelu in opsets without Gelu (added in 20), as torch.onnx writes it: (x * (1 + erf(x /
 * sqrt 2))) * 0.5, or with the tanh form (x * (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))) *
 * 0.5; the layer's x * 0.5 * (1 + ...) differs by an ulp or so. */
static emit_result emit_gelu(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    (void)err;
    const char *x = onnxw_input_as(w, c->l, 0, 0), *t = NULL;
    c->rank = input_rank(w, c->l);
    if (!x)
        return EMIT_NOMEM;
    if (!c->a.approximate) {
        const char *s = emit_step(w, c, "scaled", "Mul", x, NULL, 0.70710678118654752440f, 0);
        const char *e = s ? onnxw_printf(w, "%s/%s", c->l->name, "erf") : NULL;
        if (!e || !onnxw_node(w, "Erf", e, &s, 1, e))
            return EMIT_NOMEM;
        t = e;
    } else {
        const char *x2 = emit_step(w, c, "square", "Mul", x, x, 0.0f, 0);
        const char *x3 = x2 ? emit_step(w, c, "cube", "Mul", x2, x, 0.0f, 0) : NULL;
        const char *k = x3 ? emit_step(w, c, "kappa", "Mul", x3, NULL, 0.044715f, 0) : NULL;
        const char *sum = k ? emit_step(w, c, "sum", "Add", x, k, 0.0f, 0) : NULL;
        const char *in = sum ? emit_step(w, c, "beta", "Mul", sum, NULL,
                                         0.79788456080286535588f, 0) : NULL;
        const char *th = in ? onnxw_printf(w, "%s/%s", c->l->name, "tanh") : NULL;
        if (!th || !onnxw_node(w, "Tanh", th, &in, 1, th))
            return EMIT_NOMEM;
        t = th;
    }
    /* (x * (1 + t)) * 0.5, torch.onnx's order, which the importer fuses back into a gelu */
    const char *one = emit_step(w, c, "one", "Add", t, NULL, 1.0f, 0);
    const char *prod = one ? emit_step(w, c, "product", "Mul", x, one, 0.0f, 0) : NULL;
    return prod && emit_step(w, c, "gelu", "Mul", prod, NULL, 0.5f, 1) && !w->oom ? EMIT_OK
                                                                                  : EMIT_NOMEM;
}

/* silu as x * Sigmoid(x): ONNX has no SiLU before opset 24 (Swish); the importer fuses the
 * pair back into one silu. */
static emit_result emit_silu(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    (void)err;
    const char *x = onnxw_input_as(w, c->l, 0, 0);
    c->rank = input_rank(w, c->l);
    const char *s = x ? onnxw_printf(w, "%s/%s", c->l->name, "sigmoid") : NULL;
    if (!s || !onnxw_node(w, "Sigmoid", s, &x, 1, s))
        return EMIT_NOMEM;
    return emit_step(w, c, "silu", "Mul", x, s, 0.0f, 1) && !w->oom ? EMIT_OK : EMIT_NOMEM;
}

static emit_result emit_shortcut_a(onnx_writer *w, emit_ctx *c, dtnn_error *err)
{
    (void)err;
    const char *x = onnxw_input_as(w, c->l, 0, 4);
    return x && emit_shortcut(w, c->l, &c->a, x, c->out) ? EMIT_OK : EMIT_NOMEM;
}

/* Each layer type's ONNX form, as the importer's table maps ONNX operators to layers. A layer
 * with a constant operand (add, mul, sub) is emit_constant_operand's, whatever its type. */
static const struct {
    const char *type;
    emit_fn emit;
} emitters[] = {
    {"conv2d", emit_conv2d},
    {"linear", emit_linear},
    {"batchnorm", emit_batchnorm},
    {"relu", emit_activation},
    {"sigmoid", emit_activation},
    {"tanh", emit_activation},
    {"erf", emit_activation},
    {"sqrt", emit_activation},
    {"leaky_relu", emit_activation},
    {"relu6", emit_relu6},
    {"clamp", emit_clip},
    {"hardtanh", emit_clip},
    {"hardsigmoid", emit_hard},
    {"hardswish", emit_hard},
    {"gelu", emit_gelu},
    {"silu", emit_silu},
    {"pad", emit_pad},
    {"slice", emit_slice},
    {"reduce", emit_reduce},
    {"upsample", emit_upsample},
    {"layernorm", emit_layernorm},
    {"add", emit_nary},
    {"mul", emit_nary},
    {"sub", emit_nary},
    {"div", emit_nary},
    {"concat", emit_nary},
    {"maxpool", emit_pool},
    {"avgpool", emit_pool},
    {"global_maxpool", emit_global_pool},
    {"global_avgpool", emit_global_pool},
    {"adaptive_avgpool", emit_adaptive_avgpool},
    {"flatten", emit_flatten},
    {"reshape", emit_reshape},
    {"dropout", emit_dropout},
    {"stochastic_depth", emit_dropout},
    {"softmax", emit_softmax},
    {"permute", emit_permute},
    {"matmul", emit_matmul},
    {"shortcut_a", emit_shortcut_a},
};

/* Adds the node(s) of layer i; w->value[i] and w->rank[i] tell where its output is. */
static dtnn_status emit_layer(onnx_writer *w, int i, dtnn_error *err)
{
    const layer *l = w->m->layers[i];
    const char *type = l->ops->type;
    emit_ctx c = {.l = l, .last = i == w->m->n_layers - 1, .rank = 4};
    c.out = c.last ? "output" : l->name;
    if (l->ops->describe)
        l->ops->describe(l, &c.a);
    if (!c.last && (!strcmp(l->name, "input") || !strcmp(l->name, "output")))
        return dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "layer '%s' (%s): its name is one of "
                              "the graph's own value names (input, output); rename the layer",
                              l->name, type);
    emit_fn emit = c.a.constant ? emit_constant_operand : c.a.last_axis ? emit_last_axis : NULL;
    for (size_t k = 0; !emit && k < sizeof emitters / sizeof emitters[0]; k++)
        if (!strcmp(type, emitters[k].type))
            emit = emitters[k].emit;
    if (!emit)
        return dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "layer '%s' (%s) has no ONNX form in "
                              "this exporter", l->name, type);
    const emit_result r = emit(w, &c, err);
    if (r == EMIT_ERROR)
        return err->code;
    if (r == EMIT_OK && !w->oom && (w->value[i] = c.last ? "output" : onnxw_str(w, c.out))) {
        w->rank[i] = c.rank;
        return DTNN_OK;
    }
    return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory writing layer '%s' (%s) as ONNX",
                          l->name, type);
}

int dtnn_onnx_available(void) { return 1; }

dtnn_status dtnn_onnx_export(const dtnn_model *m, const char *path, int opset, dtnn_error *err)
{
    if (!m || !path)
        return dtnn_error_set(err, DTNN_ERR_ARG, "dtnn_onnx_export needs a model and a path");
    if (!m->built || m->n_layers == 0)
        return dtnn_error_set(err, DTNN_ERR_ARG, "export needs a built model "
                              "(dtnn_model_build) of at least one layer, its weights loaded");
    if (opset < 11 || opset > 17)
        return dtnn_error_set(err, DTNN_ERR_ARG, "opset %d: the exporter writes opsets 11 to 17 "
                              "(from 11 on Pad, Slice and Clip take their bounds as inputs; 17 "
                              "is the newest Debian's onnx 1.12 checks)", opset);
    onnx_writer w;
    memset(&w, 0, sizeof w);
    w.m = m;
    w.opset = opset;
    dtnn_status st = DTNN_OK;
    w.value = onnxw_alloc(&w, sizeof(char *) * (m->n_layers + 1));
    w.rank = onnxw_alloc(&w, sizeof(int) * (m->n_layers + 1));
    if (!w.value || !w.rank)
        st = dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory exporting the model");
    for (int i = 0; st == DTNN_OK && i < m->n_layers; i++)
        st = emit_layer(&w, i, err);

    Onnx__ModelProto mp = ONNX__MODEL_PROTO__INIT;
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    Onnx__OperatorSetIdProto os = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    Onnx__OperatorSetIdProto *osp = &os;
    Onnx__ValueInfoProto *in = NULL, *out = NULL;
    if (st == DTNN_OK) {
        const layer *lastl = m->layers[m->n_layers - 1];
        const int in_dims[3] = {m->input.c, m->input.h, m->input.w};
        const int out_dims[3] = {lastl->out.c, lastl->out.h, lastl->out.w};
        in = onnxw_value_info(&w, "input", in_dims, 3);
        out = onnxw_value_info(&w, "output", out_dims, w.rank[m->n_layers - 1] == 4 ? 3 : 1);
        if (!in || !out || w.oom)
            st = dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory exporting the model");
    }
    if (st == DTNN_OK) {
        g.name = "dtnn";
        g.n_node = w.n_nodes;
        g.node = w.nodes;
        g.n_initializer = w.n_inits;
        g.initializer = w.inits;
        g.n_input = 1;
        g.input = &in;
        g.n_output = 1;
        g.output = &out;
        os.has_version = 1;
        os.version = opset;
        mp.has_ir_version = 1;
        mp.ir_version = onnxw_ir_version(opset);
        mp.n_opset_import = 1;
        mp.opset_import = &osp;
        mp.producer_name = "dtnn";
        mp.graph = &g;
        st = onnxw_write_model(&mp, path, err);
    }
    onnxw_free(&w);
    return st;
}
