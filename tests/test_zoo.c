/*
 * test_zoo.c — every zoo model against its PyTorch twin (torchvision 0.14's own model for the
 * ImageNet ones), from tests/ref/zoo.safetensors (tools/gen_zoo_reference.py): the parameter
 * count, every state_dict key with its shape (so checkpoints load both ways), and the eval-mode
 * output on weights and input both sides compute from one formula (described in the
 * generator). Also: the memory plan, --classes / input adaptation, and refusals.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "testutil.h"

#define ZOO_FILE "ref/zoo.safetensors"

/* Output tolerance, relative to the largest |output| of the model: float32 sums in another
 * order (oneDNN vs BLAS GEMM blocking) through up to 110 layers. Measured (OpenBLAS 0.3.21,
 * PyTorch 1.13): at most 2.4e-6 of the largest output (vgg16-64), so 2e-5 leaves 8x. */
#define ZOO_RTOL 2e-5

static uint32_t fnv1a32(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* The generator's u(name, i): an exact float32 in [0, 1). */
static float formula_u(uint32_t seed, size_t i)
{
    uint32_t h = (uint32_t)i * 0x9E3779B1u + seed;
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    return (float)(h >> 8) / 16777216.0f;
}

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* Fills one tensor by the generator's rules (see tools/gen_zoo_reference.py), made on the host
 * and written into the model (on any backend). */
static void fill_tensor(dtnn_model *m, const dtnn_tensor_info *t)
{
    dtnn_error err;
    if (t->dtype == DTNN_I64) {     /* num_batches_tracked */
        int64_t *z = calloc(t->count + 1, sizeof *z);
        CHECK_OK(dtnn_model_tensor_write(m, t, z, &err), &err);
        free(z);
        return;
    }
    float *v = malloc(sizeof(float) * (t->count + 1));
    char bn_mean[160];
    const char *dot = strrchr(t->name, '.');
    snprintf(bn_mean, sizeof bn_mean, "%.*s.running_mean", (int)(dot - t->name), t->name);
    const int is_bn = dtnn_model_tensor_by_name(m, bn_mean) != NULL;
    const uint32_t seed = fnv1a32(t->name);
    float scale = 0.0f;
    if (t->ndim >= 2) {
        double fan_in = 1;
        for (int d = 1; d < t->ndim; d++)
            fan_in *= (double)t->dims[d];
        scale = (float)sqrt(6.0 / fan_in);
    }
    for (size_t i = 0; i < t->count; i++) {
        float u = formula_u(seed, i);
        if (t->ndim >= 2)
            v[i] = (2.0f * u - 1.0f) * scale;
        else if (has_suffix(t->name, ".running_var"))
            v[i] = 0.5f + u;
        else if (is_bn && has_suffix(t->name, ".weight"))
            v[i] = 0.5f + 0.5f * u;
        else
            v[i] = (2.0f * u - 1.0f) * 0.1f;
    }
    CHECK_OK(dtnn_model_tensor_write(m, t, v, &err), &err);
    free(v);
}

/* "name:d0xd1;name:;..." against the model's tensor table: same names, same shapes, no more. */
static void check_keys(const char *model, dtnn_model *m, const char *keys)
{
    int listed = 0;
    while (*keys) {
        const char *end = strchr(keys, ';');
        size_t len = end ? (size_t)(end - keys) : strlen(keys);
        char entry[256];
        snprintf(entry, sizeof entry, "%.*s", (int)len, keys);
        keys += len + (end != NULL);
        char *colon = strrchr(entry, ':');
        if (!colon)
            continue;
        *colon = '\0';
        listed++;
        const dtnn_tensor_info *t = dtnn_model_tensor_by_name(m, entry);
        if (!t) {
            fprintf(stderr, "FAIL %s: torchvision has '%s', dtnn does not\n", model, entry);
            test_failures++;
            continue;
        }
        char shape[64] = "";
        for (int d = 0; d < t->ndim; d++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld",
                     d ? "x" : "", (long long)t->dims[d]);
        if (strcmp(shape, colon + 1)) {
            fprintf(stderr, "FAIL %s: '%s' is %s in dtnn, %s in PyTorch\n", model, entry,
                    shape, colon + 1);
            test_failures++;
        }
    }
    if (listed != dtnn_model_tensor_count(m)) {
        fprintf(stderr, "FAIL %s: dtnn has %d tensors, PyTorch's state_dict %d\n", model,
                dtnn_model_tensor_count(m), listed);
        test_failures++;
    }
}

static void check_model(const st_file *f, const char *name)
{
    char key[96];
    int c = 0, h = 0, w = 0;
    snprintf(key, sizeof key, "%s.input", name);
    const char *input = st_meta(f, key);
    snprintf(key, sizeof key, "%s.params", name);
    const char *params = st_meta(f, key);
    snprintf(key, sizeof key, "%s.keys", name);
    const char *keys = st_meta(f, key);
    snprintf(key, sizeof key, "%s.y", name);
    const st_tensor *ty = st_find(f, key);
    CHECK(input && params && keys && ty && ty->ndim == 2 && ty->dims[0] == 2 &&
          !strcmp(ty->dtype, "F32"));
    if (!input || !params || !keys || !ty || sscanf(input, "%dx%dx%d", &c, &h, &w) != 3)
        return;
    const int classes = (int)ty->dims[1];

    dtnn_error err;
    dtnn_model *m = dtnn_zoo_create(name, classes, c, h, w, &err);
    CHECK(m != NULL);
    if (!m) {
        fprintf(stderr, "%s: %s\n", name, err.message);
        return;
    }
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = 2;
    bp.training = 0;
    bp.device = tu_device();
    CHECK_OK(dtnn_model_build(m, &bp, &err), &err);
    const size_t want_params = strtoull(params, NULL, 10);
    printf("%-14s %zu parameters (PyTorch %zu), %d tensors, input %s\n", name,
           dtnn_model_param_count(m), want_params, dtnn_model_tensor_count(m), input);
    CHECK(dtnn_model_param_count(m) == want_params);
    check_keys(name, m, keys);

    for (int i = 0; i < dtnn_model_tensor_count(m); i++)
        fill_tensor(m, dtnn_model_tensor(m, i));
    const size_t in_count = (size_t)2 * c * h * w;
    float *x = malloc(sizeof(float) * in_count);
    const uint32_t seed = fnv1a32("input");
    for (size_t i = 0; i < in_count; i++)
        x[i] = 2.0f * formula_u(seed, i) - 1.0f;
    CHECK_OK(dtnn_model_forward(m, x, 2, 0, &err), &err);
    int n, out_classes;
    dtnn_model_output_shape(m, &n, &out_classes);
    CHECK(n == 2 && out_classes == classes);
    float *y = malloc(sizeof(float) * (size_t)n * out_classes);
    dtnn_model_read_output(m, y);
    const float *want = (const float *)(f->data + ty->offset);
    double largest = 0;
    for (int i = 0; i < 2 * classes; i++)
        largest = fmax(largest, fabs(want[i]));
    char label[96];
    snprintf(label, sizeof label, "%.60s eval output", name);
    if (n == 2 && out_classes == classes)
        test_compare(label, y, want, (size_t)2 * classes, ZOO_RTOL * largest, 0);
    free(x);
    free(y);
    dtnn_model_free(m);
}

/* Every zoo model has its reference, and every reference a zoo model. */
static void check_all_models(void)
{
    st_file f;
    dtnn_error err;
    if (st_read(ZOO_FILE, &f, &err) != DTNN_OK) {
        fprintf(stderr, "FAIL %s: %s (regenerate with /usr/bin/python3 "
                "tools/gen_zoo_reference.py)\n", ZOO_FILE, err.message);
        test_failures++;
        return;
    }
    const char *list = st_meta(&f, "models");
    CHECK(list != NULL);
    int listed = 0;
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, " ");
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)len, p);
        check_model(&f, name);
        listed++;
        p += len + (p[len] == ' ');
    }
    const char *zoo_name;
    int zoo_count = 0;
    while ((zoo_name = dtnn_zoo_name(zoo_count, NULL)) != NULL) {
        char padded[80];
        snprintf(padded, sizeof padded, " %s ", zoo_name);
        char haystack[2048];
        snprintf(haystack, sizeof haystack, " %s ", list ? list : "");
        if (!strstr(haystack, padded)) {
            fprintf(stderr, "FAIL zoo model '%s' has no reference in %s\n", zoo_name, ZOO_FILE);
            test_failures++;
        }
        zoo_count++;
    }
    CHECK(listed == zoo_count);
    st_free(&f);
}

