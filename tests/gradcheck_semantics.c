/*
 * gradcheck_semantics.c — finite-difference checks of the layers and options that ONNX models
 * bring (issue 20), part of test_gradcheck: hardsigmoid, hardswish, clamp, hardtanh, gelu, silu
 * (both forms); mul, sub
 * and add broadcast as NumPy; global max pooling; ceil-mode, dilated and asymmetrically padded
 * pooling; asymmetric convolution padding; add, mul and sub of a constant operand; constant
 * padding (pad); their option and shape errors. Their PyTorch
 * reference cases are in tools/gen_reference_layers.py (new_layer_cases). Tolerances as in
 * test_gradcheck.c: kinks (the hard activations' joins, clamp's bounds, max pooling) at eps
 * 1e-3 on small maps or straight on the input, where a perturbation moves few values.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"

static void check_activations(void)
{
    /* The hard activations' joins at -3 and 3 and their saturated sides are reached in the
     * PyTorch reference test (inputs up to ~6); here the smooth middle, on the input and
     * after a conv. clamp's bounds cut through the input's [-1, 1], so all three parts of it
     * are checked (a kink within eps of a bound is as unlikely as ReLU's). */
    dtnn_model *m = model_new(3, 5, 4);
    layer(m, "hardswish", "");
    layer(m, "conv2d", "filters=5 kernel=3 padding=1");
    layer(m, "hardsigmoid", "");
    gradcheck(m, 3, "hardswish -> conv2d -> hardsigmoid", KINK_EPS, KINK_TOL);

    /* gelu is smooth everywhere: the erf form on the input, the tanh form after a conv, over
     * inputs of a few units (where both curve the most). */
    m = model_new(3, 5, 4);
    layer(m, "gelu", "");
    layer(m, "conv2d", "filters=5 kernel=3 padding=1");
    layer(m, "gelu", "approximate=tanh");
    layer(m, "conv2d", "filters=3 kernel=1");
    gradcheck(m, 3, "gelu -> conv2d -> gelu(tanh) -> conv2d", SMOOTH_EPS, TOL);

    /* silu (x sigmoid(x)) is smooth everywhere: on the input and after a conv */
    m = model_new(3, 5, 4);
    layer(m, "silu", "");
    layer(m, "conv2d", "filters=5 kernel=3 padding=1");
    layer(m, "silu", "");
    layer(m, "conv2d", "filters=3 kernel=1");
    gradcheck(m, 3, "silu -> conv2d -> silu -> conv2d", SMOOTH_EPS, TOL);

    /* stochastic depth in training: a sample's branch dropped or scaled by 1 / (1 - p), the
     * mask fixed for the step, so the model is linear in x around the probe point */
    m = model_new(3, 5, 4);
    layer(m, "conv2d", "filters=4 kernel=3 padding=1");
    layer(m, "stochastic_depth", "p=0.5");
    layer(m, "conv2d", "filters=4 kernel=3 padding=1");
    layer(m, "stochastic_depth", "p=0.3 mode=batch");
    layer(m, "conv2d", "filters=3 kernel=1");
    gradcheck(m, 4, "conv -> stochastic_depth(row) -> conv -> stochastic_depth(batch) -> conv",
              SMOOTH_EPS, TOL);

    /* GELU as opsets before 20 write it: x * 0.5 * (1 + erf(x / sqrt 2)) from erf, div, add
     * and mul, which must give gelu's gradient (the same model's value through gelu). */
    m = model_new(3, 5, 4);
    int c = layer(m, "conv2d", "filters=4 kernel=3 padding=1");
    layer(m, "div", "const_shape=1 const_value=1.41421356");
    layer(m, "erf", "");
    int e = layer(m, "add", "const_shape=1 const_value=1");
    int ce[2] = {c, e};
    add_layer(m, "mul", "x_times", "", ce, 2);
    layer(m, "mul", "const_shape=1 const_value=0.5");
    layer(m, "conv2d", "filters=3 kernel=1");
    gradcheck(m, 3, "conv -> x * 0.5 * (1 + erf(x / sqrt 2)) -> conv", SMOOTH_EPS, TOL);

    /* sqrt on values kept in (1, 2) (1 + sigmoid), where its slope 1 / (2 sqrt x) is < 1/2 */
    m = model_new(3, 4, 5);
    layer(m, "conv2d", "filters=4 kernel=3 padding=1");
    layer(m, "sigmoid", "");
    layer(m, "add", "const_shape=1 const_value=1");
    layer(m, "sqrt", "");
    layer(m, "conv2d", "filters=3 kernel=1");
    gradcheck(m, 3, "conv -> sqrt(1 + sigmoid) -> conv", SMOOTH_EPS, TOL);

    /* hardtanh after a conv: a small map at batch 1, as for ReLU in test_gradcheck.c. */
    m = model_new(3, 3, 3);
    layer(m, "clamp", "min=-0.3 max=0.45");
    layer(m, "conv2d", "filters=5 kernel=3 padding=1");
    layer(m, "hardtanh", "min_val=-0.2 max_val=0.3");
    layer(m, "conv2d", "filters=3 kernel=1");
    gradcheck(m, 1, "clamp -> conv2d -> hardtanh -> conv2d, batch 1", KINK_EPS, KINK_TOL);

    m = model_new(3, 4, 5);
    layer(m, "clamp", "max=0.25");
    layer(m, "conv2d", "filters=3 kernel=1");
    gradcheck(m, 2, "clamp max only", KINK_EPS, KINK_TOL);

    /* hardsigmoid with ONNX's default constants (the formula as written, not PyTorch's): a
     * steep alpha puts the saturated sides inside the input's range. */
    m = model_new(3, 4, 5);
    layer(m, "conv2d", "filters=4 kernel=3 padding=1");
    layer(m, "hardsigmoid", "alpha=0.2 beta=0.5");
    layer(m, "conv2d", "filters=3 kernel=1");
    layer(m, "hardsigmoid", "alpha=1.7 beta=0.4");
    gradcheck(m, 2, "conv2d -> hardsigmoid(0.2, 0.5) -> conv2d -> hardsigmoid(1.7, 0.4)",
              KINK_EPS, KINK_TOL);
}

