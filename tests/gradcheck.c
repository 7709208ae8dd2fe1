/*
 * gradcheck.c — the helpers of the finite-difference tests (test_gradcheck.c and
 * gradcheck_semantics.c, one executable): small models built for training with an input
 * gradient, the check itself (testutil.c's test_gradcheck) followed by a check that a repeated
 * step gives bit-identical gradients, the check that a layer adds its input gradient when
 * another consumer wrote first, and expected option and shape errors. Tolerances and their
 * reasons: gradcheck.h and the top of test_gradcheck.c.
 */
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"

dtnn_model *model_new(int c, int h, int w)
{
    dtnn_model *m = dtnn_model_create(c, h, w);
    CHECK(m != NULL);
    return m;
}

/* Adds a layer and counts a failure (with the message) when that is refused. */
int add_layer(dtnn_model *m, const char *type, const char *name, const char *opts,
                     const int *inputs, int n_inputs)
{
    dtnn_error err;
    int id = dtnn_model_add(m, type, name, opts, inputs, n_inputs, &err);
    if (id < 0) {
        fprintf(stderr, "FAIL adding %s '%s': %s\n", type, opts, err.message);
        test_failures++;
    }
    return id;
}

int layer(dtnn_model *m, const char *type, const char *opts)
{
    return add_layer(m, type, NULL, opts, NULL, 0);
}

dtnn_status build_ex(dtnn_model *m, int max_batch, int input_grad, size_t ws_limit,
                            dtnn_error *err)
{
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = max_batch;
    bp.training = 1;
    bp.input_grad = input_grad;
    bp.seed = SEED;
    bp.workspace_limit = ws_limit;
    return dtnn_model_build(m, &bp, err);
}

int build(dtnn_model *m, int max_batch)
{
    dtnn_error err;
    dtnn_status st = build_ex(m, max_batch, 1, 0, &err);
    CHECK_OK(st, &err);
    return st == DTNN_OK;
}

/* One training step at the given dropout step: forward x, d(loss)/d(output) = probe, backward
 * into zeroed parameter gradients. */
static void train_pass(dtnn_model *m, int64_t step, const float *x, int n, const float *probe)
{
    dtnn_error err;
    int rows, cols;
    dtnn_model_set_step(m, step);
    CHECK_OK(dtnn_model_forward(m, x, n, 1, &err), &err);
    tu_output(m, &rows, &cols);
    memcpy(tu_output_grad(m), probe, sizeof(float) * rows * cols);
    dtnn_model_zero_grad(m);
    CHECK_OK(dtnn_model_backward(m, &err), &err);
}

/* Counts values that differ bit for bit (NaN-safe). */
static size_t count_differ(const float *a, const float *b, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return bad;
}

/* Step A, then step B on other data, then A again must reproduce A's gradients exactly. The
 * finite-difference check runs on fresh, zeroed buffers, so a layer that leaves part of an
 * input gradient unwritten (positions a stride skips, say) passes it, yet leaks the previous
 * step's values into every later one; this catches that. */
void check_repeatable(dtnn_model *m, int n, const char *label)
{
    int c, h, w, rows, cols;
    dtnn_model_input_shape(m, &c, &h, &w);
    const size_t in_size = (size_t)n * c * h * w;
    size_t np = 0;
    for (int i = 0; i < dtnn_model_tensor_count(m); i++) {
        const dtnn_tensor_info *t = dtnn_model_tensor(m, i);
        if (t->kind == DTNN_TENSOR_PARAM && t->offset + t->count > np)
            np = t->offset + t->count;
    }
    float *xa = malloc(sizeof(float) * in_size), *xb = malloc(sizeof(float) * in_size);
    test_fill(xa, in_size, 31);
    test_fill(xb, in_size, 37);
    dtnn_error err;
    CHECK_OK(dtnn_model_forward(m, xa, n, 1, &err), &err);
    tu_output(m, &rows, &cols);
    const size_t out_size = (size_t)rows * cols;
    float *pa = malloc(sizeof(float) * out_size), *pb = malloc(sizeof(float) * out_size);
    float *ga = malloc(sizeof(float) * (np + 1)), *dxa = malloc(sizeof(float) * in_size);
    test_fill(pa, out_size, 41);
    test_fill(pb, out_size, 43);
    const int64_t step = dtnn_model_step(m);
    const float *dx = tu_input_grad(m);

    train_pass(m, step, xa, n, pa);
    memcpy(ga, tu_grads(m), sizeof(float) * np);
    if (dx)
        memcpy(dxa, dx, sizeof(float) * in_size);
    train_pass(m, step + 1, xb, n, pb);
    train_pass(m, step, xa, n, pa);
    size_t bad = count_differ(ga, tu_grads(m), np);
    if (dx)
        bad += count_differ(dxa, dx, in_size);
    if (bad) {
        fprintf(stderr, "FAIL %s: %zu gradient values differ when step A is repeated after "
                "step B (stale gradient left from the previous step?)\n", label, bad);
        test_failures++;
    }
    free(xa);
    free(xb);
    free(pa);
    free(pb);
    free(ga);
    free(dxa);
}

