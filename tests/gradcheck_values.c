/*
 * gradcheck_values.c — forward values against hand-computed expectations, part of
 * test_gradcheck: shortcut_a's placement (and its input gradient's), max pooling's ties and
 * NaNs, dropout's masks and scaling (the keep rule, replay by step, eval and p = 0 identities),
 * batch norm's statistics (training, running statistics, eval, the state_dict layout), and
 * small cases of softmax, add and concat. The finite-difference checks cannot catch a wrong
 * forward whose backward is its true derivative; these values can.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "gradcheck.h"

static void check_shortcut_values(void)
{
    /* x[c, h, w] = 100 c + 10 h + w on 2x3x3; filters 5: pad (5 - 2) / 2 = 1 channel in front,
     * 2 behind; y[1 + c, p, q] = x[c, 2p, 2q], output 2x2 (ceil(3 / 2)). */
    dtnn_model *m = model_new(2, 3, 3);
    layer(m, "shortcut_a", "filters=5");
    if (!build(m, 2)) {
        dtnn_model_free(m);
        return;
    }
    float x[2 * 18], want[2 * 20];
    for (int s = 0; s < 2; s++)
        for (int c = 0; c < 2; c++)
            for (int h = 0; h < 3; h++)
                for (int w = 0; w < 3; w++)
                    x[s * 18 + c * 9 + h * 3 + w] = (float)(1000 * s + 100 * c + 10 * h + w);
    memset(want, 0, sizeof want);
    for (int s = 0; s < 2; s++)
        for (int c = 0; c < 2; c++)
            for (int p = 0; p < 2; p++)
                for (int q = 0; q < 2; q++)
                    want[s * 20 + (1 + c) * 4 + p * 2 + q] = x[s * 18 + c * 9 + 2 * p * 3 + 2 * q];
    dtnn_error err;
    CHECK_OK(dtnn_model_forward(m, x, 2, 0, &err), &err);
    int n, f;
    const float *y = tu_output(m, &n, &f);
    CHECK(n == 2 && f == 20);
    test_compare("shortcut_a 2x3x3 -> 5x2x2 placement", y, want, 20 * 2, 0, 0);

    /* Backward: dy = 1 everywhere lands on x[:, :, ::2, ::2] and nowhere else. */
    CHECK_OK(dtnn_model_forward(m, x, 2, 1, &err), &err);
    float *dy = tu_output_grad(m);
    for (int i = 0; i < 40; i++)
        dy[i] = 1.0f;
    CHECK_OK(dtnn_model_backward(m, &err), &err);
    float dwant[36];
    for (int i = 0; i < 36; i++) {
        int h = (i % 9) / 3, w = i % 3;
        dwant[i] = (h % 2 == 0 && w % 2 == 0) ? 1.0f : 0.0f;
    }
    const float *dx = tu_input_grad(m);
    CHECK(dx != NULL);
    if (dx)
        test_compare("shortcut_a input gradient placement", dx, dwant, 36, 0, 0);
    dtnn_model_free(m);

    /* PyTorch's F.pad(x[:, :, ::2, ::2], (0,0,0,0, K/4, K/4)) for K = 2C = 8: channels 2..5. */
    m = model_new(4, 2, 2);
    layer(m, "shortcut_a", "filters=8");
    if (build(m, 1)) {
        float x1[16], w1[16];
        for (int i = 0; i < 16; i++)
            x1[i] = (float)(i + 1);
        memset(w1, 0, sizeof w1);
        for (int c = 0; c < 4; c++)
            w1[2 + c] = x1[c * 4];   /* output 8x1x1 */
        CHECK_OK(dtnn_model_forward(m, x1, 1, 0, &err), &err);
        test_compare("shortcut_a K=2C pads K/4 each side", tu_output(m, NULL, NULL), w1,
                     8, 0, 0);
    }
    dtnn_model_free(m);

    /* Odd K - C = 3 with stride 1: one channel in front, two behind; offset=0 puts it first. */
    const char *opts[2] = {"filters=4 stride=1", "filters=4 stride=1 offset=0"};
    const int at[2] = {1, 0};
    for (int t = 0; t < 2; t++) {
        m = model_new(1, 1, 2);
        layer(m, "shortcut_a", opts[t]);
        if (build(m, 1)) {
            float x1[2] = {3.0f, -4.0f}, w1[8] = {0};
            w1[at[t] * 2] = 3.0f;
            w1[at[t] * 2 + 1] = -4.0f;
            CHECK_OK(dtnn_model_forward(m, x1, 1, 0, &err), &err);
            test_compare(t ? "shortcut_a offset=0" : "shortcut_a odd pad (1 front, 2 back)",
                         tu_output(m, NULL, NULL), w1, 8, 0, 0);
        }
        dtnn_model_free(m);
    }
}

