/*
 * onnx_emit.h — what the ONNX exporter's files of emitters share (onnx_export.c: the layers of
 * a CNN; onnx_export_tensor.c: permute, matmul and the last-axis forms of attention): the
 * layer being written and the result of writing it. Internal to the library.
 */
#ifndef DTNN_ONNX_EMIT_H
#define DTNN_ONNX_EMIT_H

#include "onnx_writer.h"

/* One layer being written: its attributes, the name its output value gets (an emitter that
 * writes no node points it at the value it passes on), and that value's rank (4 unless the
 * emitter says). */
typedef struct {
    const layer *l;
    layer_attrs a;
    const char *out;
    int last;
    int rank;
} emit_ctx;

/* EMIT_ERROR: err is set (an unsupported case, a tensor missing); EMIT_NOMEM: an allocation
 * failed, which the exporter reports. */
typedef enum { EMIT_OK = 0, EMIT_NOMEM, EMIT_ERROR } emit_result;

typedef emit_result (*emit_fn)(onnx_writer *w, emit_ctx *c, dtnn_error *err);

/* EMIT_OK when node nd was made and nothing ran out of memory. */
emit_result made(const onnx_writer *w, const Onnx__NodeProto *nd);

/* onnx_export_tensor.c: permute as Reshape, Transpose, Reshape; matmul as MatMul of the 4-D
 * values; softmax, layernorm and linear with axis = last on the last axis of the 4-D value. */
emit_result emit_permute(onnx_writer *w, emit_ctx *c, dtnn_error *err);
emit_result emit_matmul(onnx_writer *w, emit_ctx *c, dtnn_error *err);
emit_result emit_last_axis(onnx_writer *w, emit_ctx *c, dtnn_error *err);

#endif
