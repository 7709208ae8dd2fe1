/*
 * test_fusion.c — a ReLU fused into the batch norm or add before it, and a two-input add (with
 * its ReLU) fused into the batch norm feeding it (model.c, plan_fusion), compute what the
 * layers compute on their own (dtnn_build_params.unfused): outputs,
 * parameter and input gradients, batch-norm running statistics, in training and in evaluation.
 * The ReLU's decision is recomputed (batch norm) or read (add) in the same float operations,
 * so the two agree to rounding of the folded constants, and the fused model must not be
 * slower to plan or bigger. Also checks which ReLUs are fused: not one whose producer feeds
 * another layer too, nor a second ReLU in a row, and a batch norm on flat features is; and
 * which adds: with the model input as the residual, with and without a ReLU after, not after
 * a batch norm that already does a ReLU, not when the residual comes after the batch norm, not
 * an add of a constant.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

/* Batch norm (2d and 1d) and a 3-input add, each followed by a ReLU; a batch norm whose
 * output also feeds the add (no fusion there), a ReLU after a ReLU (not fused twice). */
static const char *const MIXED_MODEL =
    "[input]\nshape = 3x8x8\n"
    "[conv2d]\nname = c1\nfilters = 6\nkernel = 3\npadding = 1\n"
    "[batchnorm]\nname = bn1\n"
    "[relu]\nname = r1\n"
    "[conv2d]\nname = c2\nfilters = 6\nkernel = 3\npadding = 1\n"
    "[batchnorm]\nname = bn2\n"
    "[relu]\nname = r2\n"
    "[relu]\nname = r2b\n"
    "[conv2d]\nname = c3\nfilters = 6\nkernel = 1\ninputs = r1\n"
    "[batchnorm]\nname = bn3\n"
    "[relu]\nname = r3\n"
    "[add]\nname = sum\ninputs = r2b, r3, bn3\n"
    "[relu]\nname = r4\n"
    "[flatten]\n"
    "[linear]\nname = fc1\nout_features = 12\n"
    "[batchnorm]\nname = bn4\n"
    "[relu]\nname = r5\n"
    "[linear]\nname = fc2\nout_features = 5\n";

/* Adds after batch norms: bn1 + the model input (no ReLU after; conv c1 also reads the input,
 * so its gradient there adds to the fused one), bn3 + r2 + ReLU (bn2 does r2, so it cannot do
 * the add too), bn4 + c5 (c5 comes after bn4: the add stays on its own), bn5 + a constant and a
 * ReLU (an add of a constant has the binary kernels, which fuse nothing). */
static const char *const RESIDUAL_MODEL =
    "[input]\nshape = 4x8x8\n"
    "[conv2d]\nname = c1\nfilters = 4\nkernel = 3\npadding = 1\n"
    "[batchnorm]\nname = bn1\n"
    "[add]\nname = s1\ninputs = bn1, input\n"
    "[conv2d]\nname = c2\nfilters = 4\nkernel = 3\npadding = 1\n"
    "[batchnorm]\nname = bn2\n"
    "[relu]\nname = r2\n"
    "[conv2d]\nname = c3\nfilters = 4\nkernel = 1\ninputs = s1\n"
    "[batchnorm]\nname = bn3\n"
    "[add]\nname = s2\ninputs = r2, bn3\n"
    "[relu]\nname = r3\n"
    "[conv2d]\nname = c4\nfilters = 4\nkernel = 1\n"
    "[batchnorm]\nname = bn4\n"
    "[conv2d]\nname = c5\nfilters = 4\nkernel = 1\ninputs = r3\n"
    "[add]\nname = s3\ninputs = bn4, c5\n"
    "[relu]\nname = r4\n"
    "[batchnorm]\nname = bn5\n"
    "[add]\nname = shift\nconst_shape = 4x1x1\nconst_value = -0.2\n"
    "[relu]\nname = r6\n"
    "[flatten]\n"
    "[linear]\nname = fc\nout_features = 3\n";

/* Squeeze-excitation blocks (plan_se_fusion): se1 as torchvision writes it (global average
 * pool, ReLU, sigmoid; the scaled map first), se2 as an ONNX import would (ReduceMean, a
 * convolution without bias, SiLU, hardsigmoid; the gate first), its map also read by the add
 * after it, so that the block's input gradient adds to the add's. The third block's gate also
 * feeds an add, so it stays layer by layer. Fused and unfused differ in rounding only: the
 * same float operations in the same order, but for ReduceMean (a double sum, unfused) and the
 * 1x1 convolutions' products, here a fully connected layer's, and dx = dy s + dmean / HW in
 * one expression instead of two passes: a few ulp, well inside compare()'s 1e-6 + 1e-5 |x|. */