/* Two inputs of different shapes (mul, sub, add broadcast as NumPy): the gradient of the
 * broadcast input is a sum over the positions it was repeated to. */
static void check_broadcast(void)
{
    /* MobileNetV3's squeeze-and-excitation: a per-channel scale from the map itself. The
     * ReLU works on 1x1 maps, so a perturbation moves few of its inputs. */
    dtnn_model *m = model_new(3, 5, 4);
    int c = layer(m, "conv2d", "filters=5 kernel=3 padding=1");
    layer(m, "global_avgpool", "");
    layer(m, "conv2d", "filters=3 kernel=1");
    layer(m, "relu", "");
    layer(m, "conv2d", "filters=5 kernel=1");
    int s = layer(m, "hardsigmoid", "");
    int cs[2] = {c, s};
    add_layer(m, "mul", "excite", "", cs, 2);
    gradcheck(m, 3, "squeeze-and-excitation: mul(conv, hardsigmoid(...)) per channel",
              KINK_EPS, KINK_TOL);

    /* Per-sample scalars as input 0 of sub, and a 1 x H x W map as input 1 of mul. */
    m = model_new(3, 4, 5);
    c = layer(m, "conv2d", "filters=4 kernel=3 padding=1");
    layer(m, "global_avgpool", "");
    int t = layer(m, "conv2d", "filters=1 kernel=1");
    int tc[2] = {t, c};
    int d = add_layer(m, "sub", "scalar_minus", "", tc, 2);
    int in1[1] = {c};
    int p = add_layer(m, "conv2d", "plane", "filters=1 kernel=3 padding=1", in1, 1);
    int dp[2] = {d, p};
    add_layer(m, "mul", "by_plane", "", dp, 2);
    gradcheck(m, 3, "sub(scalar, conv) then mul(., 1xHxW map)", SMOOTH_EPS, TOL);

    /* Equal shapes, one producer twice (the second gradient adds to the first), and the
     * model input as a broadcast operand's source. */
    m = model_new(3, 4, 3);
    c = layer(m, "conv2d", "filters=3 kernel=3 padding=1");
    int cc[2] = {c, c};
    int sq = add_layer(m, "mul", "square", "", cc, 2);
    int in0[1] = {DTNN_INPUT};
    int g = add_layer(m, "global_avgpool", "gap_in", "", in0, 1);
    int xg[2] = {DTNN_INPUT, g};
    int e = add_layer(m, "sub", "centre", "", xg, 2);
    int se[2] = {sq, e};
    add_layer(m, "sub", "diff", "", se, 2);
    gradcheck(m, 2, "mul(c, c), sub(input, mean of input), sub of equal shapes", SMOOTH_EPS,
              TOL);

    /* A broadcasting add followed by ReLU and fed by batch norm: neither fusion may take it
     * (its kernels are the binary ones), and the ReLU runs on its own. */
    m = model_new(3, 3, 3);
    c = layer(m, "conv2d", "filters=4 kernel=3 padding=1 bias=false");
    int bn = layer(m, "batchnorm", "");
    int in2[1] = {c};
    g = add_layer(m, "global_avgpool", "gap", "", in2, 1);
    int bg[2] = {bn, g};
    add_layer(m, "add", "bias_add", "", bg, 2);
    layer(m, "relu", "");
    layer(m, "conv2d", "filters=3 kernel=1");
    gradcheck(m, 3, "batchnorm -> add(., per-channel) -> relu, unfused", BLOCK_EPS, BN_TOL);
}

/* Writes varied values (seed) into layer name's constant operand, so a broadcast that
 * repeats the wrong value shows. */
static void set_constant(dtnn_model *m, const char *name, unsigned seed)
{
    char t_name[128];
    snprintf(t_name, sizeof t_name, "%s.constant", name);
    const dtnn_tensor_info *t = dtnn_model_tensor_by_name(m, t_name);
    CHECK(t != NULL && t->kind == DTNN_TENSOR_BUFFER);
    if (!t)
        return;
    float *v = malloc(sizeof(float) * t->count);
    test_fill(v, t->count, seed);
    dtnn_error err;
    CHECK_OK(dtnn_model_tensor_write(m, t, v, &err), &err);
    free(v);
}

/* Builds, sets the constants of the layers named, and checks as gradcheck() does. */
static void gradcheck_constants(dtnn_model *m, const char *const *names, int n_names, int n,
                                const char *label)
{
    if (build(m, n)) {
        for (int k = 0; k < n_names; k++)
            set_constant(m, names[k], 50u + (unsigned)k);
        test_gradcheck(m, n, label, SMOOTH_EPS, TOL);
        check_repeatable(m, n, label);
    }
    dtnn_model_free(m);
}

