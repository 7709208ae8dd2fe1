/*
 * onnx_import.c — reads an ONNX model file (opsets 9 to 17) into dtnn: the graph becomes the
 * plain-text model format of model_file.c (so `dtnn import` can write it and the model is built
 * exactly as a model file would be), the initializers become the weights. The file is unpacked
 * by protobuf-c with the structs protoc-c generates at build time from Debian's onnx.proto;
 * nothing is parsed by hand.
 *
 * Weights are found by the graph's wiring, not by name: each layer records which initializer
 * feeds which of its tensors, so folded batch norms ("onnx::Conv_123") load as well as PyTorch's
 * state_dict names. Layers are named after their weight ("conv1.weight" -> layer "conv1") where
 * that name is a valid, unused layer name, so dtnn's tensor names are the initializer names;
 * a weight torch.onnx renamed (a batch norm folded into its conv) takes the module's name from
 * the node's scope ("/layer1/layer1.0/conv1/Conv" -> "layer1.0.conv1").
 *
 * Not done: external data (models over 2 GiB), more than one graph input or output, operators
 * outside the list in onnx_import_ops.c (those fail naming the node, never approximated).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/file_input.h"
#include "proto_bounds.h"
#include "onnx_import.h"

#include "../core/internal.h"

enum { MAX_ONNX_FILE = 1 << 30 };

dtnn_status imp_fail(imp *p, const Onnx__NodeProto *nd, dtnn_status code, dtnn_error *err,
                     const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (nd)
        return dtnn_error_set(err, code, "%s: node '%s' (%s): %s", p->path,
                              nd->name ? nd->name : "", nd->op_type ? nd->op_type : "", msg);
    return dtnn_error_set(err, code, "%s: %s", p->path, msg);
}

/* ---- attributes ------------------------------------------------------------------------- */

const Onnx__AttributeProto *imp_attr(const Onnx__NodeProto *nd, const char *name)
{
    for (size_t i = 0; i < nd->n_attribute; i++)
        if (nd->attribute[i]->name && !strcmp(nd->attribute[i]->name, name))
            return nd->attribute[i];
    return NULL;
}

int64_t imp_attr_int(const Onnx__NodeProto *nd, const char *name, int64_t dflt)
{
    const Onnx__AttributeProto *a = imp_attr(nd, name);
    return a && a->has_i ? a->i : dflt;
}

float imp_attr_float(const Onnx__NodeProto *nd, const char *name, float dflt)
{
    const Onnx__AttributeProto *a = imp_attr(nd, name);
    return a && a->has_f ? a->f : dflt;
}

int imp_axis(int64_t a, int rank)
{
    if (a < 0)
        a += rank;
    return a < 0 || a >= rank ? -1 : (int)a;
}

int imp_attr_ints(const Onnx__NodeProto *nd, const char *name, int64_t *out, int max)
{
    const Onnx__AttributeProto *a = imp_attr(nd, name);
    if (!a)
        return 0;
    for (size_t i = 0; i < a->n_ints && (int)i < max; i++)
        out[i] = a->ints[i];
    return a->n_ints > (size_t)1 << 20 ? 1 << 20 : (int)a->n_ints;
}

const char *imp_attr_unknown(const Onnx__NodeProto *nd, const char *const *known)
{
    for (size_t i = 0; i < nd->n_attribute; i++) {
        const char *n = nd->attribute[i]->name ? nd->attribute[i]->name : "";
        int ok = 0;
        for (const char *const *k = known; *k && !ok; k++)
            ok = !strcmp(*k, n);
        if (!ok)
            return n;
    }
    return NULL;
}

/* ---- values ----------------------------------------------------------------------------- */

static int value_find(const imp *p, const char *name)
{
    return name[0] ? name_index_find(&p->value_index, name) : -1;
}

