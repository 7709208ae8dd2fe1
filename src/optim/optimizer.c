/*
 * optimizer.c — SGD (momentum, dampening, Nesterov), Adam, AdamW and RMSProp with the update
 * rules of PyTorch 1.13's torch.optim, NAdam with PyTorch 2's (the single-tensor code path,
 * maximize=False, amsgrad not supported), applied in one loop over the model's flat parameter
 * and gradient buffers, or one per run of tensors that decay alike where groups are kept from
 * decay (no_decay). LARS and LAMB, which scale each tensor's step, are in layerwise.c.
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

static const char *const opt_names[] = {"sgd",     "adam",  "adamw", "rmsprop",
                                        "nadam",   "lars",  "lamb"};
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
    p->momentum_decay = 0.004f;
    p->trust_coefficient = 0.001f;
    if (kind == DTNN_OPT_LARS) {
        p->momentum = 0.9f;
        p->eps = 0.0f;
    }
    if (kind == DTNN_OPT_LAMB) {
        p->eps = 1e-6f;
        p->weight_decay = 0.01f;
    }
    if (kind == DTNN_OPT_LARS || kind == DTNN_OPT_LAMB)
        p->no_decay = DTNN_GROUP_NORM | DTNN_GROUP_BIAS;
}

dtnn_status dtnn_opt_parse_groups(const char *text, unsigned *groups, dtnn_error *err)
{
    *groups = 0;
    if (text && !strcmp(text, "none"))
        return DTNN_OK;
    const char *s = text ? text : "";
    for (;;) {
        const size_t len = strcspn(s, ",");
        if (len == 4 && !strncmp(s, "norm", 4))
            *groups |= DTNN_GROUP_NORM;
        else if (len == 4 && !strncmp(s, "bias", 4))
            *groups |= DTNN_GROUP_BIAS;
        else
            return dtnn_error_set(err, DTNN_ERR_ARG, "unknown parameter group '%.*s' in '%s' "
                                  "(valid: none, or norm and bias separated by commas)",
                                  (int)len, s, text ? text : "");
        if (!s[len])
            return DTNN_OK;
        s += len + 1;
    }
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
                          "unknown optimizer '%s' (valid: sgd, adam, adamw, rmsprop, nadam, "
                          "lars, lamb)",
                          name ? name : "(null)");
}

const char *dtnn_opt_name(dtnn_opt_kind kind)
{
    return ((int)kind >= 0 && (int)kind < N_OPT_KINDS) ? opt_names[kind] : "unknown";
}

/* The shortest decimal (at most 9 significant digits) that rounds to f, as a double. */
double optimizer_decimal(float f)
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
    if (p->no_decay & ~(unsigned)(DTNN_GROUP_NORM | DTNN_GROUP_BIAS))
        return dtnn_error_set(err, DTNN_ERR_ARG, "invalid parameter groups 0x%x (DTNN_GROUP_NORM "
                              "| DTNN_GROUP_BIAS)", p->no_decay);
    const char *name = opt_names[p->kind];
    if (!isfinite(p->clip_grad_norm) || p->clip_grad_norm < 0.0f)
        return dtnn_error_set(err, DTNN_ERR_ARG, "%s: invalid gradient norm bound %g (must be "
                              "> 0, or 0 for none)", name, (double)p->clip_grad_norm);
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
    case DTNN_OPT_NADAM:
    case DTNN_OPT_LAMB:
        if (!isfinite(p->eps) || p->eps <= 0.0f)
            return dtnn_error_set(err, DTNN_ERR_ARG, "%s: invalid epsilon value %g (must be "
                                  "> 0)", name, (double)p->eps);
        if (!(p->beta1 >= 0.0f && p->beta1 < 1.0f))
            return dtnn_error_set(err, DTNN_ERR_ARG, "%s: invalid beta parameter at index 0: "
                                  "%g (must be in [0, 1))", name, (double)p->beta1);
        if (!(p->beta2 >= 0.0f && p->beta2 < 1.0f))
            return dtnn_error_set(err, DTNN_ERR_ARG, "%s: invalid beta parameter at index 1: "
                                  "%g (must be in [0, 1))", name, (double)p->beta2);
        if (p->kind == DTNN_OPT_NADAM && !(p->momentum_decay >= 0.0f && isfinite(p->momentum_decay)))
            return dtnn_error_set(err, DTNN_ERR_ARG, "nadam: invalid momentum_decay value %g "
                                  "(must be >= 0)", (double)p->momentum_decay);
        break;
    case DTNN_OPT_LARS:
        if (!isfinite(p->momentum) || p->momentum < 0.0f)
            return dtnn_error_set(err, DTNN_ERR_ARG, "lars: invalid momentum value %g (must be "
                                  ">= 0)", (double)p->momentum);
        if (!isfinite(p->eps) || p->eps < 0.0f)
            return dtnn_error_set(err, DTNN_ERR_ARG, "lars: invalid epsilon value %g (must be "
                                  ">= 0)", (double)p->eps);
        if (!(p->trust_coefficient > 0.0f && isfinite(p->trust_coefficient)))
            return dtnn_error_set(err, DTNN_ERR_ARG, "lars: invalid trust coefficient %g (must "
                                  "be > 0)", (double)p->trust_coefficient);
        if (p->nesterov && p->momentum <= 0.0f)
            return dtnn_error_set(err, DTNN_ERR_ARG, "lars: Nesterov momentum requires a "
                                  "momentum");
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
    case DTNN_OPT_NADAM:
    case DTNN_OPT_LAMB:
        names[n++] = "exp_avg";
        names[n++] = "exp_avg_sq";
        break;
    case DTNN_OPT_LARS:
        /* MLPerf's LARS keeps its velocity even at momentum 0 (then it is the last step). */
        names[n++] = "momentum_buffer";
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
    o->mu_product = 1.0f;
    if (optimizer_spans_init(o, m, err) != DTNN_OK) {
        dtnn_optimizer_free(o);
        return NULL;
    }
    o->state = be_alloc(o->be, sizeof(float) * o->n * (size_t)o->n_slots);
    if (p->kind == DTNN_OPT_LAMB)
        o->direction = be_alloc(o->be, sizeof(float) * o->n);
    if (!o->state || (p->kind == DTNN_OPT_LAMB && !o->direction)) {
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory: the %s optimizer state needs "
                       "%.1f MiB", opt_names[p->kind],
                       (double)(sizeof(float) * o->n * (size_t)(o->n_slots + 1)) / 1048576.0);
        dtnn_optimizer_free(o);
        return NULL;
    }
    return o;
}

