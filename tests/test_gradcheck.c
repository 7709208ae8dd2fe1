/*
 * test_gradcheck.c — finite-difference gradient checks of every registered layer type, each in
 * small models with odd shapes (channel counts 3/5/7, non-square inputs, batch 1 and 3) and
 * graphs (one producer used twice, fan-out, concat, a ResNet block); for every single-input
 * layer, a check that it adds its input gradient when another consumer wrote first; for every
 * model, a check that a repeated step gives bit-identical gradients (no stale values); a
 * double-precision check of batch norm; forward values against hand-computed expectations
 * (shortcut_a placement, dropout masks and scaling, batch-norm statistics), which are in
 * gradcheck_values.c; and option and shape errors. One list (check_registry_covered) covers
 * every layer type; the layers and options of ONNX's semantics have their checks in
 * gradcheck_semantics.c, the helpers are gradcheck.c's.
 *
 * Tolerances. The checker's error is |a - n| / (|a| + |n| + 1e-3), with central differences on
 * a float32 forward; so near a zero gradient it is an absolute test at tol * 1e-3.
 *  - Smooth layers: eps 1e-2, tol 1e-2. Conv and linear are linear in each value (no truncation
 *    error); the rounding error of L is ~1e-7 per output touched, i.e. ~1e-5 / eps absolute.
 *    Observed worst errors are below 3e-3 (identical with gcc, clang, -O2 -march=native).
 *  - Kinks (ReLU, max pooling): eps 1e-3, tol 2e-2. A perturbation that moves a ReLU input across
 *    zero (or swaps a pooling maximum) gives a numeric slope that is neither side's, so the step
 *    is small and the kink layers sit where a perturbation moves few values (on the model input,
 *    or on a 3x3 map at batch 1). The price of the small step is the float32 floor: one rounding
 *    flip of one output is ~2e-5 in the derivative, up to 2e-2 in the error of a near-zero
 *    gradient (observed worst 6.7e-3, a gradient of -7.6e-4). Seeds are fixed, and with them no
 *    kink lies within eps. A change of seed or shape can move one there: the errors then cluster
 *    in one output channel and vanish as eps shrinks; look for that before suspecting a layer.
 *  - Models with batch norm: eps 1e-2, tol 5e-2. Every input perturbation changes the statistics
 *    and thus every output of the channel, so the noise grows to ~3e-5 in the derivative, while
 *    small batches make BN curved enough that a larger eps trades noise for truncation error.
 *    Over 13 build seeds the worst error of conv -> bn -> conv was 2.2e-2 (this seed; a gradient
 *    of -1.8e-4). Wiring bugs (a missed accumulate, a wrong view) give errors near 1; subtle BN
 *    math errors (biased vs unbiased variance, ~1/m) are caught by check_batchnorm_double, which
 *    holds the layer to float accuracy against a double-precision reference.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"


/* ---- gradient checks, one group per layer type ------------------------------------------- */