/* The memory check: the planned figure adds up, and a limit below it is refused before any
 * allocation with required vs available. */
static void check_memory_plan(void)
{
    dtnn_error err = {0};
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = 32;
    bp.optimizer_slots = 2;
    dtnn_model *m = dtnn_model_from_spec("lenet5", 10, 0, 0, 0, &err);
    CHECK(m && dtnn_model_build(m, &bp, &err) == DTNN_OK);
    dtnn_memory mem;
    dtnn_model_memory(m, &mem);
    CHECK(mem.params >= 61706 * sizeof(float) && mem.grads == mem.params &&
          mem.optimizer == 2 * mem.params && mem.activations > 0);
    CHECK(mem.total == mem.params + mem.grads + mem.optimizer + mem.buffers + mem.activations +
                           mem.workspace);
    size_t need = mem.total;
    dtnn_model_free(m);
    bp.memory_limit = need - 1;
    m = dtnn_model_from_spec("lenet5", 10, 0, 0, 0, &err);
    CHECK(m && dtnn_model_build(m, &bp, &err) == DTNN_ERR_NOMEM);
    CHECK(strstr(err.message, "at batch 32") && strstr(err.message, "the memory limit given"));
    dtnn_model_free(m);
    CHECK(dtnn_memory_available() > 0);
}

