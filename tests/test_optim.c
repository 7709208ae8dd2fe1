/*
 * test_optim.c — every optimizer against a plain double-precision re-implementation of its
 * reference's update rule (PyTorch 1.13's, NAdam's of PyTorch 2, written here from the
 * torch.optim documentation's algorithm boxes; LARS from the MLPerf reference's and LAMB from
 * its paper's and timm's, per tensor) over several steps with changing gradients and learning
 * rates, with and without biases kept from decay; parameter validation; the schedules at
 * chosen steps (values worked out by hand from PyTorch's closed forms) and their parser.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* A tiny MLP: 2x3x3 input -> flatten -> fc1 (5) -> relu -> fc2 (3). */
static dtnn_model *tiny_model(int training)
{
    dtnn_error err;
    dtnn_model *m = dtnn_model_create(2, 3, 3);
    CHECK(dtnn_model_add(m, "flatten", "flat", "", NULL, 0, &err) >= 0);
    CHECK(dtnn_model_add(m, "linear", "fc1", "outputs=5", NULL, 0, &err) >= 0);
    CHECK(dtnn_model_add(m, "relu", NULL, "", NULL, 0, &err) >= 0);
    CHECK(dtnn_model_add(m, "linear", "fc2", "outputs=3", NULL, 0, &err) >= 0);
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = 2;
    bp.training = training;
    CHECK_OK(dtnn_model_build(m, &bp, &err), &err);
    return m;
}

/* Fills the real entries of every parameter tensor (the padding stays zero). */
static void fill_tensors(const dtnn_model *m, float *buf, unsigned seed, float scale)
{
    for (int i = 0; i < dtnn_model_tensor_count(m); i++) {
        const dtnn_tensor_info *ti = dtnn_model_tensor(m, i);
        if (ti->kind != DTNN_TENSOR_PARAM)
            continue;
        test_fill(buf + ti->offset, ti->count, seed + 17u * (unsigned)i);
        for (size_t k = 0; k < ti->count; k++)
            buf[ti->offset + k] *= scale;
    }
}

/* ---- the reference ------------------------------------------------------------------------ */

typedef struct {
    dtnn_opt_kind kind;
    double momentum, dampening, wd, beta1, beta2, eps, alpha;
    int nesterov, centered;
    double momentum_decay, eta;     /* NAdam, LARS */
    int bias_no_decay;              /* biases kept from decay (and LARS/LAMB adaptation) */
    double clip;                    /* > 0: the gradient's norm bound */
} ref_params;

enum { REF_MAX_TENSORS = 8 };

typedef struct {
    size_t n;
    double *p, *buf, *m, *v, *sq, *ga;
    int64_t t;
    double mu_product;
    int n_tensors;                  /* the model's parameter tensors */
    size_t begin[REF_MAX_TENSORS], end[REF_MAX_TENSORS];
    int bias[REF_MAX_TENSORS];
} ref_state;

/* The tensor of element i, or -1 in padding. */
static int ref_tensor_of(const ref_state *s, size_t i)
{
    for (int k = 0; k < s->n_tensors; k++)
        if (i >= s->begin[k] && i < s->end[k])
            return k;
    return -1;
}

static double ref_norm(const double *x, size_t begin, size_t end)
{
    double acc = 0.0;
    for (size_t i = begin; i < end; i++)
        acc += x[i] * x[i];
    return sqrt(acc);
}

/* LARS and LAMB, tensor by tensor (the padding keeps its zeros). */
static void ref_step_layerwise(const ref_params *rp, ref_state *s, const float *grad, double lr)
{
    const double t = (double)s->t;
    for (int k = 0; k < s->n_tensors; k++) {
        const int adapt = !(rp->bias_no_decay && s->bias[k]);
        const double wd = adapt ? rp->wd : 0.0;
        const size_t b = s->begin[k], e = s->end[k];
        if (rp->kind == DTNN_OPT_LARS) {
            double gn = 0.0;
            for (size_t i = b; i < e; i++)
                gn += (double)grad[i] * grad[i];
            gn = sqrt(gn);
            const double wn = ref_norm(s->p, b, e);
            const double trust =
                adapt && wn > 0 && gn > 0 ? rp->eta * wn / (gn + rp->wd * wn + rp->eps) : 1.0;
            for (size_t i = b; i < e; i++) {
                const double g = grad[i] + wd * s->p[i];
                s->buf[i] = rp->momentum * s->buf[i] + lr * trust * g;
                s->p[i] -= rp->nesterov ? rp->momentum * s->buf[i] + lr * trust * g : s->buf[i];
            }
            continue;
        }
        double *u = s->ga; /* LAMB's direction: the scratch array the RMSProp case leaves */
        const double bc1 = 1.0 - pow(rp->beta1, t), bc2 = 1.0 - pow(rp->beta2, t);
        for (size_t i = b; i < e; i++) {
            const double g = grad[i];
            s->m[i] = rp->beta1 * s->m[i] + (1.0 - rp->beta1) * g;
            s->v[i] = rp->beta2 * s->v[i] + (1.0 - rp->beta2) * g * g;
            u[i] = s->m[i] / bc1 / (sqrt(s->v[i]) / sqrt(bc2) + rp->eps) + wd * s->p[i];
        }
        const double wn = ref_norm(s->p, b, e), un = ref_norm(u, b, e);
        const double trust = adapt && wd != 0.0 && wn > 0 && un > 0 ? wn / un : 1.0;
        for (size_t i = b; i < e; i++)
            s->p[i] -= lr * trust * u[i];
    }
}