int imp_value_new(imp *p, const char *name, dtnn_error *err)
{
    /* "" names the inner values of a split join, which no node refers to. */
    if (name[0] && value_find(p, name) >= 0) {
        imp_fail(p, NULL, DTNN_ERR_FORMAT, err, "value '%s' is defined twice", name);
        return -1;
    }
    if (p->n_v == p->cap_v) {
        int cap = p->cap_v ? 2 * p->cap_v : 256;
        imp_value *nv = realloc(p->v, sizeof *nv * (size_t)cap);
        if (!nv) {
            dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory importing '%s'", p->path);
            return -1;
        }
        p->v = nv;
        p->cap_v = cap;
    }
    imp_value *v = &p->v[p->n_v];
    memset(v, 0, sizeof *v);
    v->name = name;
    v->layer = -1;
    if (name[0] && name_index_add(&p->value_index, p->n_v)) {
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory importing '%s'", p->path);
        return -1;
    }
    return p->n_v++;
}

int imp_value_inner(imp *p, dtnn_error *err) { return imp_value_new(p, "", err); }

int imp_value_of(const imp *p, const char *name) { return value_find(p, name); }

int imp_in_opt(imp *p, const Onnx__NodeProto *nd, int k, dtnn_error *err)
{
    if ((size_t)k >= nd->n_input || !nd->input[k] || !nd->input[k][0])
        return -1;
    int i = value_find(p, nd->input[k]);
    if (i < 0) {
        imp_fail(p, nd, DTNN_ERR_FORMAT, err, "input %d '%s' is not produced by an earlier "
                 "node, an initializer or the graph input", k, nd->input[k]);
        return -2;
    }
    return i;
}

int imp_in(imp *p, const Onnx__NodeProto *nd, int k, dtnn_error *err)
{
    int i = imp_in_opt(p, nd, k, err);
    if (i == -1)
        imp_fail(p, nd, DTNN_ERR_FORMAT, err, "input %d is missing", k);
    return i < 0 ? -1 : i;
}

int imp_in_layer(imp *p, const Onnx__NodeProto *nd, int k, int allow_pad, dtnn_error *err)
{
    int i = imp_in(p, nd, k, err);
    if (i < 0)
        return -1;
    if (p->v[i].kind != IMP_LAYER) {
        imp_fail(p, nd, DTNN_ERR_UNSUPPORTED, err, "input %d '%s' is a constant; dtnn takes "
                 "only computed values there", k, nd->input[k]);
        return -1;
    }
    if (p->v[i].nhwc && !(allow_pad & IMP_ALLOW_NHWC)) {
        imp_fail(p, nd, DTNN_ERR_UNSUPPORTED, err, "input %d '%s' is a Transpose of a computed "
                 "value to channels-last, which dtnn follows only into LayerNormalization over "
                 "the last axis and the Transpose back", k, nd->input[k]);
        return -1;
    }
    if (p->v[i].gen && !(allow_pad & IMP_ALLOW_GEN)) {
        int64_t d[IMP_MAX_DIMS];
        char shown[96] = "";
        const int r = imp_gen_dims(&p->v[i], p->batch, d);
        for (int a = 0, n = 0; a < r; a++)
            n += snprintf(shown + n, sizeof shown - (size_t)n, "%s%lld", a ? ", " : "",
                          (long long)d[a]);
        imp_fail(p, nd, DTNN_ERR_UNSUPPORTED, err, "input %d '%s' is a tensor [%s] (batch %lld) "
                 "that dtnn takes only into Reshape, Transpose, Split, MatMul, Softmax and "
                 "LayerNormalization over the last axis and element-wise operators", k,
                 nd->input[k], shown, (long long)p->batch);
        return -1;
    }
    if (p->v[i].rank == 5 && !p->v[i].gen && !(allow_pad & IMP_ALLOW_GROUPS)) {
        imp_fail(p, nd, DTNN_ERR_UNSUPPORTED, err, "input %d '%s' is 5-D [N, %d, %d, %d, %d], "
                 "which dtnn takes only as channel groups: into Reshape, element-wise "
                 "operators, Concat (axis 1), ReduceSum / ReduceMean and Softmax over axis 1",
                 k, nd->input[k], p->v[i].groups, p->v[i].c / p->v[i].groups, p->v[i].h,
                 p->v[i].w);
        return -1;
    }
    if (!(allow_pad & 1) && (p->v[i].pad_h || p->v[i].pad_w)) {
        imp_fail(p, nd, DTNN_ERR_UNSUPPORTED, err, "input %d '%s' comes from a spatial Pad, "
                 "which dtnn supports only directly before a Conv", k, nd->input[k]);
        return -1;
    }
    return i;
}