static void check_conv2d(void)
{
    dtnn_model *m;

    m = model_new(3, 7, 5);     /* 3x3, stride 2, padding 1, odd non-square input */
    layer(m, "conv2d", "filters=5 kernel=3 stride=2 padding=1");
    gradcheck(m, 3, "conv2d 3x3 s2 p1, 3x7x5 -> 5", SMOOTH_EPS, TOL);

    m = model_new(5, 4, 6);     /* 1x1, no bias, batch 1 */
    layer(m, "conv2d", "filters=7 kernel=1 bias=false");
    gradcheck(m, 1, "conv2d 1x1 no bias, 5x4x6 -> 7", SMOOTH_EPS, TOL);

    m = model_new(3, 6, 7);     /* 5x5, padding 2, then padding 0 */
    layer(m, "conv2d", "filters=3 kernel=5 padding=2");
    layer(m, "conv2d", "filters=5 kernel=3 padding=0");
    gradcheck(m, 3, "conv2d 5x5 p2 + 3x3 p0", SMOOTH_EPS, TOL);

    m = model_new(3, 7, 6);     /* dilation 2 */
    layer(m, "conv2d", "filters=5 kernel=3 padding=2 dilation=2");
    gradcheck(m, 3, "conv2d 3x3 dilation 2", SMOOTH_EPS, TOL);

    m = model_new(6, 5, 7);     /* groups: 6 in, 3 groups, 9 out, stride 2 */
    layer(m, "conv2d", "filters=9 kernel=3 padding=1 stride=2 groups=3");
    gradcheck(m, 3, "conv2d groups=3, 6x5x7 -> 9", SMOOTH_EPS, TOL);

    m = model_new(5, 7, 6);     /* depthwise (its direct path), stride 2, 5x5, padding 2 */
    layer(m, "conv2d", "filters=5 kernel=5 stride=2 padding=2 groups=5");
    layer(m, "conv2d", "filters=3 kernel=1");
    gradcheck(m, 2, "conv2d depthwise 5x5 s2 p2 -> conv2d 1x1", SMOOTH_EPS, TOL);

    m = model_new(3, 6, 5);     /* rectangular kernel, stride and padding */
    layer(m, "conv2d", "filters=7 kernel=3x1 stride=1x2 padding=1x0");
    gradcheck(m, 3, "conv2d 3x1 kernel, stride 1x2", SMOOTH_EPS, TOL);

    /* A workspace limit of 1 byte forces one image per GEMM chunk: the chunk loop and the
     * per-chunk scatter are checked against the same math. */
    m = model_new(3, 5, 6);
    layer(m, "conv2d", "filters=5 kernel=3 padding=1");
    layer(m, "conv2d", "filters=3 kernel=3 stride=2 groups=1");
    dtnn_error err;
    CHECK_OK(build_ex(m, 3, 1, 1, &err), &err);
    test_gradcheck(m, 3, "conv2d chunked (1 image per GEMM)", SMOOTH_EPS, TOL);
    check_repeatable(m, 3, "conv2d chunked (1 image per GEMM)");
    dtnn_model_free(m);

    /* The first layer without an input gradient: conv backward must skip dx. */
    m = model_new(3, 5, 5);
    layer(m, "conv2d", "filters=5 kernel=3 padding=1");
    CHECK_OK(build_ex(m, 3, 0, 0, &err), &err);
    test_gradcheck(m, 3, "conv2d without input gradient", SMOOTH_EPS, TOL);
    check_repeatable(m, 3, "conv2d without input gradient");
    dtnn_model_free(m);
}

static void check_linear_flatten(void)
{
    dtnn_model *m = model_new(7, 1, 1);
    layer(m, "linear", "outputs=5");
    layer(m, "linear", "outputs=3 bias=false");
    gradcheck(m, 3, "linear 7 -> 5 -> 3 (no bias)", SMOOTH_EPS, TOL);

    m = model_new(3, 4, 5);
    layer(m, "conv2d", "filters=5 kernel=3 padding=1 stride=2");
    layer(m, "flatten", "");
    layer(m, "linear", "outputs=7");
    gradcheck(m, 1, "conv2d -> flatten -> linear, batch 1", SMOOTH_EPS, TOL);
}

static void check_activations(void)
{
    /* ReLU straight on the input: the input check perturbs one value, which crosses the kink
     * only if it lies within eps of 0. */
    dtnn_model *m = model_new(3, 5, 4);
    layer(m, "relu", "");
    layer(m, "conv2d", "filters=5 kernel=3 padding=1");
    gradcheck(m, 3, "relu -> conv2d", KINK_EPS, KINK_TOL);

    /* ReLU after a conv: a weight perturbation moves a whole channel, so the map is small. */
    m = model_new(3, 3, 3);
    layer(m, "conv2d", "filters=5 kernel=3 padding=1");
    layer(m, "relu", "");
    layer(m, "conv2d", "filters=3 kernel=1");
    gradcheck(m, 1, "conv2d -> relu -> conv2d, batch 1", KINK_EPS, KINK_TOL);

    m = model_new(5, 3, 3);
    layer(m, "conv2d", "filters=7 kernel=3 padding=1");
    layer(m, "leaky_relu", "slope=0.2");
    layer(m, "conv2d", "filters=3 kernel=1");
    gradcheck(m, 3, "leaky_relu slope 0.2", KINK_EPS, KINK_TOL);

    m = model_new(5, 1, 1);
    layer(m, "linear", "outputs=7");
    layer(m, "sigmoid", "");
    layer(m, "linear", "outputs=3");
    layer(m, "tanh", "");
    gradcheck(m, 3, "linear -> sigmoid -> linear -> tanh", SMOOTH_EPS, TOL);

    /* The cap at 6 is reached in the PyTorch reference test, whose inputs are larger. */
    m = model_new(5, 3, 3);
    layer(m, "conv2d", "filters=7 kernel=3 padding=1");
    layer(m, "relu6", "");
    layer(m, "conv2d", "filters=3 kernel=1");
    gradcheck(m, 3, "relu6", KINK_EPS, KINK_TOL);
}

