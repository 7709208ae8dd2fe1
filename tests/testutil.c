/*
 * testutil.c — see testutil.h.
 */
#include "testutil.h"
#include "model/model_internal.h"
#include "optim/optimizer_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int test_failures = 0;

int test_compare(const char *label, const float *got, const float *want, size_t n, double atol,
                 double rtol)
{
    double max_abs = 0.0, max_rel = 0.0;
    size_t bad = 0, first_bad = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        double r = d / (fabs((double)want[i]) + 1e-12);
        if (!(d <= atol + rtol * fabs((double)want[i]))) {
            if (!bad)
                first_bad = i;
            bad++;
        }
        if (d > max_abs || d != d)
            max_abs = d;
        if (r > max_rel && fabs((double)want[i]) > atol)
            max_rel = r;
    }
    printf("%-48s n=%-8zu max abs %.3g  max rel %.3g  (tol %.1g + %.1g*|ref|)%s\n", label, n,
           max_abs, max_rel, atol, rtol, bad ? "  FAIL" : "");
    if (bad) {
        fprintf(stderr, "FAIL %s: %zu of %zu values beyond tolerance; first at [%zu]: got %.8g, "
                "want %.8g\n", label, bad, n, first_bad, got[first_bad], want[first_bad]);
        test_failures++;
        return 0;
    }
    return 1;
}

void test_fill(float *x, size_t n, unsigned seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
}