static void ref_step_clipped(const ref_params *rp, ref_state *s, const float *grad, double lr);

/* clip_grad_norm_ first where asked (in double, then rounded as the scaled float gradient). */
static void ref_step(const ref_params *rp, ref_state *s, const float *grad, double lr)
{
    float *scaled = malloc(sizeof(float) * s->n);
    double norm = 0.0;
    for (size_t i = 0; i < s->n; i++)
        norm += (double)grad[i] * grad[i];
    const double coef = rp->clip > 0.0 ? rp->clip / (sqrt(norm) + 1e-6) : 1.0;
    for (size_t i = 0; i < s->n; i++)
        scaled[i] = coef < 1.0 ? (float)(grad[i] * coef) : grad[i];
    ref_step_clipped(rp, s, scaled, lr);
    free(scaled);
}

static void ref_step_clipped(const ref_params *rp, ref_state *s, const float *grad, double lr)
{
    s->t++;
    const double t = (double)s->t;
    if (rp->kind == DTNN_OPT_LARS || rp->kind == DTNN_OPT_LAMB) {
        ref_step_layerwise(rp, s, grad, lr);
        return;
    }
    const double mu = rp->beta1 * (1.0 - 0.5 * pow(0.96, t * rp->momentum_decay));
    const double mu_next = rp->beta1 * (1.0 - 0.5 * pow(0.96, (t + 1) * rp->momentum_decay));
    if (rp->kind == DTNN_OPT_NADAM)
        s->mu_product *= mu;
    for (size_t i = 0; i < s->n; i++) {
        double g = grad[i], p = s->p[i];
        const int k = ref_tensor_of(s, i);
        const double wd = rp->bias_no_decay && k >= 0 && s->bias[k] ? 0.0 : rp->wd;
        switch (rp->kind) {
        case DTNN_OPT_SGD:
            g += wd * p;
            if (rp->momentum != 0.0) {
                s->buf[i] = s->t == 1 ? g : rp->momentum * s->buf[i] + (1.0 - rp->dampening) * g;
                g = rp->nesterov ? g + rp->momentum * s->buf[i] : s->buf[i];
            }
            p -= lr * g;
            break;
        case DTNN_OPT_ADAM:
        case DTNN_OPT_ADAMW:
            if (rp->kind == DTNN_OPT_ADAMW)
                p *= 1.0 - lr * wd;
            else
                g += wd * p;
            s->m[i] = rp->beta1 * s->m[i] + (1.0 - rp->beta1) * g;
            s->v[i] = rp->beta2 * s->v[i] + (1.0 - rp->beta2) * g * g;
            {
                double bc1 = 1.0 - pow(rp->beta1, t), bc2 = 1.0 - pow(rp->beta2, t);
                p -= lr / bc1 * s->m[i] / (sqrt(s->v[i]) / sqrt(bc2) + rp->eps);
            }
            break;
        case DTNN_OPT_RMSPROP: {
            g += wd * p;
            s->sq[i] = rp->alpha * s->sq[i] + (1.0 - rp->alpha) * g * g;
            double avg;
            if (rp->centered) {
                s->ga[i] = rp->alpha * s->ga[i] + (1.0 - rp->alpha) * g;
                avg = sqrt(s->sq[i] - s->ga[i] * s->ga[i]) + rp->eps;
            } else {
                avg = sqrt(s->sq[i]) + rp->eps;
            }
            if (rp->momentum > 0.0) {
                s->buf[i] = rp->momentum * s->buf[i] + g / avg;
                p -= lr * s->buf[i];
            } else {
                p -= lr * g / avg;
            }
            break;
        }
        case DTNN_OPT_NADAM: {
            g += wd * p;
            s->m[i] = rp->beta1 * s->m[i] + (1.0 - rp->beta1) * g;
            s->v[i] = rp->beta2 * s->v[i] + (1.0 - rp->beta2) * g * g;
            const double denom = sqrt(s->v[i] / (1.0 - pow(rp->beta2, t))) + rp->eps;
            p -= lr * (1.0 - mu) / (1.0 - s->mu_product) * g / denom;
            p -= lr * mu_next / (1.0 - s->mu_product * mu_next) * s->m[i] / denom;
            break;
        }
        case DTNN_OPT_LARS:
        case DTNN_OPT_LAMB:
            break;
        }
        s->p[i] = p;
    }
}