/* Max pooling's choice, as PyTorch: the first maximum of a window wins ties, a NaN wins and
 * the first NaN stays; backward routes the gradient to exactly those. 2x2 / 2 without
 * padding runs the row-at-a-time path (backend/cpu/pool.c). */
static void check_maxpool_values(void)
{
    dtnn_model *m = model_new(1, 2, 6);
    layer(m, "maxpool", "kernel=2");
    if (!build(m, 1)) {
        dtnn_model_free(m);
        return;
    }
    const float nan = NAN;
    float x[12] = {1, 3, 3, 0, nan, 2,
                   2, 3, nan, 5, 1, nan};
    dtnn_error err;
    CHECK_OK(dtnn_model_forward(m, x, 1, 1, &err), &err);
    const float *y = tu_output(m, NULL, NULL);
    CHECK(y[0] == 3.0f && isnan(y[1]) && isnan(y[2]));
    float *dy = tu_output_grad(m);
    for (int i = 0; i < 3; i++)
        dy[i] = (float)(i + 1);
    CHECK_OK(dtnn_model_backward(m, &err), &err);
    const float *dx = tu_input_grad(m);
    /* window 0: 3 first at (0, 1); window 1: the NaN at (1, 2); window 2: the NaN at (0, 4) */
    const float want[12] = {0, 1, 0, 0, 3, 0,
                            0, 0, 2, 0, 0, 0};
    CHECK(dx != NULL);
    if (dx)
        test_compare("maxpool 2x2: first maximum, first NaN", dx, want, 12, 0, 0);
    dtnn_model_free(m);
}

/* The same choice with padding and stride (ResNet's 3x3 / 2, pad 1; and pads 2,0,1,2 with
 * dilation 2x1): the windows inside the image run row by row (backend/cpu/pool.c), those that
 * reach into the padding one at a time (stride 2: 4 or 8 outputs of a row at once, the last
 * vector overlapping). Values from {0, 1, 2} make ties in most windows; NaNs sit inside and
 * on the border. Against a naive reference: a window's taps in row-major order, the first
 * maximum kept, the first NaN kept. */
static void check_maxpool_padded_choice(const char *opts, int H, int W, int kh, int kw, int s,
                                        const int pads[4], int dh, int dw)
{
    enum { MAXV = 9 * 40 };
    dtnn_model *m = model_new(1, H, W);
    layer(m, "maxpool", opts);
    if (!build(m, 1)) {
        dtnn_model_free(m);
        return;
    }
    float x[MAXV];
    for (int i = 0; i < H * W; i++)
        x[i] = (float)((i * 7 + i / W) % 3);
    x[0] = NAN;                      /* a corner: border windows */
    x[(H / 2) * W + W / 2] = NAN;    /* the middle: interior windows */
    dtnn_error err;
    CHECK_OK(dtnn_model_forward(m, x, 1, 1, &err), &err);
    /* pads: top, left, bottom, right (ONNX's order) */
    const int pt = pads[0], pl = pads[1];
    const int P = (H + pt + pads[2] - dh * (kh - 1) - 1) / s + 1;
    const int Q = (W + pl + pads[3] - dw * (kw - 1) - 1) / s + 1;
    int outs = 0;
    const float *y = tu_output(m, NULL, &outs);
    CHECK(outs == P * Q);
    float want_dx[MAXV] = {0};
    int bad = 0;
    for (int p = 0; p < P; p++)
        for (int q = 0; q < Q; q++) {
            float best = 0.0f;
            int at = -1;
            for (int i = 0; i < kh; i++)
                for (int j = 0; j < kw; j++) {
                    const int h = p * s - pt + i * dh, w = q * s - pl + j * dw;
                    if (h < 0 || h >= H || w < 0 || w >= W)
                        continue;
                    const float v = x[h * W + w];
                    if (at < 0 || (v > best && best == best) || (v != v && best == best))
                        best = v, at = h * W + w;
                }
            const float got = y[p * Q + q];
            bad += !(got == best || (got != got && best != best));
            if (at >= 0)
                want_dx[at] += (float)(p * Q + q + 1);
        }
    char label[96];
    snprintf(label, sizeof label, "maxpool %s: first maximum, first NaN", opts);
    printf("%-60s %s\n", label, bad ? "FAIL" : "ok");
    test_failures += bad != 0;
    float *dy = tu_output_grad(m);
    for (int i = 0; i < P * Q; i++)
        dy[i] = (float)(i + 1);
    CHECK_OK(dtnn_model_backward(m, &err), &err);
    const float *dx = tu_input_grad(m);
    CHECK(dx != NULL);
    if (dx)
        test_compare(label, dx, want_dx, (size_t)H * W, 0, 0);
    dtnn_model_free(m);
}

