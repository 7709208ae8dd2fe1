/*
 * layerwise.c — the optimizers' view of the model by tensor: the spans of the flat buffers
 * each trainable tensor owns, their parameter groups (kept from weight decay with no_decay),
 * and the two optimizers whose step depends on each tensor's norms.
 *
 * LARS, as the MLPerf ResNet-50 reference defines it (You, Gitman and Ginsburg 2017): for a
 * tensor outside the excluded groups, trust = eta ||w|| / (||g|| + wd ||w|| + eps) where both
 * norms are positive (else 1), the step lr * trust; g += wd w; v = momentum v + step g;
 * w -= v (Nesterov: momentum v + step g). Excluded tensors step with lr and no decay.
 *
 * LAMB, as timm's Lamb (You et al. 2020) with bias correction and gradient averaging, without
 * its built-in clipping (--clip-grad-norm does that over the all-reduced gradient): m, v as
 * Adam's; u = (m / bc1) / (sqrt(v) / sqrt(bc2) + eps) + wd w; for a tensor with decay, trust =
 * ||w|| / ||u|| where both are positive (else 1); w -= lr trust u. Excluded tensors take no
 * decay and trust 1 (timm adapts only where a group's weight decay is not 0).
 *
 * The norms are the backend's segment sums of squares, in double, one wait per step for each
 * of the two buffers; the ratios are computed here in double, as the references do in float
 * or double (a difference of rounding only).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "optimizer_internal.h"

int optimizer_span_decays(const dtnn_optimizer *o, const opt_span *s)
{
    return !(s->groups & o->p.no_decay);
}

dtnn_status optimizer_spans_init(dtnn_optimizer *o, const dtnn_model *m, dtnn_error *err)
{
    const int count = dtnn_model_tensor_count(m);
    o->tensors = calloc((size_t)count + 1, sizeof *o->tensors);
    o->runs = calloc((size_t)count + 1, sizeof *o->runs);
    o->bounds = calloc(2 * (size_t)count + 1, sizeof *o->bounds);
    o->norms = calloc(2 * (size_t)count + 1, sizeof *o->norms);
    if (!o->tensors || !o->runs || !o->bounds || !o->norms)
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for the optimizer's spans");
    /* The trainable tensors come first in the flat buffers, in the model's tensor order. */
    for (int i = 0; i < count; i++) {
        const dtnn_tensor_info *t = dtnn_model_tensor(m, i);
        if (t->kind != DTNN_TENSOR_PARAM || t->frozen || t->offset >= o->n)
            continue;
        DTNN_ASSERT(o->n_tensors == 0 || t->offset >= o->tensors[o->n_tensors - 1].end);
        o->tensors[o->n_tensors++] = (opt_span){t->offset, t->offset + t->count,
                                                model_tensor_groups(m, i)};
    }
    /* Each span reaches to the next one's start: the padding between is zero in every buffer
     * and every rule keeps it so, and the spans then cover [0, n) as one call did. */
    if (o->n_tensors) {
        o->tensors[0].begin = 0;
        for (int k = 0; k + 1 < o->n_tensors; k++)
            o->tensors[k].end = o->tensors[k + 1].begin;
        o->tensors[o->n_tensors - 1].end = o->n;
    }
    for (int k = 0; k < o->n_tensors; k++) {
        o->bounds[k] = o->tensors[k].begin;
        o->bounds[o->n_tensors + k] = o->tensors[k].end;
    }
    /* Runs of tensors that decay alike: one run of everything without no_decay groups. */
    for (int k = 0; k < o->n_tensors; k++) {
        const opt_span *t = &o->tensors[k];
        opt_span *last = o->n_runs ? &o->runs[o->n_runs - 1] : NULL;
        if (last && optimizer_span_decays(o, last) == optimizer_span_decays(o, t))
            last->end = t->end;
        else
            o->runs[o->n_runs++] = *t;
    }
    return DTNN_OK;
}