/* x op c with a constant operand (the one-input add, mul and sub, ONNX's Mul / Add / Sub of
 * an initializer) and constant padding: only x has a gradient, the constant none. */
static void check_constants(void)
{
    dtnn_model *m = model_new(3, 4, 5);
    layer(m, "conv2d", "filters=4 kernel=3 padding=1");
    add_layer(m, "mul", "scale", "const_shape=4x1x1", NULL, 0);
    add_layer(m, "sub", "rsub", "const_shape=1x4x5 reverse=true", NULL, 0);
    add_layer(m, "add", "shift", "const_shape=1", NULL, 0);
    layer(m, "conv2d", "filters=3 kernel=1");
    const char *const spatial[] = {"scale", "rsub", "shift"};
    gradcheck_constants(m, spatial, 3, 3, "conv -> mul(x, [4,1,1]) -> sub([1,4,5], x) -> add "
                        "scalar");

    m = model_new(3, 4, 5);
    layer(m, "conv2d", "filters=4 kernel=3 padding=1");
    add_layer(m, "sub", "minus", "const_shape=4x4x5", NULL, 0);
    add_layer(m, "mul", "by_map", "const_shape=4x4x5", NULL, 0);
    add_layer(m, "add", "plus", "const_shape=4x1x5", NULL, 0);
    const char *const full[] = {"minus", "by_map", "plus"};
    gradcheck_constants(m, full, 3, 2, "sub(x, [4,4,5]) -> mul by [4,4,5] -> add [4,1,5]");

    m = model_new(6, 1, 1);
    layer(m, "linear", "outputs=5");
    add_layer(m, "mul", "f_scale", "const_shape=5", NULL, 0);
    add_layer(m, "add", "f_shift", "const_shape=5", NULL, 0);
    add_layer(m, "sub", "f_rsub", "const_shape=1 reverse=true", NULL, 0);
    layer(m, "linear", "outputs=3");
    const char *const flat[] = {"f_scale", "f_shift", "f_rsub"};
    gradcheck_constants(m, flat, 3, 3, "linear -> mul [5] -> add [5] -> sub(scalar, x)");

    /* mul's trainable constant (ConvNeXt's layer scale): a parameter named by const_name,
     * whose gradient sums dy * x over the batch and over the positions it is broadcast to */
    m = model_new(3, 4, 5);
    layer(m, "conv2d", "filters=4 kernel=3 padding=1");
    add_layer(m, "mul", "blk", "const_shape=4x1x1 const_value=0.7 trainable=true "
              "const_name=layer_scale", NULL, 0);
    add_layer(m, "mul", "map", "const_shape=4x4x5 const_value=-1.3 trainable=true", NULL, 0);
    layer(m, "conv2d", "filters=3 kernel=1");
    if (build(m, 3)) {
        const dtnn_tensor_info *t = dtnn_model_tensor_by_name(m, "blk.layer_scale");
        const dtnn_tensor_info *u = dtnn_model_tensor_by_name(m, "map.constant");
        CHECK(t && t->kind == DTNN_TENSOR_PARAM && t->count == 4);
        CHECK(u && u->kind == DTNN_TENSOR_PARAM && u->count == 80);
        test_gradcheck(m, 3, "conv -> mul by trainable [4,1,1] -> mul by trainable [4,4,5]",
                       SMOOTH_EPS, TOL);
    }
    dtnn_model_free(m);

    /* Padding by 1.5 on every side, channels too, then a conv that reads the filled border. */
    m = model_new(2, 4, 3);
    layer(m, "conv2d", "filters=3 kernel=1");
    layer(m, "pad", "pad_top=1 pad_bottom=2 pad_right=3 pad_front=1 pad_back=2 value=1.5");
    layer(m, "conv2d", "filters=3 kernel=3");
    gradcheck(m, 3, "conv -> pad t1 b2 l0 r3 channels 1,2 value 1.5 -> conv", SMOOTH_EPS, TOL);

    check_accumulate("mul", "const_shape=3x1x1 const_value=0.7", 3, 4, 3, TOL);
    check_accumulate("sub", "const_shape=1x4x3 reverse=true const_value=0.5", 3, 4, 3, TOL);
    check_accumulate("add", "const_shape=1 const_value=-2", 3, 4, 3, TOL);
    check_accumulate("pad", "pads=1,0,2,1 value=-1", 3, 4, 3, TOL);

    m = model_new(4, 6, 6);
    layer(m, "mul", "");
    expect_build_error(m, DTNN_ERR_ARG, "mul of one input", "const_shape");
    m = model_new(4, 6, 6);
    layer(m, "sub", "const_shape=3x1x1");
    expect_build_error(m, DTNN_ERR_SHAPE, "sub", "do not broadcast");
    m = model_new(4, 6, 6);
    int xx[2] = {DTNN_INPUT, DTNN_INPUT};
    add_layer(m, "mul", "two_and_const", "const_shape=4", xx, 2);
    expect_build_error(m, DTNN_ERR_ARG, "one-input form", "2 inputs");
    expect_add_error("mul", "const_shape=4x2", NULL, 0, DTNN_ERR_ARG, "C or CxHxW");
    expect_add_error("add", "const_shape=4 reverse=true", NULL, 0, DTNN_ERR_ARG, "reverse");
    expect_add_error("pad", "pad_top=-1", NULL, 0, DTNN_ERR_ARG, "pad_top");
}