static void check_pools(void)
{
    /* Max pooling first: an input perturbation changes one value, so the argmax flips only when
     * two values of a window are within eps. */
    dtnn_model *m = model_new(3, 7, 6);
    layer(m, "maxpool", "kernel=3 stride=2 padding=1");
    layer(m, "conv2d", "filters=5 kernel=3 padding=1");
    gradcheck(m, 3, "maxpool 3 s2 p1 -> conv2d", KINK_EPS, KINK_TOL);

    m = model_new(3, 6, 5);
    layer(m, "conv2d", "filters=5 kernel=3 padding=1");
    layer(m, "maxpool", "kernel=2");      /* stride = kernel, odd width drops the last column */
    layer(m, "conv2d", "filters=3 kernel=1");
    gradcheck(m, 3, "conv2d -> maxpool 2 -> conv2d", KINK_EPS, KINK_TOL);

    m = model_new(5, 5, 7);
    layer(m, "maxpool", "kernel=2x3 stride=1x2");
    gradcheck(m, 1, "maxpool 2x3 s1x2, batch 1", KINK_EPS, KINK_TOL);

    m = model_new(3, 7, 6);
    layer(m, "conv2d", "filters=5 kernel=3 padding=1");
    layer(m, "avgpool", "kernel=3 stride=2 padding=1");   /* count_include_pad=true default */
    gradcheck(m, 3, "avgpool 3 s2 p1 count_include_pad", SMOOTH_EPS, TOL);

    m = model_new(3, 7, 6);
    layer(m, "conv2d", "filters=5 kernel=3 padding=1");
    layer(m, "avgpool", "kernel=3 stride=2 padding=1 count_include_pad=false");
    gradcheck(m, 3, "avgpool 3 s2 p1 exclude pad", SMOOTH_EPS, TOL);

    m = model_new(3, 5, 7);
    layer(m, "avgpool", "kernel=2x3 stride=1x2");
    layer(m, "conv2d", "filters=5 kernel=1");
    gradcheck(m, 3, "avgpool 2x3 s1x2", SMOOTH_EPS, TOL);

    m = model_new(3, 5, 6);
    layer(m, "conv2d", "filters=7 kernel=3 padding=1");
    layer(m, "global_avgpool", "");
    layer(m, "flatten", "");
    layer(m, "linear", "outputs=3");
    gradcheck(m, 3, "conv2d -> global_avgpool -> flatten -> linear", SMOOTH_EPS, TOL);

    /* Overlapping windows (7 rows to 3) and repeated ones (2 columns to 5). */
    m = model_new(3, 7, 2);
    layer(m, "conv2d", "filters=4 kernel=3 padding=1");
    layer(m, "adaptive_avgpool", "output=3x5");
    layer(m, "conv2d", "filters=3 kernel=1");
    gradcheck(m, 3, "adaptive_avgpool 7x2 -> 3x5", SMOOTH_EPS, TOL);
}

