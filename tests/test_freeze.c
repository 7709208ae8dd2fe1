/*
 * test_freeze.c — frozen parameters (dtnn_build_params.freeze, --freeze) and eval-mode frozen
 * batch norms (freeze_bn), in the model itself:
 *  - the layout: trainable parameters first, the gradient buffer only as long as they are,
 *    frozen tensors flagged, a pattern that matches nothing or freezes everything refused;
 *  - finite differences of the trainable parameters and of the input through frozen layers:
 *    a frozen convolution (input gradient only), a frozen batch norm in training mode, and one
 *    in eval mode (freeze_bn, whose backward is the running statistics' scale);
 *  - eval mode in training: the running statistics and the batch count stay as they were, and
 *    the output is the inference output;
 *  - a frozen prefix that no gradient needs is skipped, and the trainable part still checks.
 * The end-to-end behaviour (bitwise frozen tensors, PyTorch with requires_grad=False, MPI,
 * resume) is tests/mpi_freeze.sh's.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define EPS 1e-2
#define TOL 5e-2    /* models with batch norm, as test_gradcheck */

static dtnn_model *small_model(void)
{
    dtnn_error err;
    dtnn_model *m = dtnn_model_create(3, 5, 4);
    CHECK(m != NULL);
    CHECK(dtnn_model_add(m, "conv2d", "conv1", "filters=4 kernel=3 padding=1 bias=false", NULL,
                         0, &err) >= 0);
    CHECK(dtnn_model_add(m, "batchnorm", "bn1", "", NULL, 0, &err) >= 0);
    CHECK(dtnn_model_add(m, "tanh", NULL, "", NULL, 0, &err) >= 0);
    CHECK(dtnn_model_add(m, "conv2d", "conv2", "filters=3 kernel=1", NULL, 0, &err) >= 0);
    return m;
}

static dtnn_status build(dtnn_model *m, const char *const *freeze, int n_freeze, int freeze_bn,
                         int input_grad, dtnn_error *err)
{
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = 3;
    bp.training = 1;
    bp.input_grad = input_grad;
    bp.seed = 99;
    bp.device = tu_device();
    bp.freeze = freeze;
    bp.n_freeze = n_freeze;
    bp.freeze_bn = freeze_bn;
    return dtnn_model_build(m, &bp, err);
}

static void check_layout(void)
{
    static const char *const freeze[] = {"conv1.*", "bn1.*"};
    dtnn_error err;
    dtnn_model *m = small_model();
    CHECK_OK(build(m, freeze, 2, 0, 0, &err), &err);
    size_t trainable = 0;
    for (int i = 0; i < dtnn_model_tensor_count(m); i++) {
        const dtnn_tensor_info *t = dtnn_model_tensor(m, i);
        if (t->kind != DTNN_TENSOR_PARAM)
            continue;
        const int want = !strncmp(t->name, "conv1.", 6) || !strncmp(t->name, "bn1.", 4);
        if (t->frozen != want) {
            fprintf(stderr, "FAIL: %s frozen %d, expected %d\n", t->name, t->frozen, want);
            test_failures++;
        }
        if (!t->frozen) {
            trainable += t->count;
            CHECK(t->offset + t->count <= dtnn_model_grads_length(m));
        } else {
            CHECK(t->offset >= dtnn_model_grads_length(m));
        }
    }
    CHECK(trainable == dtnn_model_trainable_count(m));
    CHECK(trainable == 3 * 4 + 3);      /* conv2's weight and bias */
    CHECK(dtnn_model_grads_length(m) < dtnn_model_params_padded(m));
    float g[64];
    CHECK(dtnn_model_read(m, DTNN_REGION_GRADS, 0, g,
                          sizeof(float) * dtnn_model_grads_length(m), &err) == DTNN_OK);
    CHECK(dtnn_model_read(m, DTNN_REGION_GRADS, 0, g,
                          sizeof(float) * (dtnn_model_grads_length(m) + 1), &err) != DTNN_OK);
    dtnn_model_free(m);

    static const char *const nothing[] = {"conv9.*"};
    m = small_model();
    CHECK(build(m, nothing, 1, 0, 0, &err) == DTNN_ERR_ARG);
    CHECK(strstr(err.message, "conv9.*") != NULL);
    dtnn_model_free(m);
    static const char *const all[] = {"*"};
    m = small_model();
    CHECK(build(m, all, 1, 0, 0, &err) == DTNN_ERR_ARG);
    CHECK(strstr(err.message, "no parameter to train") != NULL);
    dtnn_model_free(m);
}

/* Finite differences with the first conv (and batch norm) frozen, the input gradient on, so
 * every frozen layer's backward runs for its input gradient. */
static void check_gradients(void)
{
    static const char *const conv_only[] = {"conv1.*"};
    static const char *const conv_bn[] = {"conv1.*", "bn1.*"};
    struct {
        const char *const *freeze;
        int n, freeze_bn, input_grad;
        const char *label;
    } cases[] = {
        {conv_only, 1, 0, 1, "frozen conv1 (input gradient only)"},
        {conv_bn, 2, 0, 1, "frozen conv1, bn1 in training mode"},
        {conv_bn, 2, 1, 1, "frozen conv1, bn1 in eval mode (freeze_bn)"},
        {conv_bn, 2, 1, 0, "frozen prefix skipped (no input gradient)"},
        {conv_bn, 2, 0, 0, "frozen prefix in training mode skipped"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        dtnn_error err;
        dtnn_model *m = small_model();
        dtnn_status st = build(m, cases[k].freeze, cases[k].n, cases[k].freeze_bn,
                               cases[k].input_grad, &err);
        CHECK_OK(st, &err);
        if (st == DTNN_OK)
            test_gradcheck(m, 3, cases[k].label, EPS, TOL);
        dtnn_model_free(m);
    }
}

/* freeze_bn in a training forward: the running statistics untouched and the same output as
 * an inference forward. */
static void check_eval_mode(void)
{
    static const char *const conv_bn[] = {"conv1.*", "bn1.*"};
    dtnn_error err;
    dtnn_model *m = small_model();
    CHECK_OK(build(m, conv_bn, 2, 1, 0, &err), &err);
    float x[3 * 3 * 5 * 4];
    test_fill(x, sizeof x / sizeof x[0], 5);
    const size_t bytes = dtnn_model_buffer_bytes(m);
    unsigned char *before = tu_copy_region(m, DTNN_REGION_BUFFERS);
    CHECK_OK(dtnn_model_forward(m, x, 3, 0, &err), &err);
    float *eval = tu_copy_output(m);
    CHECK_OK(dtnn_model_forward(m, x, 3, 1, &err), &err);
    float *train = tu_copy_output(m);
    unsigned char *after = tu_copy_region(m, DTNN_REGION_BUFFERS);
    CHECK(memcmp(before, after, bytes) == 0);
    test_compare("freeze_bn: training forward = inference forward", train, eval, 3 * 3 * 5 * 4,
                 0.0, 0.0);
    free(before);
    free(after);
    free(eval);
    free(train);
    dtnn_model_free(m);
}

int main(void)
{
    check_layout();
    check_gradients();
    check_eval_mode();
    return test_finish("test_freeze");
}
