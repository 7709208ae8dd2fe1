/*
 * test_constants.c — the constant operand of the one-input add, mul and sub is model state like
 * batch norm's running statistics: real training steps (forward, backward, an SGD step with
 * momentum, cross-entropy) leave it as it was while the parameters move, it has no optimizer state, and a
 * checkpoint carries it to a fresh model at its [C, H, W] shape. The numbers of the layers
 * themselves are test_gradcheck's and test_reference's. Only public calls, so it runs on
 * cpu-guarded too.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "testutil.h"

static const char *const constants[] = {"scale.constant", "rsub.constant", "shift.constant"};

/* conv -> mul 4x1x1 -> sub (reverse) 1x6x6 -> add scalar -> global_avgpool -> flatten ->
 * linear 3; input 3x6x6. */
static dtnn_model *model(uint64_t seed)
{
    dtnn_error err;
    dtnn_model *m = dtnn_model_create(3, 6, 6);
    CHECK(dtnn_model_add(m, "conv2d", "conv", "filters=4 kernel=3 padding=1", NULL, 0, &err) >=
          0);
    CHECK(dtnn_model_add(m, "mul", "scale", "const_shape=4x1x1", NULL, 0, &err) >= 0);
    CHECK(dtnn_model_add(m, "sub", "rsub", "const_shape=1x6x6 reverse=true", NULL, 0, &err) >=
          0);
    CHECK(dtnn_model_add(m, "add", "shift", "const_shape=1 const_value=0.5", NULL, 0, &err) >=
          0);
    CHECK(dtnn_model_add(m, "global_avgpool", NULL, "", NULL, 0, &err) >= 0);
    CHECK(dtnn_model_add(m, "flatten", NULL, "", NULL, 0, &err) >= 0);
    CHECK(dtnn_model_add(m, "linear", "fc", "outputs=3", NULL, 0, &err) >= 0);
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = 2;
    bp.training = 1;
    bp.seed = seed;
    bp.device = tu_device();
    CHECK_OK(dtnn_model_build(m, &bp, &err), &err);
    return m;
}

/* All constants, one after another (the caller frees). */
static float *read_constants(dtnn_model *m, size_t *n)
{
    float *v = malloc(sizeof(float) * 64);
    *n = 0;
    for (size_t k = 0; k < sizeof constants / sizeof constants[0]; k++) {
        const dtnn_tensor_info *t = dtnn_model_tensor_by_name(m, constants[k]);
        CHECK(t != NULL && t->kind == DTNN_TENSOR_BUFFER && *n + t->count <= 64);
        dtnn_error err;
        if (t && *n + t->count <= 64) {
            CHECK_OK(dtnn_model_tensor_read(m, t, v + *n, &err), &err);
            *n += t->count;
        }
    }
    return v;
}

int main(void)
{
    dtnn_error err;
    dtnn_model *a = model(1);
    /* the defaults: mul 1, sub 0, add its const_value */
    size_t n;
    float *c0 = read_constants(a, &n);
    CHECK(n == 4 + 36 + 1 && c0[0] == 1.0f && c0[4] == 0.0f && c0[40] == 0.5f);
    free(c0);
    for (size_t k = 0; k < sizeof constants / sizeof constants[0]; k++) {
        const dtnn_tensor_info *t = dtnn_model_tensor_by_name(a, constants[k]);
        float v[36];
        test_fill(v, t ? t->count : 0, 10u + (unsigned)k);
        if (t)
            CHECK_OK(dtnn_model_tensor_write(a, t, v, &err), &err);
    }
    c0 = read_constants(a, &n);

    dtnn_opt_params op;
    dtnn_opt_params_default(&op, DTNN_OPT_SGD);
    op.momentum = 0.9f;
    dtnn_optimizer *o = dtnn_optimizer_create(a, &op, &err);
    CHECK(o != NULL);
    const dtnn_tensor_info *fc = dtnn_model_tensor_by_name(a, "fc.weight");
    float w0[12], w1[12];
    CHECK(fc && fc->count == 12);
    CHECK_OK(dtnn_model_tensor_read(a, fc, w0, &err), &err);
    float x[2 * 3 * 6 * 6];
    const int32_t labels[2] = {0, 2};
    dtnn_loss_params lp;
    dtnn_loss_params_default(&lp);
    dtnn_metrics metrics;
    for (int s = 0; o && s < 2; s++) {
        test_fill(x, sizeof x / sizeof x[0], 20u + (unsigned)s);
        CHECK_OK(dtnn_model_forward(a, x, 2, 1, &err), &err);
        CHECK_OK(dtnn_model_loss(a, labels, 2, &lp, 0.5f, &metrics, &err), &err);
        dtnn_model_zero_grad(a);
        CHECK_OK(dtnn_model_backward(a, &err), &err);
        CHECK_OK(dtnn_optimizer_step(o, 0.1f, &err), &err);
    }
    CHECK_OK(dtnn_model_tensor_read(a, fc, w1, &err), &err);
    CHECK(memcmp(w0, w1, sizeof w0) != 0);
    size_t n1;
    float *c1 = read_constants(a, &n1);
    CHECK(n1 == n && !memcmp(c0, c1, sizeof(float) * n));
    if (memcmp(c0, c1, sizeof(float) * n))
        fprintf(stderr, "FAIL: training changed a constant operand\n");
    free(c1);

    /* through a checkpoint into a model of other weights */
    char path[512];
    const char *base = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/dtnn_constants_%d.safetensors", base && *base ? base : "/tmp",
             (int)getpid());
    CHECK_OK(dtnn_checkpoint_save(path, a, o, NULL, NULL, &err), &err);
    st_file f;
    CHECK_OK(st_read(path, &f, &err), &err);
    const st_tensor *t = st_find(&f, "scale.constant");
    CHECK(t && !strcmp(t->dtype, "F32") && t->ndim == 3 && t->dims[0] == 4 && t->dims[1] == 1 &&
          t->dims[2] == 1);
    t = st_find(&f, "rsub.constant");
    CHECK(t && t->ndim == 3 && t->dims[0] == 1 && t->dims[1] == 6 && t->dims[2] == 6);
    CHECK(st_find(&f, "optimizer.momentum_buffer.scale.constant") == NULL);
    CHECK(st_find(&f, "optimizer.momentum_buffer.fc.weight") != NULL);
    st_free(&f);
    dtnn_model *b = model(99);
    CHECK_OK(dtnn_checkpoint_load(path, b, NULL, NULL, NULL, &err), &err);
    float *c2 = read_constants(b, &n1);
    CHECK(n1 == n && !memcmp(c0, c2, sizeof(float) * n));
    test_compare("constants after checkpoint load", c2, c0, n, 0, 0);
    free(c2);
    unlink(path);

    free(c0);
    dtnn_optimizer_free(o);
    dtnn_model_free(a);
    dtnn_model_free(b);
    return test_finish("test_constants");
}