static void check_pools(void)
{
    /* ceil mode, dilation and asymmetric padding up to kernel - 1, max pooling on the input
     * (one value moves at a time) and average pooling after a conv. */
    dtnn_model *m = model_new(3, 8, 7);
    layer(m, "maxpool", "kernel=3 stride=2 ceil_mode=1 dilation=2x1");
    layer(m, "conv2d", "filters=3 kernel=1");
    gradcheck(m, 2, "maxpool 3 s2 ceil dilation 2x1", KINK_EPS, KINK_TOL);

    m = model_new(3, 5, 6);
    layer(m, "maxpool", "kernel=3 stride=2 pads=2,0,1,2");
    layer(m, "conv2d", "filters=3 kernel=1");
    gradcheck(m, 2, "maxpool 3 s2 pads 2,0,1,2", KINK_EPS, KINK_TOL);

    m = model_new(3, 7, 6);
    layer(m, "conv2d", "filters=4 kernel=3 padding=1");
    layer(m, "avgpool", "kernel=3 stride=2 pads=2,1,0,2 ceil_mode=1");
    gradcheck(m, 3, "avgpool 3 s2 pads 2,1,0,2 ceil count_include_pad", SMOOTH_EPS, TOL);

    m = model_new(3, 7, 6);
    layer(m, "conv2d", "filters=4 kernel=3 padding=1");
    layer(m, "avgpool", "kernel=2x3 stride=2 pad_top=1 pad_right=2 ceil_mode=1 "
          "count_include_pad=0");
    gradcheck(m, 3, "avgpool 2x3 s2 top 1 right 2 ceil exclude pad", SMOOTH_EPS, TOL);

    /* A 3x3 map at batch 1: a weight perturbation moves a whole channel, and the maximum
     * must not change hands within eps. */
    m = model_new(3, 3, 3);
    layer(m, "conv2d", "filters=5 kernel=3 padding=1");
    layer(m, "global_maxpool", "");
    layer(m, "flatten", "");
    layer(m, "linear", "outputs=3");
    gradcheck(m, 1, "conv2d -> global_maxpool -> flatten -> linear, batch 1", KINK_EPS,
              KINK_TOL);

    m = model_new(4, 5, 6);
    layer(m, "global_maxpool", "");
    layer(m, "conv2d", "filters=3 kernel=1");
    gradcheck(m, 3, "global_maxpool on the input", KINK_EPS, KINK_TOL);
}

static void check_conv(void)
{
    /* Asymmetric padding (ONNX pads), on the im2col and the depthwise paths. */
    dtnn_model *m = model_new(3, 6, 7);
    layer(m, "conv2d", "filters=5 kernel=3 stride=2 pads=2,0,0,1");
    layer(m, "conv2d", "filters=5 kernel=3 groups=5 pad_top=0 pad_bottom=2 padding=1");
    gradcheck(m, 3, "conv2d pads 2,0,0,1 s2 -> depthwise bottom 2", SMOOTH_EPS, TOL);
}

static void check_values(void)
{
    /* Dilation 3 with padding 1 on a 2x2 input: the one window's taps (rows and columns -1
     * and 2) all miss the input, so the output is -inf and no gradient flows back. */
    dtnn_model *m = model_new(1, 2, 2);
    layer(m, "maxpool", "kernel=2 stride=1 padding=1 dilation=3");
    if (!build(m, 1)) {
        dtnn_model_free(m);
        return;
    }
    const float x2[4] = {1, 2, 3, 4};
    dtnn_error err;
    CHECK_OK(dtnn_model_forward(m, x2, 1, 1, &err), &err);
    int rows, cols;
    const float *y = tu_output(m, &rows, &cols);
    CHECK(rows == 1 && cols == 1 && isinf(y[0]) && y[0] < 0);
    tu_output_grad(m)[0] = 1.0f;
    CHECK_OK(dtnn_model_backward(m, &err), &err);
    const float zeros[4] = {0, 0, 0, 0};
    const float *dx = tu_input_grad(m);
    CHECK(dx != NULL);
    if (dx)
        test_compare("maxpool window with no tap inside: no gradient", dx, zeros, 4, 0, 0);
    dtnn_model_free(m);
}

/* stochastic depth's values: in training each sample is dropped (0) or kept and scaled by
 * 1 / (1 - p) whole, a draw per sample (mode=row: of 64 kept with probability 0.75, between 34
 * and 62, 4 standard deviations) or one for the batch (mode=batch); evaluation copies. The
 * draws are a fixed hash of (seed, layer, step, sample), so this passes or fails the same way
 * on every machine. */
