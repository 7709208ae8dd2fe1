/*
 * reference_optim.c — the optimizer half of test_reference: lenet5 and resnet20 from the zoo,
 * loaded with PyTorch's initial state_dict and trained 5 steps on one fixed batch with each
 * optimizer of tests/ref/optim_*.safetensors (SGD also on the fast convolutions), against the
 * 5 losses and the final parameters and buffers of PyTorch's float64 run. The tolerances, from
 * the conditioning each file records, are explained below.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"

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

void test_optimizer_references(void)
{
    for (size_t i = 0; i < sizeof optim_files / sizeof optim_files[0]; i++)
        test_optimizers(optim_files[i][0], optim_files[i][1]);
}
