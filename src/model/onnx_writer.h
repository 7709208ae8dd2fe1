/*
 * onnx_writer.h — the parts of ONNX export that know messages, not layers: an arena that holds
 * every message and string of one export (one free at the end; an allocation failure sets
 * oom and the export fails with NOMEM), initializers, nodes and their attributes, the values
 * a layer reads in the rank it wants, and the file. onnx_export.c maps each layer type onto
 * them.
 */
#ifndef DTNN_ONNX_WRITER_H
#define DTNN_ONNX_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "model_internal.h"
#include "onnx.pb-c.h"

/* Every message and string of one export lives in this chain of blocks. */
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

void *onnxw_alloc(onnx_writer *w, size_t size);
char *onnxw_str(onnx_writer *w, const char *s);
/* fmt has two %s: a and b. */
char *onnxw_printf(onnx_writer *w, const char *fmt, const char *a, const char *b);
/* Frees the arena: every message of the export. */
void onnxw_free(onnx_writer *w);

/* Initializers: an int64 vector, a float scalar (0, or -1 out of memory), and the model's
 * tensor `suffix` of layer l under its layout name (its name, or NULL with err set). */
int onnxw_const_i64(onnx_writer *w, const char *name, const int64_t *v, int64_t n);
int onnxw_const_f32(onnx_writer *w, const char *name, float v);
/* A float vector of n values (n may be 0: an empty tensor, Resize's unused roi). */
int onnxw_const_f32s(onnx_writer *w, const char *name, const float *v, int64_t n);
const char *onnxw_tensor_init(onnx_writer *w, const layer *l, const char *suffix,
                              dtnn_error *err);
/* The same with the dims padded by trailing 1s to `rank` (a conv2d's [K, C] weight as ONNX
 * Conv's [K, C, 1, 1]). */
const char *onnxw_tensor_init_rank(onnx_writer *w, const layer *l, const char *suffix, int rank,
                                   dtnn_error *err);

/* A node of operator op reading n_in values and writing out (NULL out of memory), and its
 * attributes; the window ones are Conv's and the pools' (kernel_shape, strides, pads). */
Onnx__NodeProto *onnxw_node(onnx_writer *w, const char *op, const char *name,
                            const char *const *in, int n_in, const char *out);
void onnxw_attr_int(onnx_writer *w, Onnx__NodeProto *nd, const char *name, int64_t v);
void onnxw_attr_float(onnx_writer *w, Onnx__NodeProto *nd, const char *name, float v);
void onnxw_attr_ints(onnx_writer *w, Onnx__NodeProto *nd, const char *name, const int *v,
                     int n);
void onnxw_attr_string(onnx_writer *w, Onnx__NodeProto *nd, const char *name, const char *v);
void onnxw_attr_window(onnx_writer *w, Onnx__NodeProto *nd, const layer_attrs *a);

/* The value of input i of layer l in rank want (0: as it is), through a Flatten or Reshape
 * named after l where needed; the rank the inputs of add / concat share. */
const char *onnxw_input_as(onnx_writer *w, const layer *l, int i, int want);
int onnxw_common_rank(const onnx_writer *w, const layer *l);

/* The graph's input or output [N, dims...] with the symbolic batch N; the IR version an opset
 * came with; the packed model written atomically to path. */
Onnx__ValueInfoProto *onnxw_value_info(onnx_writer *w, const char *name, const int *dims,
                                       int ndim);
int64_t onnxw_ir_version(int opset);
dtnn_status onnxw_write_model(const Onnx__ModelProto *mp, const char *path, dtnn_error *err);

#endif