static const char *const SE_MODEL =
    "[input]\nshape = 6x5x5\n"
    "[conv2d]\nname = c1\nfilters = 8\nkernel = 3\npadding = 1\n"
    "[batchnorm]\nname = bn1\n"
    "[silu]\nname = a1\n"
    "[global_avgpool]\nname = p1\n"
    "[conv2d]\nname = f1a\nfilters = 3\nkernel = 1\n"
    "[relu]\nname = r1\n"
    "[conv2d]\nname = f1b\nfilters = 8\nkernel = 1\n"
    "[sigmoid]\nname = g1\n"
    "[mul]\nname = se1\ninputs = a1, g1\n"
    "[reduce]\nname = p2\naxes = spatial\nop = mean\n"
    "[conv2d]\nname = f2a\nfilters = 2\nkernel = 1\nbias = false\n"
    "[silu]\nname = r2\n"
    "[conv2d]\nname = f2b\nfilters = 8\nkernel = 1\n"
    "[hardsigmoid]\nname = g2\n"
    "[mul]\nname = se2\ninputs = g2, se1\n"
    "[add]\nname = res\ninputs = se2, se1\n"
    "[global_avgpool]\nname = p3\n"
    "[conv2d]\nname = f3a\nfilters = 4\nkernel = 1\n"
    "[relu]\nname = r3\n"
    "[conv2d]\nname = f3b\nfilters = 8\nkernel = 1\n"
    "[sigmoid]\nname = g3\n"
    "[mul]\nname = se3\ninputs = res, g3\n"
    "[add]\nname = tail\ninputs = se3, g3\n"
    "[flatten]\n"
    "[linear]\nname = fc\nout_features = 5\n";

static dtnn_model *build(const char *spec, int unfused, int batch, dtnn_error *err)
{
    dtnn_model *m = dtnn_model_from_spec(spec, 0, 0, 0, 0, err);
    if (!m)
        return NULL;
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = batch;
    bp.input_grad = 1;
    bp.seed = 7;
    bp.unfused = unfused;
    bp.device = tu_device();
    if (dtnn_model_build(m, &bp, err)) {
        dtnn_model_free(m);
        return NULL;
    }
    return m;
}

/* test_compare of two host copies, which it frees. */
static void compare_copies(const char *what, float *got, float *want, size_t n, double atol,
                           double rtol)
{
    test_compare(what, got, want, n, atol, rtol);
    free(got);
    free(want);
}

static const char *method_of(const dtnn_model *m, const char *name)
{
    for (int i = 0; i < dtnn_model_layer_count(m); i++) {
        dtnn_layer_info li;
        dtnn_model_layer_info(m, i, &li);
        if (!strcmp(li.name, name))
            return li.method;
    }
    return "(missing)";
}

/* Two training steps' forward and backward (the second with the running statistics of the
 * first, the gradients summed) and one evaluation forward, compared between the two builds. */
