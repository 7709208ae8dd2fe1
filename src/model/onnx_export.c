/*
 * onnx_export.c — writes a built model's inference graph as an ONNX model file: one node per
 * layer (named as the layer), the parameters and batch-norm running statistics as initializers
 * named as the model's tensors (PyTorch state_dict names), input "input" [N, C, H, W] and
 * output "output" with a symbolic batch dimension N. The messages are the C structs protoc-c
 * generates at build time from the onnx.proto of Debian's libonnx-dev (CMake: DTNN_ONNX), and
 * protobuf-c packs them.
 *
 * The graph is the model in evaluation form: batch norm is BatchNormalization with the running
 * statistics, dropout is dropped (the identity at inference), a ReLU that the build fused into
 * the batch norm or add before it is its own Relu node, relu6 is Clip(0, 6), and the option-A
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

#include "../core/atomic_file.h"
#include "onnx.pb-c.h"

#include "model_internal.h"

/* Every message and string of one export lives in this chain of blocks: one free at the end. */
typedef struct arena_block {
    struct arena_block *next;
    max_align_t data[];
} arena_block;

typedef struct {
    const dtnn_model *m;
    arena_block *blocks;
    int oom;                        /* an allocation failed: the export fails with NOMEM */
    Onnx__NodeProto **nodes;        /* grown by push() in arena blocks */
    size_t n_nodes, cap_nodes;
    Onnx__TensorProto **inits;
    size_t n_inits, cap_inits;
    const char **value;             /* [n_layers] the ONNX value each layer's output is */
    int *rank;                      /* [n_layers] 4 (N, C, H, W) or 2 (N, F) */
    int have_clip6, have_to4d;      /* shared constants written once */
    int opset;
} onnx_writer;

static void *ar_alloc(onnx_writer *w, size_t size)
{
    arena_block *b = calloc(1, sizeof *b + size);
    if (!b) {
        w->oom = 1;
        return NULL;
    }
    b->next = w->blocks;
    w->blocks = b;
    return b->data;
}

static char *ar_str(onnx_writer *w, const char *s)
{
    char *p = ar_alloc(w, strlen(s) + 1);
    if (p)
        strcpy(p, s);
    return p;
}

static char *ar_printf(onnx_writer *w, const char *fmt, const char *a, const char *b)
{
    char buf[256];
    snprintf(buf, sizeof buf, fmt, a, b);
    return ar_str(w, buf);
}

/* Appends p to a pointer array that doubles in the arena (the old copy stays until the end). */
static int push(onnx_writer *w, void ***arr, size_t *n, size_t *cap, void *p)
{
    if (!p)
        return -1;
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 64;
        void **na = ar_alloc(w, nc * sizeof *na);
        if (!na)
            return -1;
        if (*n)
            memcpy(na, *arr, *n * sizeof *na);
        *arr = na;
        *cap = nc;
    }
    (*arr)[(*n)++] = p;
    return 0;
}

/* ---- tensors ---------------------------------------------------------------------------- */

/* raw_data is little-endian by the ONNX spec, whatever the host's byte order. */
static void put_le(uint8_t *dst, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        dst[i] = (uint8_t)(v >> (8 * i));
}

static Onnx__TensorProto *new_tensor(onnx_writer *w, const char *name, int data_type,
                                     const int64_t *dims, int ndim, size_t bytes)
{
    Onnx__TensorProto *t = ar_alloc(w, sizeof *t);
    int64_t *d = ar_alloc(w, sizeof(int64_t) * (ndim > 0 ? ndim : 1));
    uint8_t *raw = ar_alloc(w, bytes ? bytes : 1);
    char *n = ar_str(w, name);
    if (!t || !d || !raw || !n)
        return NULL;
    onnx__tensor_proto__init(t);
    if (ndim > 0)   /* a scalar's dims may be NULL */
        memcpy(d, dims, sizeof(int64_t) * ndim);
    t->n_dims = (size_t)ndim;
    t->dims = d;
    t->has_data_type = 1;
    t->data_type = data_type;
    t->name = n;
    t->has_raw_data = 1;
    t->raw_data.len = bytes;
    t->raw_data.data = raw;
    return t;
}

