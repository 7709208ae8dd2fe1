/*
 * optimizer.c — SGD (momentum, dampening, Nesterov), Adam, AdamW and RMSProp with the update
 * rules of PyTorch 1.13's torch.optim (the single-tensor code path, maximize=False, amsgrad not
 * supported), applied in one loop over the model's flat parameter and gradient buffers.
 *
 * State: one flat buffer of n_slots x n_params_padded floats, slot k of parameter i at
 * state[k * n + i], named by PyTorch's state keys ("momentum_buffer", "exp_avg", ...), plus one
 * step count for the whole model (every parameter steps together). Padding entries of params and
 * grads are zero; every rule maps (p = 0, g = 0, state = 0) to 0, so they stay zero.
 *
 * Precision follows PyTorch: scalar factors (bias corrections, 1 - beta, lr / bc1) are computed in
 * double, element-wise arithmetic in float. Hyperparameters arrive as floats; they are read back
 * as the shortest decimal that gives the same float (0.9f -> 0.9), so 1 - beta1 equals the value
 * PyTorch computes from the Python float the user typed. The element-wise pass is the backend's
 * (backend/cpu/optim.c on the CPU); the state lives in backend memory.
 */
#include <math.h>
#include <string.h>

#include "../core/internal.h"
#include "optimizer_internal.h"

static const char *const opt_names[] = {"sgd", "adam", "adamw", "rmsprop"};
#define N_OPT_KINDS ((int)(sizeof opt_names / sizeof opt_names[0]))

void dtnn_opt_params_default(dtnn_opt_params *p, dtnn_opt_kind kind)
{
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->momentum = 0.0f;
    p->dampening = 0.0f;
    p->nesterov = 0;
    p->weight_decay = kind == DTNN_OPT_ADAMW ? 0.01f : 0.0f;
    p->beta1 = 0.9f;
    p->beta2 = 0.999f;
    p->eps = 1e-8f;
    p->alpha = 0.99f;
    p->centered = 0;
}

dtnn_status dtnn_opt_parse(const char *name, dtnn_opt_kind *kind, dtnn_error *err)
{
    for (int i = 0; i < N_OPT_KINDS; i++) {
        if (name && !strcmp(name, opt_names[i])) {
            *kind = (dtnn_opt_kind)i;
            return DTNN_OK;
        }
    }
    return dtnn_error_set(err, DTNN_ERR_ARG,
                          "unknown optimizer '%s' (valid: sgd, adam, adamw, rmsprop)",
                          name ? name : "(null)");
}

const char *dtnn_opt_name(dtnn_opt_kind kind)
{
    return ((int)kind >= 0 && (int)kind < N_OPT_KINDS) ? opt_names[kind] : "unknown";
}

/* The shortest decimal (at most 9 significant digits) that rounds to f, as a double. */
static double as_decimal(float f)
{
    if (!isfinite(f) || f == 0.0f)
        return (double)f;
    char buf[32];
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, (double)f);
        double d = strtod(buf, NULL);
        if ((float)d == f)
            return d;
    }
    return (double)f;
}

/* Checks the hyperparameters as torch.optim's constructors do (plus finiteness, and eps > 0,
 * which keeps the zero padding of the flat buffers free of 0/0). */