static void check_dropout_values(void)
{
    enum { N = 8, F = 4 * 5 * 5 };
    const float p = 0.3f;
    dtnn_model *m = model_new(4, 5, 5);
    layer(m, "dropout", "p=0.3");
    if (!build(m, N)) {
        dtnn_model_free(m);
        return;
    }
    float *x = malloc(sizeof(float) * N * F), *y1 = malloc(sizeof(float) * N * F);
    test_fill(x, (size_t)N * F, 5);
    dtnn_error err;
    int n, f;

    CHECK_OK(dtnn_model_forward(m, x, N, 0, &err), &err);
    test_compare("dropout eval is the identity", tu_output(m, &n, &f), x, N * F, 0, 0);

    CHECK_OK(dtnn_model_forward(m, x, N, 1, &err), &err);
    const float *y = tu_output(m, &n, &f);
    memcpy(y1, y, sizeof(float) * N * F);
    int kept = 0, bad_scale = 0;
    const float scale = 1.0f / (1.0f - p);
    for (int i = 0; i < N * F; i++) {
        if (y[i] != 0.0f) {
            kept++;
            bad_scale += y[i] != x[i] * scale;
        }
    }
    /* 800 Bernoulli(0.7) draws: sd = sqrt(800 * 0.21) = 13, so +-65 is 5 sd. */
    printf("dropout p=0.3: kept %d of %d (expected %.0f +- 65)\n", kept, N * F,
           (1.0 - p) * N * F);
    CHECK(fabs(kept - (1.0 - p) * N * F) < 65.0);
    CHECK(bad_scale == 0);

    /* The keep rule, exactly: hash(seed, layer index, step * E + i) >= p, E = max_batch
     * values, so masks are pinned for checkpoints and other backends. */
    int bad_rule = 0;
    for (int i = 0; i < N * F; i++)
        bad_rule += (y1[i] != 0.0f) != (dtnn__hash_uniform(SEED, 0, (uint64_t)i) >= p);
    CHECK(bad_rule == 0);

    /* The same step replays the same mask. */
    CHECK_OK(dtnn_model_forward(m, x, N, 1, &err), &err);
    CHECK(memcmp(y1, tu_output(m, NULL, NULL), sizeof(float) * N * F) == 0);

    /* A smaller batch at the same step sees the first samples' mask. */
    CHECK_OK(dtnn_model_forward(m, x, 3, 1, &err), &err);
    CHECK(memcmp(y1, tu_output(m, NULL, NULL), sizeof(float) * 3 * F) == 0);

    /* Backward: dx = dy * mask / (1 - p). */
    CHECK_OK(dtnn_model_forward(m, x, N, 1, &err), &err);
    float *dy = tu_output_grad(m);
    for (int i = 0; i < N * F; i++)
        dy[i] = 1.0f;
    CHECK_OK(dtnn_model_backward(m, &err), &err);
    const float *dx = tu_input_grad(m);
    int bad_grad = 0;
    for (int i = 0; i < N * F; i++)
        bad_grad += dx[i] != (y1[i] != 0.0f ? scale : 0.0f);
    CHECK(bad_grad == 0);
    CHECK(dtnn_model_step(m) == 1);

    /* The next step draws a different mask; going back to step 0 restores the first. */
    CHECK_OK(dtnn_model_forward(m, x, N, 1, &err), &err);
    y = tu_output(m, NULL, NULL);
    int differ = 0;
    for (int i = 0; i < N * F; i++)
        differ += (y[i] == 0.0f) != (y1[i] == 0.0f);
    printf("dropout: %d of %d mask entries differ between step 0 and 1\n", differ, N * F);
    CHECK(differ > N * F / 10);
    bad_rule = 0;
    for (int i = 0; i < N * F; i++)
        bad_rule += (y[i] != 0.0f) != (dtnn__hash_uniform(SEED, 0, (uint64_t)(N * F + i)) >= p);
    CHECK(bad_rule == 0);
    dtnn_model_set_step(m, 0);
    CHECK_OK(dtnn_model_forward(m, x, N, 1, &err), &err);
    CHECK(memcmp(y1, tu_output(m, NULL, NULL), sizeof(float) * N * F) == 0);
    dtnn_model_free(m);

    /* p = 0 is the identity in training too. */
    m = model_new(4, 5, 5);
    layer(m, "dropout", "p=0");
    if (build(m, N)) {
        CHECK_OK(dtnn_model_forward(m, x, N, 1, &err), &err);
        test_compare("dropout p=0 training is the identity", tu_output(m, NULL, NULL), x,
                     N * F, 0, 0);
    }
    dtnn_model_free(m);
    free(x);
    free(y1);
}

