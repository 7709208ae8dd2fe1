/*
 * onnx_writer.c — onnx_writer.h's arena, initializers, nodes, attributes, rank changes and
 * file: ONNX messages as protoc-c generates them from Debian's onnx.proto (CMake: DTNN_ONNX),
 * packed by protobuf-c straight into the atomic writer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/atomic_file.h"
#include "onnx_writer.h"

void *onnxw_alloc(onnx_writer *w, size_t size)
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

char *onnxw_str(onnx_writer *w, const char *s)
{
    char *p = onnxw_alloc(w, strlen(s) + 1);
    if (p)
        strcpy(p, s);
    return p;
}

char *onnxw_printf(onnx_writer *w, const char *fmt, const char *a, const char *b)
{
    char buf[256];
    snprintf(buf, sizeof buf, fmt, a, b);
    return onnxw_str(w, buf);
}

/* Appends p to a pointer array that doubles in the arena (the old copy stays until the end). */
static int push(onnx_writer *w, void ***arr, size_t *n, size_t *cap, void *p)
{
    if (!p)
        return -1;
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 64;
        void **na = onnxw_alloc(w, nc * sizeof *na);
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
    Onnx__TensorProto *t = onnxw_alloc(w, sizeof *t);
    int64_t *d = onnxw_alloc(w, sizeof(int64_t) * (ndim > 0 ? ndim : 1));
    uint8_t *raw = onnxw_alloc(w, bytes ? bytes : 1);
    char *n = onnxw_str(w, name);
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

int onnxw_const_i64(onnx_writer *w, const char *name, const int64_t *v, int64_t n)
{
    Onnx__TensorProto *t = new_tensor(w, name, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, &n, 1,
                                      sizeof(int64_t) * (size_t)n);
    if (!t)
        return -1;
    for (int64_t i = 0; i < n; i++)
        put_le(t->raw_data.data + 8 * i, (uint64_t)v[i], 8);
    return add_init(w, t);
}

int onnxw_const_f32(onnx_writer *w, const char *name, float v)
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

int onnxw_const_f32s(onnx_writer *w, const char *name, const float *v, int64_t n)
{
    const int64_t dims[1] = {n};
    Onnx__TensorProto *t = new_tensor(w, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, dims, 1,
                                      sizeof(float) * (size_t)n);
    if (!t)
        return -1;
    for (int64_t k = 0; k < n; k++) {
        uint32_t u;
        memcpy(&u, &v[k], sizeof u);
        put_le(t->raw_data.data + 4 * k, u, 4);
    }
    return add_init(w, t);
}

/* The model's tensor `suffix` of layer l as an initializer named as in the model's layout;
 * its name is the value a node reads. NULL (err set) when it cannot be read. */
const char *onnxw_tensor_init(onnx_writer *w, const layer *l, const char *suffix,
                              dtnn_error *err)
{
    return onnxw_tensor_init_rank(w, l, suffix, 0, err);
}

const char *onnxw_tensor_init_rank(onnx_writer *w, const layer *l, const char *suffix, int rank,
                                   dtnn_error *err)
{
    for (int k = 0; k < l->n_tensors; k++) {
        if (strcmp(l->t[k].suffix, suffix))
            continue;
        const dtnn_tensor_info *ti = dtnn_model_tensor(w->m, l->t[k].model_index);
        int64_t dims[8] = {1, 1, 1, 1, 1, 1, 1, 1};
        const int ndim = ti->ndim > rank ? ti->ndim : rank > 8 ? 8 : rank;
        for (int d = 0; d < ti->ndim && d < 8; d++)
            dims[d] = ti->dims[d];
        Onnx__TensorProto *t = new_tensor(w, ti->name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT,
                                          dims, ndim, sizeof(float) * ti->count);
        float *host = onnxw_alloc(w, sizeof(float) * (ti->count ? ti->count : 1));
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

Onnx__NodeProto *onnxw_node(onnx_writer *w, const char *op, const char *name,
                                 const char *const *inputs, int n_inputs, const char *output)
{
    Onnx__NodeProto *nd = onnxw_alloc(w, sizeof *nd);
    char **in = onnxw_alloc(w, sizeof(char *) * (n_inputs > 0 ? n_inputs : 1));
    char **out = onnxw_alloc(w, sizeof(char *));
    if (!nd || !in || !out)
        return NULL;
    onnx__node_proto__init(nd);
    for (int i = 0; i < n_inputs; i++)
        if (!(in[i] = onnxw_str(w, inputs[i])))
            return NULL;
    out[0] = onnxw_str(w, output);
    nd->name = onnxw_str(w, name);
    nd->op_type = onnxw_str(w, op);
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
    Onnx__AttributeProto *a = onnxw_alloc(w, sizeof *a);
    Onnx__AttributeProto **list = onnxw_alloc(w, sizeof *list * (nd->n_attribute + 1));
    if (!a || !list || !(name = onnxw_str(w, name)))
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

void onnxw_attr_int(onnx_writer *w, Onnx__NodeProto *nd, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = add_attr(w, nd, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (a) {
        a->has_i = 1;
        a->i = v;
    }
}

void onnxw_attr_float(onnx_writer *w, Onnx__NodeProto *nd, const char *name, float v)
{
    Onnx__AttributeProto *a = add_attr(w, nd, name,
                                       ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (a) {
        a->has_f = 1;
        a->f = v;
    }
}

void onnxw_attr_ints(onnx_writer *w, Onnx__NodeProto *nd, const char *name, const int *v,
                      int n)
{
    Onnx__AttributeProto *a = add_attr(w, nd, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    int64_t *d = onnxw_alloc(w, sizeof(int64_t) * n);
    if (!a || !d)
        return;
    for (int i = 0; i < n; i++)
        d[i] = v[i];
    a->n_ints = (size_t)n;
    a->ints = d;
}

void onnxw_attr_string(onnx_writer *w, Onnx__NodeProto *nd, const char *name, const char *v)
{
    Onnx__AttributeProto *a = add_attr(w, nd, name,
                                       ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    char *copy = onnxw_str(w, v);
    if (!a || !copy)
        return;
    a->has_s = 1;
    a->s.len = strlen(copy);
    a->s.data = (uint8_t *)copy;
}

/* The window attributes of Conv, MaxPool and AveragePool; ONNX pads are
 * [top, left, bottom, right] and dtnn's padding is symmetric. */
void onnxw_attr_window(onnx_writer *w, Onnx__NodeProto *nd, const layer_attrs *a)
{
    /* ONNX's order: begin of each axis, then end; pools may pad asymmetrically */
    const int pads[4] = {a->pad[0], a->pad[1], a->pad[0] + a->pad_extra[0],
                         a->pad[1] + a->pad_extra[1]};
    onnxw_attr_ints(w, nd, "kernel_shape", a->kernel, 2);
    onnxw_attr_ints(w, nd, "strides", a->stride, 2);
    onnxw_attr_ints(w, nd, "pads", pads, 4);
}

/* ---- layers ----------------------------------------------------------------------------- */

/* The value of input i of layer l, in the rank the consumer wants (0: as it is), through a
 * Flatten (4 -> 2) or Reshape to [N, F, 1, 1] (2 -> 4) named after the consumer. */
const char *onnxw_input_as(onnx_writer *w, const layer *l, int i, int want)
{
    int id = l->in_ids[i];
    const char *v = id == DTNN_INPUT ? "input" : w->value[id];
    int rank = id == DTNN_INPUT ? 4 : w->rank[id];
    if (!want || rank == want)
        return v;
    char suffix[16];
    snprintf(suffix, sizeof suffix, "%d", i);
    if (want == 2) {
        const char *out = onnxw_printf(w, "%s/flatten%s", l->name, suffix);
        if (!out)
            return NULL;
        Onnx__NodeProto *nd = onnxw_node(w, "Flatten", out, &v, 1, out);
        onnxw_attr_int(w, nd, "axis", 1);
        return nd ? out : NULL;
    }
    /* Reshape's 0 keeps N and -1 takes the features: one shape constant serves every node. */
    static const char *shape_name = "dtnn.shape_n_f_1_1";
    if (!w->have_to4d) {
        const int64_t shape[4] = {0, -1, 1, 1};
        if (onnxw_const_i64(w, shape_name, shape, 4))
            return NULL;
        w->have_to4d = 1;
    }
    const char *out = onnxw_printf(w, "%s/reshape%s", l->name, suffix);
    const char *ins[2] = {v, shape_name};
    return out && onnxw_node(w, "Reshape", out, ins, 2, out) ? out : NULL;
}

/* Inputs of add / concat in one rank: 4-D if any of them is, since a 2-D [N, F] value is
 * then a [N, F, 1, 1] one (equal shapes are checked at build). */
int onnxw_common_rank(const onnx_writer *w, const layer *l)
{
    for (int i = 0; i < l->n_in; i++)
        if (l->in_ids[i] == DTNN_INPUT || w->rank[l->in_ids[i]] == 4)
            return 4;
    return 2;
}


void onnxw_free(onnx_writer *w)
{
    while (w->blocks) {
        arena_block *next = w->blocks->next;
        free(w->blocks);
        w->blocks = next;
    }
}

/* ---- graph and file --------------------------------------------------------------------- */

/* A float tensor value [N, d1, ...] whose first dimension is the symbol N. */
Onnx__ValueInfoProto *onnxw_value_info(onnx_writer *w, const char *name, const int *dims,
                                        int ndim)
{
    Onnx__ValueInfoProto *v = onnxw_alloc(w, sizeof *v);
    Onnx__TypeProto *tp = onnxw_alloc(w, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = onnxw_alloc(w, sizeof *tt);
    Onnx__TensorShapeProto *sh = onnxw_alloc(w, sizeof *sh);
    Onnx__TensorShapeProto__Dimension **d = onnxw_alloc(w, sizeof *d * (ndim + 1));
    if (!v || !tp || !tt || !sh || !d)
        return NULL;
    onnx__value_info_proto__init(v);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sh);
    for (int k = 0; k <= ndim; k++) {
        if (!(d[k] = onnxw_alloc(w, sizeof *d[k])))
            return NULL;
        onnx__tensor_shape_proto__dimension__init(d[k]);
        if (k == 0) {
            d[k]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            if (!(d[k]->dim_param = onnxw_str(w, "N")))
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
    return (v->name = onnxw_str(w, name)) ? v : NULL;
}

/* The IR version that came with each opset's ONNX release (onnx/docs/Versioning.md): 1.6
 * opset 11 IR 6, 1.7-1.9 opsets 12-14 IR 7, 1.10-1.12 opsets 15-17 IR 8. A checker refuses a
 * file whose IR is newer than its own, so the oldest that has the opset is written. */
int64_t onnxw_ir_version(int opset) { return opset <= 11 ? 6 : opset <= 14 ? 7 : 8; }

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
dtnn_status onnxw_write_model(const Onnx__ModelProto *mp, const char *path, dtnn_error *err)
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

