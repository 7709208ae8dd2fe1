/*
 * test_zoo.c — the zoo's architectures: parameter counts the issue states (they pin the exact
 * layer sizes), PyTorch tensor names, output shapes, and that unknown names are refused.
 */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static void check_model(const char *name, size_t want_params, const char *const *names,
                        int c, int h, int w)
{
    dtnn_error err;
    dtnn_model *m = dtnn_zoo_create(name, 0, c, h, w, &err);
    CHECK(m != NULL);
    if (!m) {
        fprintf(stderr, "%s: %s\n", name, err.message);
        return;
    }
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    bp.max_batch = 2;
    CHECK_OK(dtnn_model_build(m, &bp, &err), &err);
    printf("%-10s %zu parameters (want %zu)\n", name, dtnn_model_param_count(m), want_params);
    CHECK(dtnn_model_param_count(m) == want_params);
    for (int i = 0; names[i]; i++) {
        if (!dtnn_model_tensor_by_name(m, names[i])) {
            fprintf(stderr, "FAIL %s: no tensor '%s'\n", name, names[i]);
            test_failures++;
        }
    }
    int n, classes, ic, ih, iw;
    dtnn_model_input_shape(m, &ic, &ih, &iw);
    float *x = calloc((size_t)2 * ic * ih * iw, sizeof(float));
    CHECK_OK(dtnn_model_forward(m, x, 2, 0, &err), &err);
    dtnn_model_output(m, &n, &classes);
    CHECK(n == 2 && classes == (strcmp(name, "vgg16-64") ? 10 : 200));
    free(x);
    dtnn_model_free(m);
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

int main(void)
{
    check_memory_plan();
    const char *lenet[] = {"conv1.weight", "conv1.bias", "conv2.weight", "fc1.weight",
                           "fc2.bias", "fc3.weight", "fc3.bias", NULL};
    check_model("lenet5", 61706, lenet, 0, 0, 0);
    const char *cifar[] = {"conv1.weight", "conv4.bias", "fc1.weight", "fc2.bias", NULL};
    check_model("cifarcnn", 2168362, cifar, 0, 0, 0);
    const char *resnet[] = {"conv1.weight", "bn1.weight", "bn1.running_mean",
                            "bn1.num_batches_tracked", "layer1.0.conv1.weight",
                            "layer2.0.bn1.running_var", "layer3.2.conv2.weight",
                            "layer3.2.bn2.bias", "fc.weight", "fc.bias", NULL};
    check_model("resnet20", 269722, resnet, 0, 0, 0);
    const char *vgg[] = {"features.0.weight", "features.28.bias", "classifier.0.weight",
                         "classifier.4.bias", NULL};
    check_model("vgg16-64", 16129032, vgg, 0, 0, 0);
    const char *mlp[] = {"fc1.weight", "fc2.weight", "fc3.bias", NULL};
    check_model("mlp", 784 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10, mlp, 0, 0, 0);
    check_model("mlp", 3072 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10, mlp, 3, 32, 32);

    dtnn_error err;
    CHECK(dtnn_zoo_create("lenet6", 10, 0, 0, 0, &err) == NULL);
    CHECK(strstr(err.message, "lenet6") != NULL);
    /* conv1.weight of resnet20 has no bias: PyTorch's bias=False. */
    dtnn_model *m = dtnn_zoo_create("resnet20", 10, 0, 0, 0, &err);
    dtnn_build_params bp;
    dtnn_build_params_default(&bp);
    CHECK_OK(dtnn_model_build(m, &bp, &err), &err);
    CHECK(dtnn_model_tensor_by_name(m, "conv1.bias") == NULL);
    const dtnn_tensor_info *t = dtnn_model_tensor_by_name(m, "layer2.0.conv1.weight");
    CHECK(t && t->ndim == 4 && t->dims[0] == 32 && t->dims[1] == 16 && t->dims[2] == 3);
    dtnn_model_free(m);
    return test_finish("test_zoo");
}
