/*
 * gradcheck.c — dtnn_model_gradcheck: a model's backward against central finite differences,
 * through the public copies only (so on every backend): what a layer written outside the
 * library (an external layer, a Python one) is checked with, as the suite checks its own.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

/* A fixed pseudo-random [-1, 1] probe: the check must not depend on any other stream. */
static void fill_probe(float *p, size_t n)
{
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (float)((double)(s >> 11) * 0x1.0p-53 * 2.0 - 1.0);
    }
}

typedef struct {
    dtnn_model *m;
    const float *x;
    float *xw;              /* the input, perturbed in place for the input's entries */
    int n;
    const float *probe;
    float *y;
    size_t out;
    int64_t step;
    double eps, tol;
    dtnn_gradcheck_result *res;
} check_run;

static dtnn_status probe_loss(check_run *r, double *loss, dtnn_error *err)
{
    dtnn_model_set_step(r->m, r->step);
    dtnn_status st = dtnn_model_forward(r->m, r->xw, r->n, 1, err);
    if (st)
        return st;
    dtnn_model_read_output(r->m, r->y);
    double l = 0.0;
    for (size_t i = 0; i < r->out; i++)
        l += (double)r->y[i] * r->probe[i];
    *loss = l;
    return DTNN_OK;
}

/* Reads or writes one float of a parameter (param_offset >= 0) or of the input. */
static dtnn_status entry(check_run *r, long long param_offset, size_t j, float *v, int write,
                         dtnn_error *err)
{
    if (param_offset < 0) {
        if (write)
            r->xw[j] = *v;
        else
            *v = r->xw[j];
        return DTNN_OK;
    }
    size_t at = sizeof(float) * ((size_t)param_offset + j);
    return write ? dtnn_model_write(r->m, DTNN_REGION_PARAMS, at, v, sizeof *v, err)
                 : dtnn_model_read(r->m, DTNN_REGION_PARAMS, at, v, sizeof *v, err);
}

static dtnn_status check_tensor(check_run *r, const char *name, long long param_offset,
                                const float *analytic, size_t count, int max_entries,
                                dtnn_error *err)
{
    size_t samples = count < (size_t)max_entries ? count : (size_t)max_entries;
    for (size_t s = 0; s < samples; s++) {
        size_t j = samples == count ? s : (s * 7919 + 3) % count;
        float saved, v;
        double lp = 0.0, lm = 0.0;
        dtnn_status st = entry(r, param_offset, j, &saved, 0, err);
        v = saved + (float)r->eps;
        if (!st && !(st = entry(r, param_offset, j, &v, 1, err)))
            st = probe_loss(r, &lp, err);
        v = saved - (float)r->eps;
        if (!st && !(st = entry(r, param_offset, j, &v, 1, err)))
            st = probe_loss(r, &lm, err);
        dtnn_status restored = entry(r, param_offset, j, &saved, 1, err);
        if (st || restored)
            return st ? st : restored;
        double num = (lp - lm) / (2.0 * r->eps), a = analytic[j];
        double e = fabs(a - num) / (fabs(a) + fabs(num) + 1e-3);
        r->res->checked++;
        if (!(e <= r->tol))
            r->res->mismatches++;
        if (e > r->res->worst || (e != e && r->res->worst == r->res->worst)) {
            r->res->worst = e;
            snprintf(r->res->worst_name, sizeof r->res->worst_name, "%s[%zu]", name, j);
            r->res->worst_analytic = a;
            r->res->worst_numeric = num;
        }
    }
    return DTNN_OK;
}

dtnn_status dtnn_model_gradcheck(dtnn_model *m, const float *x, int n, double eps, double tol,
                                 int max_entries, dtnn_gradcheck_result *out, dtnn_error *err)
{
    memset(out, 0, sizeof *out);
    if (!m->built || !m->bp.training || !(eps > 0) || !(tol > 0) || max_entries < 1)
        return dtnn_error_set(err, DTNN_ERR_ARG, "gradcheck needs a model built for training, "
                              "eps and tol > 0 and max_entries >= 1");
    int c, h, w, classes;
    dtnn_model_input_shape(m, &c, &h, &w);
    const size_t in = (size_t)n * c * h * w;
    dtnn_status st = dtnn_model_forward(m, x, n, 1, err);
    if (st)
        return st;
    dtnn_model_output_shape(m, NULL, &classes);
    const size_t out_n = (size_t)n * classes, grads_n = dtnn_model_grads_length(m);
    float *probe = malloc(sizeof(float) * out_n), *y = malloc(sizeof(float) * out_n);
    float *grads = malloc(sizeof(float) * (grads_n ? grads_n : 1));
    float *gin = malloc(sizeof(float) * in), *xw = malloc(sizeof(float) * in);
    if (!probe || !y || !grads || !gin || !xw) {
        st = dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for the gradient check");
        goto out;
    }
    memcpy(xw, x, sizeof(float) * in);
    fill_probe(probe, out_n);
    check_run r = {m, x, xw, n, probe, y, out_n, dtnn_model_step(m), eps, tol, out};
    dtnn_model_zero_grad(m);
    if ((st = dtnn_model_set_output_grad(m, probe, err)) || (st = dtnn_model_backward(m, err)) ||
        (st = dtnn_model_read(m, DTNN_REGION_GRADS, 0, grads, sizeof(float) * grads_n, err)))
        goto out;
    out->worst = 0.0;
    for (int i = 0; i < dtnn_model_tensor_count(m) && !st; i++) {
        const dtnn_tensor_info *t = dtnn_model_tensor(m, i);
        if (t->kind == DTNN_TENSOR_PARAM && !t->frozen)
            st = check_tensor(&r, t->name, (long long)t->offset, grads + t->offset, t->count,
                              max_entries, err);
    }
    dtnn_error ignored;
    if (!st && m->bp.input_grad && !dtnn_model_read_input_grad(m, gin, &ignored))
        st = check_tensor(&r, "input", -1, gin, in, max_entries, err);
    dtnn_model_set_step(m, r.step + 1);
out:
    free(probe);
    free(y);
    free(grads);
    free(gin);
    free(xw);
    return st;
}