static void to_float(float *out, const double *in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (float)in[i];
}

/* Compares optimizer state slot `name` with the reference array want. */
static void check_slot(dtnn_optimizer *o, const char *label, const char *name,
                       const double *want, size_t n)
{
    int slot = -1;
    for (int k = 0; k < dtnn_optimizer_state_slots(o); k++)
        if (!strcmp(dtnn_optimizer_state_name(o, k), name))
            slot = k;
    CHECK(slot >= 0);
    if (slot < 0)
        return;
    float *w = malloc(sizeof(float) * n);
    to_float(w, want, n);
    /* A slot sums terms of either sign (RMSProp's g / avg reach 1 / sqrt(1 - alpha) = 10), so
     * float rounding is measured against the largest value, not each one. */
    double big = 1.0;
    for (size_t i = 0; i < n; i++)
        big = fmax(big, fabs(want[i]));
    char l[128];
    snprintf(l, sizeof l, "%s %s", label, name);
    test_compare(l, tu_opt_state(o) + (size_t)slot * n, w, n, 1e-6 * big, 1e-6);
    free(w);
}

static void run_case(const char *label, const dtnn_opt_params *op, const ref_params *rp,
                     double base_lr, int expect_slots)
{
    dtnn_error err;
    dtnn_model *m = tiny_model(1);
    /* The padded length: the end of the last parameter tensor, rounded as the model does. */
    size_t len = 0;
    for (int i = 0; i < dtnn_model_tensor_count(m); i++) {
        const dtnn_tensor_info *ti = dtnn_model_tensor(m, i);
        if (ti->kind == DTNN_TENSOR_PARAM && ti->offset + ti->count > len)
            len = ti->offset + ti->count;
    }
    len = (len + 15) / 16 * 16;
    float *params = tu_params(m), *grads = tu_grads(m);
    memset(params, 0, sizeof(float) * len);
    fill_tensors(m, params, 3, 1.0f);

    dtnn_optimizer *o = dtnn_optimizer_create(m, op, &err);
    CHECK(o != NULL);
    if (!o) {
        fprintf(stderr, "%s: %s\n", label, err.message);
        dtnn_model_free(m);
        return;
    }
    CHECK(dtnn_optimizer_state_slots(o) == expect_slots);
    ref_state s = {len, calloc(len, 8), calloc(len, 8), calloc(len, 8), calloc(len, 8),
                   calloc(len, 8), calloc(len, 8), 0, 1.0, 0, {0}, {0}, {0}};
    for (int i = 0; i < dtnn_model_tensor_count(m) && s.n_tensors < REF_MAX_TENSORS; i++) {
        const dtnn_tensor_info *ti = dtnn_model_tensor(m, i);
        if (ti->kind != DTNN_TENSOR_PARAM)
            continue;
        s.begin[s.n_tensors] = ti->offset;
        s.end[s.n_tensors] = ti->offset + ti->count;
        s.bias[s.n_tensors++] = strstr(ti->name, ".bias") != NULL;
    }
    for (size_t i = 0; i < len; i++)
        s.p[i] = params[i];
    float *want = malloc(sizeof(float) * len);
    for (int step = 0; step < 6; step++) {
        memset(grads, 0, sizeof(float) * len);
        fill_tensors(m, grads, 100u + (unsigned)step, 0.5f);
        /* The learning rate changes from step to step as under a schedule. */
        float lr = (float)(base_lr * (1.0 - 0.1 * step));
        CHECK_OK(dtnn_optimizer_step(o, lr, &err), &err);
        ref_step(rp, &s, grads, (double)lr);
        to_float(want, s.p, len);
        char l[128];
        snprintf(l, sizeof l, "%s step %d params", label, step + 1);
        test_compare(l, params, want, len, 1e-6, 1e-6);
    }
    CHECK(*dtnn_optimizer_step_count(o) == 6);
    /* The padding stays exactly zero. */
    for (int i = 0; i < dtnn_model_tensor_count(m); i++) {
        const dtnn_tensor_info *ti = dtnn_model_tensor(m, i);
        size_t end = (ti->offset + ti->count + 15) / 16 * 16;
        for (size_t k = ti->offset + ti->count; k < end; k++)
            CHECK(params[k] == 0.0f);
    }
    switch (rp->kind) {
    case DTNN_OPT_SGD:
        if (rp->momentum != 0.0)
            check_slot(o, label, "momentum_buffer", s.buf, len);
        break;
    case DTNN_OPT_ADAM:
    case DTNN_OPT_ADAMW:
    case DTNN_OPT_NADAM:
    case DTNN_OPT_LAMB:
        check_slot(o, label, "exp_avg", s.m, len);
        check_slot(o, label, "exp_avg_sq", s.v, len);
        break;
    case DTNN_OPT_RMSPROP:
        check_slot(o, label, "square_avg", s.sq, len);
        if (rp->momentum > 0.0)
            check_slot(o, label, "momentum_buffer", s.buf, len);
        if (rp->centered)
            check_slot(o, label, "grad_avg", s.ga, len);
        break;
    case DTNN_OPT_LARS:
        check_slot(o, label, "momentum_buffer", s.buf, len);
        break;
    }
    free(want);
    free(s.p);
    free(s.buf);
    free(s.m);
    free(s.v);
    free(s.sq);
    free(s.ga);
    dtnn_optimizer_free(o);
    dtnn_model_free(m);
}