static int add_init(onnx_writer *w, Onnx__TensorProto *t)
{
    return push(w, (void ***)&w->inits, &w->n_inits, &w->cap_inits, t);
}

static int const_i64(onnx_writer *w, const char *name, const int64_t *v, int64_t n)
{
    Onnx__TensorProto *t = new_tensor(w, name, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, &n, 1,
                                      sizeof(int64_t) * (size_t)n);
    if (!t)
        return -1;
    for (int64_t i = 0; i < n; i++)
        put_le(t->raw_data.data + 8 * i, (uint64_t)v[i], 8);
    return add_init(w, t);
}

static int const_f32_scalar(onnx_writer *w, const char *name, float v)
{
    Onnx__TensorProto *t = new_tensor(w, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, NULL, 0,
                                      sizeof v);
    if (!t)
        return -1;
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    put_le(t->raw_data.data, u, 4);
    return add_init(w, t);
}

/* The model's tensor `suffix` of layer l as an initializer named as in the model's layout;
 * its name is the value a node reads. NULL (err set) when it cannot be read. */
static const char *tensor_init(onnx_writer *w, const layer *l, const char *suffix,
                              dtnn_error *err)
{
    for (int k = 0; k < l->n_tensors; k++) {
        if (strcmp(l->t[k].suffix, suffix))
            continue;
        const dtnn_tensor_info *ti = dtnn_model_tensor(w->m, l->t[k].model_index);
        Onnx__TensorProto *t = new_tensor(w, ti->name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT,
                                          ti->dims, ti->ndim, sizeof(float) * ti->count);
        float *host = ar_alloc(w, sizeof(float) * (ti->count ? ti->count : 1));
        if (!t || !host || add_init(w, t)) {
            dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory copying tensor '%s' (%zu "
                           "values)", ti->name, ti->count);
            return NULL;
        }
        if (dtnn_model_tensor_read(w->m, ti, host, err))
            return NULL;
        for (size_t i = 0; i < ti->count; i++) {
            uint32_t u;
            memcpy(&u, &host[i], sizeof u);
            put_le(t->raw_data.data + 4 * i, u, 4);
        }
        return t->name;
    }
    dtnn_error_set(err, DTNN_ERR_ARG, "layer '%s' (%s) has no tensor '%s'", l->name,
                   l->ops->type, suffix);
    return NULL;
}

/* ---- nodes ------------------------------------------------------------------------------ */

static Onnx__NodeProto *add_node(onnx_writer *w, const char *op, const char *name,
                                 const char *const *inputs, int n_inputs, const char *output)
{
    Onnx__NodeProto *nd = ar_alloc(w, sizeof *nd);
    char **in = ar_alloc(w, sizeof(char *) * (n_inputs > 0 ? n_inputs : 1));
    char **out = ar_alloc(w, sizeof(char *));
    if (!nd || !in || !out)
        return NULL;
    onnx__node_proto__init(nd);
    for (int i = 0; i < n_inputs; i++)
        if (!(in[i] = ar_str(w, inputs[i])))
            return NULL;
    out[0] = ar_str(w, output);
    nd->name = ar_str(w, name);
    nd->op_type = ar_str(w, op);
    if (!out[0] || !nd->name || !nd->op_type)
        return NULL;
    nd->n_input = (size_t)n_inputs;
    nd->input = in;
    nd->n_output = 1;
    nd->output = out;
    if (push(w, (void ***)&w->nodes, &w->n_nodes, &w->cap_nodes, nd))
        return NULL;
    return nd;
}