static void check_batchnorm_values(void)
{
    enum { N = 4, C = 3, HW = 6 };
    dtnn_model *m = model_new(C, 2, 3);
    add_layer(m, "batchnorm", "bn", "", NULL, 0);
    if (!build(m, N)) {
        dtnn_model_free(m);
        return;
    }
    /* The state_dict layout, in PyTorch's order. */
    const char *names[5] = {"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var",
                            "bn.num_batches_tracked"};
    CHECK(dtnn_model_tensor_count(m) == 5);
    for (int i = 0; i < 5 && i < dtnn_model_tensor_count(m); i++)
        CHECK(!strcmp(dtnn_model_tensor(m, i)->name, names[i]));
    const dtnn_tensor_info *tw = dtnn_model_tensor_by_name(m, "bn.weight");
    const dtnn_tensor_info *tb = dtnn_model_tensor_by_name(m, "bn.bias");
    const dtnn_tensor_info *tm = dtnn_model_tensor_by_name(m, "bn.running_mean");
    const dtnn_tensor_info *tv = dtnn_model_tensor_by_name(m, "bn.running_var");
    const dtnn_tensor_info *tn = dtnn_model_tensor_by_name(m, "bn.num_batches_tracked");
    if (!tw || !tb || !tm || !tv || !tn) {
        CHECK(0);
        dtnn_model_free(m);
        return;
    }
    CHECK(tn->ndim == 0 && tn->dtype == DTNN_I64 && tn->count == 1 &&
          tn->kind == DTNN_TENSOR_BUFFER);
    CHECK(tw->kind == DTNN_TENSOR_PARAM && tw->ndim == 1 && tw->dims[0] == C);
    CHECK(tm->kind == DTNN_TENSOR_BUFFER && tm->dtype == DTNN_F32 && tm->dims[0] == C);
    float *w = tu_params(m) + tw->offset, *b = tu_params(m) + tb->offset;
    float *rm = (float *)(tu_buffers(m) + tm->offset);
    float *rv = (float *)(tu_buffers(m) + tv->offset);
    int64_t *tracked = (int64_t *)(tu_buffers(m) + tn->offset);
    for (int c = 0; c < C; c++) {
        CHECK(w[c] == 1.0f && b[c] == 0.0f && rm[c] == 0.0f && rv[c] == 1.0f);
    }
    CHECK(*tracked == 0);

    float x[N * C * HW], want[N * C * HW];
    test_fill(x, N * C * HW, 3);
    for (int i = 0; i < N * C * HW; i++)
        x[i] = 2.0f * x[i] + (float)((i / HW) % C);     /* channel c has mean ~c */
    dtnn_error err;

    /* Training: per-channel batch statistics, biased variance; running stats with momentum 0.1
     * and the unbiased variance; the counter increments. */
    CHECK_OK(dtnn_model_forward(m, x, N, 1, &err), &err);
    double mean[C], var[C];
    for (int c = 0; c < C; c++) {
        double s = 0, sq = 0;
        for (int i = 0; i < N; i++)
            for (int j = 0; j < HW; j++)
                s += x[(i * C + c) * HW + j];
        mean[c] = s / (N * HW);
        for (int i = 0; i < N; i++)
            for (int j = 0; j < HW; j++) {
                double d = x[(i * C + c) * HW + j] - mean[c];
                sq += d * d;
            }
        var[c] = sq / (N * HW);
        for (int i = 0; i < N; i++)
            for (int j = 0; j < HW; j++)
                want[(i * C + c) * HW + j] =
                    (float)((x[(i * C + c) * HW + j] - mean[c]) / sqrt(var[c] + 1e-5));
    }
    test_compare("batchnorm train normalises per channel", tu_output(m, NULL, NULL),
                 want, N * C * HW, 1e-5, 1e-5);
    float wm[C], wv[C];
    for (int c = 0; c < C; c++) {
        wm[c] = (float)(0.1 * mean[c]);
        wv[c] = (float)(0.9 + 0.1 * var[c] * (N * HW) / (N * HW - 1));
    }
    test_compare("batchnorm running_mean after 1 step", rm, wm, C, 1e-6, 1e-5);
    test_compare("batchnorm running_var (unbiased) after 1 step", rv, wv, C, 1e-6, 1e-5);
    CHECK(*tracked == 1);
    CHECK_OK(dtnn_model_forward(m, x, N, 1, &err), &err);
    CHECK(*tracked == 2);

    /* Eval: the running statistics, weight and bias set by hand; the counter stays. */
    const float gm[C] = {0.5f, -1.0f, 2.0f}, gv[C] = {0.25f, 4.0f, 1.5f};
    const float gw[C] = {2.0f, 0.5f, -1.0f}, gb[C] = {0.1f, 0.0f, -0.3f};
    for (int c = 0; c < C; c++) {
        rm[c] = gm[c];
        rv[c] = gv[c];
        w[c] = gw[c];
        b[c] = gb[c];
    }
    CHECK_OK(dtnn_model_forward(m, x, 3, 0, &err), &err);
    for (int i = 0; i < 3; i++)
        for (int c = 0; c < C; c++)
            for (int j = 0; j < HW; j++) {
                int k = (i * C + c) * HW + j;
                want[k] = (float)((x[k] - gm[c]) / sqrt(gv[c] + 1e-5) * gw[c] + gb[c]);
            }
    test_compare("batchnorm eval uses running stats", tu_output(m, NULL, NULL), want,
                 3 * C * HW, 1e-5, 1e-5);
    CHECK(*tracked == 2);
    CHECK(rm[0] == gm[0] && rv[2] == gv[2]);
    dtnn_model_free(m);
}