static void test_updates(void)
{
    dtnn_opt_params op;
    ref_params rp;

    dtnn_opt_params_default(&op, DTNN_OPT_SGD);
    rp = (ref_params){DTNN_OPT_SGD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    run_case("sgd", &op, &rp, 0.1, 0);

    op.momentum = 0.9f;
    op.dampening = 0.1f;
    op.weight_decay = 1e-3f;
    rp.momentum = 0.9;
    rp.dampening = 0.1;
    rp.wd = 1e-3;
    run_case("sgd momentum dampening wd", &op, &rp, 0.1, 1);

    op.dampening = 0.0f;
    op.nesterov = 1;
    op.weight_decay = 5e-4f;
    rp.dampening = 0.0;
    rp.nesterov = 1;
    rp.wd = 5e-4;
    run_case("sgd nesterov wd", &op, &rp, 0.05, 1);

    dtnn_opt_params_default(&op, DTNN_OPT_ADAM);
    rp = (ref_params){DTNN_OPT_ADAM, 0, 0, 0, 0.9, 0.999, 1e-8, 0, 0, 0, 0, 0, 0, 0};
    run_case("adam", &op, &rp, 0.05, 2);

    op.weight_decay = 0.01f;
    op.beta1 = 0.8f;
    op.beta2 = 0.99f;
    op.eps = 1e-6f;
    rp.wd = 0.01;
    rp.beta1 = 0.8;
    rp.beta2 = 0.99;
    rp.eps = 1e-6;
    run_case("adam wd betas", &op, &rp, 0.01, 2);

    dtnn_opt_params_default(&op, DTNN_OPT_ADAMW);
    CHECK(op.weight_decay == 0.01f);
    rp = (ref_params){DTNN_OPT_ADAMW, 0, 0, 0.01, 0.9, 0.999, 1e-8, 0, 0, 0, 0, 0, 0, 0};
    run_case("adamw", &op, &rp, 0.05, 2);
    op.weight_decay = 0.1f;
    rp.wd = 0.1;
    run_case("adamw wd 0.1", &op, &rp, 0.2, 2);

    dtnn_opt_params_default(&op, DTNN_OPT_RMSPROP);
    rp = (ref_params){DTNN_OPT_RMSPROP, 0, 0, 0, 0, 0, 1e-8, 0.99, 0, 0, 0, 0, 0, 0};
    run_case("rmsprop", &op, &rp, 0.01, 1);

    op.centered = 1;
    rp.centered = 1;
    run_case("rmsprop centered", &op, &rp, 0.01, 2);

    op.centered = 0;
    op.momentum = 0.9f;
    rp.centered = 0;
    rp.momentum = 0.9;
    run_case("rmsprop momentum", &op, &rp, 0.01, 2);

    op.centered = 1;
    op.weight_decay = 0.01f;
    op.alpha = 0.9f;
    rp.centered = 1;
    rp.wd = 0.01;
    rp.alpha = 0.9;
    run_case("rmsprop centered momentum wd", &op, &rp, 0.01, 3);

    /* Biases kept from decay: a run of decayed tensors, then one without, then again. */
    dtnn_opt_params_default(&op, DTNN_OPT_SGD);
    op.momentum = 0.9f;
    op.weight_decay = 0.05f;
    op.no_decay = DTNN_GROUP_BIAS;
    rp = (ref_params){DTNN_OPT_SGD, 0.9, 0, 0.05, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0};
    run_case("sgd momentum wd, biases without", &op, &rp, 0.1, 1);
    dtnn_opt_params_default(&op, DTNN_OPT_ADAMW);
    op.weight_decay = 0.1f;
    op.no_decay = DTNN_GROUP_BIAS;
    rp = (ref_params){DTNN_OPT_ADAMW, 0, 0, 0.1, 0.9, 0.999, 1e-8, 0, 0, 0, 0, 0, 1, 0};
    run_case("adamw wd 0.1, biases without", &op, &rp, 0.2, 2);

    dtnn_opt_params_default(&op, DTNN_OPT_NADAM);
    CHECK(op.momentum_decay == 0.004f && op.eps == 1e-8f && op.weight_decay == 0.0f);
    rp = (ref_params){DTNN_OPT_NADAM, 0, 0, 0, 0.9, 0.999, 1e-8, 0, 0, 0, 0.004, 0, 0, 0};
    run_case("nadam", &op, &rp, 0.02, 2);
    op.weight_decay = 0.01f;
    op.momentum_decay = 0.1f;
    op.beta2 = 0.99f;
    op.no_decay = DTNN_GROUP_BIAS;
    rp.wd = 0.01;
    rp.momentum_decay = 0.1;
    rp.beta2 = 0.99;
    rp.bias_no_decay = 1;
    run_case("nadam wd psi 0.1, biases without", &op, &rp, 0.02, 2);

    /* LARS: the defaults keep biases (and norm layers) out; a trust coefficient large enough
     * that the scaled steps move the weights visibly. */
    dtnn_opt_params_default(&op, DTNN_OPT_LARS);
    CHECK(op.momentum == 0.9f && op.eps == 0.0f && op.trust_coefficient == 0.001f &&
          op.no_decay == (DTNN_GROUP_NORM | DTNN_GROUP_BIAS));
    op.weight_decay = 1e-3f;
    op.trust_coefficient = 0.02f;
    rp = (ref_params){DTNN_OPT_LARS, 0.9, 0, 1e-3, 0, 0, 0, 0, 0, 0, 0, 0.02, 1, 0};
    run_case("lars wd, biases without", &op, &rp, 1.0, 1);
    op.no_decay = 0;
    op.nesterov = 1;
    op.eps = 1e-3f;
    rp.bias_no_decay = 0;
    rp.nesterov = 1;
    rp.eps = 1e-3;
    run_case("lars nesterov eps, every tensor", &op, &rp, 1.0, 1);

    dtnn_opt_params_default(&op, DTNN_OPT_LAMB);
    CHECK(op.eps == 1e-6f && op.weight_decay == 0.01f && op.beta1 == 0.9f);
    rp = (ref_params){DTNN_OPT_LAMB, 0, 0, 0.01, 0.9, 0.999, 1e-6, 0, 0, 0, 0, 0, 1, 0};
    run_case("lamb, biases without", &op, &rp, 0.01, 2);
    op.no_decay = 0;
    op.weight_decay = 0.1f;
    rp.bias_no_decay = 0;
    rp.wd = 0.1;
    run_case("lamb wd 0.1, every tensor", &op, &rp, 0.01, 2);
    op.weight_decay = 0.0f;
    rp.wd = 0.0;
    run_case("lamb without decay (no adaptation)", &op, &rp, 0.01, 2);

    /* Clipping: a bound below the gradients' norms (~3), so every step scales them. */
    dtnn_opt_params_default(&op, DTNN_OPT_SGD);
    op.momentum = 0.9f;
    op.clip_grad_norm = 0.5f;
    rp = (ref_params){DTNN_OPT_SGD, 0.9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.5};
    run_case("sgd momentum, gradient norm clipped at 0.5", &op, &rp, 0.1, 1);
    dtnn_opt_params_default(&op, DTNN_OPT_LAMB);
    op.clip_grad_norm = 1.0f;
    rp = (ref_params){DTNN_OPT_LAMB, 0, 0, 0.01, 0.9, 0.999, 1e-6, 0, 0, 0, 0, 0, 1, 1.0};
    run_case("lamb, clipped at 1 (timm's default)", &op, &rp, 0.01, 2);
}

static void expect_create_error(dtnn_model *m, const dtnn_opt_params *op, const char *needle)
{
    dtnn_error err = {0};
    dtnn_optimizer *o = dtnn_optimizer_create(m, op, &err);
    CHECK(o == NULL);
    CHECK(err.code == DTNN_ERR_ARG);
    if (!strstr(err.message, needle)) {
        fprintf(stderr, "FAIL: error '%s' does not mention '%s'\n", err.message, needle);
        test_failures++;
    }
    dtnn_optimizer_free(o);
}

static void test_validation(void)
{
    dtnn_error err;
    dtnn_model *m = tiny_model(1);
    dtnn_opt_params op;

    dtnn_opt_params_default(&op, DTNN_OPT_SGD);
    CHECK(op.momentum == 0.0f && op.dampening == 0.0f && !op.nesterov && op.weight_decay == 0);
    op.nesterov = 1;
    expect_create_error(m, &op, "Nesterov");
    op.momentum = 0.9f;
    op.dampening = 0.5f;
    expect_create_error(m, &op, "Nesterov");
    dtnn_opt_params_default(&op, DTNN_OPT_SGD);
    op.momentum = -0.1f;
    expect_create_error(m, &op, "momentum");
    dtnn_opt_params_default(&op, DTNN_OPT_SGD);
    op.weight_decay = -1.0f;
    expect_create_error(m, &op, "weight_decay");

    dtnn_opt_params_default(&op, DTNN_OPT_ADAM);
    CHECK(op.beta1 == 0.9f && op.beta2 == 0.999f && op.eps == 1e-8f && op.weight_decay == 0);
    op.beta1 = 1.0f;
    expect_create_error(m, &op, "beta parameter at index 0");
    dtnn_opt_params_default(&op, DTNN_OPT_ADAMW);
    op.beta2 = -0.5f;
    expect_create_error(m, &op, "beta parameter at index 1");
    dtnn_opt_params_default(&op, DTNN_OPT_ADAM);
    op.eps = 0.0f;
    expect_create_error(m, &op, "epsilon");
    dtnn_opt_params_default(&op, DTNN_OPT_ADAM);
    op.eps = NAN;
    expect_create_error(m, &op, "epsilon");

    dtnn_opt_params_default(&op, DTNN_OPT_RMSPROP);
    CHECK(op.alpha == 0.99f && op.eps == 1e-8f && op.momentum == 0 && !op.centered);
    op.alpha = -1.0f;
    expect_create_error(m, &op, "alpha");
    dtnn_opt_params_default(&op, DTNN_OPT_RMSPROP);
    op.momentum = -1.0f;
    expect_create_error(m, &op, "momentum");

    dtnn_opt_params_default(&op, DTNN_OPT_NADAM);
    op.momentum_decay = -1.0f;
    expect_create_error(m, &op, "momentum_decay");
    dtnn_opt_params_default(&op, DTNN_OPT_LARS);
    op.trust_coefficient = 0.0f;
    expect_create_error(m, &op, "trust coefficient");
    dtnn_opt_params_default(&op, DTNN_OPT_LARS);
    op.eps = -1.0f;
    expect_create_error(m, &op, "epsilon");
    dtnn_opt_params_default(&op, DTNN_OPT_LAMB);
    op.eps = 0.0f;
    expect_create_error(m, &op, "epsilon");
    dtnn_opt_params_default(&op, DTNN_OPT_SGD);
    op.no_decay = 4;
    expect_create_error(m, &op, "parameter groups");
    dtnn_opt_params_default(&op, DTNN_OPT_SGD);
    op.clip_grad_norm = -1.0f;
    expect_create_error(m, &op, "gradient norm bound");

    /* A non-finite or negative learning rate is refused and changes nothing. */
    dtnn_opt_params_default(&op, DTNN_OPT_SGD);
    dtnn_optimizer *o = dtnn_optimizer_create(m, &op, &err);
    CHECK(o != NULL);
    float before = tu_params(m)[0];
    tu_grads(m)[0] = 1.0f;
    CHECK(dtnn_optimizer_step(o, NAN, &err) == DTNN_ERR_ARG);
    CHECK(dtnn_optimizer_step(o, INFINITY, &err) == DTNN_ERR_ARG);
    CHECK(dtnn_optimizer_step(o, -0.1f, &err) == DTNN_ERR_ARG);
    CHECK(strstr(err.message, "learning rate") != NULL);
    CHECK(tu_params(m)[0] == before);
    CHECK(*dtnn_optimizer_step_count(o) == 0);
    CHECK(dtnn_optimizer_params(o)->kind == DTNN_OPT_SGD);
    CHECK(dtnn_optimizer_state_name(o, 0) == NULL);
    dtnn_optimizer_free(o);

    /* A model built for inference has no gradients to optimize. */
    dtnn_model *inf = tiny_model(0);
    expect_create_error(inf, &op, "inference");
    dtnn_model_free(inf);
    dtnn_model_free(m);

    /* Names. */
    dtnn_opt_kind k;
    const char *names[] = {"sgd", "adam", "adamw", "rmsprop", "nadam", "lars", "lamb"};
    for (int i = 0; i < 7; i++) {
        CHECK_OK(dtnn_opt_parse(names[i], &k, &err), &err);
        CHECK((int)k == i);
        CHECK(!strcmp(dtnn_opt_name(k), names[i]));
    }
    CHECK(dtnn_opt_parse("Adam", &k, &err) == DTNN_ERR_ARG);
    CHECK(strstr(err.message, "'Adam'") && strstr(err.message, "sgd, adam, adamw, rmsprop, nadam"));
    unsigned groups;
    CHECK_OK(dtnn_opt_parse_groups("norm,bias", &groups, &err), &err);
    CHECK(groups == (DTNN_GROUP_NORM | DTNN_GROUP_BIAS));
    CHECK_OK(dtnn_opt_parse_groups("bias", &groups, &err), &err);
    CHECK(groups == DTNN_GROUP_BIAS);
    CHECK_OK(dtnn_opt_parse_groups("none", &groups, &err), &err);
    CHECK(groups == 0);
    CHECK(dtnn_opt_parse_groups("norm,weights", &groups, &err) == DTNN_ERR_ARG);
    CHECK(strstr(err.message, "'weights'") != NULL);
    CHECK(dtnn_opt_parse_groups("", &groups, &err) == DTNN_ERR_ARG);
    CHECK(dtnn_opt_parse("", &k, &err) == DTNN_ERR_ARG);
}

/* ---- schedules ---------------------------------------------------------------------------- */

static void expect_lr(const dtnn_sched_params *p, int64_t step, int64_t spe, double want,
                      const char *label)
{
    float got = dtnn_sched_lr(p, step, spe);
    if (!(fabs((double)got - want) <= 1e-7 + 1e-6 * fabs(want))) {
        fprintf(stderr, "FAIL %s: lr at step %lld (%lld steps/epoch) is %.9g, want %.9g\n",
                label, (long long)step, (long long)spe, (double)got, want);
        test_failures++;
    }
}

static dtnn_sched_params parsed(const char *spec, float base_lr)
{
    dtnn_sched_params p;
    dtnn_error err;
    dtnn_sched_params_default(&p);
    p.base_lr = base_lr;
    CHECK_OK(dtnn_sched_parse(spec, &p, &err), &err);
    return p;
}

static void test_schedules(void)
{
    const double pi = 3.14159265358979323846;
    dtnn_sched_params p;
    dtnn_sched_params_default(&p);
    CHECK(p.kind == DTNN_SCHED_CONSTANT && p.gamma == 0.1f && p.warmup_epochs == 0.0f);
    CHECK(p.warmup_start_factor == 0.1f);
    p.base_lr = 0.05f;
    expect_lr(&p, 0, 10, 0.05, "constant");
    expect_lr(&p, 12345, 10, 0.05, "constant");

    /* StepLR(step_size=2, gamma=0.5) stepped once per epoch of 10 steps. */
    p = parsed("step:2:0.5", 1.0f);
    CHECK(p.kind == DTNN_SCHED_STEP && p.step_size == 2 && p.gamma == 0.5f);
    expect_lr(&p, 0, 10, 1.0, "step");
    expect_lr(&p, 19, 10, 1.0, "step");
    expect_lr(&p, 20, 10, 0.5, "step");
    expect_lr(&p, 39, 10, 0.5, "step");
    expect_lr(&p, 40, 10, 0.25, "step");
    expect_lr(&p, 65, 10, 0.125, "step");
    p = parsed("step:3", 0.1f);
    CHECK(p.gamma == 0.1f);
    expect_lr(&p, 3, 1, 0.01, "step default gamma");

    /* MultiStepLR(milestones=[2, 5], gamma=0.1). */
    p = parsed("multistep:2,5", 1.0f);
    CHECK(p.kind == DTNN_SCHED_MULTISTEP && p.n_milestones == 2 && p.milestones[1] == 5);
    expect_lr(&p, 0, 4, 1.0, "multistep");
    expect_lr(&p, 7, 4, 1.0, "multistep");
    expect_lr(&p, 8, 4, 0.1, "multistep");
    expect_lr(&p, 19, 4, 0.1, "multistep");
    expect_lr(&p, 20, 4, 0.01, "multistep");
    expect_lr(&p, 400, 4, 0.01, "multistep");
    p = parsed("multistep:1,2,3:0.5", 2.0f);
    expect_lr(&p, 2, 1, 0.5, "multistep gamma");

    /* CosineAnnealingLR(T_max=10, eta_min=0.001); past T_max it rises again, as PyTorch's. */
    p = parsed("cosine:10:0.001", 0.1f);
    CHECK(p.kind == DTNN_SCHED_COSINE && p.t_max == 10);
    expect_lr(&p, 0, 5, 0.1, "cosine");
    expect_lr(&p, 4, 5, 0.1, "cosine");
    expect_lr(&p, 5, 5, 0.001 + 0.099 * (1 + cos(pi / 10)) / 2, "cosine");
    expect_lr(&p, 25, 5, 0.001 + 0.099 * 0.5, "cosine");
    expect_lr(&p, 50, 5, 0.001, "cosine");
    expect_lr(&p, 75, 5, 0.001 + 0.099 * 0.5, "cosine");
    p = parsed("cosine", 0.1f);
    CHECK(p.t_max == 0 && p.eta_min == 0.0f);
    expect_lr(&p, 7, 5, 0.1, "cosine without t_max");
    p.t_max = 4;
    expect_lr(&p, 10, 5, 0.05, "cosine t_max set by the caller");

    /* PolynomialLR: base (1 - min(e, T) / T)^power, 0 from T on. */
    p = parsed("poly:2:10", 0.4f);
    CHECK(p.kind == DTNN_SCHED_POLY && p.power == 2.0f && p.t_max == 10);
    expect_lr(&p, 4, 5, 0.4, "poly");
    expect_lr(&p, 5, 5, 0.4 * 0.81, "poly");
    expect_lr(&p, 27, 5, 0.4 * 0.25, "poly");
    expect_lr(&p, 50, 5, 0.0, "poly");
    expect_lr(&p, 99, 5, 0.0, "poly");
    p = parsed("poly:0.5", 1.0f);
    CHECK(p.t_max == 0);
    expect_lr(&p, 7, 5, 1.0, "poly without T");
    p.t_max = 4;
    expect_lr(&p, 15, 5, sqrt(0.25), "poly T set by the caller");
    /* ReduceLROnPlateau: constant here (its cuts come from the trainer's monitor). */
    p = parsed("plateau:3:0.5", 0.2f);
    CHECK(p.kind == DTNN_SCHED_PLATEAU && p.patience == 3 && p.gamma == 0.5f);
    expect_lr(&p, 99, 5, 0.2, "plateau");
    p = parsed("plateau:0", 0.2f);
    CHECK(p.patience == 0 && p.gamma == 0.1f);

    /* Warm-up over 2 epochs of 10 steps from 0.1 x lr, per step. */
    p = parsed("constant", 1.0f);
    p.warmup_epochs = 2.0f;
    expect_lr(&p, 0, 10, 0.1, "warmup");
    expect_lr(&p, 5, 10, 0.1 + 0.9 * 5 / 20, "warmup");
    expect_lr(&p, 10, 10, 0.55, "warmup");
    expect_lr(&p, 19, 10, 0.1 + 0.9 * 19 / 20, "warmup");
    expect_lr(&p, 20, 10, 1.0, "warmup");
    expect_lr(&p, 99, 10, 1.0, "warmup");
    /* Warm-up multiplies onto the decay; fractional warm-up epochs count in steps. */
    p = parsed("step:1:0.5", 0.4f);
    p.warmup_epochs = 1.5f;
    p.warmup_start_factor = 0.0f;
    expect_lr(&p, 3, 4, 0.4 * 3 / 6.0, "warmup step");
    expect_lr(&p, 5, 4, 0.2 * 5 / 6.0, "warmup step");
    expect_lr(&p, 6, 4, 0.2, "warmup step");
    expect_lr(&p, 8, 4, 0.1, "warmup step");

    /* Parsing keeps base_lr and the warm-up, and is strict. */
    dtnn_error err;
    dtnn_sched_params_default(&p);
    p.base_lr = 0.3f;
    p.warmup_epochs = 5.0f;
    CHECK_OK(dtnn_sched_parse("cosine:50:1e-5", &p, &err), &err);
    CHECK(p.base_lr == 0.3f && p.warmup_epochs == 5.0f && p.t_max == 50);
    CHECK(p.eta_min == 1e-5f);
    CHECK_OK(dtnn_sched_parse("step:7", &p, &err), &err);
    CHECK(p.step_size == 7 && p.t_max == 0 && p.eta_min == 0.0f);
    const struct {
        const char *spec, *needle;
    } bad[] = {
        {"", "unknown kind"},
        {"linear", "'linear'"},
        {"Step:3", "'Step'"},
        {"step", "step needs a size"},
        {"step:", "''"},
        {"step:0", "'0'"},
        {"step:-3", "'-3'"},
        {"step:abc", "'abc'"},
        {"step:3.5", "'3.5'"},
        {"step:3:0", "GAMMA"},
        {"step:3:x", "'x'"},
        {"step:3:", "GAMMA"},
        {"step:3:0.1:5", "'5'"},
        {"multistep", "milestones"},
        {"multistep:3,2", "'2'"},
        {"multistep:3,3", "increase"},
        {"multistep:3,,4", "''"},
        {"multistep:3,", "''"},
        {"multistep:1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", "more than 16"},
        {"multistep:2,4:nan", "'nan'"},
        {"cosine:-1", "'-1'"},
        {"cosine:1.5", "'1.5'"},
        {"cosine:10:-0.1", "'-0.1'"},
        {"cosine:10:inf", "'inf'"},
        {"cosine:10:0:1", "'1'"},
        {"poly", "poly needs a power"},
        {"poly:0", "POWER"},
        {"poly:-1", "POWER"},
        {"poly:2:-3", "'-3'"},
        {"poly:2:3:4", "'4'"},
        {"plateau", "plateau needs a patience"},
        {"plateau:-1", "PATIENCE"},
        {"plateau:2:1", "FACTOR"},
        {"plateau:2:0", "FACTOR"},
        {"plateau:2:1.5", "FACTOR"},
        {"constant:5", "'5'"},
        {"constant ", "'constant '"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dtnn_sched_params q = p;
        err.message[0] = '\0';
        dtnn_status st = dtnn_sched_parse(bad[i].spec, &q, &err);
        if (st != DTNN_ERR_ARG || !strstr(err.message, bad[i].needle) ||
            memcmp(&q, &p, sizeof q) != 0) {
            fprintf(stderr, "FAIL: schedule '%s': status %d, message '%s' (want '%s'), params "
                    "%s\n", bad[i].spec, (int)st, err.message, bad[i].needle,
                    memcmp(&q, &p, sizeof q) ? "changed" : "unchanged");
            test_failures++;
        }
    }
}

int main(void)
{
    test_updates();
    test_validation();
    test_schedules();
    return test_finish("test_optim");
}