void imp_layout_copy(imp_value *dst, const imp_value *src)
{
    dst->rank = src->rank;
    dst->nhwc = src->nhwc;
    dst->groups = src->groups;
    dst->gen = src->gen;
    dst->nsd = src->nsd;
    memcpy(dst->sd, src->sd, sizeof dst->sd);
}

int imp_layer_dims(const imp_value *X, int64_t batch, int64_t *dims)
{
    if (X->gen)
        return imp_gen_dims(X, batch, dims);
    const int64_t d4[4] = {batch, X->c, X->h, X->w};
    if (X->rank == 5) {
        const int64_t d5[5] = {batch, X->groups, X->c / X->groups, X->h, X->w};
        memcpy(dims, d5, sizeof d5);
    } else {
        memcpy(dims, d4, sizeof(int64_t) * (size_t)X->rank);
    }
    return X->rank;
}

int imp_in_const(imp *p, const Onnx__NodeProto *nd, int k, dtnn_error *err)
{
    int i = imp_in(p, nd, k, err);
    if (i >= 0 && p->v[i].kind != IMP_CONST) {
        imp_fail(p, nd, DTNN_ERR_UNSUPPORTED, err, "input %d '%s' must be a constant (an "
                 "initializer or folded from constants) for dtnn", k, nd->input[k]);
        return -1;
    }
    return i;
}

int imp_const_ints(imp *p, const Onnx__NodeProto *nd, int k, int64_t *out, int max,
                   dtnn_error *err)
{
    int i = imp_in_const(p, nd, k, err);
    if (i < 0)
        return -1;
    const imp_value *v = &p->v[i];
    if (v->is_float || v->count > (size_t)max) {
        imp_fail(p, nd, DTNN_ERR_FORMAT, err, "input %d '%s' must be at most %d integers", k,
                 v->name, max);
        return -1;
    }
    for (size_t j = 0; j < v->count; j++)
        out[j] = v->i[j];
    return (int)v->count;
}

int imp_out(imp *p, const Onnx__NodeProto *nd, int k, dtnn_error *err)
{
    if ((size_t)k >= nd->n_output || !nd->output[k] || !nd->output[k][0]) {
        imp_fail(p, nd, DTNN_ERR_FORMAT, err, "output %d is missing", k);
        return -1;
    }
    /* dtnn computes only the first output of an operator; another one must be unused. */
    for (size_t j = 1; j < nd->n_output; j++) {
        if (nd->output[j] && nd->output[j][0] && imp_uses(p, nd->output[j]) > 0) {
            imp_fail(p, nd, DTNN_ERR_UNSUPPORTED, err, "output %zu '%s' is used, but dtnn "
                     "computes only the first output", j, nd->output[j]);
            return -1;
        }
    }
    return imp_value_new(p, nd->output[k], err);
}

int imp_out_alias(imp *p, const Onnx__NodeProto *nd, int src, dtnn_error *err)
{
    int o = imp_out(p, nd, 0, err);
    if (o < 0)
        return -1;
    imp_value *v = &p->v[o];
    const char *name = v->name;
    *v = p->v[src];
    v->name = name;
    v->f = NULL;    /* a constant alias shares no buffer: constants are copied by callers */
    v->i = NULL;
    return o;
}