static void check_stochastic_depth(void)
{
    enum { N = 64, D = 6 };
    for (int batch_mode = 0; batch_mode < 2; batch_mode++) {
        dtnn_model *m = model_new(1, 2, 3);
        layer(m, "stochastic_depth", batch_mode ? "p=0.25 mode=batch" : "p=0.25");
        if (!build(m, N)) {
            dtnn_model_free(m);
            return;
        }
        static float x[N * D];
        for (int i = 0; i < N * D; i++)
            x[i] = 0.5f + (float)(i % 7);
        dtnn_error err;
        CHECK_OK(dtnn_model_forward(m, x, N, 1, &err), &err);
        const float *y = tu_output(m, NULL, NULL);
        int kept = 0, whole = 1;
        for (int i = 0; i < N; i++) {
            const int keep = y[i * D] != 0.0f;
            kept += keep;
            for (int j = 0; j < D; j++)
                whole &= y[i * D + j] == (keep ? x[i * D + j] * (1.0f / 0.75f) : 0.0f);
        }
        CHECK(whole);
        CHECK(batch_mode ? kept == 0 || kept == N : kept >= 34 && kept <= 62);
        printf("stochastic_depth p=0.25 mode=%s: %d of %d samples kept\n",
               batch_mode ? "batch" : "row", kept, N);
        CHECK_OK(dtnn_model_forward(m, x, N, 0, &err), &err);
        test_compare("stochastic_depth in evaluation: the identity", tu_output(m, NULL, NULL), x,
                     N * D, 0, 0);
        dtnn_model_free(m);
    }
}

static void check_accumulates(void)
{
    check_accumulate("hardsigmoid", "", 3, 4, 3, TOL);
    check_accumulate("hardswish", "", 3, 4, 3, TOL);
    check_accumulate("gelu", "", 3, 4, 3, TOL);
    check_accumulate("gelu", "approximate=tanh", 3, 4, 3, TOL);
    check_accumulate("silu", "", 3, 4, 3, TOL);
    check_accumulate("clamp", "min=-0.5 max=0.5", 3, 4, 3, KINK_TOL);
    check_accumulate("hardtanh", "min=-2 max=2", 3, 4, 3, TOL);
    check_accumulate("global_maxpool", "", 3, 5, 4, KINK_TOL);
    check_accumulate("maxpool", "kernel=3 stride=2 ceil_mode=1 pads=0,1,2,0 dilation=2x1", 3,
                     6, 5, KINK_TOL);
}

static void check_errors(void)
{
    dtnn_model *m = model_new(4, 6, 6);
    int mix[2] = {DTNN_INPUT, layer(m, "conv2d", "filters=4 kernel=1 stride=2")};
    add_layer(m, "mul", "bad_mul", "", mix, 2);
    expect_build_error(m, DTNN_ERR_SHAPE, "4x6x6", "do not broadcast");

    m = model_new(4, 6, 6);
    int gp = layer(m, "global_avgpool", "");
    int three[3] = {DTNN_INPUT, gp, DTNN_INPUT};
    add_layer(m, "add", "bad_add3", "", three, 3);
    expect_build_error(m, DTNN_ERR_SHAPE, "more than 2", "4x1x1");

    m = model_new(4, 6, 6);
    layer(m, "maxpool", "kernel=3 pads=0,3,0,0");
    expect_build_error(m, DTNN_ERR_ARG, "left 3", "below the kernel 3x3");

    m = model_new(4, 6, 6);
    layer(m, "clamp", "min=2 max=1");
    expect_build_error(m, DTNN_ERR_ARG, "min=2", "max=1");

    expect_add_error("avgpool", "kernel=3 pads=1,1,1", NULL, 0, DTNN_ERR_ARG, "4 integers");
    expect_add_error("avgpool", "kernel=3 dilation=2", NULL, 0, DTNN_ERR_ARG,
                     "count_include_pad");
    expect_add_error("maxpool", "kernel=3 count_include_pad=0", NULL, 0, DTNN_ERR_ARG,
                     "dilation");
    expect_add_error("gelu", "approximate=sigmoid", NULL, 0, DTNN_ERR_ARG, "none (erf");
    expect_add_error("gelu", "slope=2", NULL, 0, DTNN_ERR_ARG, "(approximate)");
}

/* Division: its derivatives 1 / b and -a / b^2 stay of order 1 with divisors kept in (1, 2)
 * (1 + sigmoid) or at constants of 0.7 and more; two inputs with a per-channel divisor (its
 * gradient a sum over H x W), x by a constant, and a constant by x. */
static void check_division(void)
{
    dtnn_model *m = model_new(3, 4, 5);
    int c = layer(m, "conv2d", "filters=4 kernel=3 padding=1");
    layer(m, "global_avgpool", "");
    layer(m, "conv2d", "filters=4 kernel=1");
    layer(m, "sigmoid", "");
    int s = layer(m, "add", "const_shape=1 const_value=1");
    int cs[2] = {c, s};
    add_layer(m, "div", "per_channel", "", cs, 2);
    layer(m, "conv2d", "filters=3 kernel=1");
    gradcheck(m, 3, "div(conv, 1 + sigmoid(...)) per channel", SMOOTH_EPS, TOL);

    m = model_new(3, 4, 5);
    layer(m, "conv2d", "filters=4 kernel=3 padding=1");
    layer(m, "sigmoid", "");
    layer(m, "add", "const_shape=1 const_value=1");
    add_layer(m, "div", "rdiv", "const_shape=4x1x1 const_value=0.7 reverse=true", NULL, 0);
    add_layer(m, "div", "by_c", "const_shape=1 const_value=1.6", NULL, 0);
    layer(m, "conv2d", "filters=3 kernel=1");
    gradcheck(m, 3, "1 + sigmoid -> div(0.7, x) per channel -> div(x, 1.6)", SMOOTH_EPS, TOL);
    check_accumulate("div", "const_shape=3x1x1 const_value=1.3", 3, 4, 3, TOL);
}