static dtnn_status check_params(const dtnn_opt_params *p, dtnn_error *err)
{
    if ((int)p->kind < 0 || (int)p->kind >= N_OPT_KINDS)
        return dtnn_error_set(err, DTNN_ERR_ARG, "invalid optimizer kind %d", (int)p->kind);
    const char *name = opt_names[p->kind];
    if (!isfinite(p->weight_decay) || p->weight_decay < 0.0f)
        return dtnn_error_set(err, DTNN_ERR_ARG, "%s: invalid weight_decay value %g (must be "
                              ">= 0)", name, (double)p->weight_decay);
    switch (p->kind) {
    case DTNN_OPT_SGD:
        if (!isfinite(p->momentum) || p->momentum < 0.0f)
            return dtnn_error_set(err, DTNN_ERR_ARG, "sgd: invalid momentum value %g (must be "
                                  ">= 0)", (double)p->momentum);
        if (!isfinite(p->dampening))
            return dtnn_error_set(err, DTNN_ERR_ARG, "sgd: invalid dampening value %g",
                                  (double)p->dampening);
        if (p->nesterov && (p->momentum <= 0.0f || p->dampening != 0.0f))
            return dtnn_error_set(err, DTNN_ERR_ARG, "sgd: Nesterov momentum requires a "
                                  "momentum and zero dampening (momentum %g, dampening %g)",
                                  (double)p->momentum, (double)p->dampening);
        break;
    case DTNN_OPT_ADAM:
    case DTNN_OPT_ADAMW:
        if (!isfinite(p->eps) || p->eps <= 0.0f)
            return dtnn_error_set(err, DTNN_ERR_ARG, "%s: invalid epsilon value %g (must be "
                                  "> 0)", name, (double)p->eps);
        if (!(p->beta1 >= 0.0f && p->beta1 < 1.0f))
            return dtnn_error_set(err, DTNN_ERR_ARG, "%s: invalid beta parameter at index 0: "
                                  "%g (must be in [0, 1))", name, (double)p->beta1);
        if (!(p->beta2 >= 0.0f && p->beta2 < 1.0f))
            return dtnn_error_set(err, DTNN_ERR_ARG, "%s: invalid beta parameter at index 1: "
                                  "%g (must be in [0, 1))", name, (double)p->beta2);
        break;
    case DTNN_OPT_RMSPROP:
        if (!isfinite(p->eps) || p->eps <= 0.0f)
            return dtnn_error_set(err, DTNN_ERR_ARG, "rmsprop: invalid epsilon value %g (must "
                                  "be > 0)", (double)p->eps);
        if (!isfinite(p->momentum) || p->momentum < 0.0f)
            return dtnn_error_set(err, DTNN_ERR_ARG, "rmsprop: invalid momentum value %g (must "
                                  "be >= 0)", (double)p->momentum);
        if (!isfinite(p->alpha) || p->alpha < 0.0f)
            return dtnn_error_set(err, DTNN_ERR_ARG, "rmsprop: invalid alpha value %g (must be "
                                  ">= 0)", (double)p->alpha);
        break;
    }
    return DTNN_OK;
}

/* The state buffers of an optimizer, under PyTorch's state names. */
static int state_slots(const dtnn_opt_params *p, const char **names)
{
    int n = 0;
    switch (p->kind) {
    case DTNN_OPT_SGD:
        /* torch.optim.SGD keeps no buffer without momentum. */
        if (p->momentum != 0.0f)
            names[n++] = "momentum_buffer";
        break;
    case DTNN_OPT_ADAM:
    case DTNN_OPT_ADAMW:
        names[n++] = "exp_avg";
        names[n++] = "exp_avg_sq";
        break;
    case DTNN_OPT_RMSPROP:
        names[n++] = "square_avg";
        if (p->momentum > 0.0f)
            names[n++] = "momentum_buffer";
        if (p->centered)
            names[n++] = "grad_avg";
        break;
    }
    return n;
}

int dtnn_opt_state_slots(const dtnn_opt_params *p)
{
    const char *names[OPT_MAX_SLOTS];
    return state_slots(p, names);
}

dtnn_optimizer *dtnn_optimizer_create(dtnn_model *m, const dtnn_opt_params *p, dtnn_error *err)
{
    if (!m || !p) {
        dtnn_error_set(err, DTNN_ERR_ARG, "optimizer: model and parameters are required");
        return NULL;
    }
    if (!model_is_built(m)) {
        dtnn_error_set(err, DTNN_ERR_ARG, "optimizer: the model is not built yet");
        return NULL;
    }
    if (!model_grads(m)) {
        dtnn_error_set(err, DTNN_ERR_ARG, "optimizer: the model was built for inference "
                       "(training=0) and has no gradients");
        return NULL;
    }
    if (check_params(p, err) != DTNN_OK)
        return NULL;
    dtnn_optimizer *o = calloc(1, sizeof *o);
    if (!o) {
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory creating the optimizer");
        return NULL;
    }
    o->model = m;
    o->be = model_backend(m);
    o->w = model_params(m);
    o->g = model_grads(m);
    o->p = *p;
    o->n = dtnn_model_grads_length(m);  /* the trainable parameters: frozen ones keep no state */
    o->n_slots = state_slots(p, o->slot_names);
    o->state = be_alloc(o->be, sizeof(float) * o->n * (size_t)o->n_slots);
    if (!o->state) {
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory: the %s optimizer state needs "
                       "%.1f MiB", opt_names[p->kind],
                       (double)(sizeof(float) * o->n * (size_t)o->n_slots) / 1048576.0);
        free(o);
        return NULL;
    }
    return o;
}