dtnn_status imp_const_alloc(imp *p, int out, int is_float, const int64_t *dims, int ndim,
                            dtnn_error *err)
{
    imp_value *v = &p->v[out];
    if (ndim < 0 || ndim > IMP_MAX_DIMS)
        return imp_fail(p, NULL, DTNN_ERR_UNSUPPORTED, err, "constant '%s' has %d dimensions "
                        "(dtnn takes up to %d)", v->name, ndim, IMP_MAX_DIMS);
    size_t count = 1;
    for (int d = 0; d < ndim; d++) {
        if (dims[d] < 0 || dims[d] > (1 << 30) || (dims[d] && count > ((size_t)1 << 31) /
                                                                      (size_t)dims[d]))
            return imp_fail(p, NULL, DTNN_ERR_FORMAT, err, "constant '%s' has a bad "
                            "dimension %lld", v->name, (long long)dims[d]);
        count *= (size_t)dims[d];
        v->dims[d] = dims[d];
    }
    v->kind = IMP_CONST;
    v->ndim = ndim;
    v->count = count;
    v->is_float = is_float;
    v->f = is_float ? calloc(count ? count : 1, sizeof(float)) : NULL;
    v->i = is_float ? NULL : calloc(count ? count : 1, sizeof(int64_t));
    if (!v->f && !v->i)
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory reading constant '%s'",
                              v->name);
    return DTNN_OK;
}

static uint64_t get_le(const uint8_t *s, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)s[i] << (8 * i);
    return v;
}

const char *imp_type_name(int dt)
{
    const ProtobufCEnumValue *v =
        protobuf_c_enum_descriptor_get_value(&onnx__tensor_proto__data_type__descriptor, dt);
    return v ? v->name : "unknown";
}

dtnn_status imp_const_from_tensor(imp *p, int out, const Onnx__TensorProto *t,
                                  const char *what, dtnn_error *err)
{
    const int dt = t->has_data_type ? t->data_type : 0;
    const int is_float = dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    /* A bool (Dropout's training_mode) is an integer 0 / 1: one byte raw, else int32_data. */
    const int is_bool = dt == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    const int bytes = dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ||
                              dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT32 ? 4
                      : dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 ? 8 : is_bool ? 1 : 0;
    if (!bytes)
        return imp_fail(p, NULL, DTNN_ERR_UNSUPPORTED, err, "%s '%s' has data type %s; dtnn "
                        "reads float32, int32, int64 and bool tensors", what, p->v[out].name,
                        imp_type_name(dt));
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return imp_fail(p, NULL, DTNN_ERR_UNSUPPORTED, err, "%s '%s' keeps its data in an "
                        "external file, which dtnn does not read", what, p->v[out].name);
    if (t->segment)
        return imp_fail(p, NULL, DTNN_ERR_UNSUPPORTED, err, "%s '%s' is segmented", what,
                        p->v[out].name);
    if (t->n_dims > IMP_MAX_DIMS)
        return imp_fail(p, NULL, DTNN_ERR_UNSUPPORTED, err, "%s '%s' has %zu dimensions", what,
                        p->v[out].name, t->n_dims);
    /* The data must be there before anything is allocated for it. */
    size_t n = 1;
    for (size_t d = 0; d < t->n_dims; d++) {
        if (t->dims[d] < 0 || t->dims[d] > (1 << 30) ||
            (t->dims[d] && n > ((size_t)1 << 31) / (size_t)t->dims[d]))
            return imp_fail(p, NULL, DTNN_ERR_FORMAT, err, "%s '%s' has a bad dimension %lld",
                            what, p->v[out].name, (long long)t->dims[d]);
        n *= (size_t)t->dims[d];
    }
    size_t have = t->has_raw_data ? t->raw_data.len / (size_t)bytes
                  : dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ? t->n_float_data
                  : dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 ? t->n_int64_data
                                                               : t->n_int32_data;
    if (have != n || (t->has_raw_data && t->raw_data.len != n * (size_t)bytes))
        return imp_fail(p, NULL, DTNN_ERR_FORMAT, err, "%s '%s' holds %zu values, its "
                        "dimensions say %zu", what, p->v[out].name, have, n);
    dtnn_status st = imp_const_alloc(p, out, is_float, t->dims, (int)t->n_dims, err);
    if (st)
        return st;
    imp_value *v = &p->v[out];
    for (size_t k = 0; k < n; k++) {
        if (t->has_raw_data) {
            uint64_t b = get_le(t->raw_data.data + k * (size_t)bytes, bytes);
            if (is_float) {
                uint32_t u = (uint32_t)b;
                memcpy(&v->f[k], &u, 4);
            } else {
                v->i[k] = bytes == 4 ? (int64_t)(int32_t)(uint32_t)b
                          : is_bool ? (int64_t)(b != 0) : (int64_t)b;
            }
        } else if (is_float) {
            v->f[k] = t->float_data[k];
        } else {
            v->i[k] = dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 ? t->int64_data[k]
                      : is_bool ? (int64_t)(t->int32_data[k] != 0) : t->int32_data[k];
        }
    }
    return DTNN_OK;
}