/* Channel slices: a split of one conv's channels into three branches, each through its own
 * activation, concatenated in another order (the producer's gradient written by one slice
 * and added to by the others); a slice of the model input (its gradient written outside the
 * range as zeros); the accumulating form; the range checked. */
static void check_slices(void)
{
    dtnn_model *m = model_new(3, 4, 5);
    int c = layer(m, "conv2d", "filters=6 kernel=3 padding=1");
    int in_c[1] = {c};
    int a = add_layer(m, "slice", "first", "end=2", in_c, 1);
    int b = add_layer(m, "slice", "middle", "start=2 end=5", in_c, 1);
    int z = add_layer(m, "slice", "last", "start=5", in_c, 1);
    int ia[1] = {a}, ib[1] = {b}, iz[1] = {z};
    int ta = add_layer(m, "tanh", NULL, "", ia, 1);
    int sb = add_layer(m, "sigmoid", NULL, "", ib, 1);
    int gz = add_layer(m, "gelu", NULL, "", iz, 1);
    int cat[3] = {gz, ta, sb};
    add_layer(m, "concat", "cat", "", cat, 3);
    layer(m, "conv2d", "filters=3 kernel=1");
    gradcheck(m, 3, "conv -> split 2+3+1 -> tanh, sigmoid, gelu -> concat", SMOOTH_EPS, TOL);

    m = model_new(4, 3, 3);
    layer(m, "slice", "start=1 end=3");
    layer(m, "conv2d", "filters=2 kernel=1");
    gradcheck(m, 2, "slice of the input's channels 1 and 2 -> conv", SMOOTH_EPS, TOL);
    check_accumulate("slice", "start=1 end=2", 3, 4, 3, TOL);

    m = model_new(4, 6, 6);
    layer(m, "slice", "start=2 end=5");
    expect_build_error(m, DTNN_ERR_SHAPE, "[2, 5)", "4 channels");
    m = model_new(4, 6, 6);
    layer(m, "slice", "start=3 end=3");
    expect_build_error(m, DTNN_ERR_SHAPE, "start < end", "slice");
    expect_add_error("slice", "dim=0", NULL, 0, DTNN_ERR_ARG, "start, end");
}

/* Reductions: a CBAM-like spatial gate (the channel mean and sum concatenated, a conv and a
 * sigmoid scaling the map), sums over the planes feeding a linear layer, plane means of the
 * input, L2 norms over planes and channels (a norm is smooth away from 0, where random inputs
 * are not); the accumulating form; the options checked. */