static void check_batchnorm(void)
{
    /* Convs in front of batch norm have no bias: it would cancel in the normalisation, and its
     * true gradient (0) would be compared with pure rounding noise. */
    dtnn_model *m = model_new(3, 5, 4);
    layer(m, "conv2d", "filters=5 kernel=3 padding=1 bias=false");
    layer(m, "batchnorm", "");
    layer(m, "conv2d", "filters=3 kernel=1");
    gradcheck(m, 3, "conv2d -> batchnorm2d -> conv2d", SMOOTH_EPS, BN_TOL);

    m = model_new(5, 3, 7);
    layer(m, "batchnorm", "eps=1e-3 momentum=0.2");
    gradcheck(m, 3, "batchnorm2d on the input", SMOOTH_EPS, BN_TOL);

    m = model_new(2, 3, 2);
    layer(m, "flatten", "");
    layer(m, "linear", "outputs=7 bias=false");
    layer(m, "batchnorm", "");
    layer(m, "tanh", "");
    layer(m, "linear", "outputs=3");
    gradcheck(m, 4, "flatten -> linear -> batchnorm1d -> tanh -> linear", SMOOTH_EPS,
              BN_TOL);

    /* First layer without an input gradient: bn_backward gets dx = NULL. */
    m = model_new(3, 4, 5);
    layer(m, "batchnorm", "");
    layer(m, "conv2d", "filters=3 kernel=1");
    dtnn_error err;
    CHECK_OK(build_ex(m, 3, 0, 0, &err), &err);
    test_gradcheck(m, 3, "batchnorm without input gradient", SMOOTH_EPS, BN_TOL);
    check_repeatable(m, 3, "batchnorm without input gradient");
    dtnn_model_free(m);
}

/* Reference batch norm in double, as torch.nn.BatchNorm2d in training mode (biased batch
 * variance): y = gamma (x - mean) / sqrt(var + eps) + beta over [n, C, hw]; returns
 * L = sum(probe * y) and, when y is not NULL, stores y. */
static double bn_reference(int n, int C, int hw, const double *x, const double *gamma,
                           const double *beta, double eps, const float *probe, double *y)
{
    double loss = 0.0;
    for (int c = 0; c < C; c++) {
        double sum = 0.0, sq = 0.0, m = (double)n * hw;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < hw; j++)
                sum += x[((size_t)i * C + c) * hw + j];
        double mean = sum / m;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < hw; j++) {
                double d = x[((size_t)i * C + c) * hw + j] - mean;
                sq += d * d;
            }
        double invstd = 1.0 / sqrt(sq / m + eps);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < hw; j++) {
                size_t k = ((size_t)i * C + c) * hw + j;
                double v = gamma[c] * (x[k] - mean) * invstd + beta[c];
                if (y)
                    y[k] = v;
                loss += probe[k] * v;
            }
    }
    return loss;
}

/* The batch-norm layer's forward and its three gradients against the double reference and its
 * central differences (step 1e-5: truncation ~1e-9, rounding ~1e-11), so the float32 layer is
 * held to float accuracy (atol 1e-5, rtol 1e-4) rather than to the noise of a float32 finite
 * difference. An off-by-one in the count (1/m vs 1/(m-1)) or a missing term is a 1e-2 to 1
 * error here. eps=1e-3 (not the default) checks that the option reaches the kernel. */
