/*
 * test_reference.c — checks dtnn against PyTorch, using the files tools/gen_reference.py writes
 * into tests/ref/ (committed, so this test needs no PyTorch):
 *
 *   layers.safetensors   every layer case: forward output, input gradient, parameter gradients
 *                        and batch-norm running statistics against torch autograd, and the
 *                        losses (value and d loss / d logits) against torch.nn.functional.
 *   optim_*.safetensors  lenet5 and resnet20 from the zoo, loaded with PyTorch's initial
 *                        state_dict and trained 5 steps on one fixed batch with each optimizer:
 *                        the 5 losses and the final parameters and buffers.
 *
 * Each case's recipe (input shape, dtnn layer types and option strings, wiring) comes from the
 * file's metadata, so a new case needs only a new entry in the generator. The format of the
 * recipe, and why the optimizer references are float64 runs from searched seeds, is documented
 * at the top of tools/gen_reference.py. Dropout is not checked here: its masks match PyTorch's
 * only in distribution, so the finite-difference tests cover it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "testutil.h"

#define LAYERS_FILE "ref/layers.safetensors"

/*
 * Layer tolerances. Both sides compute in float32 but reduce in different orders (PyTorch's
 * convolution kernels vs dtnn's im2col + BLAS GEMM, different batch-norm variance passes). The
 * longest reductions here (conv weight gradients) add a few hundred products of magnitude ~1,
 * where the observed differences reach 1.5e-5 absolute on sums of ~0.1-10 and a few 1e-4
 * relative on values that cancel to near zero; everything else is within ~5e-7 absolute.
 * 1e-5 absolute plus 1e-4 relative covers that, while an indexing or formula error shows up as
 * an O(1) relative error.
 */
#define LAYER_ATOL 1e-5
#define LAYER_RTOL 1e-4
/* Losses: dtnn reduces in double, PyTorch in float32. The worst case is loss_ce_large (logits up
 * to ~200): 8e-6 absolute on a loss of ~120, 1e-8 absolute on the gradients. */
#define LOSS_ATOL 1e-5
#define LOSS_RTOL 1e-5

/* ---- reading reference tensors ------------------------------------------------------------- */

/* A copy of a reference tensor (copied because tensors in the data section are not necessarily
 * aligned for their type). Counts a failure and returns NULL when it is missing or mismatched;
 * want == 0 accepts any size. */
static void *ref_load(const st_file *f, const char *name, const char *dtype, size_t want,
                      size_t *count)
{
    const st_tensor *t = st_find(f, name);
    if (!t) {
        fprintf(stderr, "FAIL reference tensor '%s' is missing\n", name);
        test_failures++;
        return NULL;
    }
    size_t n = st_count(t);
    size_t elem = !strcmp(dtype, "I64") ? 8 : 4;
    if (strcmp(t->dtype, dtype) || (want && n != want) || t->bytes != n * elem) {
        fprintf(stderr, "FAIL reference tensor '%s' is %s with %zu values, expected %s with %zu\n",
                name, t->dtype, n, dtype, want);
        test_failures++;
        return NULL;
    }
    void *p = malloc(t->bytes ? t->bytes : 1);
    if (!p) {
        fprintf(stderr, "FAIL out of memory reading '%s'\n", name);
        test_failures++;
        return NULL;
    }
    memcpy(p, f->data + t->offset, t->bytes);
    if (count)
        *count = n;
    return p;
}

/* Copies the reference tensor `name` into model tensor t; 0 (with a message) if missing. */
static int load_tensor(dtnn_model *m, const dtnn_tensor_info *t, const st_file *f,
                       const char *name)
{
    const char *dtype = t->dtype == DTNN_I64 ? "I64" : "F32";
    void *v = ref_load(f, name, dtype, t->count, NULL);
    if (!v)
        return 0;
    if (t->kind == DTNN_TENSOR_PARAM)
        memcpy(tu_params(m) + t->offset, v, t->count * sizeof(float));
    else
        memcpy(tu_buffers(m) + t->offset, v, t->count * (t->dtype ? 8 : 4));
    free(v);
    return 1;
}

/* Reference name for a dtnn tensor of a case: "<case>[.<part>].<rest>" where rest is the dtnn
 * tensor name below the case name, e.g. ("conv_k1", "grad", "conv_k1.weight") ->
 * "conv_k1.grad.weight". */