static void compare(const char *label, const char *spec, int batch)
{
    dtnn_error err = {0};
    dtnn_model *fused = build(spec, 0, batch, &err);
    CHECK(fused != NULL);
    dtnn_model *plain = fused ? build(spec, 1, batch, &err) : NULL;
    CHECK(plain != NULL);
    if (!fused || !plain) {
        fprintf(stderr, "%s: %s\n", label, err.message);
        dtnn_model_free(fused);
        dtnn_model_free(plain);
        return;
    }
    int c, h, w;
    dtnn_model_input_shape(fused, &c, &h, &w);
    const size_t in = (size_t)c * h * w * batch;
    float *x = malloc(sizeof(float) * in);
    test_fill(x, in, 11);
    dtnn_model *ms[2] = {fused, plain};
    int classes = 0;
    for (int k = 0; k < 2; k++)
        dtnn_model_zero_grad(ms[k]);
    char what[128];
    for (int step = 0; step < 2; step++) {
        for (int k = 0; k < 2; k++) {
            CHECK_OK(dtnn_model_forward(ms[k], x, batch, 1, &err), &err);
            int n;
            dtnn_model_output_shape(ms[k], &n, &classes);
            float *dy = malloc(sizeof(float) * (size_t)n * classes);
            test_fill(dy, (size_t)n * classes, 23 + step);
            CHECK_OK(dtnn_model_set_output_grad(ms[k], dy, &err), &err);
            free(dy);
        }
        snprintf(what, sizeof what, "%s step %d: output", label, step);
        compare_copies(what, tu_copy_output(fused), tu_copy_output(plain),
                       (size_t)batch * classes, 1e-6, 1e-5);
        for (int k = 0; k < 2; k++)
            CHECK_OK(dtnn_model_backward(ms[k], &err), &err);
        snprintf(what, sizeof what, "%s step %d: input gradient", label, step);
        compare_copies(what, tu_copy_input_grad(fused), tu_copy_input_grad(plain), in, 1e-6,
                       1e-5);
    }
    snprintf(what, sizeof what, "%s: parameter gradients", label);
    compare_copies(what, tu_copy_region(fused, DTNN_REGION_GRADS),
                   tu_copy_region(plain, DTNN_REGION_GRADS), dtnn_model_param_count(fused), 1e-6,
                   1e-5);
    unsigned char *fb = tu_copy_region(fused, DTNN_REGION_BUFFERS);
    unsigned char *pb = tu_copy_region(plain, DTNN_REGION_BUFFERS);
    /* running means and variances (the float buffers; num_batches_tracked must match too) */
    for (int t = 0; t < dtnn_model_tensor_count(fused); t++) {
        const dtnn_tensor_info *a = dtnn_model_tensor(fused, t), *b = dtnn_model_tensor(plain, t);
        if (a->kind != DTNN_TENSOR_BUFFER)
            continue;
        if (a->dtype == DTNN_F32) {
            snprintf(what, sizeof what, "%s: %s", label, a->name);
            test_compare(what, (const float *)(void *)(fb + a->offset),
                         (const float *)(void *)(pb + b->offset), a->count, 1e-7, 1e-6);
        } else {
            CHECK(!memcmp(fb + a->offset, pb + b->offset, 8));
        }
    }
    free(fb);
    free(pb);
    for (int k = 0; k < 2; k++)
        CHECK_OK(dtnn_model_forward(ms[k], x, batch, 0, &err), &err);
    snprintf(what, sizeof what, "%s: evaluation output", label);
    compare_copies(what, tu_copy_output(fused), tu_copy_output(plain), (size_t)batch * classes,
                   1e-6, 1e-5);
    dtnn_memory mf, mp;
    dtnn_model_memory(fused, &mf);
    dtnn_model_memory(plain, &mp);
    CHECK(mf.activations <= mp.activations);
    free(x);
    dtnn_model_free(fused);
    dtnn_model_free(plain);
}

typedef struct {
    const char *layer, *method;
} expected_method;