static void check_batchnorm_double(int C, int H, int W, int N, const char *label)
{
    const int hw = H * W;
    const size_t count = (size_t)N * C * hw;
    const double eps = 1e-3;
    dtnn_model *m = model_new(C, H, W);
    add_layer(m, "batchnorm", "bn", "eps=1e-3", NULL, 0);
    if (!build(m, N)) {
        dtnn_model_free(m);
        return;
    }
    const dtnn_tensor_info *tw = dtnn_model_tensor_by_name(m, "bn.weight");
    const dtnn_tensor_info *tb = dtnn_model_tensor_by_name(m, "bn.bias");
    float *x = calloc(count, sizeof(float)), *probe = calloc(count, sizeof(float));
    float *want = calloc(count, sizeof(float));
    double *xd = calloc(count, sizeof(double)), *yd = calloc(count, sizeof(double));
    float wantg[64], wantb[64];
    double gd[64], bd[64];
    if (!tw || !tb || !x || !probe || !want || !xd || !yd || C > 64) {
        CHECK(0);
        goto done;
    }
    float *gamma = tu_params(m) + tw->offset, *beta = tu_params(m) + tb->offset;
    for (int c = 0; c < C; c++) {
        /* Non-trivial affine values, one negative, so every term of the gradient matters. */
        gamma[c] = (c % 2 ? -0.7f : 1.3f) + 0.1f * c;
        beta[c] = 0.25f * c - 0.2f;
        gd[c] = gamma[c];
        bd[c] = beta[c];
    }
    test_fill(x, count, 7);
    for (size_t k = 0; k < count; k++) {
        int c = (int)((k / hw) % C);
        x[k] = x[k] * (0.5f + 0.5f * c) + 0.3f * c;     /* per-channel scale and shift */
        xd[k] = x[k];
    }
    test_fill(probe, count, 9);

    dtnn_error err;
    CHECK_OK(dtnn_model_forward(m, x, N, 1, &err), &err);
    bn_reference(N, C, hw, xd, gd, bd, eps, probe, yd);
    for (size_t k = 0; k < count; k++)
        want[k] = (float)yd[k];
    char what[96];
    snprintf(what, sizeof what, "%s forward vs double", label);
    test_compare(what, tu_output(m, NULL, NULL), want, count, 1e-5, 1e-5);

    memcpy(tu_output_grad(m), probe, sizeof(float) * count);
    dtnn_model_zero_grad(m);
    CHECK_OK(dtnn_model_backward(m, &err), &err);

    const double h = 1e-5;
    for (size_t k = 0; k < count; k++) {
        double saved = xd[k];
        xd[k] = saved + h;
        double lp = bn_reference(N, C, hw, xd, gd, bd, eps, probe, NULL);
        xd[k] = saved - h;
        double lm = bn_reference(N, C, hw, xd, gd, bd, eps, probe, NULL);
        xd[k] = saved;
        want[k] = (float)((lp - lm) / (2 * h));
    }
    for (int c = 0; c < C; c++) {
        double saved = gd[c];
        gd[c] = saved + h;
        double lp = bn_reference(N, C, hw, xd, gd, bd, eps, probe, NULL);
        gd[c] = saved - h;
        double lm = bn_reference(N, C, hw, xd, gd, bd, eps, probe, NULL);
        gd[c] = saved;
        wantg[c] = (float)((lp - lm) / (2 * h));
        saved = bd[c];
        bd[c] = saved + h;
        lp = bn_reference(N, C, hw, xd, gd, bd, eps, probe, NULL);
        bd[c] = saved - h;
        lm = bn_reference(N, C, hw, xd, gd, bd, eps, probe, NULL);
        bd[c] = saved;
        wantb[c] = (float)((lp - lm) / (2 * h));
    }
    snprintf(what, sizeof what, "%s d/dx vs double", label);
    test_compare(what, tu_input_grad(m), want, count, 1e-5, 1e-4);
    snprintf(what, sizeof what, "%s d/dweight vs double", label);
    test_compare(what, tu_grads(m) + tw->offset, wantg, C, 1e-5, 1e-4);
    snprintf(what, sizeof what, "%s d/dbias vs double", label);
    test_compare(what, tu_grads(m) + tb->offset, wantb, C, 1e-5, 1e-4);
done:
    free(x);
    free(probe);
    free(want);
    free(xd);
    free(yd);
    dtnn_model_free(m);
}

static void check_dropout_softmax(void)
{
    dtnn_model *m = model_new(3, 5, 4);
    layer(m, "conv2d", "filters=5 kernel=3 padding=1");
    layer(m, "dropout", "p=0.3");
    layer(m, "conv2d", "filters=3 kernel=1");
    gradcheck(m, 3, "conv2d -> dropout 0.3 -> conv2d", SMOOTH_EPS, TOL);

    m = model_new(5, 1, 1);
    layer(m, "dropout", "p=0");
    layer(m, "linear", "outputs=3");
    gradcheck(m, 3, "dropout p=0 -> linear", SMOOTH_EPS, TOL);

    m = model_new(2, 3, 2);
    layer(m, "flatten", "");
    layer(m, "linear", "outputs=7");
    layer(m, "softmax", "");
    gradcheck(m, 3, "flatten -> linear -> softmax", SMOOTH_EPS, TOL);

    m = model_new(5, 1, 1);
    layer(m, "softmax", "");
    layer(m, "linear", "outputs=3");
    gradcheck(m, 1, "softmax on the input, batch 1", SMOOTH_EPS, TOL);
}