void dtnn_optimizer_free(dtnn_optimizer *o)
{
    if (!o)
        return;
    be_free(o->be, o->state);
    be_free(o->be, o->direction);
    free(o->tensors);
    free(o->runs);
    free(o->bounds);
    free(o->norms);
    free(o);
}

int optimizer_slot(const dtnn_optimizer *o, const char *name)
{
    for (int k = 0; k < o->n_slots; k++)
        if (!strcmp(o->slot_names[k], name))
            return k;
    return -1;
}

/* The state slot k's values from the start of span s. */
static float *slot_at(dtnn_optimizer *o, int k, const opt_span *s)
{
    return k >= 0 && k < o->n_slots ? o->state + (size_t)k * o->n + s->begin : NULL;
}

/* torch.optim.SGD: d = g + wd p; buf = d on the first step (a clone), else
 * momentum buf + (1 - dampening) d; d = d + momentum buf (Nesterov) or buf; p -= lr d. */
static void step_sgd(dtnn_optimizer *o, double lr)
{
    sgd_args a = {
        .lr = (float)lr,
        .weight_decay = (float)optimizer_decimal(o->p.weight_decay),
        .momentum = (float)optimizer_decimal(o->p.momentum),
        .keep = (float)(1.0 - optimizer_decimal(o->p.dampening)),
        .first = o->step == 1,
        .nesterov = o->p.nesterov,
        .use_momentum = o->n_slots > 0,
    };
    const float wd = a.weight_decay;
    for (const opt_span *s = o->runs; s < o->runs + o->n_runs; s++) {
        a.weight_decay = optimizer_span_decays(o, s) ? wd : 0.0f;
        be_run(o->be, sgd_step, &a, s->end - s->begin, o->w + s->begin, o->g + s->begin,
               slot_at(o, 0, s));
    }
}