void dtnn_optimizer_free(dtnn_optimizer *o)
{
    if (!o)
        return;
    be_free(o->be, o->state);
    free(o);
}

int optimizer_slot(const dtnn_optimizer *o, const char *name)
{
    for (int k = 0; k < o->n_slots; k++)
        if (!strcmp(o->slot_names[k], name))
            return k;
    return -1;
}

/* torch.optim.SGD: d = g + wd p; buf = d on the first step (a clone), else
 * momentum buf + (1 - dampening) d; d = d + momentum buf (Nesterov) or buf; p -= lr d. */
static void step_sgd(dtnn_optimizer *o, double lr)
{
    const sgd_args a = {
        .lr = (float)lr,
        .weight_decay = (float)as_decimal(o->p.weight_decay),
        .momentum = (float)as_decimal(o->p.momentum),
        .keep = (float)(1.0 - as_decimal(o->p.dampening)),
        .first = o->step == 1,
        .nesterov = o->p.nesterov,
        .use_momentum = o->n_slots > 0,
    };
    be_run(o->be, sgd_step, &a, o->n, o->w, o->g, o->n_slots > 0 ? o->state : NULL);
}

/* torch.optim.Adam / AdamW: (AdamW: p *= 1 - lr wd; Adam: g += wd p); m = b1 m + (1 - b1) g;
 * v = b2 v + (1 - b2) g^2; p -= (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps), bc = 1 - beta^t. */
static void step_adam(dtnn_optimizer *o, double lr, int decoupled)
{
    const double b1 = as_decimal(o->p.beta1), b2 = as_decimal(o->p.beta2);
    const double wd = as_decimal(o->p.weight_decay), t = (double)o->step;
    const adam_args a = {
        .beta1 = (float)b1,
        .beta2 = (float)b2,
        .one_minus_beta1 = (float)(1.0 - b1),
        .one_minus_beta2 = (float)(1.0 - b2),
        .eps = (float)as_decimal(o->p.eps),
        .step_size = (float)(lr / (1.0 - pow(b1, t))),
        .bc2_sqrt = (float)sqrt(1.0 - pow(b2, t)),
        .l2 = decoupled ? 0.0f : (float)wd,
        .shrink = (float)(1.0 - lr * wd),
        .do_shrink = decoupled && wd != 0.0,
    };
    be_run(o->be, adam_step, &a, o->n, o->w, o->g, o->state, o->state + o->n);
}

/* torch.optim.RMSprop: g += wd p; sq = alpha sq + (1 - alpha) g^2; centered: ga = alpha ga +
 * (1 - alpha) g, avg = sqrt(sq - ga^2) + eps, else avg = sqrt(sq) + eps; momentum: buf =
 * momentum buf + g / avg, p -= lr buf; else p -= lr g / avg. */
static void step_rmsprop(dtnn_optimizer *o, double lr)
{
    const int ksq = optimizer_slot(o, "square_avg"), kmom = optimizer_slot(o, "momentum_buffer");
    const int kga = optimizer_slot(o, "grad_avg");
    float *sq = o->state + (size_t)ksq * o->n;
    float *buf = kmom >= 0 ? o->state + (size_t)kmom * o->n : NULL;
    float *ga = kga >= 0 ? o->state + (size_t)kga * o->n : NULL;
    const double alpha = as_decimal(o->p.alpha);
    const rmsprop_args a = {
        .alpha = (float)alpha,
        .one_minus_alpha = (float)(1.0 - alpha),
        .weight_decay = (float)as_decimal(o->p.weight_decay),
        .eps = (float)as_decimal(o->p.eps),
        .momentum = (float)as_decimal(o->p.momentum),
        .lr = (float)lr,
    };
    be_run(o->be, rmsprop_step, &a, o->n, o->w, o->g, sq, buf, ga);
}