int test_finish(const char *name)
{
    if (test_failures) {
        printf("%s: %d check(s) FAILED\n", name, test_failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

static double probe_loss(dtnn_model *m, const float *x, int n, const float *probe)
{
    dtnn_error err;
    if (dtnn_model_forward(m, x, n, 1, &err) != DTNN_OK) {
        fprintf(stderr, "gradcheck forward: %s\n", err.message);
        return NAN;
    }
    int rows, cols;
    const float *y = tu_output(m, &rows, &cols);
    double l = 0.0;
    for (size_t i = 0; i < (size_t)rows * cols; i++)
        l += (double)y[i] * probe[i];
    return l;
}

/* Checks up to 24 evenly spread entries of one tensor; returns mismatches. */
static int check_entries(dtnn_model *m, const float *x, int n, const float *probe, float *values,
                         const float *analytic, size_t count, const char *what, double eps,
                         double tol)
{
    size_t samples = count < 24 ? count : 24;
    double worst = 0.0;
    int bad = 0;
    for (size_t s = 0; s < samples; s++) {
        size_t j = samples == count ? s : (s * 7919 + 3) % count;
        float saved = values[j];
        values[j] = saved + (float)eps;
        double lp = probe_loss(m, x, n, probe);
        values[j] = saved - (float)eps;
        double lm = probe_loss(m, x, n, probe);
        values[j] = saved;
        double num = (lp - lm) / (2.0 * eps);
        double a = analytic[j];
        double e = fabs(a - num) / (fabs(a) + fabs(num) + 1e-3);
        if (e > worst)
            worst = e;
        if (!(e <= tol)) {
            if (bad < 3)
                fprintf(stderr, "  %s[%zu]: analytic %.6g numeric %.6g\n", what, j, a, num);
            bad++;
        }
    }
    printf("  gradcheck %-40s %zu/%zu checked, worst rel err %.2e%s\n", what, samples, count,
           worst, bad ? "  FAIL" : "");
    return bad;
}

int test_gradcheck(dtnn_model *m, int n, const char *label, double eps, double tol)
{
    dtnn_error err;
    int c, h, w;
    dtnn_model_input_shape(m, &c, &h, &w);
    size_t in_size = (size_t)n * c * h * w;
    float *x = malloc(sizeof(float) * in_size);
    test_fill(x, in_size, 11);
    /* backward() advances the dropout stream; the finite differences must see the same masks
     * as the analytic pass, so they run at the step of the first forward. */
    int64_t step = dtnn_model_step(m);
    CHECK_OK(dtnn_model_forward(m, x, n, 1, &err), &err);
    int rows, cols;
    tu_output(m, &rows, &cols);
    size_t out_size = (size_t)rows * cols;
    float *probe = malloc(sizeof(float) * out_size);
    test_fill(probe, out_size, 23);
    memcpy(tu_output_grad(m), probe, sizeof(float) * out_size);
    dtnn_model_zero_grad(m);
    CHECK_OK(dtnn_model_backward(m, &err), &err);
    dtnn_model_set_step(m, step);

    /* Frozen parameters (--freeze) have no gradient: only the trainable ones are checked. */
    size_t np = dtnn_model_grads_length(m);
    float *grads = malloc(sizeof(float) * (np ? np : 1));
    memcpy(grads, tu_grads(m), sizeof(float) * np);
    float *gin = NULL;
    if (tu_input_grad(m)) {
        gin = malloc(sizeof(float) * in_size);
        memcpy(gin, tu_input_grad(m), sizeof(float) * in_size);
    }
    printf("gradcheck %s (batch %d)\n", label, n);
    int bad = 0;
    for (int i = 0; i < dtnn_model_tensor_count(m); i++) {
        const dtnn_tensor_info *t = dtnn_model_tensor(m, i);
        if (t->kind != DTNN_TENSOR_PARAM || t->frozen)
            continue;
        bad += check_entries(m, x, n, probe, tu_params(m) + t->offset,
                             grads + t->offset, t->count, t->name, eps, tol);
    }
    if (gin)
        bad += check_entries(m, x, n, probe, x, gin, in_size, "input", eps, tol);
    if (bad) {
        fprintf(stderr, "FAIL gradcheck %s: %d mismatches\n", label, bad);
        test_failures++;
    }
    free(x);
    free(probe);
    free(grads);
    free(gin);
    return bad;
}

static void host_only(const dtnn_model *m)
{
    if (!m->be->host_memory) {
        fprintf(stderr, "FAIL: a white-box test view of backend '%s', whose memory the host may "
                "not touch\n", m->be->name);
        abort();
    }
}

float *tu_params(dtnn_model *m)
{
    host_only(m);
    return m->params;
}

float *tu_grads(dtnn_model *m)
{
    host_only(m);
    return m->grads;
}

unsigned char *tu_buffers(dtnn_model *m)
{
    host_only(m);
    return m->buffers;
}

const float *tu_output(const dtnn_model *m, int *n, int *classes)
{
    host_only(m);
    dtnn_model_output_shape(m, n, classes);
    return m->layers[m->n_layers - 1]->y;
}

float *tu_output_grad(dtnn_model *m)
{
    host_only(m);
    m->loss_done = 1;
    return m->layers[m->n_layers - 1]->dy;
}

const float *tu_input_grad(const dtnn_model *m)
{
    host_only(m);
    return m->input_grad;
}

float *tu_opt_state(dtnn_optimizer *o)
{
    host_only(o->model);
    return o->state;
}

const char *tu_device(void)
{
    const char *d = getenv("DTNN_DEVICE");
    return d && *d ? d : "cpu";
}

void *tu_copy_region(const dtnn_model *m, dtnn_region r)
{
    size_t bytes;
    dtnn_error err;
    void *v = model_region_to_host(m, r, &bytes, &err);
    if (!v) {
        fprintf(stderr, "FAIL: copying a model region: %s\n", err.message);
        abort();
    }
    return v;
}

float *tu_copy_output(const dtnn_model *m)
{
    int n, k;
    dtnn_model_output_shape(m, &n, &k);
    float *v = malloc(sizeof(float) * (size_t)n * k + 1);
    if (!v)
        abort();
    dtnn_model_read_output(m, v);
    return v;
}

float *tu_copy_input_grad(const dtnn_model *m)
{
    int c, h, w, n;
    dtnn_model_input_shape(m, &c, &h, &w);
    dtnn_model_output_shape(m, &n, NULL);
    float *v = malloc(sizeof(float) * (size_t)n * c * h * w + 1);
    dtnn_error err;
    if (!v || dtnn_model_read_input_grad(m, v, &err)) {
        fprintf(stderr, "FAIL: copying the input gradient: %s\n", v ? err.message : "no memory");
        abort();
    }
    return v;
}

dtnn_model *tu_small_net(const char *device)
{
    dtnn_error err;
    dtnn_model *m = dtnn_model_create(1, 8, 8);
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = 4;
    bp.device = device;
    bp.optimizer_slots = 1;
    if (dtnn_model_add(m, "conv2d", "conv", "filters=4 kernel=3", NULL, 0, &err) < 0 ||
        dtnn_model_add(m, "flatten", NULL, "", NULL, 0, &err) < 0 ||
        dtnn_model_add(m, "linear", "fc", "outputs=3", NULL, 0, &err) < 0 ||
        dtnn_model_build(m, &bp, &err) != DTNN_OK) {
        fprintf(stderr, "FAIL: the small net on %s: %s\n", device, err.message);
        test_failures++;
        dtnn_model_free(m);
        return NULL;
    }
    return m;
}

void tu_small_net_grads(dtnn_model *m, dtnn_grad_sync *gs, float loss_scale, float *out)
{
    dtnn_error err;
    float x[4 * 64];
    int32_t y[4] = {0, 1, 2, 1};
    test_fill(x, 4 * 64, 5);
    dtnn_loss_params lp;
    dtnn_loss_params_default(&lp);
    dtnn_model_zero_grad(m);
    if (gs)
        dtnn_grad_sync_begin(gs);
    CHECK_OK(dtnn_model_forward(m, x, 4, 1, &err), &err);
    CHECK_OK(dtnn_model_loss(m, y, 4, &lp, loss_scale, NULL, &err), &err);
    CHECK_OK(dtnn_model_backward(m, &err), &err);
    if (gs)
        CHECK_OK(dtnn_grad_sync_finish(gs, &err), &err);
    CHECK_OK(dtnn_model_read(m, DTNN_REGION_GRADS, 0, out,
                             sizeof(float) * dtnn_model_grads_length(m), &err), &err);
}

int tu_same_bits(const char *label, const void *got, const void *want, size_t bytes)
{
    const int bad = memcmp(got, want, bytes) != 0;
    printf("%-64s %s\n", label, bad ? "differ  FAIL" : "identical");
    test_failures += bad;
    return !bad;
}

int tu_kernels_unavailable(const char *test)
{
    dtnn_error err = {0};
    if (dtnn_cpu_kernels_check(&err) == DTNN_OK)
        return 0;
    printf("%s: skipped: %s\n", test, err.message);
    return 1;
}