/* torch.optim.Adam / AdamW: (AdamW: p *= 1 - lr wd; Adam: g += wd p); m = b1 m + (1 - b1) g;
 * v = b2 v + (1 - b2) g^2; p -= (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps), bc = 1 - beta^t. */
static void step_adam(dtnn_optimizer *o, double lr, int decoupled)
{
    const double b1 = optimizer_decimal(o->p.beta1), b2 = optimizer_decimal(o->p.beta2);
    const double wd = optimizer_decimal(o->p.weight_decay), t = (double)o->step;
    adam_args a = {
        .beta1 = (float)b1,
        .beta2 = (float)b2,
        .one_minus_beta1 = (float)(1.0 - b1),
        .one_minus_beta2 = (float)(1.0 - b2),
        .eps = (float)optimizer_decimal(o->p.eps),
        .step_size = (float)(lr / (1.0 - pow(b1, t))),
        .bc2_sqrt = (float)sqrt(1.0 - pow(b2, t)),
        .l2 = decoupled ? 0.0f : (float)wd,
        .shrink = (float)(1.0 - lr * wd),
        .do_shrink = decoupled && wd != 0.0,
    };
    const adam_args decays = a;
    for (const opt_span *s = o->runs; s < o->runs + o->n_runs; s++) {
        a = decays;
        if (!optimizer_span_decays(o, s)) {
            a.l2 = 0.0f;
            a.do_shrink = 0;
        }
        be_run(o->be, adam_step, &a, s->end - s->begin, o->w + s->begin, o->g + s->begin,
               slot_at(o, 0, s), slot_at(o, 1, s));
    }
}

/* torch.optim.NAdam of PyTorch 2 (1.13 multiplies mu into mu_product_next twice): g += wd p;
 * mu_t = beta1 (1 - 0.5 * 0.96^(t psi)); mu_product *= mu_t (a float32); m = lerp(m, g,
 * 1 - beta1); v = beta2 v + (1 - beta2) g^2; denom = sqrt(v / bc2) + eps;
 * p += -lr (1 - mu_t) / (1 - mu_product) g / denom - lr mu_{t+1} / (1 - mu_product mu_{t+1})
 * m / denom. */
static double nadam_mu(const dtnn_opt_params *p, double t)
{
    return optimizer_decimal(p->beta1) *
           (1.0 - 0.5 * pow(0.96, t * optimizer_decimal(p->momentum_decay)));
}

static void step_nadam(dtnn_optimizer *o, double lr)
{
    const double b1 = optimizer_decimal(o->p.beta1), b2 = optimizer_decimal(o->p.beta2);
    const double t = (double)o->step, mu = nadam_mu(&o->p, t), mu_next = nadam_mu(&o->p, t + 1);
    /* PyTorch multiplies its float32 tensor by the Python float converted to float32. */
    o->mu_product = o->mu_product * (float)mu;
    const double mu_product = (double)o->mu_product, mu_product_next = mu_product * mu_next;
    nadam_args a = {
        .weight_decay = (float)optimizer_decimal(o->p.weight_decay),
        .one_minus_beta1 = (float)(1.0 - b1),
        .beta2 = (float)b2,
        .one_minus_beta2 = (float)(1.0 - b2),
        .bc2 = (float)(1.0 - pow(b2, t)),
        .eps = (float)optimizer_decimal(o->p.eps),
        .c_grad = (float)(-lr * (1.0 - mu) / (1.0 - mu_product)),
        .c_avg = (float)(-lr * mu_next / (1.0 - mu_product_next)),
    };
    const float wd = a.weight_decay;
    for (const opt_span *s = o->runs; s < o->runs + o->n_runs; s++) {
        a.weight_decay = optimizer_span_decays(o, s) ? wd : 0.0f;
        be_run(o->be, nadam_step, &a, s->end - s->begin, o->w + s->begin, o->g + s->begin,
               slot_at(o, 0, s), slot_at(o, 1, s));
    }
}