static void check_add_concat(void)
{
    /* The model input twice: the input gradient must be 2 dy (write, then add). */
    dtnn_model *m = model_new(3, 4, 5);
    int in2[2] = {DTNN_INPUT, DTNN_INPUT};
    add_layer(m, "add", "twice_input", "", in2, 2);
    layer(m, "conv2d", "filters=5 kernel=3");
    gradcheck(m, 3, "add(input, input) -> conv2d", SMOOTH_EPS, TOL);

    /* One producer twice. */
    m = model_new(3, 4, 5);
    int a = layer(m, "conv2d", "filters=5 kernel=3 padding=1");
    int aa[2] = {a, a};
    add_layer(m, "add", "self", "", aa, 2);
    layer(m, "tanh", "");
    gradcheck(m, 3, "add(conv, conv)", SMOOTH_EPS, TOL);

    /* Fan-out: a feeds tanh, sigmoid and the add itself. */
    m = model_new(3, 5, 4);
    a = layer(m, "conv2d", "filters=5 kernel=3 padding=1");
    int b = layer(m, "tanh", "");
    int ins[1] = {a};
    int c = add_layer(m, "sigmoid", NULL, "", ins, 1);
    int abc[3] = {b, c, a};
    add_layer(m, "add", "merge", "", abc, 3);
    layer(m, "conv2d", "filters=3 kernel=1");
    gradcheck(m, 3, "fan-out: add(tanh(a), sigmoid(a), a)", SMOOTH_EPS, TOL);

    /* Three branches of different channel counts, concatenated. */
    m = model_new(3, 5, 6);
    int in1[1] = {DTNN_INPUT};
    int p = add_layer(m, "conv2d", "b1", "filters=2 kernel=1", in1, 1);
    int q = add_layer(m, "conv2d", "b2", "filters=5 kernel=3 padding=1", in1, 1);
    int r = add_layer(m, "avgpool", "b3", "kernel=3 stride=1 padding=1", in1, 1);
    int pqr[3] = {p, q, r};
    add_layer(m, "concat", "cat", "", pqr, 3);
    layer(m, "conv2d", "filters=3 kernel=3");
    gradcheck(m, 3, "concat of 3 branches (2+5+3 channels)", SMOOTH_EPS, TOL);

    /* One producer twice in a concat, plus the input. */
    m = model_new(3, 4, 3);
    a = layer(m, "conv2d", "filters=5 kernel=3 padding=1");
    int aia[3] = {a, DTNN_INPUT, a};
    add_layer(m, "concat", "cat2", "", aia, 3);
    layer(m, "tanh", "");
    gradcheck(m, 1, "concat(a, input, a), batch 1", SMOOTH_EPS, TOL);
}

/* conv-bn-relu-conv-bn + option-A shortcut, add, relu: the block of a CIFAR ResNet. */
static void check_resnet_block(void)
{
    dtnn_model *m = model_new(3, 6, 5);
    int in1[1] = {DTNN_INPUT};
    add_layer(m, "conv2d", "conv1", "filters=6 kernel=3 stride=2 padding=1 bias=false", in1, 1);
    layer(m, "batchnorm", "");
    layer(m, "relu", "");
    layer(m, "conv2d", "filters=6 kernel=3 padding=1 bias=false");
    int bn2 = layer(m, "batchnorm", "");
    int sc = add_layer(m, "shortcut_a", "shortcut", "filters=6 stride=2", in1, 1);
    int ins[2] = {bn2, sc};
    add_layer(m, "add", "merge", "", ins, 2);
    layer(m, "relu", "");
    gradcheck(m, 3, "resnet block with shortcut_a", BLOCK_EPS, BN_TOL);

    /* Shortcut alone: stride 3 (odd output 2x3 from 5x7), odd channel pad with an offset. */
    m = model_new(3, 5, 7);
    layer(m, "shortcut_a", "filters=8 stride=3 offset=4");
    layer(m, "conv2d", "filters=3 kernel=1");
    gradcheck(m, 3, "shortcut_a stride 3 offset 4", SMOOTH_EPS, TOL);

    m = model_new(3, 4, 4);
    layer(m, "conv2d", "filters=3 kernel=3 padding=1");
    layer(m, "shortcut_a", "filters=7 stride=1");
    gradcheck(m, 3, "shortcut_a stride 1 (pad only)", SMOOTH_EPS, TOL);
}