/* ---- the graph -------------------------------------------------------------------------- */

static void imp_free(imp *p)
{
    for (int i = 0; i < p->n_v; i++) {
        free(p->v[i].f);
        free(p->v[i].i);
    }
    free(p->v);
    free(p->l);
    name_index_free(&p->value_index);
    name_index_free(&p->layer_index);
    name_index_free(&p->init_index);
    name_index_free(&p->uses_index);
    free(p->uses_name);
    free(p->uses_count);
    if (p->mp)
        onnx__model_proto__free_unpacked(p->mp, NULL);
}

static Onnx__ModelProto *read_proto(const char *path, dtnn_error *err)
{
    FILE *f;
    if (file_open_input(path, "ONNX file", &f, NULL, err))
        return NULL;
    size_t cap = 1 << 20, n = 0;
    uint8_t *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap || cap >= MAX_ONNX_FILE)
            break;
        uint8_t *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad || n >= MAX_ONNX_FILE) {
        free(buf);
        dtnn_error_set(err, buf ? DTNN_ERR_IO : DTNN_ERR_NOMEM, "cannot read ONNX file '%s'%s",
                       path, n >= MAX_ONNX_FILE ? ": larger than 1 GiB" : "");
        return NULL;
    }
    int depth = 0;
    proto_bounds_result bounds = proto_check_depth(buf, n, PROTO_MAX_DEPTH, &depth);
    if (bounds != PROTO_BOUNDS_OK) {
        free(buf);
        if (bounds == PROTO_BOUNDS_TOO_DEEP)
            dtnn_error_set(err, DTNN_ERR_FORMAT, "ONNX file '%s' nests its messages more than "
                           "%d levels deep (graphs inside attributes inside nodes ...): "
                           "refused before decoding, which recurses once per level", path,
                           PROTO_MAX_DEPTH);
        else
            dtnn_error_set(err, DTNN_ERR_FORMAT, "ONNX file '%s' is built so that checking its "
                           "nesting would take more than %d passes over it: refused", path,
                           2 * (PROTO_MAX_DEPTH + 2));
        return NULL;
    }
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, n, buf);
    free(buf);
    if (!mp)
        dtnn_error_set(err, DTNN_ERR_FORMAT, "'%s' is not an ONNX model file (protobuf "
                       "ModelProto does not decode)", path);
    return mp;
}

int imp_is_initializer(const imp *p, const char *name)
{
    return name_index_find(&p->init_index, name) >= 0;
}