static Onnx__AttributeProto *add_attr(onnx_writer *w, Onnx__NodeProto *nd, const char *name,
                                      Onnx__AttributeProto__AttributeType type)
{
    if (!nd)
        return NULL;
    Onnx__AttributeProto *a = ar_alloc(w, sizeof *a);
    Onnx__AttributeProto **list = ar_alloc(w, sizeof *list * (nd->n_attribute + 1));
    if (!a || !list || !(name = ar_str(w, name)))
        return NULL;
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = 1;
    a->type = type;
    if (nd->n_attribute)
        memcpy(list, nd->attribute, sizeof *list * nd->n_attribute);
    list[nd->n_attribute++] = a;
    nd->attribute = list;
    return a;
}

static void attr_int(onnx_writer *w, Onnx__NodeProto *nd, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = add_attr(w, nd, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (a) {
        a->has_i = 1;
        a->i = v;
    }
}

static void attr_float(onnx_writer *w, Onnx__NodeProto *nd, const char *name, float v)
{
    Onnx__AttributeProto *a = add_attr(w, nd, name,
                                       ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (a) {
        a->has_f = 1;
        a->f = v;
    }
}

static void attr_ints(onnx_writer *w, Onnx__NodeProto *nd, const char *name, const int *v,
                      int n)
{
    Onnx__AttributeProto *a = add_attr(w, nd, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    int64_t *d = ar_alloc(w, sizeof(int64_t) * n);
    if (!a || !d)
        return;
    for (int i = 0; i < n; i++)
        d[i] = v[i];
    a->n_ints = (size_t)n;
    a->ints = d;
}

static void attr_string(onnx_writer *w, Onnx__NodeProto *nd, const char *name, const char *v)
{
    Onnx__AttributeProto *a = add_attr(w, nd, name,
                                       ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    char *copy = ar_str(w, v);
    if (!a || !copy)
        return;
    a->has_s = 1;
    a->s.len = strlen(copy);
    a->s.data = (uint8_t *)copy;
}

/* The window attributes of Conv, MaxPool and AveragePool; ONNX pads are
 * [top, left, bottom, right] and dtnn's padding is symmetric. */
static void attr_window(onnx_writer *w, Onnx__NodeProto *nd, const layer_attrs *a)
{
    /* ONNX's order: begin of each axis, then end; pools may pad asymmetrically */
    const int pads[4] = {a->pad[0], a->pad[1], a->pad[0] + a->pad_extra[0],
                         a->pad[1] + a->pad_extra[1]};
    attr_ints(w, nd, "kernel_shape", a->kernel, 2);
    attr_ints(w, nd, "strides", a->stride, 2);
    attr_ints(w, nd, "pads", pads, 4);
}

/* ---- layers ----------------------------------------------------------------------------- */

/* The value of input i of layer l, in the rank the consumer wants (0: as it is), through a
 * Flatten (4 -> 2) or Reshape to [N, F, 1, 1] (2 -> 4) named after the consumer. */
static const char *input_as(onnx_writer *w, const layer *l, int i, int want)
{
    int id = l->in_ids[i];
    const char *v = id == DTNN_INPUT ? "input" : w->value[id];
    int rank = id == DTNN_INPUT ? 4 : w->rank[id];
    if (!want || rank == want)
        return v;
    char suffix[16];
    snprintf(suffix, sizeof suffix, "%d", i);
    if (want == 2) {
        const char *out = ar_printf(w, "%s/flatten%s", l->name, suffix);
        if (!out)
            return NULL;
        Onnx__NodeProto *nd = add_node(w, "Flatten", out, &v, 1, out);
        attr_int(w, nd, "axis", 1);
        return nd ? out : NULL;
    }
    /* Reshape's 0 keeps N and -1 takes the features: one shape constant serves every node. */
    static const char *shape_name = "dtnn.shape_n_f_1_1";
    if (!w->have_to4d) {
        const int64_t shape[4] = {0, -1, 1, 1};
        if (const_i64(w, shape_name, shape, 4))
            return NULL;
        w->have_to4d = 1;
    }
    const char *out = ar_printf(w, "%s/reshape%s", l->name, suffix);
    const char *ins[2] = {v, shape_name};
    return out && add_node(w, "Reshape", out, ins, 2, out) ? out : NULL;
}

/* Inputs of add / concat in one rank: 4-D if any of them is, since a 2-D [N, F] value is
 * then a [N, F, 1, 1] one (equal shapes are checked at build). */
static int common_rank(const onnx_writer *w, const layer *l)
{
    for (int i = 0; i < l->n_in; i++)
        if (l->in_ids[i] == DTNN_INPUT || w->rank[l->in_ids[i]] == 4)
            return 4;
    return 2;
}

/* The option-A shortcut: Slice keeps rows and columns 0, s, 2s, ... (the output's
 * ceil(H / s), as x[:, :, ::s, ::s]), Pad adds the zero channels before and after. */
static const char *emit_shortcut(onnx_writer *w, const layer *l, const layer_attrs *a,
                                 const char *x, const char *out)
{
    const int C = l->in[0].c, K = a->outputs, s = a->stride[0];
    if (s > 1) {
        const int64_t starts[2] = {0, 0}, ends[2] = {INT64_MAX, INT64_MAX}, axes[2] = {2, 3},
                      steps[2] = {s, s};
        const char *names[4] = {ar_printf(w, "%s.%s", l->name, "slice_starts"),
                                ar_printf(w, "%s.%s", l->name, "slice_ends"),
                                ar_printf(w, "%s.%s", l->name, "slice_axes"),
                                ar_printf(w, "%s.%s", l->name, "slice_steps")};
        const char *sliced = K > C ? ar_printf(w, "%s/%s", l->name, "slice") : out;
        if (!names[0] || !names[1] || !names[2] || !names[3] || !sliced ||
            const_i64(w, names[0], starts, 2) || const_i64(w, names[1], ends, 2) ||
            const_i64(w, names[2], axes, 2) || const_i64(w, names[3], steps, 2))
            return NULL;
        const char *ins[5] = {x, names[0], names[1], names[2], names[3]};
        if (!add_node(w, "Slice", K > C ? sliced : l->name, ins, 5, sliced))
            return NULL;
        x = sliced;
    }
    if (K > C) {
        /* pads: [begin of N, C, H, W, end of N, C, H, W] */
        const int64_t pads[8] = {0, a->offset, 0, 0, 0, K - C - a->offset, 0, 0};
        const char *pname = ar_printf(w, "%s.%s", l->name, "pads");
        if (!pname || const_i64(w, pname, pads, 8))
            return NULL;
        const char *ins[2] = {x, pname};
        Onnx__NodeProto *nd = add_node(w, "Pad", l->name, ins, 2, out);
        attr_string(w, nd, "mode", "constant");
        return nd && !w->oom ? out : NULL;
    }
    if (s == 1) /* neither: the identity */
        return add_node(w, "Identity", l->name, &x, 1, out) ? out : NULL;
    return out;
}

/* Adds the node(s) of layer i; w->value[i] and w->rank[i] tell where its output is. */
static dtnn_status emit_layer(onnx_writer *w, int i, dtnn_error *err)
{
    const layer *l = w->m->layers[i];
    const char *type = l->ops->type;
    const int last = i == w->m->n_layers - 1;
    const char *out = last ? "output" : l->name;
    layer_attrs a;
    memset(&a, 0, sizeof a);
    if (l->ops->describe)
        l->ops->describe(l, &a);
    if (!last && (!strcmp(l->name, "input") || !strcmp(l->name, "output")))
        return dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "layer '%s' (%s): its name is one of "
                              "the graph's own value names (input, output); rename the layer",
                              l->name, type);
    int rank = 4;
    Onnx__NodeProto *nd = NULL;
    const char *x;
#define IN(k, r) ((x = input_as(w, l, (k), (r))) != NULL ? x : "")
    if (!strcmp(type, "conv2d")) {
        const char *ins[3] = {IN(0, 4), tensor_init(w, l, "weight", err),
                              a.bias ? tensor_init(w, l, "bias", err) : ""};
        if (!ins[1] || !ins[2])
            return err->code;
        nd = add_node(w, "Conv", l->name, ins, a.bias ? 3 : 2, out);
        attr_window(w, nd, &a);
        attr_ints(w, nd, "dilations", a.dilation, 2);
        attr_int(w, nd, "group", a.groups);
    } else if (!strcmp(type, "linear")) {
        const char *ins[3] = {IN(0, 2), tensor_init(w, l, "weight", err),
                              a.bias ? tensor_init(w, l, "bias", err) : ""};
        if (!ins[1] || !ins[2])
            return err->code;
        nd = add_node(w, "Gemm", l->name, ins, a.bias ? 3 : 2, out);
        attr_int(w, nd, "transB", 1);   /* y = x W^T + b with W [out, in], as nn.Linear */
        rank = 2;
    } else if (!strcmp(type, "batchnorm")) {
        const char *ins[5] = {IN(0, 0), tensor_init(w, l, "weight", err), NULL, NULL, NULL};
        if (ins[1] && (ins[2] = tensor_init(w, l, "bias", err)) &&
            (ins[3] = tensor_init(w, l, "running_mean", err)))
            ins[4] = tensor_init(w, l, "running_var", err);
        if (!ins[4])
            return err->code;
        nd = add_node(w, "BatchNormalization", l->name, ins, 5, out);
        attr_float(w, nd, "epsilon", a.eps);
        rank = l->in_ids[0] == DTNN_INPUT ? 4 : w->rank[l->in_ids[0]];
    } else if (!strcmp(type, "relu") || !strcmp(type, "sigmoid") || !strcmp(type, "tanh") ||
               !strcmp(type, "leaky_relu")) {
        static const char *const ops[][2] = {{"relu", "Relu"}, {"sigmoid", "Sigmoid"},
                                             {"tanh", "Tanh"}, {"leaky_relu", "LeakyRelu"}};
        const char *op = "";
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
            if (!strcmp(type, ops[k][0]))
                op = ops[k][1];
        x = IN(0, 0);
        nd = add_node(w, op, l->name, &x, 1, out);
        if (!strcmp(type, "leaky_relu"))
            attr_float(w, nd, "alpha", a.alpha);
        rank = l->in_ids[0] == DTNN_INPUT ? 4 : w->rank[l->in_ids[0]];
    } else if (!strcmp(type, "relu6")) {
        /* Clip takes its bounds as inputs from opset 11: two scalars every relu6 shares. */
        if (!w->have_clip6 && (const_f32_scalar(w, "dtnn.relu6_min", 0.0f) ||
                               const_f32_scalar(w, "dtnn.relu6_max", 6.0f)))
            goto nomem;
        w->have_clip6 = 1;
        const char *ins[3] = {IN(0, 0), "dtnn.relu6_min", "dtnn.relu6_max"};
        nd = add_node(w, "Clip", l->name, ins, 3, out);
        rank = l->in_ids[0] == DTNN_INPUT ? 4 : w->rank[l->in_ids[0]];
    } else if (!strcmp(type, "clamp") || !strcmp(type, "hardtanh")) {
        /* Clip with this layer's bounds as scalar inputs; an infinite one (clamp without it)
         * is an omitted input, which Clip reads as no bound. */
        const char *lo = isinf(a.bounds[0]) ? "" : ar_printf(w, "%s%s", l->name, ".min");
        const char *hi = isinf(a.bounds[1]) ? "" : ar_printf(w, "%s%s", l->name, ".max");
        if (!lo || !hi || (*lo && const_f32_scalar(w, lo, a.bounds[0])) ||
            (*hi && const_f32_scalar(w, hi, a.bounds[1])))
            goto nomem;
        const char *ins[3] = {IN(0, 0), lo, hi};
        nd = add_node(w, "Clip", l->name, ins, *hi ? 3 : *lo ? 2 : 1, out);
        rank = l->in_ids[0] == DTNN_INPUT ? 4 : w->rank[l->in_ids[0]];
    } else if (!strcmp(type, "hardsigmoid") || !strcmp(type, "hardswish")) {
        /* relu6(x + 3) / 6 is HardSigmoid with alpha 1/6, beta 1/2 (hardsigmoid's defaults);
         * HardSwish (opset 14) is x times it, written as that product for older opsets. */
        x = IN(0, 0);
        rank = l->in_ids[0] == DTNN_INPUT ? 4 : w->rank[l->in_ids[0]];
        if (!strcmp(type, "hardswish") && w->opset >= 14) {
            nd = add_node(w, "HardSwish", l->name, &x, 1, out);
        } else {
            const int swish = !strcmp(type, "hardswish");
            const char *gate = swish ? ar_printf(w, "%s%s", l->name, ".gate") : out;
            const char *gname = swish ? gate : l->name;
            if (!gate || !gname)
                goto nomem;
            nd = add_node(w, "HardSigmoid", gname, &x, 1, gate);
            if (!nd)
                goto nomem;
            attr_float(w, nd, "alpha", swish ? 1.0f / 6.0f : a.alpha);
            attr_float(w, nd, "beta", swish ? 0.5f : a.beta);
            if (swish) {
                const char *ins[2] = {x, gate};
                nd = add_node(w, "Mul", l->name, ins, 2, out);
            }
        }
    } else if (a.constant) {
        /* add, mul, sub of x and the constant (c - x with reverse): the constant is the
         * initializer <layer>.constant [C, H, W], as in the checkpoint, against a 4-D
         * [N, C, H, W] x, which NumPy's broadcast aligns on the right as the layer does. A flat
         * [N, F] x is reshaped to [N, F, 1, 1] for it, since a [C, H, W] constant would
         * broadcast wrongly against [N, F]. */
        rank = 4;
        const char *ins[2] = {input_as(w, l, 0, 4), tensor_init(w, l, "constant", err)};
        if (!ins[1])
            return err->code;
        if (!ins[0])
            goto nomem;
        if (a.reverse) {
            const char *x0 = ins[0];
            ins[0] = ins[1];
            ins[1] = x0;
        }
        nd = add_node(w, type[0] == 'm' ? "Mul" : type[0] == 's' ? "Sub" : "Add", l->name, ins,
                      2, out);
    } else if (!strcmp(type, "pad")) {
        /* pads: [begin of N, C, H, W, end of N, C, H, W]; the fill is constant_value */
        const int *sd = a.pad_sides;
        const int64_t pads[8] = {0, sd[4], sd[0], sd[1], 0, sd[5], sd[2], sd[3]};
        const char *pname = ar_printf(w, "%s.%s", l->name, "pads");
        const char *vname = ar_printf(w, "%s.%s", l->name, "value");
        if (!pname || !vname || const_i64(w, pname, pads, 8) ||
            const_f32_scalar(w, vname, a.pad_value))
            goto nomem;
        const char *ins[3] = {IN(0, 4), pname, vname};
        nd = add_node(w, "Pad", l->name, ins, 3, out);
        attr_string(w, nd, "mode", "constant");
    } else if (!strcmp(type, "mul") || !strcmp(type, "sub")) {
        /* ONNX's broadcasting is NumPy's, as the layers' */
        rank = common_rank(w, l);
        const char *ins[2];
        for (int k = 0; k < 2; k++)
            if (!(ins[k] = input_as(w, l, k, rank)))
                goto nomem;
        nd = add_node(w, type[0] == 'm' ? "Mul" : "Sub", l->name, ins, 2, out);
    } else if (!strcmp(type, "global_maxpool")) {
        x = IN(0, 4);
        nd = add_node(w, "GlobalMaxPool", l->name, &x, 1, out);
    } else if (!strcmp(type, "maxpool") || !strcmp(type, "avgpool")) {
        x = IN(0, 4);
        nd = add_node(w, type[0] == 'm' ? "MaxPool" : "AveragePool", l->name, &x, 1, out);
        attr_window(w, nd, &a);
        if (type[0] == 'a')
            attr_int(w, nd, "count_include_pad", a.count_include_pad);
        if (a.ceil_mode)
            attr_int(w, nd, "ceil_mode", 1);
        if (type[0] == 'm' && (a.dilation[0] != 1 || a.dilation[1] != 1))
            attr_ints(w, nd, "dilations", a.dilation, 2);
    } else if (!strcmp(type, "global_avgpool")) {
        x = IN(0, 4);
        nd = add_node(w, "GlobalAveragePool", l->name, &x, 1, out);
    } else if (!strcmp(type, "adaptive_avgpool")) {
        /* Adaptive windows are fixed ones when the output divides the input (the only case
         * ONNX's pooling operators express): kernel = stride = input / output. */
        const dtnn_shape in = l->in[0];
        if (in.h % a.output_size[0] || in.w % a.output_size[1])
            return dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "layer '%s' (adaptive_avgpool): "
                                  "output %dx%d does not divide its %dx%d input, so its "
                                  "windows differ in size, which no ONNX pooling operator "
                                  "expresses; export the model at an input size that the "
                                  "output divides", l->name, a.output_size[0],
                                  a.output_size[1], in.h, in.w);
        layer_attrs p = {.kernel = {in.h / a.output_size[0], in.w / a.output_size[1]}};
        p.stride[0] = p.kernel[0];
        p.stride[1] = p.kernel[1];
        x = IN(0, 4);
        nd = add_node(w, "AveragePool", l->name, &x, 1, out);
        attr_window(w, nd, &p);
    } else if (!strcmp(type, "flatten")) {
        x = IN(0, 0);
        rank = 2;
        if (!x)
            goto nomem;
        if (!last && l->in_ids[0] != DTNN_INPUT && w->rank[l->in_ids[0]] == 2) {
            out = x;    /* already [N, F]: the same value */
            goto done;
        }
        nd = add_node(w, "Flatten", l->name, &x, 1, out);
        attr_int(w, nd, "axis", 1);
    } else if (!strcmp(type, "dropout")) {
        /* The identity at inference: consumers read the input itself. The last layer still
         * needs a node to produce "output". */
        x = IN(0, 0);
        rank = l->in_ids[0] == DTNN_INPUT ? 4 : w->rank[l->in_ids[0]];
        if (!x)
            goto nomem;
        if (!last) {
            out = x;
            goto done;
        }
        nd = add_node(w, "Identity", l->name, &x, 1, out);
    } else if (!strcmp(type, "softmax")) {
        x = IN(0, 2);
        nd = add_node(w, "Softmax", l->name, &x, 1, out);
        attr_int(w, nd, "axis", 1);
        rank = 2;
    } else if (!strcmp(type, "add") || !strcmp(type, "concat")) {
        rank = common_rank(w, l);
        const char *ins[16];
        for (int k = 0; k < l->n_in; k++)
            if (!(ins[k] = input_as(w, l, k, rank)))
                goto nomem;
        /* Sum is Add of any number of inputs. */
        const char *op = type[0] == 'c' ? "Concat" : l->n_in == 2 ? "Add" : "Sum";
        nd = add_node(w, op, l->name, ins, l->n_in, out);
        if (type[0] == 'c')
            attr_int(w, nd, "axis", 1);
    } else if (!strcmp(type, "shortcut_a")) {
        x = IN(0, 4);
        if (!x || !emit_shortcut(w, l, &a, x, out))
            goto nomem;
        goto done;
    } else {
        return dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "layer '%s' (%s) has no ONNX form in "
                              "this exporter", l->name, type);
    }
#undef IN
    if (!nd || w->oom)
        goto nomem;
done:
    if (w->oom || !(w->value[i] = last ? "output" : ar_str(w, out)))
        goto nomem;
    w->rank[i] = rank;
    return DTNN_OK;
nomem:
    return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory writing layer '%s' (%s) as ONNX",
                          l->name, type);
}

