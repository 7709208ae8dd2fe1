/*
 * onnx_import.h — what the two halves of the ONNX importer share: onnx_import.c reads the file
 * (protobuf-c), keeps the graph's values and the dtnn layers they become, and writes the model
 * text and the weights; onnx_import_ops.c turns each operator into layers or folded constants.
 * Internal to the library.
 */
#ifndef DTNN_ONNX_IMPORT_H
#define DTNN_ONNX_IMPORT_H

#include <stdint.h>

#include "../core/name_index.h"
#include "onnx.pb-c.h"

#include "dtnn.h"

enum { IMP_LAYER = 0, IMP_CONST = 1 };
/* Where a tensor of any rank keeps the batch (onnx_import_tensor.c). */
enum { IMP_GEN_BATCH = 1, IMP_GEN_MERGED = 2, IMP_GEN_LEAD = 3 };
enum { IMP_MAX_DIMS = 8, IMP_MAX_IN = 16, IMP_MAX_BIND = 4, IMP_MAX_JOIN = 256 };
/* A sample's dims of a tensor of any rank: the permute layer's limit (backend.h) */
enum { IMP_SAMPLE_DIMS = 6 };

/* One ONNX value: a layer's output (or the graph input) or a constant tensor. */
typedef struct {
    const char *name;           /* points into the unpacked proto */
    int kind;                   /* IMP_LAYER or IMP_CONST */
    /* IMP_LAYER: dtnn values are [N, c, h, w]; rank 2 means [N, c] with h = w = 1, rank 3
     * [N, c, h] with w = 1, rank 5 [N, groups, c / groups, h, w] (the radix of a split
     * attention as its own axis over the same memory; the ops that take it ask with
     * IMP_ALLOW_GROUPS) */
    int layer;                  /* index into imp.l, -1: the graph input */
    int rank;
    int c, h, w;
    int pad_h, pad_w;           /* a zero Pad waiting for the Conv that absorbs it */
    int nhwc;                   /* a Transpose [0, 2, 3, 1] of a layer's output: followed only
                                 * into LayerNormalization over the last axis and back */
    int groups;                 /* rank 5: the size of axis 1 */
    int gen;                    /* 0, or a tensor of any rank: IMP_GEN_*, each sample's dims sd
                                 * (onnx_import_tensor.c), the layer's C x H x W from them */
    int nsd;
    int sd[IMP_SAMPLE_DIMS];
    /* IMP_CONST: float32 (f) or integer (i, int32 and int64 both) */
    int is_float;
    int ndim;
    int64_t dims[IMP_MAX_DIMS];
    size_t count;
    float *f;
    int64_t *i;
} imp_value;

/* A weight of a layer: tensor "<layer>.<suffix>" gets constant `value` (transposed: a 2-D
 * [in, out] MatMul or Gemm transB=0 matrix into linear's [out, in]). */
typedef struct {
    char suffix[24];
    int value;
    int transpose;
} imp_bind;

typedef struct {
    char type[24];
    char name[96];
    char opts[320];             /* "key = value\n" lines of the model file */
    int in[IMP_MAX_IN];         /* value indices */
    int n_in;
    int out;                    /* the value of its output */
    imp_bind bind[IMP_MAX_BIND];
    int n_bind;
    int outputs, bias;          /* linear: filled in late (MatMul + Add sets the bias) */
    int filters, stride, offset; /* shortcut_a: a channel Pad after its Slice widens it */
} imp_layer;

typedef struct {
    const char *path;
    Onnx__ModelProto *mp;
    int opset;
    int64_t batch;              /* what Shape reports for N */
    imp_value *v;
    int n_v, cap_v;
    imp_layer *l;
    int n_l, cap_l;
    /* By name (core/name_index.h), so a graph of any size loads in linear time: the values,
     * the layers' dtnn names, the initializers, and the names nodes and graph outputs use
     * (uses_name, with how often each is used in uses_count). */
    name_index value_index, layer_index, init_index, uses_index;
    const char **uses_name;
    int *uses_count;
    int n_uses;
} imp;