/* The opset of the default domain, the graph input [N, C, H, W] and the initializers. */
static dtnn_status graph_start(imp *p, dtnn_error *err)
{
    const Onnx__ModelProto *mp = p->mp;
    p->opset = -1;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        if (!o->domain || !o->domain[0] || !strcmp(o->domain, "ai.onnx"))
            p->opset = o->has_version ? (int)o->version : -1;
    }
    /* Below 9, imp_node checks each operator against its definition at opset 9. */
    if (p->opset < 1 || p->opset > 17)
        return imp_fail(p, NULL, DTNN_ERR_UNSUPPORTED, err, "operator set %d of the default "
                        "domain; dtnn imports opsets 9 to 17 (and older ones where an "
                        "operator is as in opset 9)", p->opset);
    const Onnx__GraphProto *g = mp->graph;
    if (!g)
        return imp_fail(p, NULL, DTNN_ERR_FORMAT, err, "the model has no graph");
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        if (!t->name || !t->name[0])
            return imp_fail(p, NULL, DTNN_ERR_FORMAT, err, "initializer %zu has no name", i);
        int v = imp_value_new(p, t->name, err);
        if (v < 0 || imp_const_from_tensor(p, v, t, "initializer", err))
            return err->code;
    }
    const Onnx__ValueInfoProto *in = NULL;
    for (size_t i = 0; i < g->n_input; i++) {
        if (!g->input[i]->name || imp_is_initializer(p, g->input[i]->name))
            continue;
        if (in)
            return imp_fail(p, NULL, DTNN_ERR_UNSUPPORTED, err, "the graph has inputs '%s' and "
                            "'%s'; dtnn models take one", in->name, g->input[i]->name);
        in = g->input[i];
    }
    if (!in)
        return imp_fail(p, NULL, DTNN_ERR_FORMAT, err, "the graph has no input");
    const Onnx__TypeProto *tp = in->type;
    const Onnx__TensorShapeProto *sh =
        tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type
            ? tp->tensor_type->shape : NULL;
    if (!sh || !tp->tensor_type->has_elem_type)
        return imp_fail(p, NULL, DTNN_ERR_UNSUPPORTED, err, "graph input '%s' is not a tensor "
                        "of known type and shape", in->name);
    if (tp->tensor_type->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        return imp_fail(p, NULL, DTNN_ERR_UNSUPPORTED, err, "graph input '%s' has data type "
                        "%s; dtnn's models take float32", in->name,
                        imp_type_name((int)tp->tensor_type->elem_type));
    if (sh->n_dim < 2 || sh->n_dim > 4)
        return imp_fail(p, NULL, DTNN_ERR_UNSUPPORTED, err, "graph input '%s' has %zu "
                        "dimensions; dtnn's models take images [N, C, H, W], sequences "
                        "[N, C, L] or features [N, F]", in->name, sh->n_dim);
    /* [N, features] is dtnn's [N, features, 1, 1] and [N, C, L] its [N, C, L, 1]: the same
     * memory, on which element-wise layers, batch norm (per channel), channel concat and
     * flatten act as ONNX's operators do; convolutions and pools refuse rank 3. */
    int64_t d[4] = {0, 0, 1, 1};
    for (int k = 0; k < (int)sh->n_dim; k++) {
        const Onnx__TensorShapeProto__Dimension *dm = sh->dim[k];
        d[k] = dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
                   ? dm->dim_value : -1;
        if (k > 0 && (d[k] <= 0 || d[k] > 1 << 20))
            return imp_fail(p, NULL, DTNN_ERR_UNSUPPORTED, err, "graph input '%s': dimension "
                            "%d is not a fixed size; dtnn needs C, H and W", in->name, k);
    }
    p->batch = d[0] > 0 ? d[0] : 1;
    int v = imp_value_new(p, in->name, err);
    if (v < 0)
        return err->code;
    p->v[v].kind = IMP_LAYER;
    p->v[v].layer = -1;
    p->v[v].rank = (int)sh->n_dim;
    p->v[v].c = (int)d[1];
    p->v[v].h = (int)d[2];
    p->v[v].w = (int)d[3];
    return DTNN_OK;
}

int imp_uses(const imp *p, const char *name)
{
    int i = name_index_find(&p->uses_index, name);
    return i >= 0 ? p->uses_count[i] : 0;
}

static const char *value_key(const void *ctx, int id) { return ((const imp *)ctx)->v[id].name; }
static const char *layer_key(const void *ctx, int id) { return ((const imp *)ctx)->l[id].name; }
static const char *uses_key(const void *ctx, int id) { return ((const imp *)ctx)->uses_name[id]; }
static const char *init_key(const void *ctx, int id)
{
    return ((const imp *)ctx)->mp->graph->initializer[id]->name;
}

/* One name used as a node input or a graph output: counted. */
static int count_use(imp *p, const char *name)
{
    if (!name)
        return 0;
    int i = name_index_find(&p->uses_index, name);
    if (i >= 0) {
        p->uses_count[i]++;
        return 0;
    }
    p->uses_name[p->n_uses] = name;
    p->uses_count[p->n_uses] = 1;
    return name_index_add(&p->uses_index, p->n_uses++);
}