static void ref_name(char *out, size_t cap, const char *prefix, const char *part,
                     const char *tensor)
{
    size_t len = strlen(prefix);
    const char *rest = tensor;
    if (!strncmp(tensor, prefix, len) && tensor[len] == '.')
        rest = tensor + len + 1;
    if (part)
        snprintf(out, cap, "%s.%s.%s", prefix, part, rest);
    else
        snprintf(out, cap, "%s.%s", prefix, rest);
}

/* Compares an int64 buffer exactly (batch-norm num_batches_tracked). */
static void compare_i64(const char *label, const int64_t *got, const int64_t *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i]) {
            fprintf(stderr, "FAIL %s[%zu]: got %lld, want %lld\n", label, i, (long long)got[i],
                    (long long)want[i]);
            test_failures++;
            return;
        }
    printf("%-48s n=%-8zu exact\n", label, n);
}

/* ---- case recipes -------------------------------------------------------------------------- */

#define RECIPE_MAX_LAYERS 16
#define RECIPE_MAX_INPUTS 8

typedef struct {
    char type[32];
    char name[32];              /* "" = the case name itself */
    char inputs[RECIPE_MAX_INPUTS][32];
    int n_inputs;
    char options[256];          /* everything else, verbatim for dtnn_model_add */
} recipe_layer;

typedef struct {
    int c, h, w;
    recipe_layer layers[RECIPE_MAX_LAYERS];
    int n_layers;
    int has_loss;
    char loss[32];
    float label_smoothing;
} recipe;

/* Copies the next whitespace-separated token of *s into tok; returns 0 at the end. */
static int next_token(const char **s, char *tok, size_t cap)
{
    const char *p = *s;
    while (*p == ' ' || *p == '\t')
        p++;
    if (!*p)
        return 0;
    size_t n = 0;
    while (*p && *p != ' ' && *p != '\t') {
        if (n + 1 < cap)
            tok[n++] = *p;
        p++;
    }
    tok[n] = '\0';
    *s = p;
    return 1;
}