static void check_accumulate_all(void)
{
    check_accumulate("conv2d", "filters=5 kernel=3 stride=2 padding=1", 3, 5, 4, TOL);
    check_accumulate("linear", "outputs=5", 7, 1, 1, TOL);
    check_accumulate("flatten", "", 3, 2, 3, TOL);
    check_accumulate("relu", "", 3, 4, 3, KINK_TOL);
    check_accumulate("leaky_relu", "slope=0.3", 3, 4, 3, KINK_TOL);
    check_accumulate("sigmoid", "", 3, 4, 3, TOL);
    check_accumulate("tanh", "", 3, 4, 3, TOL);
    check_accumulate("maxpool", "kernel=3 stride=2 padding=1", 3, 5, 4, KINK_TOL);
    check_accumulate("avgpool", "kernel=3 stride=2 padding=1", 3, 5, 4, TOL);
    check_accumulate("global_avgpool", "", 3, 5, 4, TOL);
    check_accumulate("adaptive_avgpool", "output=2x3", 3, 5, 4, TOL);
    check_accumulate("relu6", "", 3, 4, 3, KINK_TOL);
    check_accumulate("batchnorm", "", 3, 5, 4, BN_TOL);
    check_accumulate("dropout", "p=0.4", 3, 5, 4, TOL);
    check_accumulate("softmax", "", 7, 1, 1, TOL);
    check_accumulate("shortcut_a", "filters=5 stride=2", 3, 5, 4, TOL);
}

/* ---- errors ------------------------------------------------------------------------------- */