static void check_small_values(void)
{
    dtnn_error err;
    /* softmax of (0, ln 2, ln 3) = (1, 2, 3) / 6 */
    dtnn_model *m = model_new(3, 1, 1);
    layer(m, "softmax", "");
    if (build(m, 1)) {
        float x[3] = {0.0f, logf(2.0f), logf(3.0f)};
        float want[3] = {1.0f / 6, 2.0f / 6, 3.0f / 6};
        CHECK_OK(dtnn_model_forward(m, x, 1, 0, &err), &err);
        test_compare("softmax (0, ln2, ln3)", tu_output(m, NULL, NULL), want, 3, 1e-7,
                     1e-6);
    }
    dtnn_model_free(m);

    /* add(x, x, x) = 3x; concat(x, 2x) puts x's channels first. */
    m = model_new(2, 1, 2);
    int in3[3] = {DTNN_INPUT, DTNN_INPUT, DTNN_INPUT};
    int s = add_layer(m, "add", "sum3", "", in3, 3);
    int cat[2] = {DTNN_INPUT, s};
    add_layer(m, "concat", "cat", "", cat, 2);
    if (build(m, 2)) {
        float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        float want[16] = {1, 2, 3, 4, 3, 6, 9, 12, 5, 6, 7, 8, 15, 18, 21, 24};
        CHECK_OK(dtnn_model_forward(m, x, 2, 0, &err), &err);
        test_compare("concat(x, add(x, x, x))", tu_output(m, NULL, NULL), want, 16, 0,
                     0);
    }
    dtnn_model_free(m);
}

void check_forward_values(void)
{
    check_shortcut_values();
    check_maxpool_values();
    check_maxpool_padded_choice("kernel=3 stride=2 padding=1", 13, 15, 3, 3, 2,
                                (const int[4]){1, 1, 1, 1}, 1, 1);
    check_maxpool_padded_choice("kernel=3 stride=2 pads=2,0,1,2 dilation=2x1", 12, 13, 3, 3, 2,
                                (const int[4]){2, 0, 1, 2}, 2, 1);
    /* rows of 18 and 19 outputs: vectors of 8 lanes, the last overlapping */
    check_maxpool_padded_choice("kernel=2", 6, 36, 2, 2, 2, (const int[4]){0, 0, 0, 0}, 1, 1);
    check_maxpool_padded_choice("kernel=3 stride=2 padding=1", 9, 38, 3, 3, 2,
                                (const int[4]){1, 1, 1, 1}, 1, 1);
    check_dropout_values();
    check_batchnorm_values();
    check_small_values();
}