/* The indices over the decoded graph (see imp in onnx_import.h). */
static dtnn_status index_graph(imp *p, dtnn_error *err)
{
    const Onnx__GraphProto *g = p->mp->graph;
    size_t uses = g->n_output;
    for (size_t k = 0; k < g->n_node; k++)
        uses += g->node[k]->n_input;
    p->uses_name = malloc(sizeof *p->uses_name * (uses ? uses : 1));
    p->uses_count = malloc(sizeof *p->uses_count * (uses ? uses : 1));
    int bad = !p->uses_name || !p->uses_count;
    for (size_t k = 0; k < g->n_node && !bad; k++)
        for (size_t q = 0; q < g->node[k]->n_input && !bad; q++)
            bad = count_use(p, g->node[k]->input[q]);
    for (size_t k = 0; k < g->n_output && !bad; k++)
        bad = count_use(p, g->output[k]->name);
    /* The first initializer of a name is the one the importer takes. */
    for (size_t i = 0; i < g->n_initializer && !bad; i++)
        if (g->initializer[i]->name && !imp_is_initializer(p, g->initializer[i]->name))
            bad = name_index_add(&p->init_index, (int)i);
    if (bad)
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory importing '%s'", p->path);
    return DTNN_OK;
}

/* Reads path and converts its graph: on success p holds the layers and the constants. */
static dtnn_status convert(imp *p, const char *path, dtnn_error *err)
{
    memset(p, 0, sizeof *p);
    p->path = path;
    name_index_init(&p->value_index, value_key, p);
    name_index_init(&p->layer_index, layer_key, p);
    name_index_init(&p->init_index, init_key, p);
    name_index_init(&p->uses_index, uses_key, p);
    if (!(p->mp = read_proto(path, err)))
        return err->code;
    dtnn_status st = p->mp->graph ? index_graph(p, err) : DTNN_OK;
    if (!st)
        st = graph_start(p, err);
    if (st)
        return st;
    const Onnx__GraphProto *g = p->mp->graph;
    for (size_t n = 0; n < g->n_node; n++) {
        const Onnx__NodeProto *nd = g->node[n];
        if (!nd->op_type)
            return imp_fail(p, nd, DTNN_ERR_FORMAT, err, "the node has no op_type");
        if (nd->domain && nd->domain[0] && strcmp(nd->domain, "ai.onnx"))
            return imp_fail(p, nd, DTNN_ERR_UNSUPPORTED, err, "operator domain '%s' is not "
                            "supported (only the default ONNX domain)", nd->domain);
        if ((st = imp_node(p, nd, err)))
            return st;
    }
    if (g->n_output != 1 || !g->output[0]->name)
        return imp_fail(p, NULL, DTNN_ERR_UNSUPPORTED, err, "the graph has %zu outputs; dtnn "
                        "models have one", g->n_output);
    int o = value_find(p, g->output[0]->name);
    if (o < 0 || p->v[o].kind != IMP_LAYER || p->v[o].layer < 0)
        return imp_fail(p, NULL, DTNN_ERR_UNSUPPORTED, err, "graph output '%s' is not computed "
                        "by a layer", g->output[0]->name);
    if (p->v[o].layer != p->n_l - 1 || p->v[o].pad_h || p->v[o].pad_w || p->v[o].nhwc)
        return imp_fail(p, NULL, DTNN_ERR_UNSUPPORTED, err, "graph output '%s' is not the last "
                        "operator's result; dtnn's output is its last layer",
                        g->output[0]->name);
    if (p->v[o].gen && p->v[o].gen != IMP_GEN_BATCH)
        return imp_fail(p, NULL, DTNN_ERR_UNSUPPORTED, err, "graph output '%s' folds the batch "
                        "into another axis; dtnn's output holds each sample's values apart",
                        g->output[0]->name);
    return DTNN_OK;
}

/* Value i as a name in "inputs = ...". */
static const char *value_ref(const imp *p, int i)
{
    const imp_value *v = &p->v[i];
    return v->layer < 0 ? "input" : p->l[v->layer].name;
}

