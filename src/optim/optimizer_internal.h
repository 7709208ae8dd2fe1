/*
 * optimizer_internal.h — the optimizer struct, for src/optim/ only (checkpoints use
 * optimizer.h).
 */
#ifndef DTNN_OPTIMIZER_INTERNAL_H
#define DTNN_OPTIMIZER_INTERNAL_H

#include "../model/model.h"
#include "optimizer.h"

#define OPT_MAX_SLOTS 3

struct dtnn_optimizer {
    dtnn_model *model;                      /* only to tell whose it is (checkpoints) */
    dtnn_backend *be;                       /* the model's: it holds w, g and state */
    float *w, *g;                           /* the model's flat parameters and gradients */
    dtnn_opt_params p;
    int n_slots;
    const char *slot_names[OPT_MAX_SLOTS];  /* PyTorch's state keys, in its creation order */
    size_t n;                               /* the gradient's length: the trainable parameters */
    float *state;                           /* [n_slots, n]; padding entries stay zero */
    int64_t step;                           /* steps taken (PyTorch's state['step']) */
};

#endif