/* Builds `spec`, fused or not, and checks the method (dtnn_layer_info) of each listed layer. */
static void check_methods(const char *spec, int unfused, const expected_method *e, size_t n)
{
    dtnn_error err = {0};
    dtnn_model *m = build(spec, unfused, 2, &err);
    CHECK(m != NULL);
    for (size_t i = 0; m && i < n; i++) {
        const char *got = method_of(m, e[i].layer);
        if (strcmp(got, e[i].method)) {
            fprintf(stderr, "FAIL %s%s: layer %s runs '%s', expected '%s'\n", spec,
                    unfused ? " (unfused)" : "", e[i].layer, got, e[i].method);
            test_failures++;
        }
    }
    dtnn_model_free(m);
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static void check_plan(const char *path)
{
    static const expected_method fused[] = {
        {"bn1", "+relu"}, {"r1", "fused"}, {"bn2", "+relu"}, {"r2", "fused"},
        {"r2b", ""},                    /* after a ReLU: runs on its own */
        {"bn3", ""},                    /* feeds r3 and the add */
        {"r3", ""},       {"sum", "+relu"}, {"r4", "fused"},
        {"bn4", "+relu"},               /* BatchNorm1d */
        {"r5", "fused"},
    };
    static const expected_method unfused[] = {{"bn1", ""}, {"r1", ""}, {"sum", ""}};
    check_methods(path, 0, fused, COUNT(fused));
    check_methods(path, 1, unfused, COUNT(unfused));
}

static void check_residual_plan(const char *path)
{
    static const expected_method fused[] = {
        {"bn1", "+add"},      {"s1", "fused"}, {"bn2", "+relu"}, {"bn3", "+add+relu"},
        {"s2", "fused"},      {"r3", "fused"}, {"bn4", ""},      {"s3", "+relu"},
        {"r4", "fused"},      {"bn5", ""},     {"shift", ""},    {"r6", ""},
    };
    /* every block, the downsampling ones too (their shortcut comes before bn2) */
    static const expected_method resnet20[] = {
        {"layer1.0.bn2", "+add+relu"}, {"layer2.0.bn2", "+add+relu"}, {"layer3.2.add", "fused"}};
    check_methods(path, 0, fused, COUNT(fused));
    check_methods("resnet20", 0, resnet20, COUNT(resnet20));
}

static void check_se_plan(const char *path)
{
    static const expected_method fused[] = {
        {"se1", "squeeze-excitation"}, {"p1", "fused"}, {"f1a", "fused"}, {"r1", "fused"},
        {"f1b", "fused"}, {"g1", "fused"}, {"se2", "squeeze-excitation"}, {"p2", "fused"},
        {"g2", "fused"}, {"se3", ""}, {"p3", ""}, {"g3", ""},
    };
    static const expected_method unfused[] = {{"se1", ""}, {"p1", ""}, {"se2", ""}};
    /* torchvision's SqueezeExcitation in each zoo model that has it */
    static const expected_method mobilenet[] = {
        {"features.4.block.2.scale", "squeeze-excitation"},
        {"features.4.block.2.fc1", "fused"}};
    static const expected_method efficientnet[] = {
        {"features.4.0.block.2.scale", "squeeze-excitation"},
        {"features.4.0.block.2.avgpool", "fused"}};
    check_methods(path, 0, fused, COUNT(fused));
    check_methods(path, 1, unfused, COUNT(unfused));
    check_methods("mobilenet_v3_large", 0, mobilenet, COUNT(mobilenet));
    check_methods("efficientnet_v2_s", 0, efficientnet, COUNT(efficientnet));
}

/* A NaN before a fused ReLU stays NaN, as after ReLU on its own (a diverging run must show). */
static void check_nan(const char *path)
{
    dtnn_error err = {0};
    dtnn_model *m = build(path, 0, 2, &err);
    CHECK(m != NULL);
    if (!m)
        return;
    int c, h, w;
    dtnn_model_input_shape(m, &c, &h, &w);
    const size_t in = (size_t)c * h * w * 2;
    float *x = malloc(sizeof(float) * in);
    test_fill(x, in, 5);
    x[3] = NAN;
    CHECK_OK(dtnn_model_forward(m, x, 2, 1, &err), &err);
    char where[256] = "";
    CHECK(dtnn_model_find_nonfinite(m, where, sizeof where));
    CHECK(strstr(where, "'c1'") != NULL);
    int n, classes;
    dtnn_model_output_shape(m, &n, &classes);
    float *y = tu_copy_output(m);
    int nan_out = 0;
    for (int i = 0; i < n * classes; i++)
        nan_out |= isnan(y[i]);
    CHECK(nan_out);
    free(y);
    free(x);
    dtnn_model_free(m);
}

int main(void)
{
    char path[64], residual[64], se[64];
    snprintf(path, sizeof path, "/tmp/dtnn_test_fusion.%ld.model", (long)getpid());
    snprintf(se, sizeof se, "/tmp/dtnn_test_fusion_se.%ld.model", (long)getpid());
    snprintf(residual, sizeof residual, "/tmp/dtnn_test_fusion_res.%ld.model", (long)getpid());
    FILE *f = fopen(path, "w"), *g = fopen(residual, "w"), *e = fopen(se, "w");
    CHECK(f != NULL && g != NULL && e != NULL);
    if (!f || !g || !e) {
        if (f)
            fclose(f);
        if (g)
            fclose(g);
        if (e)
            fclose(e);
        return test_finish("test_fusion");
    }
    fputs(MIXED_MODEL, f);
    fclose(f);
    fputs(RESIDUAL_MODEL, g);
    fclose(g);
    fputs(SE_MODEL, e);
    fclose(e);
    check_plan(path);
    check_residual_plan(residual);
    compare("mixed (batch 3)", path, 3);
    compare("residual (batch 3)", residual, 3);
    compare("resnet20 (batch 4)", "resnet20", 4);
    check_se_plan(se);
    compare("squeeze-excitation (batch 3)", se, 3);
    check_nan(path);
    check_nan(residual);
    remove(path);
    remove(residual);
    remove(se);
    return test_finish("test_fusion");
}