static void check_reductions(void)
{
    dtnn_model *m = model_new(3, 5, 4);
    int f = layer(m, "conv2d", "filters=4 kernel=3 padding=1");
    int in_f[1] = {f};
    int a = add_layer(m, "reduce", "cmean", "axes=channels", in_f, 1);
    int b = add_layer(m, "reduce", "csum", "axes=channels op=sum", in_f, 1);
    int ab[2] = {a, b};
    add_layer(m, "concat", "pooled", "", ab, 2);
    layer(m, "conv2d", "filters=1 kernel=3 padding=1");
    int gate = layer(m, "sigmoid", "");
    int fg[2] = {f, gate};
    add_layer(m, "mul", "gated", "", fg, 2);
    layer(m, "reduce", "axes=spatial op=sum");
    layer(m, "flatten", "");
    layer(m, "linear", "outputs=3");
    gradcheck(m, 3, "conv -> channel mean, sum -> conv -> sigmoid gate -> plane sums -> linear",
              SMOOTH_EPS, TOL);
    m = model_new(3, 4, 2);
    layer(m, "reduce", "axes=spatial");
    layer(m, "linear", "outputs=2");
    gradcheck(m, 2, "plane means of the input -> linear", SMOOTH_EPS, TOL);
    check_accumulate("reduce", "axes=channels op=sum", 3, 4, 3, TOL);
    /* ConvNeXt-V2's global response normalisation: x * (|x|_plane / mean over channels of
     * those norms), from plane norms and a channel norm */
    m = model_new(3, 4, 5);
    f = layer(m, "conv2d", "filters=4 kernel=3 padding=1");
    int nf[1] = {f};
    int norms = add_layer(m, "reduce", "norms", "axes=spatial op=l2", nf, 1);
    int cn[1] = {f};
    int cnorm = add_layer(m, "reduce", "cnorm", "axes=channels op=l2", cn, 1);
    int xs[2] = {f, norms};
    int scaled = add_layer(m, "mul", "scaled", "", xs, 2);
    int sc[2] = {scaled, cnorm};
    add_layer(m, "mul", "both", "", sc, 2);
    layer(m, "reduce", "axes=spatial op=l2");
    layer(m, "flatten", "");
    layer(m, "linear", "outputs=2");
    gradcheck(m, 2, "conv -> plane and channel L2 norms scaling it -> plane norms -> linear",
              SMOOTH_EPS, TOL);
    check_accumulate("reduce", "axes=spatial op=l2", 3, 4, 3, TOL);
    /* A split attention (SKNet, ResNeSt with radix 2): two paths' channels side by side, their
     * sum across the 2 groups, a gate from its plane means, a softmax across the 2 groups of
     * the gate, the paths scaled by it and summed across the groups again */
    m = model_new(3, 4, 5);
    f = layer(m, "conv2d", "filters=6 kernel=3 padding=1");
    layer(m, "reduce", "axes=channels op=sum groups=2");
    layer(m, "global_avgpool", "");
    layer(m, "conv2d", "filters=6 kernel=1");
    int attn = layer(m, "softmax", "groups=2");
    int paths[2] = {f, attn};
    add_layer(m, "mul", "weighted", "", paths, 2);
    layer(m, "reduce", "axes=channels op=mean groups=2");
    layer(m, "softmax", "groups=3");
    gradcheck(m, 2, "split attention: group sum -> gate -> softmax across 2 groups -> weighted "
              "group mean -> softmax over channels", SMOOTH_EPS, TOL);
    check_accumulate("reduce", "axes=channels op=sum groups=3", 6, 4, 3, TOL);
    check_accumulate("softmax", "groups=2", 6, 4, 3, TOL);
    /* ECA (efficient channel attention): the plane means seen as one row of C values, a 1-D
     * convolution across the channels (a 3 x 1 kernel), a sigmoid, back to C x 1 x 1, gating
     * the conv's output */
    m = model_new(3, 4, 5);
    f = layer(m, "conv2d", "filters=6 kernel=3 padding=1");
    layer(m, "global_avgpool", "");
    layer(m, "reshape", "shape=1x6x1");
    layer(m, "conv2d", "filters=1 kernel=3x1 padding=1x0 bias=false");
    layer(m, "sigmoid", "");
    int eca = layer(m, "reshape", "shape=6x1x1");
    int gate_in[2] = {f, eca};
    add_layer(m, "mul", "eca", "", gate_in, 2);
    layer(m, "flatten", "");
    layer(m, "linear", "outputs=2");
    gradcheck(m, 2, "conv -> ECA: plane means as a row, 1-D conv across channels, gate -> linear",
              SMOOTH_EPS, TOL);
    check_accumulate("reshape", "shape=2x3x6", 3, 4, 3, TOL);
    m = model_new(3, 4, 4);
    layer(m, "reshape", "shape=5x5x1");
    expect_build_error(m, DTNN_ERR_SHAPE, "holds 25 values", "input 3x4x4 48");
    expect_add_error("reshape", "shape=3x4", NULL, 0, DTNN_ERR_ARG, "CxHxW");
    m = model_new(4, 6, 6);
    layer(m, "reduce", "op=sum");
    expect_build_error(m, DTNN_ERR_ARG, "reduce needs axes", "channels or spatial");
    expect_add_error("reduce", "axes=width", NULL, 0, DTNN_ERR_ARG, "channels or spatial");
}

/* Upsampling: nearest 2x into a conv, bilinear 3x2 both corner alignments on the input and
 * after a conv (the backward gathers in output order), an FPN-like top-down add; accumulate;
 * the options checked. */
static void check_upsampling(void)
{
    dtnn_model *m = model_new(2, 3, 4);
    layer(m, "upsample", "scale=2");
    layer(m, "conv2d", "filters=2 kernel=3 stride=2");
    gradcheck(m, 2, "nearest 2x of the input -> conv s2", SMOOTH_EPS, TOL);
    for (int align = 0; align < 2; align++) {
        m = model_new(2, 3, 4);
        layer(m, "conv2d", "filters=3 kernel=1");
        layer(m, "upsample", align ? "scale=3x2 mode=bilinear align_corners=true"
                                   : "scale=3x2 mode=bilinear");
        layer(m, "conv2d", "filters=2 kernel=3");
        gradcheck(m, 2, align ? "conv -> bilinear 3x2 aligned -> conv"
                              : "conv -> bilinear 3x2 -> conv", SMOOTH_EPS, TOL);
    }
    m = model_new(2, 8, 8);
    int fine = layer(m, "conv2d", "filters=3 kernel=3 padding=1");
    int coarse = layer(m, "conv2d", "filters=3 kernel=3 stride=2 padding=1");
    int in_c[1] = {coarse};
    int up = add_layer(m, "upsample", "top_down", "mode=bilinear", in_c, 1);
    int fu[2] = {fine, up};
    add_layer(m, "add", "merge", "", fu, 2);
    layer(m, "conv2d", "filters=2 kernel=3");
    gradcheck(m, 2, "feature pyramid: conv + bilinear 2x of a strided conv", SMOOTH_EPS, TOL);
    check_accumulate("upsample", "scale=2x3 mode=bilinear", 3, 4, 3, TOL);
    check_accumulate("upsample", "scale=2", 3, 4, 3, TOL);
    m = model_new(4, 6, 6);
    layer(m, "upsample", "align_corners=true");
    expect_build_error(m, DTNN_ERR_ARG, "align_corners", "bilinear");
    expect_add_error("upsample", "mode=bicubic", NULL, 0, DTNN_ERR_ARG, "nearest or bilinear");
    expect_add_error("upsample", "scale=0", NULL, 0, DTNN_ERR_ARG, "scale");
}

/* Layer normalisation: ConvNeXt's block shape (depthwise conv, LayerNorm2d, pointwise
 * expansion, GELU, projection, a residual add), LayerNorm of linear features without affine
 * parameters, of the input itself; accumulate; options. */
