/*
 * optimizer_internal.h — the optimizer struct, for src/optim/ only (checkpoints use
 * optimizer.h).
 */
#ifndef DTNN_OPTIMIZER_INTERNAL_H
#define DTNN_OPTIMIZER_INTERNAL_H

#include "../model/model.h"
#include "optimizer.h"

#define OPT_MAX_SLOTS 3

/* A stretch [begin, end) of the flat buffers updated by one call: one trainable tensor and the
 * alignment padding after it (zero, and kept zero by every rule), or, where the optimizer
 * treats every tensor alike, a run of them. */
typedef struct {
    size_t begin, end;
    unsigned groups;    /* MODEL_GROUP_* of its tensor(s) */
} opt_span;

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
    /* The trainable tensors in buffer order, covering [0, n) (layerwise.c), and the runs of
     * them that decay alike (all of [0, n) in one run without no_decay groups). */
    opt_span *tensors, *runs;
    int n_tensors, n_runs;
    /* LARS and LAMB: the tensors' bounds as segment_sumsq takes them (begin [n_tensors], then
     * end) and room for two norms a tensor, made once with the spans */
    size_t *bounds;
    double *norms;
    float *direction;                       /* [n] LAMB's update before its trust ratio */
    float mu_product;                       /* NAdam's product of the momentum schedule, as
                                             * PyTorch keeps it: a float32, for exact resume
                                             * recomputed from the step (optimizer_set_step) */
};

/* layerwise.c: the spans of o's tensors and decay runs (o->n, o->p set); LARS's and LAMB's
 * steps. */
dtnn_status optimizer_spans_init(dtnn_optimizer *o, const dtnn_model *m, dtnn_error *err);
int optimizer_span_decays(const dtnn_optimizer *o, const opt_span *s);
dtnn_status optimizer_step_lars(dtnn_optimizer *o, double lr, dtnn_error *err);
dtnn_status optimizer_step_lamb(dtnn_optimizer *o, double lr, dtnn_error *err);
/* The shortest decimal that rounds to f (optimizer.c): hyperparameters as the user typed. */
double optimizer_decimal(float f);

#endif