/* ---- graph and file --------------------------------------------------------------------- */

/* A float tensor value [N, d1, ...] whose first dimension is the symbol N. */
static Onnx__ValueInfoProto *value_info(onnx_writer *w, const char *name, const int *dims,
                                        int ndim)
{
    Onnx__ValueInfoProto *v = ar_alloc(w, sizeof *v);
    Onnx__TypeProto *tp = ar_alloc(w, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = ar_alloc(w, sizeof *tt);
    Onnx__TensorShapeProto *sh = ar_alloc(w, sizeof *sh);
    Onnx__TensorShapeProto__Dimension **d = ar_alloc(w, sizeof *d * (ndim + 1));
    if (!v || !tp || !tt || !sh || !d)
        return NULL;
    onnx__value_info_proto__init(v);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sh);
    for (int k = 0; k <= ndim; k++) {
        if (!(d[k] = ar_alloc(w, sizeof *d[k])))
            return NULL;
        onnx__tensor_shape_proto__dimension__init(d[k]);
        if (k == 0) {
            d[k]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            if (!(d[k]->dim_param = ar_str(w, "N")))
                return NULL;
        } else {
            d[k]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d[k]->dim_value = dims[k - 1];
        }
    }
    sh->n_dim = (size_t)ndim + 1;
    sh->dim = d;
    tt->has_elem_type = 1;
    tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tt->shape = sh;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    v->type = tp;
    return (v->name = ar_str(w, name)) ? v : NULL;
}