static void check_layernorm(void)
{
    dtnn_model *m = model_new(4, 5, 4);
    int in_c = layer(m, "conv2d", "filters=4 kernel=3 padding=1 groups=4");
    layer(m, "layernorm", "eps=1e-6");
    layer(m, "conv2d", "filters=8 kernel=1");
    layer(m, "gelu", "");
    int proj = layer(m, "conv2d", "filters=4 kernel=1");
    int res[2] = {in_c, proj};
    add_layer(m, "add", "residual", "", res, 2);
    layer(m, "conv2d", "filters=2 kernel=3");
    gradcheck(m, 3, "ConvNeXt block: dwconv -> layernorm -> 1x1 -> gelu -> 1x1 -> add",
              KINK_EPS, KINK_TOL);
    m = model_new(3, 2, 2);
    layer(m, "flatten", "");
    layer(m, "linear", "outputs=6");
    layer(m, "layernorm", "affine=false");
    layer(m, "linear", "outputs=3");
    gradcheck(m, 2, "linear -> layernorm of features (no affine) -> linear", KINK_EPS,
              KINK_TOL);
    check_accumulate("layernorm", "", 3, 4, 3, KINK_TOL);
    expect_add_error("layernorm", "eps=0", NULL, 0, DTNN_ERR_ARG, "eps");
    expect_add_error("layernorm", "axis=1", NULL, 0, DTNN_ERR_ARG, "channels or last");
    expect_add_error("layernorm", "epsilon=1", NULL, 0, DTNN_ERR_ARG, "eps, affine, axis");
}

/* Self-attention in layers (6 tokens of 8 features, 2 heads): layernorm, linear over the last
 * axis, the heads split by a permute, q k^T and its softmax times v by matmul, the heads
 * merged, a projection and the residual; each layer's accumulating form; the options. */
static void check_attention(void)
{
    dtnn_model *m = model_new(1, 6, 8);
    layer(m, "layernorm", "axis=last");
    layer(m, "linear", "axis=last outputs=24");
    int heads = layer(m, "permute", "dims=6x3x2x4 perm=1,2,0,3");
    int h1[1] = {heads};
    int q = add_layer(m, "slice", "q", "start=0 end=2", h1, 1);
    int k = add_layer(m, "slice", "k", "start=2 end=4", h1, 1);
    int v = add_layer(m, "slice", "v", "start=4 end=6", h1, 1);
    int k1[1] = {k};
    int kt = add_layer(m, "permute", "kt", "dims=2x6x4 perm=0,2,1", k1, 1);
    int qk[2] = {q, kt};
    add_layer(m, "matmul", "scores", "", qk, 2);
    int attn = layer(m, "softmax", "axis=last");
    int av[2] = {attn, v};
    add_layer(m, "matmul", "mixed", "", av, 2);
    layer(m, "permute", "dims=2x6x4 perm=1,0,2");
    layer(m, "reshape", "shape=1x6x8");
    layer(m, "linear", "axis=last outputs=5");
    gradcheck(m, 2, "attention: layernorm, qkv, heads, softmax(q k^T) v, merge, projection",
              SMOOTH_EPS, TOL);
    /* x @ x^T: both inputs of one matmul from one tensor */
    m = model_new(2, 3, 4);
    int x = layer(m, "conv2d", "filters=2 kernel=1");
    int x1[1] = {x};
    int xt = add_layer(m, "permute", "xt", "dims=2x3x4 perm=0,2,1", x1, 1);
    int xx[2] = {x, xt};
    add_layer(m, "matmul", "gram", "", xx, 2);
    layer(m, "linear", "axis=last outputs=2");
    gradcheck(m, 2, "conv -> x x^T -> linear over the last axis", SMOOTH_EPS, TOL);
    check_accumulate("permute", "dims=3x4x3 perm=2,0,1", 3, 4, 3, TOL);
    check_accumulate("softmax", "axis=last", 3, 4, 3, TOL);
    check_accumulate("layernorm", "axis=last", 3, 4, 3, KINK_TOL);
    check_accumulate("linear", "axis=last outputs=2", 3, 4, 3, TOL);
    m = model_new(1, 2, 3);
    layer(m, "permute", "dims=2x3 perm=0,0");
    expect_build_error(m, DTNN_ERR_ARG, "permute", "not a permutation");
    m = model_new(1, 2, 3);
    layer(m, "permute", "dims=2x4 perm=1,0");
    expect_build_error(m, DTNN_ERR_SHAPE, "permute", "hold 8 values");
    m = model_new(2, 3, 4);
    int a0 = layer(m, "conv2d", "filters=2 kernel=1");
    int aa[2] = {a0, a0};
    add_layer(m, "matmul", "bad", "", aa, 2);
    expect_build_error(m, DTNN_ERR_SHAPE, "matmul", "a's W (4) b's H (3)");
    expect_add_error("permute", "dims=2x3x0", NULL, 0, DTNN_ERR_ARG, "positive sizes");
    expect_add_error("softmax", "axis=first", NULL, 0, DTNN_ERR_ARG, "features or last");
}

void check_semantics(void)
{
    check_layernorm();
    check_attention();
    check_upsampling();
    check_reductions();
    check_slices();
    check_activations();
    check_broadcast();
    check_division();
    check_constants();
    check_pools();
    check_conv();
    check_accumulates();
    check_values();
    check_stochastic_depth();
    check_errors();
}