static void check_errors(void)
{
    /* Unknown keys name the key and the valid ones. */
    expect_add_error("batchnorm", "eps=1e-5 affine=1", NULL, 0, DTNN_ERR_ARG, "'affine'");
    expect_add_error("batchnorm", "bogus=1", NULL, 0, DTNN_ERR_ARG, "eps, momentum");
    expect_add_error("dropout", "rate=0.5", NULL, 0, DTNN_ERR_ARG, "(p)");
    expect_add_error("softmax", "dim=1", NULL, 0, DTNN_ERR_ARG, "'dim'");
    int two[2] = {DTNN_INPUT, DTNN_INPUT};
    expect_add_error("add", "alpha=2", two, 2, DTNN_ERR_ARG, "'alpha'");
    expect_add_error("concat", "dim=1", two, 2, DTNN_ERR_ARG, "'dim'");
    expect_add_error("shortcut_a", "filters=8 pad=2", NULL, 0, DTNN_ERR_ARG,
                     "filters, stride, offset");
    /* Bad values. */
    expect_add_error("dropout", "p=1", NULL, 0, DTNN_ERR_ARG, "'p'");
    expect_add_error("dropout", "p=-0.1", NULL, 0, DTNN_ERR_ARG, "'p'");
    expect_add_error("dropout", "p=abc", NULL, 0, DTNN_ERR_ARG, "'p'");
    expect_add_error("batchnorm", "eps=0", NULL, 0, DTNN_ERR_ARG, "'eps'");
    expect_add_error("batchnorm", "momentum=1.5", NULL, 0, DTNN_ERR_ARG, "'momentum'");
    expect_add_error("shortcut_a", "filters=8 stride=0", NULL, 0, DTNN_ERR_ARG, "'stride'");
    /* Input counts. */
    int one[1] = {DTNN_INPUT};
    int nine[9] = {-1, -1, -1, -1, -1, -1, -1, -1, -1};
    int seventeen[17];
    for (int i = 0; i < 17; i++)
        seventeen[i] = DTNN_INPUT;
    expect_add_error("add", "", nine, 9, DTNN_ERR_ARG, "1 to 8 inputs");
    /* One input is the constant form, which needs the constant's shape. */
    dtnn_model *one_add = model_new(4, 6, 6);
    add_layer(one_add, "add", "add_one", "", one, 1);
    expect_build_error(one_add, DTNN_ERR_ARG, "add of one input", "const_shape");
    expect_add_error("concat", "", seventeen, 17, DTNN_ERR_ARG, "2 to 16 inputs");

    /* Shape errors at build time. */
    dtnn_model *m = model_new(4, 6, 6);
    layer(m, "shortcut_a", "filters=3");
    expect_build_error(m, DTNN_ERR_SHAPE, "filters=3", "4x6x6");

    m = model_new(4, 6, 6);
    layer(m, "shortcut_a", "stride=2");
    expect_build_error(m, DTNN_ERR_ARG, "filters", "shortcut_a");

    m = model_new(4, 6, 6);
    layer(m, "shortcut_a", "filters=6 offset=3");
    expect_build_error(m, DTNN_ERR_SHAPE, "offset=3", "at most 2");

    m = model_new(4, 6, 6);
    int c = layer(m, "conv2d", "filters=5 kernel=3");
    int mix[2] = {DTNN_INPUT, c};
    add_layer(m, "add", "bad_add", "", mix, 2);
    expect_build_error(m, DTNN_ERR_SHAPE, "4x6x6", "5x4x4");

    m = model_new(4, 6, 6);
    mix[1] = layer(m, "conv2d", "filters=5 kernel=3 padding=0");
    add_layer(m, "concat", "bad_cat", "", mix, 2);
    expect_build_error(m, DTNN_ERR_SHAPE, "4x6x6", "5x4x4");

    m = model_new(4, 6, 6);
    layer(m, "softmax", "");
    expect_build_error(m, DTNN_ERR_SHAPE, "4x6x6", "flatten");
}

/* Every registered type must appear in the checks above; a new layer must add its own. */
static void check_registry_covered(void)
{
    static const char *const covered[] = {
        "conv2d", "linear", "flatten", "relu", "leaky_relu", "sigmoid", "tanh", "maxpool",
        "avgpool", "global_avgpool", "adaptive_avgpool", "relu6", "batchnorm", "dropout",
        "softmax", "add", "concat", "shortcut_a",
        /* gradcheck_semantics.c */
        "hardsigmoid", "hardswish", "clamp", "hardtanh", "mul", "sub", "global_maxpool",
        "pad", "gelu", "div", "erf", "sqrt", "slice", "reduce", "upsample",
        "layernorm", "reshape", "silu", "stochastic_depth", "permute", "matmul",
    };
    const char *t;
    for (int i = 0; (t = dtnn_layer_type_name(i)) != NULL; i++) {
        int found = 0;
        for (size_t k = 0; k < sizeof covered / sizeof covered[0]; k++)
            found |= !strcmp(t, covered[k]);
        if (!found) {
            fprintf(stderr, "FAIL layer type '%s' has no gradient check in test_gradcheck.c\n", t);
            test_failures++;
        }
    }
}

int main(void)
{
    if (tu_kernels_unavailable("test_gradcheck"))
        return 77;
    check_registry_covered();
    check_conv2d();
    check_linear_flatten();
    check_activations();
    check_pools();
    check_batchnorm();
    check_batchnorm_double(3, 2, 3, 4, "batchnorm2d 3x2x3, batch 4");
    check_batchnorm_double(5, 1, 1, 4, "batchnorm1d 5 features, batch 4");
    check_dropout_softmax();
    check_add_concat();
    check_resnet_block();
    check_accumulate_all();
    check_forward_values();
    check_errors();
    check_semantics();
    return test_finish("test_gradcheck");
}