/* torch.optim.RMSprop: g += wd p; sq = alpha sq + (1 - alpha) g^2; centered: ga = alpha ga +
 * (1 - alpha) g, avg = sqrt(sq - ga^2) + eps, else avg = sqrt(sq) + eps; momentum: buf =
 * momentum buf + g / avg, p -= lr buf; else p -= lr g / avg. */
static void step_rmsprop(dtnn_optimizer *o, double lr)
{
    const int ksq = optimizer_slot(o, "square_avg"), kmom = optimizer_slot(o, "momentum_buffer");
    const int kga = optimizer_slot(o, "grad_avg");
    const double alpha = optimizer_decimal(o->p.alpha);
    rmsprop_args a = {
        .alpha = (float)alpha,
        .one_minus_alpha = (float)(1.0 - alpha),
        .weight_decay = (float)optimizer_decimal(o->p.weight_decay),
        .eps = (float)optimizer_decimal(o->p.eps),
        .momentum = (float)optimizer_decimal(o->p.momentum),
        .lr = (float)lr,
    };
    const float wd = a.weight_decay;
    for (const opt_span *s = o->runs; s < o->runs + o->n_runs; s++) {
        a.weight_decay = optimizer_span_decays(o, s) ? wd : 0.0f;
        be_run(o->be, rmsprop_step, &a, s->end - s->begin, o->w + s->begin, o->g + s->begin,
               slot_at(o, ksq, s), slot_at(o, kmom, s), slot_at(o, kga, s));
    }
}

/* torch.nn.utils.clip_grad_norm_: coefficient max_norm / (norm + 1e-6), applied where below 1
 * (PyTorch multiplies by the clamped 1.0 too, which changes no value). */
static dtnn_status clip_gradient(dtnn_optimizer *o, dtnn_error *err)
{
    const size_t begin = 0, end = o->n;
    double sumsq = 0.0;
    be_run(o->be, segment_sumsq, 1, &begin, &end, o->g, &sumsq);
    dtnn_status st = be_check(o->be, err);
    if (st)
        return st;
    const double coef = optimizer_decimal(o->p.clip_grad_norm) / (sqrt(sumsq) + 1e-6);
    if (coef < 1.0)
        be_run(o->be, axpby, o->n, 0.0f, NULL, (float)coef, o->g);
    return DTNN_OK;
}

dtnn_status dtnn_optimizer_step(dtnn_optimizer *o, float lr, dtnn_error *err)
{
    if (!isfinite(lr) || lr < 0.0f)
        return dtnn_error_set(err, DTNN_ERR_ARG, "%s: invalid learning rate %g (must be finite "
                              "and >= 0)", opt_names[o->p.kind], (double)lr);
    const double dlr = optimizer_decimal(lr);
    /* As PyTorch's state['step']: incremented first, so the first step is step 1. */
    o->step++;
    dtnn_status st = o->p.clip_grad_norm > 0.0f ? clip_gradient(o, err) : DTNN_OK;
    if (st)
        return st;
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
    case DTNN_OPT_NADAM:
        step_nadam(o, dlr);
        break;
    case DTNN_OPT_LARS:
        st = optimizer_step_lars(o, dlr, err);
        break;
    case DTNN_OPT_LAMB:
        st = optimizer_step_lamb(o, dlr, err);
        break;
    }
    return st ? st : be_check(o->be, err);
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
void optimizer_set_step(dtnn_optimizer *o, int64_t step)
{
    o->step = step;
    /* NAdam's float32 product, multiplied in the same order as the steps did: a resumed run
     * continues bit for bit. */
    o->mu_product = 1.0f;
    if (o->p.kind == DTNN_OPT_NADAM)
        for (int64_t t = 1; t <= step; t++)
            o->mu_product = o->mu_product * (float)nadam_mu(&o->p, (double)t);
}