dtnn_status dtnn_optimizer_step(dtnn_optimizer *o, float lr, dtnn_error *err)
{
    if (!isfinite(lr) || lr < 0.0f)
        return dtnn_error_set(err, DTNN_ERR_ARG, "%s: invalid learning rate %g (must be finite "
                              "and >= 0)", opt_names[o->p.kind], (double)lr);
    const double dlr = as_decimal(lr);
    /* As PyTorch's state['step']: incremented first, so the first step is step 1. */
    o->step++;
    switch (o->p.kind) {
    case DTNN_OPT_SGD:
        step_sgd(o, dlr);
        break;
    case DTNN_OPT_ADAM:
    case DTNN_OPT_ADAMW:
        step_adam(o, dlr, o->p.kind == DTNN_OPT_ADAMW);
        break;
    case DTNN_OPT_RMSPROP:
        step_rmsprop(o, dlr);
        break;
    }
    return be_check(o->be, err);
}

int dtnn_optimizer_state_slots(const dtnn_optimizer *o) { return o->n_slots; }

const char *dtnn_optimizer_state_name(const dtnn_optimizer *o, int slot)
{
    return (slot >= 0 && slot < o->n_slots) ? o->slot_names[slot] : NULL;
}

size_t dtnn_optimizer_state_length(const dtnn_optimizer *o) { return o->n; }

/* Bounds shared by the two copies; the state is backend memory, so values move only here. */
static dtnn_status check_state_range(const dtnn_optimizer *o, int slot, size_t offset,
                                     size_t count, dtnn_error *err)
{
    if (slot < 0 || slot >= o->n_slots || offset > o->n || count > o->n - offset)
        return dtnn_error_set(err, DTNN_ERR_ARG, "optimizer state slot %d [%zu, %zu) is outside "
                              "its %d slots of %zu values", slot, offset, offset + count,
                              o->n_slots, o->n);
    return DTNN_OK;
}

dtnn_status dtnn_optimizer_read_state(const dtnn_optimizer *o, int slot, size_t offset,
                                      float *dst, size_t count, dtnn_error *err)
{
    dtnn_status st = check_state_range(o, slot, offset, count, err);
    if (!st)
        be_download(o->be, dst, o->state + (size_t)slot * o->n + offset,
                    sizeof(float) * count);
    return st;
}

dtnn_status dtnn_optimizer_write_state(dtnn_optimizer *o, int slot, size_t offset,
                                       const float *src, size_t count, dtnn_error *err)
{
    dtnn_status st = check_state_range(o, slot, offset, count, err);
    if (!st)
        be_upload(o->be, o->state + (size_t)slot * o->n + offset, src,
                  sizeof(float) * count);
    return st;
}
int64_t *dtnn_optimizer_step_count(dtnn_optimizer *o) { return &o->step; }
const dtnn_opt_params *dtnn_optimizer_params(const dtnn_optimizer *o) { return &o->p; }

const dtnn_model *optimizer_model(const dtnn_optimizer *o) { return o->model; }
dtnn_opt_kind optimizer_kind(const dtnn_optimizer *o) { return o->p.kind; }
int optimizer_slot_count(const dtnn_optimizer *o) { return o->n_slots; }
const char *optimizer_slot_name(const dtnn_optimizer *o, int slot) { return o->slot_names[slot]; }
size_t optimizer_length(const dtnn_optimizer *o) { return o->n; }
float *optimizer_state(const dtnn_optimizer *o) { return o->state; }
int64_t optimizer_step(const dtnn_optimizer *o) { return o->step; }
void optimizer_set_step(dtnn_optimizer *o, int64_t step) { o->step = step; }