/* The tensor norms of x and of y into o->norms [2 n_tensors]; the backend's wait is the only
 * work besides the sums (the bounds were made with the spans). */
static dtnn_status tensor_norms(dtnn_optimizer *o, const float *x, const float *y,
                                dtnn_error *err)
{
    const size_t *begin = o->bounds, *end = o->bounds + o->n_tensors;
    be_run(o->be, segment_sumsq, o->n_tensors, begin, end, x, o->norms);
    be_run(o->be, segment_sumsq, o->n_tensors, begin, end, y, o->norms + o->n_tensors);
    dtnn_status st = be_check(o->be, err);
    for (int k = 0; k < 2 * o->n_tensors && !st; k++)
        o->norms[k] = sqrt(o->norms[k]);
    return st;
}

dtnn_status optimizer_step_lars(dtnn_optimizer *o, double lr, dtnn_error *err)
{
    dtnn_status st = tensor_norms(o, o->w, o->g, err);
    if (st)
        return st;
    const double *norms = o->norms;
    const double wd = optimizer_decimal(o->p.weight_decay);
    const double eta = optimizer_decimal(o->p.trust_coefficient);
    const double eps = optimizer_decimal(o->p.eps);
    for (int k = 0; k < o->n_tensors; k++) {
        const opt_span *s = &o->tensors[k];
        const double wn = norms[k], gn = norms[o->n_tensors + k];
        const int adapt = optimizer_span_decays(o, s);
        const double trust = adapt && wn > 0.0 && gn > 0.0 ? eta * wn / (gn + wd * wn + eps) : 1.0;
        const lars_args a = {
            .scaled_lr = (float)(lr * trust),
            .weight_decay = adapt ? (float)wd : 0.0f,
            .momentum = (float)optimizer_decimal(o->p.momentum),
            .nesterov = o->p.nesterov,
        };
        be_run(o->be, lars_step, &a, s->end - s->begin, o->w + s->begin, o->g + s->begin,
               o->state + s->begin);
    }
    return DTNN_OK;
}

dtnn_status optimizer_step_lamb(dtnn_optimizer *o, double lr, dtnn_error *err)
{
    const double b1 = optimizer_decimal(o->p.beta1), b2 = optimizer_decimal(o->p.beta2);
    const double t = (double)o->step;
    lamb_args a = {
        .one_minus_beta1 = (float)(1.0 - b1),
        .beta2 = (float)b2,
        .one_minus_beta2 = (float)(1.0 - b2),
        .bc1 = (float)(1.0 - pow(b1, t)),
        .bc2_sqrt = (float)sqrt(1.0 - pow(b2, t)),
        .eps = (float)optimizer_decimal(o->p.eps),
    };
    const float wd = (float)optimizer_decimal(o->p.weight_decay);
    for (const opt_span *s = o->runs; s < o->runs + o->n_runs; s++) {
        a.weight_decay = optimizer_span_decays(o, s) ? wd : 0.0f;
        be_run(o->be, lamb_direction, &a, s->end - s->begin, o->w + s->begin, o->g + s->begin,
               o->state + s->begin, o->state + o->n + s->begin, o->direction + s->begin);
    }
    dtnn_status st = tensor_norms(o, o->w, o->direction, err);
    if (st)
        return st;
    const double *norms = o->norms;
    for (int k = 0; k < o->n_tensors; k++) {
        const opt_span *s = &o->tensors[k];
        const double wn = norms[k], un = norms[o->n_tensors + k];
        const int adapt = optimizer_span_decays(o, s) && wd != 0.0f;
        const double trust = adapt && wn > 0.0 && un > 0.0 ? wn / un : 1.0;
        be_run(o->be, axpby, s->end - s->begin, (float)(-lr * trust), o->direction + s->begin,
               1.0f, o->w + s->begin);
    }
    return DTNN_OK;
}
