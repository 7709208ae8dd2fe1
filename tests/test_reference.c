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
 * only in distribution, so the finite-difference tests cover it. The layer and loss cases are
 * here, the optimizer trajectories in reference_optim.c; reference.h has what they share.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"

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
void *ref_load(const st_file *f, const char *name, const char *dtype, size_t want,
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
int load_tensor(dtnn_model *m, const dtnn_tensor_info *t, const st_file *f, const char *name)
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
int next_token(const char **s, char *tok, size_t cap)
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
void copy_str(char *dst, size_t cap, const char *src)
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
int count_prefixed(const st_file *f, const char *prefix)
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

int main(void)
{
    /* One thread: results then do not depend on the machine's core count. */
    dtnn_set_threads(1);
    test_layers();
    test_optimizer_references();
    return test_finish("test_reference");
}