/* Copies src into dst[cap], truncating (names here are short; a truncated one fails later). */
static void copy_str(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static void append_option(char *options, size_t cap, const char *tok)
{
    size_t len = strlen(options);
    snprintf(options + len, cap - len, "%s%s", len ? " " : "", tok);
}

/* Parses one segment ("input=...", "type=... key=value ...", or "loss=..."); returns 0 on an
 * unknown shape of segment. */
static int recipe_segment(recipe *r, const char *seg)
{
    char tok[256];
    const char *s = seg;
    recipe_layer *l = NULL;
    while (next_token(&s, tok, sizeof tok)) {
        if (!strncmp(tok, "input=", 6)) {
            if (sscanf(tok + 6, "%dx%dx%d", &r->c, &r->h, &r->w) != 3)
                return 0;
        } else if (!strncmp(tok, "loss=", 5)) {
            r->has_loss = 1;
            copy_str(r->loss, sizeof r->loss, tok + 5);
        } else if (!strncmp(tok, "label_smoothing=", 16)) {
            r->label_smoothing = strtof(tok + 16, NULL);
        } else if (!strncmp(tok, "type=", 5)) {
            if (r->n_layers == RECIPE_MAX_LAYERS)
                return 0;
            l = &r->layers[r->n_layers++];
            memset(l, 0, sizeof *l);
            copy_str(l->type, sizeof l->type, tok + 5);
        } else if (l && !strncmp(tok, "name=", 5)) {
            copy_str(l->name, sizeof l->name, tok + 5);
        } else if (l && !strncmp(tok, "inputs=", 7)) {
            const char *p = tok + 7;
            while (*p && l->n_inputs < RECIPE_MAX_INPUTS) {
                size_t n = strcspn(p, ",");
                snprintf(l->inputs[l->n_inputs++], sizeof l->inputs[0], "%.*s", (int)n, p);
                p += n + (p[n] == ',');
            }
        } else if (l) {
            append_option(l->options, sizeof l->options, tok);
        } else {
            return 0;
        }
    }
    return 1;
}

static int recipe_parse(const char *text, recipe *r)
{
    memset(r, 0, sizeof *r);
    char seg[512];
    const char *p = text;
    while (*p) {
        size_t n = strcspn(p, ";");
        if (n >= sizeof seg)
            return 0;
        memcpy(seg, p, n);
        seg[n] = '\0';
        if (!recipe_segment(r, seg))
            return 0;
        p += n + (p[n] == ';');
    }
    return r->c > 0 && r->h > 0 && r->w > 0 && r->n_layers > 0;
}

/* Builds the case's model: layer i is "<case>.<name>" or, without name=, "<case>". */
static dtnn_model *recipe_model(const recipe *r, const char *case_name, int batch)
{
    dtnn_error err;
    dtnn_model *m = dtnn_model_create(r->c, r->h, r->w);
    int ids[RECIPE_MAX_LAYERS];
    for (int i = 0; i < r->n_layers; i++) {
        const recipe_layer *l = &r->layers[i];
        char name[96];
        if (l->name[0])
            snprintf(name, sizeof name, "%s.%s", case_name, l->name);
        else
            snprintf(name, sizeof name, "%s", case_name);
        int in[RECIPE_MAX_INPUTS];
        for (int k = 0; k < l->n_inputs; k++) {
            in[k] = -99;
            if (!strcmp(l->inputs[k], "input"))
                in[k] = DTNN_INPUT;
            for (int j = 0; j < i; j++)
                if (!strcmp(l->inputs[k], r->layers[j].name))
                    in[k] = ids[j];
            if (in[k] == -99) {
                fprintf(stderr, "FAIL %s: layer %d names an unknown input '%s'\n", case_name, i,
                        l->inputs[k]);
                test_failures++;
                dtnn_model_free(m);
                return NULL;
            }
        }
        ids[i] = dtnn_model_add(m, l->type, name, l->options, l->n_inputs ? in : NULL,
                                l->n_inputs, &err);
        if (ids[i] < 0) {
            fprintf(stderr, "FAIL %s: dtnn_model_add(%s, \"%s\"): %s\n", case_name, l->type,
                    l->options, err.message);
            test_failures++;
            dtnn_model_free(m);
            return NULL;
        }
    }
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = batch;
    bp.training = 1;
    bp.input_grad = 1;
    bp.seed = 1;
    if (dtnn_model_build(m, &bp, &err) != DTNN_OK) {
        fprintf(stderr, "FAIL %s: build: %s\n", case_name, err.message);
        test_failures++;
        dtnn_model_free(m);
        return NULL;
    }
    return m;
}

/* Copies reference tensors into every model tensor: "<case>.<rest>" for parameters (required)
 * and buffers (optional: absent ones keep their default initialisation). */
static int load_case_tensors(dtnn_model *m, const st_file *f, const char *case_name)
{
    for (int i = 0; i < dtnn_model_tensor_count(m); i++) {
        const dtnn_tensor_info *t = dtnn_model_tensor(m, i);
        char name[256];
        ref_name(name, sizeof name, case_name, NULL, t->name);
        if (t->kind == DTNN_TENSOR_BUFFER && !st_find(f, name))
            continue;
        if (!load_tensor(m, t, f, name))
            return 0;
    }
    return 1;
}

/* Compares a model quantity with the reference tensor "<ref>", labelled "<ref>". */
static void compare_ref(const st_file *f, const char *ref, const float *got, size_t n,
                        double atol, double rtol)
{
    if (!got) {
        fprintf(stderr, "FAIL %s: dtnn gave no values to compare\n", ref);
        test_failures++;
        return;
    }
    float *want = ref_load(f, ref, "F32", n, NULL);
    if (want)
        test_compare(ref, got, want, n, atol, rtol);
    free(want);
}

/* Number of reference tensors whose name starts with prefix. */
static int count_prefixed(const st_file *f, const char *prefix)
{
    int n = 0;
    for (int i = 0; i < f->n_tensors; i++)
        n += !strncmp(f->tensors[i].name, prefix, strlen(prefix));
    return n;
}

/* ---- layer and loss cases ------------------------------------------------------------------ */

static void run_loss_case(dtnn_model *m, const st_file *f, const char *name, const recipe *r,
                          const float *x, int n)
{
    dtnn_error err;
    char ref[160];
    snprintf(ref, sizeof ref, "%s.labels", name);
    int64_t *labels64 = ref_load(f, ref, "I64", (size_t)n, NULL);
    if (!labels64)
        return;
    int32_t *labels = malloc(sizeof(int32_t) * n);
    for (int i = 0; i < n; i++)
        labels[i] = (int32_t)labels64[i];
    dtnn_loss_params lp;
    dtnn_loss_params_default(&lp);
    CHECK_OK(dtnn_loss_parse(r->loss, &lp.kind, &err), &err);
    lp.label_smoothing = r->label_smoothing;

    CHECK_OK(dtnn_model_forward(m, x, n, 1, &err), &err);
    dtnn_metrics met;
    memset(&met, 0, sizeof met);
    /* grad_scale 1/n: PyTorch's reduction='mean' over the batch (BCE and MSE also average over
     * the classes, which dtnn's per-sample loss already does). */
    CHECK_OK(dtnn_model_loss(m, labels, n, &lp, 1.0f / (float)n, &met, &err), &err);
    float loss = (float)(met.loss_sum / n);
    snprintf(ref, sizeof ref, "%s.loss", name);
    compare_ref(f, ref, &loss, 1, LOSS_ATOL, LOSS_RTOL);
    int rows, k;
    tu_output(m, &rows, &k);
    snprintf(ref, sizeof ref, "%s.dx", name);
    compare_ref(f, ref, tu_output_grad(m), (size_t)n * k, LOSS_ATOL, LOSS_RTOL);
    /* Through the flatten layer, d loss / d input is the same gradient. */
    dtnn_model_zero_grad(m);
    CHECK_OK(dtnn_model_backward(m, &err), &err);
    char label[160];
    snprintf(label, sizeof label, "%s.dx (input_grad)", name);
    float *want = ref_load(f, ref, "F32", (size_t)n * k, NULL);
    if (want && tu_input_grad(m))
        test_compare(label, tu_input_grad(m), want, (size_t)n * k, LOSS_ATOL, LOSS_RTOL);
    free(want);
    free(labels);
    free(labels64);
}

static void run_layer_case(const st_file *f, const char *name)
{
    dtnn_error err;
    recipe r;
    const char *text = st_meta(f, name);
    if (!text || !recipe_parse(text, &r)) {
        fprintf(stderr, "FAIL %s: missing or malformed recipe '%s'\n", name, text ? text : "");
        test_failures++;
        return;
    }
    char ref[256];
    snprintf(ref, sizeof ref, "%s.x", name);
    const st_tensor *tx = st_find(f, ref);
    if (!tx || tx->ndim < 1) {
        fprintf(stderr, "FAIL %s: no input tensor\n", name);
        test_failures++;
        return;
    }
    int n = (int)tx->dims[0];
    size_t in_count = (size_t)n * r.c * r.h * r.w;
    float *x = ref_load(f, ref, "F32", in_count, NULL);
    if (!x)
        return;
    dtnn_model *m = recipe_model(&r, name, n);
    if (!m) {
        free(x);
        return;
    }
    if (!load_case_tensors(m, f, name))
        goto done;
    if (r.has_loss) {
        run_loss_case(m, f, name, &r, x, n);
        goto done;
    }

    CHECK_OK(dtnn_model_forward(m, x, n, 1, &err), &err);
    int rows, out;
    const float *y = tu_output(m, &rows, &out);
    size_t out_count = (size_t)n * out;
    snprintf(ref, sizeof ref, "%s.y", name);
    compare_ref(f, ref, y, out_count, LAYER_ATOL, LAYER_RTOL);

    /* Buffers after the training forward: running statistics, num_batches_tracked. */
    for (int i = 0; i < dtnn_model_tensor_count(m); i++) {
        const dtnn_tensor_info *t = dtnn_model_tensor(m, i);
        if (t->kind != DTNN_TENSOR_BUFFER)
            continue;
        ref_name(ref, sizeof ref, name, "out", t->name);
        const unsigned char *got = tu_buffers(m) + t->offset;
        if (t->dtype == DTNN_I64) {
            int64_t *want = ref_load(f, ref, "I64", t->count, NULL);
            if (want)
                compare_i64(ref, (const int64_t *)got, want, t->count);
            free(want);
        } else {
            compare_ref(f, ref, (const float *)got, t->count, LAYER_ATOL, LAYER_RTOL);
        }
    }

    snprintf(ref, sizeof ref, "%s.dy", name);
    float *dy = ref_load(f, ref, "F32", out_count, NULL);
    if (!dy)
        goto done;
    memcpy(tu_output_grad(m), dy, sizeof(float) * out_count);
    free(dy);
    dtnn_model_zero_grad(m);
    CHECK_OK(dtnn_model_backward(m, &err), &err);
    snprintf(ref, sizeof ref, "%s.dx", name);
    compare_ref(f, ref, tu_input_grad(m), in_count, LAYER_ATOL, LAYER_RTOL);
    int params = 0;
    for (int i = 0; i < dtnn_model_tensor_count(m); i++) {
        const dtnn_tensor_info *t = dtnn_model_tensor(m, i);
        if (t->kind != DTNN_TENSOR_PARAM)
            continue;
        ref_name(ref, sizeof ref, name, "grad", t->name);
        compare_ref(f, ref, tu_grads(m) + t->offset, t->count, LAYER_ATOL, LAYER_RTOL);
        params++;
    }
    /* And the other way round: PyTorch has no parameter that dtnn lacks. */
    snprintf(ref, sizeof ref, "%s.grad.", name);
    if (count_prefixed(f, ref) != params) {
        fprintf(stderr, "FAIL %s: PyTorch has %d parameters, dtnn %d\n", name,
                count_prefixed(f, ref), params);
        test_failures++;
    }
done:
    dtnn_model_free(m);
    free(x);
}

static void test_layers(void)
{
    dtnn_error err;
    st_file f;
    if (st_read(LAYERS_FILE, &f, &err) != DTNN_OK) {
        fprintf(stderr, "FAIL %s: %s (regenerate with /usr/bin/python3 tools/gen_reference.py)\n",
                LAYERS_FILE, err.message);
        test_failures++;
        return;
    }
    const char *cases = st_meta(&f, "cases");
    CHECK(cases != NULL);
    char name[64];
    int count = 0;
    while (cases && next_token(&cases, name, sizeof name)) {
        run_layer_case(&f, name);
        count++;
    }
    printf("%d layer and loss cases from %s\n\n", count, LAYERS_FILE);
    st_free(&f);
}

/* ---- optimizers on the zoo models ---------------------------------------------------------- */

/*
 * Optimizer tolerances, from a first-order rounding argument rather than from any machine's
 * results. tools/gen_reference.py makes each 5-step trajectory well conditioned by
 * construction: every ReLU input and max-pool gap of its float64 run stays >= 3e-6 from its
 * kink (a seed search), so no float32 run takes another branch, and the adaptive optimizers
 * run with eps = 1e-4, so each update moves by at most lr / eps = 10 times its gradient's
 * error (with the default 1e-8, 1e5 times: a gradient within rounding noise of zero then sets
 * its weight's direction, and no rounding analysis bounds the result). Under those conditions
 * the deviation of any float32 run from the float64 reference is, to first order, a fixed
 * linear map of its rounding errors: Delta = sum_k J_k e_k, each |e_k| <= u = 2^-24 relative to
 * its own operation. Two float32 implementations differ only in the errors e_k they commit:
 * which (the order and blocking of their sums) and how many. The generator records one of them,
 * PyTorch's float32 run on the same trajectory (max and mean abs over the final state, max
 * relative over the losses): the trajectory's conditioning times u, a property of the problem
 * and of the file, not of the CPU this test runs on.
 *
 * dtnn is allowed FACTOR times that figure. The error constant of a K-term sum is ~sqrt(K) u
 * whether it is summed in order, pairwise or in register blocks (rounding errors of random
 * sign; Higham and Mary, SIAM J. Sci. Comput. 2019), but the worst case differs by up to
 * sqrt(K_longest / K_block) between blockings; the longest sums here (a weight gradient over
 * batch x output pixels, a fully connected layer's 400 inputs) are a few hundred terms against
 * GEMM blocks of at least 16, a factor of at most ~4 in error constant; a further 2.5 covers
 * that a maximum over 10^5 values of one sum of random errors exceeds another's typical
 * maximum by up to a few standard deviations. FACTOR = 10. Winograd F(4x4, 3x3) (the fast
 * convolutions, SGD only) multiplies each convolution's error by its transforms' condition,
 * ~10 for F(4x4) against direct summation (Barabasz et al., ACM TOMS 2020): FACTOR_WINOGRAD =
 * 100. Each limit has a floor: 1e-6 relative (16 float32 ulps) for the float32 rounding of the
 * stored reference itself, which the recorded figures do not contain.
 *
 * Three checks per trajectory: the max |got - want| over the state (any wrong index or element),
 * the mean |got - want| (an error that moves every value a little, such as a missing weight
 * decay, whose 5 steps shift every weight by ~5e-5 relative, far above the rounding's mean),
 * and the 5 losses relative to the reference's.
 */
#define FACTOR 10.0
#define FACTOR_WINOGRAD 100.0
#define REF_FLOOR_RTOL 1e-6

static const char *const optim_files[][2] = {
    {"ref/optim_lenet5.safetensors", "lenet5"},
    {"ref/optim_resnet20.safetensors", "resnet20"},
    /* NAdam (PyTorch 2's), LARS (the MLPerf rule), LAMB (timm's), SGD with clip_grad_norm_ and
     * norm layers and biases kept from decay */
    {"ref/optim_torch2_lenet5.safetensors", "lenet5"},
    {"ref/optim_torch2_resnet20.safetensors", "resnet20"},
};

typedef struct {
    char kind[16];
    float lr;
    dtnn_opt_params p;
} optim_config;

static int optim_config_parse(const char *text, optim_config *c)
{
    char tok[64];
    memset(c, 0, sizeof *c);
    const char *s = text;
    /* kind= comes first: the defaults depend on it. */
    if (!next_token(&s, tok, sizeof tok) || strncmp(tok, "kind=", 5))
        return 0;
    copy_str(c->kind, sizeof c->kind, tok + 5);
    dtnn_opt_kind kind;
    dtnn_error err;
    if (dtnn_opt_parse(c->kind, &kind, &err) != DTNN_OK) {
        fprintf(stderr, "FAIL optimizer '%s': %s\n", c->kind, err.message);
        test_failures++;
        return 0;
    }
    dtnn_opt_params_default(&c->p, kind);
    while (next_token(&s, tok, sizeof tok)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return 0;
        *eq = '\0';
        if (!strcmp(tok, "no_decay")) {
            if (dtnn_opt_parse_groups(eq + 1, &c->p.no_decay, &err) != DTNN_OK)
                return 0;
            continue;
        }
        float v = strtof(eq + 1, NULL);
        if (!strcmp(tok, "lr"))
            c->lr = v;
        else if (!strcmp(tok, "momentum"))
            c->p.momentum = v;
        else if (!strcmp(tok, "nesterov"))
            c->p.nesterov = (int)v;
        else if (!strcmp(tok, "weight_decay"))
            c->p.weight_decay = v;
        else if (!strcmp(tok, "eps"))
            c->p.eps = v;
        else if (!strcmp(tok, "momentum_decay"))
            c->p.momentum_decay = v;
        else if (!strcmp(tok, "trust_coefficient"))
            c->p.trust_coefficient = v;
        else if (!strcmp(tok, "clip_grad_norm"))
            c->p.clip_grad_norm = v;
        else
            return 0;
    }
    return c->lr > 0.0f;
}

/* Copies every model tensor from "<prefix>.<name>"; also checks that the file holds no
 * "<prefix>." tensor the model lacks, so the two state_dicts have the same keys. */
static int load_state(dtnn_model *m, const st_file *f, const char *prefix)
{
    int loaded = 0;
    for (int i = 0; i < dtnn_model_tensor_count(m); i++) {
        const dtnn_tensor_info *t = dtnn_model_tensor(m, i);
        char name[256];
        snprintf(name, sizeof name, "%s.%s", prefix, t->name);
        if (!load_tensor(m, t, f, name))
            return 0;
        loaded++;
    }
    char dotted[64];
    snprintf(dotted, sizeof dotted, "%s.", prefix);
    int in_file = count_prefixed(f, dotted);
    if (in_file != loaded) {
        fprintf(stderr, "FAIL %s: the file has %d '%s.' tensors, the model %d\n", prefix,
                in_file, prefix, loaded);
        test_failures++;
        return 0;
    }
    return 1;
}

/* How far PyTorch's own float32 run ends from the float64 reference (the file's metadata, see
 * tools/gen_reference.py): the trajectory's conditioning times float32's rounding. */
typedef struct {
    double max_abs, mean_abs, loss_rel;
} conditioning;

static int read_conditioning(const st_file *f, const char *opt_name, conditioning *c)
{
    const char *keys[] = {"float32_deviation", "float32_mean_deviation", "float32_loss_deviation"};
    double *fields[] = {&c->max_abs, &c->mean_abs, &c->loss_rel};
    for (int i = 0; i < 3; i++) {
        char key[96];
        snprintf(key, sizeof key, "%s.%s", keys[i], opt_name);
        const char *text = st_meta(f, key);
        char *end = NULL;
        *fields[i] = text ? strtod(text, &end) : -1.0;
        if (!text || end == text || *end || !(*fields[i] >= 0.0)) {
            fprintf(stderr, "FAIL %s: missing or malformed '%s' (regenerate with "
                    "/usr/bin/python3 tools/gen_reference.py)\n", opt_name, key);
            test_failures++;
            return 0;
        }
    }
    return 1;
}

/* Compares the model's state with "<prefix>.<name>" (all float tensors together, as one line)
 * by the max and mean checks above; int64 buffers must match exactly. With REF_VERBOSE set in
 * the environment, also prints every tensor's errors. */
static void compare_state(dtnn_model *m, const st_file *f, const char *prefix,
                          const char *label, const conditioning *cond, double factor)
{
    size_t total = 0;
    for (int i = 0; i < dtnn_model_tensor_count(m); i++) {
        const dtnn_tensor_info *t = dtnn_model_tensor(m, i);
        total += t->dtype == DTNN_F32 ? t->count : 0;
    }
    float *got = malloc(sizeof(float) * total), *want = malloc(sizeof(float) * total);
    size_t at = 0;
    int complete = 1, verbose = getenv("REF_VERBOSE") != NULL;
    const double max_atol = factor * cond->max_abs;
    for (int i = 0; i < dtnn_model_tensor_count(m); i++) {
        const dtnn_tensor_info *t = dtnn_model_tensor(m, i);
        char name[256];
        snprintf(name, sizeof name, "%s.%s", prefix, t->name);
        if (t->dtype == DTNN_I64) {
            int64_t *w = ref_load(f, name, "I64", t->count, NULL);
            if (w)
                for (size_t j = 0; j < t->count; j++)
                    if (((const int64_t *)(tu_buffers(m) + t->offset))[j] != w[j]) {
                        fprintf(stderr, "FAIL %s differs\n", name);
                        test_failures++;
                    }
            free(w);
            continue;
        }
        float *w = ref_load(f, name, "F32", t->count, NULL);
        if (!w) {
            complete = 0;
            continue;
        }
        const float *g = t->kind == DTNN_TENSOR_PARAM
                             ? tu_params(m) + t->offset
                             : (const float *)(tu_buffers(m) + t->offset);
        memcpy(got + at, g, sizeof(float) * t->count);
        memcpy(want + at, w, sizeof(float) * t->count);
        if (verbose) {
            char sub[300];
            snprintf(sub, sizeof sub, "  %s", name);
            test_compare(sub, got + at, want + at, t->count, max_atol, REF_FLOOR_RTOL);
        }
        at += t->count;
        free(w);
    }
    if (complete && total) {
        test_compare(label, got, want, total, max_atol, REF_FLOOR_RTOL);
        double sum_diff = 0.0, sum_want = 0.0;
        for (size_t j = 0; j < total; j++) {
            sum_diff += fabs((double)got[j] - want[j]);
            sum_want += fabs((double)want[j]);
        }
        double mean = sum_diff / (double)total;
        double limit = factor * cond->mean_abs + REF_FLOOR_RTOL * sum_want / (double)total;
        int ok = mean <= limit;
        printf("%-48s mean abs %.3g  (limit %.3g: %g x PyTorch float32's %.3g)%s\n", label,
               mean, limit, factor, cond->mean_abs, ok ? "" : "  FAIL");
        if (!ok) {
            fprintf(stderr, "FAIL %s: mean deviation %.3g beyond %.3g\n", label, mean, limit);
            test_failures++;
        }
    }
    free(got);
    free(want);
}

static void run_optimizer(const char *zoo, const st_file *f, const char *opt_name,
                          const float *x, const int32_t *labels, int n, int c, int h, int w,
                          int steps, dtnn_conv_algo conv_algo)
{
    dtnn_error err;
    char key[64];
    snprintf(key, sizeof key, "opt.%s", opt_name);
    optim_config cfg;
    const char *text = st_meta(f, key);
    if (!text || !optim_config_parse(text, &cfg)) {
        fprintf(stderr, "FAIL %s: missing or malformed '%s' = '%s'\n", zoo, key,
                text ? text : "");
        test_failures++;
        return;
    }
    conditioning cond;
    if (!read_conditioning(f, opt_name, &cond))
        return;
    const double factor = conv_algo == DTNN_CONV_AUTO ? FACTOR_WINOGRAD : FACTOR;
    dtnn_model *m = dtnn_zoo_create(zoo, 0, c, h, w, &err);
    if (!m) {
        fprintf(stderr, "FAIL zoo %s: %s\n", zoo, err.message);
        test_failures++;
        return;
    }
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = n;
    bp.training = 1;
    bp.seed = 1;
    bp.conv_algo = conv_algo;
    dtnn_optimizer *opt = NULL;
    float *losses = calloc((size_t)steps, sizeof(float));
    if (dtnn_model_build(m, &bp, &err) != DTNN_OK) {
        fprintf(stderr, "FAIL %s build: %s\n", zoo, err.message);
        test_failures++;
        goto done;
    }
    if (!load_state(m, f, "init"))
        goto done;
    opt = dtnn_optimizer_create(m, &cfg.p, &err);
    if (!opt) {
        fprintf(stderr, "FAIL %s %s: %s\n", zoo, opt_name, err.message);
        test_failures++;
        goto done;
    }
    dtnn_loss_params lp;
    dtnn_loss_params_default(&lp);
    for (int s = 0; s < steps; s++) {
        dtnn_metrics met;
        memset(&met, 0, sizeof met);
        dtnn_model_zero_grad(m);
        CHECK_OK(dtnn_model_forward(m, x, n, 1, &err), &err);
        CHECK_OK(dtnn_model_loss(m, labels, n, &lp, 1.0f / (float)n, &met, &err), &err);
        losses[s] = (float)(met.loss_sum / n);
        CHECK_OK(dtnn_model_backward(m, &err), &err);
        CHECK_OK(dtnn_optimizer_step(opt, cfg.lr, &err), &err);
    }
    char label[128];
    snprintf(key, sizeof key, "%s.losses", opt_name);
    const char *path = conv_algo == DTNN_CONV_AUTO ? " (fast convolutions)" : "";
    snprintf(label, sizeof label, "%s %s%s: %d losses", zoo, opt_name, path, steps);
    float *want = ref_load(f, key, "F32", (size_t)steps, NULL);
    if (want)
        test_compare(label, losses, want, (size_t)steps, 0.0,
                     factor * cond.loss_rel + REF_FLOOR_RTOL);
    free(want);
    snprintf(label, sizeof label, "%s %s%s: state after %d steps", zoo, opt_name, path, steps);
    compare_state(m, f, opt_name, label, &cond, factor);
done:
    free(losses);
    dtnn_optimizer_free(opt);
    dtnn_model_free(m);
}

static void test_optimizers(const char *path, const char *zoo)
{
    dtnn_error err;
    st_file f;
    if (st_read(path, &f, &err) != DTNN_OK) {
        fprintf(stderr, "FAIL %s: %s (regenerate with /usr/bin/python3 tools/gen_reference.py)\n",
                path, err.message);
        test_failures++;
        return;
    }
    const char *opts = st_meta(&f, "optimizers"), *steps_text = st_meta(&f, "steps");
    const st_tensor *tx = st_find(&f, "x");
    CHECK(opts && steps_text && tx && tx->ndim == 4);
    if (!opts || !steps_text || !tx || tx->ndim != 4) {
        st_free(&f);
        return;
    }
    int n = (int)tx->dims[0], steps = atoi(steps_text);
    float *x = ref_load(&f, "x", "F32", 0, NULL);
    int64_t *labels64 = ref_load(&f, "labels", "I64", (size_t)n, NULL);
    int32_t *labels = malloc(sizeof(int32_t) * n);
    if (x && labels64) {
        for (int i = 0; i < n; i++)
            labels[i] = (int32_t)labels64[i];
        char name[32];
        while (next_token(&opts, name, sizeof name)) {
            run_optimizer(zoo, &f, name, x, labels, n, (int)tx->dims[1], (int)tx->dims[2],
                          (int)tx->dims[3], steps, DTNN_CONV_IM2COL);
            if (!strcmp(name, "sgd"))
                run_optimizer(zoo, &f, name, x, labels, n, (int)tx->dims[1],
                              (int)tx->dims[2], (int)tx->dims[3], steps, DTNN_CONV_AUTO);
        }
    }
    printf("\n");
    free(x);
    free(labels64);
    free(labels);
    st_free(&f);
}

int main(void)
{
    /* One thread: results then do not depend on the machine's core count. */
    dtnn_set_threads(1);
    test_layers();
    for (size_t i = 0; i < sizeof optim_files / sizeof optim_files[0]; i++)
        test_optimizers(optim_files[i][0], optim_files[i][1]);
    return test_finish("test_reference");
}