/* "PATH: node 'NAME' (OP): message"; returns err->code. */
dtnn_status imp_fail(imp *p, const Onnx__NodeProto *nd, dtnn_status code, dtnn_error *err,
                     const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* ONNX's name of a TensorProto data type ("UINT8"). */
const char *imp_type_name(int dt);
const Onnx__AttributeProto *imp_attr(const Onnx__NodeProto *nd, const char *name);
int64_t imp_attr_int(const Onnx__NodeProto *nd, const char *name, int64_t dflt);
float imp_attr_float(const Onnx__NodeProto *nd, const char *name, float dflt);
/* Copies up to max ints; returns how many the attribute has (0 when absent). */
/* Axis a (negative: from the end) of a value of that rank, or -1 outside it. */
int imp_axis(int64_t a, int rank);
int imp_attr_ints(const Onnx__NodeProto *nd, const char *name, int64_t *out, int max);
/* The first attribute of nd not in the NULL-terminated list, or NULL. */
const char *imp_attr_unknown(const Onnx__NodeProto *nd, const char *const *known);

/* Input k of nd: a value index; -1 (with err) when missing or unknown. imp_in_opt gives -1
 * without an error for an absent optional input and -2 (with err) for an unknown name. */
int imp_in(imp *p, const Onnx__NodeProto *nd, int k, dtnn_error *err);
int imp_in_opt(imp *p, const Onnx__NodeProto *nd, int k, dtnn_error *err);
/* Input k, which must be a layer value (allow_pad: a pending Pad is fine) or a constant. */
/* imp_in_layer's allow, bits: 1 a zero Pad awaiting its Conv, IMP_ALLOW_NHWC a channels-last
 * view, IMP_ALLOW_GROUPS a rank-5 value. */
#define IMP_ALLOW_NHWC 2
#define IMP_ALLOW_GROUPS 4
#define IMP_ALLOW_GEN 8
int imp_in_layer(imp *p, const Onnx__NodeProto *nd, int k, int allow_pad, dtnn_error *err);
int imp_in_const(imp *p, const Onnx__NodeProto *nd, int k, dtnn_error *err);
/* Layer value X's ONNX dims for `batch` (rank 2 to 5); returns its rank. */
int imp_layer_dims(const imp_value *X, int64_t batch, int64_t *dims);
/* Constant input k as up to max integers: how many, or -1 (with err). */
int imp_const_ints(imp *p, const Onnx__NodeProto *nd, int k, int64_t *out, int max,
                   dtnn_error *err);

/* A new value for output k of nd; -1 (with err) on a duplicate name or no memory. */
int imp_out(imp *p, const Onnx__NodeProto *nd, int k, dtnn_error *err);
/* Output 0 of nd as a view of value src (same layer, new rank/shape); -1 on error. */
int imp_out_alias(imp *p, const Onnx__NodeProto *nd, int src, dtnn_error *err);
/* A new layer for nd, named after the weight initializer `weight` when it is "PREFIX.weight",
 * else after the node; its output value (output 0) gets the shape given. -1 on error. */
int imp_layer_new(imp *p, const Onnx__NodeProto *nd, const char *type, const char *weight,
                  const int *ins, int n_in, int rank, int c, int h, int w, dtnn_error *err);
/* The same for a layer whose output is no ONNX value (the first part of a split join). */
int imp_layer_inner(imp *p, const Onnx__NodeProto *nd, const char *type, const int *ins,
                    int n_in, int rank, int c, int h, int w, dtnn_error *err);
/* A layer whose output is the node's output k, for a node with several used outputs (Split). */
int imp_layer_output(imp *p, const Onnx__NodeProto *nd, int k, const char *type,
                     const int *ins, int n_in, int rank, int c, int h, int w, dtnn_error *err);
void imp_opt(imp_layer *l, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int imp_bind_add(imp_layer *l, const char *suffix, int value, int transpose);

/* A new value called name ("" for none); -1 (with err) on a duplicate name or no memory. */
int imp_value_new(imp *p, const char *name, dtnn_error *err);
/* The value called name, or -1. */
int imp_value_of(const imp *p, const char *name);
/* A value no node names (scratch constants, the inner layers of a split join). */
int imp_value_inner(imp *p, dtnn_error *err);
/* Makes value `out` (already created) a constant with these dims; data zeroed. */
dtnn_status imp_const_alloc(imp *p, int out, int is_float, const int64_t *dims, int ndim,
                            dtnn_error *err);
dtnn_status imp_const_from_tensor(imp *p, int out, const Onnx__TensorProto *t,
                                  const char *what, dtnn_error *err);

/* Whether a graph initializer has this name. */
int imp_is_initializer(const imp *p, const char *name);
/* How many node inputs and graph outputs name this value. */
int imp_uses(const imp *p, const char *name);

/* The reshaping, padding and constant operators (onnx_import_shape.c). */
typedef dtnn_status (*op_fn)(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
dtnn_status op_flatten(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
dtnn_status op_reshape(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
dtnn_status op_squeeze(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
dtnn_status op_identity(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
dtnn_status op_constant(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
dtnn_status op_shape(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
dtnn_status op_gather(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
dtnn_status op_cast(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
dtnn_status op_pad(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
dtnn_status op_slice(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
dtnn_status op_split(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
dtnn_status op_reduce_mean(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
dtnn_status op_reduce_sum(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
dtnn_status op_reduce_l2(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
dtnn_status op_expand(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
dtnn_status op_resize(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
dtnn_status op_layernorm(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
dtnn_status op_batchnorm(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
/* Input k of nd as a constant of n float32 values (its value index), or -1 with err set. */
int imp_const_floats(imp *p, const Onnx__NodeProto *nd, int k, size_t n, dtnn_error *err);
/* Add (and Sum), Mul, Sub, Div and Concat (onnx_import_joins.c). */
dtnn_status op_add(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
dtnn_status op_binary(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
dtnn_status op_pow(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
dtnn_status op_concat(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
/* Activations and normalisations written as arithmetic, fused into one layer
 * (onnx_import_fuse.c): for a Mul node of layer values ins, x * Sigmoid(x) into a silu; for a
 * Mul of layer value m by the constant half, GELU's chain into a gelu; for an Add of layer
 * value x and constant b, LayerNorm's chain into a layernorm. 1 fused (nd's output made), 0
 * not that pattern, -1 error. */
int imp_fuse_silu(imp *p, const Onnx__NodeProto *nd, const int ins[2], dtnn_error *err);
int imp_fuse_gelu(imp *p, const Onnx__NodeProto *nd, int m, int half, dtnn_error *err);
int imp_fuse_layernorm(imp *p, const Onnx__NodeProto *nd, int x, int b, dtnn_error *err);
/* Constant folding (onnx_import_fold.c). */
dtnn_status op_constant_of_shape(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
dtnn_status op_transpose(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
dtnn_status fold_reshape(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
dtnn_status fold_slice(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);
/* Add (or Sum of two), Sub, Mul or Div (nd's operator) of the constants a and b, broadcast as
 * NumPy: the node's output becomes a constant. */
dtnn_status fold_binary(imp *p, const Onnx__NodeProto *nd, int a, int b, dtnn_error *err);
dtnn_status fold_reduce(imp *p, const Onnx__NodeProto *nd, int x, int op, const int64_t *axes,
                        int na, int keep, dtnn_error *err);
dtnn_status fold_batchnorm(imp *p, const Onnx__NodeProto *nd, int x, dtnn_error *err);
/* Ceil, Floor, Neg, Abs, Sqrt, Relu, Sigmoid, Tanh, Erf and Clip of constant x, folded (in
 * double, rounded to x's type; integers for the ones exact on them): shape arithmetic such
 * as TF-"same" padding, computed from Shape at export. */
dtnn_status fold_unary(imp *p, const Onnx__NodeProto *nd, int x, dtnn_error *err);

/* Tensors of any rank (onnx_import_tensor.c). imp_gen_set makes v such a value (its C, H, W
 * and rank from sd), imp_gen_dims gives its ONNX dims. The others are the operators on them:
 * 1 done, 0 not a form they take (the caller refuses), -1 error (err set). */
void imp_gen_set(imp_value *v, int mode, const int *sd, int nsd);
int imp_gen_dims(const imp_value *v, int64_t batch, int64_t *dims);
int imp_gen_reshape(imp *p, const Onnx__NodeProto *nd, int x, const int64_t *t, int r,
                    dtnn_error *err);
/* A channels-last view's data in its ONNX order [H, W, C] (a permute layer of nd, its output
 * no ONNX value): the new value, or -1 (err set). */
int imp_gen_from_nhwc(imp *p, const Onnx__NodeProto *nd, int x, dtnn_error *err);
int imp_gen_transpose(imp *p, const Onnx__NodeProto *nd, int x, const int64_t *perm, int n,
                      dtnn_error *err);
int imp_gen_split(imp *p, const Onnx__NodeProto *nd, int x, const int64_t *sizes, int outs,
                  dtnn_error *err);
int imp_gen_squeeze_lead(imp *p, const Onnx__NodeProto *nd, int x, dtnn_error *err);
/* Split over the last axis (EfficientFormer's q, k, v): the last axis made channels by a
 * permute, channel slices, each permuted back. */
int imp_gen_split_last(imp *p, const Onnx__NodeProto *nd, int x, const int64_t *sizes, int outs,
                       dtnn_error *err);
/* Layer value x as a tensor: an [N, C, L] (dtnn's C x L x 1) through an inner reshape to
 * 1 x C x L, whose last axis is L; any other value is returned as it is. -1 on error. */
int imp_gen_view(imp *p, const Onnx__NodeProto *nd, int x, dtnn_error *err);
/* ReduceMean / ReduceSum (op "mean" / "sum") over the tokens of [N, T, F], keepdims 0. */
int imp_gen_token_reduce(imp *p, const Onnx__NodeProto *nd, int x, const char *op,
                         dtnn_error *err);
int imp_gen_gather(imp *p, const Onnx__NodeProto *nd, int x, int64_t index, dtnn_error *err);
dtnn_status imp_gen_matmul(imp *p, const Onnx__NodeProto *nd, int a, int b, dtnn_error *err);
/* dst takes src's rank and layout marks (channels-last, groups, any-rank dims). */
void imp_layout_copy(imp_value *dst, const imp_value *src);

/* Converts node nd (onnx_import_ops.c). */
dtnn_status imp_node(imp *p, const Onnx__NodeProto *nd, dtnn_error *err);

#endif