/* Builds (training, input gradient), checks with step eps and tolerance tol, checks that a
 * repeated step gives the same gradients, and frees. */
void gradcheck(dtnn_model *m, int n, const char *label, double eps, double tol)
{
    if (build(m, n)) {
        test_gradcheck(m, n, label, eps, tol);
        check_repeatable(m, n, label);
    }
    dtnn_model_free(m);
}

/* Every single-input layer must add (not write) its input gradient when another consumer of
 * the same producer wrote first. Backward runs in reverse order, so here the layer under test
 * (node 0) reads the model input and a later tanh (node 1) writes the input gradient first:
 *     b = L(input); c = tanh(input); concat(flatten(b), flatten(c))
 * The layer works straight on the input, so a perturbation moves one value (kinks stay far). */
void check_accumulate(const char *type, const char *opts, int c, int h, int w,
                             double tol)
{
    dtnn_model *m = model_new(c, h, w);
    int in1[1] = {DTNN_INPUT};
    int b = add_layer(m, type, "under_test", opts, in1, 1);
    int t = add_layer(m, "tanh", "other", "", in1, 1);
    int ib[1] = {b}, it[1] = {t};
    int fb = add_layer(m, "flatten", "flat_b", "", ib, 1);
    int ft = add_layer(m, "flatten", "flat_c", "", it, 1);
    int both[2] = {fb, ft};
    add_layer(m, "concat", "cat", "", both, 2);
    char label[96];
    snprintf(label, sizeof label, "%s accumulates its input gradient", type);
    /* ReLU, max pooling and clamp have kinks; layer normalisation curves strongly over few
     * channels (its Hessian grows as 1 / variance): both take the small step. */
    const int fine = !strcmp(type, "relu") || strstr(type, "maxpool") ||
                     !strcmp(type, "clamp") || !strcmp(type, "layernorm");
    gradcheck(m, 2, label, fine ? KINK_EPS : SMOOTH_EPS, tol);
}

/* Expects dtnn_model_add to refuse; the message must contain `needle`. */
void expect_add_error(const char *type, const char *opts, const int *inputs, int n_in,
                             dtnn_status code, const char *needle)
{
    dtnn_model *m = model_new(4, 6, 6);
    dtnn_error err;
    memset(&err, 0, sizeof err);
    int id = dtnn_model_add(m, type, NULL, opts, inputs, n_in, &err);
    CHECK(id < 0);
    if (id < 0 && (err.code != code || !strstr(err.message, needle))) {
        fprintf(stderr, "FAIL %s '%s': got %s '%s', want %s containing '%s'\n", type, opts,
                dtnn_strerror(err.code), err.message, dtnn_strerror(code), needle);
        test_failures++;
    }
    if (id < 0)
        printf("error as expected: %s\n", err.message);
    dtnn_model_free(m);
}

/* Expects dtnn_model_build of m to fail with code and a message containing both needles. */
void expect_build_error(dtnn_model *m, dtnn_status code, const char *n1, const char *n2)
{
    dtnn_error err;
    memset(&err, 0, sizeof err);
    dtnn_status st = build_ex(m, 2, 1, 0, &err);
    CHECK(st != DTNN_OK);
    if (st != DTNN_OK && (st != code || !strstr(err.message, n1) || !strstr(err.message, n2))) {
        fprintf(stderr, "FAIL build: got %s '%s', want %s containing '%s' and '%s'\n",
                dtnn_strerror(st), err.message, dtnn_strerror(code), n1, n2);
        test_failures++;
    }
    if (st != DTNN_OK)
        printf("error as expected: %s\n", err.message);
    dtnn_model_free(m);
}

