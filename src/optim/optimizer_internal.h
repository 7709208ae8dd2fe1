/*
 * optimizer_internal.h — the optimizer struct, shared by optim/optimizer.c and the checkpoint
 * code (which must check that an optimizer belongs to the model it saves or loads).
 */
#ifndef DTNN_OPTIMIZER_INTERNAL_H
#define DTNN_OPTIMIZER_INTERNAL_H

#include "../model/model_internal.h"

#define OPT_MAX_SLOTS 3

struct dtnn_optimizer {
    dtnn_model *model;
    dtnn_opt_params p;
    int n_slots;
    const char *slot_names[OPT_MAX_SLOTS];  /* PyTorch's state keys, in its creation order */
    size_t n;                               /* model->n_grads: the trainable parameters */
    float *state;                           /* [n_slots, n]; padding entries stay zero */
    int64_t step;                           /* steps taken (PyTorch's state['step']) */
};

/* Index of the slot called name, or -1. */
int optimizer_slot(const dtnn_optimizer *o, const char *name);

#endif