static char *model_text(const imp *p, dtnn_error *err)
{
    size_t cap = 4096 + (size_t)p->n_l * 1024, n = 0;
    char *s = malloc(cap);
    if (!s) {
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    const imp_value *in = NULL;
    for (int i = 0; i < p->n_v && !in; i++)
        if (p->v[i].kind == IMP_LAYER && p->v[i].layer < 0)
            in = &p->v[i];
    n += (size_t)snprintf(s + n, cap - n, "# imported from %s (ONNX opset %d)\n[input]\n"
                          "shape = %dx%dx%d\n", p->path, p->opset, in->c, in->h, in->w);
    for (int k = 0; k < p->n_l; k++) {
        const imp_layer *l = &p->l[k];
        n += (size_t)snprintf(s + n, cap - n, "[%s]\nname = %s\ninputs = ", l->type, l->name);
        for (int j = 0; j < l->n_in; j++)
            n += (size_t)snprintf(s + n, cap - n, "%s%s", j ? ", " : "", value_ref(p, l->in[j]));
        n += (size_t)snprintf(s + n, cap - n, "\n%s", l->opts);
        if (!strcmp(l->type, "linear"))
            n += (size_t)snprintf(s + n, cap - n, "outputs = %d\nbias = %s\n", l->outputs,
                                  l->bias ? "true" : "false");
        if (!strcmp(l->type, "shortcut_a"))
            n += (size_t)snprintf(s + n, cap - n, "filters = %d\nstride = %d\noffset = %d\n",
                                  l->filters, l->stride, l->offset);
    }
    return s;
}

char *dtnn_onnx_import_text(const char *path, dtnn_error *err)
{
    imp p;
    char *s = convert(&p, path, err) ? NULL : model_text(&p, err);
    imp_free(&p);
    return s;
}

dtnn_model *dtnn_onnx_import(const char *path, dtnn_error *err)
{
    char *s = dtnn_onnx_import_text(path, err);
    if (!s)
        return NULL;
    dtnn_model *m = dtnn_model_parse_string(s, path, err);
    free(s);
    return m;
}

static dtnn_status load_bind(imp *p, dtnn_model *m, const imp_layer *l, const imp_bind *b,
                             dtnn_error *err)
{
    char name[128];
    snprintf(name, sizeof name, "%s.%s", l->name, b->suffix);
    const dtnn_tensor_info *t = dtnn_model_tensor_by_name(m, name);
    const imp_value *v = &p->v[b->value];
    if (!t)
        return imp_fail(p, NULL, DTNN_ERR_ARG, err, "the model has no tensor '%s' for "
                        "initializer '%s': was it imported from this file?", name, v->name);
    if (t->dtype != DTNN_F32 || t->count != v->count)
        return imp_fail(p, NULL, DTNN_ERR_SHAPE, err, "initializer '%s' has %zu values, "
                        "tensor '%s' %zu", v->name, v->count, name, t->count);
    const float *src = v->f;
    float *tmp = NULL;
    if (b->transpose) {
        /* [in, out] -> [out, in] */
        const int64_t rows = v->dims[0], cols = v->dims[1];
        if (!(tmp = malloc(sizeof(float) * v->count)))
            return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++)
                tmp[c * rows + r] = v->f[r * cols + c];
        src = tmp;
    }
    /* dtnn_model_tensor_write refuses NaN and Inf unless the model allows them. */
    dtnn_status st = dtnn_model_tensor_write(m, t, src, err);
    free(tmp);
    if (st == DTNN_ERR_NONFINITE)
        imp_fail(p, NULL, st, err, "initializer '%s': %s", v->name, err->message);
    return st;
}

dtnn_status dtnn_onnx_load_weights(const char *path, dtnn_model *m, dtnn_error *err)
{
    imp p;
    dtnn_status st = convert(&p, path, err);
    for (int k = 0; !st && k < p.n_l; k++)
        for (int j = 0; !st && j < p.l[k].n_bind; j++)
            st = load_bind(&p, m, &p.l[k], &p.l[k].bind[j], err);
    imp_free(&p);
    return st;
}