/* The IR version that came with each opset's ONNX release (onnx/docs/Versioning.md): 1.6
 * opset 11 IR 6, 1.7-1.9 opsets 12-14 IR 7, 1.10-1.12 opsets 15-17 IR 8. A checker refuses a
 * file whose IR is newer than its own, so the oldest that has the opset is written. */
static int64_t ir_version(int opset) { return opset <= 11 ? 6 : opset <= 14 ? 7 : 8; }

/* protobuf-c streams the packed message through this, straight into the file. */
typedef struct {
    ProtobufCBuffer base;
    FILE *fp;
    int failed;
} file_buffer;

static void file_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
    file_buffer *fb = (file_buffer *)b;
    if (!fb->failed && len && fwrite(data, 1, len, fb->fp) != len)
        fb->failed = errno ? errno : EIO;
}

/* Writes the model through the atomic writer (core/atomic_file.h): a failed export leaves any
 * older file in place. */
static dtnn_status write_model(const Onnx__ModelProto *mp, const char *path, dtnn_error *err)
{
    atomic_file out;
    dtnn_status st = atomic_file_begin(&out, path, "ONNX file", err);
    if (st)
        return st;
    file_buffer fb = {{file_append}, out.fp, 0};
    errno = 0;
    onnx__model_proto__pack_to_buffer(mp, &fb.base);
    if (fb.failed) {
        atomic_file_abort(&out);
        return dtnn_error_set(err, DTNN_ERR_IO, "cannot write the ONNX file '%s': %s (nothing "
                              "was replaced)", path, strerror(fb.failed));
    }
    return atomic_file_commit(&out, err);
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
    w.value = ar_alloc(&w, sizeof(char *) * (m->n_layers + 1));
    w.rank = ar_alloc(&w, sizeof(int) * (m->n_layers + 1));
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
        in = value_info(&w, "input", in_dims, 3);
        out = value_info(&w, "output", out_dims, w.rank[m->n_layers - 1] == 4 ? 3 : 1);
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
        mp.ir_version = ir_version(opset);
        mp.n_opset_import = 1;
        mp.opset_import = &osp;
        mp.producer_name = "dtnn";
        mp.graph = &g;
        st = write_model(&mp, path, err);
    }
    while (w.blocks) {
        arena_block *next = w.blocks->next;
        free(w.blocks);
        w.blocks = next;
    }
    return st;
}