/* --classes and the input size adapt a model where its architecture allows, and an input it
 * cannot take is refused naming the layer. */
static void check_adaptation(void)
{
    dtnn_error err;
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = 1;
    bp.training = 0;
    /* ResNet-50 on 1x32x32 with 10 classes: the stem takes any channel count, the global pool
     * any size. */
    dtnn_model *m = dtnn_zoo_create("resnet50", 10, 1, 32, 32, &err);
    CHECK(m && dtnn_model_build(m, &bp, &err) == DTNN_OK);
    const dtnn_tensor_info *t = m ? dtnn_model_tensor_by_name(m, "fc.weight") : NULL;
    CHECK(t && t->dims[0] == 10 && t->dims[1] == 2048);
    t = m ? dtnn_model_tensor_by_name(m, "conv1.weight") : NULL;
    CHECK(t && t->dims[1] == 1);
    dtnn_model_free(m);
    /* VGG-16 at 32x32: 1x1 features, which the adaptive pool spreads to 7x7 as torchvision's. */
    m = dtnn_zoo_create("vgg16", 100, 3, 32, 32, &err);
    CHECK(m && dtnn_model_build(m, &bp, &err) == DTNN_OK);
    t = m ? dtnn_model_tensor_by_name(m, "classifier.0.weight") : NULL;
    CHECK(t && t->dims[1] == 25088);
    dtnn_model_free(m);
    /* AlexNet cannot take 3x32x32: its third max pool has nothing left to pool. */
    m = dtnn_zoo_create("alexnet", 10, 3, 32, 32, &err);
    CHECK(m != NULL);
    CHECK(m && dtnn_model_build(m, &bp, &err) != DTNN_OK);
    CHECK(m && strstr(err.message, "features.12") != NULL);
    if (m)
        printf("alexnet on 3x32x32 refused: %s\n", err.message);
    dtnn_model_free(m);
}

int main(void)
{
    check_memory_plan();
    check_all_models();
    check_adaptation();

    dtnn_error err;
    CHECK(dtnn_zoo_create("lenet6", 10, 0, 0, 0, &err) == NULL);
    CHECK(strstr(err.message, "lenet6") != NULL);
    return test_finish("test_zoo");
}
