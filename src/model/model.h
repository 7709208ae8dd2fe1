/*
 * model.h — what the rest of the library (optimizers, checkpoints, gradient reduction) may ask
 * of a model beyond dtnn.h's dtnn_model_*: its backend and the flat buffers it owns, as
 * pointers into backend memory with their lengths, so that those files take buffers and
 * sizes, as llm.c's optimizer and reducer do, and never the model's struct (model_internal.h,
 * for src/model/ and the layers only).
 */
#ifndef DTNN_MODEL_H
#define DTNN_MODEL_H

#include "../backend/backend.h"

dtnn_backend *model_backend(const dtnn_model *m);
/* What the model was built with (undefined before dtnn_model_build). */
const dtnn_build_params *model_build_params(const dtnn_model *m);
int model_is_built(const dtnn_model *m);
/* The flat buffers, backend memory: parameters [dtnn_model_params_padded], gradients
 * [dtnn_model_grads_length] (the trainable parameters' in the parameters' order, so gradient
 * i belongs to parameter i), and the non-trainable buffers (batch-norm statistics), addressed
 * in bytes by the tensors' offsets. */
float *model_params(dtnn_model *m);
float *model_grads(dtnn_model *m);
unsigned char *model_buffers(dtnn_model *m);
/* Parameter values without alignment padding, and those not frozen. */
size_t model_param_count(const dtnn_model *m);
/* The parameter groups of tensor i (dtnn_model_tensor's index), for optimizers that treat
 * them apart: MODEL_GROUP_NORM for a normalisation layer's parameters, MODEL_GROUP_BIAS for a
 * tensor named "bias" (a batch norm's shift is both). */
enum { MODEL_GROUP_NORM = DTNN_GROUP_NORM, MODEL_GROUP_BIAS = DTNN_GROUP_BIAS };
unsigned model_tensor_groups(const dtnn_model *m, int i);

/* A host copy of a whole region of a built model (malloc'd, the caller frees it; its size in
 * *bytes), for code that works on all of it at once: checkpoints, the replica check. NULL with
 * the error when out of memory or the model has no such region. */
void *model_region_to_host(const dtnn_model *m, dtnn_region r, size_t *bytes, dtnn_error *err);

#endif
