/*
 * model_internal.h — the model struct, for the files of src/model (build, loss, parser, zoo,
 * export) only; the rest of the library asks model.h.
 */
#ifndef DTNN_MODEL_INTERNAL_H
#define DTNN_MODEL_INTERNAL_H

#include "../core/name_index.h"
#include "../layers/layer.h"
#include "model.h"

/* Batches uploaded ahead (dtnn_model_prefetch), on a device backend of a training model: two
 * device inputs (dev[0] is input_buf) and their pinned host staging, used in turn. */
typedef struct {
    float *dev[UPLOAD_SLOTS];
    float *stage[UPLOAD_SLOTS];
    const float *x;             /* the caller's batch prefetched into slot `next`, or NULL */
    int n, used;                /* its samples, and those forwards have taken so far */
    int next;                   /* the slot of that batch */
    int current;                /* the slot the last forward read */
} model_prefetch;

/* Allocates the second device input and the staging at build (nothing on a host backend or
 * for inference); frees them. */
dtnn_status model_prefetch_alloc(dtnn_model *m, dtnn_error *err);
void model_prefetch_free(dtnn_model *m);
/* The device copy of the caller's batch x of n samples for forward: the prefetched one where
 * x lies in it, else uploaded now (into a slot no prefetch is filling). */
const float *model_prefetch_input(dtnn_model *m, const float *x, int n);
/* After the last read of the forward's input (forward in eval mode, backward): the slot may be
 * refilled. */
void model_prefetch_release(dtnn_model *m);

struct dtnn_model {
    dtnn_shape input;
    layer **layers;             /* topological order; the last one is the output */
    int n_layers, cap;
    int built;
    dtnn_build_params bp;
    dtnn_backend *be;           /* owns every buffer below (created by the build) */

    dtnn_tensor_info *tensors;  /* named layout of params and buffers */
    int n_tensors;
    name_index layer_index;     /* layer names -> index into layers */
    name_index tensor_index;    /* tensor names -> index into tensors */
    size_t n_params;            /* parameter values (without alignment padding) */
    size_t n_params_padded;     /* length of params */
    size_t n_trainable;         /* values of the parameters not frozen */
    size_t n_grads;             /* length of grads: the trainable parameters come first */
    float *params, *grads;
    unsigned char *buffers;
    size_t buffer_bytes;

    float *activations;         /* every layer's y and dy */
    float *input_grad;          /* [max_batch, input] when bp.input_grad */
    void *aux;
    void *workspace;
    size_t workspace_bytes;
    size_t activation_bytes;
    float *input_buf;           /* [max_batch, input]: the batch uploaded to a device backend
                                 * (NULL on host backends, which read the caller's) */
    model_prefetch prefetch;    /* model_prefetch.c */
    int32_t *labels;            /* [max_batch] the loss's labels, uploaded */
    double *loss_out;           /* [3] the loss's sums: loss, top-1, top-5 */
    double *reduce_stage;       /* host staging of synchronised batch norm's sums */
    size_t reduce_stage_len;
    dtnn_memory memory;         /* what the build planned (check_memory) */

    int n;                      /* batch of the last forward */
    int training;
    int forward_done, loss_done;
    uint64_t seed;
    int64_t step;               /* backward passes so far: the dropout stream position */
    int profiling;
    char **freeze;              /* bp.freeze's strings, owned */
    dtnn_trace *trace;          /* set: layer spans go into it */
    dtnn_comm *sync_comm;       /* set: batch statistics are summed over its ranks */
    dtnn_backward_hook hook;    /* called after each layer's backward (gradient all-reduce) */
    void *hook_user;
};

/* What the memory plan decides (model_plan.c), per layer (n_layers entries each) and in
 * total. */
typedef struct {
    int *alias;             /* plan_inplace */
    int *first;             /* plan_fusion */
    size_t *grad_size, *grad_offset;    /* floats of each output gradient, its place in the pool */
    size_t act_floats;      /* outputs and (training) the gradient pool */
    size_t outputs_floats;  /* the outputs alone: the pool starts there */
    size_t aux_bytes, workspace;
} memory_plan;

dtnn_status model_plan_memory(dtnn_model *m, const dtnn_build_params *p, memory_plan *mp,
                              dtnn_error *err);
void model_memory_plan_free(memory_plan *mp);
/* Adds up what the plan will allocate (and the optimizer after it) and refuses what does not
 * fit, before any of it is allocated. */
dtnn_status model_check_memory(dtnn_model *m, const dtnn_build_params *p, size_t act_floats,
                               size_t aux_bytes, size_t ws, dtnn_error *err);
/* Each layer's views into the allocated flat buffers. */
void model_set_views(dtnn_model *m, const dtnn_build_params *p, const memory_plan *mp);

/* Adds a layer from parsed options; origin ("file:line") prefixes every error. */
int model_add_layer(dtnn_model *m, const char *type, const char *name, const char *const *keys,
                    const char *const *values, int n_options, const int *inputs, int n_inputs,
                    const char *origin, dtnn_error *err);
/* model_add_layer with the layer type's table given rather than looked up by name: for
 * types no model file can name (external layers, model_external.c). */
int model_append_layer(dtnn_model *m, const layer_ops *ops, const char *name,
                       const char *const *keys, const char *const *values, int n_options,
                       const int *inputs, int n_inputs, const char *origin, dtnn_error *err);
/* The first run-time failure of a layer that can fail (layer_ops.failure), or DTNN_OK. */
dtnn_status model_layers_failure(const dtnn_model *m, dtnn_error *err);

#endif
